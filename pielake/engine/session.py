"""The one place a SparkSession is built: Delta configured, UTC, sized for the machine.

Delta's jars are resolved from Maven Central by `configure_spark_with_delta_pip` at the first start and cached
in the Ivy cache (~/.ivy2.5.2), so later starts are offline; the JVMs started here take turns (`_jvm_start_turn`).
`master` is `local[*]` by default; pass any master URL (`spark://host:7077`, `yarn`, `k8s://...`) to run elsewhere.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from delta import configure_spark_with_delta_pip
from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
# The heap of a run's Spark (in local mode all of it): enough for the chain benchmarks at 10^7 events and 18
# symbols, no faster when larger (docs/performance.md). Raise it (PIELAKE_DRIVER_MEMORY) for larger inputs.
DEFAULT_DRIVER_MEMORY = "2500m"
# The JDK copies a heap buffer written to (or read from) a file channel through a direct buffer, and keeps that
# buffer for its thread for good, as large as the largest copy so far. Spark's task threads live as long as the
# session and move blocks to and from disk in large slices, so without a cap each keeps a buffer as large as the
# largest block outside the heap; capped, a larger copy gets a buffer of its own that is freed at once.
# G1 sizes its young generation to meet a pause-time goal, 200 ms by default. A batch job wants throughput, not
# short pauses: with a goal of 1000 ms G1 collects less often.
JAVA_OPTIONS = "-Djdk.nio.maxCachedBufferSize=262144 -XX:MaxGCPauseMillis=1000"
# A local session's shuffle blocks never leave the machine: the JVM that writes them reads them back, mostly from
# the page cache, so compressing them (LZ4) spends CPU to save disk space only. A cluster's shuffles cross the
# network, where compression pays: they keep Spark's default.
LOCAL_SHUFFLES = {"spark.shuffle.compress": "false", "spark.shuffle.spill.compress": "false"}
# Spark compiles the code it generates for a query's stages (Janino) and keeps the classes in a cache keyed by their
# source, 100 by default. One run of a chain query plans about twice that many, so with the default the next run of
# the same query finds every class evicted, compiles them again, and HotSpot compiles their hot loops again. Room
# for a few queries' classes lets a session that runs queries again (the engine, the bench, the tests) reuse them.
CODEGEN_CACHE_ENTRIES = 1000
SCALA_VERSION = "2.13"  # Spark 4 is built for Scala 2.13 only
IVY_CACHE = Path.home() / ".ivy2.5.2"  # Spark 4's default `spark.jars.ivy`


@contextmanager
def _jvm_start_turn() -> Iterator[None]:
    """Hold the machine's turn to start a JVM that resolves jars.

    Two JVMs resolving into an empty Ivy cache at once corrupt each other's download ("Downloaded file size (0)
    doesn't match expected Content Length", then the gateway exits), as two test workers on a fresh machine do.
    A start takes seconds, so taking turns costs little.
    """
    IVY_CACHE.mkdir(parents=True, exist_ok=True)
    with (IVY_CACHE / ".pielake-start.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def driver_heap() -> str:
    """The driver's heap (in local mode all of Spark's): `PIELAKE_DRIVER_MEMORY` or `DEFAULT_DRIVER_MEMORY`."""
    return os.environ.get("PIELAKE_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY)


def delta_package() -> str:
    """The Maven coordinate of Delta matching the installed delta-spark, for `spark-submit --packages`."""
    return f"io.delta:delta-spark_{SCALA_VERSION}:{version('delta-spark')}"


def workers_python() -> str:
    """The interpreter PySpark's workers run: `PYSPARK_PYTHON`, else this one. It must be one that has pielake's
    dependencies, not whatever python3 is on PATH."""
    return os.environ.get("PYSPARK_PYTHON", sys.executable)


@dataclass(frozen=True)
class SubmitSettings:
    """What every spark-submit of a pielake job needs besides its master: Delta's package, the driver's heap
    (spark-submit starts the driver's JVM, so the job cannot size it) and the interpreter with pielake's
    dependencies for PySpark's driver and workers. `submit_arguments` spells them for the command line; Airflow's
    `SparkSubmitOperator` takes them as they are (`pielake.orchestration.airflow`)."""

    packages: str
    driver_memory: str
    python: str

    @property
    def conf(self) -> dict[str, str]:
        return {"spark.pyspark.python": self.python, "spark.pyspark.driver.python": sys.executable,
                **engine_settings()}


def engine_settings() -> dict[str, str]:
    """What every pielake session has, built here or by spark-submit: UTC, room for the generated code of a few
    queries (`CODEGEN_CACHE_ENTRIES`), the JVM options."""
    return {"spark.sql.session.timeZone": "UTC", "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
            **java_options()}


def java_options() -> dict[str, str]:
    """`JAVA_OPTIONS` for the driver and the executors, as their default options: Spark puts them before any
    `extraJavaOptions`, so a user's own (in spark-defaults.conf, or the lake metastore's) still apply."""
    return {"spark.driver.defaultJavaOptions": JAVA_OPTIONS, "spark.executor.defaultJavaOptions": JAVA_OPTIONS}


def master_settings(master: str) -> dict[str, str]:
    """The settings that depend on where the session runs: uncompressed shuffles in local mode. An Airflow step
    takes its master from the `spark_default` connection, unknown when the DAG is built: it keeps Spark's."""
    return dict(LOCAL_SHUFFLES) if master.startswith("local") else {}


def submit_settings() -> SubmitSettings:
    return SubmitSettings(delta_package(), driver_heap(), workers_python())


def submit_arguments(master: str = DEFAULT_MASTER) -> list[str]:
    """spark-submit arguments that give a job the same Delta-enabled session `build_session` gives."""
    settings = submit_settings()
    conf = [part for key, value in {**settings.conf, **master_settings(master)}.items()
            for part in ("--conf", f"{key}={value}")]
    return ["--master", master, "--packages", settings.packages, "--driver-memory", settings.driver_memory, *conf]


@contextmanager
def settings_within(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Session settings that hold for the Spark work planned and run within, restored after (unset where they
    were). A setting Spark reads when it plans a query (a scan's file splits, a write's file size) must be in place
    when the action runs, not when the DataFrame is built: so the action belongs inside."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def resolve_jars(packages: Sequence[str]) -> list[str]:
    """The local jar files of Maven `packages` (and their dependencies), resolved as every session resolves them.

    A class the JVM must find on its system class path (Hive's sessions in the Thrift server look only there) can
    only be put there before the JVM starts, and only the resolution says which files that is. So a JVM of its own
    resolves them (offline once the Ivy cache has them) and is shut down again.
    """
    with _jvm_start_turn():
        gateway = launch_gateway(SparkConf().set("spark.jars.packages", ",".join(packages)))
    try:
        jars = gateway.jvm.java.lang.System.getProperty("spark.jars") or ""
    finally:
        gateway.shutdown()
        gateway.proc.stdin.close()  # the launcher's JVM ends when its stdin closes
        gateway.proc.wait()
    return [jar.removeprefix("file://") for jar in jars.split(",") if jar]


def build_session(master: str | None = None, app_name: str = "pielake", *, ui: bool = False,
                  shuffle_partitions: int | None = None, driver_memory: str | None = None,
                  conf: Mapping[str, str] | None = None, packages: Sequence[str] = ()) -> SparkSession:
    """A SparkSession with Delta Lake enabled.

    Args:
        master: Spark master URL; `PIELAKE_SPARK_MASTER` or `local[*]` when not given.
        app_name: the application name shown in the Spark UI and logs.
        ui: start the Spark UI (off for tests and CLI runs).
        shuffle_partitions: `spark.sql.shuffle.partitions`; defaults to 4 x the local cores, enough to keep every
            core busy without thousands of tiny tasks on small data (adaptive execution coalesces the rest).
        driver_memory: `spark.driver.memory`, when not `driver_heap()`. Under spark-submit the driver's JVM is
            running already, with the heap spark-submit gave it (`submit_settings`).
        conf: further Spark settings (the SQL endpoint's metastore and Thrift port), applied last.
        packages: Maven coordinates to load besides Delta's (a metastore's JDBC driver).
    """
    master = master or os.environ.get("PIELAKE_SPARK_MASTER", DEFAULT_MASTER)
    python = os.environ["PYSPARK_PYTHON"] = workers_python()  # PySpark's own launches read the environment too
    partitions = shuffle_partitions or 4 * (os.cpu_count() or 2)
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.pyspark.python", python)
        .config("spark.python.daemon.module", "pielake.engine.worker_daemon")  # workers forked with numpy & co.
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # The runs kernel concatenates a task's batches: fewer, larger batches cost it fewer concatenations
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory or driver_heap())
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        # PySpark records the Python call site of every Column function for error messages, several JVM round
        # trips each, a large share of building a plan of many symbols. The call sites would be pielake's own
        # lines, which the error's stack trace shows anyway.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    for key, value in {**engine_settings(), **master_settings(master), **(conf or {})}.items():
        builder = builder.config(key, value)
    with _jvm_start_turn():
        session = configure_spark_with_delta_pip(builder, extra_packages=list(packages)).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
