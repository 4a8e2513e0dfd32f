"""Starting, checking and stopping the lake's engine (`pielake engine start|status|stop`), and running it here.

`start` runs `pielake engine serve` as a process of its own, in a session of its own (a terminal closing does not
stop it), its output in `<lake>/_engine/engine.log`, and waits until it says `ready:`. Whether an engine runs, and
which process it is, is told by the lock it holds (`pielake.engine.server.engine_lock`). `status` asks the engine
itself; `stop` sends TERM, on which the engine closes its servers and its catalog, then KILL if it has not ended
in 30 s.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from pielake import vocabulary as V
from pielake.engine.client import ENGINE_LOCK, ENGINE_LOG, EngineError, engine_file, engine_status, lake_engine
from pielake.engine.jvm import check_spark_environment
from pielake.errors import PielakeError
from pielake.lake.catalog import Metastore

STARTING_SECONDS = 600  # a first start resolves Delta's jars from Maven Central; every start warms up
STOPPING_SECONDS = 30


def _folder(lake_dir: str | Path) -> Path:
    folder = Path(lake_dir).resolve() / V.ENGINE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _pid(lake_dir: str | Path) -> int | None:
    """The running engine's process, if one runs: it holds the lake's engine lock (`engine_lock`) while it lives,
    and a process that died has let go of it, whatever is left of it."""
    folder = _folder(lake_dir)
    with (folder / ENGINE_LOCK).open("a+", encoding="utf-8") as handle:
        try:
            # Shared: commands that look at once (a status beside a stop) do not take each other for the engine.
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(handle)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def _holder(handle: TextIO) -> int:
    """The pid of the engine that holds the lock, `pid N`, which it writes right after it takes the lock: read
    until it is there."""
    deadline = time.monotonic() + 1
    while True:
        handle.seek(0)
        said = handle.read().split()
        if len(said) == 2 and said[1].isdigit():
            return int(said[1])
        if time.monotonic() > deadline:
            raise PielakeError(f"the engine lock {handle.name} is held, but names no process ({' '.join(said)!r});"
                               " `fuser` names the process that holds it")
        time.sleep(0.01)


def serve_here(*, lake_dir: str, host: str, port: int, jdbc_port: int, ui_port: int | None, refresh: float,
               metastore_url: str | None, metastore_driver: str | None, metastore_user: str | None,
               packages: tuple[str, ...], master: str | None, warm_up: int, stop: threading.Event,
               say: Callable[[str], None]) -> None:
    """Run the engine in this process (`pielake engine serve`) until `stop` is set."""
    check_spark_environment(os.environ)
    from pielake.engine.server import EnginePorts, serve  # noqa: PLC0415 (Spark, only where the engine runs)

    serve(lake_dir, EnginePorts(host, port, jdbc_port, refresh, ui_port), token=os.environ.get("PIELAKE_ENGINE_TOKEN"),
          metastore=Metastore(metastore_url, metastore_driver, metastore_user), master=master, packages=packages,
          warm_up_runs=warm_up, stop=stop, say=say)


def start(lake_dir: str, options: dict[str, Any]) -> str:
    """Start the engine in the background and wait until it serves; returns what it said when ready. An
    environment whose Spark is not pielake's is refused here, in one line, not in the engine's log."""
    check_spark_environment(os.environ)
    if _pid(lake_dir) is not None:
        try:
            said = status(lake_dir).splitlines()[0]
        except PielakeError as unready:
            said = str(unready)
        raise PielakeError(f"an engine already runs on {Path(lake_dir).resolve()}: {said}")
    folder = _folder(lake_dir)
    log = folder / ENGINE_LOG
    # `-P`: the engine runs the pielake installed with this Python, not a `pielake` folder where it is started.
    argv = [sys.executable, "-P", "-m", "pielake.cli", "engine", "serve", "--lake", str(Path(lake_dir).resolve())]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        values = value if isinstance(value, tuple) else (value,)
        argv += [part for v in values if v is not None for part in (flag, str(v))]
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + STARTING_SECONDS
    while time.monotonic() < deadline:
        ready = [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("ready: ")]
        if ready:
            return ready[0]
        if process.poll() is not None:
            said = [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("error: ")]
            raise PielakeError(f"the engine stopped while starting: "
                               f"{said[0].removeprefix('error: ') if said else f'see {log}'}")
        time.sleep(0.5)
    stop(lake_dir)
    raise PielakeError(f"the engine did not come up in {STARTING_SECONDS} s; its log: {log}")


def serving(lake_dir: str | Path) -> str | None:
    """The Spark Connect address of the engine that serves the lake, None where none does: one has written its
    address there and holds the lake's engine lock (an engine killed whole leaves its address behind)."""
    if not engine_file(lake_dir).is_file() or _pid(lake_dir) is None:
        return None
    try:
        return lake_engine(lake_dir).shown_url
    except (PielakeError, OSError, ValueError, KeyError):
        return None  # stopping as it was read: it serves no more


def status(lake_dir: str) -> str:
    """Where the lake's engine listens and what it runs, said by the engine itself. An engine holds the lake's
    engine lock from its start, and writes its address only once Spark is up: until then it is starting."""
    starting = None if engine_file(lake_dir).exists() or not engine_file(lake_dir).parent.is_dir() else _pid(lake_dir)
    if starting is not None:
        raise PielakeError(f"the engine of {Path(lake_dir).resolve()} (pid {starting}) is starting: it answers once "
                           "Spark is up")
    address = lake_engine(lake_dir)
    try:
        said = engine_status(address)
    except EngineError as error:
        raise PielakeError(f"the engine of {Path(lake_dir).resolve()} does not answer: {error}") from None
    running = ", ".join(said["running"]) or "nothing"
    held = ", ".join(said["held"]) or "none"
    ui = f", {said['ui']} (Spark UI)" if said.get("ui") else ""
    return (f"engine of {Path(lake_dir).resolve()}: pid {said['pid']}, pielake {said['pielake']}, Spark "
            f"{said['spark']} on {said['master']}, "
            f"since {said['started_at']}\n  {address.shown_url} (Spark Connect), {address.runs_url} "
            f"(runs){ui}; running: {running}; runs held between their steps: {held}")


def stop(lake_dir: str) -> str:
    """TERM, then KILL after `STOPPING_SECONDS`."""
    pid = _pid(lake_dir)
    if pid is None:
        return f"no engine runs on {Path(lake_dir).resolve()}"
    _send(os.kill, pid, signal.SIGTERM)
    deadline = time.monotonic() + STOPPING_SECONDS
    while time.monotonic() < deadline and _pid(lake_dir) is not None:
        time.sleep(0.5)
    if _pid(lake_dir) is not None:
        _send(os.killpg, pid, signal.SIGKILL)
    engine_file(lake_dir).unlink(missing_ok=True)
    return f"stopped the engine of {Path(lake_dir).resolve()} (pid {pid})"


def _send(kill: Callable[[int, int], None], pid: int, signal_number: int) -> None:
    """Send a signal to the engine found running a moment ago, which may have ended since (stopped by another
    `stop`, or crashed): its lock is free only once its process is gone, so an engine that is gone is stopped."""
    with contextlib.suppress(ProcessLookupError):
        kill(pid, signal_number)
