"""The Spark kernels equal the brute-force reference on random streams and random patterns (hypothesis): every
key shape (none, one key column, two), both kinds of event time (numbers, TIMESTAMPs), and patterns of two to five
symbols."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pielake.query.analyzer import load_query
from pielake.semantics.reference import find_matches
from tests.spark.kernels import LAYOUTS, SHUFFLED, Kernels, reference_rows, spark_rows
from tests.strategies import Case, scenario, wide_scenario

pytestmark = pytest.mark.heavy(seconds=110)  # about this long in CI: scheduled first


def drawn(examples: int) -> settings:
    """`examples` drawn cases (or `PIELAKE_DIFF_EXAMPLES`), each a whole Spark run, so no deadline."""
    return settings(max_examples=int(os.environ.get("PIELAKE_DIFF_EXAMPLES", str(examples))), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


def assert_spark_equals_the_reference(spark: SparkSession, case: Case, partitions: int, layout: str) -> None:
    """The kernels' matches of `case`, its events in `partitions` tasks laid out as `layout`, are the reference's."""
    plan = load_query(case.query)
    kernels = Kernels(spark, plan, case.stored_rows(), partitions, case.stream, layout=layout)
    expected = find_matches(case.kernel_rows(), plan, time_unit_seconds=case.unit, end_column=case.end_column)
    assert spark_rows(kernels.matches(), plan) == reference_rows(expected, plan), (case.query, case.keys, case.timed)


@drawn(14)
@given(case=scenario(), partitions=st.integers(1, 6), layout=st.sampled_from(LAYOUTS))
def test_spark_matches_equal_the_reference(spark: SparkSession, case: Case, partitions: int, layout: str) -> None:
    event(f"keys: {len(case.keys)}, {'TIMESTAMP' if case.timed else 'numeric'} time")
    assert_spark_equals_the_reference(spark, case, partitions, layout)


@drawn(14)
@given(case=scenario(intervals=True), partitions=st.integers(1, 6), layout=st.sampled_from(SHUFFLED))
def test_spark_matches_over_interval_rows_equal_the_reference(spark: SparkSession, case: Case, partitions: int,
                                                             layout: str) -> None:
    event(f"keys: {len(case.keys)}, {'TIMESTAMP' if case.timed else 'numeric'} time")
    assert_spark_equals_the_reference(spark, case, partitions, layout)


@drawn(8)
@given(case=st.booleans().flatmap(wide_scenario), partitions=st.integers(1, 6), layout=st.sampled_from(SHUFFLED))
def test_spark_matches_of_four_or_five_symbols_equal_the_reference(spark: SparkSession, case: Case, partitions: int,
                                                                  layout: str) -> None:
    """Many symbols: trees of constraints and cycles in them, over point events or interval rows."""
    event(f"{'interval rows' if case.intervals else 'point events'}")
    assert_spark_equals_the_reference(spark, case, partitions, layout)
