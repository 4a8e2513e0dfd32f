"""The stages of one query's run, each reading its inputs from the lake and writing its outputs back.

    ingest -> situations (+ segments, progress) -> pairs (one job per constraint) -> matches

Reading every input back from Delta is deliberate: it keeps each stage a separate, re-runnable unit (a Spark job
of its own under Airflow) and keeps Spark's query plans small.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyspark.sql.functions as F
from delta.tables import DeltaTable
from pyspark.sql import DataFrame

from pielake.lake.delta import Lake, table_name
from pielake.pipeline.ingest import events_table
from pielake.query.analyzer import PairConstraint, QueryPlan
from pielake.spark import columns as C
from pielake.spark.matches import LAST_TIME, find_matches
from pielake.spark.pairs import detect_pairs
from pielake.spark.query import SparkQuery
from pielake.streams import StreamSchema

BYTES_PER_PARTITION = 32 * 1024 * 1024


@dataclass(frozen=True)
class StageResult:
    """What a stage did: rows written per table and the time it took."""

    stage: str
    rows: dict[str, int]
    seconds: float
    details: dict[str, object] = field(default_factory=dict)

    def rows_text(self) -> str:
        return ", ".join(f"{table}: {n}" for table, n in self.rows.items())


@dataclass(frozen=True)
class QueryJob:
    """One query over one stream in one lake, for one run."""

    lake: Lake
    plan: QueryPlan
    stream: StreamSchema
    run_id: str

    def table(self, kind: str) -> str:
        return table_name(kind, self.plan.name)

    @property
    def events(self) -> DataFrame:
        return self.lake.read(events_table(self.stream))

    def spark_query(self, events: DataFrame) -> SparkQuery:
        types = {f.name: f.dataType.simpleString().upper() for f in events.schema.fields}
        return SparkQuery(self.plan, self.stream, types)

    def constraint(self, constraint_id: str) -> PairConstraint:
        return next(c for c in self.plan.constraints if c.id == constraint_id)


def timed(stage: str, work: Callable[[], dict[str, int]], **details: object) -> StageResult:
    started = time.perf_counter()
    rows = work()
    return StageResult(stage, rows, time.perf_counter() - started, dict(details))


def partitions_for(lake: Lake, table: str) -> int:
    """Enough time ranges to keep every core busy, and more when the table is large."""
    size = DeltaTable.forPath(lake.spark, lake.path(table)).detail().first()["sizeInBytes"]
    cores = lake.spark.sparkContext.defaultParallelism
    return max(2 * cores, math.ceil(size / BYTES_PER_PARTITION))


def derive_situations(job: QueryJob) -> StageResult:
    """All symbols in one pass: `segments_<q>` (stitched runs), `situations_<q>`, `progress_<q>` (last times)."""
    def work() -> dict[str, int]:
        events = job.events
        q = job.spark_query(events)
        partitions = partitions_for(job.lake, events_table(job.stream))
        job.lake.overwrite(q.runs(events, partitions), job.table("segments"), partition_by=(C.SERIES,))
        situations = q.situations(job.lake.read(job.table("segments")))
        written = job.lake.overwrite(situations, job.table("situations"))
        progress = events.groupBy(*q.keys).agg(F.max(q.event_time()).alias(LAST_TIME))
        job.lake.overwrite(progress, job.table("progress"))
        return {job.table("situations"): written}

    return timed("situations", work)


def detect_constraint(job: QueryJob, constraint_id: str) -> StageResult:
    """One PiePair job: the pairs of one constraint, replacing that constraint's partition of `pairs_<q>`."""
    def work() -> dict[str, int]:
        q = job.spark_query(job.events)
        segments = job.lake.read(job.table("segments"))
        situations = job.lake.read(job.table("situations"))
        pairs = detect_pairs(segments, situations, job.constraint(constraint_id), q)
        written = job.lake.overwrite(pairs, job.table("pairs"), partition_by=(C.CONSTRAINT_ID,),
                                     replace_where=f"{C.CONSTRAINT_ID} = '{constraint_id}'")
        return {f"{job.table('pairs')}[{constraint_id}]": written}

    return timed(f"pairs {constraint_id}", work)


def join_matches(job: QueryJob) -> StageResult:
    """Natural joins of the pair tables into `matches_<q>`."""
    def work() -> dict[str, int]:
        q = job.spark_query(job.events)
        pairs = job.lake.read(job.table("pairs"))
        situations = job.lake.read(job.table("situations"))
        progress = job.lake.read(job.table("progress"))
        written = job.lake.overwrite(find_matches(pairs, situations, progress, q, job.run_id), job.table("matches"))
        return {job.table("matches"): written}

    return timed("matches", work)


def match_counts(job: QueryJob) -> dict[str, int]:
    rows = job.lake.read(job.table("matches")).groupBy(C.STATUS).count().collect()
    return {r[C.STATUS]: int(r["count"]) for r in rows}
