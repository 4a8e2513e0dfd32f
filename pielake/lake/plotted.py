"""What `pielake plot` draws, read from the lake: one key's situations and matches, between two times, as the
lanes, bars and brackets of a `pielake.plot.Timeline`. In this process, or on an engine, which sends the timeline
to its client as JSON, so that a client draws a picture without importing Spark."""

from __future__ import annotations

import shlex
from functools import reduce

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake import vocabulary as V
from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.plot import UTC, Bar, Bracket, Timeline
from pielake.query.analyzer import QueryPlan
from pielake.query.time_fields import instant
from pielake.spark.query import time_literal, typed_range, utc_clock
from pielake.streams import TIMESTAMP_UNIT, StreamSchema, declared_schema


def _for_key(frame: DataFrame, plan: QueryPlan, key: tuple[str, ...]) -> DataFrame:
    """The rows of `frame` of the key given as text (`--key`), each value read as its column's type: a value that
    is not one (text for a numeric key) names no key, as any other unknown key does."""
    kinds = {field.name.lower(): field.dataType for field in frame.schema.fields}
    return frame.filter(reduce(lambda a, b: a & b, (F.col(k) == F.lit(v).try_cast(kinds[k.lower()])
                                                    for k, v in zip(plan.keys, key, strict=True)), F.lit(True)))


def _in_range(start: Column, end: Column, since: Column | None, until: Column | None) -> Column:
    """Rows whose interval meets [since, until]; an open end reaches every later time."""
    keep = F.lit(True)
    if since is not None:
        keep &= end.isNull() | (end >= since)
    if until is not None:
        keep &= start <= until
    return keep


def busiest_key(plan: QueryPlan, matches: DataFrame, situations: DataFrame) -> tuple[tuple[str, ...], str] | None:
    """The key with the most matches, else the one with the most situations (the first such key in key order),
    as strings, and which of the two it has most of; None where no key has a situation. A key without matches is
    still worth drawing: its situations show why none matched. A query without keys has one key, `()`, which
    counts its rows as a whole (a count of none where it has none)."""
    for frame, most in ((matches, V.MATCHES), (situations, V.SITUATIONS)):
        top = frame.groupBy(*plan.keys).count().orderBy(F.desc("count"), *plan.keys).first()
        if top is not None and top["count"]:
            return tuple(str(top[k]) for k in plan.keys), most
    return None


def _check_key_columns(plan: QueryPlan, key: tuple[str, ...], matches: DataFrame, situations: DataFrame) -> None:
    """Refuse a --key of another number of values than the query has key columns, showing the options that name
    `busiest_key`."""
    if len(key) == len(plan.keys):
        return
    if not plan.keys:
        raise PielakeError(f"query {plan.name} has no PARTITION BY, so all its events are one key: leave --key out")
    found = busiest_key(plan, matches, situations)
    example = "" if found is None else \
        f": {' '.join(f'--key {shlex.quote(value)}' for value in found[0])} draws the key with the most {found[1]}"
    raise PielakeError(f"query {plan.name} is partitioned by {', '.join(plan.keys)}: give one --key per column, in "
                       f"that order{example}")


def _key_to_try(plan: QueryPlan, matches: DataFrame, situations: DataFrame) -> str:
    """What a refused --key is told to try: `busiest_key`."""
    found = busiest_key(plan, matches, situations)
    if found is None:
        return "no key has situations yet"
    return f"the key with the most {found[1]} is {_shown(plan, found[0])}"


def timeline(lake: Lake, plan: QueryPlan, key: tuple[str, ...] | None = None, since: str | None = None,
             until: str | None = None) -> Timeline:
    """The lanes, bars and brackets of one key (default: `busiest_key`) between `since` and `until` (stream
    time, inclusive)."""
    name = plan.name
    for kind in (V.SITUATIONS, V.MATCHES):
        if not lake.exists(V.table_name(kind, name)):
            raise PielakeError(f"no {kind} of query {name} in {lake.root}; run the query first")
    stream = _stream(lake, plan)  # --from and --to read as every command reads a time
    low, high = typed_range(since, until, stream)
    every_match = lake.read(V.table_name(V.MATCHES, name))
    every_situation = lake.read(V.table_name(V.SITUATIONS, name))
    if key is None:
        found = busiest_key(plan, every_match, every_situation)
        if found is None:
            raise PielakeError(f"query {name} has no situations yet: no symbol's predicate has held on an event of "
                               "its stream")
        key = found[0]
    _check_key_columns(plan, key, every_match, every_situation)
    lanes = tuple(s.name for s in plan.symbols)
    situations = _for_key(every_situation, plan, key)
    if situations.isEmpty():
        raise PielakeError(f"query {name} has no situations of {_shown(plan, key)} (a --key that names no key of the "
                           f"stream, or one no symbol ever held for); "
                           f"{_key_to_try(plan, every_match, every_situation)}")
    timed = stream.time_unit == TIMESTAMP_UNIT
    clock = utc_clock if timed else (lambda time: time)  # drawn as UTC reads them, wherever the plot is drawn
    since_at, until_at = (None if t is None else time_literal(t, stream) for t in (low, high))
    bars = tuple(sorted((Bar(lanes.index(r[V.SYMBOL]), r[V.TS], r[V.TE]) for r in situations.filter(
        _in_range(F.col(V.TS), F.col(V.TE), since_at, until_at)).select(
            V.SYMBOL, *(clock(F.col(c)).alias(c) for c in (V.TS, V.TE))).collect()), key=lambda b: (b.lane, b.start)))
    matches = _for_key(every_match, plan, key)
    first = F.least(*(F.col(V.symbol_ts(s)) for s in lanes))
    ends = [F.col(V.symbol_te(s)) for s in lanes]
    last = F.when(reduce(lambda a, b: a | b, (e.isNull() for e in ends)), None).otherwise(F.greatest(*ends))
    rows = matches.select(first.alias("start"), last.alias("end"), V.DETECTED_AT, V.STATUS).filter(
        _in_range(F.col("start"), F.col("end"), since_at, until_at)).select(
            *(clock(F.col(c)).alias(c) for c in ("start", "end", V.DETECTED_AT)), V.STATUS).collect()
    brackets = tuple(sorted((Bracket(r["start"], r["end"], r[V.DETECTED_AT], r[V.STATUS]) for r in rows),
                            key=lambda b: (b.start, b.detected_at)))
    # of TIMESTAMPs, as `clock` hands them to Python: UTC's wall clock, naming no zone
    edges = (low, high) if not timed else tuple(None if t is None else instant(t).replace(tzinfo=None)
                                                for t in (low, high))
    drawn_key = _shown(plan, key)
    return Timeline(f"{name}: {drawn_key}  ({V.counted(len(brackets), 'match')})", lanes, bars, brackets,
                    UTC if timed else stream.time_unit, edges, drawn_key)


def _stream(lake: Lake, plan: QueryPlan) -> StreamSchema:
    """The query's first stream as the lake keeps it, or schemas/ declares it (several streams share their time
    type), as a run reads it."""
    schema = declared_schema(plan.sources[0].stream, lake.root)
    if schema is None:
        raise PielakeError(f"stream {plan.sources[0].stream} has no schema in {lake.root}; run the query first")
    return schema


def _shown(plan: QueryPlan, key: tuple[str, ...]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in zip(plan.keys, key, strict=True)) or "all events"
