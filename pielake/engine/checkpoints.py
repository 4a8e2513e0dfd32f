"""Local checkpoints: a DataFrame's rows held in the executors' block stores, its plan cut to one leaf.

A run in one process holds its stage outputs so (`pielake.lake.staging`), and the runs kernel holds its fragments
so. PySpark has no call that frees a local checkpoint before the JVM garbage collects it, and a long session
(`pielake bench`, the tests) must not keep every run's rows: `release` frees them.
"""

from __future__ import annotations

from py4j.java_gateway import JavaObject
from pyspark import StorageLevel
from pyspark.sql import DataFrame


def is_checkpoint(df: DataFrame) -> bool:
    """Whether `df` is a local checkpoint itself (a staged table written over with itself is one). A DataFrame
    made from an RDD is a `LogicalRDD` too, but its blocks are not kept."""
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        return False
    kept = plan.rdd().getStorageLevel()
    return kept.useMemory() or kept.useDisk()


def hold(df: DataFrame) -> tuple[DataFrame, int]:
    """`df`'s rows held as a local checkpoint, in memory and spilled to local disk past it (as they are, if `df`
    is one), and how many there are. They are held serialized (PySpark's `MEMORY_AND_DISK`): kept as rows they
    are read faster but take about four times the heap (docs/performance.md, "Where a whole run's CPU goes").

    One Spark job computes, stores and counts them: the checkpoint is taken lazily and the count of its blocks
    is what stores them. An eager checkpoint runs a count of its own and throws it away, and counting after it
    reads every block again.
    """
    held = df if is_checkpoint(df) else df.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)
    return held, checkpoint_rdd(held).count()


def checkpoint_rdd(df: DataFrame) -> JavaObject:
    """The JVM RDD whose blocks hold a local checkpoint: the leaf of its plan (under a `coalesce`, for one read
    back in fewer partitions)."""
    plan = df._jdf.queryExecution().logical()
    while plan.getClass().getSimpleName() != "LogicalRDD":
        plan = plan.child()
    return plan.rdd()


def release(df: DataFrame) -> None:
    """Free the blocks of the local checkpoint `df` is read from, without waiting for them."""
    checkpoint_rdd(df).unpersist(False)
