"""Staging in the Spark session means what staging in Delta means: the same writes give the same reads, row
counts and notes (`pielake.lake.staging`), and a run's staged rows are freed when it is over."""

from __future__ import annotations

from pathlib import Path

import pyspark.sql.functions as F
import pytest
from pyspark.sql import DataFrame, SparkSession

from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.lake.staging import SessionStaging, Staging
from pielake.pipeline.ingest import ingest_rows, read_raw
from pielake.streams import StreamSchema
from tests.helpers import held_rdds

SCHEMA = "constraint_id STRING, ts BIGINT"


def rows(frame: DataFrame) -> list[tuple]:
    return sorted(tuple(r) for r in frame.collect())


def writes(spark: SparkSession, staging: Staging) -> list[object]:
    """Replace a table whole, then one constraint's rows of it; everything a stage would see on the way."""
    first = spark.createDataFrame([("c1", t) for t in range(5)] + [("c2", t) for t in range(3)], SCHEMA)
    seen: list[object] = [staging.overwrite(first, "pairs", partition_by=("constraint_id",), commit_note="full")]
    seen += [rows(staging.read("pairs")), staging.commit_note("pairs")]
    again = spark.createDataFrame([("c1", 10), ("c1", 11)], SCHEMA)
    seen.append(staging.overwrite(again, "pairs", partition_by=("constraint_id",),
                                  replace_where="constraint_id IN ('c1')"))
    seen += [rows(staging.read("pairs")), staging.commit_note("pairs")]
    return seen


def test_session_staging_reads_what_delta_staging_reads(spark: SparkSession, tmp_path: Path) -> None:
    in_session = SessionStaging()
    try:
        assert writes(spark, in_session) == writes(spark, Lake(spark, tmp_path).staging)
    finally:
        in_session.release()


def test_rows_are_freed_when_the_run_is_done_with_them_and_a_freed_table_is_named(spark: SparkSession) -> None:
    before = held_rdds(spark)
    staging = SessionStaging()
    writes(spark, staging)
    assert held_rdds(spark) == before + 1  # the replaced checkpoint is freed at once
    staging.done_with("pairs")
    assert held_rdds(spark) == before
    with pytest.raises(PielakeError, match="no staged table 'pairs'"):
        staging.read("pairs")
    checkpoint = spark.createDataFrame([("c1", 1)], SCHEMA).localCheckpoint()
    staging.overwrite(checkpoint, "events")
    writes(spark, staging)
    assert held_rdds(spark) == before + 2  # a checkpoint is held as it is, not checkpointed again
    from_rdd = spark.createDataFrame(spark.sparkContext.parallelize([("c2", 2)]), SCHEMA)  # a plan leaf, not kept
    staging.overwrite(from_rdd, "more")
    assert held_rdds(spark) == before + 3 and staging.read("more").count() == 1
    staging.overwrite(spark.range(0, 3, numPartitions=1), "one")  # read back as the checkpoint itself
    staging.overwrite(staging.read("one"), "one")  # written over with itself: its rows stay
    assert held_rdds(spark) == before + 4 and staging.read("one").count() == 3
    staging.release()
    assert held_rdds(spark) == before


def test_a_staged_table_is_computed_stored_and_counted_in_one_spark_job(spark: SparkSession) -> None:
    """Counting after an eager checkpoint read every held row again: a second job as large as the first."""
    group = "session-staging-one-job"
    spark.sparkContext.setJobGroup(group, "staging one table")
    staging = SessionStaging()
    try:
        drawn = spark.range(0, 1000, numPartitions=4).withColumn("r", F.rand())
        assert staging.overwrite(drawn, "drawn") == 1000
        assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == 1
        assert rows(staging.read("drawn")) == rows(staging.read("drawn"))  # held, not drawn again at each read
    finally:
        for job_group_property in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            spark.sparkContext.setLocalProperty(job_group_property, None)  # the session is shared by later tests
        staging.release()


def test_ingest_frees_the_rows_it_checked_once_they_are_written(spark: SparkSession, tmp_path: Path) -> None:
    """After ingest only the staged events stay held: the checked rows they were taken from are freed, not left
    to the JVM's garbage collector while the later stages need the memory."""
    stream = StreamSchema("S", ("key",), "ts", "s", (("key", "STRING"), ("ts", "BIGINT"), ("a", "BOOLEAN")))
    events = tmp_path / "events.json"
    events.write_text('{"key": "k1", "ts": 1, "a": true}\n{"key": "k1", "ts": 2, "a": false}\n'
                      '{"key": "k1", "ts": "soon", "a": true}')
    staging = SessionStaging()
    before = held_rdds(spark)
    try:
        report = ingest_rows(Lake(spark, tmp_path / "lake").staged_in(staging), [read_raw(spark, str(events), "json")],
                        stream, "r1", staged_as="events_q")
        assert (report.rows_in, report.events, report.quarantined) == (3, 2, 1)
        assert held_rdds(spark) == before + 1
    finally:
        staging.release()
