"""PiePair detection on Spark, over the constraints' minterm runs: any number of constraints in one plan.

Every constraint's run patterns (`pielake.spark.patterns`: the (previous, current, next) minterm values its
automata read) are one small table joined to the runs on those values; the runs kernel hands every run the values
of the runs before and after it (`pielake.spark.runs`: found inside its time range, or across an edge when
stitching). Both situations of every candidate are on the run's row too: the kernel names, for each predicate,
the situation holding in the run, or the one ending at its start or beginning at its end where the predicate does
not hold (`pielake.spark.runs.Side`). `before`/`after` have no automaton: they are a range join of the two
situation tables, bucketed by the window (a pair further apart than the window can never be in a reported match).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import reduce
from types import SimpleNamespace

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake import vocabulary as V
from pielake.engine.local_rows import local_rows
from pielake.query.analyzer import PairConstraint
from pielake.semantics.relations import RELATIONS
from pielake.spark import columns as C
from pielake.spark.patterns import CUR_START, PREFIX_GROUPS, TRIG, Locator, RunPattern, patterns_for, run_values
from pielake.spark.query import SparkQuery, case_on
from pielake.spark.runs import NO_RUN, SIDES, Side


def _source(name: str, pattern: RunPattern) -> str:
    """The run column a locator reads: the trigger run's start, the current run's start, or a since column."""
    if name == TRIG:
        return C.START if pattern.following is None else C.END
    return C.START if name == CUR_START else name


HOLDING, BEFORE, AFTER = "holding", "before", "after"  # a side's situations on a run's row (`Side`)


def _slot(locator: Locator, pattern: RunPattern) -> str:
    """Which of its side's situations on the run's row a locator names: the one ending at the run's start, the
    one beginning at its end, or the one holding in the run (any other start or end the locator reads is inside
    it: the run's start, its end where the situation ends with it, or its `since`)."""
    column = _source(locator.source, pattern)
    if locator.kind == "te" and column == C.START:
        return BEFORE
    if locator.kind == "ts" and column == C.END:
        return AFTER
    return HOLDING


GROUPS = tuple(PREFIX_GROUPS)  # a prefix-group pattern names its group by index in the candidates
PATTERN = "__pat_"  # the pattern table's columns, clear of the keys and the run columns they are joined to
PATTERN_ROWS = ", ".join(f"{PATTERN}{name} {kind}" for name, kind in (
    ("series", "INT"), ("value", "INT"), ("prev", "INT"), ("next", "INT"), ("constraint_id", "STRING"),
    ("a_slot", "STRING"), ("b_slot", "STRING"), ("trigger", "STRING"), ("relation", "STRING"), ("grp", "INT")))


def _pattern_rows(series: int, constraint: PairConstraint, pattern: RunPattern) -> list[tuple[object, ...]]:
    """One row per (previous, current, next) value a pattern accepts, with what its candidate says."""
    group = GROUPS.index(pattern.relations) if pattern.relation is None else None
    said = (constraint.id, _slot(pattern.a, pattern), _slot(pattern.b, pattern), _source(TRIG, pattern),
            pattern.relation, group)
    return [(series, value, prev, nxt, *said) for prev, value, nxt in run_values(pattern)]


def _read(source: Column) -> Column:
    """The run column a pattern row names (`_source`), read per row."""
    return F.when(source == C.START, F.col(C.START)).otherwise(F.col(C.END))


def _situation(side: Side, slot: Column, name: str) -> list[Column]:
    """`name`_ts and `name`_te of the situation of `side` that a pattern row's `slot` names on the run's row."""
    return [F.when(slot == AFTER, F.col(C.END)).otherwise(F.col(side.since)).alias(f"{name}_ts"),
            F.when(slot == BEFORE, F.col(C.START)).otherwise(F.col(side.until)).alias(f"{name}_te")]


def _candidates(runs: DataFrame, found_by: dict[int, tuple[PairConstraint, list[RunPattern]]],
                q: SparkQuery) -> DataFrame:
    """Every pattern occurrence of every constraint, in one pass over the runs of their minterm series:
    (keys, constraint_id, a_ts, a_te, b_ts, b_te, decided_at, relation, _group).

    The patterns are data: a small broadcast table of the (previous, current, next) values each accepts, joined
    on them. The expression per run stays the same size however many constraints a query has, where one CASE over
    every pattern would grow with them."""
    rows = [row for number, (constraint, patterns) in found_by.items() for p in patterns
            for row in _pattern_rows(number, constraint, p)]
    table = F.broadcast(local_rows(runs.sparkSession, rows, PATTERN_ROWS))
    series = runs.filter(F.col(C.SERIES).isin(*found_by))

    def pat(name: str) -> Column:
        return F.col(PATTERN + name)

    def neighbour(column: str) -> Column:
        return F.coalesce(F.col(column), F.lit(NO_RUN))

    on = [F.col(C.SERIES) == pat("series"), F.col(C.VALUE) == pat("value"), neighbour(C.PREV) == pat("prev"),
          pat("next").isNull() | (neighbour(C.NEXT) == pat("next"))]
    left, right = SIDES
    return series.join(table, on).select(
        *q.keys, pat("constraint_id").alias(V.CONSTRAINT_ID),
        *_situation(left, pat("a_slot"), "a"), *_situation(right, pat("b_slot"), "b"),
        _read(pat("trigger")).alias(V.DECIDED_AT), pat("relation").alias(V.RELATION), pat("grp").alias("_group"))


def _taking_part(constraints: Sequence[PairConstraint], q: SparkQuery) -> Column | None:
    """Whether both situations of a candidate take part in matches (`SparkQuery.takes_part`), or None where
    every one does (no symbol of the constraints has a duration constraint)."""
    if not any(q.plan.symbol(s).has_duration for c in constraints for s in (c.left, c.right)):
        return None
    return by_constraint(constraints, lambda c: q.takes_part(c.left, ts=F.col("a_ts"), te=F.col("a_te"))
                         & q.takes_part(c.right, ts=F.col("b_ts"), te=F.col("b_te")), F.lit(False))


def by_constraint(constraints: Iterable[PairConstraint], value: Callable[[PairConstraint], Column],
                  otherwise: Column) -> Column:
    """A column whose value depends on the row's constraint (`constraint_id`): `value(c)` for each of
    `constraints`, `otherwise` for a row of any other."""
    return case_on(V.CONSTRAINT_ID, ((c.id, value(c)) for c in constraints), otherwise)


def _range_join(a: DataFrame, b: DataFrame, q: SparkQuery, relation: str) -> DataFrame:
    """`before`/`after` pairs no further apart than the window, by an equi-join on window-sized time buckets."""
    size = max(1, q.window_ceiling)
    first, second = (a, b) if relation == "before" else (b, a)
    first = first.withColumn("_bucket", F.explode(F.array(F.floor(F.col("ts") / size),
                                                           F.floor(F.col("ts") / size) + 1)))
    second = second.withColumn("_bucket", F.floor(F.col("ts") / size))
    f, s = first.alias("f"), second.alias("s")
    joined = f.join(s, [F.col(f"f.{k}") == F.col(f"s.{k}") for k in [*q.keys, "_bucket"]]
                    + [F.col("f.te") < F.col("s.ts"), q.within_window(F.col("s.ts"), F.col("f.ts"))], "inner")
    named = {"before": ("f", "s"), "after": ("s", "f")}[relation]
    return joined.select(*(F.col(f"f.{k}").alias(k) for k in q.keys),
                         F.col(f"{named[0]}.ts").alias("a_ts"), F.col(f"{named[0]}.te").alias("a_te"),
                         F.col(f"{named[1]}.ts").alias("b_ts"), F.col(f"{named[1]}.te").alias("b_te"),
                         F.col("s.ts").alias(V.DECIDED_AT), F.lit(relation).alias(V.RELATION))


def _group_relation() -> Column:
    """For a prefix-group pair, the member relation that holds once both ends are known (NULL while one is
    open, or for a pair that is not a group's)."""
    a = SimpleNamespace(ts=F.col("a_ts"), te=F.col("a_te"))
    b = SimpleNamespace(ts=F.col("b_ts"), te=F.col("b_te"))
    known = F.col("a_te").isNotNull() & F.col("b_te").isNotNull()
    result = F.lit(None).cast("string")
    for index, group in enumerate(GROUPS):
        for name in sorted(group):
            result = F.when((F.col("_group") == index) & known & RELATIONS[name].holds(a, b),
                            F.lit(name)).otherwise(result)
    return result


def _automaton_pairs(runs: DataFrame, constraints: Sequence[PairConstraint], q: SparkQuery) -> DataFrame | None:
    """The pairs the PiePair automata decide, for every constraint at once (None if none has an automaton)."""
    found_by = {q.pair_series(c): (c, patterns) for c in constraints if (patterns := patterns_for(c))}
    if not found_by:
        return None
    candidates = _candidates(runs, found_by, q)
    taking = _taking_part([c for c, _ in found_by.values()], q)
    if taking is not None:
        candidates = candidates.filter(taking)
    return candidates.select(*q.keys, V.CONSTRAINT_ID, "a_ts", "a_te", "b_ts", "b_te", V.DECIDED_AT,
                             F.coalesce(F.col(V.RELATION), _group_relation()).alias(V.RELATION))


def _windowed_pairs(situations: DataFrame, constraint: PairConstraint, q: SparkQuery) -> list[DataFrame]:
    """The constraint's `before`/`after` pairs (no automaton: a range join of its two situation tables)."""
    a_sits = situations.filter(F.col(V.SYMBOL) == constraint.left).select(*q.keys, V.TS, V.TE)
    b_sits = situations.filter(F.col(V.SYMBOL) == constraint.right).select(*q.keys, V.TS, V.TE)
    return [_range_join(a_sits, b_sits, q, r).withColumn(V.CONSTRAINT_ID, F.lit(constraint.id))
            for r in ("before", "after") if r in constraint.relations]


def detect_pairs(runs: DataFrame, situations: DataFrame, constraints: Sequence[PairConstraint],
                 q: SparkQuery, last_times: DataFrame | None = None) -> DataFrame:
    """Every pair of situations satisfying each of `constraints`, decided, within the window (kernel time).

    One plan for any number of constraints: a run of PiePair jobs costs one pass, not one per constraint.
    `situations` are read only by `before`/`after`; an automaton's pair is read off the runs, so where a caller
    owns fewer situations than the runs show (a micro-batch), it filters the pairs by the same rule.
    Columns: keys, constraint_id, a_ts, a_te, b_ts, b_te, relation (NULL while a prefix group is undecided
    among its members), decided_at.

    Over several streams, a pair across two is kept only if decided by the key's time in the slower of them
    (`SparkQuery.known_by`, from `last_times`): a decision at t reads nothing after t, so these are exactly the
    pairs a run that has each stream's events up to its time decides (docs/semantics.md §5).
    """
    takes_part = situations.filter(F.col(V.TAKES_PART))
    automaton = _automaton_pairs(runs, constraints, q)
    found = [automaton] if automaton is not None else []
    found += [pairs for c in constraints for pairs in _windowed_pairs(takes_part, c, q)]
    pairs = reduce(DataFrame.unionByName, found)
    pairs = _known_in_time(pairs.filter(q.within_window(F.col(V.DECIDED_AT), F.least("a_ts", "b_ts"))),
                           constraints, q, last_times)
    columns = (*q.keys, V.CONSTRAINT_ID, "a_ts", "a_te", "b_ts", "b_te", V.RELATION, V.DECIDED_AT)
    if not any(found_twice(c) for c in constraints):
        return pairs.select(*columns)
    # A followed-by pair is also before: keep one row, naming the more specific relation.
    specific = F.when(F.col(V.RELATION).isin("followed-by", "follows"), 0).otherwise(1)
    return (pairs.groupBy(*q.keys, V.CONSTRAINT_ID, "a_ts", "b_ts")
            .agg(F.first("a_te").alias("a_te"), F.first("b_te").alias("b_te"),
                 F.min(V.DECIDED_AT).alias(V.DECIDED_AT),
                 F.min_by(V.RELATION, specific).alias(V.RELATION))
            .select(*columns))


def _known_in_time(pairs: DataFrame, constraints: Sequence[PairConstraint], q: SparkQuery,
                   last_times: DataFrame | None) -> DataFrame:
    """`pairs` without those decided after what the run knows of their streams (`SparkQuery.known_by`)."""
    bounds = {c.id: known for c in constraints if (known := q.known_by(c)) is not None}
    if not bounds:
        return pairs
    if last_times is None:
        raise ValueError("pairs across streams need each key's time in every stream (last_times)")
    in_time = case_on(V.CONSTRAINT_ID, ((cid, F.col(V.DECIDED_AT) <= known) for cid, known in bounds.items()),
                      F.lit(True))
    return pairs.join(F.broadcast(last_times), list(q.keys)).filter(in_time).select(*pairs.columns)


SPECIALISED = (frozenset({"followed-by", "before"}), frozenset({"follows", "after"}))  # the first implies the second


def found_twice(constraint: PairConstraint) -> bool:
    """Whether detection can find a pair of the constraint twice: only a relation and its specialisation, which
    two different detectors find (a followed-by pair is also before). Every other pair satisfies exactly one
    relation (Allen's are exclusive), and one pattern finds it once (its runs occur once, and carry its two
    situations). Without such a pair of relations no constraint needs the grouping that removes repeats, a
    shuffle of every pair."""
    return any(both <= constraint.relations for both in SPECIALISED)
