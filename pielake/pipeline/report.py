"""Run reports: a run's step records (`pielake.pipeline.run_folder`) published as one row of the `runs` table
when the run ends, published or stopped by a gate:

    query, run_id, mode, status, started_at, finished_at, seconds,
    steps: array<struct<step, started_at, seconds, rows: map<string, bigint>, passed, failed, report>>,
    matches: map<string, bigint>            -- published matches per status after the run

The table is partitioned by query and a run replaces its own row (`replaceWhere` on query and run id): a re-run
of the same run writes the same row once, and runs of different queries never conflict in Delta.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pielake import vocabulary as V
from pielake.engine.local_rows import local_rows
from pielake.lake.delta import Lake
from pielake.pipeline.run_folder import step_records

RUNS_DDL = ("query STRING, run_id STRING, mode STRING, status STRING, started_at TIMESTAMP, "
            "finished_at TIMESTAMP, seconds DOUBLE, steps ARRAY<STRUCT<step: STRING, started_at: TIMESTAMP, "
            "seconds: DOUBLE, rows: MAP<STRING, BIGINT>, passed: BOOLEAN, failed: ARRAY<STRING>, "
            "report: STRING>>, matches MAP<STRING, BIGINT>")


def publish_report(lake: Lake, query: str, run_id: str, *, mode: str, status: str,
                   matches: dict[str, int]) -> None:
    """Write the run's row of the `runs` table from its step records."""
    steps = step_records(lake.root, query, run_id)
    started = min((s.started_at for s in steps), default=datetime.now(UTC))
    row = (query, run_id, mode, status, started, datetime.now(UTC), round(sum(s.seconds for s in steps), 3),
           [(s.step, s.started_at, round(s.seconds, 3), s.rows, s.passed, list(s.failed), s.report) for s in steps],
           matches)
    frame = local_rows(lake.spark, [row], RUNS_DDL)
    lake.overwrite(frame, V.RUNS, partition_by=("query",),
                   replace_where=f"query = '{query}' AND run_id = '{run_id}'")
