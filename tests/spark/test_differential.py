"""The Spark kernels equal the brute-force reference on random streams and random patterns (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pielake.query.analyzer import load_query
from pielake.semantics.reference import find_matches
from tests.spark.kernels import LAYOUTS, Kernels, reference_rows, spark_rows
from tests.strategies import scenario

pytestmark = pytest.mark.heavy(seconds=130)  # about this long in CI: scheduled first


@settings(max_examples=int(__import__("os").environ.get("PIELAKE_DIFF_EXAMPLES", "14")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=scenario(), partitions=st.integers(1, 6), layout=st.sampled_from(LAYOUTS))
def test_spark_matches_equal_the_reference(spark: SparkSession, case: tuple[str, list[dict]], partitions: int,
                                           layout: str) -> None:
    query, rows = case
    plan = load_query(query)
    kernels = Kernels(spark, plan, rows, partitions, layout=layout)
    assert spark_rows(kernels.matches(), plan) == reference_rows(find_matches(rows, plan), plan), query
