"""A lake shared by the account that writes it and readers who may not (`pielake.lake.access`): a command that
writes the lake is refused before Spark starts, naming the folder and its owner; one that reads it keeps Spark's
log in a folder of the reader's own. Each check runs in a process of an account that may read the lake but not
write it: the tests' own account with the lake made read-only, or, where the tests run as root (whom no mode bits
stop), the account `nobody` as the real account, which is what access(2), and so pielake, asks of. The effective
account stays root's, so that the child still loads the modules of Python's own library a command imports late,
which may lie in root's home (a pyenv Python), out of nobody's reach."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pielake.cli import main
from pielake.exitcodes import EXIT_USAGE
from pielake.lake.access import log_folder

NOBODY = 65534
QUERY = "FROM Line PARTITION BY m\nDEFINE A AS v > 5, B AS v > 2\nPATTERN A during B\nWITHIN 20 s\n"


@pytest.fixture
def shared_lake() -> Iterator[Path]:
    """A lake of one table folder, in a folder anyone may enter, read-only while the test runs."""
    home = Path(tempfile.mkdtemp(prefix="pielake-shared-"))
    home.chmod(0o755)
    lake = home / "lake"
    (lake / "results_q").mkdir(parents=True)
    (home / "q.tpq").write_text(QUERY)
    (home / "events.csv").write_text("m,ts,v\nm1,1,3\n")
    for folder in (lake, lake / "results_q"):
        folder.chmod(0o555)
    yield lake
    for folder in (lake, lake / "results_q"):
        folder.chmod(0o755)
    for path in sorted(home.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    home.rmdir()


def as_reader(call: Callable[[], Any]) -> Any:
    """`call()`'s JSON-able result, computed in a child process of an account that may not write the lake."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        code = 0
        try:
            if os.getuid() == 0:  # nobody, as access(2) judges: by the real account
                os.setresgid(NOBODY, 0, 0)
                os.setresuid(NOBODY, 0, 0)
            answer = json.dumps(call())
        except BaseException as error:  # said to the parent, which fails the test with it
            answer, code = json.dumps(repr(error)), 1
        with os.fdopen(write, "w") as out:
            out.write(answer)
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as given:
        answer = given.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    return json.loads(answer)


def cli(*arguments: str) -> list[Any]:
    result = CliRunner().invoke(main, list(arguments))
    return [result.exit_code, result.output]


@pytest.mark.parametrize("command", [
    ["run", "{home}/q.tpq", "--events", "{home}/events.csv", "--lake", "{lake}"],
    ["unlock", "{home}/q.tpq", "--lake", "{lake}"],
    ["engine", "start", "--lake", "{lake}"],
], ids=["run", "unlock", "engine start"])
def test_a_command_that_writes_a_lake_its_account_may_not_write_is_refused_naming_the_owner(
        command: list[str], shared_lake: Path) -> None:
    filled = [part.format(home=shared_lake.parent, lake=shared_lake) for part in command]
    code, output = as_reader(lambda: cli(*filled))
    assert code == EXIT_USAGE, output
    assert f"may not write the lake {shared_lake} ({shared_lake} is " in output, output
    assert f"or read the lake with `pielake sql --lake {shared_lake}`" in output and "Traceback" not in output


def test_a_lake_a_table_folder_of_which_its_account_may_not_write_is_refused_naming_that_folder(
        shared_lake: Path) -> None:
    shared_lake.chmod(0o777)
    code, output = as_reader(lambda: cli("unlock", str(shared_lake.parent / "q.tpq"), "--lake", str(shared_lake)))
    assert code == EXIT_USAGE and f"({shared_lake / 'results_q'} is " in output, output


def test_a_reader_keeps_spark_s_log_in_a_folder_of_its_own_and_the_writer_in_the_lake(shared_lake: Path) -> None:
    reader = as_reader(lambda: [str(log_folder(str(shared_lake))), os.getuid()])
    assert reader == [str(Path(tempfile.gettempdir()) / f"pielake-{reader[1]}" / "_logs"), reader[1]]
    if os.getuid() == 0:  # the writer: root writes the lake whatever its modes
        assert log_folder(str(shared_lake)) == shared_lake / "_logs"
