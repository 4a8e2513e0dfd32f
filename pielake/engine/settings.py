"""What every pielake Spark session has, whether built here or by spark-submit: the settings, the heap, Delta's
package and the Python its workers run. Nothing here imports Spark, so Airflow's DAG files read it cheaply."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from pielake.engine.class_archive import archive_options
from pielake.engine.jvm import file_option
from pielake.engine.memory import BESIDE_HEAP_MB, SMALLEST_HEAP_MB, allowed_mb
from pielake.environment import number
from pielake.errors import PielakeError

DEFAULT_MASTER = "local[*]"
# The heap of a run's Spark (in local mode all of it): enough for the chain benchmarks at 10^7 events and 18
# symbols, no faster when larger (docs/performance.md). Raise it (PIELAKE_DRIVER_MEMORY) for larger inputs. Where
# the machine or its container allows less than it and what runs beside it, the default is what they leave.
DEFAULT_HEAP_MB = 2500
DEFAULT_DRIVER_MEMORY = f"{DEFAULT_HEAP_MB}m"
HEAP_SIZE = re.compile(r"([1-9][0-9]*)([kmgt]?)", re.IGNORECASE)  # the JVM's own form of a size (`-Xmx`): bytes, k … t
# The JDK copies a heap buffer written to (or read from) a file channel through a direct buffer, and keeps that
# buffer for its thread for good, as large as the largest copy so far. Spark's task threads live as long as the
# session and move blocks to and from disk in large slices, so without a cap each keeps a buffer as large as the
# largest block outside the heap; capped, a larger copy gets a buffer of its own that is freed at once.
# The collector is the throughput one (Parallel), not G1: a run wants its CPU for its own work, and G1 spends it
# beside the run's threads (concurrent marking, its write barriers) to keep pauses short, which no batch step needs.
JAVA_OPTIONS = "-Djdk.nio.maxCachedBufferSize=262144 -XX:+UseParallelGC"
# A local session's shuffle blocks never leave the machine: the JVM that writes them reads them back, mostly from
# the page cache, so compressing them (LZ4) spends CPU to save disk space only. A cluster's shuffles cross the
# network, where compression pays: they keep Spark's default.
LOCAL_SHUFFLES = {"spark.shuffle.compress": "false", "spark.shuffle.spill.compress": "false"}
# A local session's driver serves its own ports (Spark's RPC, and the block manager, which hands out the session's
# cached and shuffled rows) to itself alone, and Spark asks no one on them for a secret unless `spark.authenticate`
# is set; by default it binds them to the machine's network address. Bound to loopback, no one off the machine
# reaches them, whatever address the engine serves its clients on (`--host`). A cluster's executors connect back
# to the driver: a cluster session keeps Spark's binding.
LOOPBACK = "127.0.0.1"
LOCAL_DRIVER = {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK}
# Spark compiles the code it generates for a query's stages (Janino) and keeps the classes in a cache keyed by their
# source, 100 by default. One run of a chain query plans about twice that many, so with the default the next run of
# the same query finds every class evicted, compiles them again, and HotSpot compiles their hot loops again. Room
# for a few queries' classes lets a session that runs queries again (the engine, the bench, the tests) reuse them.
CODEGEN_CACHE_ENTRIES = 1000
# A JVM that runs one micro-batch and exits lives for half a minute, over before HotSpot's optimising compiler (C2)
# pays back: on two cores its compiler threads take CPU from the run itself. With the quick compiler (C1) alone a
# cold `pielake run --incremental` took 0.83-0.87x as long (docs/performance.md). JVMs that live on (the engine, the
# bench's sessions) keep C2, which their later runs gain from.
SHORT_LIVED_JIT = "-XX:TieredStopAtLevel=1"


def short_lived(mode: str) -> bool:
    """Whether a JVM started for one run, or one step of it, in `mode` is short-lived (`SHORT_LIVED_JIT`): a
    micro-batch's is. A batch run or a backfill may read years of events, and from a few million on C2 pays back
    (docs/performance.md)."""
    return mode == "incremental"

# The engine's warm-up (`pielake.engine.warm_up`): a batch run and this many micro-batches before it serves. After
# three, a micro-batch of the benchmark's query costs about what one after eight does (docs/performance.md).
WARM_UP_RUNS = 3
LOG_RETENTION_DEFAULT = "spark.databricks.delta.properties.defaults.logRetentionDuration"  # of new tables
IVY = "spark.jars.ivy"
SCALA_VERSION = "2.13"  # Spark 4 is built for Scala 2.13 only
# Where Spark resolves and keeps the packages' jars: the folder Spark 4 uses by default (`spark.jars.ivy`), under
# the home Python sees ($HOME). Java's own home is the account's in the system's user list, which differs where a
# container or a service sets HOME (or has no such account), so every JVM is told this folder (`engine_settings`).
IVY_CACHE = Path.home() / ".ivy2.5.2"


def keep_days() -> float:
    """Days of time travel pielake's tables keep: their Delta log (`log_retention`, on every table a pielake
    session creates, and set by table maintenance) and the files VACUUM leaves (`pielake maintain`, the maintenance
    DAG): `PIELAKE_KEEP_DAYS`, else one.

    Not Delta's defaults (30 days of log, a week of files): a table written every minute gains 1,440 commits a
    day, and on a lake in a folder (local disk, HDFS) Delta lists the whole log at every commit and snapshot
    update, so every micro-batch pays for every commit kept: a week's worth made one 2.8 times as slow
    (docs/performance.md)."""
    return number("PIELAKE_KEEP_DAYS", 1, "days")


def log_retention(days: float) -> str:
    """`delta.logRetentionDuration` for `days` of time travel, never under an hour: a micro-batch reads the events
    appended since the previous one from the log (Delta's Change Data Feed)."""
    return f"interval {max(1, round(days * 24))} hours"


def lock_wait() -> float:
    """Seconds a scheduled step waits for another run of its query (a backfill, maintenance) to finish before it
    fails for its retries: `PIELAKE_LOCK_WAIT`, else half an hour."""
    return number("PIELAKE_LOCK_WAIT", 1800, "seconds")


def landing_poll() -> float:
    """Seconds between two looks at a landing folder for new files (`pielake.orchestration.landing`):
    `PIELAKE_LANDING_POLL`, else 1: a landed file waits half of it on average before its run is queued. A look
    lists the folder, and the query's taken files only when a name it has not seen taken lands: milliseconds."""
    return number("PIELAKE_LANDING_POLL", 1, "seconds")


def docs_runs() -> int:
    """Runs per query whose gate results the lake's Data Docs keep: `PIELAKE_DOCS_RUNS`, else 200. Each run
    rebuilds the Data Docs index from every stored result, so a query run every minute would otherwise make its
    runs slower every day (docs/performance.md)."""
    return int(number("PIELAKE_DOCS_RUNS", 200, "runs", whole=True))


def driver_gate_rows() -> int:
    """The most rows a gate validates on the driver, with GX's pandas engine: `PIELAKE_DRIVER_GATE_ROWS`, else
    100,000 (0: every gate on Spark). GX's Spark engine computes a suite's metrics in about three Spark jobs an
    expectation, tens of milliseconds each whatever the rows, where a micro-batch's staged output is a few
    thousand rows that pandas checks in milliseconds once collected (docs/performance.md)."""
    return int(number("PIELAKE_DRIVER_GATE_ROWS", 100_000, "rows", whole=True))


def driver_heap() -> str:
    """The driver's heap (in local mode all of Spark's): `PIELAKE_DRIVER_MEMORY`, else `default_heap` of the memory
    this process may use; a PielakeError, before any JVM starts, for a size the driver's JVM would not start with
    (its `-Xmx` takes whole numbers only: `2.5g` stopped it with a Java traceback) or one too small for Spark."""
    raw = os.environ.get("PIELAKE_DRIVER_MEMORY", "").strip()
    if not raw:
        return default_heap(allowed_mb())
    found = HEAP_SIZE.fullmatch(raw)
    if found is None or int(found[1]) * 1024 ** "bkmgt".index(found[2].lower() or "b") < SMALLEST_HEAP_MB * 2**20:
        raise PielakeError(f"PIELAKE_DRIVER_MEMORY='{raw}' is not a heap the driver's JVM starts Spark with: write a "
                           f"whole number of m or g, at least {SMALLEST_HEAP_MB}m (as 2500m or 8g), or unset it for "
                           f"{DEFAULT_DRIVER_MEMORY}")
    return raw


def default_heap(allowed: int | None) -> str:
    """`DEFAULT_DRIVER_MEMORY`, or where `allowed` MB (the machine's, or its container's) hold less than it and
    `BESIDE_HEAP_MB`, what they leave, never under `SMALLEST_HEAP_MB`: the JVM takes the heap it is given as its own
    to fill before it collects, so a heap the container cannot hold gets the JVM killed, not a slower run."""
    if allowed is None or allowed - BESIDE_HEAP_MB >= DEFAULT_HEAP_MB:
        return DEFAULT_DRIVER_MEMORY
    return f"{max(SMALLEST_HEAP_MB, allowed - BESIDE_HEAP_MB)}m"


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
    short_lived: bool = False  # the job is one step of a micro-batch: its driver compiles with C1 alone

    @property
    def conf(self) -> dict[str, str]:
        return {"spark.pyspark.python": self.python, "spark.pyspark.driver.python": sys.executable,
                **engine_settings(short_lived=self.short_lived)}

    @property
    def environment(self) -> dict[str, str]:
        """The interpreters in spark-submit's environment too, in place of the shell's: pyspark's `spark-submit`
        script finds Spark's home by running `PYSPARK_DRIVER_PYTHON`, which a notebook's shell sets to `jupyter`
        (or a Python without pyspark), and the launcher then finds no Spark."""
        return {"PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": sys.executable}


# Spark starts its Python workers as `python -m pielake.engine.worker_daemon` in the directory its process started
# in, which would come first on their path: a `pielake` folder there (a cron job's home, another checkout) would run
# in place of the installed pielake. Python's safe path leaves that directory out.
SAFE_PATH = "spark.executorEnv.PYTHONSAFEPATH"


# The settings a run's results and writes depend on, at Spark 4's own defaults, on which pielake is tested: Spark
# reads a spark-defaults.conf beneath every session pielake starts (SPARK_CONF_DIR's, a cluster's), and a team's
# may set them otherwise for its other jobs. They decide which rows of a file parse, and to what
# (`legacy.timeParserPolicy`: LEGACY parses leniently), whether a value that does not fit fails or becomes null
# (`ansi.enabled`, `storeAssignmentPolicy`), how a query's names resolve (`caseSensitive`), what an overwrite
# replaces (`sources.partitionOverwriteMode`: dynamic fails every write that replaces a table's schema), and
# whether a table pielake creates takes the updates and deletes of its MERGEs (Delta's `appendOnly` default).
SQL_SEMANTICS = {"spark.sql.ansi.enabled": "true", "spark.sql.caseSensitive": "false",
                 "spark.sql.legacy.timeParserPolicy": "CORRECTED", "spark.sql.storeAssignmentPolicy": "ANSI",
                 "spark.sql.sources.partitionOverwriteMode": "STATIC",
                 "spark.databricks.delta.properties.defaults.appendOnly": "false"}


# A lake, and events named by a path, are this machine's files, which pielake reads and writes beside Spark (the
# lake's locks, schemas, runs and Great Expectations' project; a file's header and encoding). So a path without a
# scheme is one of the local filesystem, also where a Hadoop configuration (HADOOP_CONF_DIR, as on a cluster's edge
# node) makes another filesystem the default, which would put the lake's Delta tables apart from the rest of it.
# Other filesystems are read by their URL (hdfs://HOST/…, s3a://…).
LOCAL_PATHS = {"spark.hadoop.fs.defaultFS": "file:///"}


def engine_settings(*, short_lived: bool = False, scratch: Path | None = None) -> dict[str, str]:
    """What every pielake session has, built here or by spark-submit: UTC, room for the generated code of a few
    queries (`CODEGEN_CACHE_ENTRIES`), the log retention of the tables it creates (`keep_days`), the Ivy cache
    of its jars (`IVY_CACHE`), the JVM options (`java_options`), Python's safe path for its Python workers
    (`SAFE_PATH`), paths of this machine's files (`LOCAL_PATHS`), the SQL semantics it is tested on
    (`SQL_SEMANTICS`); and a local session's folder for its temporary files, where it has one of its process's own
    (`pielake.engine.scratch`)."""
    local_dir = {} if scratch is None else {"spark.local.dir": str(scratch)}
    return {"spark.sql.session.timeZone": "UTC", "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
            LOG_RETENTION_DEFAULT: log_retention(keep_days()), IVY: str(IVY_CACHE), SAFE_PATH: "1", **LOCAL_PATHS,
            **SQL_SEMANTICS,
            **local_dir, **java_options(short_lived=short_lived, scratch=scratch)}


def java_options(*, short_lived: bool = False, scratch: Path | None = None) -> dict[str, str]:
    """`JAVA_OPTIONS` for the driver and the executors, as their default options: Spark puts them before any
    `extraJavaOptions`, so a user's own (in spark-defaults.conf, or the lake metastore's) still apply. The driver
    also maps the class archive, where setup built one (`pielake.engine.class_archive`), a `short_lived` one
    compiles with C1 alone (`SHORT_LIVED_JIT`), and one given a `scratch` folder keeps its temporary files there
    (what Spark Connect and Hive keep outside `spark.local.dir`)."""
    tmpdir = "" if scratch is None else file_option("-Djava.io.tmpdir=", scratch)
    driver = " ".join(filter(None, [JAVA_OPTIONS, archive_options(), SHORT_LIVED_JIT if short_lived else "", tmpdir]))
    return {"spark.driver.defaultJavaOptions": driver, "spark.executor.defaultJavaOptions": JAVA_OPTIONS}


def master_settings(master: str) -> dict[str, str]:
    """The settings that depend on where the session runs: in local mode, uncompressed shuffles and the driver's
    ports on loopback. An Airflow step takes its master from the `spark_default` connection, known only when the
    task runs, which adds them then (`pielake.orchestration.submit`)."""
    return {**LOCAL_SHUFFLES, **LOCAL_DRIVER} if is_local(master) else {}


def is_local(master: str) -> bool:
    """`master` runs the session on this machine (`local`, `local[N]`, `local-cluster[…]`): no executor elsewhere
    connects back to the driver, and its scratch space and ports are this machine's alone."""
    return master.startswith("local")


@dataclass(frozen=True)
class SparkUi:
    """Where Spark's UI listens: the engine's, when asked for (`pielake engine start --ui-port`), on the address
    the engine serves its clients on."""

    host: str
    port: int


def ui_settings(ui: SparkUi | None) -> dict[str, str]:
    """Spark's UI off (None), or on `ui.port` with its buttons that kill jobs and stages off: the UI asks no one
    who they are, so whoever reached it could otherwise stop any run's jobs."""
    if ui is None:
        return {"spark.ui.enabled": "false"}
    return {"spark.ui.enabled": "true", "spark.ui.port": str(ui.port), "spark.ui.killEnabled": "false"}


def submit_settings(*, short_lived: bool = False) -> SubmitSettings:
    return SubmitSettings(delta_package(), driver_heap(), workers_python(), short_lived)


def submit_arguments(master: str = DEFAULT_MASTER) -> list[str]:
    """spark-submit arguments that give a job the same Delta-enabled session `build_session` gives."""
    settings = submit_settings()
    conf = [part for key, value in {**settings.conf, **master_settings(master)}.items()
            for part in ("--conf", f"{key}={value}")]
    return ["--master", master, "--packages", settings.packages, "--driver-memory", settings.driver_memory, *conf]
