"""Published tables are laid out by time, so a micro-batch's MERGE reads only the files of recent time.

A batch run writes each partition of a derived table in anchor order, in files of a bounded number of rows, so
every file covers a stretch of time of its own partition; a MERGE that names a lower bound on the anchor
(`Lake.replace_rows(target_only=...)`) then never opens a file entirely before it (the test moves those files
away while it runs), and changes exactly the rows a MERGE without the bound changes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyspark.sql.functions as F
from pyspark.sql import Row, SparkSession

from pielake.lake.delta import Lake
from pielake.pipeline.stages import in_time_order

BOUND = 350


def laid_out(spark: SparkSession, root: Path) -> tuple[Lake, list[Row]]:
    """Table `t` of 400 rows in three partitions written in time order, 50 rows a file; its files' time ranges."""
    lake = Lake(spark, root)
    rows = spark.createDataFrame([("k", t, t % 7) for t in range(400)], "key STRING, ts BIGINT, v BIGINT")
    lake.overwrite(in_time_order(rows.repartition(3), F.col("ts")), "t", rows_per_file=50)
    files = (lake.read("t").groupBy(F.input_file_name().alias("file"))
             .agg(F.min("ts").alias("lo"), F.max("ts").alias("hi")).orderBy("lo").collect())
    return lake, files


def merge(spark: SparkSession, lake: Lake, bounded: bool) -> dict[str, int]:
    changed = spark.createDataFrame([("k", 390, 100), ("k", 450, 1)], "key STRING, ts BIGINT, v BIGINT")
    stale = spark.createDataFrame([("k", 395)], "key STRING, ts BIGINT")
    return lake.replace_rows(changed, "t", natural_key=("key", "ts"), stale=stale,
                             target_only=F.col("t.ts") > BOUND if bounded else None)


def test_a_merge_bounded_in_time_skips_older_files_and_changes_the_same_rows(spark: SparkSession,
                                                                            tmp_path: Path) -> None:
    plain, files = laid_out(spark, tmp_path / "plain")
    assert len(files) >= 8 and all(f.hi - f.lo < 200 for f in files), files  # each file: a stretch of time
    assert merge(spark, plain, bounded=False) == {"inserted": 1, "updated": 1, "deleted": 1}

    bounded, files = laid_out(spark, tmp_path / "bounded")
    old = [Path(f.file.removeprefix("file:")) for f in files if f.hi <= BOUND]
    assert len(old) >= 3, files
    aside = tmp_path / "aside"
    aside.mkdir()
    for path in old:
        shutil.move(path, aside / path.name)
    assert merge(spark, bounded, bounded=True) == {"inserted": 1, "updated": 1, "deleted": 1}
    for path in old:
        shutil.move(aside / path.name, path)
    assert sorted(bounded.read("t").collect()) == sorted(plain.read("t").collect())


def test_a_partitioned_table_is_laid_out_by_time_within_each_partition(spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    rows = spark.createDataFrame([(f"c{t % 2}", t) for t in range(1600)], "part STRING, ts BIGINT")
    lake.overwrite(in_time_order(rows.repartition(3), F.col("ts"), ("part",)), "t", partition_by=("part",),
                   rows_per_file=50)
    files = (lake.read("t").groupBy(F.input_file_name().alias("file"))
             .agg(F.countDistinct("part").alias("parts"), F.min("ts").alias("lo"), F.max("ts").alias("hi"))
             .collect())
    assert len(files) >= 32 and all(f.parts == 1 and f.hi - f.lo < 800 for f in files), files  # unsorted: ~1,550
