"""Crash safety: `pielake run` killed with SIGKILL while it writes, then run again with the same run id.

One run is killed once in each of its lake writes, as soon as a data file of the watched table is on disk and
before Delta commits it, in the order a run writes them: the quarantine (ingest), the events append (the one write
that is not a replace) and the publish into the query's results table (situations, pairs, matches and the progress
the next micro-batch starts from, in one commit). A run in one process stages its stage outputs in its Spark
session, which the kill takes with it (the Airflow test kills a step in the middle of a staged Delta write). The
last attempt completes; the tables then equal the brute-force reference, every event is there once, the bad row is
quarantined once, the lock is released, and nothing is staged in the lake or visible in SQL but the tables.
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
from tests.helpers import process_env
from tests.integration.cli_runs import ONE_CORE, assert_one_clean_run, run_command

pytestmark = pytest.mark.heavy(seconds=100)  # about this long in CI: scheduled first

KILL_POINTS = ("quarantine_line", "events_line", "results_mid")
BAD_ROW = {"m": None, "ts": 99, "v": 1.0}  # a NULL key: quarantined


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
    root, command = run_command(tmp_path, "crashy", bad_rows=(BAD_ROW,))
    for table in KILL_POINTS:
        code = run_until_written(command, root / table)
        if code != -signal.SIGKILL:
            pytest.fail(f"the run was not killed while writing {table} (exit code {code})")
    last = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600, env=process_env())
    assert last.returncode == 0, last.stderr[-2000:]
    assert_one_clean_run(spark, root)
    # a run from a shell prints pielake's lines only: Spark's launcher, Ivy and log4j write to the file it names
    assert not [line for line in (last.stdout + last.stderr).splitlines() if "Ivy" in line or " WARN " in line]
    [console] = [line.split(": ", 1)[1] for line in last.stdout.splitlines() if "Spark's own output" in line]
    assert Path(console).parent == root / "_logs" and "Ivy" in Path(console).read_text(encoding="utf-8")
    quarantined = Lake(spark, root).read("quarantine_line").collect()
    assert [r["reason"] for r in quarantined] == ["null_key: m"]
    visible = Lake(spark, root).tables()
    assert not [name for name in visible if "staging" in name or name.startswith(("segments", "scope"))]
    assert not (root / "_staging").exists(), "a run in one process stages nothing in the lake"
