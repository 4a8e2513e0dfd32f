"""Two runs of one query started at once: one runs, the other stops at once with exit code 3 and one
clear line, and the tables are exactly what one run gives."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.registry import STAGES
from pielake.pipeline.runner import Run, run_query
from pielake.query.analyzer import load_query
from pielake.semantics.reference import find_matches
from pielake.streams import save_schema
from tests.conftest import another_pielake
from tests.integration.cli_runs import ONE_CORE, assert_one_clean_run, run_command
from tests.integration.test_gates_and_backfill import EVENTS, QUERY, STREAM, write
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=100)  # about this long in CI: scheduled first

PEAK = """FROM Line PARTITION BY m
DEFINE High AS v > 5, Low AS v < 2
PATTERN High before Low
WITHIN 10 s
"""


def test_two_runs_at_once_one_stops_cleanly_and_tables_stay_whole(tmp_path: Path, spark: SparkSession) -> None:
    commands = [run_command(tmp_path, run_id) for run_id in ("r1", "r2")]
    # Started where a cron job may start, in a folder holding a checkout of another pielake: they run the installed.
    elsewhere = another_pielake(tmp_path / "home")
    runs = [subprocess.Popen(command, env=ONE_CORE, cwd=elsewhere, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _, command in commands]
    outputs = [run.communicate(timeout=900) for run in runs]
    codes = [run.returncode for run in runs]
    assert sorted(codes) == [0, 3], outputs
    refused = outputs[codes.index(3)][1].strip().splitlines()[-1]
    assert refused.startswith("error: query mid is being run by run r") and "try again" in refused
    assert_one_clean_run(spark, commands[0][0])


def test_two_queries_over_one_stream_ingesting_side_by_side_admit_every_event_once(tmp_path: Path,
                                                                                   spark: SparkSession) -> None:
    """Two queries over one stream, scheduled at the same minute: both ingest before either admits, as Airflow
    interleaves the tasks of two DAGs, each step handing its rows on in `_staging/`. Each admits its own file's
    events, an event both files hold is admitted once (by the first), and each query's matches are the reference's
    over the events the stream held when it ran."""
    save_schema(STREAM, tmp_path / "lake" / "_streams")
    lake = Lake(spark, tmp_path / "lake")
    files = {"mid": EVENTS[:30], "peak": EVENTS[20:]}  # ten events in both
    runs = {name: Run(lake, load_query(QUERY if name == "mid" else PEAK, name), "minute",
                      RunRequest(events_path=write(tmp_path / f"{name}.json", rows)))
            for name, rows in files.items()}
    for run in runs.values():
        run.step("ingest")
    admitted = {name: [run.step(step.name) for step in STAGES.steps(run.job.plan, parallel=False)[1:]][1]
                for name, run in runs.items()}  # each run's situations stage, which admits its events
    assert "events another run appended first" not in admitted["mid"].details
    assert admitted["peak"].details["events another run appended first"] == 10
    events = lake.read("events_line")
    assert events.count() == events.select("m", "ts").distinct().count() == len(EVENTS)
    held = {"mid": files["mid"], "peak": EVENTS}  # mid ran before peak's events were admitted
    for name, run in runs.items():
        plan = run.job.plan
        assert spark_rows(lake.read(f"matches_{name}"), plan) == reference_rows(find_matches(held[name], plan), plan)


def test_an_event_another_run_appended_with_other_values_stops_the_run_and_a_rerun_quarantines_it(
        tmp_path: Path, spark: SparkSession) -> None:
    """Both runs ingested the same key and time with different values before either appended: the second to append
    stops with a clear error, appending nothing; run again, its ingest quarantines the event as conflicting."""
    save_schema(STREAM, tmp_path / "lake" / "_streams")
    lake = Lake(spark, tmp_path / "lake")
    other = {**EVENTS[4], "v": EVENTS[4]["v"] + 100}
    files = {"mid": write(tmp_path / "mid.json", EVENTS[:10]), "peak": write(tmp_path / "peak.json", [other])}
    runs = {name: Run(lake, load_query(QUERY if name == "mid" else PEAK, name), "minute",
                      RunRequest(events_path=path, checks=False)) for name, path in files.items()}
    for run in runs.values():
        run.step("ingest")
    runs["mid"].step("situations")
    with pytest.raises(PielakeError, match=r"1 staged events of stream Line have the key and time of events another "
                                           r"run appended meanwhile, with other values; run again"):
        runs["peak"].step("situations")
    assert lake.read("events_line").count() == 10
    again = run_query(lake, load_query(PEAK, "peak"), "again", RunRequest(events_path=files["peak"], checks=False))
    assert (again.ingest.events, again.ingest.quarantined) == (0, 1)
    [reason] = [r.reason for r in lake.read("quarantine_line").collect()]
    assert reason.startswith("conflicting_duplicate")
