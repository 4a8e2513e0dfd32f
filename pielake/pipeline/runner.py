"""A run of a query from the terminal: every stage and gate in order, in one Spark session, with a summary.

The same stage functions run as separate spark-submit jobs under Airflow (`pielake.pipeline.jobs`, `dags/`),
which stage their outputs in the lake's `_staging/`; a run in one process stages them in the Spark session
(`pielake.lake.staging`).
Modes (SEMANTICS §7): `batch` recomputes everything; `incremental` appends the file as the next micro-batch and
recomputes only its keys from their cut; `backfill` re-admits history in a range (the file and the quarantined
late events) and recomputes from before the range.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyspark.sql.functions as F

from pielake import vocabulary as V
from pielake.engine.progress import StageProgress
from pielake.errors import PielakeError
from pielake.lake.delta import Lake, check_run_id
from pielake.lake.lock import RunLock
from pielake.lake.staging import SessionStaging
from pielake.pipeline.gates import GateError, GateResult, run_gate
from pielake.pipeline.ingest import (
    ADMITTED,
    FORMATS,
    Admission,
    IngestReport,
    events_table,
    forget_replayed,
    ingest,
    publish_events,
    read_raw,
    replay_quarantined,
)
from pielake.pipeline.report import StepRecord, publish_report, record_step
from pielake.pipeline.scope import MODES, mark_unprocessed
from pielake.pipeline.stages import (
    QueryJob,
    StageResult,
    derive_situations,
    detect_constraints,
    join_matches,
    match_counts,
    publish,
    timed,
)
from pielake.pipeline.steps import split_step, step_names
from pielake.query.analyzer import QueryPlan, bind
from pielake.spark.query import SparkQuery
from pielake.streams import SCHEMAS_DIR, StreamSchema, load_schema, save_schema

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    ingest: IngestReport
    stages: tuple[StageResult, ...]
    gates: tuple[GateResult, ...]
    matches: dict[str, int]

    def render(self) -> str:
        lines = [f"run {self.run_id}",
                 f"  ingest: {self.ingest.rows_in} rows in = {self.ingest.events} events + "
                 f"{self.ingest.quarantined} quarantined + {self.ingest.duplicates_dropped} exact duplicates dropped"]
        for stage in self.stages:
            details = f"   ({stage.details_text()})" if stage.details else ""
            lines.append(f"  {stage.stage:<12} {stage.seconds:7.2f} s   {stage.rows_text()}{details}")
        lines += [f"  {gate.text()}" for gate in self.gates]
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
    return lake.root / V.STREAMS_DIR


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


@dataclass(frozen=True)
class RunRequest:
    """What a run is asked to do; every stage of the run, in any process, gets the same request."""

    mode: str = "batch"  # batch | incremental | backfill
    events_path: str | None = None
    fmt: str | None = None
    time_column: str = "ts"
    time_unit: str = "s"
    since: str | None = None  # a backfill's range, in the stream's own time
    until: str | None = None
    checks: bool = True


class Run:
    """One run of a query: its steps as methods, so a terminal run and an Airflow task call the same code."""

    def __init__(self, lake: Lake, plan: QueryPlan, run_id: str, request: RunRequest,
                 progress: Progress | None = None):
        check_run_id(run_id)
        if request.mode not in MODES:
            raise PielakeError(f"unknown mode '{request.mode}'; use one of {', '.join(MODES)}")
        self.request = request
        self.fmt = request.fmt or (guess_format(request.events_path) if request.events_path else None)
        if request.events_path is not None and self.fmt is not None:
            stream = resolve_stream(lake, plan, request.events_path, fmt=self.fmt, time_column=request.time_column,
                                    time_unit=request.time_unit)
        else:
            stream = stream_of(lake, plan)
        self.job = QueryJob(lake, bind(plan, stream), stream, run_id)
        self.q = self.job.spark_query(lake.spark.createDataFrame([], stream.ddl))
        self.window = _backfill_range(self.q, request.since, request.until) if request.mode == "backfill" else None
        self.report = IngestReport(0, 0, 0, 0)
        self.matches: dict[str, int] = {}
        self.lock = RunLock(lake.root, plan.name)
        self.progress = progress

    def step(self, name: str) -> StageResult | GateResult | None:
        """Run the step called `name` (one of `step_names`), holding the query's lock for this run until it
        publishes or a gate stops it (`pielake.lake.lock`). Every step leaves its record for the run report."""
        self.lock.hold(self.job.run_id)
        started, clock = datetime.now(UTC), time.perf_counter()
        try:
            with self._watched(name):
                outcome = self._step(name)
        except GateError as stop:
            self._record(name, started, time.perf_counter() - clock, stop.result)
            self._finish(V.STOPPED)
            raise
        self._record(name, started, time.perf_counter() - clock, outcome)
        if name == "publish":
            self._finish(V.PUBLISHED)
        return outcome

    def _watched(self, name: str) -> AbstractContextManager[object]:
        """Spark stage progress while the step runs, if anyone listens."""
        return StageProgress(self.job.lake.spark, name, self.progress) if self.progress else nullcontext()

    def _record(self, name: str, started: datetime, seconds: float, outcome: StageResult | GateResult | None) -> None:
        if isinstance(outcome, GateResult):
            record = StepRecord(name, started, seconds, passed=outcome.success, failed=outcome.failed,
                                report=str(outcome.report))
        else:
            record = StepRecord(name, started, seconds, rows=outcome.rows if outcome else {})
        record_step(self.job.lake, self.job.plan.name, self.job.run_id, record)

    def _finish(self, status: str) -> None:
        """The run is over: its row in the `runs` table, then the lock goes."""
        self.matches = match_counts(self.job, just_published=status == V.PUBLISHED)
        publish_report(self.job.lake, self.job.plan.name, self.job.run_id, mode=self.request.mode, status=status,
                       matches=self.matches)
        self.lock.release(self.job.run_id)

    def _step(self, name: str) -> StageResult | GateResult | None:
        job, picked = split_step(name)
        if job == "check":
            return self.check(picked)
        if job == "pairs":  # `pairs_<c>` detects one constraint, `pairs` all of them
            return detect_constraints(self.job, [picked] if picked else [c.id for c in self.job.plan.constraints])
        actions: dict[str, Callable[[], StageResult]] = {
            "ingest": self.ingest,
            "situations": lambda: derive_situations(self.job, mode=self.request.mode,
                                                    since=self.window[0] if self.window else None),
            "matches": lambda: join_matches(self.job),
            "publish": lambda: publish(self.job)}
        if name not in actions:
            raise PielakeError(f"no step '{name}'; the steps are {', '.join(step_names(self.job.plan))}")
        return actions[name]()

    def ingest(self) -> StageResult:
        """Read the events file (and, for a backfill, the quarantined late events in range) into staging."""
        lake, stream = self.job.lake, self.job.stream

        def work() -> dict[str, int]:
            raws = [read_raw(lake.spark, self.request.events_path, self.fmt)] if self.fmt else []
            if self.window is not None:
                raws.append(replay_quarantined(lake, stream, self.q.kernel_time, *self.window))
            self.report = ingest(lake, raws, stream, self.job.run_id,
                                 _admission(self.job, self.q, self.request.mode, self.window))
            return {"rows in": self.report.rows_in, "staged events": self.report.events,
                    "quarantined": self.report.quarantined,
                    "exact duplicates dropped": self.report.duplicates_dropped}

        return timed("ingest", work)

    def check(self, gate: str) -> GateResult | None:
        """Validate a stage's staged output. The events gate then publishes the events: they are the input of
        every later stage (a backfill also clears the late rows it re-admitted from the quarantine)."""
        result = run_gate(self.job, gate) if self.request.checks else None
        if gate == "events":
            publish_events(self.job.lake, self.job.stream)
            self.job.staging.done_with(events_table(self.job.stream))
            if self.window is not None:
                forget_replayed(self.job.lake, self.job.stream, self.q.kernel_time, *self.window)
        return result


@contextmanager
def one_process_run(lake: Lake, plan: QueryPlan, run_id: str, request: RunRequest,
                    progress: Progress | None = None) -> Iterator[Run]:
    """A run whose steps all run in this process: its stage outputs wait for their gates in the Spark session,
    not in `_staging/` (`pielake.lake.staging` says why), and are freed when the run is over."""
    staging = SessionStaging()
    try:
        yield Run(lake.staged_in(staging), plan, run_id, request, progress)
    finally:
        staging.release()


def run_query(lake: Lake, plan: QueryPlan, run_id: str, request: RunRequest,
              progress: Progress | None = None) -> RunSummary:
    """Every step of a run in order, in this process; a failed gate stops it before anything is published.

    A run that fails here is over (nothing retries it), so it releases the query's lock; the next run recomputes
    what it had staged."""
    say = progress or (lambda _: None)
    stages: list[StageResult] = []
    gates: list[GateResult] = []
    with one_process_run(lake, plan, run_id, request, progress) as run:
        try:
            for name in step_names(plan, parallel=False):
                say(f"{name} ...")
                outcome = run.step(name)
                if isinstance(outcome, StageResult):
                    stages.append(outcome)
                    say(f"  done {outcome.stage} in {outcome.seconds:.2f} s ({outcome.rows_text()})")
                elif outcome is not None:
                    gates.append(outcome)
                    say(f"  {outcome.text()}")
        except BaseException:
            run.lock.release(run_id)
            raise
    return RunSummary(run_id, run.report, tuple(stages), tuple(gates), run.matches)


def _admission(job: QueryJob, q: SparkQuery, mode: str, window: tuple[int, int] | None) -> Admission | None:
    """Incremental: an event at or before its key's processed time is late. Backfill: it must lie in the range."""
    if mode == "backfill":
        assert window is not None
        low, high = window
        return Admission("outside_backfill_range", lambda rows: rows.withColumn(
            ADMITTED, q.event_time().between(low, high)))
    processed = job.published("progress")
    if mode != "incremental" or processed is None:
        return None
    return Admission("late", lambda rows: mark_unprocessed(q.keyed(rows), processed, q, time=q.event_time(),
                                                           mark=ADMITTED))


def _backfill_range(q: SparkQuery, since: str | None, until: str | None) -> tuple[int, int]:
    """The backfill's bounds in kernel time, parsed in the stream's own time type."""
    if since is None or until is None:
        raise PielakeError("a backfill needs --from and --to")
    bounds = []
    for text in (since, until):
        try:
            bounds.append(q.parse_time(text))
        except ValueError as error:
            raise PielakeError(f"cannot read '{text}' as a time of stream {q.stream.name}: {error}") from None
    if bounds[0] > bounds[1]:
        raise PielakeError(f"--from {since} is after --to {until}")
    return bounds[0], bounds[1]


def first_matches(lake: Lake, plan: QueryPlan, limit: int = 10) -> list[dict[str, object]]:
    """The earliest matches of a query, for the demo's printout."""
    table = lake.read(f"matches_{plan.name}")
    order = [F.col(k) for k in plan.keys] + [F.col("detected_at")]
    return [r.asDict() for r in table.orderBy(*order).limit(limit).collect()]
