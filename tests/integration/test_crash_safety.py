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
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock
from pielake.query.analyzer import load_query
from pielake.semantics.reference import find_matches
from pielake.streams import save_schema
from tests.integration.test_gates_and_backfill import EVENTS, QUERY, STREAM, write
from tests.spark.kernels import reference_rows, spark_rows

PIELAKE = str(Path(sys.executable).parent / "pielake")
KILL_POINTS = ("events_line", "matches_mid")


def data_files(table: Path) -> set[Path]:
    return set(table.rglob("*.parquet")) if table.exists() else set()


def run_until_written(command: list[str], table: Path, timeout: float = 600) -> int:
    """Start `command`; SIGKILL its whole process tree (driver JVM included) once a new data file of `table`
    appears. Returns the exit code (-9 when killed)."""
    before = data_files(table)
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, "PIELAKE_SPARK_MASTER": "local[1]"})
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if data_files(table) - before:
            os.killpg(process.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    return process.wait(timeout=60)


def test_a_run_killed_mid_write_and_run_again_gives_the_clean_tables(tmp_path: Path, spark: SparkSession) -> None:
    root = tmp_path / "lake"
    save_schema(STREAM, root / "_streams")
    (tmp_path / "mid.tpq").write_text(QUERY)
    command = [PIELAKE, "run", str(tmp_path / "mid.tpq"), "--events", write(tmp_path / "events.json", EVENTS),
               "--lake", str(root), "--run-id", "crashy", "--no-checks"]
    for table in KILL_POINTS:
        code = run_until_written(command, root / table)
        if code != -signal.SIGKILL:
            pytest.fail(f"the run was not killed while writing {table} (exit code {code})")
    last = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    assert last.returncode == 0, last.stderr[-2000:]
    lake = Lake(spark, root)
    plan = load_query(QUERY, "mid")
    assert spark_rows(lake.read("matches_mid"), plan) == reference_rows(find_matches(EVENTS, plan), plan)
    events = lake.read("events_line")
    assert events.count() == events.select("m", "ts").distinct().count() == len(EVENTS)
    assert RunLock(root, "mid").holder() is None
    assert not [name for name in lake.tables() if "staging" in name or name.startswith(("segments", "scope"))]
