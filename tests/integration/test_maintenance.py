"""Table maintenance on real Delta tables. After micro-batches that wrote small files, as a large lake's
tables have, the maintenance DAG (`airflow dags test pielake_maintenance`, its task a client of the engine)
rewrites every table of the query into fewer files without changing a row, keeps the time travel it is asked to
keep, and a query over a stretch of time then reads fewer files. A run or another maintenance holding the query's
lock keeps it from starting; keeping no time travel deletes every file the snapshot does not need, releases the
data of the files the query took from a landing folder and deletes the runs' records (their rows are in `runs`);
and the next micro-batch still equals the brute-force reference."""

from __future__ import annotations

from pathlib import Path

import pyspark.sql.functions as F
import pytest
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.lake.landed import Landing, ledger_of, take
from pielake.lake.lock import RunLock, RunLockedError
from pielake.lake.results import KINDS
from pielake.pipeline.job import RunRequest
from pielake.pipeline.maintenance import maintain
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import load_query
from tests.helpers import drawn, files_read, json_lines, land
from tests.integration.conftest import QUERY, airflow_command, assert_tables_equal_the_reference

pytestmark = pytest.mark.heavy(seconds=150)  # about this long in CI: scheduled first

MICRO_BATCHES = 6  # each writes files of a few rows: enough files to compact
TABLES = ["events_flags", "results_flag_pairs"]
FILES_AFTER = {"events_flags": 1, "results_flag_pairs": len(KINDS)}  # a file for each kind's partition


def table_files(lake: Lake, table: str) -> int:
    return lake.file_stats(table, lake.version(table))[0]


def files_on_disk(lake: Lake, table: str) -> int:
    return sum(1 for path in (lake.root / table).rglob("*.parquet") if "_delta_log" not in path.parts)


def rows(lake: Lake, table: str, version: int | None = None) -> list[tuple]:
    return sorted(tuple(r) for r in lake.read(table, version).collect())


def micro_batch(lake: Lake, folder: Path, index: int) -> list[dict]:
    """Micro-batch `index`: three seconds of two keys' flags, run in this process; returns its events."""
    events = [*drawn(key="k", start=3 * index, a="X.X", b=".XX"), *drawn(key="j", start=3 * index, a="XX.", b="X.X")]
    (folder / f"{index}.json").write_text(json_lines(events))
    run_query(lake, load_query(QUERY, "flag_pairs"), f"mb{index}",
              RunRequest(mode="incremental", checks=False, events_path=str(folder / f"{index}.json")))
    return events


def test_the_maintenance_dag_compacts_a_lake_after_micro_batches(airflow: dict[str, str], tmp_path: Path,
                                                                  spark: SparkSession,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    lake, plan = Lake(spark, tmp_path / "lake"), load_query(QUERY, "flag_pairs")
    assert maintain(lake, plan, keep_days=7, say=print) == []  # nothing has run yet
    with monkeypatch.context() as small:
        small.setattr("pielake.pipeline.stages.ROWS_PER_FILE", 4)  # runs write small files, as a large lake has
        events = [e for index in range(MICRO_BATCHES) for e in micro_batch(lake, tmp_path, index)]
    before = {t: (lake.version(t), rows(lake, t)) for t in TABLES}
    assert all(table_files(lake, t) > FILES_AFTER[t] for t in TABLES)
    stretch = lake.read("events_flags").filter(F.col("ts").between(6, 11))  # the events of two micro-batches
    read_before = sum(files_read(stretch))

    for holder in ("a-run", "maintenance"):  # a run, or another maintenance, holds the query's lock
        RunLock(lake.root, "flag_pairs").hold(holder)
        with pytest.raises(RunLockedError, match=f"run {holder}"):
            maintain(lake, plan, keep_days=7, say=print)
        RunLock(lake.root, "flag_pairs").release(holder)

    log = airflow_command({**airflow, "PIELAKE_LAKE": str(lake.root)}, "dags", "test", "pielake_maintenance",
                          timeout=900)
    assert "state=success" in log, log[-4000:]
    assert "spark-submit" not in log  # the task a client of the engine
    for table, (version, kept) in before.items():
        assert table_files(lake, table) == FILES_AFTER[table]
        assert rows(lake, table) == kept
        assert rows(lake, table, version) == kept  # a day of time travel kept: the old files are still there
    assert sum(files_read(lake.read("events_flags").filter(F.col("ts").between(6, 11)))) < read_before

    landed = land(tmp_path / "landing", "flags-1.json", '{"key": "k", "ts": 1, "a": true, "b": false}\n')
    taken = Path(take(Landing.parse(str(landed)), ledger_of(lake.root, "flag_pairs") / "Flags", "r1"))
    said: list[str] = []
    cared = {c.table: c for c in maintain(lake, plan, keep_days=0, say=said.append)}
    assert set(TABLES) <= set(cared) and "runs" in cared and "quarantine_flags" in cared
    assert "_landed/flag_pairs: the data of 1 landed files taken over 0 days ago released, their names kept" in said
    assert (taken / landed.name).read_text() == "" and landed.stat().st_nlink == 1
    assert any(line.startswith("_runs/flag_pairs: the records of ") for line in said)
    assert not any((lake.root / "_runs" / "flag_pairs").iterdir())  # their rows are in runs
    for table in TABLES:
        assert cared[table].files_deleted > 0
        assert files_on_disk(lake, table) == table_files(lake, table)

    events += micro_batch(lake, tmp_path, MICRO_BATCHES)
    assert_tables_equal_the_reference(spark, lake.root, events)
