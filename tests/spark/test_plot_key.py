"""`pielake plot --key` names a key as text: each value is read as its key column's type, so that a number is
found as the number it is and text given for a numeric key names no key, as another unknown key does."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pielake.plot import _for_key
from pielake.query.analyzer import load_query

PLAN = load_query("FROM S PARTITION BY car, lane DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s")


def test_a_key_given_as_text_is_read_as_its_columns_types(spark: SparkSession) -> None:
    rows = spark.createDataFrame([(7, "a", 1), (300000000000, "a", 2), (7, "b", 3)],
                                 "car BIGINT, lane STRING, ts BIGINT")
    assert [r.ts for r in _for_key(rows, PLAN, ("7", "a")).collect()] == [1]
    assert [r.ts for r in _for_key(rows, PLAN, ("300000000000", "a")).collect()] == [2]
    assert _for_key(rows, PLAN, ("abc", "a")).count() == 0
