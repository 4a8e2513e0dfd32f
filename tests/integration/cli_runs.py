"""`pielake run` as a separate process over the Line stream of test_gates_and_backfill, for the tests that must
kill a driver or start two at once, and the check that the lake then holds exactly what one clean run gives."""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock
from pielake.query.analyzer import load_query
from pielake.semantics.reference import find_matches
from pielake.streams import save_schema
from tests.helpers import process_env
from tests.integration.test_gates_and_backfill import EVENTS, QUERY, STREAM, write
from tests.spark.kernels import reference_rows, spark_rows

PIELAKE = str(Path(sys.executable).parent / "pielake")
# Two drivers at once share the machine's cores; and they run as cron jobs and slim containers often run, in the C
# locale, whose charset Java takes for ASCII (`pielake.engine.jvm`).
ONE_CORE = process_env(PIELAKE_SPARK_MASTER="local[1]", LC_ALL="C")
FOLDER = "Lakes in Zürich"  # where the lake, the query and the events are: a space and a letter beyond ASCII


def run_command(tmp_path: Path, run_id: str, bad_rows: tuple[dict, ...] = ()) -> tuple[Path, list[str]]:
    """A lake with the Line stream's schema, the `mid` query and its events file (plus `bad_rows`, for the
    quarantine), all in `FOLDER`; the command that runs it."""
    folder = tmp_path / FOLDER
    root = folder / "lake"
    save_schema(STREAM, root / "_streams")
    (folder / "mid.tpq").write_text(QUERY)
    events = write(folder / "events.json", [*EVENTS, *bad_rows])
    return root, [PIELAKE, "run", str(folder / "mid.tpq"), "--events", events, "--lake", str(root),
                  "--run-id", run_id, "--no-checks"]


def assert_one_clean_run(spark: SparkSession, root: Path) -> None:
    """Matches equal the brute-force reference, every event is there once, and no run holds the lock."""
    lake = Lake(spark, root)
    plan = load_query(QUERY, "mid")
    assert spark_rows(lake.read("matches_mid"), plan) == reference_rows(find_matches(EVENTS, plan), plan)
    events = lake.read("events_line")
    assert events.count() == events.select("m", "ts").distinct().count() == len(EVENTS)
    assert RunLock(root, "mid").holder() is None
