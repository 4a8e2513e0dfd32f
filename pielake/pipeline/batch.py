"""One batch run of a query: ingest -> situations -> pairs (per constraint) -> matches, with a summary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyspark.sql.functions as F

from pielake.errors import PielakeError
from pielake.lake.delta import Lake, check_run_id
from pielake.pipeline.ingest import FORMATS, IngestReport, ingest, read_raw
from pielake.pipeline.stages import (
    QueryJob,
    StageResult,
    derive_situations,
    detect_constraint,
    join_matches,
    match_counts,
    timed,
)
from pielake.query.analyzer import QueryPlan
from pielake.streams import SCHEMAS_DIR, StreamSchema, load_schema, save_schema

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    ingest: IngestReport
    stages: tuple[StageResult, ...]
    matches: dict[str, int]

    def render(self) -> str:
        lines = [f"run {self.run_id}",
                 f"  ingest: {self.ingest.rows_in} rows in = {self.ingest.events} events + "
                 f"{self.ingest.quarantined} quarantined + {self.ingest.duplicates_dropped} exact duplicates dropped"]
        for stage in self.stages:
            lines.append(f"  {stage.stage:<12} {stage.seconds:7.2f} s   {stage.rows_text()}")
        counts = ", ".join(f"{status}: {n}" for status, n in sorted(self.matches.items())) or "none"
        lines.append(f"  matches by status: {counts}")
        return "\n".join(lines)


def guess_format(path: str) -> str:
    suffix = Path(path).suffix.lower().lstrip(".")
    fmt = {"csv": "csv", "parquet": "parquet", "json": "json", "jsonl": "json", "ndjson": "json"}.get(suffix)
    if fmt is None:
        raise PielakeError(f"cannot tell the format of '{path}'; pass --format ({', '.join(FORMATS)})")
    return fmt


def lake_streams(lake: Lake) -> Path:
    """Where a lake keeps the schemas of the streams ingested into it."""
    return lake.root / "_streams"


def stream_of(lake: Lake, plan: QueryPlan) -> StreamSchema:
    """The schema the stream was ingested with (saved in the lake), else the project's schemas/."""
    known = load_schema(plan.stream, lake_streams(lake)) or load_schema(plan.stream)
    if known is None:
        raise PielakeError(f"stream {plan.stream} has not been ingested into {lake.root}; run the ingest stage first")
    return known


def resolve_stream(lake: Lake, plan: QueryPlan, events_path: str, *, fmt: str, time_column: str, time_unit: str,
                   schemas_dir: Path = SCHEMAS_DIR) -> StreamSchema:
    """The stream's schema from the lake or schemas/, or inferred from the file; saved in the lake."""
    known = load_schema(plan.stream, lake_streams(lake)) or load_schema(plan.stream, schemas_dir)
    if known is None:
        known = infer_stream(lake, plan, events_path, fmt=fmt, time_column=time_column, time_unit=time_unit)
    save_schema(known, lake_streams(lake))
    return known


def infer_stream(lake: Lake, plan: QueryPlan, events_path: str, *, fmt: str, time_column: str,
                 time_unit: str) -> StreamSchema:
    """An unknown stream's schema, from the file's columns and types."""
    if fmt == "csv":  # typed by inference here; ingest itself reads CSV as strings to see every cast failure
        sample = lake.spark.read.option("header", "true").option("inferSchema", "true").csv(events_path)
    else:
        sample = read_raw(lake.spark, events_path, fmt)
    columns = tuple((f.name, f.dataType.simpleString().upper()) for f in sample.schema.fields)
    names = {n.lower() for n, _ in columns}
    for needed in [*plan.keys, time_column]:
        if needed.lower() not in names:
            raise PielakeError(f"stream {plan.stream} has no schema and its file has no column "
                               f"'{needed}'; pass --time-column or add schemas/{plan.stream}.yaml")
    return StreamSchema(plan.stream, plan.keys, time_column, time_unit, columns)


def run_batch(lake: Lake, plan: QueryPlan, events_path: str, run_id: str, *, fmt: str | None = None,
              time_column: str = "ts", time_unit: str = "s", progress: Progress | None = None) -> RunSummary:
    """Run every stage of `plan` over the events in `events_path`, writing all tables into `lake`."""
    say = progress or (lambda _: None)
    check_run_id(run_id)
    fmt = fmt or guess_format(events_path)
    stream = resolve_stream(lake, plan, events_path, fmt=fmt, time_column=time_column, time_unit=time_unit)
    job = QueryJob(lake, plan, stream, run_id)
    say(f"ingest {events_path} into events_{stream.name.lower()} ...")
    report = IngestReport(0, 0, 0, 0)

    def do_ingest() -> dict[str, int]:
        nonlocal report
        report = ingest(lake, events_path, fmt, stream, run_id)
        return {f"events_{stream.name.lower()}": report.events}

    stages = [timed("ingest", do_ingest)]
    say(_line(stages[-1]))
    for step in (lambda: derive_situations(job),
                 *(lambda cid=c.id: detect_constraint(job, cid) for c in plan.constraints),
                 lambda: join_matches(job)):
        stages.append(step())
        say(_line(stages[-1]))
    return RunSummary(run_id, report, tuple(stages), match_counts(job))


def _line(stage: StageResult) -> str:
    return f"  done {stage.stage} in {stage.seconds:.2f} s ({stage.rows_text()})"


def first_matches(lake: Lake, plan: QueryPlan, limit: int = 10) -> list[dict[str, object]]:
    """The earliest matches of a query, for the demo's printout."""
    table = lake.read(f"matches_{plan.name}")
    order = [F.col(k) for k in plan.keys] + [F.col("detected_at")]
    return [r.asDict() for r in table.orderBy(*order).limit(limit).collect()]
