"""Runs that meet the limits of the machine they run on end with one line saying so and what to do, not a trace,
and the same command run again once the machine has room gives the tables one clean run gives.

- A disk that fills: the lake is on a tmpfs of 96 KiB in a mount namespace of the test's own (`unshare`), so
  nothing of the machine's is filled; the run ends with exit code 74. `tests/unit/test_errors.py` has the same
  for Python's own writes.
- A JVM killed as the system's out-of-memory killer kills one, with SIGKILL, as the run starts its ingest or in the
  middle of its events append: the run ends with exit code 71, and its lock is free for the next run. A statement
  whose JVM is killed as its rows stream ends so too, and is told to run the statement again, not a run's redo.
- A container with less memory than the default heap and what runs beside it: the run is in a memory control
  group of the test's own, of 1,536 MB: the run's JVM gets the heap that leaves room beside it, and the run
  finishes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from pyspark.sql import SparkSession

from pielake.engine.jvm import spark_jvm
from pielake.engine.memory import CGROUPS, MB, allowed_mb
from pielake.exitcodes import EXIT_JVM_LOST, EXIT_NO_SPACE
from tests.integration.cli_runs import ONE_CORE, PIELAKE, assert_one_clean_run, run_command

pytestmark = pytest.mark.heavy(seconds=205)  # about this long in CI: scheduled first

# Runs the command given after the lake's folder, a copy of its schemas and the copy to make of the lake: first on
# a tmpfs of 96 KiB mounted on the lake's folder, then with room; a tmpfs ends with its namespace, so the lake is
# copied out for the test to read.
FULL_THEN_ROOM = """
lake=$1 streams=$2 copy=$3
shift 3
mount -t tmpfs -o size=96k pielake-full "$lake" || exit 90
cp -r "$streams" "$lake/_streams"
"$@" --run-id full 2>&1
echo "full: exit $?"
mount -o remount,size=64m "$lake"
"$@" --run-id room > /dev/null 2>&1
echo "room: exit $?"
cp -r "$lake" "$copy"
"""


# Runs the command given after the control group's folder in that group.
IN_THE_GROUP = 'echo $$ > "$0/cgroup.procs" && exec "$@"'


@contextmanager
def a_memory_group(mb: int) -> Iterator[Path]:
    """A memory control group of `mb` MB of this test's own (cgroup v1 or v2), removed once its processes end."""
    v1 = CGROUPS / "memory"
    parent, limit = (v1, "memory.limit_in_bytes") if v1.is_dir() else (CGROUPS, "memory.max")
    group = parent / f"pielake-test-{uuid.uuid4().hex}"
    try:
        group.mkdir()
        (group / limit).write_text(str(mb * MB))
    except OSError as error:
        if group.exists():
            group.rmdir()
        pytest.skip(f"this account makes no memory control group here ({error})")
    try:
        yield group
    finally:
        deadline = time.monotonic() + 60
        while group.exists():
            try:
                group.rmdir()
            except OSError:  # the JVM still exiting after its Python
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def in_a_mount_namespace() -> list[str]:
    """`unshare` into a mount namespace of this process's own: root's; anyone else's as root of a user namespace,
    where the system lets one be made."""
    command = ["unshare", "--mount"] if os.getuid() == 0 else ["unshare", "--mount", "--map-root-user"]
    if shutil.which("unshare") is None or subprocess.run([*command, "true"], check=False).returncode != 0:
        pytest.skip("this system makes no mount namespace for this account (unshare)")
    return command


def test_a_run_on_a_full_disk_says_so_in_one_line_and_run_again_with_room_gives_the_clean_tables(
        tmp_path: Path, spark: SparkSession) -> None:
    root, command = run_command(tmp_path, "unused")
    at = command.index("--run-id")
    command = command[:at] + command[at + 2:]  # each run of the script names its own
    streams = tmp_path / "streams"
    shutil.move(root / "_streams", streams)
    copy = tmp_path / "copy"
    done = subprocess.run([*in_a_mount_namespace(), "sh", "-c", FULL_THEN_ROOM, "sh", str(root), str(streams),
                           str(copy), *command], env=ONE_CORE, capture_output=True, text=True, timeout=900,
                          check=False)
    said = done.stdout.splitlines()
    assert said[-2:] == [f"full: exit {EXIT_NO_SPACE}", "room: exit 0"], done.stdout + done.stderr
    assert said[-3].startswith("error: a disk this run writes to is full") and "Traceback" not in done.stdout, \
        done.stdout
    assert_one_clean_run(spark, copy)


def appending_its_events(run: subprocess.Popen[str], root: Path) -> str:
    """Waits until the run writes its first events file; what it said by then is read with the rest."""
    deadline = time.monotonic() + 600
    while run.poll() is None and not set((root / "events_line").rglob("*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.005)
    return ""


def starting_its_ingest(run: subprocess.Popen[str], _root: Path) -> str:
    """Waits until the run says it ingests, as it plans and runs its first jobs: a JVM killed then meets Python
    inside a plan's py4j calls (a call that fails with no error from Java), not waiting on a job."""
    assert run.stdout is not None
    return run.stdout.readline()


def test_a_statement_whose_jvm_is_killed_as_its_rows_stream_is_told_to_run_the_statement_again(
        tmp_path: Path) -> None:
    """`pielake sql` only reads: the whole statement is what there is to redo, and no run's tables are."""
    rows = tmp_path / "rows.csv"
    command = [PIELAKE, "sql", "--lake", str(tmp_path), "--format", "csv",
               "SELECT id FROM range(0, 100000000000, 1, 100000)"]
    with rows.open("w", encoding="utf-8") as sink:
        reading = subprocess.Popen(command, env={**ONE_CORE, "TMPDIR": str(tmp_path)}, stdout=sink,
                                   stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not rows.stat().st_size and reading.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    jvm = spark_jvm(psutil.Process(reading.pid))
    assert rows.stat().st_size and jvm is not None, reading.communicate(timeout=60)[1]
    jvm.send_signal(signal.SIGKILL)
    said = reading.communicate(timeout=300)[1]
    assert reading.returncode == EXIT_JVM_LOST, said
    last = said.strip().splitlines()[-1]
    assert last.startswith("error: Spark's JVM ended in the middle of the statement: it was killed (SIGKILL)"), said
    assert last.endswith(", then run the statement again: it only reads, so nothing of it is left to redo"), said
    assert "Traceback" not in said


@pytest.mark.parametrize("moment", [appending_its_events, starting_its_ingest])
def test_a_run_whose_jvm_is_killed_says_so_in_one_line_and_run_again_gives_the_clean_tables(
        moment: Callable[[subprocess.Popen[str], Path], str], tmp_path: Path, spark: SparkSession) -> None:
    """The JVM's temporary files (Spark's blocks among them), which it cannot delete, are in the run's scratch
    folder, and the next run removes them."""
    root, command = run_command(tmp_path, "killed")
    environment = {**ONE_CORE, "TMPDIR": str(tmp_path)}  # a scratch space no other test's run cleans
    run = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    before = moment(run, root)
    jvm = spark_jvm(psutil.Process(run.pid))
    assert jvm is not None, before
    jvm.send_signal(signal.SIGKILL)  # the JVM alone, as the out-of-memory killer takes the largest process
    said = before + run.communicate(timeout=300)[0]
    assert run.returncode == EXIT_JVM_LOST, said
    last = said.strip().splitlines()[-1]
    assert last.startswith("error: Spark's JVM ended in the middle of the run: it was killed (SIGKILL), as the "
                           "system kills the largest process where") and "Traceback" not in said, said
    assert f"(this process may use {allowed_mb():,} MB)" in last, last
    [left] = (tmp_path / f"pielake-scratch-{os.getuid()}").glob(f"{run.pid}-*")
    assert {"blockmgr", "spark"} <= {path.name.split("-")[0] for path in left.iterdir()}, list(left.iterdir())
    again = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not left.exists()
    assert_one_clean_run(spark, root)


def test_a_run_in_a_container_smaller_than_the_default_heap_sizes_its_heap_to_it_and_gives_the_clean_tables(
        tmp_path: Path, spark: SparkSession) -> None:
    """In a group of 1,536 MB a run of 10^6 events was killed with the default heap and finished with 768m;
    `tests/unit/test_memory.py` reads the limits of the other kinds of system."""
    root, command = run_command(tmp_path, "small")
    env = {name: value for name, value in ONE_CORE.items() if name != "PIELAKE_DRIVER_MEMORY"}
    with a_memory_group(1_536) as group:
        run = subprocess.Popen(["sh", "-c", IN_THE_GROUP, str(group), *command], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        jvm = the_jvm(run)
        said = run.communicate(timeout=600)[0]
    assert run.returncode == 0, said
    assert "-Xmx768m" in jvm, jvm
    assert_one_clean_run(spark, root)


def the_jvm(run: subprocess.Popen) -> list[str]:
    """The command line of Spark's JVM that `run` starts, once it has started."""
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline:
        jvm = spark_jvm(psutil.Process(run.pid))
        if jvm is not None:
            return jvm.cmdline()
        time.sleep(0.05)
    raise AssertionError("the run started no JVM")
