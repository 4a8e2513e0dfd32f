"""The per-query run lock (`pielake.lake.lock`): one holder, refreshed by its own steps, stale ones taken over."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pielake.lake.lock import RunLock, RunLockedError, exclusive


def test_a_second_run_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    lock = RunLock(tmp_path, "q")
    lock.hold("r1")
    lock.hold("r1")  # the same run's next step (or a retried task) refreshes it
    with pytest.raises(RunLockedError, match="query q is being run by run r1") as refused:
        RunLock(tmp_path, "q").hold("r2")
    assert refused.value.exit_code == 3
    assert RunLock(tmp_path, "other").hold("r2") is None  # other queries are not blocked


def test_only_the_holder_releases_and_then_the_next_run_may_start(tmp_path: Path) -> None:
    lock = RunLock(tmp_path, "q")
    lock.hold("r1")
    assert not lock.release("r2")
    assert lock.release("r1") and not lock.path.exists()
    lock.hold("r2")
    assert lock.holder()["run_id"] == "r2"


def test_a_lock_idle_longer_than_the_limit_is_taken_over(tmp_path: Path) -> None:
    RunLock(tmp_path, "q").hold("dead")
    old = time.time() - 120
    os.utime(RunLock(tmp_path, "q").path, (old, old))
    RunLock(tmp_path, "q", stale_after=60).hold("next")
    assert RunLock(tmp_path, "q").holder()["run_id"] == "next"


def test_a_lock_file_cut_short_by_a_crash_holds_nothing(tmp_path: Path) -> None:
    lock = RunLock(tmp_path, "q")
    lock.path.parent.mkdir(parents=True)
    lock.path.write_text('{"run_id": "r', encoding="utf-8")
    lock.hold("r2")
    assert lock.holder()["run_id"] == "r2"


def test_a_run_that_may_wait_starts_once_the_holder_releases_and_one_that_waits_too_briefly_stops(
        tmp_path: Path) -> None:
    lock = RunLock(tmp_path, "q")
    lock.hold("backfill")
    threading.Timer(1.0, lock.release, args=("backfill",)).start()
    heard: list[str] = []
    started = time.monotonic()
    RunLock(tmp_path, "q").hold("scheduled", wait=30, say=heard.append)
    assert 0.9 < time.monotonic() - started < 10
    assert lock.holder()["run_id"] == "scheduled"
    assert heard == [heard[0]] and heard[0].startswith("waiting up to") and "by run backfill" in heard[0]
    with pytest.raises(RunLockedError, match="being run by run scheduled"):
        RunLock(tmp_path, "q").hold("next", wait=0.5)


def test_a_section_of_a_stream_admits_one_holder_at_a_time_even_within_one_process(tmp_path: Path) -> None:
    """Runs on one engine are threads of one process: the section excludes them from each other too, and lets the
    next one in as soon as the first leaves."""
    order: list[str] = []

    def second() -> None:
        with exclusive(tmp_path, "events_s"):
            order.append("second")

    with exclusive(tmp_path, "events_s"):
        order.append("first")
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.5)  # time for the second to try
        order.append("first leaves")
    waiter.join(5)
    assert order == ["first", "first leaves", "second"]


def test_a_section_is_free_again_when_its_holder_dies(tmp_path: Path) -> None:
    """A process killed inside the section leaves no lock behind: the system drops its `flock`."""
    code = ("import os, sys; from pathlib import Path; from pielake.lake.lock import exclusive\n"
            f"with exclusive(Path({str(tmp_path)!r}), 'events_s'):\n    os._exit(9)\n")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 9
    with exclusive(tmp_path, "events_s"):
        pass
