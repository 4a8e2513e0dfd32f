"""A query over several streams on the one-stream kernels, as one timeline (docs/semantics.md §1, §2, §5).

A key's streams meet on one timeline: the union of their instants (a point stream's events, an interval stream's
instants), at which each symbol's truth is its own stream's, carried forward from that stream's latest instant.
A symbol's truth changes only at its own stream's instants, so on the union its situations are the ones its stream
gives, and so are the minterm runs of two symbols of one stream that the PiePair automata read. The runs kernel,
the automata, the range joins and the joins of matches therefore run unchanged; three things read the streams
apart:

- a pair across two streams counts only if decided by the key's time in the slower of them (`known_by`): beyond
  it, the slower stream's truth is carried forward, not known;
- an open situation's status reads its own stream's time (`last_time_of`);
- aggregates come from each stream's own rows (`with_row_partials`), as an interval stream's do.

A `Timeline`'s events frame (`events_of`) holds every stream's rows: the keys as they are, each stream's other
columns under a prefix of its own (two streams may have columns of one name and different types) and the number
of the stream (`C.STREAM`). Each stream's part (`parts`) is a `SparkQuery` of the plan in which the other
streams' symbols never hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cached_property, reduce

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window

from pielake.query import ast
from pielake.query.analyzer import AGGREGATES, OutputColumn, PairConstraint, QueryPlan, walk
from pielake.spark import columns as C
from pielake.spark import intervals
from pielake.spark.arrow_predicates import ArrowInput
from pielake.spark.query import Aggregate, SparkQuery, case_on
from pielake.spark.runs import Partial
from pielake.streams import INTEGER_TYPES, StreamSchema

LATEST = "__latest_first"
NEVER = ast.Literal(False)  # the predicate of another stream's symbol, in a stream's part


def prefix(stream: int) -> str:
    """What the columns of stream number `stream` are named under in a Timeline's events frame."""
    return f"__s{stream}_"


def part_plan(plan: QueryPlan, label: str) -> QueryPlan:
    """The plan as the stream `label` reads it: its own symbols' predicates, FALSE for the other streams' symbols
    (so the flag layout is the whole query's), and for RETURN only the aggregates of its own symbols, whose
    partials it computes."""
    own = {s.name.lower() for s in plan.symbols if s.source == label}
    symbols = tuple(s if s.source == label else replace(s, predicate=NEVER) for s in plan.symbols)
    calls = dict.fromkeys(node for out in plan.returns for node in walk(out.expr)
                          if isinstance(node, ast.Call) and node.name in AGGREGATES
                          and isinstance(node.args[0], ast.Column)
                          and (node.args[0].qualifier or "").lower() in own)
    returns = tuple(OutputColumn(f"__{i}", call) for i, call in enumerate(calls))
    source = next(s for s in plan.sources if s.label == label)
    return replace(plan, sources=(source,), symbols=symbols, returns=returns)


def _common_type(types: Sequence[str]) -> str:
    """The one type of a key column that the streams hold in types of one family (the analyzer checks that)."""
    if len(set(types)) == 1:
        return types[0]
    return "BIGINT" if all(t in INTEGER_TYPES for t in types) else "DOUBLE"


def _told(stream: int, word: str) -> str:
    return f"{word}_told{stream}"


def _carried_to(events: DataFrame, part: SparkQuery, cut: Column, keys: tuple[str, ...]) -> DataFrame:
    """A point stream's events after `cut`, and its key's latest event at or before it, moved to the cut."""
    latest_first = Window.partitionBy(*keys).orderBy(part.event_time().desc())
    start = part.names[part.stream.time_column.lower()]
    held = (events.filter(part.event_time() <= cut).withColumn(LATEST, F.row_number().over(latest_first))
            .filter(F.col(LATEST) == 1).drop(LATEST).withColumn(start, part.time_out(cut)))
    return events.filter(part.event_time() > cut).unionByName(held)


class Timeline(SparkQuery):
    """A `QueryPlan` over several streams bound to their schemas and to their events' columns."""

    def __init__(self, plan: QueryPlan, streams: Sequence[StreamSchema], column_types: Sequence[Mapping[str, str]]):
        """`streams` and `column_types`: the schema of each stream of FROM, in its order, and its events' columns
        with their Spark SQL types."""
        labels = [s.label for s in plan.sources]
        self.parts = tuple(SparkQuery(part_plan(plan, label), stream, dict(types), prefix(i))
                           for i, (label, stream, types) in enumerate(zip(labels, streams, column_types, strict=True)))
        self.stream_of = {s.name: labels.index(s.source) for s in plan.symbols}
        key_types = {k: _common_type([{c.lower(): t.upper() for c, t in types.items()}[k.lower()]
                                      for types in column_types]) for k in plan.keys}
        one = replace(streams[0], name="+".join(s.name for s in streams), end_column=None, horizon_lag=None,
                      order_columns=())
        super().__init__(plan, one, key_types)

    # ------------------------------------------------------------ the events frame

    def events_of(self, frames: Sequence[DataFrame]) -> DataFrame:
        """Every stream's rows in one frame (module docstring)."""
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True),
                      (self._laid_out(i, frame) for i, frame in enumerate(frames)))

    def _laid_out(self, stream: int, frame: DataFrame) -> DataFrame:
        """One stream's events in the events frame's layout: its keys in their common types, its other columns
        under its prefix, its number."""
        keyed = self.parts[stream].keyed(frame)
        stored = {c.lower(): c for c in keyed.columns}
        keys = [F.col(stored[k.lower()]).cast(kind).alias(k)
                for k, kind in zip(self.keys, self.key_types, strict=True)]
        named = {k.lower() for k in self.keys}
        own = [F.col(c).alias(prefix(stream) + c) for c in keyed.columns if c.lower() not in named]
        return keyed.select(*keys, *own, F.lit(stream).alias(C.STREAM))

    def rows_of(self, events: DataFrame, stream: int) -> DataFrame:
        """The rows of stream number `stream` in the events frame."""
        return events.filter(F.col(C.STREAM) == stream)

    # ------------------------------------------------------------ time

    def stored_time(self) -> Column:
        return F.coalesce(*(part.stored_time() for part in self.parts))

    def stored_reach(self) -> Column:
        return F.coalesce(*(part.stored_reach() for part in self.parts))

    @property
    def stream_count(self) -> int:
        return len(self.parts)

    def last_time_of(self, symbol: str) -> str:
        return C.last_time(self.stream_of[symbol])

    def latest_times(self, events: DataFrame, key_bounds: DataFrame | None = None) -> DataFrame:
        """Each key's time in each stream (`C.last_time`: its latest event, of an interval stream its latest start;
        NULL in a stream the key is missing from) and the latest of them (`C.LAST_TIME`). The runs kernel's
        bounds are of the timeline, which do not tell the streams apart: not read."""
        times = [F.max(F.when(F.col(C.STREAM) == i, part.event_time())).alias(C.last_time(i))
                 for i, part in enumerate(self.parts)]
        return events.groupBy(*self.keys).agg(*times).withColumn(C.LAST_TIME, self.latest_time())

    def latest_time(self) -> Column:
        return F.greatest(*(F.col(c) for c in self.stream_times))

    def own_last_time(self) -> Column:
        return case_on(C.STREAM, ((i, F.col(c)) for i, c in enumerate(self.stream_times)), F.lit(None).cast("bigint"))

    def settled_time(self) -> Column:
        """The earliest of the key's times in its streams; a stream that has told nothing of the key (NULL) has
        told nothing up to any time, so every row of the key may still change."""
        return F.least(*(F.coalesce(F.col(c), F.lit(C.NEVER_TOLD)) for c in self.stream_times))

    def may_reach(self, floor: int) -> Column:
        """An interval row that may reach `floor`; every event of a point stream, whose latest one before a cut
        holds at it however long ago it came (`reaching`)."""
        return case_on(C.STREAM, ((i, part.may_reach(floor)) for i, part in enumerate(self.parts) if part.intervals),
                       F.lit(True))

    def reaching(self, events: DataFrame, cut: Column) -> DataFrame:
        """Each stream's events that a key recomputed from `cut` reads. The cut is an instant of the timeline, not
        of every stream: an interval stream's rows reach it as over one stream; of a point stream, the latest
        event at or before the cut holds at the cut (its truth is carried until the stream's next event), so it
        is read as if it came at the cut. No situation anchored after the cut reads its attributes: those start
        at a later event of the stream."""
        return reduce(DataFrame.unionByName, (
            part.reaching(self.rows_of(events, i), cut) if part.intervals else
            _carried_to(self.rows_of(events, i), part, cut, self.keys) for i, part in enumerate(self.parts)))

    def known_by(self, constraint: PairConstraint) -> Column | None:
        """Of a pair across two streams, the key's time in the slower of them (docs/semantics.md §5). Two symbols of
        one stream change only at its instants, so their pairs are decided at or before its time already."""
        left, right = self.stream_of[constraint.left], self.stream_of[constraint.right]
        return None if left == right else F.least(F.col(C.last_time(left)), F.col(C.last_time(right)))

    # ------------------------------------------------------------ the kernel's input

    @property
    def readable_in_place(self) -> bool:
        return False

    @cached_property
    def arrow_input(self) -> ArrowInput | None:
        return None

    def prepare(self, events: DataFrame) -> DataFrame:
        """The timeline: keys, `__t` and the flags words at every instant of any stream, each stream's bits carried
        forward from its own latest instant (none before its first: its symbols do not hold yet)."""
        words = [word for word, _ in self.flag_bits]
        streams = range(self.stream_count)
        instants = reduce(DataFrame.unionByName, (
            part.prepare(self.rows_of(events, i)).select(*self.keys, C.T, *words, F.lit(i).alias(C.STREAM))
            for i, part in enumerate(self.parts)))
        told = instants.groupBy(*self.keys, C.T).agg(
            *(F.max(F.when(F.col(C.STREAM) == i, F.col(w))).alias(_told(i, w)) for i in streams for w in words))
        so_far = Window.partitionBy(*self.keys).orderBy(C.T).rowsBetween(Window.unboundedPreceding,
                                                                         Window.currentRow)

        def carried(stream: int, word: str) -> Column:
            return F.coalesce(F.last(_told(stream, word), ignorenulls=True).over(so_far), F.lit(0).cast("bigint"))

        return told.select(*self.keys, C.T, *(reduce(Column.bitwiseOR, (carried(i, w) for i in streams)).alias(w)
                                              for w in words))

    # ------------------------------------------------------------ aggregates

    @cached_property
    def aggregates(self) -> tuple[Aggregate, ...]:
        """Each stream's own. A situations column holds every symbol's aggregate of one name, each row its own
        symbol's; where symbols of two streams read an attribute of one name, whose types may differ, each
        stream's is named after the stream too (`max_p_speed`, `max_c_speed`)."""
        found = [(label.source, a) for part in self.parts for a in part.aggregates
                 for label in [self.plan.symbol(a.symbol)]]
        shared = {a.column for _, a in found if len({s for s, b in found if b.column == a.column}) > 1}
        return tuple(replace(a, stream=stream) if a.column in shared else a for stream, a in found)

    def attribute_type(self, symbol: str, attr: str) -> str:
        return self.parts[self.stream_of[symbol]].attribute_type(symbol, attr)

    def partials_of(self, symbol: int) -> tuple[Partial, ...]:
        return self.parts[self.stream_of[self.plan.symbols[symbol].name]].partials_of(symbol)

    @property
    def partials_in_kernel(self) -> bool:
        return False

    def with_row_partials(self, situations: DataFrame, events: DataFrame) -> DataFrame:
        for i, part in enumerate(self.parts):
            situations = intervals.with_partials(situations, self.rows_of(events, i), part)
        return situations
