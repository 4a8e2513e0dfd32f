"""The one place a SparkSession is built: Delta configured, UTC, sized for the machine.

Delta's jars are resolved from Maven Central by `configure_spark_with_delta_pip` at the first start and cached
in the Ivy cache (~/.ivy2.5.2), so later starts are offline; the JVMs started here take turns (`_jvm_start`).
`master` is `local[*]` by default; pass any master URL (`spark://host:7077`, `yarn`, `k8s://...`) to run elsewhere.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from delta import configure_spark_with_delta_pip
from py4j.java_gateway import JavaGateway
from py4j.protocol import Py4JJavaError
from pyspark import SparkConf
from pyspark import __file__ as pyspark_file
from pyspark import __version__ as pyspark_version
from pyspark.errors import PySparkRuntimeError
from pyspark.java_gateway import launch_gateway
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from pielake.engine.client import EngineAddress, classic_spark, grpc_direct_to_loopback, unanswered
from pielake.engine.jvm import check_spark_environment, check_workers_python, utf8_locale
from pielake.engine.scratch import own_folder
from pielake.engine.settings import (
    DEFAULT_MASTER,
    IVY,
    IVY_CACHE,
    SparkUi,
    driver_heap,
    engine_settings,
    is_local,
    master_settings,
    ui_settings,
    workers_python,
)
from pielake.errors import PielakeError
from pielake.query.parser import MAX_NESTING

SYSTEM_JARS = "SPARK_DIST_CLASSPATH"  # what Spark's launcher appends to the driver JVM's class path
LOCAL_IP = "SPARK_LOCAL_IP"  # the address Spark's UI listens on, unless it listens on every one
# PySpark's loggers of the query context of every SQL error Spark raises (pyspark.errors.exceptions)
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
# Spark's warehouse, where its catalog keeps tables it manages, is `./spark-warehouse` unless set, and Spark makes
# that folder wherever a command runs the first time its catalog is asked (as Delta's path-named statements do).
# pielake's tables live in the lake, by path, and only the engine's catalog names them
# (`pielake.lake.catalog.Metastore`), so any other session's warehouse is a folder that stays empty.
IDLE_WAREHOUSE = Path(tempfile.gettempdir()) / "pielake-spark-warehouse"


def _quiet_query_context() -> None:
    """Keep PySpark from printing every SQL error Spark raises, as it is raised, as a JSON line with the JVM's
    whole stack trace. pielake says what went wrong where it catches the error (a path that cannot be read, a
    statement `pielake sql` cannot answer), and an error it does not catch carries the same message and trace in
    its traceback; the line on top of either is noise in front of what the user needs to read. PySpark makes the
    loggers on first use, as loggers of its own class with a JSON handler: they are made here as it makes them."""
    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


class Py4jOnTheRoot(logging.Filter):
    """Drops what py4j logs on the root logger: where its JVM has gone it logs each failed call's traceback there
    (`logging.exception`, which also sets up a handler on the console), ahead of the error the call raises, which
    is what pielake tells the user (`pielake.errors.jvm_lost`) or shows with its trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "py4j" not in Path(record.pathname).parts


def _quiet_py4j() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, Py4jOnTheRoot) for f in root.filters):
        root.addFilter(Py4jOnTheRoot())


@contextmanager
def _jvm_start() -> Iterator[None]:
    """What a JVM started here starts within: the machine's turn to start one that resolves jars, and a UTF-8
    locale in the environment it inherits from this process (`pielake.engine.jvm.utf8_locale`); another pyspark
    first on Python's path, a SPARK_HOME of another Spark and spark-submit arguments of the environment's are
    refused first (`check_spark_environment`).

    Two JVMs resolving into an empty Ivy cache at once corrupt each other's download ("Downloaded file size (0)
    doesn't match expected Content Length", then the gateway exits), as two test workers on a fresh machine do.
    A start takes seconds, so taking turns costs little.
    """
    check_spark_environment(os.environ)
    os.environ.update(utf8_locale(os.environ))
    IVY_CACHE.mkdir(parents=True, exist_ok=True)
    with (IVY_CACHE / ".pielake-start.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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


@contextmanager
def _console_to(path: Path | None) -> Iterator[None]:
    """While the block runs, this process's standard output and error are the file `path` (truncated), when given.

    A JVM that PySpark starts inherits both: Spark's launcher, Ivy's dependency report and log4j then write to
    the file for the JVM's whole life, and the terminal keeps pielake's own lines. A start that fails shows the
    file's last lines here, where the reason (no Java, a jar not found) is.
    """
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with path.open("wb") as log:
        for fd in saved:
            os.dup2(log.fileno(), fd)
    failed = True
    try:
        yield
        failed = False
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        if failed:
            tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
            sys.stderr.write("".join(f"{line}\n" for line in [f"Spark's output ({path}):", *tail]))


def resolve_jars(packages: Sequence[str]) -> list[str]:
    """The local jar files of Maven `packages` (and their dependencies), resolved as every session resolves them.

    A class the JVM must find on its system class path (Hive's sessions in the Thrift server look only there) can
    only be put there before the JVM starts, and only the resolution says which files that is. So a JVM of its own
    resolves them (offline once the Ivy cache has them, still three seconds) and is shut down again. Its answer is
    kept beside the jars in the Ivy cache (`_resolution_record`) and read back while every file it names is there.
    """
    record = _resolution_record(packages)
    if record.is_file():
        kept = record.read_text(encoding="utf-8").split()
        if kept and all(Path(jar).is_file() for jar in kept):
            return kept
    with _jvm_start():
        gateway = launch_gateway(SparkConf().set("spark.jars.packages", ",".join(packages)).set(IVY, str(IVY_CACHE)))
    try:
        listed = gateway.jvm.java.lang.System.getProperty("spark.jars") or ""
    finally:
        end_jvm(gateway)
    jars = [jar.removeprefix("file://") for jar in listed.split(",") if jar]
    record.parent.mkdir(parents=True, exist_ok=True)
    draft = record.with_suffix(f".{os.getpid()}")
    draft.write_text("\n".join(jars), encoding="utf-8")
    draft.replace(record)  # whole or not at all, as another process may read it now
    return jars


def _resolution_record(packages: Sequence[str]) -> Path:
    """Where the resolution of `packages` is kept: named by the packages and by the Spark that resolved them."""
    key = hashlib.sha256("\n".join([pyspark_version, *sorted(packages)]).encode()).hexdigest()[:16]
    return IVY_CACHE / "pielake-resolved" / f"{key}.txt"


def _system_class_path(jars: Sequence[str]) -> dict[str, str]:
    """The environment that puts `jars` on a JVM's system class path after Spark's own.

    Spark's launcher puts `spark.driver.extraClassPath` before its jars and `SPARK_DIST_CLASSPATH` (meant for a
    Hadoop of one's own, whose value is kept) after them. The class archive (`pielake.engine.class_archive`) was
    written for Spark's class path, and a JVM maps it only if that path begins its own: after, not before.
    """
    if not jars:
        return {}
    return {SYSTEM_JARS: os.pathsep.join([*filter(None, [os.environ.get(SYSTEM_JARS)]), *jars])}


def ui_address(ui: SparkUi | None, master: str) -> dict[str, str]:
    """The environment that binds Spark's UI to `ui.host`: Spark binds it to `SPARK_LOCAL_IP`, else to every
    interface, whatever the driver's own settings say. On a cluster master that variable also names the address
    executors connect back to, so it is left to the user there (SECURITY.md)."""
    if ui is None or not is_local(master):
        return {}
    return {LOCAL_IP: ui.host}


@contextmanager
def _environment_within(variables: Mapping[str, str]) -> Iterator[None]:
    """`variables` in this process's environment while the block starts a JVM, which inherits them; restored
    after, as this process may start other JVMs."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def end_jvm(gateway: JavaGateway) -> None:
    """End the JVM PySpark's launcher started for `gateway`, and wait until it has exited: it ends when its
    stdin closes, and what it does as it exits (write the class archive) is then done."""
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait()


def checked_master(master: str) -> str:
    """`master`, if Spark takes it (yarn, or a URL of spark, k8s or local): Spark's JVM refuses any other as it
    starts, which PySpark reports only as its gateway having exited."""
    if master == "yarn" or master.startswith(("spark", "k8s", "local")):
        return master
    raise PielakeError(f"'{master}' is not a Spark master: give local[*], local[N], spark://HOST:PORT, yarn or "
                       "k8s://HOST:PORT (--master, or PIELAKE_SPARK_MASTER)")


def build_session(master: str | None = None, app_name: str = "pielake", *, ui: SparkUi | None = None,
                  shuffle_partitions: int | None = None, driver_memory: str | None = None,
                  conf: Mapping[str, str] | None = None, packages: Sequence[str] = (),
                  system_jars: Sequence[str] = (), console: Path | None = None,
                  short_lived: bool = False) -> SparkSession:
    """A SparkSession with Delta Lake enabled.

    Args:
        master: Spark master URL; `PIELAKE_SPARK_MASTER` or `local[*]` when not given.
        app_name: the application name shown in the Spark UI and logs.
        ui: where Spark's UI listens (the engine's, if asked for); None: no UI.
        shuffle_partitions: `spark.sql.shuffle.partitions`; defaults to 4 x the local cores, enough to keep every
            core busy without thousands of tiny tasks on small data (adaptive execution coalesces the rest).
        driver_memory: `spark.driver.memory`, when not `driver_heap()`. Under spark-submit the driver's JVM is
            running already, with the heap spark-submit gave it (`submit_settings`).
        conf: further Spark settings (the SQL endpoint's metastore and Thrift port), applied last.
        packages: Maven coordinates to load besides Delta's (a metastore's JDBC driver).
        system_jars: jar files the driver's JVM must find on its system class path (`_on_system_class_path`).
        console: a file for the output of the JVM this starts (launcher, Ivy, log4j); None: this process's.
        short_lived: the session runs one micro-batch and its process exits: its JVM compiles with C1 alone
            (`SHORT_LIVED_JIT`).
    """
    master = checked_master(master or os.environ.get("PIELAKE_SPARK_MASTER", DEFAULT_MASTER))
    classic_spark()
    python = os.environ["PYSPARK_PYTHON"] = workers_python()  # PySpark's own launches read the environment too
    if is_local(master):  # a cluster's executors run a Python of their own machines
        check_workers_python(python)
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
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory or driver_heap())
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.warehouse.dir", str(IDLE_WAREHOUSE))
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        # PySpark records the Python call site of every Column function for error messages, several JVM round
        # trips each, a large share of building a plan of many symbols. The call sites would be pielake's own
        # lines, which the error's stack trace shows anyway.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        # The analyzer widens a predicate's types one level of its tree a pass (a DOUBLE column plus whole
        # numbers), and Spark stops at 100 passes: the deepest predicate the language reads (MAX_NESTING levels),
        # within the columns a stage wraps it in, takes more.
        .config("spark.sql.analyzer.maxIterations", str(4 * MAX_NESTING))
    )
    scratch = own_folder() if is_local(master) else None  # a cluster's executors have their own
    for key, value in {**engine_settings(short_lived=short_lived, scratch=scratch), **ui_settings(ui),
                       **master_settings(master), **(conf or {})}.items():
        builder = builder.config(key, value)
    try:
        with (_jvm_start(), _console_to(console),
              _environment_within({**_system_class_path(system_jars), **ui_address(ui, master)})):
            session = configure_spark_with_delta_pip(builder, extra_packages=list(packages)).getOrCreate()
    except PySparkRuntimeError as error:
        if error.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
        raise _stopped_as_it_started(console) from None
    except Py4JJavaError as refused:
        raise _context_refused(refused) from None
    session.sparkContext.setLogLevel("ERROR")
    _quiet_query_context()
    _quiet_py4j()
    return session


def _context_refused(error: Py4JJavaError) -> PielakeError:
    """Spark's JVM started and its context did not: Java's reason, and the settings read besides pielake's where
    there are any, where such a reason often lies: the file of Spark's (`spark-defaults.conf` of SPARK_CONF_DIR,
    else of Spark's home: an event log folder that does not exist, a master no machine answers on), and the
    options every JVM of the environment takes (`JAVA_OPTIONS_OF_ENVIRONMENT`: an `-Xmx` there wins over the
    driver heap pielake gives, and Spark then asks for a larger `--driver-memory` in vain)."""
    defaults = _defaults_file()
    read = [*([f"Spark also read {defaults}"] if defaults is not None else []),
            *(f"Java also read {name}={os.environ[name]}" for name in JAVA_OPTIONS_OF_ENVIRONMENT
              if os.environ.get(name))]
    said = f" ({'; '.join(read)}: a setting there may be the cause)" if read else ""
    reason = " ".join(error.java_exception.toString().split())  # Spark's advice may span lines
    return PielakeError(f"Spark did not start: {reason}{said}")


def _defaults_file() -> Path | None:
    """The `spark-defaults.conf` Spark's launcher reads, besides the settings pielake gives it: SPARK_CONF_DIR's,
    else that of Spark's home (pyspark's own, unless SPARK_HOME names another), if it exists."""
    home = os.environ.get("SPARK_HOME") or str(Path(pyspark_file).parent)
    found = Path(os.environ.get("SPARK_CONF_DIR") or Path(home) / "conf") / "spark-defaults.conf"
    return found if found.is_file() else None


JAVA_OPTIONS_OF_ENVIRONMENT = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")  # options every JVM started here takes
UNRESOLVED = "unresolved dependency"  # what Spark's launcher says of a package Ivy could not fetch


def _stopped_as_it_started(console: Path | None) -> PielakeError:
    """Why a JVM stopped as it started, as far as its output (`console`, whose last lines are shown) tells: the
    packages' jars not fetched (a machine that reaches no Maven repository, at its first Spark start), or else,
    as a rule, no Java that runs Spark."""
    said = console.read_text(encoding="utf-8", errors="replace") if console is not None and console.is_file() else ""
    if UNRESOLVED in said:
        return PielakeError(f"Spark could not fetch the jars of its packages (Delta's) into {IVY_CACHE}: its output "
                            "names the addresses it could not reach. Its first start needs Maven Central "
                            "(repo1.maven.org), reached directly or through a proxy Java is told of "
                            '(JAVA_TOOL_OPTIONS="-Dhttps.proxyHost=… -Dhttps.proxyPort=…"); later ones read the '
                            "jars from there")
    return PielakeError("Spark's JVM stopped as it started; its output says why (Spark needs Java 17 or later, on "
                        "PATH or in JAVA_HOME)")


def connect_session(address: EngineAddress) -> SparkSession:
    """A Spark Connect session of an engine (`pielake.engine.server`): the engine's application runs what it
    asks, this process only plans."""
    _check_answers(address)
    _quiet_query_context()
    grpc_direct_to_loopback(address)
    from pielake.engine.retries import WhileTheEngineListens  # noqa: PLC0415 (Spark Connect's client: only here)

    spark = SparkSession.builder.remote(address.connect_url).getOrCreate()
    spark.client.set_retry_policies([WhileTheEngineListens(address)])
    return spark


def _check_answers(address: EngineAddress, timeout: float = 10.0) -> None:
    """Refuse an address nothing listens at, at once: Spark Connect's client retries a refused connection with
    growing pauses for minutes before its first call fails, and says nothing meanwhile."""
    if (error := unanswered(address, timeout)) is not None:
        raise PielakeError(f"no engine answers at sc://{address.host}:{address.port} ({error.strerror or error}); "
                           "check the address, or start the engine (`pielake engine start --lake DIR`)")
