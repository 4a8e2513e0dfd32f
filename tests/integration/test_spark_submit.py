"""Every stage's jobs/ entry point runs under spark-submit, as Airflow's SparkSubmitOperator will run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from pielake.query.analyzer import load_query
from pielake.semantics.reference import find_matches
from pielake.spark.session import submit_arguments
from tests.helpers import drawn

ROOT = Path(__file__).parents[2]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
QUERY = "FROM Flags F PARTITION BY key DEFINE A AS a, B AS b PATTERN A overlaps; meets B WITHIN 1 min\n"


def submit(stage: str, *args: str) -> dict:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([str(SPARK_SUBMIT), *submit_arguments("local[2]"), str(ROOT / "jobs" / f"{stage}.py"),
                           *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_four_stages_run_under_spark_submit(tmp_path: Path, spark: SparkSession) -> None:
    rows = drawn(key="k", a="XXX...XX.XXX.", b=".XXXX..XXX...") + drawn(key="j", a="XX..", b="..XX")
    events = tmp_path / "flags.json"
    events.write_text("\n".join(json.dumps(r) for r in rows))
    query = tmp_path / "flag_pairs.tpq"
    query.write_text(QUERY)
    common = ["--query", str(query), "--lake", str(tmp_path / "lake"), "--run-id", "submitted"]
    assert submit("ingest", *common, "--events", str(events))["events"] == len(rows)
    assert submit("situations", *common)["stage"] == "situations"
    assert submit("pairs", *common, "--constraint", "c1")["stage"] == "pairs c1"
    assert submit("matches", *common)["stage"] == "matches"
    got = sorted((r.key, r.a_ts, r.b_ts, r.detected_at, r.status) for r in
                 spark.read.format("delta").load(str(tmp_path / "lake" / "matches_flag_pairs")).collect())
    plan = load_query(QUERY)
    want = sorted((m.key[0], m.situation("A").ts, m.situation("B").ts, m.detected_at, m.status)
                  for m in find_matches(rows, plan))
    assert got == want and want
