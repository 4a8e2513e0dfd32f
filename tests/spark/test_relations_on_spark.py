"""Fixed-data regressions: every relation's PiePairs on Spark, and a single key split across time ranges."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pyspark.sql.functions as F
import pytest
from pyspark.sql import SparkSession

from pielake.engine.session import settings_within
from pielake.query.analyzer import load_query
from pielake.semantics.reference import derive_situations, find_matches
from pielake.semantics.relations import RELATIONS
from pielake.spark import columns as C
from pielake.spark import matches
from pielake.spark.patterns import MINTERM_CODE, read_runs
from pielake.streams import StreamSchema
from tests.helpers import drawn
from tests.spark.kernels import AN_EVENT_A_TASK, SHUFFLED, Kernels, reference_rows, spark_rows, stream_of

pytestmark = pytest.mark.heavy(seconds=95)  # about this long in CI: scheduled first

# One key per situation layout; together they hold every relation at least once, open ends and boundaries too.
LAYOUTS = {
    "before": ("XX......", "....XX.."), "meets": ("XX....", "..XX.."), "overlaps": ("XXX...", ".XXX.."),
    "starts": ("XX....", "XXX..."), "during": (".X....", "XXX..."), "finishes": (".XX...", "XXX..."),
    "equals": (".XX..", ".XX.."), "followed-by": ("XX......", "...X.XX."), "first-event": ("X..", "XX."),
    "open-group": ("XXX", ".XX"), "nested": ("XXXXXXXXX.", ".X.XX..X.."), "mixed": ("XX.XXX..XX.X", ".XXX.XXX..XX"),
}
# Each layout also mirrored (a and b swapped), so that every inverse relation occurs as well.
ROWS = [r for key, (a, b) in LAYOUTS.items()
        for r in drawn(key=key, a=a, b=b) + drawn(key=f"mirror-{key}", a=b, b=a)]


def each_relation(spark: SparkSession, layout: str) -> Kernels:
    names = sorted(RELATIONS)
    defines = ", ".join(f"A{i} AS a, B{i} AS b" for i in range(len(names)))
    pattern = " AND ".join(f"A{i} {name} B{i}" for i, name in enumerate(names))
    plan = load_query(f"FROM S PARTITION BY key DEFINE {defines} PATTERN {pattern} WITHIN 1 h")
    return Kernels(spark, plan, ROWS, partitions=3, layout=layout)


@pytest.fixture(scope="module", params=SHUFFLED)
def all_relations(spark: SparkSession, request: pytest.FixtureRequest) -> Kernels:
    """Every relation, over events the kernel shuffles by time range (stitched) and by key (each key whole)."""
    return each_relation(spark, request.param)


@pytest.fixture(scope="module")
def all_relations_at_edges(spark: SparkSession) -> Kernels:
    return each_relation(spark, AN_EVENT_A_TASK)


def assert_pairs_equal_the_reference(kernels: Kernels, relation: str) -> None:
    constraint = next(c for c in kernels.plan.constraints if c.relations == {relation})
    got = sorted((r.key, r.a_ts, r.a_te, r.b_ts, r.b_te, r.decided_at)
                 for r in kernels.pairs(constraint.id).collect())
    plan = load_query(f"FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A {relation} B WITHIN 1 h")
    want = sorted((m.key[0], m.situation("A").ts, m.situation("A").te, m.situation("B").ts, m.situation("B").te,
                   m.detected_at) for m in find_matches(ROWS, plan))
    assert got == want
    assert got, f"the layouts should hold at least one '{relation}' pair"


@pytest.mark.parametrize("relation", sorted(RELATIONS))
def test_pairs_of_each_relation_equal_the_reference(all_relations: Kernels, relation: str) -> None:
    assert_pairs_equal_the_reference(all_relations, relation)


@pytest.mark.parametrize("relation", sorted(RELATIONS))
def test_pairs_of_each_relation_equal_the_reference_with_every_run_at_a_task_edge(
        all_relations_at_edges: Kernels, relation: str) -> None:
    """Both situations of a pair are on its run's row, the ones a run does not hold too (the situation ending at
    its start, or beginning at its end): with an event a task they all come from the neighbouring tasks."""
    assert all_relations_at_edges.read_in_place
    assert_pairs_equal_the_reference(all_relations_at_edges, relation)


@pytest.mark.parametrize("relation", ["during", "followed-by", "after"])
def test_pairs_name_the_relation_that_holds(all_relations: Kernels, relation: str) -> None:
    constraint = next(c for c in all_relations.plan.constraints if c.relations == {relation})
    named = {r.relation for r in all_relations.pairs(constraint.id).select("relation").distinct().collect()}
    assert named == {relation}


def long_single_key_stream() -> list[dict]:
    """One key, 240 events, runs up to 30 events long: with 6 ranges, situations cross the range edges."""
    a = ("X" * 30 + "." * 7 + "X" * 12 + "." * 3) * 5
    b = ("." * 10 + "X" * 25 + "." * 5 + "X" * 2) * 6
    return drawn(key="only", a=a[:240], b=b[:240])


@pytest.mark.parametrize("partitions", [4, 6, 11])
def test_a_single_key_split_across_time_ranges_gives_the_same_situations(spark: SparkSession,
                                                                          partitions: int) -> None:
    rows = long_single_key_stream()
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A overlaps; during; contains B "
                      "WITHIN 1 h RETURN count(A.ts) AS na")
    kernels = Kernels(spark, plan, rows, partitions)
    ranges = kernels.events.repartitionByRange(partitions, "key", "ts").rdd.mapPartitions(
        lambda events: [min((e.ts for e in events), default=None)]).collect()
    edges = [t for t in ranges[1:] if t is not None]
    assert len(edges) >= 3  # at least four time ranges
    got = sorted((r.symbol, r.ts, r.te) for r in kernels.situations.collect())
    assert got == sorted((s.symbol, s.ts, s.te) for s in derive_situations(rows, plan))
    crossing = [s for s in got if any(s[1] < edge < (s[2] or 10**9) for edge in edges)]
    assert crossing, "some situation should cross a range edge, so that stitching is exercised"
    assert spark_rows(kernels.matches(), plan) == reference_rows(find_matches(rows, plan), plan)


@pytest.mark.parametrize(("layout", "in_place"), [("in place", True), ("in place, keys side by side", True),
                                                  ("in place, overlapping", False)])
def test_events_read_in_place_give_the_same_matches_and_overlapping_tasks_are_shuffled(
        spark: SparkSession, layout: str, in_place: bool) -> None:
    """Events read as their tasks hold them are stitched as range partitions are when each task holds a stretch
    of time of its keys (rows in any order), every key's if a task is a range of time, as an events file is;
    tasks whose stretches overlap are detected and shuffled instead."""
    rows = long_single_key_stream() + drawn(key="other", a="XX..XXX..X", b=".XXX..XX..")
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A overlaps; during; contains B "
                      "WITHIN 1 h RETURN count(A.ts) AS na")
    kernels = Kernels(spark, plan, rows, partitions=5, layout=layout)
    assert kernels.read_in_place is in_place
    got = sorted((r.key, r.symbol, r.ts, r.te) for r in kernels.situations.collect())
    assert got == sorted((*s.key, s.symbol, s.ts, s.te) for s in derive_situations(rows, plan))
    assert spark_rows(kernels.matches(), plan) == reference_rows(find_matches(rows, plan), plan)


def test_a_pair_series_keeps_only_the_runs_its_patterns_read(spark: SparkSession) -> None:
    """`meets` is decided on an I run (B alone) right after a Z run (A alone): of its minterm series only such runs
    are emitted, but for the fragments at the range's edges (its first and last run), and the matches stay the
    reference's. The stream has I runs after an O run too, which are left out."""
    rows = long_single_key_stream()
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A meets B WITHIN 1 h")
    kernels = Kernels(spark, plan, rows, partitions=1)
    series = kernels.q.pair_series(plan.constraints[0])
    runs = sorted((r[C.START], r[C.PREV], r[C.VALUE]) for r in kernels.runs.filter(F.col(C.SERIES) == series).collect())
    minterms = [(e["ts"], 2 * e["a"] + e["b"]) for e in rows]
    run_starts = [(t, v, minterms[i - 1][1]) for i, (t, v) in enumerate(minterms) if i and v != minterms[i - 1][1]]
    z, i = MINTERM_CODE["Z"], MINTERM_CODE["I"]
    assert any(v == i and prev != z for _, v, prev in run_starts), "an I run the filter leaves out"
    inside = [(t, prev, v) for t, v, prev in run_starts if runs[0][0] < t < runs[-1][0]]
    assert runs[1:-1] == [run for run in inside if run[1:] == (z, i)]
    assert read_runs(plan.constraints[0]) == {(z, i, None)}
    assert spark_rows(kernels.matches(), plan) == reference_rows(find_matches(rows, plan), plan)


def test_a_constraint_on_two_symbols_already_bound_joins_on_both(spark: SparkSession) -> None:
    """A pattern whose constraints close a cycle: the last join adds no symbol, only a condition."""
    rows = long_single_key_stream()
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b, C AS a "
                      "PATTERN A overlaps B AND C overlaps B AND A equals C WITHIN 1 h")
    want = reference_rows(find_matches(rows, plan), plan)
    assert want and spark_rows(Kernels(spark, plan, rows).matches(), plan) == want


@pytest.mark.parametrize("broadcast_rows", [matches.BROADCAST_PAIR_ROWS, 0])
def test_a_chain_of_joins_gives_the_same_matches_broadcast_or_left_to_spark(
        spark: SparkSession, monkeypatch: pytest.MonkeyPatch, broadcast_rows: int) -> None:
    """Pair tables small enough are broadcast into a chain of joins that never moves the bindings, split into code
    stages of a few joins each; larger ones are joined as Spark plans it. The matches are the reference's either
    way."""
    monkeypatch.setattr(matches, "BROADCAST_PAIR_ROWS", broadcast_rows)
    monkeypatch.setattr(matches, "JOINS_PER_CODE_STAGE", 2)  # a boundary before the second of the chain's 2 joins
    rows = long_single_key_stream()
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b, C AS a, D AS b "
                      "PATTERN A overlaps; during B AND B overlapped-by; contains C AND C overlaps D WITHIN 1 h")
    found = Kernels(spark, plan, rows, partitions=3).matches()
    want = reference_rows(find_matches(rows, plan), plan)
    assert want and spark_rows(found, plan) == want
    optimized = found._jdf.queryExecution().optimizedPlan().toString()
    last_times = 1  # the keys' last times are broadcast either way
    assert optimized.count("strategy=broadcast") == last_times + (len(plan.constraints) - 1 if broadcast_rows else 0)
    assert len(re.findall(r"Repartition \d+, false", optimized)) == (1 if broadcast_rows else 0)  # no shuffle


def test_the_joins_share_one_broadcast_of_the_pairs(spark: SparkSession) -> None:
    """Joined on the constraint a binding joins next, the pair table is broadcast once for the joins that read the
    same columns of it: here the two joins before the last (each on its constraint's right symbol) share one, and
    the last, which has no next constraint to read, has its own (`MATCHES_SETTINGS`)."""
    rows = long_single_key_stream()
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b, C AS a, D AS b, E AS a PATTERN "
                      "A overlaps; during B AND B overlapped-by; contains C AND C overlaps D AND "
                      "D overlapped-by; contains E WITHIN 1 h")
    with settings_within(spark, matches.MATCHES_SETTINGS):
        found = Kernels(spark, plan, rows, partitions=3).matches()
        found.collect()
        final = found._jdf.queryExecution().executedPlan().toString().split("Initial Plan")[0]
    assert spark_rows(found, plan) == reference_rows(find_matches(rows, plan), plan) != []
    assert final.count("ReusedExchange") == 1, final


def test_timestamp_event_times_are_kernel_microseconds_and_come_back_as_timestamps(spark: SparkSession) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    seconds = drawn(key="k", a="XX....XXX.", b=".XXX...XX.")
    rows = [{**r, "ts": start + timedelta(seconds=r["ts"])} for r in seconds]
    stream = StreamSchema("S", ("key",), "ts", "timestamp",
                          (("key", "STRING"), ("ts", "TIMESTAMP"), ("a", "BOOLEAN"), ("b", "BOOLEAN")))
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A overlaps B WITHIN 5 s")
    def utc(value: datetime) -> datetime:  # Spark returns naive datetimes in the session time zone, UTC
        return value.replace(tzinfo=UTC)

    got = sorted((utc(r.a_ts), utc(r.b_ts), utc(r.detected_at), r.status)
                 for r in Kernels(spark, plan, rows, 2, stream).matches().collect())
    at = [start + timedelta(seconds=s) for s in range(10)]
    expected = [(m.situation("A").ts, m.situation("B").ts, m.detected_at, m.status)
                for m in find_matches(seconds, plan)]
    assert got == [(at[a], at[b], at[d], s) for a, b, d, s in expected]
    assert len(got) == 1  # [0,2) overlaps [1,4); [6,9) and [7,9) end together: finished-by


def test_more_predicates_than_one_flags_word_holds_give_the_reference_situations(spark: SparkSession) -> None:
    """64 symbols: the kernel input packs 62 predicates per BIGINT word, so the last two travel in a second."""
    count = 64
    defines = ", ".join(f"S{i} AS v >= {i}" for i in range(count))
    pattern = " AND ".join(f"S{i} overlaps S{i + 1}" for i in range(0, count, 2))
    plan = load_query(f"FROM S PARTITION BY key DEFINE {defines} PATTERN {pattern} WITHIN 1 h")
    ramp = [*range(count + 2), *range(count + 1, -1, -1)]  # every S_i holds once, for a span of its own
    rows = [{"key": "k", "ts": t, "v": v} for t, v in enumerate(ramp)]
    kernels = Kernels(spark, plan, rows, partitions=3)
    got = sorted((r.symbol, r.ts, r.te) for r in kernels.situations.collect())
    expected = sorted((s.symbol, s.ts, s.te) for s in derive_situations(rows, plan))
    assert len(expected) == count
    assert got == expected


@pytest.mark.parametrize("layout", ["shuffled", "in place", AN_EVENT_A_TASK])
def test_return_aggregates_are_sql_s_exactly_however_the_events_fall_into_tasks(spark: SparkSession,
                                                                               layout: str) -> None:
    """A situation whose values are all NULL sums to NULL, as SQL's `sum` (not 0); whole numbers sum exactly, to
    NULL beyond 64 bits (not wrapped around), and values beyond 2^53 keep every digit (not rounded as doubles);
    the least and greatest text and boolean skip NULLs among the values. Whether a situation is summed in one task
    or stitched from one event a task."""
    rows = drawn(a="XX.XXX.XX.", b="..X...X..X")
    xs = [None, None, 5, 2**62, 2**62, 2**62, 7, 2**53 + 1, 2**53 + 3, None]
    ss = [None, None, "q", "p", None, "r", None, None, "s", "t"]
    for row, x, text in zip(rows, xs, ss, strict=True):
        row.update(x=x, s=text, on=None if text is None else text > "q",
                   day=None if text is None else date(2026, 1, ord(text) - ord("o")))
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A meets B WITHIN 1 h "
                      "RETURN sum(A.x) AS sx, min(A.x) AS lo, max(A.x) AS hi, count(A.x) AS n, avg(A.x) AS mean, "
                      "min(A.s) AS ls, max(A.s) AS hs, max(A.on) AS anyon, max(A.day) AS hd")
    stream = stream_of(rows, ("key",), {"day": "DATE"})
    got = spark_rows(Kernels(spark, plan, rows, 3, stream, layout=layout).matches(), plan)
    assert got == reference_rows(find_matches(rows, plan), plan)
    assert [values[0] for *_, values in got] == [None, None, 2**54 + 4]
    assert [values[5:] for *_, values in got] == [(None, None, None, None), ("p", "r", True, date(2026, 1, 3)),
                                                  ("s", "s", True, date(2026, 1, 4))]


@pytest.mark.parametrize(("intervals", "layout"), [(False, "shuffled"), (False, "in place"),
                                                    (False, AN_EVENT_A_TASK), (True, "shuffled")])
def test_a_sum_of_doubles_is_their_exact_sum_rounded_once_however_the_events_fall_into_tasks(
        spark: SparkSession, intervals: bool, layout: str) -> None:
    """Ten times 0.1 added left to right is 0.9999999999999999, and 1e16 + 1 + 1 - 1e16 is 0.0; their exact sums,
    rounded once, are 1.0 and 2.0 (docs/semantics.md §2), whichever task adds which event (an interval stream's
    rows are summed by Spark, shuffled by key), and so are their averages 0.1 and 0.5. A DECIMAL attribute sums
    as the doubles it is computed with."""
    readings = [0.1] * 10 + [None, 7.5] + [1e16, 1.0, None, 1.0, -1e16] + [None]
    rows = drawn(a="X" * 10 + ".." + "X" * 5 + ".", b="." * 10 + "XX" + "." * 5 + "X")
    for row, x in zip(rows, readings, strict=True):
        row.update(x=x, d=None if x is None or abs(x) > 1 else Decimal(str(x)))
        if intervals:
            row["until"] = row["ts"] + 1
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A meets B WITHIN 1 h "
                      "RETURN sum(A.x) AS sx, avg(A.x) AS mean, sum(A.d) AS sd")
    types = {"d": "DECIMAL(10,2)", "until": "BIGINT"}
    stream = stream_of(rows, ("key",), types)
    if intervals:
        stream = dataclasses.replace(stream, end_column="until")
    got = spark_rows(Kernels(spark, plan, rows, 3, stream, layout=layout).matches(), plan)
    expected = find_matches(rows, plan, end_column="until" if intervals else None)
    assert got == reference_rows(expected, plan)
    assert [values for *_, values in got] == [(1.0, 0.1, 1.0), (2.0, 0.5, 2.0)]


def test_an_average_of_whole_numbers_is_their_exact_sum_as_a_double_over_the_count(spark: SparkSession) -> None:
    """2^53 + 3 over 3 is 3002399751580331.67, and the double nearest it 3002399751580331.5; but the average is the
    exact sum as a double (2^53 + 4) over the count, 3002399751580332.0 (docs/semantics.md §2), as for doubles."""
    rows = drawn(a="XXX.", b="...X")
    for row, x in zip(rows, [2**53 + 1, 1, 1, 0], strict=True):
        row["x"] = x
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A meets B WITHIN 1 h "
                      "RETURN avg(A.x) AS mean, sum(A.x) AS total")
    got = spark_rows(Kernels(spark, plan, rows, 2).matches(), plan)
    assert got == reference_rows(find_matches(rows, plan), plan)
    assert [values for *_, values in got] == [(3002399751580332.0, 2**53 + 3)]


def test_return_arithmetic_over_an_int_attribute_is_64_bit(spark: SparkSession) -> None:
    """`max(A.i) + max(A.i)` of an INT attribute near 2^31 is their sum, as the reference computes it (not NULL, as
    32-bit arithmetic past its width gives); an aggregate alone keeps the attribute's type."""
    rows = drawn(a="XX..", b=".XX.")
    for row, i in zip(rows, [2**31 - 1, -2**31, 7, 7], strict=True):
        row["i"] = i
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A overlaps B WITHIN 1 h "
                      "RETURN max(A.i) + max(A.i) AS twice, min(A.i) * 3 - max(B.i) AS mixed, "
                      "least(min(A.i), min(B.i)) - greatest(max(A.i), max(B.i)) AS spread, max(A.i) AS hi, "
                      "sqrt(max(A.i) + 1) AS root")
    matches = Kernels(spark, plan, rows, 2, stream_of(rows, ("key",), {"i": "INT"})).matches()
    got = spark_rows(matches, plan)
    assert got == reference_rows(find_matches(rows, plan), plan)
    assert [values for *_, values in got] == [(2**32 - 2, -3 * 2**31 - 7, -2**32 + 1, 2**31 - 1, 2.0**15.5)]
    assert {f.name: f.dataType.simpleString() for f in matches.schema.fields if f.name in ("twice", "hi")} == \
        {"twice": "bigint", "hi": "int"}
