"""The per-query run lock (`pielake.lake.lock`): one holder, refreshed by its own steps, stale ones taken over."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from pielake.lake.lock import RunLock, RunLockedError


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
