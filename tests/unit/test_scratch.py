"""Each process's scratch folder (`pielake.engine.scratch`): made under the account's own root, held while its
process lives, removed by the next process once its own has ended however it ended; a root another account made
is not used. `tests/integration/test_machine_limits.py` kills a real run's JVM and finds its blocks removed by the
next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from pielake.engine import scratch
from pielake.engine.scratch import MAKING_SECONDS, OWNER, own_folder, remove_left

# A process that takes its scratch folder under the root given, says it, and lives until its input closes.
HOLDER = "import sys; from pathlib import Path; from pielake.engine.scratch import own_folder; " \
         "print(own_folder(Path(sys.argv[1])), flush=True); sys.stdin.read()"


def holder(root: Path) -> tuple[subprocess.Popen[str], Path]:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


@pytest.fixture(autouse=True)
def _no_folder_held(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test process holds no folder yet under any root (another test's session may hold one under SCRATCH);
    the locks a test takes are let go after it, as a process's are when it exits."""
    held: dict[Path, tuple[Path, IO[str]]] = {}
    monkeypatch.setattr(scratch, "_held", held)
    yield
    for _, owner in held.values():
        owner.close()


def test_a_process_gets_one_folder_of_its_own_only_its_account_reads(tmp_path: Path) -> None:
    root = tmp_path / "scratch"
    folder = own_folder(root)
    assert folder is not None and folder.parent == root and folder.name.startswith(f"{os.getpid()}-")
    assert (folder / OWNER).is_file() and root.stat().st_mode & 0o777 == 0o700
    assert own_folder(root) == folder


def test_the_folder_of_a_killed_process_is_removed_by_the_next_and_a_living_one_s_kept(tmp_path: Path) -> None:
    root = tmp_path / "scratch"
    killed, left = holder(root)
    living, kept = holder(root)
    (left / "blockmgr-1").mkdir()
    (left / "blockmgr-1" / "shuffle_0_0_0.data").write_bytes(b"x" * 1024)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    try:
        mine = own_folder(root)
        assert not left.exists() and kept.is_dir() and mine is not None and mine.is_dir()
    finally:
        living.communicate("")
    assert remove_left(root) == [kept]  # ended in its turn, as a process that exits does


def test_a_folder_being_made_is_left_alone_until_older_than_any_making(tmp_path: Path) -> None:
    root = tmp_path / "scratch"
    making = root / ".4242-abc"
    making.mkdir(parents=True)
    assert remove_left(root) == [] and making.is_dir()
    past = time.time() - MAKING_SECONDS - 1
    os.utime(making, (past, past))
    assert remove_left(root) == [making] and not making.exists()


@pytest.mark.skipif(os.getuid() != 0, reason="only root gives a folder to another account")
def test_a_root_another_account_made_is_not_used(tmp_path: Path) -> None:
    root = tmp_path / "scratch"
    root.mkdir(mode=0o777)
    os.chown(root, 65534, 65534)
    assert own_folder(root) is None and list(root.iterdir()) == []
