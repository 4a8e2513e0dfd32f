"""What every step of a run works with: the request, the job (a query over a stream in a lake, for one run), the
step's context, and what a stage reports back.

A run's steps may each be a process of its own (Airflow's tasks), so none of this holds state a later step needs:
a step rebuilds it from the request and reads what earlier steps staged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pyspark.sql.functions as F
from pyspark.sql import DataFrame

from pielake import vocabulary as V
from pielake.errors import PielakeError
from pielake.lake.delta import Commit, Lake, committed
from pielake.lake.inputs import why_no_file
from pielake.lake.staging import Staging
from pielake.pipeline.run_folder import rebuilds, upstream_read
from pielake.pipeline.scope import FULL, MODES, Scope
from pielake.query.analyzer import PairConstraint, QueryPlan
from pielake.spark import columns as C
from pielake.spark.query import SparkQuery, check_range_early, typed_range
from pielake.spark.timeline import Timeline
from pielake.streams import (
    DEFAULT_TIME_COLUMN,
    DEFAULT_TIME_UNIT,
    StreamSchema,
    check_pattern_given,
    check_skip_lines,
    check_time_unit,
    check_zone_named,
    guess_format,
)


@dataclass(frozen=True)
class RunRequest:
    """What a run is asked to do; every step of the run, in any process, gets the same request."""

    mode: str = "batch"  # batch | incremental | backfill
    events_path: str | None = None  # the events file of a query over one stream
    stream_events: tuple[tuple[str, str], ...] = ()  # of a query over several: (stream, events file) pairs
    fmt: str | None = None
    # An unknown stream's event-time column and the unit of its numeric times, as given; None: not given, `ts` and
    # seconds (`unknown_time_column`). A known stream's are its schema's: one given that differs is refused.
    time_column: str | None = None
    time_unit: str | None = None
    # The lines of an unknown stream's CSV files around their header (`StreamSchema.skip_lines`): a tuple, or as
    # a command line writes them (`1,3,4`).
    skip_lines: tuple[int, ...] | str = ()
    # The zone whose wall clock an unknown stream's files write its times in (`StreamSchema.time_zone`).
    time_zone: str | None = None
    # The Spark datetime pattern an unknown stream's files write its times in (`StreamSchema.time_format`); None:
    # the one of ISO-8601 and `TIME_PATTERNS` that reads its file.
    time_format: str | None = None
    since: str | None = None  # a backfill's range, in the stream's own time
    until: str | None = None
    checks: bool = True
    lock_wait: float = 0.0  # seconds a step waits for another run of the query to publish (else it stops at once)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise PielakeError(f"unknown mode '{self.mode}'; use one of {', '.join(MODES)}")
        if self.time_unit is not None:
            object.__setattr__(self, "time_unit", check_time_unit(self.time_unit, "--time-unit"))
        object.__setattr__(self, "skip_lines", check_skip_lines(self.skip_lines, "--skip-lines"))
        if self.time_zone is not None:
            check_zone_named(self.time_zone, "--time-zone")
        if self.time_format is not None:
            check_pattern_given(self.time_format, "--time-format")
        # a stream named with no file (an empty Airflow param) has no events file
        object.__setattr__(self, "stream_events", tuple((name, path) for name, path in self.stream_events if path))

    @property
    def unknown_time_column(self) -> str:
        """The time column a stream typed from its file reads: the one given, else `ts`."""
        return self.time_column or DEFAULT_TIME_COLUMN

    @property
    def unknown_time_unit(self) -> str:
        """The unit of a stream typed from its file whose times are numbers: the one given, else seconds."""
        return self.time_unit or DEFAULT_TIME_UNIT

    def format_of(self, path: str) -> str:
        """The format the run reads the events file `path` in: the one given, else the one its name tells."""
        return self.fmt or guess_format(path)

    def check_inputs(self, plan: QueryPlan, lake_root: Path) -> None:
        """Refuse, before Spark starts, events paths that name no file, or whose streams or formats the run
        could not tell, a backfill's range that is no range of times of its streams, where their time type is
        known, and a batch run given no file over a lake that holds no events to run over (`check_events_held`)."""
        if self.mode == "backfill":
            check_range_early(self.since, self.until, plan, lake_root)
        self.check_events_held(plan, lake_root)
        for source in plan.sources:
            path = self.events_of(plan, source.stream)
            if path is None:
                continue
            if (reason := why_no_file(path)) is not None:
                raise PielakeError(reason)
            self.format_of(path)

    def check_events_held(self, plan: QueryPlan, lake_root: Path) -> None:
        """A batch run given no events file runs its query over the events the lake holds (a new query over
        streams ingested before, a changed query starting over): refused where it holds none of a stream, which
        would be a run over nothing published as a run that found no match."""
        if self.mode != "batch" or plan.upstream_source is not None or \
                any(self.events_of(plan, s.stream) for s in plan.sources):
            return
        missing = [s.stream for s in plan.sources if not committed(lake_root / V.table_name(V.EVENTS, s.stream))]
        if missing:
            files = "--events FILE" if len(plan.sources) == 1 else "--events STREAM=FILE for each"
            raise PielakeError(f"query {plan.name} is given no events file, and {lake_root.resolve()} holds no "
                               f"events of stream {', '.join(missing)} to run it over: give them ({files})")

    def events_of(self, plan: QueryPlan, stream: str) -> str | None:
        """The events file of `stream` (a stream of the query's FROM), if the run reads one: `events_path` for a
        query over one stream, else the file `stream_events` gives it."""
        if len(plan.sources) == 1:
            if self.stream_events:
                raise PielakeError(f"query {plan.name} reads one stream, {stream}: give its events file alone "
                                   "(--events FILE), not STREAM=FILE")
            return self.events_path
        if self.events_path is not None:
            names = " ".join(f"--events {s.stream}=FILE" for s in plan.sources)
            raise PielakeError(f"query {plan.name} reads {len(plan.sources)} streams: name each one's events file "
                               f"({names})")
        for name, _ in self.stream_events:
            plan.source_named(name)
        return next((path for name, path in self.stream_events if name.lower() == stream.lower()), None)


def events_table(stream: StreamSchema) -> str:
    return V.table_name(V.EVENTS, stream.name)


def quarantine_table(stream: StreamSchema) -> str:
    return V.table_name(V.QUARANTINE, stream.name)


@dataclass(frozen=True)
class QueryJob:
    """One query over its streams (each of FROM, in its order) in one lake, for one run."""

    lake: Lake
    plan: QueryPlan
    streams: tuple[StreamSchema, ...]
    run_id: str
    _scope: dict[str, Scope] = field(default_factory=dict, compare=False, repr=False)  # `scope()`'s, kept

    def table(self, kind: str) -> str:
        return V.table_name(kind, self.plan.name)

    @property
    def stream(self) -> StreamSchema:
        """The stream of a query over one; what only such a query does (reading another query's matches, checking
        its events gate with no stream named) reads it."""
        if len(self.streams) > 1:
            raise PielakeError(f"query {self.plan.name} reads {len(self.streams)} streams, not one")
        return self.streams[0]

    @property
    def writer(self) -> str:
        """Who commits this run's writes to the lake (`Lake.once`): the query and the run id, since Airflow gives
        every DAG's run at one logical time the same run id, and two queries over one stream both append to it."""
        return f"{self.plan.name}.{self.run_id}"

    def wrote(self, commit: Commit) -> bool:
        """Whether a run of this query made `commit`: one of its writers is such a run's (`writer`)."""
        return any(writer.startswith(f"{self.plan.name}.") for writer in commit.writers)

    def staged_events(self, stream: StreamSchema) -> str:
        """The staging table of the stream's events the run ingests: the query's own, not the stream's, since
        queries over one stream ingest side by side and a run's steps hand their rows on in the lake's one
        `_staging/`; over several streams, one per stream."""
        return self.table(V.EVENTS) if len(self.streams) == 1 else V.table_name(V.EVENTS, self.plan.name, stream.name)

    def events_at(self, versions: dict[str, int]) -> DataFrame:
        """The streams' events at the versions of their tables the run reads (`versions`, by table, in FROM's
        order), as the run's query reads them (`SparkQuery.events_of`)."""
        return self.query.events_of([self.lake.read(table, version) for table, version in versions.items()])

    @cached_property
    def query(self) -> SparkQuery:
        """The query bound to the events tables' columns: read once per job. Over several streams, a `Timeline`."""
        types = [{f.name: f.dataType.simpleString().upper() for f in self.lake.read(events_table(s)).schema.fields}
                 for s in self.streams]
        return SparkQuery(self.plan, self.stream, types[0]) if len(self.streams) == 1 else \
            Timeline(self.plan, self.streams, types)

    def declared_query(self, stream: StreamSchema | None = None) -> SparkQuery:
        """The query bound to a stream's declared columns (of a query over one, its stream's), for the steps that
        read the stream's rows before there is an events table to read them from: its keys and times."""
        stream = self.stream if stream is None else stream
        return SparkQuery(self.plan, stream, dict(stream.columns))

    def constraint(self, constraint_id: str) -> PairConstraint:
        found = next((c for c in self.plan.constraints if c.id == constraint_id), None)
        if found is None:
            known = ", ".join(c.id for c in self.plan.constraints)
            raise PielakeError(f"query {self.plan.name} has no constraint '{constraint_id}'; it has {known}")
        return found

    @property
    def staging(self) -> Staging:
        return self.lake.staging

    def staged(self, kind: str) -> DataFrame:
        return self.staging.read(self.table(kind))

    def published(self, kind: str) -> DataFrame | None:
        """A published table with the run's key columns, or None before the first publish."""
        return self.query.keyed(self.lake.read(self.table(kind))) if self.lake.exists(self.table(kind)) else None

    def processed(self, stream: StreamSchema) -> DataFrame | None:
        """How far each key of the stream was processed (keys, `C.LAST_TIME`: its time in that stream), from the
        published progress; None before the first publish."""
        progress = self.published(V.PROGRESS)
        if progress is None or len(self.streams) == 1:
            return progress
        return progress.select(*self.query.keys, F.col(C.last_time(self.streams.index(stream))).alias(C.LAST_TIME))

    def scope(self) -> Scope:
        """The run's scope; whether it is a batch's is the note its staged write was given (for a Delta table,
        its commit's user metadata, read from the log file for free where a column would cost a Spark job in
        every stage that asks).

        One staged frame gives one `Scope`, kept: a run in one process reads the same frame in every stage, and
        its `floor` (two Spark jobs) is then computed once, not in each stage that bounds a read by it."""
        frame = self.staged(V.SCOPE)
        known = self._scope.get(V.SCOPE)
        if known is None or known.frame is not frame:
            full = self.staging.commit_note(self.table(V.SCOPE)) == FULL
            known = self._scope[V.SCOPE] = Scope(frame, self.query.keys, full)
        return known


def run_mode(job: QueryJob, asked: str) -> str:
    """The mode a run runs in: the one it was asked for, except a micro-batch that recomputes every row. That is
    one whose situations stage found events another run admitted behind its progress (`record_rebuild`), or one
    of a query over matches whose ingest found that the upstream rebuilt or backfilled them since the query last
    read them (`pielake.pipeline.upstream.read_upstream`). That run is a batch run, which reads every event again:
    the rows it derived before may have changed, and a micro-batch recomputes only those after its cuts."""
    if asked != "incremental":
        return asked
    if rebuilds(job.lake.root, job.plan.name, job.run_id):
        return "batch"
    if job.plan.upstream_source is None:
        return asked
    read = upstream_read(job.lake.root, job.plan.name, job.run_id)
    return "batch" if read is not None and read.rebuilds else asked


@dataclass(frozen=True)
class StepContext:
    """One step of a run: its job and request, and for a step of a stage that runs per constraint, the
    constraints it runs for."""

    job: QueryJob
    request: RunRequest
    constraints: tuple[str, ...] = ()

    @property
    def mode(self) -> str:
        """The mode the run runs in (`run_mode`)."""
        return run_mode(self.job, self.request.mode)

    @cached_property
    def backfill_range(self) -> tuple[int, int] | None:
        """A backfill's bounds in kernel time, read in the streams' own time type; None for other modes."""
        if self.request.mode != "backfill":
            return None
        since, until = self.request.since, self.request.until
        if since is None or until is None:
            raise PielakeError("a backfill needs --from and --to")
        low, high = typed_range(since, until, self.job.streams[0])  # one time type for all (docs/semantics.md §1)
        assert low is not None and high is not None  # both given
        return low, high


@dataclass(frozen=True)
class StageResult:
    """What a stage did: rows written per table and the time it took."""

    stage: str
    rows: dict[str, int]
    seconds: float
    details: dict[str, object] = field(default_factory=dict)
    parts: dict[str, float] = field(default_factory=dict)  # seconds of named parts of the work, within `seconds`

    def rows_text(self) -> str:
        return ", ".join(f"{table}: {n}" for table, n in self.rows.items())

    def details_text(self) -> str:
        return ", ".join([*(f"{name}: {value}" for name, value in self.details.items()),
                          *(f"{name} {seconds:.2f} s" for name, seconds in self.parts.items())])


def timed(stage: str, work: Callable[[], dict[str, int]], details: dict[str, object] | None = None,
          parts: dict[str, float] | None = None) -> StageResult:
    """Run `work`; `details` is the stage's own record of how it went, and `parts` the seconds of the parts of
    its work it names, which `work` may add to."""
    started = time.perf_counter()
    rows = work()
    return StageResult(stage, rows, time.perf_counter() - started, details if details is not None else {},
                       parts if parts is not None else {})
