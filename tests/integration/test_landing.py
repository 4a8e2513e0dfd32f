"""A query registered with a landing folder runs when files land there: Airflow's own triggerer runs the folder's
watcher, whose Asset event queues a run of the query's DAG; each run, on the engine, takes the files that landed
since the last one and publishes what the reference computes over every file landed so far; a run that finds none is
skipped (`pielake.orchestration.landing`), and so is a published run's `take_landed` cleared alone. From the command
line, `pielake run --landing` takes them the same way, into the same ledger.

Airflow runs in subprocesses with a metadata DB of its own under the test's folder, as `infra/` sets it up.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake.cli import main
from pielake.lake.delta import Lake
from tests.helpers import drawn, json_lines, land
from tests.integration.conftest import (
    BIN,
    QUERY,
    airflow_command,
    assert_tables_equal_the_reference,
    one_scheduler_loop,
)

pytestmark = pytest.mark.heavy(seconds=235)  # about this long in CI


@pytest.fixture
def landing(airflow: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """Airflow with `flag_pairs` registered on a landing folder, its DAG turned on, and its triggerer running."""
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "flag_pairs.tpq").write_text(QUERY)
    (queries / "flag_pairs.yaml").write_text(f"landing: {tmp_path / 'landing'}/*.json\n")
    env = {**airflow, "PIELAKE_QUERIES": str(queries), "PIELAKE_LAKE": str(tmp_path / "lake"),
           "PIELAKE_LANDING_POLL": "0.5", "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "30"}
    airflow_command(env, "dags", "reserialize")
    airflow_command(env, "dags", "unpause", "pielake_flag_pairs")  # as a user turns it on: its watcher runs
    airflow_command(env, "dags", "reserialize")  # what the DAG processor does next: the watcher's trigger stored
    log = tmp_path / "triggerer.log"
    with log.open("w") as out:
        triggerer = subprocess.Popen([str(BIN / "airflow"), "triggerer"], env=env, stdout=out, stderr=out)
    try:
        yield env
    finally:
        triggerer.terminate()
        triggerer.wait(timeout=60)


def landed_events(env: dict[str, str], count: int, seconds: float = 90) -> list[dict]:
    """The payloads of the first `count` Asset events the landing's watcher fired, once there are that many."""
    deadline = time.monotonic() + seconds
    while True:
        with sqlite3.connect(Path(env["AIRFLOW_HOME"]) / "airflow.db") as db:
            extras = [json.loads(e) for (e,) in db.execute("SELECT extra FROM asset_event ORDER BY id")]
        fired = [e["payload"] for e in extras if e.get("from_trigger")]
        if len(fired) >= count or time.monotonic() > deadline:
            return fired
        time.sleep(0.5)


def test_files_landing_in_a_query_s_folder_queue_its_runs_which_take_them_once_and_publish_the_reference(
        landing: dict[str, str], tmp_path: Path, spark: SparkSession) -> None:
    env, inbox, lake = landing, tmp_path / "landing", tmp_path / "lake"
    first = drawn(key="k", a="XXX...XX.XXX....", b=".XXXX..XXX......")
    land(inbox, "flags-1.json", json_lines(first))
    assert landed_events(env, 1) == [{"landing": f"{inbox}/*.json", "files": ["flags-1.json"]}]
    # One scheduler loop turns the event into a run of the query's DAG; `dags test` then runs the DAG's tasks in
    # this process's turn.
    one_scheduler_loop(env)
    listed = airflow_command(env, "dags", "list-runs", "pielake_flag_pairs", "--output", "json").splitlines()
    runs = next(json.loads(line) for line in reversed(listed) if line.startswith("[{") or line == "[]")
    assert [r["run_id"].split("__")[0] for r in runs] == ["asset_triggered"]

    log = airflow_command(env, "dags", "test", "pielake_flag_pairs")
    assert "state=success" in log and "Flags: took 1 file(s)" in log, log[-4000:]
    assert_tables_equal_the_reference(spark, lake, first)

    later = [*drawn(key="k", start=16, a="..XX..", b="XXXXX."), *drawn(key="j", a="XX..", b="..XX")]
    land(inbox, "flags-2.json", json_lines(later))
    assert landed_events(env, 2)[1:] == [{"landing": f"{inbox}/*.json", "files": ["flags-2.json"]}]
    # The published run's take_landed cleared alone (`airflow tasks test` runs one task of an existing run) takes
    # nothing: no ingest of that run would read what it took, and no later run would take it again.
    [published] = [r.run_id for r in Lake(spark, lake).read("runs").collect()]
    log = airflow_command(env, "tasks", "test", "pielake_flag_pairs", "take_landed", published)
    assert "take_landed, cleared without its downstream tasks, would run with no step after it" in log, log[-4000:]
    assert not list((lake / "_landed").rglob("flags-2.json"))
    log = airflow_command(env, "dags", "test", "pielake_flag_pairs")
    assert "state=success" in log and "Flags: took 1 file(s)" in log, log[-4000:]
    assert_tables_equal_the_reference(spark, lake, [*first, *later])

    log = airflow_command(env, "dags", "test", "pielake_flag_pairs")  # nothing landed since: skipped
    assert "state=success" in log and "no file has landed since the last run" in log, log[-4000:]
    ingested = sorted((r.mode, r.status, next(s for s in r.steps if s.step == "ingest").rows["rows in"])
                      for r in Lake(spark, lake).read("runs").collect())
    assert ingested == [("incremental", "published", n) for n in sorted((len(first), len(later)))]
    taken = sorted(p.relative_to(lake / "_landed" / "flag_pairs" / "Flags").parts[1]
                   for p in (lake / "_landed").rglob("*.json"))
    assert taken == ["flags-1.json", "flags-2.json"]
    assert sorted(p.name for p in inbox.iterdir()) == ["flags-1.json", "flags-2.json"]  # left where they landed
    assert len(landed_events(env, 3, seconds=2)) == 2  # the watcher fired once a file


def run_landed(query: Path, landing: str, lake: Path) -> str:
    """`pielake run --landing` of `query`, gates off, as a micro-batch of what landed; it succeeds. Its output."""
    result = CliRunner().invoke(main, ["run", str(query), "--landing", landing, "--lake", str(lake), "--no-checks"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_a_command_line_run_takes_what_landed_since_the_query_s_last_run_into_the_same_ledger(
        tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    inbox, lake = tmp_path / "landing", tmp_path / "lake"
    (tmp_path / "flag_pairs.tpq").write_text(QUERY)

    def run() -> str:
        return run_landed(tmp_path / "flag_pairs.tpq", "landing/*.json", lake)  # from where it runs

    monkeypatch.chdir(tmp_path)
    first = drawn(key="k", a="XXX...XX.XXX....", b=".XXXX..XXX......")
    land(inbox, "flags-1.json", json_lines(first))
    assert "rows in = 16 events" in run()
    assert_tables_equal_the_reference(spark, lake, first)
    later = [*drawn(key="k", start=16, a="..XX..", b="XXXXX."), *drawn(key="j", a="XX..", b="..XX")]
    land(inbox, "flags-2.json", json_lines(later))
    assert f"rows in = {len(later)} events" in run()
    assert_tables_equal_the_reference(spark, lake, [*first, *later])
    assert "since query flag_pairs last took files: nothing to run" in run()
    runs = Lake(spark, lake).read("runs").collect()
    assert [r.mode for r in runs] == ["incremental", "incremental"]
    assert sorted(p.name for p in (lake / "_landed" / "flag_pairs" / "Flags").glob("*/*")) == [
        "flags-1.json", "flags-2.json"]


def test_files_landing_in_partition_folders_are_taken_by_their_path_each_folder_s_value_a_column(
        tmp_path: Path, spark: SparkSession) -> None:
    """A writer that partitions by key (`key=k/part-0.json`, as Spark, Hive and log shippers write) lands files of
    the same name in several folders: each is taken once, by its path in the landing folder, and its folder's
    value is its rows' key."""
    inbox, lake = tmp_path / "landing", tmp_path / "lake"
    (tmp_path / "flag_pairs.tpq").write_text(QUERY)

    def run() -> str:
        return run_landed(tmp_path / "flag_pairs.tpq", f"{inbox}/*.json", lake)

    def without_key(events: list[dict]) -> str:
        return json_lines([{name: value for name, value in event.items() if name != "key"} for event in events])

    k, j = drawn(key="k", a="XXX...XX.XXX....", b=".XXXX..XXX......"), drawn(key="j", a="XX..", b="..XX")
    land(inbox / "key=k", "part-0.json", without_key(k))
    land(inbox / "key=j", "part-0.json", without_key(j))
    land(inbox / "archive", "part-0.json", without_key(k))  # no partition: not the folder's data
    assert f"rows in = {len(k) + len(j)} events" in run()
    assert_tables_equal_the_reference(spark, lake, [*k, *j])
    later = drawn(key="k", start=16, a="..XX..", b="XXXXX.")
    land(inbox / "key=k", "part-1.json", without_key(later))
    assert f"rows in = {len(later)} events" in run()
    assert_tables_equal_the_reference(spark, lake, [*k, *j, *later])
    assert "nothing to run" in run()
    ledger = lake / "_landed" / "flag_pairs" / "Flags"
    assert sorted(str(p.relative_to(p.parents[1])) for p in ledger.rglob("*.json")) == [
        "key=j/part-0.json", "key=k/part-0.json", "key=k/part-1.json"]
