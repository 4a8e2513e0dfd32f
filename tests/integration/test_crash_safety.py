"""Crash safety (issue 6): `pielake run` killed with SIGKILL while it writes, then run again with the same run id.

One run is killed twice, each time as soon as a data file of the watched table is on disk, before Delta commits
it: while appending the events (the one write that is not a replace), and while publishing the matches (after the
situations and pairs of the same publish are committed). Staging writes are replaced whole by the next attempt,
so they are left out (each kill costs a JVM start-up and a partial run). The third attempt completes; the tables
then equal the brute-force reference, every event is there once, the lock is released, and no staging table is
visible in SQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from tests.integration.cli_runs import ONE_CORE, assert_one_clean_run, run_command

pytestmark = pytest.mark.heavy(seconds=270)  # about this long in CI: scheduled first

KILL_POINTS = ("events_line", "matches_mid")


def data_files(table: Path) -> set[Path]:
    return set(table.rglob("*.parquet")) if table.exists() else set()


def run_until_written(command: list[str], table: Path, timeout: float = 600) -> int:
    """Start `command`; SIGKILL its whole process tree (driver JVM included) once a new data file of `table`
    appears. Returns the exit code (-9 when killed)."""
    before = data_files(table)
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=ONE_CORE)
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if data_files(table) - before:
            os.killpg(process.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    return process.wait(timeout=60)


def test_a_run_killed_mid_write_and_run_again_gives_the_clean_tables(tmp_path: Path, spark: SparkSession) -> None:
    root, command = run_command(tmp_path, "crashy")
    for table in KILL_POINTS:
        code = run_until_written(command, root / table)
        if code != -signal.SIGKILL:
            pytest.fail(f"the run was not killed while writing {table} (exit code {code})")
    last = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    assert last.returncode == 0, last.stderr[-2000:]
    assert_one_clean_run(spark, root)
    visible = Lake(spark, root).tables()
    assert not [name for name in visible if "staging" in name or name.startswith(("segments", "scope"))]
