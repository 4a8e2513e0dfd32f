"""A whole scheduled run of a generated DAG (`airflow dags test`) writes the same tables the reference computes: on the
engine, every task a thin client on the `spark_connect` connection, after which the scheduler starts the downstream
DAG docs/operations.md shows and the DAG of a query over the matches, both scheduled on the matches Asset, and that
query's run publishes what the reference finds over them, a task of a published run cleared alone is skipped, and the
backfill DAG, triggered with a file of history, makes the tables those of one run over every event; and where no
engine runs, every step a real spark-submit, although the `situations` task's driver is killed (SIGKILL) in the
middle of its writes and Airflow retries the task, and a task of the published run cleared alone is skipped before
its JVM starts. (The DAG folder's integrity: tests/dags; the maintenance DAG: test_maintenance.py.)

Airflow runs in subprocesses with a metadata DB of its own under the test's folder, as `infra/` sets it up.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
from pyspark.sql import SparkSession

from pielake.engine.client import free_port
from pielake.engine.jvm import SUBMIT_ARGS
from pielake.engine.settings import JAVA_OPTIONS, driver_heap, master_settings
from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock
from pielake.query.analyzer import load_query
from pielake.semantics.reference import StreamEvents, find_matches_of, matches_stream
from tests.dags.test_dag_integrity import EXPECTED_GRAPH, SPANS
from tests.helpers import drawn, edge_node_hadoop, json_lines
from tests.integration.conftest import (
    BIN,
    QUERY,
    ROOT,
    airflow_command,
    assert_tables_equal_the_reference,
    one_scheduler_loop,
)

pytestmark = pytest.mark.heavy(seconds=770)  # about this long in CI: scheduled first


def kill_mid_write(lake: Path, app_name: str, table: str, killed: list[list[str]], done: threading.Event) -> None:
    """Once the first data file of staged `table` is on disk, SIGKILL the spark-submit driver (the JVM named
    `app_name`, the Python driver is its child) of the task that writes it; only its first attempt. `killed`
    gets the command line of the JVM."""
    staged = lake / "_staging" / table
    while not done.is_set() and not killed:
        if staged.is_dir() and any(staged.rglob("*.parquet")):
            for process in psutil.process_iter(["cmdline"]):
                if app_name in (process.info["cmdline"] or []) and "java" in process.info["cmdline"][0]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGKILL)
                        killed.append(process.info["cmdline"])
        time.sleep(0.005)


def landed_rows(env: dict[str, str]) -> list[dict]:
    """The events of the registered query's landed file (tests/integration/conftest.py writes it)."""
    return [json.loads(line) for line in (Path(env["AIRFLOW_HOME"]) / "flags.json").read_text().splitlines()]


def assert_published_the_reference(spark: SparkSession, airflow: dict[str, str], lake: Path) -> None:
    """The tables the reference computes over the events file, every gate's report, and the run's row in `runs`
    with every step."""
    rows = landed_rows(airflow)
    assert_tables_equal_the_reference(spark, lake, rows)
    validations = lake / "_checks" / "gx" / "uncommitted" / "validations" / "flag_pairs"
    assert sorted(p.relative_to(validations).parts[0] for p in validations.glob("*/*/*/*.json")) == [
        "events", "matches", "pairs", "situations"]
    [report] = spark.read.format("delta").load(str(lake / "runs")).collect()
    assert report.status == "published" and [s.step for s in report.steps] == list(EXPECTED_GRAPH)


def downstream_dag(lake: Path) -> str:
    """The downstream DAG docs/operations.md shows ("Acting on new matches"), on `lake` and flag_pairs' matches."""
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    [code] = re.findall(r"### Acting on new matches.*?```python\n(.*?)```", page, flags=re.DOTALL)
    return code.replace('Path("/data/lake")', f'Path("{lake}")').replace("aggressive_driving", "flag_pairs")


def test_a_scheduled_run_on_the_engine_writes_the_reference_tables_and_triggers_a_dag_on_its_matches(
        airflow: dict[str, str], tmp_path: Path, spark: SparkSession) -> None:
    lake, dags = tmp_path / "lake", tmp_path / "dags"
    dags.mkdir()
    (Path(airflow["PIELAKE_QUERIES"]) / "flag_spans.tpq").write_text(SPANS)  # a second level, over its matches
    (dags / "pielake_dags.py").symlink_to(ROOT / "dags" / "pielake_dags.py")
    (dags / "notify_flag_pairs.py").write_text(downstream_dag(lake))
    env = {**airflow, "PIELAKE_LAKE": str(lake), "AIRFLOW__CORE__DAGS_FOLDER": str(dags)}
    airflow_command(env, "dags", "reserialize")  # what the DAG processor does: both DAGs known, with their Assets
    for dag in ("notify_flag_pairs", "pielake_flag_spans"):
        airflow_command(env, "dags", "unpause", dag)  # as a user turns them on
    started = time.perf_counter()
    log = airflow_command(env, "dags", "test", "pielake_flag_pairs")
    assert "state=success" in log, log[-4000:]
    assert "spark-submit" not in log  # every task a thin client of the engine
    print(f"a scheduled run on the engine: {time.perf_counter() - started:.1f} s")
    assert_published_the_reference(spark, airflow, lake)
    assert_a_step_cleared_alone_is_skipped(env, lake)

    # One scheduler loop reads the Asset's new event and creates the downstream runs.
    one_scheduler_loop(env)
    for dag in ("notify_flag_pairs", "pielake_flag_spans"):
        listed = airflow_command(env, "dags", "list-runs", dag, "--output", "json").splitlines()
        runs = next(json.loads(line) for line in reversed(listed) if line.startswith("[{") or line == "[]")
        assert [r["run_id"].split("__")[0] for r in runs] == ["asset_triggered"], (dag, runs)

    # The query over flag_pairs' matches, registered beside it, publishes what the reference finds in them.
    log = airflow_command(env, "dags", "test", "pielake_flag_spans")
    assert "state=success" in log, log[-4000:]
    assert_level_two_equals_the_reference(spark, airflow, lake)

    assert_a_backfill_adds_history(spark, env, lake, tmp_path)


def assert_a_step_cleared_alone_is_skipped(env: dict[str, str], lake: Path) -> None:
    """A task of the published run run again without the tasks after it (`airflow tasks test` runs one task of an
    existing run, as a task cleared alone runs) is skipped: the run's publish is done, so the step would take the
    query's lock with no step after it to free it, and the query's next runs would wait behind it."""
    listed = airflow_command(env, "dags", "list-runs", "pielake_flag_pairs", "--output", "json").splitlines()
    run = max(next(json.loads(line) for line in reversed(listed) if line.startswith("[{")),
              key=lambda each: each["start_date"])  # the run just published: the test's Airflow may hold others
    log = airflow_command(env, "tasks", "test", "pielake_flag_pairs", "situations", run["run_id"])
    assert f"run {run['run_id']} of flag_pairs has ended (published at publish) and its last step publish is " \
           "success: situations, cleared without its downstream tasks, would run with no step after it" in log, \
        log[-4000:]
    assert RunLock(lake, "flag_pairs").holder() is None


def assert_a_backfill_adds_history(spark: SparkSession, env: dict[str, str], lake: Path, tmp_path: Path) -> None:
    """The backfill DAG, triggered with its params as a user does: a file of history in a range (a new key, and
    later flags of key j) makes the tables those of one run over every event; its row outside the range is
    quarantined with its reason, and the lake's `runs` says both of the query's runs published."""
    history = [*drawn(key="h", start=10, a="XXXX..", b="..XXXX"), *drawn(key="j", start=4, a="..XXX.", b="XX..XX")]
    outside = {"key": "h", "ts": 100, "a": True, "b": False}
    landed = tmp_path / "history.json"
    landed.write_text(json_lines([*history, outside]))
    conf = json.dumps({"from": "4", "to": "60", "events": str(landed)})
    log = airflow_command(env, "dags", "test", "pielake_flag_pairs_backfill", "--conf", conf)
    assert "state=success" in log, log[-4000:]
    rows = landed_rows(env)
    assert_tables_equal_the_reference(spark, lake, [*rows, *history])
    quarantined = Lake(spark, lake).read("quarantine_flags").collect()
    assert [(r.reason, json.loads(r.raw)["ts"]) for r in quarantined] == [("outside_backfill_range", 100)]
    runs = Lake(spark, lake).read("runs").filter("query = 'flag_pairs'").collect()
    assert sorted((r.mode, r.status) for r in runs) == [("backfill", "published"), ("incremental", "published")]


def assert_level_two_equals_the_reference(spark: SparkSession, airflow: dict[str, str], lake: Path) -> None:
    """The matches of `flag_spans` in `lake` are those the reference finds over flag_pairs' matches."""
    rows = landed_rows(airflow)
    upstream = matches_stream({"Flags": StreamEvents(rows)}, load_query(QUERY, "flag_pairs"))
    plan = load_query(SPANS, "flag_spans")
    want = sorted((m.key[0], m.situation("L").ts, m.situation("S").ts, m.detected_at, m.status)
                  for m in find_matches_of({"matches_flag_pairs": upstream}, plan))
    got = sorted((r.key, r.l_ts, r.s_ts, r.detected_at, r.status)
                 for r in Lake(spark, lake).read("matches_flag_spans").collect())
    assert got == want and want


def test_a_spark_submit_run_killed_mid_task_and_retried_writes_the_reference_tables(airflow: dict[str, str],
                                                                                     tmp_path: Path,
                                                                                     spark: SparkSession) -> None:
    """Where no engine runs (`PIELAKE_RUNNER=spark-submit`), each step is a spark-submit of `jobs/step.py`: on a
    worker of a cluster's edge node too, whose environment names a Spark Connect server for other tasks
    (`SPARK_REMOTE`), an HDFS as Hadoop's default filesystem, and, for its notebooks, Jupyter as PySpark's
    driver (which has no pyspark, and is not even installed here) and arguments of their own for spark-submit."""
    lake = tmp_path / "lake"
    killed: list[list[str]] = []
    done = threading.Event()
    watcher = threading.Thread(target=kill_mid_write, args=(lake, "pielake-flag_pairs-situations",
                                                           "segments_flag_pairs", killed, done))
    watcher.start()
    try:
        run = subprocess.run([str(BIN / "airflow"), "dags", "test", "pielake_flag_pairs"], text=True,
                             env={**airflow, "PIELAKE_LAKE": str(lake), "PIELAKE_RUNNER": "spark-submit",
                                  "SPARK_REMOTE": f"sc://localhost:{free_port()}",
                                  "HADOOP_CONF_DIR": str(edge_node_hadoop(tmp_path / "hadoop")),
                                  "PYSPARK_DRIVER_PYTHON": "jupyter", SUBMIT_ARGS: "--master yarn pyspark-shell"},
                             capture_output=True, timeout=1200, check=False)
    finally:
        done.set()
        watcher.join()
    assert killed, "the situations task was not killed while writing"
    assert f"-Xmx{driver_heap()}" in killed[0], "spark-submit gives the step's JVM pielake's driver heap"
    assert set(JAVA_OPTIONS.split()) <= set(killed[0]), "and pielake's JVM options"
    assert {f"{k}={v}" for k, v in master_settings("local[2]").items()} <= set(killed[0]), \
        "and the settings of the connection's local master, known only as the task runs"
    log = run.stdout + run.stderr
    assert run.returncode == 0 and "state=success" in log, log[-4000:]
    assert "up_for_retry" in log.lower()
    assert_published_the_reference(spark, airflow, lake)
    assert_a_step_cleared_alone_is_skipped({**airflow, "PIELAKE_LAKE": str(lake), "PIELAKE_RUNNER": "spark-submit"},
                                           lake)

