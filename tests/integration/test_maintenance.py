"""Table maintenance on real Delta tables: after micro-batches, `maintain` rewrites the query's tables into fewer
files without changing a row, keeps the time travel it is asked to keep, deletes what is older, and the next
micro-batch still equals the brute-force reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock, RunLockedError
from pielake.pipeline.job import RunRequest
from pielake.pipeline.maintenance import maintain
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import load_query
from pielake.streams import save_schema
from tests.integration.test_gates_and_backfill import EVENTS, QUERY, STREAM, assert_published_equal_the_reference, write

pytestmark = pytest.mark.heavy(seconds=170)  # about this long in CI: scheduled first

TABLES = ["events_line", "situations_mid", "pairs_mid", "matches_mid", "progress_mid"]


def table_files(lake: Lake, table: str) -> int:
    return lake.file_stats(table, lake.version(table))[0]


def files_on_disk(lake: Lake, table: str) -> int:
    return sum(1 for path in (lake.root / table).rglob("*.parquet") if "_delta_log" not in path.parts)


def rows(lake: Lake, table: str, version: int | None = None) -> list[tuple]:
    return sorted(tuple(r) for r in lake.read(table, version).collect())


def test_maintenance_compacts_keeps_time_travel_and_leaves_every_row(tmp_path: Path, spark: SparkSession,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pielake.pipeline.stages.ROWS_PER_FILE", 4)  # runs write small files, as a large lake has
    save_schema(STREAM, tmp_path / "lake" / "_streams")
    lake = Lake(spark, tmp_path / "lake")
    plan = load_query(QUERY, "mid")
    assert maintain(lake, plan, keep_days=7, say=print) == []  # nothing has run yet
    for index, (low, high) in enumerate(((1, 5), (6, 10), (11, 15), (16, 19))):
        part = [e for e in EVENTS if low <= e["ts"] <= high]
        run_query(lake, plan, f"mb{index}", RunRequest(mode="incremental", checks=False,
                                                       events_path=write(tmp_path / f"{index}.json", part)))
    before = {t: (lake.version(t), table_files(lake, t), rows(lake, t)) for t in TABLES}
    assert all(before[t][1] > 1 for t in TABLES if t != "progress_mid")

    for holder in ("a-run", "maintenance"):  # a run, or another maintenance, holds the query's lock
        RunLock(lake.root, "mid").hold(holder)
        with pytest.raises(RunLockedError, match=f"run {holder}"):
            maintain(lake, plan, keep_days=7, say=print)
        RunLock(lake.root, "mid").release(holder)

    cared = {c.table: c for c in maintain(lake, plan, keep_days=7, say=print)}
    assert set(TABLES) <= set(cared) and "runs" in cared and "quarantine_line" in cared
    for table, (version, files, kept) in before.items():
        assert table_files(lake, table) == 1
        assert cared[table].files_added <= cared[table].files_removed <= files
        assert rows(lake, table) == kept
        assert rows(lake, table, version) == kept  # a week of time travel kept: the old files are still there
        assert cared[table].files_deleted == 0

    cared = {c.table: c for c in maintain(lake, plan, keep_days=0, say=print)}
    for table in TABLES:
        assert cared[table].files_deleted > 0
        assert files_on_disk(lake, table) == table_files(lake, table)

    last = [e for e in EVENTS if e["ts"] > 19]
    run_query(lake, plan, "after", RunRequest(mode="incremental", checks=False,
                                              events_path=write(tmp_path / "after.json", last)))
    assert_published_equal_the_reference(lake, plan, EVENTS)
