"""What a pielake session's JVM is started with (`pielake.spark.session.JAVA_OPTIONS`)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession


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
