"""The benchmark's write floor writes every row of the run's tables again, and keeps none of them held."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pielake.bench.shapes import write_seconds
from pielake.lake.delta import Lake
from tests.helpers import held_rdds


def test_the_write_floor_writes_each_table_whole_in_a_lake_of_its_own(spark: SparkSession, tmp_path: Path) -> None:
    # arrange: two small tables in the run's lake
    lake = Lake(spark, tmp_path / "lake")
    tables = {"results_q": spark.createDataFrame([("k1", "a", 1, 5), ("k2", "b", 3, None)],
                                                    "id STRING, symbol STRING, ts BIGINT, te BIGINT"),
              "events_s": spark.createDataFrame([("k1", 1, 5, 9)], "id STRING, a_ts BIGINT, a_te BIGINT, c BIGINT")}
    for name, rows in tables.items():
        lake.overwrite(rows, name)
    held_before = held_rdds(spark)

    # act
    seconds = write_seconds(lake, list(tables), tmp_path / "floor")
    held_after = held_rdds(spark)  # at once: left unreferenced, the JVM's context cleaner frees them at a later GC

    # assert: the held copies freed, the same rows in new tables, the run's own untouched
    assert held_after == held_before
    floor = Lake(spark, tmp_path / "floor")
    assert seconds > 0
    assert floor.tables() == sorted(tables)
    for name, rows in tables.items():
        written = floor.read(name)
        assert written.schema == rows.schema and sorted(written.collect()) == sorted(rows.collect())
        assert lake.version(name) == 0
