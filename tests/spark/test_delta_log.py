"""A table's Delta log stays as short as the time travel pielake keeps: on a lake in a folder Delta lists the whole
log at every commit and read, so a log of Delta's default 30 days of minute-by-minute commits makes every run slower.
Tables a pielake session creates get the retention of `PIELAKE_KEEP_DAYS`; maintenance sets it on older ones; and a
micro-batch whose last run is older than the log compares every event instead of reading the change feed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from pielake.engine.settings import LOG_RETENTION_DEFAULT, keep_days, log_retention
from pielake.lake.delta import LOG_RETENTION, RUN_COMMITS_KEPT, Lake
from pielake.pipeline.stages import appended_after
from pielake.streams import TIMESTAMP_UNIT, StreamSchema

EVENTS = "events_s"


def retention(lake: Lake, table: str) -> str:
    [row] = lake.spark.sql(f"SHOW TBLPROPERTIES delta.`{lake.path(table)}` ('{LOG_RETENTION}')").collect()
    return row["value"]


def properties(lake: Lake, table: str) -> dict[str, str]:
    shown = lake.spark.sql(f"SHOW TBLPROPERTIES delta.`{lake.path(table)}`").collect()
    return {row["key"]: row["value"] for row in shown}


def test_log_retention_is_the_days_kept_in_hours_and_never_under_one() -> None:
    assert log_retention(1) == "interval 24 hours"
    assert log_retention(7) == "interval 168 hours"
    assert log_retention(0) == "interval 1 hours"


def test_a_table_a_pielake_session_creates_keeps_the_log_of_the_days_kept(spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    lake.overwrite(spark.range(3), "t")
    assert retention(lake, "t") == log_retention(keep_days())


def test_maintenance_gives_a_table_with_another_retention_the_one_kept_once(spark: SparkSession,
                                                                           tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    lake.overwrite(spark.range(3), "t")
    assert lake.keep_log("t", "interval 720 hours")  # as Delta's default, 30 days, leaves an older table
    assert retention(lake, "t") == "interval 720 hours"
    assert lake.keep_log("t", log_retention(7))
    version = lake.version("t")
    assert not lake.keep_log("t", log_retention(7))  # the same retention: no commit
    assert (retention(lake, "t"), lake.version("t")) == (log_retention(7), version)


def test_maintenance_gives_a_table_made_without_pielake_s_settings_the_retention_kept(spark: SparkSession,
                                                                                    tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    default = spark.conf.get(LOG_RETENTION_DEFAULT)
    spark.conf.unset(LOG_RETENTION_DEFAULT)  # as a session without pielake's settings creates a table
    try:
        lake.overwrite(spark.range(3), "t")
    finally:
        spark.conf.set(LOG_RETENTION_DEFAULT, default)
    assert retention(lake, "t") != log_retention(keep_days())  # Delta's own 30 days: no property of the table
    assert lake.keep_log("t", log_retention(keep_days()))
    assert retention(lake, "t") == log_retention(keep_days())


def test_the_change_feed_is_not_read_where_the_log_no_longer_reaches_back(spark: SparkSession,
                                                                          tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    for start in range(0, 120, 10):  # twelve appends, the first creating the table: Delta checkpoints at version 10
        lake.append(spark.range(start, start + 10), EVENTS, change_feed=True)
    log = Path(lake.path(EVENTS)) / "_delta_log"
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    for version in range(10):  # what Delta's log cleanup deletes once the commits are older than the retention
        (log / f"{version:020d}.json").unlink()
    assert lake.inserted_since(EVENTS, 3) is None
    since_ten = lake.inserted_since(EVENTS, 10)
    assert since_ten is not None
    assert sorted(r.id for r in since_ten.collect()) == list(range(110, 120))
    assert lake.read(EVENTS).count() == 120


def test_the_change_feed_is_read_only_from_a_table_that_records_it_with_or_without_its_checksum(
        spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    seen = {}
    for change_feed, table in ((True, EVENTS), (False, "events_plain")):
        lake.append(spark.range(0, 5), table, change_feed=change_feed)
        seen[table] = lake.version(table)
        lake.append(spark.range(5, 8), table, change_feed=change_feed)
    for checksums in (True, False):
        if not checksums:  # a log without them: the table's properties come from Delta's detail
            for table in seen:
                for crc in (Path(lake.path(table)) / "_delta_log").glob("*.crc"):
                    crc.unlink()
        recorded = lake.inserted_since(EVENTS, seen[EVENTS])
        assert recorded is not None and sorted(r.id for r in recorded.collect()) == [5, 6, 7], checksums
        assert lake.inserted_since("events_plain", seen["events_plain"]) is None, checksums


def test_a_stream_s_table_is_created_by_the_commit_of_its_first_events_and_records_its_changes_from_it(
        spark: SparkSession, tmp_path: Path) -> None:
    """One commit makes the table and holds the run's events, made once: run again, the write appends nothing. The
    properties it is created with are the table's alone, not the session's for the tables after it."""
    lake = Lake(spark, tmp_path)
    started = datetime.now(UTC)
    for _ in range(2):
        lake.append(spark.range(0, 5), EVENTS, change_feed=True, writer="run-1")
    assert lake.version(EVENTS) == 0 and lake.committed_by(EVENTS, "run-1", started)
    created = properties(lake, EVENTS)
    assert (created["delta.enableChangeDataFeed"], created["delta.setTransactionRetentionDuration"]) == (
        "true", RUN_COMMITS_KEPT)
    changes = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
    assert sorted(r.id for r in changes.load(lake.path(EVENTS)).collect()) == [0, 1, 2, 3, 4]
    lake.append(spark.range(3), "events_plain")
    assert "delta.enableChangeDataFeed" not in properties(lake, "events_plain")


def test_a_micro_batch_reads_from_the_log_whether_another_query_appended_events_after_its_progress(
        spark: SparkSession, tmp_path: Path) -> None:
    """Another query's append over a shared stream is behind a query's progress only if one of its events lies at
    or before it. Each file it adds records its least time in the log: past the progress (a timestamp's to the
    millisecond, rounded down), no event needs a Spark job to be counted; where a file records no statistics, or
    the progress is unknown, they are counted."""
    rows = [("m1", datetime(2026, 3, 1, 12, 0, 0, 2500, tzinfo=UTC), 5),
            ("m2", datetime(2026, 3, 1, 12, 0, 7, tzinfo=UTC), 9)]
    lake = Lake(spark, tmp_path)
    lake.append(spark.createDataFrame(rows, "m STRING, ts TIMESTAMP, n BIGINT"), EVENTS)
    [commit] = lake.commits_after(EVENTS, -1)
    first = 1_772_366_400_002_500  # 2026-03-01 12:00:00.0025 in microseconds since 1970
    timed = StreamSchema("S", ("m",), "ts", TIMESTAMP_UNIT, (("m", "STRING"), ("ts", "TIMESTAMP"), ("n", "BIGINT")))
    assert appended_after(timed, commit, first - 501)
    assert not appended_after(timed, commit, first - 1)  # after it, but the statistics say .002: counted
    assert not appended_after(timed, commit, first)
    assert not appended_after(timed, commit, None)
    counted = StreamSchema("S", ("m",), "n", "ms", timed.columns)
    assert appended_after(counted, commit, 4) and not appended_after(counted, commit, 5)
    bare = Lake(spark, tmp_path / "bare", statistics=False)
    bare.append(spark.createDataFrame(rows, "m STRING, ts TIMESTAMP, n BIGINT"), EVENTS)
    [unrecorded] = bare.commits_after(EVENTS, -1)
    assert unrecorded.minima("ts") is None
    assert not appended_after(counted, unrecorded, 0)
