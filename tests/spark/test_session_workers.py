"""What a pielake session saves its Python tasks: workers forked with the kernel imported, whose zip importers do
not read their archives again at every task (`pielake.engine.worker_daemon`), and small driver-made tables read
without Python tasks at all (`pielake.engine.local_rows`)."""

from __future__ import annotations

import os
import sys
import zipimport
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from zipfile import ZipFile
from zipimport import zipimporter

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from pielake.engine.local_rows import local_rows
from pielake.engine.worker_daemon import ArchiveImporter
from pielake.pipeline.report import RUNS_DDL


def test_python_workers_are_forked_by_the_daemon_that_imported_the_kernel(spark: SparkSession) -> None:
    def seen_by_worker(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"daemon": [parent] * batch.num_rows,
                                              "kernel": ["pielake.spark.runs" in sys.modules] * batch.num_rows})

    seen = spark.range(2, numPartitions=2).mapInArrow(seen_by_worker, "daemon STRING, kernel BOOLEAN").collect()
    assert {r.kernel for r in seen} == {True}
    assert all("-m pielake.engine.worker_daemon" in r.daemon for r in seen), seen[0].daemon


def test_python_workers_cache_only_zip_importers_that_read_an_archive_again_when_it_changes(
        spark: SparkSession) -> None:
    """pyspark invalidates the import caches at every task: a plain zip importer would read its archive again."""
    def seen_by_worker(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        kinds = sorted({type(f).__name__ for f in sys.path_importer_cache.values() if isinstance(f, zipimporter)})
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"kinds": [kinds] * batch.num_rows})

    for _ in range(2):  # a worker's second task runs after its first one's invalidation
        rows = spark.range(2, numPartitions=2).mapInArrow(seen_by_worker, "kinds ARRAY<STRING>").collect()
        assert {tuple(r.kinds) for r in rows} == {("ArchiveImporter",)}


def _archive(path: Path, modules: dict[str, str]) -> None:
    with ZipFile(path, "w") as z:
        for name, text in modules.items():
            z.writestr(f"{name}.py", text)


def test_an_archive_importer_reads_its_archive_again_only_when_the_archive_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "lib.zip"
    _archive(archive, {"first": "X = 1"})
    reads = []
    read_directory = zipimport._read_directory  # type: ignore[attr-defined]
    monkeypatch.setattr(zipimport, "_read_directory", lambda path: reads.append(path) or read_directory(path))
    importer = ArchiveImporter(str(archive))
    assert importer.find_spec("first") is not None and reads == [str(archive)]
    importer.invalidate_caches()
    assert reads == [str(archive)]  # unchanged: not read again
    _archive(archive, {"first": "X = 1", "second": "Y = 2"})
    os.utime(archive, ns=(1, 1))  # a new modification time even where the clock's resolution is coarse
    importer.invalidate_caches()
    assert reads == [str(archive)] * 2 and importer.find_spec("second") is not None


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
