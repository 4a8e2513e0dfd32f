"""A stream typed from its file types a text column as numbers exactly where Spark's cast takes every value: the
test of what a value is written as, which spares most text the cast, takes no value the cast would take, nor one
it would not."""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import SparkSession

from pielake.pipeline.ingest import _PAST_MISSING

TEXTS = ["1", "+1", "-1", " 1 ", "007", "-0", "2147483648", "9223372036854775808", "1.0", "1.", ".5", "1e3", "0x10",
         "\uff11\uff12", "1_000", "1,0", "", "a", "+", "1 2", "\t3\t", "ON", "\uff11.5", "\u0661", "\u00a01", "0x1p3",
         "0xap1", "1d", "1F", "1e", "e5", ".", "-.5e-3", "NaN", "nan", "-NAN", "Infinity", "+infinity", "-inf", "Inf",
         "Infinityx", "OFF", "n/a"]


def test_a_value_is_a_number_exactly_where_spark_casts_it_to_one(spark: SparkSession) -> None:
    values = spark.createDataFrame([(t,) for t in TEXTS], "v string")
    holds = dict(_PAST_MISSING)
    for kind in ("INT", "BIGINT", "DOUBLE"):
        rows = values.select("v", holds[kind](F.col("v")).alias("typed"),
                             F.col("v").try_cast(kind).isNotNull().alias("cast")).collect()
        assert [r.v for r in rows if r.typed != r.cast] == [], kind
        assert sum(r.typed for r in rows) >= 6, kind  # the whole numbers are taken, not only refused
