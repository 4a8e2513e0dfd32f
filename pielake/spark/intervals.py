"""Interval streams on the point kernels: a key's interval rows become its instants (docs/semantics.md §2).

A key's instants are the starts and ends of its rows at or before its latest start; a symbol holds at an instant
when a row covering it satisfies the predicate. Instants are a point stream, one row per key and time with the
symbols' truth packed as a point stream's predicates are (`SparkQuery.words`), so the runs kernel, the PiePair
automata, the window and the statuses read them unchanged.

Coverage is counted, not searched: each row adds one at its start and takes one away at its end for every symbol
it satisfies, and a running sum per key in time order is the number of satisfying rows covering each instant.

Aggregates cannot come from instants (a row's attributes hold over its whole span, and rows overlap): they are
computed from the rows that make each situation, the symbol's rows starting in `[ts, te)`, under the same partial
names the runs kernel gives a point stream's (`Partial.name`), so the situations table reads both alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window

from pielake import vocabulary as V
from pielake.spark import columns as C
from pielake.spark.compile import predicate
from pielake.spark.runs import Partial
from pielake.spark.sums import EXACT_DOUBLE_SUM, joined

if TYPE_CHECKING:
    from pielake.spark.query import SparkQuery

OPENS = "__opens"  # the time is the start of some row (instants stop at the latest start)
EDGE = "__edge"  # the time is a row's start or end, not only a horizon mark's: an instant
LATEST = "__latest_start"
UNTIL = "__until"  # a row's end in kernel time: rows sharing a start are in end order
ROW = "__is_row"  # 1 for a row, 0 for a situation's start, which comes first among rows sharing its time
BOUND = "__situation_end"  # the end of the latest situation started so far; an open one's is OPEN_END
OPEN_END = 2**63 - 1


def _covering(index: int) -> str:
    return f"__covering{index}"


def _satisfies(q: SparkQuery, index: int) -> Column:
    """Symbol number `index`'s predicate on a row, NULL counting as false; a horizon mark satisfies none."""
    return F.coalesce(predicate(q.plan.symbols[index].predicate, q.column) & q.is_row(), F.lit(False))


def instants(rows: DataFrame, q: SparkQuery) -> DataFrame:
    """The kernel input of an interval stream's rows: keys, `__t` (an instant) and the flags words. A horizon
    mark moves the key's latest start to it, and is no instant itself."""
    symbols = range(len(q.plan.symbols))
    opened = rows.select(*q.keys, q.event_time().alias(C.T), F.lit(True).alias(OPENS), q.is_row().alias(EDGE),
                         *(_satisfies(q, i).cast("int").alias(_covering(i)) for i in symbols))
    closed = rows.filter(q.is_row()).select(*q.keys, q.reach_time().alias(C.T), F.lit(False).alias(OPENS),
                                            F.lit(True).alias(EDGE),
                                            *((-_satisfies(q, i).cast("int")).alias(_covering(i)) for i in symbols))
    edges = (opened.unionByName(closed).groupBy(*q.keys, C.T)
             .agg(F.bool_or(OPENS).alias(OPENS), F.bool_or(EDGE).alias(EDGE),
                  *(F.sum(_covering(i)).alias(_covering(i)) for i in symbols)))
    key = Window.partitionBy(*q.keys)
    so_far = key.orderBy(C.T).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    counted = edges.select(*q.keys, C.T, EDGE, F.max(F.when(F.col(OPENS), F.col(C.T))).over(key).alias(LATEST),
                           *(F.sum(_covering(i)).over(so_far).alias(_covering(i)) for i in symbols))
    known = counted.filter((F.col(C.T) <= F.col(LATEST)) & F.col(EDGE))
    return known.select(*q.keys, C.T, *q.words(lambda i: F.col(_covering(i)) > 0))


def _rule(p: Partial, value: Column, q: SparkQuery) -> Column:
    """A partial over the rows of one situation, in start order, rows sharing a start in end order, then in the
    order columns' (a key's rows are unique per start, end and order columns, so the order is total)."""
    order = F.struct(C.T, UNTIL, *q.order_columns)
    total = joined(F.collect_list(value.cast("double"))) if p.spark_type == EXACT_DOUBLE_SUM else \
        F.sum(value.cast(p.spark_type))
    rule = {"first": F.min_by(value, order), "last": F.max_by(value, order), "min": F.min(value),
            "max": F.max(value), "sum": total, "count": F.count(value)}[p.func]
    return rule.cast(p.spark_type).alias(p.name)


def with_partials(situations: DataFrame, rows: DataFrame, q: SparkQuery) -> DataFrame:
    """`situations` (keys, `__series`, ts, te) with the partial aggregates of RETURN over each one's rows.

    A symbol's situations of a key are disjoint, so a row starting in one belongs to the latest situation that
    starts at or before it, if the row starts before that situation's end: found by carrying each situation's
    start and end forward in time order over its key's rows (a window per key, as `instants` uses), where a join
    on the key and a range of time would compare every row with every situation of its key."""
    for index in range(len(q.plan.symbols)):
        partials = q.partials_of(index)
        if not partials:
            continue
        read = list(dict.fromkeys([*q.order_columns, *(p.source for p in partials)]))
        none = F.lit(None).cast("bigint")
        own = rows.filter(_satisfies(q, index)).select(*q.keys, q.event_time().alias(C.T),
                                                       q.reach_time().alias(UNTIL), *read, none.alias(V.TS),
                                                       none.alias(BOUND), F.lit(1).alias(ROW))
        spans = situations.filter(F.col(C.SERIES) == index).select(
            *q.keys, F.col(V.TS).alias(C.T), none.alias(UNTIL), *(F.lit(None).alias(c) for c in read), V.TS,
            F.coalesce(F.col(V.TE), F.lit(OPEN_END)).alias(BOUND), F.lit(0).alias(ROW))
        so_far = Window.partitionBy(*q.keys).orderBy(C.T, ROW).rowsBetween(Window.unboundedPreceding,
                                                                           Window.currentRow)
        carried = [F.last(c, ignorenulls=True).over(so_far).alias(c) for c in (V.TS, BOUND)]
        placed = spans.unionByName(own).select(*q.keys, C.T, UNTIL, *read, ROW, *carried)
        inside = (F.col(ROW) == 1) & F.col(V.TS).isNotNull() & (F.col(C.T) < F.col(BOUND))
        merged = (placed.filter(inside).groupBy(*q.keys, V.TS)
                  .agg(*(_rule(p, F.col(p.source), q) for p in partials)).withColumn(C.SERIES, F.lit(index)))
        situations = situations.join(merged, [*q.keys, C.SERIES, V.TS], "left")
    return situations
