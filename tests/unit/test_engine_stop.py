"""`pielake engine stop` (`pielake.engine.control.stop`) of an engine that ends by itself as it is stopped: by
another stop, or a crash. The engine holds the lake's engine lock until its process is gone, so a stop can find a
pid whose process has ended a moment before it is signalled; that engine is stopped, and the stop says so."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import threading
from pathlib import Path

from pielake import vocabulary as V
from pielake.engine import control


def test_an_engine_that_ends_as_it_is_stopped_is_said_stopped(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    pid = int(ended.stdout)  # a process that no longer runs
    lock = tmp_path / V.ENGINE_DIR / "engine.lock"
    lock.parent.mkdir()
    with lock.open("a+", encoding="utf-8") as handle:
        handle.write(f"pid {pid}\n")
        handle.flush()
        fcntl.flock(handle, fcntl.LOCK_EX)  # as the engine holds it, until its end lets go a moment later
        threading.Timer(1.0, fcntl.flock, (handle, fcntl.LOCK_UN)).start()
        said = control.stop(str(tmp_path))
    assert said == f"stopped the engine of {tmp_path.resolve()} (pid {pid})"
    assert control.stop(str(tmp_path)) == f"no engine runs on {tmp_path.resolve()}"
