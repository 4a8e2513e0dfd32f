"""Two runs of one query started at once (issue 6): one runs, the other stops at once with exit code 3 and one
clear line, and the tables are exactly what one run gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock
from pielake.query.analyzer import load_query
from pielake.semantics.reference import find_matches
from pielake.streams import save_schema
from tests.integration.test_gates_and_backfill import EVENTS, QUERY, STREAM, write
from tests.spark.kernels import reference_rows, spark_rows

PIELAKE = str(Path(sys.executable).parent / "pielake")


def test_two_runs_at_once_one_stops_cleanly_and_tables_stay_whole(tmp_path: Path, spark: SparkSession) -> None:
    root = tmp_path / "lake"
    save_schema(STREAM, root / "_streams")
    (tmp_path / "mid.tpq").write_text(QUERY)
    events = write(tmp_path / "events.json", EVENTS)
    env = {**os.environ, "PIELAKE_SPARK_MASTER": "local[1]"}
    runs = [subprocess.Popen([PIELAKE, "run", str(tmp_path / "mid.tpq"), "--events", events, "--lake", str(root),
                              "--run-id", run_id, "--no-checks"], env=env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for run_id in ("r1", "r2")]
    outputs = [run.communicate(timeout=900) for run in runs]
    codes = [run.returncode for run in runs]
    assert sorted(codes) == [0, 3], outputs
    refused = outputs[codes.index(3)][1].strip().splitlines()[-1]
    assert refused.startswith("error: query mid is being run by run r") and "try again" in refused
    lake = Lake(spark, root)
    plan = load_query(QUERY, "mid")
    assert spark_rows(lake.read("matches_mid"), plan) == reference_rows(find_matches(EVENTS, plan), plan)
    assert lake.read("events_line").count() == len(EVENTS)
    assert RunLock(root, "mid").holder() is None
