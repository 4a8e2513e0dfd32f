"""`pielake plot --key` names a key as text: each value is read as its key column's type, so that a number is
found as the number it is and text given for a numeric key names no key, as another unknown key does. Without
--key, the key drawn is the one with the most matches, else with the most situations."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from pielake.errors import PielakeError
from pielake.lake.plotted import _check_key_columns, _for_key, busiest_key
from pielake.query.analyzer import load_query

PLAN = load_query("FROM S PARTITION BY car, lane DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s")
KEYLESS = load_query("FROM S DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s")


def test_a_key_given_as_text_is_read_as_its_columns_types(spark: SparkSession) -> None:
    rows = spark.createDataFrame([(7, "a", 1), (300000000000, "a", 2), (7, "b", 3)],
                                 "car BIGINT, lane STRING, ts BIGINT")
    assert [r.ts for r in _for_key(rows, PLAN, ("7", "a")).collect()] == [1]
    assert [r.ts for r in _for_key(rows, PLAN, ("300000000000", "a")).collect()] == [2]
    assert _for_key(rows, PLAN, ("abc", "a")).count() == 0


def test_the_key_drawn_by_default_has_the_most_matches_else_the_most_situations(spark: SparkSession) -> None:
    """Ties go to the first key in key order; a query without keys has one key, which has none of either where
    its tables are empty."""
    situations = spark.createDataFrame([(7, "b", 1), (7, "b", 2), (3, "a", 1), (9, "a", 1), (9, "a", 2)],
                                       "car BIGINT, lane STRING, ts BIGINT")
    matches = spark.createDataFrame([(3, "a", 1)], "car BIGINT, lane STRING, ts BIGINT")
    none = matches.limit(0)
    assert busiest_key(PLAN, matches, situations) == (("3", "a"), "matches")
    assert busiest_key(PLAN, none, situations) == (("7", "b"), "situations")
    assert busiest_key(PLAN, none, none) is None
    assert busiest_key(KEYLESS, none, situations.drop("car", "lane")) == ((), "situations")
    assert busiest_key(KEYLESS, none, none.drop("car", "lane")) is None


def test_a_key_of_another_number_of_values_is_refused_with_the_options_that_name_the_busiest(
        spark: SparkSession) -> None:
    situations = spark.createDataFrame([(7, "b c", 1), (7, "b c", 2)], "car BIGINT, lane STRING, ts BIGINT")
    none = situations.limit(0)
    _check_key_columns(PLAN, ("7", "b c"), none, situations)
    with pytest.raises(PielakeError, match=r"partitioned by car, lane: give one --key per column, in that order: "
                                           r"--key 7 --key 'b c' draws the key with the most situations$"):
        _check_key_columns(PLAN, ("7",), none, situations)
    with pytest.raises(PielakeError, match=r"in that order$"):
        _check_key_columns(PLAN, ("7",), none, none)
    with pytest.raises(PielakeError, match="has no PARTITION BY, so all its events are one key: leave --key out"):
        _check_key_columns(KEYLESS, ("7",), none.drop("car", "lane"), situations.drop("car", "lane"))
