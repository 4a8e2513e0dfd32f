"""Ingest: a file of raw events -> the stream's `events_<stream>` table, bad rows -> `quarantine_<stream>`.

SEMANTICS §1, row by row, nothing dropped silently:
- a NULL key or event time is quarantined (`null_key`, `null_time`);
- a value that does not cast to its declared type is quarantined with the column and the raw value
  (`cast_failed`);
- an exact duplicate (same key, time and payload) of a row of this file or of an ingested event is dropped once
  and counted;
- rows with the same key and time but different payloads are all quarantined (`conflicting_duplicate`).

Every quarantined row keeps the raw row as JSON. The report's counts satisfy
`rows_in = events + quarantined + duplicates_dropped`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, SparkSession, Window

from pielake.lake.delta import Lake, LakeError, check_run_id, table_name
from pielake.streams import TIMESTAMP_UNIT, StreamSchema

FORMATS = ("csv", "parquet", "json")
RAW = "raw"
REASON = "reason"
PAYLOAD = "__payload"


@dataclass(frozen=True)
class IngestReport:
    rows_in: int
    events: int
    quarantined: int
    duplicates_dropped: int


def events_table(stream: StreamSchema) -> str:
    return table_name("events", stream.name)


def quarantine_table(stream: StreamSchema) -> str:
    return table_name("quarantine", stream.name)


def read_raw(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    """The file as it is; CSV columns stay strings so that every cast failure can be seen and reported."""
    if fmt not in FORMATS:
        raise LakeError(f"unknown input format '{fmt}'; use one of {', '.join(FORMATS)}")
    reader = spark.read
    if fmt == "csv":
        return reader.option("header", "true").option("inferSchema", "false").option("mode", "PERMISSIVE").csv(path)
    if fmt == "json":
        return reader.option("mode", "PERMISSIVE").json(path)
    return reader.parquet(path)


def _cast(raw: DataFrame, stream: StreamSchema) -> DataFrame:
    present = {c.lower(): c for c in raw.columns}
    missing = [n for n in stream.column_names if n.lower() not in present]
    if missing:
        raise LakeError(f"the input has no column(s) {', '.join(missing)} declared by stream {stream.name}; "
                        f"it has {', '.join(raw.columns)}")
    typed = []
    for name, kind in stream.columns:
        source = F.col(present[name.lower()])
        target = "TIMESTAMP" if name == stream.time_column and stream.time_unit == TIMESTAMP_UNIT else kind
        typed.append(source.try_cast(target).alias(name))
    return raw.select(*typed, F.to_json(F.struct(*(F.col(c) for c in raw.columns))).alias(RAW),
                      *(F.col(present[n.lower()]).cast("string").alias(f"__raw_{n}") for n in stream.column_names))


def _reason(stream: StreamSchema) -> Column:
    """The first rule a row breaks, or NULL for a good row."""
    checks: list[tuple[Column, Column]] = []
    for key in stream.keys:
        checks.append((F.col(f"__raw_{key}").isNull(), F.lit(f"null_key: {key}")))
    checks.append((F.col(f"__raw_{stream.time_column}").isNull(), F.lit("null_time")))
    for name, _ in stream.columns:
        failed = F.col(f"__raw_{name}").isNotNull() & F.col(name).isNull()
        checks.append((failed, F.concat(F.lit(f"cast_failed: {name}="), F.col(f"__raw_{name}"))))
    return reduce(lambda acc, check: F.when(check[0], check[1]).otherwise(acc), reversed(checks),
                  F.lit(None).cast("string"))


def ingest(lake: Lake, path: str, fmt: str, stream: StreamSchema, run_id: str) -> IngestReport:
    """Append the file's good events to `events_<stream>` and its bad rows to `quarantine_<stream>`."""
    raw = read_raw(lake.spark, path, fmt)
    checked = _cast(raw, stream).withColumn(REASON, _reason(stream)).localCheckpoint()
    rows_in = checked.count()
    natural_key = [*stream.keys, stream.time_column]
    attributes = [n for n in stream.column_names if n not in natural_key]
    good = checked.filter(F.col(REASON).isNull()).withColumn(
        PAYLOAD, F.to_json(F.struct(*(F.col(a) for a in attributes))))
    # 1. Within the file: one payload per (key, time) keeps its first copy; several payloads conflict.
    same_key = Window.partitionBy(*natural_key)
    judged = (good.withColumn("__payloads", F.size(F.collect_set(PAYLOAD).over(same_key)))
              .withColumn("__copy", F.row_number().over(same_key.orderBy(PAYLOAD))))
    in_file_conflicts = judged.filter(F.col("__payloads") > 1).withColumn(REASON, F.lit("conflicting_duplicate"))
    candidates = judged.filter((F.col("__payloads") == 1) & (F.col("__copy") == 1))
    # 2. Against what is ingested already: identical -> dropped, different -> conflict.
    old = _ingested_payloads(lake, stream, natural_key, attributes)
    if old is not None:
        candidates = candidates.join(old, natural_key, "left")
    else:
        candidates = candidates.withColumn("__old", F.lit(None).cast("string"))
    fresh = candidates.filter(F.col("__old").isNull())
    ingested_conflicts = candidates.filter(F.col("__old").isNotNull() & (F.col("__old") != F.col(PAYLOAD))) \
        .withColumn(REASON, F.lit("conflicting_duplicate: differs from an ingested event"))
    bad = reduce(DataFrame.unionByName, [checked.filter(F.col(REASON).isNotNull()),
                                         in_file_conflicts.select(*checked.columns),
                                         ingested_conflicts.select(*checked.columns)])
    fresh = fresh.select(*stream.column_names, F.lit(run_id).alias("run_id")).localCheckpoint()
    bad = bad.select(REASON, RAW, F.lit(run_id).alias("run_id"),
                     F.current_timestamp().alias("quarantined_at")).localCheckpoint()
    events, quarantined = fresh.count(), bad.count()
    lake.append(fresh, events_table(stream))
    # Re-running a run replaces its own quarantine rows instead of adding them again.
    lake.overwrite(bad, quarantine_table(stream), replace_where=f"run_id = '{check_run_id(run_id)}'")
    return IngestReport(rows_in, events, quarantined, rows_in - events - quarantined)


def _ingested_payloads(lake: Lake, stream: StreamSchema, natural_key: list[str],
                       attributes: list[str]) -> DataFrame | None:
    table = events_table(stream)
    if not lake.exists(table):
        return None
    return lake.read(table).select(*natural_key, F.to_json(F.struct(*(F.col(a) for a in attributes))).alias("__old"))
