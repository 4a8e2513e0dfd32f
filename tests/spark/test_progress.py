"""Stage progress lines: while a slow Spark job runs, the step says which stage runs and how far it is."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pandas as pd
from pyspark.sql import SparkSession

from pielake.engine.progress import StageProgress


def slowly(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for frame in frames:
        time.sleep(0.4)
        yield frame


def test_a_slow_step_reports_its_running_stage_and_tasks(spark: SparkSession) -> None:
    lines: list[str] = []
    with StageProgress(spark, "situations", lines.append, every=0.1):
        spark.range(0, 8, numPartitions=4).mapInPandas(slowly, "id BIGINT").collect()
    pattern = re.compile(r"^  situations: \d+ s, Spark stage \d+ \(collect\): [0-4]/4 tasks done, \d+ running$")
    assert lines
    assert [line for line in lines if not pattern.match(line)] == []


def test_a_quiet_step_says_nothing(spark: SparkSession) -> None:
    lines: list[str] = []
    with StageProgress(spark, "check_events", lines.append, every=0.1):
        time.sleep(0.3)
    assert lines == []
