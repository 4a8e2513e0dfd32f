"""The results table's layout (`pielake.lake.results`): each kind packed into its own struct and read back as it
was written, names of one kind free to repeat another's with another type, and a kind's name never a folder."""

from __future__ import annotations

from pathlib import Path

import pyspark.sql.functions as F
import pytest
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake, LakeError
from pielake.lake.results import combine, pack, results_table


def test_kinds_packed_together_read_back_as_written(spark: SparkSession, tmp_path: Path) -> None:
    situations = spark.createDataFrame([("u1", "Hot", 1, 5), ("u2", "Open", 3, None)],
                                       "unit STRING, symbol STRING, ts BIGINT, te BIGINT")
    matches = spark.createDataFrame([("u1", 1, 5, 61.5, "r7")], "unit STRING, hot_ts BIGINT, hot_te BIGINT, ts DOUBLE, "
                                    "run_id STRING")  # a RETURN column named `ts`, a DOUBLE
    lake = Lake(spark, tmp_path / "lake")
    packed = combine([pack(situations, "situations", keys=("unit",), anchor=F.col("ts"), run_id="r8"),
                      pack(matches, "matches", keys=("unit",), anchor=F.col("hot_ts"), run_id="r8")], ("unit",))
    lake.overwrite(packed, results_table("q"), partition_by=("kind",))

    assert lake.read("situations_q").schema == situations.schema
    assert sorted(lake.read("situations_q").collect()) == sorted(situations.collect())
    assert lake.read("matches_q").schema == matches.schema  # the run id a row carries is kept
    assert lake.read("matches_q").collect() == matches.collect()
    assert sorted(r.anchor for r in lake.read(results_table("q")).collect()) == [1, 1, 3]
    assert lake.tables() == ["results_q"]
    assert {"situations_q", "pairs_q", "matches_q", "progress_q"} < set(lake.readable())


def test_a_folder_under_a_kinds_name_is_no_table_and_no_write_makes_one(spark: SparkSession,
                                                                         tmp_path: Path) -> None:
    Lake(spark, tmp_path, results=False).overwrite(spark.range(2), "matches_q")  # as a lake of three tables had it
    lake = Lake(spark, tmp_path)
    assert lake.tables() == [] and lake.readable() == [] and not lake.exists("matches_q")
    with pytest.raises(LakeError, match="'matches_q' is the matches of table 'results_q': write or maintain"):
        lake.overwrite(spark.range(2), "matches_q")
