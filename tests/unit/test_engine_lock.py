"""The lake's engine lock (`pielake.engine.server.engine_lock`), which an engine holds for its life and writes its
pid into, and the commands that look for the engine through it (`pielake.engine.control`): `engine start`,
`status` and `stop` run from several shells or scripts at once, beside an engine that starts or ends."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pielake import vocabulary as V
from pielake.engine import control
from pielake.engine.client import ENGINE_LOCK
from pielake.engine.server import engine_lock
from pielake.errors import PielakeError
from tests.helpers import held_lock


def test_an_engine_that_ends_as_it_is_stopped_is_said_stopped(tmp_path: Path) -> None:
    """By another stop, or a crash: it holds the lock until its process is gone, so a stop can find a pid whose
    process ended a moment before it is signalled."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    pid = int(ended.stdout)  # a process that no longer runs
    with held_lock(tmp_path, f"pid {pid}\n", fcntl.LOCK_EX) as handle:
        threading.Timer(1.0, fcntl.flock, (handle, fcntl.LOCK_UN)).start()  # its end lets go a moment later
        said = control.stop(str(tmp_path))
    assert said == f"stopped the engine of {tmp_path.resolve()} (pid {pid})"
    assert control.stop(str(tmp_path)) == f"no engine runs on {tmp_path.resolve()}"


def test_a_command_that_looks_for_the_engine_beside_another_does_not_take_it_for_one(tmp_path: Path) -> None:
    """A command looks by holding the lock for an instant: were that hold exclusive, a second command would take
    the first for an engine, and read the pid of one that ended long ago, which a stop would signal."""
    looking = held_lock(tmp_path, "pid 4242", fcntl.LOCK_SH)  # another command, where an engine once ran
    with looking, pytest.raises(PielakeError, match=r"^no engine runs on"):
        control.status(str(tmp_path))


def test_an_engine_starts_beside_a_command_that_looks_for_one_and_names_no_process_once_ended(
        tmp_path: Path) -> None:
    with held_lock(tmp_path, "", fcntl.LOCK_SH) as looking:
        threading.Timer(0.2, fcntl.flock, (looking, fcntl.LOCK_UN)).start()
        with engine_lock(tmp_path):
            assert (tmp_path / V.ENGINE_DIR / ENGINE_LOCK).read_text(encoding="utf-8") == f"pid {os.getpid()}"
    assert (tmp_path / V.ENGINE_DIR / ENGINE_LOCK).read_text(encoding="utf-8") == ""
