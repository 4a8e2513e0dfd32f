"""Matches: natural joins of the PiePair tables on the key and the shared symbols' start times (PieStream §3.3).

Joins follow `join_order` (most selective first, always joining on a shared symbol when one exists). After each
join the partial bindings are pruned by the window: in a reported match every start lies within the window of the
earliest start. Then detection time, status and RETURN columns are computed exactly as SEMANTICS §5-§6 define
them; `pielake.semantics.reference` is the oracle these are tested against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import reduce

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake.query import ast
from pielake.query.join_order import join_order
from pielake.semantics.reference import COMPLETE, PROVISIONAL, RETRACTED
from pielake.spark import columns as C
from pielake.spark.compile import Compiler
from pielake.spark.query import SparkQuery

LAST_TIME = "__last_t"
FIRST_START, LAST_START, DECIDED = "__first_start", "__last_start", "__decided"  # join_pairs' running bounds
BROADCAST_PAIR_ROWS = 4_000_000  # pair rows the joins may hold in broadcast hash tables at once (~0.3 GB)
PAIRS_PER_CHAIN_TASK = 100_000  # rows of the first joined pair table per task of the joins
# Broadcast joins in a row are compiled into one Java method per stage, about 1,000 bytes of bytecode each. HotSpot
# compiles no method over 8,000 bytes (and, allowed to, gave up on the 16,951 bytes of 17 joins), so the n=18
# chain ran interpreted: 24 s of CPU over its 8 tasks. A narrow boundary every few joins keeps each stage's
# method compilable: four stages, 8.2 s.
JOINS_PER_CODE_STAGE = 5


def pair_rows(pairs: DataFrame) -> dict[str, int]:
    """Rows per constraint id of a pair table: what `join_pairs` plans its joins by."""
    return {r[C.CONSTRAINT_ID]: int(r["count"]) for r in pairs.groupBy(C.CONSTRAINT_ID).count().collect()}


def _decided(constraint_id: str) -> str:
    """The column a renamed pair table (`_renamed`) holds its decision time in, until `_extend` folds it in."""
    return f"__d_{constraint_id}"


def _renamed(pairs: DataFrame, constraint_id: str, left: str, right: str, q: SparkQuery) -> DataFrame:
    return pairs.filter(F.col(C.CONSTRAINT_ID) == constraint_id).select(
        *q.keys, F.col("a_ts").alias(C.symbol_ts(left)), F.col("a_te").alias(C.symbol_te(left)),
        F.col("b_ts").alias(C.symbol_ts(right)), F.col("b_te").alias(C.symbol_te(right)),
        F.col(C.DECIDED_AT).alias(_decided(constraint_id)))


def _extend(bound: DataFrame, new_symbols: list[str], decided: str) -> DataFrame:
    """Fold the symbols a join added (none where it joined on both of its symbols) and the constraint's decision
    time into the running bounds."""
    folded = {DECIDED: F.greatest(F.col(DECIDED), F.col(decided))}
    if new_symbols:
        starts = [F.col(C.symbol_ts(s)) for s in new_symbols]
        folded |= {FIRST_START: F.least(F.col(FIRST_START), *starts),
                   LAST_START: F.greatest(F.col(LAST_START), *starts)}
    return bound.withColumns(folded).drop(decided)


def join_pairs(pairs: DataFrame, q: SparkQuery, rows: Mapping[str, int]) -> DataFrame:
    """Bindings of every symbol that satisfy every constraint, with the earliest and latest start so far and the
    latest decision time. `rows`: the pair table's rows per constraint id (`pair_rows`).

    The bounds are kept as running columns, each join folding in only what it adds: re-reading every start at
    every join made the plan's expressions grow with the square of the symbols (at n = 18, 17 window filters
    over up to 18 starts each, and 17 decision columns carried to the end).

    Where the pair tables after the first fit in broadcast hash tables together (`BROADCAST_PAIR_ROWS`), they
    are broadcast and the bindings never move: every join runs in the tasks the first table was spread over, by
    key and start, several per core. Left to itself, Spark shuffled each pair table only to broadcast it after
    all, and ran the whole chain in the first table's two partitions: at n = 18 one task took 18 s, the other 7.
    """
    first, *rest = join_order(q.plan.constraints)
    broadcast = sum(rows.get(c.id, 0) for c in rest) <= BROADCAST_PAIR_ROWS
    cores = pairs.sparkSession.sparkContext.defaultParallelism
    tasks = max(4 * cores, math.ceil(rows.get(first.id, 0) / PAIRS_PER_CHAIN_TASK))  # that every later join runs in
    table = _renamed(pairs, first.id, first.left, first.right, q)
    if broadcast:
        table = table.repartition(tasks, *q.keys, C.symbol_ts(first.left))
    starts = [F.col(C.symbol_ts(first.left)), F.col(C.symbol_ts(first.right))]
    bound = table.withColumns({FIRST_START: F.least(*starts), LAST_START: F.greatest(*starts),
                               DECIDED: F.col(_decided(first.id))}).drop(_decided(first.id))
    symbols = [first.left, first.right]
    for joined, c in enumerate(rest, start=1):
        table = _renamed(pairs, c.id, c.left, c.right, q)
        if broadcast:
            table = F.broadcast(table)
            if joined % JOINS_PER_CODE_STAGE == 0:  # a stage boundary that moves no row (`JOINS_PER_CODE_STAGE`)
                bound = bound.coalesce(tasks)
        shared = [s for s in (c.left, c.right) if s in symbols]
        added = [s for s in (c.left, c.right) if s not in symbols]
        on = [*q.keys, *(C.symbol_ts(s) for s in shared)]
        bound = _extend(bound.join(table.drop(*(C.symbol_te(s) for s in shared)), on, "inner"), added,
                        _decided(c.id))
        symbols += added
        if added:  # in a reported match every start lies within the window of the earliest
            bound = bound.filter(q.within_window(F.col(LAST_START), F.col(FIRST_START)))
    return bound


def _status(q: SparkQuery, first_start: Column) -> tuple[Column, Column]:
    ends = [F.col(C.symbol_te(s.name)) for s in q.plan.symbols]
    any_open = reduce(lambda a, b: a | b, (e.isNull() for e in ends))
    last_end = F.greatest(*ends)
    status = (F.when(any_open, F.when(q.within_window(F.col(LAST_TIME), first_start), PROVISIONAL)
                     .otherwise(RETRACTED))
              .when(q.within_window(last_end, first_start), COMPLETE).otherwise(RETRACTED))
    completed = F.when(status == COMPLETE, last_end)
    return status, completed


def _with_aggregates(bound: DataFrame, situations: DataFrame, q: SparkQuery) -> DataFrame:
    """Attach each symbol's aggregate columns that RETURN reads, as `__<symbol>__<func>_<attr>`."""
    for symbol in dict.fromkeys(a.symbol for a in q.aggregates):
        wanted = list(dict.fromkeys(a.column for a in q.aggregates if a.symbol == symbol))
        table = situations.filter(F.col(C.SYMBOL) == symbol).select(
            *q.keys, F.col(C.TS).alias(C.symbol_ts(symbol)),
            *(F.col(w).alias(f"__{symbol.lower()}__{w}") for w in wanted))
        bound = bound.join(table, [*q.keys, C.symbol_ts(symbol)], "left")
    return bound


def _return_compiler(q: SparkQuery) -> Compiler:
    symbols = {s.name.lower(): s.name for s in q.plan.symbols}

    def column(ref: ast.Column) -> Column:
        if ref.qualifier is None:
            return F.col(q.names[ref.name.lower()])
        symbol = symbols[ref.qualifier.lower()]
        return q.time_out(F.col(C.symbol_ts(symbol) if ref.name.lower() == "ts" else C.symbol_te(symbol)))

    def call(c: ast.Call) -> Column:
        arg = c.args[0]
        assert isinstance(arg, ast.Column)
        if c.name == "duration":
            symbol = symbols[arg.name.lower()]
            return F.col(C.symbol_te(symbol)) - F.col(C.symbol_ts(symbol))
        symbol = symbols[arg.qualifier.lower()] if arg.qualifier else ""
        return F.col(f"__{symbol.lower()}__{c.name}_{arg.name.lower()}")

    return Compiler(column, call)


def find_matches(pairs: DataFrame, situations: DataFrame, last_times: DataFrame, q: SparkQuery,
                 run_id: str) -> DataFrame:
    """The matches table (SEMANTICS §6): keys, <symbol>_ts/_te, detected_at, completed_at, status, RETURN, run_id.

    `last_times` holds each key's latest event time (`__last_t`), one row per key: what is known when this run
    ends. It is broadcast: a join on the keys alone would shuffle every match of a key into one task. The pair
    table's rows per constraint are counted first (one small Spark job) to plan the joins.
    """
    bound = join_pairs(pairs, q, pair_rows(pairs))
    first_start = F.col(FIRST_START)
    constrained_ends = [F.col(C.symbol_te(s.name)) for s in q.plan.symbols if s.has_duration]
    detected = F.greatest(F.col(DECIDED), F.col(LAST_START), *constrained_ends)
    bound = (bound.withColumn(C.DETECTED_AT, detected)
             .filter(q.within_window(F.col(C.DETECTED_AT), first_start))
             .join(F.broadcast(last_times), list(q.keys), "inner"))
    status, completed = _status(q, first_start)
    bound = _with_aggregates(bound.withColumn(C.STATUS, status).withColumn(C.COMPLETED_AT, completed),
                             situations, q)
    compiler = _return_compiler(q)
    endpoints = [q.time_out(F.col(c)).alias(c) for s in q.plan.symbols
                 for c in (C.symbol_ts(s.name), C.symbol_te(s.name))]
    return bound.select(
        *q.keys, *endpoints, q.time_out(F.col(C.DETECTED_AT)).alias(C.DETECTED_AT),
        q.time_out(F.col(C.COMPLETED_AT)).alias(C.COMPLETED_AT), C.STATUS,
        *(compiler(out.expr).alias(out.name) for out in q.plan.returns), F.lit(run_id).alias(C.RUN_ID))
