"""Small tables the driver builds (a query's PiePair patterns, a run's report row), held in the plan itself.

PySpark turns a Python list given to `createDataFrame` into a Python RDD: every read of it runs a Spark job whose
tasks need Python workers (forked, importing), a second or so for a table of a few rows. Handed over as Arrow, the
same rows become a local relation inside the query plan, which Spark reads without a job.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType


def local_rows(spark: SparkSession, rows: Sequence[Sequence[object]], ddl: str) -> DataFrame:
    """`rows` (tuples in the order of `ddl`'s columns) as a DataFrame of schema `ddl`, without a Python RDD."""
    schema = StructType.fromDDL(ddl)
    table = pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in rows],
                                 schema=to_arrow_schema(schema))
    return spark.createDataFrame(table, schema)
