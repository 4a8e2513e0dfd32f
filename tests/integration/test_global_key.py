"""A query without PARTITION BY reads its stream as one global key (docs/semantics.md §1), on every path: a batch
run from the command line with its gates, a micro-batch after it, a backfill of late events, each step as an
Airflow task runs it (`jobs/step.py`), then SQL and the timeline. Each time the published tables equal what the
brute-force reference computes, and none of them has a key column."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pyspark.sql.functions as F
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake.cli import main
from pielake.lake.delta import Lake
from pielake.pipeline.jobs import main as job_main
from pielake.pipeline.registry import STAGES
from pielake.query.analyzer import QueryPlan, load_query
from pielake.semantics.reference import derive_situations, find_matches
from pielake.spark import columns as C
from pielake.spark.columns import LAST_TIME
from pielake.streams import StreamSchema, save_schema
from tests.helpers import json_lines
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=70)  # about this long in CI: scheduled first

STREAM = StreamSchema("Plant", (), "ts", "s", (("ts", "BIGINT"), ("temp", "DOUBLE"), ("valve", "BOOLEAN")))
QUERY = """FROM Plant
DEFINE Hot AS temp > 50, Open AS valve
PATTERN Hot overlaps; during; meets; before Open
WITHIN 12 s
RETURN Hot.ts, avg(Open.temp), duration(Hot) AS hot_for
"""
DRAW = random.Random(5)
EVENTS = [{"ts": t, "temp": float(DRAW.choice([20, 40, 60, 80])), "valve": DRAW.random() < 0.4}
          for t in range(1, 61)]


def write(path: Path, rows: list[dict]) -> str:
    path.write_text(json_lines(rows))
    return str(path)


def new_lake(root: Path, spark: SparkSession) -> Lake:
    save_schema(STREAM, root / "_streams")
    (root / "plant.tpq").write_text(QUERY)
    return Lake(spark, root)


def cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output + repr(result.exception)
    return result.output


def assert_published_equal_the_reference(lake: Lake, plan: QueryPlan, events: list[dict]) -> None:
    """Matches, situations and the one progress row equal the reference over `events`; no table stores a key."""
    assert spark_rows(lake.read("matches_plant"), plan) == reference_rows(find_matches(events, plan), plan)
    situations = sorted((r["symbol"], r["ts"], r["te"]) for r in lake.read("situations_plant").collect())
    assert situations == sorted((s.symbol, s.ts, s.te) for s in derive_situations(events, plan))
    [progress] = lake.read("progress_plant").collect()
    assert progress[LAST_TIME] == max(e["ts"] for e in events)
    for kind in ("situations", "pairs", "matches", "progress"):
        assert C.GLOBAL_KEY not in lake.read(f"{kind}_plant").columns


def test_a_batch_with_gates_then_a_micro_batch_equal_the_reference(tmp_path: Path, spark: SparkSession) -> None:
    lake = new_lake(tmp_path, spark)
    plan = load_query(QUERY, "plant")
    output = cli("run", str(tmp_path / "plant.tpq"), "--events", write(tmp_path / "1.json", EVENTS[:35]),
                 "--lake", str(tmp_path))
    [report] = tmp_path.glob("_checks/gx/uncommitted/validations/plant/events/*/*/*.json")
    checked = [r["expectation_config"] for r in json.loads(report.read_text())["results"]]
    assert {"type": "expect_column_values_to_be_unique", "column": "ts"} in [  # the time alone: there is no key
        {"type": c["type"], "column": c["kwargs"].get("column")} for c in checked]
    assert "gate matches: 5 expectations passed" in output
    assert_published_equal_the_reference(lake, plan, EVENTS[:35])
    assert [r.name for r in plan.returns] == ["avg_open_temp", "hot_for"]  # Hot.ts is the hot_ts column
    cli("run", str(tmp_path / "plant.tpq"), "--events", write(tmp_path / "2.json", EVENTS[35:]),
        "--lake", str(tmp_path), "--incremental")
    assert_published_equal_the_reference(lake, plan, EVENTS)


def test_a_backfill_of_late_events_equals_the_reference(tmp_path: Path, spark: SparkSession) -> None:
    lake = new_lake(tmp_path, spark)
    plan = load_query(QUERY, "plant")
    late = [e for e in EVENTS if 20 <= e["ts"] <= 24]
    on_time = [e for e in EVENTS if e not in late]
    cli("run", str(tmp_path / "plant.tpq"), "--events", write(tmp_path / "1.json", on_time[:25]),
        "--lake", str(tmp_path), "--no-checks")
    cli("run", str(tmp_path / "plant.tpq"), "--events", write(tmp_path / "2.json", on_time[25:] + late),
        "--lake", str(tmp_path), "--no-checks", "--incremental")
    assert lake.read("quarantine_plant").filter(F.col("reason") == "late").count() == len(late)
    said = cli("backfill", str(tmp_path / "plant.tpq"), "--from", "2026-01-01", "--to", "24", "--lake", str(tmp_path),
               code=2)
    assert ("--from '2026-01-01' is not a time of stream Plant: give a whole number of its unit (s); if its times "
            "count from 1970 (Unix time), 2026-01-01 is 1767225600") in said
    said = cli("backfill", str(tmp_path / "plant.tpq"), "--from", "2_0", "--to", "24", "--lake", str(tmp_path), code=2)
    assert "--from '2_0' is not a time of stream Plant: give a whole number of its unit (s)" in said  # as plot reads it
    cli("backfill", str(tmp_path / "plant.tpq"), "--from", "20", "--to", "24", "--lake", str(tmp_path))
    assert_published_equal_the_reference(lake, plan, EVENTS)


def test_each_step_as_an_airflow_task_runs_it_equals_the_reference(tmp_path: Path, spark: SparkSession) -> None:
    """Every step of the scheduled DAG through its spark-submit entry point (`jobs/step.py`), stage outputs
    handed over in `_staging/` as between Airflow's tasks; then SQL and a timeline without --key."""
    lake = new_lake(tmp_path, spark)
    plan = load_query(QUERY, "plant")
    events = write(tmp_path / "events.json", EVENTS)
    steps = [step.name for step in STAGES.steps(plan)]
    for step in steps:
        argv = ["--step", step, "--query", str(tmp_path / "plant.tpq"), "--lake", str(tmp_path),
                "--run-id", "scheduled", "--mode", "incremental", "--events", events]
        assert job_main(argv) == 0, step
    assert_published_equal_the_reference(lake, plan, EVENTS)
    [run] = lake.read("runs").collect()
    assert run.status == "published" and [s.step for s in run.steps] == steps
    rows = list(csv.DictReader(io.StringIO(cli(
        "sql", "--lake", str(tmp_path), "--format", "csv",
        "SELECT count(*) AS n, min(hot_ts) AS first FROM matches_plant WHERE status = 'complete'"))))
    complete = [m for m in find_matches(EVENTS, plan) if m.status == "complete"]
    assert rows == [{"n": str(len(complete)), "first": str(min(m.situation("Hot").ts for m in complete))}]
    drawn = cli("plot", str(tmp_path / "plant.tpq"), "--lake", str(tmp_path), "--out", str(tmp_path / "t.png"))
    assert drawn.startswith(f"wrote {tmp_path / 't.png'}") and (tmp_path / "t.png").stat().st_size > 0
