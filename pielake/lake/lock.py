"""One run of a query at a time: a lock file per query, held from a run's first step to its publish.

Delta makes every commit atomic and detects conflicting commits, but a run is many commits: its stages share the
query's staging tables, and publish merges what they staged. Two runs of one query interleaving their steps
would publish each other's rows, so the second run must wait or stop, which Delta alone cannot say.

The lock is `<lake>/_locks/<query>.lock`, created with O_CREAT | O_EXCL (atomic on local and POSIX network file
systems). Its holder is a run id, not a process: every step of the run holds it, whether the steps share one
process (`pielake run`) or are separate spark-submit jobs and retries under Airflow. A run that ends (published,
stopped by a failed gate, failed on a wrong input or query, or failed in `pielake run`) releases it. A run that
died leaves it behind: the next run takes it over once the holder has not touched it for `stale_after` seconds,
or at once after `pielake unlock`.

Queries over one stream share its events table: a run appends what it ingested under a short section of the
stream's (`exclusive`), so two runs of different queries do not both append an event both of them ingested.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pielake import vocabulary as V
from pielake.environment import number
from pielake.errors import PielakeError
from pielake.exitcodes import EXIT_BUSY

STALE_AFTER_SECONDS = number("PIELAKE_LOCK_STALE_AFTER", 3600, "seconds")
WAIT_POLL_SECONDS = 2.0  # how often a run waiting for the lock looks again


class RunLockedError(PielakeError):
    """Another run of the same query holds the lock: try again when it has finished."""

    exit_code = EXIT_BUSY


@dataclass(frozen=True)
class RunLock:
    """The lock of one query in one lake."""

    root: Path  # the lake's folder
    query: str
    stale_after: float = STALE_AFTER_SECONDS

    @property
    def path(self) -> Path:
        return self.root / V.LOCKS_DIR / f"{self.query}.lock"

    def holder(self) -> dict[str, object] | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError:  # a lock file cut short by a crash while it was written: nobody holds it
            return {"run_id": None}

    def hold(self, run_id: str, *, wait: float = 0.0, say: Callable[[str], None] | None = None) -> None:
        """Take the lock for `run_id`, or refresh it if `run_id` holds it already; RunLockedError otherwise, after
        waiting up to `wait` seconds for the holder to release it (`say` hears that it waits).

        Waiting is what keeps a query's scheduled and backfill runs apart under Airflow: a pool limits how many
        tasks run at once, not whose, so a run's tasks would still interleave with another's; a run that finds
        the lock held waits in its first step instead, and starts when the other run has published.
        """
        deadline = time.monotonic() + wait
        while True:
            try:
                self._take(run_id)
                return
            except RunLockedError as busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                if say is not None:
                    say(f"waiting up to {left:.0f} s: {busy}")
                    say = None
                time.sleep(min(WAIT_POLL_SECONDS, left))

    def _take(self, run_id: str) -> None:
        """One attempt of `hold`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:  # each pass either takes the lock, refreshes ours, raises, or removed a stale one
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._refresh_or_steal(run_id):
                    continue
                return
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                json.dump({"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(),
                           "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, out)
            return

    def _refresh_or_steal(self, run_id: str) -> bool:
        """The lock exists: refresh it if it is ours (False), remove it if stale (True: try again), or refuse."""
        held = self.holder()
        if held is None:
            return True
        if held.get("run_id") == run_id:
            self.path.touch()
            return False
        idle = time.time() - self.path.stat().st_mtime
        if held.get("run_id") is None or idle > self.stale_after:
            self.path.unlink(missing_ok=True)
            return True
        raise RunLockedError(
            f"query {self.query} is being run by run {held.get('run_id')} (on {held.get('host')}, since "
            f"{held.get('since')}, last active {idle:.0f} s ago); try again when it has finished, or, if that run "
            f"is dead, release it with `pielake unlock` or wait {self.stale_after:.0f} s")

    def release(self, run_id: str | None = None) -> bool:
        """Remove the lock if `run_id` holds it (any holder when None). Returns whether a lock was removed."""
        held = self.holder()
        if held is None or (run_id is not None and held.get("run_id") != run_id):
            return False
        self.path.unlink(missing_ok=True)
        return True


@contextmanager
def exclusive(root: Path, name: str) -> Iterator[None]:
    """Hold `<lake>/_locks/<name>.section` exclusively while the block runs: for a few seconds' work that runs of
    several queries must not interleave (appending to a stream they share). An advisory `flock`, unlike a run's
    lock file, is dropped by the system when its holder dies, so a crash inside never blocks the next run."""
    path = root / V.LOCKS_DIR / f"{name}.section"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
