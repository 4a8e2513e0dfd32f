"""What a pielake session is started with: its JVM's options (`pielake.engine.session.JAVA_OPTIONS`), PySpark's
settings and Spark's (`build_session`)."""

from __future__ import annotations

import ipaddress
import logging
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pyspark.sql.functions as F
import pytest
from py4j.clientserver import ClientServerConnection
from py4j.protocol import MEMORY_COMMAND_NAME, MEMORY_DEL_SUBCOMMAND_NAME
from pyspark.errors import AnalysisException
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from pielake.bench.shapes import measure
from pielake.engine.class_archive import archive_path
from pielake.engine.session import QUERY_CONTEXT_LOGGERS
from pielake.engine.settings import JAVA_OPTIONS
from tests.helpers import maps_the_class_archive

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.heavy(seconds=25)  # about this long in CI, two runs of a query: scheduled first


def direct_bytes(spark: SparkSession) -> int:
    jvm = spark._jvm
    pools = jvm.java.lang.management.ManagementFactory.getPlatformMXBeans(
        jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean"))
    return next(p.getMemoryUsed() for p in pools if p.getName() == "direct")


def test_a_large_heap_buffer_written_to_a_file_leaves_no_direct_buffer_behind(spark: SparkSession,
                                                                             tmp_path: Path) -> None:
    """The JDK copies it through a direct buffer; uncapped, the thread would keep that buffer (all 8 MB of it) for
    as long as it lives, as Spark's task threads do after writing and reading blocks."""
    jvm = spark._jvm
    before = direct_bytes(spark)
    channel = jvm.java.io.RandomAccessFile(str(tmp_path / "block"), "rw").getChannel()
    try:
        assert channel.write(jvm.java.nio.ByteBuffer.allocate(8 << 20)) == 8 << 20
    finally:
        channel.close()
    assert direct_bytes(spark) - before < 1 << 20


def test_building_columns_skips_pysparks_call_site_capture(spark: SparkSession,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """These seven functions take 36 JVM calls; capturing each one's call site would make them 63. Py4J also
    sends a release whenever Python's collector frees a JVM object, often one an earlier test made; those are not
    calls this code makes, so they do not count."""
    release = MEMORY_COMMAND_NAME + MEMORY_DEL_SUBCOMMAND_NAME
    calls = []
    send = ClientServerConnection.send_command

    def counted(self: ClientServerConnection, command: str) -> str:
        if not command.startswith(release):
            calls.append(command)
        return send(self, command)

    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    F.when(F.col("a") > F.lit(1), F.lit(2)).otherwise(F.col("b"))
    assert len(calls) < 50, len(calls)


def test_a_local_session_starts_with_uncompressed_shuffles(spark: SparkSession) -> None:
    """`build_session` applies `master_settings` to the context it starts (Spark reads these once, at start)."""
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master.startswith("local")
    assert conf.get("spark.shuffle.compress") == conf.get("spark.shuffle.spill.compress") == "false"


def test_a_local_session_s_jvm_listens_on_loopback_alone(spark: SparkSession) -> None:
    """Spark's RPC and block manager, which hands out the session's rows, ask no one for a secret by default:
    Spark bound them to the machine's network address, where anyone on its network reached them."""
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)
    ports = [c.laddr for c in jvm.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert len(ports) >= 2, ports  # the RPC, the block manager (and py4j's gateway)
    assert all(ipaddress.ip_address(a.ip.removeprefix("::ffff:")).is_loopback for a in ports), ports


def vm_option(spark: SparkSession, name: str) -> str:
    """The value the session's JVM runs with for HotSpot's option `name`."""
    jvm = spark._jvm
    diagnostics = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    return diagnostics.getVMOption(name).getValue()


def test_the_collector_aims_for_throughput(spark: SparkSession) -> None:
    """`JAVA_OPTIONS` reach the JVM: its collector is the throughput one, not the JVM's default (G1)."""
    assert vm_option(spark, "UseParallelGC") == "true" and vm_option(spark, "UseG1GC") == "false"
    assert "-XX:+UseParallelGC" in JAVA_OPTIONS


def test_the_driver_maps_the_class_archive_setup_built(spark: SparkSession) -> None:
    """`make setup` builds the class archive that fits this Java and these jars (`pielake.engine.class_archive`),
    and a session's JVM starts with it: its classes come from the archive, not from the jars."""
    assert vm_option(spark, "SharedArchiveFile") == str(archive_path())
    assert maps_the_class_archive(spark._jvm.java.lang.ProcessHandle.current().pid())


def compilations(spark: SparkSession) -> int:
    """How many classes Spark's code generator has compiled in this JVM (a cache hit compiles none)."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def test_a_query_run_again_reuses_the_code_spark_generated_for_it(spark: SparkSession, tmp_path: Path) -> None:
    """A run of the 4-symbol chain plans ~220 generated classes, more than Spark's cache holds by default (100):
    the next run would compile every one again, and HotSpot then compiles their hot loops again as well."""
    measure(spark, "chain", 4, 2_000, workdir=tmp_path, repeat=1)
    before = compilations(spark)
    measure(spark, "chain", 4, 2_000, workdir=tmp_path, repeat=2)
    assert compilations(spark) - before < 30


def test_a_session_for_one_micro_batch_compiles_with_c1_alone_and_a_long_lived_one_with_c2(
        spark: SparkSession, tmp_path: Path) -> None:
    """`build_session(short_lived=True)`, as `pielake run --incremental` in process builds it: its JVM stops at
    HotSpot's quick compiler. The tests' session lives for the whole run, as the engine does, and keeps C2. Its
    catalog asked (as Delta's path-named statements ask it), the session leaves no `spark-warehouse` folder in the
    folder it runs in, a user's."""
    probe = ("from pielake.engine.session import build_session; from tests.spark.test_session_jvm import vm_option; "
             "spark = build_session('local[1]', short_lived=True); spark.catalog.listDatabases(); "
             "print('tier', vm_option(spark, 'TieredStopAtLevel'))")
    env = {**{k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}, "PYTHONPATH": str(ROOT)}
    said = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300, check=False)
    assert "tier 1" in said.stdout.splitlines(), said.stdout + said.stderr[-2000:]
    assert vm_option(spark, "TieredStopAtLevel") == "4"
    assert sorted(path.name for path in tmp_path.iterdir()) == []


class Heard(logging.Handler):
    """The records a logger passes on."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_sql_error_spark_raises_is_not_logged_by_pyspark_as_it_is_raised(spark: SparkSession) -> None:
    """pielake says what went wrong where it catches Spark's error (`pielake sql` on a table that does not exist),
    and PySpark does not print it before, as a JSON line with the JVM's stack trace."""
    heard = Heard()
    loggers = [PySparkLogger.getLogger(name) for name in QUERY_CONTEXT_LOGGERS]
    for logger in loggers:
        logger.addHandler(heard)
    try:
        with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
            spark.sql("SELECT * FROM no_such_table")
    finally:
        for logger in loggers:
            logger.removeHandler(heard)
    assert heard.records == []
