"""What the integration tests that run Airflow share: an Airflow home per test module, and its commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.query.analyzer import load_query
from pielake.semantics.reference import derive_situations, find_matches
from tests.conftest import EngineForTests
from tests.helpers import FLAGS_QUERY as QUERY
from tests.helpers import drawn, json_lines, process_env

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory, engine: EngineForTests) -> dict[str, str]:
    """An Airflow home with a migrated SQLite metadata DB, a query registry of one query, a lake, and the
    connection to the tests' engine."""
    home = tmp_path_factory.mktemp("airflow")
    (home / "queries").mkdir()
    (home / "queries" / "flag_pairs.tpq").write_text(QUERY)
    # Key k reaches 84 s: its matches starting by 24 s are final (WITHIN 1 min), for a query over them to read.
    rows = drawn(key="k", a="XXX...XX.XXX......XX..X" + "." * 62, b=".XXXX..XXX.........XXX.XX" + "." * 60) \
        + drawn(key="j", a="XX..", b="..XX")
    (home / "flags.json").write_text(json_lines(rows))
    (home / "queries" / "flag_pairs.yaml").write_text(f'schedule: "*/5 * * * *"\nevents: {home / "flags.json"}\n')
    env = process_env(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                      AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"), PIELAKE_QUERIES=str(home / "queries"),
                      PIELAKE_LAKE=str(home / "lake"), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
                      AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
                      AIRFLOW_CONN_PIELAKE_ENGINE=engine.address.airflow_connection(),
                      PYSPARK_PYTHON=sys.executable, PIELAKE_RETRY_DELAY="1")
    subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env


def airflow_command(env: dict[str, str], *args: str, timeout: float = 600) -> str:
    """`airflow ARGS` in `env`, as a user runs it; its output. It must succeed, and end within `timeout`: one that
    does not fails with the last of what it printed, which says where it stopped."""
    try:
        run = subprocess.run([str(BIN / "airflow"), *args], text=True, env=env, capture_output=True,
                             timeout=timeout, check=False)
    except subprocess.TimeoutExpired as hung:
        printed = [part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                   for part in (hung.stdout, hung.stderr)]
        pytest.fail(f"airflow {' '.join(args)} did not end in {timeout:.0f} s; the last it printed:\n"
                    f"{''.join(printed)[-4000:]}")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    return log


def one_scheduler_loop(env: dict[str, str]) -> None:
    """One loop of Airflow's scheduler, which turns Asset events into DAG runs, starting none of their tasks: a
    task of Airflow 3 reports to an API server, which no test runs, and the scheduler's exit waits for the tasks
    it started. So the default pool has no slot during the loop; the executor's workers are spawned, not forked,
    so with nothing queued there are none for the exit to wait on (forked, all of `[core] parallelism` start at
    once and each must reach its queue); and no log server is started, as no task writes a log."""
    airflow_command(env, "pools", "set", "default_pool", "0", "no task starts in the test's scheduler loop")
    try:
        airflow_command({**env, "AIRFLOW__SCHEDULER__MP_START_METHOD": "spawn"}, "scheduler", "--num-runs", "1",
                        "--skip-serve-logs", timeout=300)
    finally:
        airflow_command(env, "pools", "set", "default_pool", "128", "Default pool")


def assert_tables_equal_the_reference(spark: SparkSession, lake: Path, rows: list[dict]) -> None:
    """The matches and situations of `flag_pairs` in `lake` are those the reference computes over `rows`."""
    got = sorted((r.key, r.a_ts, r.b_ts, r.detected_at, r.status)
                 for r in Lake(spark, lake).read("matches_flag_pairs").collect())
    plan = load_query(QUERY)
    want = sorted((m.key[0], m.situation("A").ts, m.situation("B").ts, m.detected_at, m.status)
                  for m in find_matches(rows, plan))
    assert got == want and want
    situations = sorted((r.key, r.symbol, r.ts, r.te)
                        for r in Lake(spark, lake).read("situations_flag_pairs").collect())
    assert situations == sorted((s.key[0], s.symbol, s.ts, s.te) for s in derive_situations(rows, plan))
