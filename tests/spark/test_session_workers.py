"""What a pielake session saves its Python tasks: workers forked with the kernel imported
(`pielake.spark.worker_daemon`), and small driver-made tables read without Python tasks at all
(`pielake.spark.local_rows`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from pielake.pipeline.report import RUNS_DDL
from pielake.spark.local_rows import local_rows


def test_python_workers_are_forked_by_the_daemon_that_imported_the_kernel(spark: SparkSession) -> None:
    def seen_by_worker(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"daemon": [parent] * batch.num_rows,
                                              "kernel": ["pielake.spark.runs" in sys.modules] * batch.num_rows})

    seen = spark.range(2, numPartitions=2).mapInArrow(seen_by_worker, "daemon STRING, kernel BOOLEAN").collect()
    assert {r.kernel for r in seen} == {True}
    assert all("-m pielake.spark.worker_daemon" in r.daemon for r in seen), seen[0].daemon


def test_local_rows_are_a_plan_leaf_with_the_rows_a_python_list_gives(spark: SparkSession) -> None:
    at = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    rows = [("q", "r1", "batch", "published", at, at, 1.5,
             [("ingest", at, 0.5, {"staged events": 3}, True, ["a gate"], "report"),
              ("situations", at, 0.25, {}, None, [], None)], {"complete": 3}),
            ("q", "r2", "incremental", "stopped", at, at, 0.0, [], {})]
    local = local_rows(spark, rows, RUNS_DDL)
    assert local.collect() == spark.createDataFrame(rows, RUNS_DDL).collect()
    assert "LocalTableScan" in local._jdf.queryExecution().executedPlan().toString()
    assert local_rows(spark, [], RUNS_DDL).count() == 0
