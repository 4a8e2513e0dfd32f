"""The benchmark's write floor writes every row of the run's results table again, and keeps none of them held."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pielake.bench.shapes import write_seconds
from pielake.lake.delta import Lake
from tests.helpers import held_rdds


def test_the_write_floor_writes_the_table_whole_in_a_lake_of_its_own(spark: SparkSession, tmp_path: Path) -> None:
    # arrange: a small results table in the run's lake
    lake = Lake(spark, tmp_path / "lake")
    rows = spark.createDataFrame([("k1", "a", 1, 5), ("k2", "b", 3, None)],
                                 "id STRING, symbol STRING, ts BIGINT, te BIGINT")
    lake.overwrite(rows, "results_q")
    held_before = held_rdds(spark)

    # act
    seconds = write_seconds(lake, "results_q", tmp_path / "floor")
    held_after = held_rdds(spark)  # at once: left unreferenced, the JVM's context cleaner frees them at a later GC

    # assert: the held copy freed, the same rows in a new table, the run's own untouched
    assert held_after == held_before
    floor = Lake(spark, tmp_path / "floor")
    assert seconds > 0
    assert floor.tables() == ["results_q"]
    written = floor.read("results_q")
    assert written.schema == rows.schema and sorted(written.collect()) == sorted(rows.collect())
    assert lake.version("results_q") == 0
