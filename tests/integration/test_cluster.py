"""The batch pipeline on a Spark standalone cluster (`infra/spark-cluster.sh`: a master and two workers on this
machine, from the Spark that pyspark ships) writes the same tables as a local-mode run of the same input."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.engine.client import free_port
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import load_query
from tests.helpers import process_env
from tests.integration.cli_runs import assert_one_clean_run, run_command
from tests.integration.test_gates_and_backfill import QUERY

pytestmark = pytest.mark.heavy(seconds=120)  # about this long in CI: scheduled first

SCRIPT = Path(__file__).parents[2] / "infra" / "spark-cluster.sh"
TABLES = ("events_line", "situations_mid", "pairs_mid", "matches_mid", "progress_mid")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The master URL and its status page; the cluster is stopped afterwards."""
    env = process_env(PIELAKE_CLUSTER_DIR=str(tmp_path_factory.mktemp("cluster")),
                      PIELAKE_CLUSTER_PORT=str(free_port()), PIELAKE_CLUSTER_UI_PORT=str(free_port()))
    started = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300,
                             check=False)
    try:
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip(), f"http://127.0.0.1:{env['PIELAKE_CLUSTER_UI_PORT']}/json/"
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, check=False, timeout=120)


def completed_apps(status: str, timeout: float = 60) -> list[str]:
    """The names of the applications the master lists as completed, once it lists any: a driver's JVM ends a
    moment after its Python process, when its standard input closes."""
    deadline = time.monotonic() + timeout
    while True:
        apps = [app["name"] for app in json.load(urllib.request.urlopen(status, timeout=10))["completedapps"]]
        if apps or time.monotonic() > deadline:
            return apps
        time.sleep(1)


def rows(lake: Lake, table: str) -> list[str]:
    return sorted(repr(sorted(r.asDict().items())) for r in lake.read(table).collect())


def test_a_batch_run_on_the_cluster_writes_the_tables_of_a_local_run(tmp_path: Path, spark: SparkSession,
                                                                     cluster: tuple[str, str]) -> None:
    master, status = cluster
    root, command = run_command(tmp_path / "cluster", "r1")
    done = subprocess.run([*command, "--master", master], capture_output=True, text=True, timeout=900, check=False,
                          env=process_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert completed_apps(status) == ["pielake"]  # it ran on the cluster's executors
    local_root, _ = run_command(tmp_path / "local", "r1")
    run_query(Lake(spark, local_root), load_query(QUERY, "mid"), "r1",
              RunRequest(events_path=str(local_root.parent / "events.json"), checks=False))
    for table in TABLES:
        assert rows(Lake(spark, root), table) == rows(Lake(spark, local_root), table), table
    assert_one_clean_run(spark, root)
