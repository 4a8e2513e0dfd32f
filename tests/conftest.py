"""Test configuration shared by every folder: markers follow the folder a test lives in, long files run first."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.engine.client import SPARK_REMOTE, EngineAddress, free_port, free_ports, lake_engine
from pielake.engine.session import build_session
from tests.helpers import SHORT_LIVED_JVM, edge_node_hadoop

# Importing Airflow (the landing trigger's tests do) sets the root logger to INFO, with a handler on the stdout pytest
# captures: py4j's INFO line for each connection it closes as a worker exits would then be written to a closed stream.
logging.getLogger("py4j").setLevel(logging.WARNING)

# Spark hands a TIMESTAMP to Python as the wall clock of the process's zone, and the tests read what they collect
# as UTC's (`tests.strategies.kernel_time`): so they run in UTC, whatever zone the machine is set to. A test of
# how pielake reads on a machine set to another zone sets that zone itself (`tests.helpers.local_zone`).
os.environ["TZ"] = "UTC"
time.tzset()

FIXTURES = Path(__file__).parent / "fixtures"
MARKERS = {"unit": pytest.mark.unit, "spark": pytest.mark.spark, "dags": pytest.mark.dags,
           "integration": pytest.mark.integration}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers follow the folder; the longest test files come first.

    `make test` hands whole files to two workers in collection order (pytest-xdist `--dist loadfile
    --no-loadscope-reorder`). A long file handed out last runs alone while the other worker idles, and xdist's
    own reordering (most tests first) puts our longest files, which hold one test each, exactly there. So files
    go longest first, by their `heavy(seconds=…)` mark; the rest keep their order (the sort is stable).
    """
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])
    items.sort(key=lambda item: -expected_seconds(item))


def expected_seconds(item: pytest.Item) -> float:
    heavy = item.get_closest_marker("heavy")
    return float(heavy.kwargs["seconds"]) if heavy else 0.0


@pytest.fixture
def suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the gates' suites (`expectations/`) that the gates read instead: a test extends it as a user does."""
    from pielake.pipeline import gates  # noqa: PLC0415 (imports Spark's types: only the tests that use it pay)

    folder = tmp_path / "expectations"
    shutil.copytree(gates.EXPECTATIONS_DIR, folder)
    monkeypatch.setattr(gates, "EXPECTATIONS_DIR", folder)
    return folder


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One SparkSession for the whole run (only started if a test asks): local[2], UTC, UI off, Delta on."""
    session = build_session("local[2]", app_name="pielake-tests", shuffle_partitions=2, driver_memory="4g")
    yield session
    # py4j says at the root logger's INFO, not its own, that it could not send a command to a JVM that is going
    # (the Java objects Python frees as the worker exits): not on Airflow's stream pytest has closed by then.
    logging.getLogger().setLevel(logging.WARNING)
    session.stop()


@dataclass(frozen=True)
class EngineForTests:
    """An engine started for the tests: its lake and its address."""

    lake: Path
    address: EngineAddress
    environment: dict[str, str]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`pielake engine ARGS --lake LAKE` as a user runs it, from a folder that holds a `pielake` package of its
        own (another checkout, say): the engine runs the installed pielake, not the folder's."""
        return subprocess.run([str(Path(sys.executable).parent / "pielake"), "engine", *args, "--lake", str(self.lake)],
                              env=self.environment, capture_output=True, text=True, timeout=600, check=False,
                              cwd=another_pielake(self.lake.parent / "elsewhere"))


def another_pielake(folder: Path) -> Path:
    """`folder`, holding a `pielake` package that cannot be imported."""
    (folder / "pielake").mkdir(parents=True, exist_ok=True)
    (folder / "pielake" / "__init__.py").write_text('raise ImportError("not the installed pielake")\n')
    return folder


def long_lived_environment() -> dict[str, str]:
    """This process's environment for an engine: the long-lived JVM an engine is, on the tests' two cores."""
    return {**{k: v for k, v in os.environ.items() if k not in SHORT_LIVED_JVM}, "PIELAKE_SPARK_MASTER": "local[2]"}


def start_engine(lake: Path, *, warm_up: int = 0, ui: bool = False) -> EngineForTests:
    """An engine on `lake`, on free ports, with the long-lived JVM an engine is (not the tests' short-lived one),
    after `warm_up` micro-batches of its warm-up (none unless asked: a test restarting engines pays each one),
    serving Spark's UI if `ui`. It is started as from the shell of a cluster's edge node, which names it for its
    notebooks (`SPARK_REMOTE`, PySpark's default) and an HDFS as Hadoop's default filesystem: its own Spark is
    classic, and its lake this machine's folder, all the same."""
    port = free_ports(2)
    engine = EngineForTests(lake, EngineAddress("127.0.0.1"),
                            {**long_lived_environment(), SPARK_REMOTE: f"sc://localhost:{port}",
                             "HADOOP_CONF_DIR": str(edge_node_hadoop(lake.parent / f"{lake.name}-hadoop"))})
    ui_port = ("--ui-port", str(free_port())) if ui else ()
    started = engine.cli("start", "--port", str(port), "--jdbc-port", str(free_port()), "--refresh", "1",
                         "--warm-up", str(warm_up), *ui_port)
    assert started.returncode == 0, started.stdout + started.stderr
    return EngineForTests(lake, lake_engine(lake), engine.environment)


@contextmanager
def _exclusive(path: Path) -> Iterator[Path]:
    """Hold an exclusive lock on `path` (created if missing) while the block runs."""
    with path.open("a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield path


def _users(path: Path, change: int) -> int:
    count = (int(path.read_text(encoding="utf-8")) if path.exists() else 0) + change
    path.write_text(str(count), encoding="utf-8")
    return count


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[EngineForTests]:
    """One engine for the test run, on a lake of its own (runs name their lakes), started by the first worker that
    asks and shared by every worker (pytest-xdist): an engine is a long-lived JVM, and two would split the
    machine's cores and memory between them. It warms up as a user's does, with one micro-batch: the tests that
    run on it find its code paths compiled. It serves Spark's UI, which its tests read. The last worker done with
    it stops it."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    lake, users = shared / "engine-lake", shared / "engine-users"
    with _exclusive(shared / "engine.lock"):
        started = (EngineForTests(lake, lake_engine(lake), long_lived_environment()) if _users(users, 1) > 1
                   else start_engine(lake, warm_up=1, ui=True))
    yield started
    with _exclusive(shared / "engine.lock"):
        if _users(users, -1) == 0:
            started.cli("stop")
