"""Run the Spark kernels in memory (no Delta) and put their results in the reference's shape."""

from __future__ import annotations

from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, SparkSession

from pielake.query.analyzer import QueryPlan
from pielake.semantics.reference import Match
from pielake.spark.matches import find_matches
from pielake.spark.pairs import detect_pairs
from pielake.spark.query import SparkQuery
from pielake.spark.runs import Reading
from pielake.spark.timeline import Timeline
from pielake.streams import StreamSchema
from tests.strategies import kernel_time

Row = dict[str, Any]


def stream_of(rows: list[Row], keys: tuple[str, ...] = ("key",), types: dict[str, str] | None = None) -> StreamSchema:
    """A stream schema for test rows: BIGINT time `ts`, BOOLEAN flags, DOUBLE numbers, STRING otherwise."""
    def kind(name: str) -> str:
        if types and name in types:
            return types[name]
        value = next((r[name] for r in rows if r.get(name) is not None), None)
        if name == "ts" or (isinstance(value, int) and not isinstance(value, bool)):
            return "BIGINT"
        return {bool: "BOOLEAN", float: "DOUBLE"}.get(type(value), "STRING")

    names = list(dict.fromkeys(n for r in rows for n in r))
    return StreamSchema("S", keys, "ts", "s", tuple((n, kind(n)) for n in names))


LAYOUTS = ("shuffled", "by key", "in place", "in place, keys side by side", "in place, overlapping")
# The layouts the kernel shuffles itself (by time range, or each key whole); every other one is read in place.
READINGS = {"shuffled": Reading.RANGES, "by key": Reading.BY_KEY}
SHUFFLED = tuple(READINGS)
AN_EVENT_A_TASK = "in place, an event a task"  # every run at a task's edge: slow, so not one of the random LAYOUTS


def laid_out(events: DataFrame, layout: str, partitions: int, order: tuple[str | Column, ...]) -> DataFrame:
    """Events in `partitions` tasks as the kernel would find them in files: `in place`, each task a disjoint
    stretch of time per key, its rows out of order; `in place, keys side by side`, each task a range of time
    holding every key's events in it, as `publish_events` writes files; `in place, overlapping`, rows dealt
    round-robin; `AN_EVENT_A_TASK`, one event in each task (`partitions` is then ignored), so every run starts
    and ends at a task's edge and everything the kernel knows about it comes through the stitch."""
    if layout == AN_EVENT_A_TASK:
        rows = events.orderBy(*order).collect()
        return events.sparkSession.createDataFrame(events.sparkSession.sparkContext.parallelize(rows, len(rows)),
                                                   events.schema)
    if layout == "in place, keys side by side":
        by_time = events.repartitionByRange(partitions, order[-1], *order[:-1])
        return by_time.sortWithinPartitions(F.rand(7)).localCheckpoint()
    if layout == "in place":
        return events.repartitionByRange(partitions, *order).sortWithinPartitions(F.rand(7)).localCheckpoint()
    if layout == "in place, overlapping":
        return events.repartition(partitions).localCheckpoint()
    return events


class Kernels:
    """Runs runs -> situations -> pairs -> matches, cutting lineage between stages as the lake does.

    `layout` (`LAYOUTS`): how the events reach the runs kernel, or how it shuffles them; the results must not
    depend on it. `over_streams` runs a query over several streams (`Timeline`)."""

    def __init__(self, spark: SparkSession, plan: QueryPlan, rows: list[Row], partitions: int = 4,
                 stream: StreamSchema | None = None, *, layout: str = "shuffled"):
        self.plan = plan
        self.stream = stream or stream_of(rows, plan.keys)
        q = SparkQuery(plan, self.stream, dict(self.stream.columns))
        self._run(q, q.keyed(spark.createDataFrame(rows, self.stream.ddl)), partitions, layout)

    @classmethod
    def over_streams(cls, spark: SparkSession, plan: QueryPlan, streams: list[tuple[StreamSchema, list[Row]]],
                     partitions: int = 4, *, layout: str = "shuffled") -> Kernels:
        """The kernels of a query over several streams: each stream of FROM, in its order, with its rows."""
        kernels = cls.__new__(cls)
        kernels.plan = plan
        q = Timeline(plan, [s for s, _ in streams], [dict(s.columns) for s, _ in streams])
        events = q.events_of([spark.createDataFrame(rows, s.ddl) for s, rows in streams])
        kernels._run(q, events, partitions, layout)
        return kernels

    def _run(self, q: SparkQuery, events: DataFrame, partitions: int, layout: str) -> None:
        self.q, self.events = q, events
        encoded = q.runs(laid_out(events, layout, partitions, (*q.keys, q.event_time())), partitions,
                         reading=READINGS.get(layout, Reading.IN_PLACE))
        self.read_in_place = encoded.reading.in_place
        self.runs = encoded.runs.localCheckpoint()
        self.situations = q.situations(self.runs, events).localCheckpoint()
        self.last_times = q.latest_times(events).localCheckpoint()

    def pairs(self, constraint_id: str | None = None) -> DataFrame:
        chosen = [c for c in self.plan.constraints if constraint_id in (None, c.id)]
        return detect_pairs(self.runs, self.situations, chosen, self.q, self.last_times).localCheckpoint()

    def matches(self) -> DataFrame:
        return find_matches(self.pairs(), self.situations, self.last_times, self.q, "test-run")


def spark_rows(matches: DataFrame, plan: QueryPlan) -> list[tuple]:
    """Matches as sortable tuples: key, every symbol's (ts, te), detected_at, completed_at, status, RETURN; the
    times of a TIMESTAMP stream in kernel time, as the reference over its kernel rows gives them."""
    out = []
    for r in matches.collect():
        d = {name: kernel_time(value) for name, value in r.asDict().items()}
        key = tuple(d[k] for k in plan.keys)
        ends = tuple(x for s in plan.symbols for x in (d[f"{s.name.lower()}_ts"], d[f"{s.name.lower()}_te"]))
        values = tuple(d[o.name] for o in plan.returns)
        out.append((key, ends, d["detected_at"], d["completed_at"], d["status"], values))
    return sorted(out, key=repr)


def reference_rows(matches: list[Match], plan: QueryPlan) -> list[tuple]:
    out = []
    for m in matches:
        ends = tuple(x for s in plan.symbols for x in (m.situation(s.name).ts, m.situation(s.name).te))
        values = tuple(v for _, v in m.values)
        out.append((m.key, ends, m.detected_at, m.completed_at, m.status, values))
    return sorted(out, key=repr)

