"""A query over several streams on the Spark kernels (`pielake.spark.timeline`) equals the brute-force reference
(docs/semantics.md §1, §2, §5): random queries over two streams of point events or interval rows, streams and keys
that end at times of their own, and the cases each rule of the timeline exists for."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pielake.query.analyzer import load_query
from pielake.semantics.reference import StreamEvents, derive_situations_of, find_matches_of
from pielake.streams import StreamSchema
from pielake.vocabulary import PROVISIONAL
from tests.spark.kernels import SHUFFLED, Kernels, reference_rows, spark_rows
from tests.strategies import Case, kernel_time, two_streams

pytestmark = pytest.mark.heavy(seconds=115)  # about this long in CI: scheduled first

QUERY = "FROM S, R PARTITION BY key DEFINE A AS S.a, B AS R.b PATTERN A {relation} B WITHIN 10 s RETURN max(B.x) AS mb"


def point(t: int, *, key: str | None = "k", a: bool = False, b: bool = False, x: float = 0.0) -> dict:
    """An event of the test streams' columns (`tests.strategies.ATTRIBUTES`); without a key, of one global key."""
    return {**({} if key is None else {"key": key}), "ts": t, "a": a, "b": b, "c": False, "x": x}


def compared(spark: SparkSession, query: str, s: Case, r: Case, *, partitions: int = 3,
             layout: str = "shuffled") -> tuple[list, list, list, list]:
    """(Spark's matches, the reference's, Spark's situations, the reference's), each in one sortable form."""
    plan = load_query(query, "q", [s.stream, r.stream])
    kernels = Kernels.over_streams(spark, plan, [(s.stream, s.stored_rows()), (r.stream, r.stored_rows())],
                                   partitions, layout=layout)
    given_events = {c.name: StreamEvents(c.kernel_rows(), "ts", c.end_column) for c in (s, r)}
    expected = find_matches_of(given_events, plan, s.unit)
    situations = sorted((tuple(kernel_time(row[k]) for k in kernels.q.keys if k in plan.keys), row["symbol"],
                         kernel_time(row["ts"]), kernel_time(row["te"])) for row in kernels.situations.collect())
    derived = sorted((sit.key, sit.symbol, sit.ts, sit.te) for sit in derive_situations_of(given_events, plan))
    return spark_rows(kernels.matches(), plan), reference_rows(expected, plan), situations, derived


def keyed(query: str, s: list[dict], r: list[dict]) -> tuple[str, Case, Case]:
    return query, Case(query, s, ("key",), False), Case(query, r, ("key",), False, name="R")


# R has told only up to 1: the `during` below is not decided yet, though S's events go on.
WAITING = keyed(QUERY.format(relation="during"), [point(1), point(2, a=True), point(3), point(4)],
                [point(1, b=True)])
# B is open in R, whose time (2) is within the window of A's start; S's time (50) is not.
OPEN_IN_THE_SLOWER = keyed(QUERY.format(relation="meets"), [point(0, a=True), point(1), point(50)],
                           [point(1, b=True), point(2, b=True)])
GLOBAL = (QUERY.format(relation="overlaps").replace("PARTITION BY key ", ""),
          Case("", [point(1, key=None, a=True), point(3, key=None), point(9, key=None)], (), False),
          Case("", [point(2, key=None, b=True), point(4, key=None, b=True, x=2.0), point(6, key=None)], (), False,
               name="R"))


@settings(max_examples=int(os.environ.get("PIELAKE_DIFF_EXAMPLES", "14")) * 2, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=two_streams(), partitions=st.integers(1, 5), layout=st.sampled_from(SHUFFLED))
@example(drawn=WAITING, partitions=2, layout="shuffled").via("a pair across streams waits for the slower stream")
@example(drawn=OPEN_IN_THE_SLOWER, partitions=2, layout="by key").via("an open situation's status, its stream's")
@example(drawn=GLOBAL, partitions=1, layout="shuffled").via("no PARTITION BY: every stream is one global key")
def test_a_query_over_two_streams_equals_the_reference(spark: SparkSession, drawn: tuple[str, Case, Case],
                                                       partitions: int, layout: str) -> None:
    query, s, r = drawn
    found, expected, situations, derived = compared(spark, query, s, r, partitions=partitions, layout=layout)
    assert situations == derived, query
    assert found == expected, query


def test_the_examples_show_the_rules_they_are_named_for(spark: SparkSession) -> None:
    """Each explicit example above tests one rule of the timeline: here, that the rule shows in what it finds."""
    found, expected, _, _ = compared(spark, *WAITING)
    assert found == expected == []
    found, expected, _, _ = compared(spark, *OPEN_IN_THE_SLOWER)
    assert [m[4] for m in found] == [m[4] for m in expected] == [PROVISIONAL]


def test_aggregates_of_one_name_over_two_streams_are_named_apart(spark: SparkSession) -> None:
    """`max(A.x)` and `max(B.x)` over streams whose `x` differ in type: each stream's situations column is named
    after its stream, and RETURN reads each from its own."""
    s, r = (StreamSchema(name, ("key",), "ts", "s", (("key", "STRING"), ("ts", "BIGINT"), (flag, "BOOLEAN"),
                                                     ("x", kind))) for name, flag, kind in (("S", "a", "DOUBLE"),
                                                                                            ("R", "b", "STRING")))
    plan = load_query("FROM S, R PARTITION BY key DEFINE A AS S.a, B AS R.b PATTERN A during B WITHIN 100 s "
                      "RETURN max(A.x) AS ma, max(B.x) AS mb", "q", [s, r])
    s_rows = [{"key": "k", "ts": t, "a": 2 <= t < 4, "x": float(t)} for t in range(8)]
    r_rows = [{"key": "k", "ts": t, "b": 1 <= t < 6, "x": f"v{t}"} for t in range(8)]
    kernels = Kernels.over_streams(spark, plan, [(s, s_rows), (r, r_rows)], 2)
    assert {"max_s_x", "max_r_x"} <= set(kernels.situations.columns)
    expected = find_matches_of({"S": StreamEvents(s_rows), "R": StreamEvents(r_rows)}, plan)
    assert spark_rows(kernels.matches(), plan) == reference_rows(expected, plan) != []
