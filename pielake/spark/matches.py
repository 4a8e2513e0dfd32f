"""Matches: natural joins of the PiePair tables on the key and the shared symbols' start times (PieStream §3.3).

Joins follow `join_order` (most selective first, always joining on a shared symbol when one exists). After each
join the partial bindings are pruned by the window: in a reported match every start lies within the window of the
earliest start. Then detection time, status and RETURN columns are computed exactly as docs/semantics.md §5-§6 define
them; `pielake.semantics.reference` is the oracle these are tested against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import reduce
from itertools import pairwise

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake import vocabulary as V
from pielake.query import ast
from pielake.query.analyzer import PairConstraint
from pielake.query.join_order import join_order
from pielake.spark.compile import Compiler
from pielake.spark.query import SparkQuery, case_on, computable

FIRST_START, LAST_START, DECIDED = "__first_start", "__last_start", "__decided"  # join_pairs' running bounds
BROADCAST_PAIR_ROWS = 4_000_000  # pair rows the joins may hold in broadcast hash tables at once (~0.3 GB)
PAIRS_PER_CHAIN_TASK = 100_000  # rows of the first joined pair table per task of the joins
# Broadcast joins in a row are compiled into one Java method per stage, about 1,000 bytes of bytecode each. HotSpot
# compiles no method over 8,000 bytes, so a long chain of joins in one stage runs interpreted. A narrow boundary
# every few joins keeps each stage's method compilable.
JOINS_PER_CODE_STAGE = 5
WIDENING_OPERATORS = frozenset({"+", "-", "*"})  # those whose result can pass the operands' width
VALUE_AGGREGATES = frozenset({"first", "last", "min", "max"})  # those of an attribute's own type
# Spark infers `IS NOT NULL` filters from a join's keys and pushes them into its sides. Which ones a join's side
# gets depends on what later joins read of its columns, so the joins' shared broadcast (`_prefixed`) would be
# planned as several different ones, each built by a scan of its own. An inferred filter is implied by the
# plan's own conditions: without them every result is the same.
MATCHES_SETTINGS = {"spark.sql.constraintPropagation.enabled": "false"}


def pair_rows(pairs: DataFrame) -> dict[str, int]:
    """Rows per constraint id of a pair table: what `join_pairs` plans its joins by."""
    return {r[V.CONSTRAINT_ID]: int(r["count"]) for r in pairs.groupBy(V.CONSTRAINT_ID).count().collect()}


PAIR = "__pair_"  # the pair table's columns while it is joined: both sides' columns are named unqualified
NEXT = "__next"  # the constraint a binding joins next, and (under `PAIR`) the one after a pair row's own


def _prefixed(pairs: DataFrame, q: SparkQuery, order: tuple[PairConstraint, ...]) -> DataFrame:
    """The pair table under `PAIR`, each row with the constraint joined after its own (`NEXT`; NULL for the last).

    A binding carries the constraint it joins next, so a join matches pairs by their constraint with an equality
    between two columns. A literal constraint id would be a filter of the pair table alone, pushed below each
    join: every join would then broadcast a table of its own and read the held pairs once more. Joined on the
    column, the joins share one broadcast of their pairs.
    """
    follows = case_on(V.CONSTRAINT_ID, ((c.id, F.lit(after.id)) for c, after in pairwise(order)),
                      F.lit(None).cast("string"))
    columns = (*q.keys, V.CONSTRAINT_ID, "a_ts", "a_te", "b_ts", "b_te", V.DECIDED_AT)
    return pairs.select(*(F.col(c).alias(PAIR + c) for c in columns), follows.alias(PAIR + NEXT))


def _side(c: PairConstraint, symbol: str) -> str:
    """Which side of constraint `c`'s pairs holds `symbol`: `a` (its left) or `b`."""
    return "a" if symbol == c.left else "b"


def _endpoints(c: PairConstraint, symbols: list[str]) -> list[Column]:
    """A joined pair's endpoints of `symbols` under the symbols' own names."""
    return [F.col(f"{PAIR}{_side(c, s)}_{end}").alias(name(s)) for s in symbols
            for end, name in (("ts", V.symbol_ts), ("te", V.symbol_te))]


def _extend(bound: DataFrame, new_symbols: list[str]) -> DataFrame:
    """Fold the symbols a join added (none where it joined on both of its symbols) and the constraint's decision
    time into the running bounds."""
    folded = {DECIDED: F.greatest(F.col(DECIDED), F.col(PAIR + V.DECIDED_AT))}
    if new_symbols:
        starts = [F.col(V.symbol_ts(s)) for s in new_symbols]
        folded |= {FIRST_START: F.least(F.col(FIRST_START), *starts),
                   LAST_START: F.greatest(F.col(LAST_START), *starts)}
    return bound.withColumns(folded).drop(PAIR + V.DECIDED_AT)


def join_pairs(pairs: DataFrame, q: SparkQuery, rows: Mapping[str, int]) -> DataFrame:
    """Bindings of every symbol that satisfy every constraint, with the earliest and latest start so far and the
    latest decision time. `rows`: the pair table's rows per constraint id (`pair_rows`).

    The bounds are kept as running columns, each join folding in only what it adds: re-reading every start at
    every join made the plan's expressions grow with the square of the symbols (a window filter over every start
    so far after each join, and every decision column carried to the end).

    Where the pair tables after the first fit in broadcast hash tables together (`BROADCAST_PAIR_ROWS`), they
    are broadcast and the bindings never move: every join runs in the tasks the first table was spread over, by
    key and start, several per core. Left to itself, Spark shuffles each pair table only to broadcast it after
    all, and runs the whole chain in the first table's few partitions, one task taking most of the time.
    The joins share one broadcast (`_prefixed`), which Spark builds once if it is planned once for all of them
    (`MATCHES_SETTINGS` say why). The last join is the exception: it reads no next constraint, so its side is
    planned apart whatever it holds, and it holds only the last constraint's pairs.
    """
    order = join_order(q.plan.constraints)
    first, *rest = order
    broadcast = sum(rows.get(c.id, 0) for c in rest) <= BROADCAST_PAIR_ROWS
    cores = pairs.sparkSession.sparkContext.defaultParallelism
    tasks = max(4 * cores, math.ceil(rows.get(first.id, 0) / PAIRS_PER_CHAIN_TASK))  # that every later join runs in
    prefixed = _prefixed(pairs, q, order)
    table = prefixed.filter(F.col(PAIR + V.CONSTRAINT_ID) == first.id)
    if broadcast:
        table = table.repartition(tasks, *(PAIR + k for k in q.keys), PAIR + "a_ts")
    starts = [F.col(V.symbol_ts(first.left)), F.col(V.symbol_ts(first.right))]
    bound = (table.select(*(F.col(PAIR + k).alias(k) for k in q.keys), *_endpoints(first, [first.left, first.right]),
                          F.col(PAIR + V.DECIDED_AT).alias(DECIDED), F.col(PAIR + NEXT).alias(NEXT))
             .withColumns({FIRST_START: F.least(*starts), LAST_START: F.greatest(*starts)}))
    common = prefixed.filter(F.col(PAIR + V.CONSTRAINT_ID).isin(*(c.id for c in rest[:-1])))  # all but the last's
    symbols = [first.left, first.right]
    for joined, c in enumerate(rest, start=1):
        side = common if broadcast and c is not rest[-1] else prefixed.filter(F.col(PAIR + V.CONSTRAINT_ID) == c.id)
        side = F.broadcast(side) if broadcast else side
        if broadcast and joined % JOINS_PER_CODE_STAGE == 0:  # a boundary that moves no row (`JOINS_PER_CODE_STAGE`)
            bound = bound.coalesce(tasks)
        shared = [s for s in (c.left, c.right) if s in symbols]
        added = [s for s in (c.left, c.right) if s not in symbols]
        on = [F.col(k) == F.col(PAIR + k) for k in q.keys] + [F.col(NEXT) == F.col(PAIR + V.CONSTRAINT_ID)] + [
            F.col(V.symbol_ts(s)) == F.col(f"{PAIR}{_side(c, s)}_ts") for s in shared]
        bound = _extend(bound.join(side, reduce(Column.__and__, on), "inner").select(
            *(b for b in bound.columns if b != NEXT), *_endpoints(c, added), F.col(PAIR + V.DECIDED_AT),
            F.col(PAIR + NEXT).alias(NEXT)), added)
        symbols += added
        if added:  # in a reported match every start lies within the window of the earliest
            bound = bound.filter(q.within_window(F.col(LAST_START), F.col(FIRST_START)))
    return bound.drop(NEXT)


def _status(q: SparkQuery, first_start: Column) -> tuple[Column, Column]:
    """A match with open situations is provisional while each of them is known to last no further than the window
    allows: up to its own stream's latest time (docs/semantics.md §5); retracted once one lasts beyond it."""
    ends = {s.name: F.col(V.symbol_te(s.name)) for s in q.plan.symbols}
    any_open = reduce(Column.__or__, (e.isNull() for e in ends.values()))
    alive = reduce(Column.__and__, (end.isNotNull() | q.within_window(F.col(q.last_time_of(symbol)), first_start)
                                    for symbol, end in ends.items()))
    last_end = F.greatest(*ends.values())
    status = (F.when(any_open, F.when(alive, V.PROVISIONAL).otherwise(V.RETRACTED))
              .when(q.within_window(last_end, first_start), V.COMPLETE).otherwise(V.RETRACTED))
    completed = F.when(status == V.COMPLETE, last_end)
    return status, completed


def _with_aggregates(bound: DataFrame, situations: DataFrame, q: SparkQuery) -> DataFrame:
    """Attach each symbol's aggregate columns that RETURN reads, as `__<symbol>__<func>_<attr>`."""
    for symbol in dict.fromkeys(a.symbol for a in q.aggregates):
        wanted = list(dict.fromkeys(a.column for a in q.aggregates if a.symbol == symbol))
        table = situations.filter(F.col(V.SYMBOL) == symbol).select(
            *q.keys, F.col(V.TS).alias(V.symbol_ts(symbol)),
            *(F.col(w).alias(f"__{symbol.lower()}__{w}") for w in wanted))
        bound = bound.join(table, [*q.keys, V.symbol_ts(symbol)], "left")
    return bound


class ReturnCompiler(Compiler):
    """RETURN's expressions. Whole numbers meet in `+`, `-` and `*` as 64-bit integers, as a predicate's do
    (docs/semantics.md §1): an INT attribute's `max` plus another's is their sum, not NULL past 2^31. A RETURN
    column that is one value alone (`max(A.i)`) keeps its attribute's type."""

    def __init__(self, q: SparkQuery):
        super().__init__(self._column, self._call)
        self.q = q
        self.symbols = {s.name.lower(): s.name for s in q.plan.symbols}
        self.in_arithmetic = False

    def compile_binary(self, expr: ast.Binary) -> Column:
        if self.in_arithmetic or expr.op not in WIDENING_OPERATORS:
            return super().compile_binary(expr)
        self.in_arithmetic = True
        try:
            return super().compile_binary(expr)
        finally:
            self.in_arithmetic = False

    def _column(self, ref: ast.Column) -> Column:
        if ref.qualifier is None:  # a key column
            return self.q.column(ref) if self.in_arithmetic else F.col(self.q.names[ref.name.lower()])
        symbol = self.symbols[ref.qualifier.lower()]
        return self.q.time_out(F.col(V.symbol_ts(symbol) if ref.name.lower() == "ts" else V.symbol_te(symbol)))

    def _call(self, c: ast.Call) -> Column:
        arg = c.args[0]
        assert isinstance(arg, ast.Column)
        if c.name == "duration":
            symbol = self.symbols[arg.name.lower()]
            return F.col(V.symbol_te(symbol)) - F.col(V.symbol_ts(symbol))
        symbol = self.symbols[arg.qualifier.lower()] if arg.qualifier else ""
        found = next(a for a in self.q.aggregates if a.reads(c.name, symbol, arg.name))
        value = F.col(f"__{symbol.lower()}__{found.column}")
        if not (self.in_arithmetic and found.func in VALUE_AGGREGATES):
            return value
        return computable(value, self.q.attribute_type(symbol, found.named))


def find_matches(pairs: DataFrame, situations: DataFrame, last_times: DataFrame, q: SparkQuery,
                 run_id: str) -> DataFrame:
    """The matches table (docs/semantics.md §6): keys, <symbol>_ts/_te, detected_at, completed_at, status, RETURN,
    run_id.

    `last_times` holds each key's latest event time (`__last_t`; over several streams, its time in each,
    `SparkQuery.last_time_of`), one row per key: what is known when this run ends. It is broadcast: a join on
    the keys alone would shuffle every match of a key into one task. The pair table's rows per constraint are
    counted first (one small Spark job) to plan the joins.
    """
    bound = join_pairs(pairs, q, pair_rows(pairs))
    first_start = F.col(FIRST_START)
    constrained_ends = [F.col(V.symbol_te(s.name)) for s in q.plan.symbols if s.has_duration]
    detected = F.greatest(F.col(DECIDED), F.col(LAST_START), *constrained_ends)
    bound = (bound.withColumn(V.DETECTED_AT, detected)
             .filter(q.within_window(F.col(V.DETECTED_AT), first_start))
             .join(F.broadcast(last_times), list(q.keys), "inner"))
    status, completed = _status(q, first_start)
    bound = _with_aggregates(bound.withColumn(V.STATUS, status).withColumn(V.COMPLETED_AT, completed),
                             situations, q)
    compiler = ReturnCompiler(q)
    endpoints = [q.time_out(F.col(c)).alias(c) for s in q.plan.symbols
                 for c in (V.symbol_ts(s.name), V.symbol_te(s.name))]
    return bound.select(
        *q.keys, *endpoints, q.time_out(F.col(V.DETECTED_AT)).alias(V.DETECTED_AT),
        q.time_out(F.col(V.COMPLETED_AT)).alias(V.COMPLETED_AT), V.STATUS,
        *(compiler(out.expr).alias(out.name) for out in q.plan.returns), F.lit(run_id).alias(V.RUN_ID))
