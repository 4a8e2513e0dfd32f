"""A run of a query: its steps (`pielake.pipeline.registry`) in order, each holding the query's lock and leaving
its record for the run report.

`Run.step` runs one step, as a spark-submit job does (`pielake.pipeline.jobs`), staging the stage outputs in the
lake's `_staging/`; `Run.resume` runs one as an Airflow task on the engine does, its outputs held in the engine
(`pielake.engine.held`); `run_query` runs every step in one process, staging them in the Spark session
(`pielake.lake.staging`) and checking its gates beside the stages (`Auditor`), and prints a summary.
Modes (docs/semantics.md §7): `batch` recomputes everything; `incremental` appends the file as the next
micro-batch and recomputes only its keys from their cut; `backfill` re-admits history in a range (the file and
the quarantined late events) and recomputes from before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pielake import vocabulary as V
from pielake.engine.progress import StageProgress
from pielake.errors import PielakeError
from pielake.exitcodes import EXIT_OVER, EXIT_USAGE
from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock
from pielake.lake.staging import SessionStaging
from pielake.pipeline.gates import GateError, GateResult, build_docs, run_gate
from pielake.pipeline.gx_project import docs_index
from pielake.pipeline.ingest import IngestReport, bind_streams, streams_for
from pielake.pipeline.job import QueryJob, RunRequest, StageResult, StepContext, events_table, run_mode
from pielake.pipeline.registry import CHECK, STAGES, Registry, Step
from pielake.pipeline.report import publish_report
from pielake.pipeline.run_folder import RunEnd, StepRecord, record_end, record_step, run_end, step_records
from pielake.pipeline.stages import match_counts, published_counts
from pielake.query.analyzer import QueryPlan

Progress = Callable[[str], None]
Outcome = StageResult | GateResult | None
AGAIN = "again: its staged output was held by an engine that has stopped since"  # said by `Run.resume`


class RunStopped(Exception):  # noqa: N818 (a run stopped as asked is not an error of the run's)
    """The run was stopped as asked (its engine's client went away: Ctrl-C, an Airflow task killed) in the middle
    of a step. It ends as a step that failed there ends, not as its input or a gate would end it: the lock stays
    with a run of steps, for the step's retry to resume it, and goes with a whole run (`run_query`)."""


def never() -> bool:
    return False


class RunOverError(PielakeError):
    """The step's run has ended (stopped by a gate, failed) at a step before it: a task cleared and run again by
    hand after its run, or a `pairs` task beside the one that failed the run."""

    exit_code = EXIT_OVER


def ended(root: Path, plan: QueryPlan, run_id: str, step: str, registry: Registry = STAGES) -> str | None:
    """Why the step called `step` of the run has nothing to do, or None. A run that has ended (`Run._finish`)
    goes on again from the step it ended at (a failed gate run again checks again, and passes if its input was
    mended) or any step before it. A step after it would take the query's lock for a run that no longer releases
    it, and stage rows no publish reads."""
    end = run_end(root, plan.name, run_id)
    if end is None or not registry.after(plan, step, end.step):
        return None
    return (f"run {run_id} of {plan.name} has ended ({end.status} at {end.step}), so its step {step} has nothing "
            f"to do; to run it again, start it again from {end.step} or a step before it")


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    stages: tuple[StageResult, ...]
    gates: tuple[GateResult, ...]
    matches: dict[str, int]
    docs: Path | None = None  # the lake's Data Docs, where the gates' results are

    @property
    def ingest(self) -> IngestReport | None:
        """Where the run's input rows went (its ingest stage's rows)."""
        found = next((s for s in self.stages if s.stage == "ingest"), None)
        return None if found is None else IngestReport.of(found.rows)

    def render(self) -> str:
        lines = [f"run {self.run_id}"] + ([f"  ingest: {self.ingest.text()}"] if self.ingest else [])
        width = max((len(stage.stage) for stage in self.stages), default=0)  # seconds in one column
        for stage in self.stages:
            details = f"   ({stage.details_text()})" if stage.details else ""
            lines.append(f"  {stage.stage:<{width}} {stage.seconds:7.2f} s   {stage.rows_text()}{details}")
        lines += [f"  {gate.text()}" for gate in self.gates]
        counts = ", ".join(f"{status}: {n}" for status, n in sorted(self.matches.items())) or "none"
        lines.append(f"  matches by status: {counts}")
        if self.docs is not None:
            lines.append(f"  data docs: {self.docs}")
        return "\n".join(lines)


class Run:
    """One run of a query: a terminal run and an Airflow task call the same `step`."""

    def __init__(self, lake: Lake, plan: QueryPlan, run_id: str, request: RunRequest, *,
                 progress: Progress | None = None, registry: Registry = STAGES, stopped: Callable[[], bool] = never):
        V.check_run_id(run_id)
        self.lake, self.plan, self.run_id = lake, plan, run_id
        self._job: QueryJob | None = None
        self.request = request
        self.registry = registry
        self.matches: dict[str, int] = {}
        self.lock = RunLock(lake.root, plan.name)
        self.progress = progress
        self.docs_at_last_gate = True  # the run's last gate builds its Data Docs (an `Auditor` builds them later)
        self.over = False  # the run has ended: published, stopped by a gate or failed for good
        self.stopped = stopped  # whether the run was asked to stop: what fails in a step then is that (`attempt`)

    @property
    def job(self) -> QueryJob:
        """The query bound to its streams' schemas for this run. Bound at the run's first step (`attempt`), not when
        the run is made: a stream that cannot be read (its file never landed, so its schema cannot be inferred)
        or a query that does not fit its stream is then that step's wrong input, which ends the run like any
        other (`ending`): its `runs` row says why, and its later steps find it over."""
        if self._job is None:
            self.request.check_events_held(self.plan, self.lake.root)
            streams = streams_for(self.lake, self.plan, self.request)
            self._job = QueryJob(self.lake, bind_streams(self.lake, self.plan, streams), streams, self.run_id)
        return self._job

    def step(self, name: str) -> Outcome:
        """Run the step called `name` (`attempt`), and end the run where it ends: after its last step, at a gate
        that stops it, or at a wrong input or query (a step run again would fail the same way, so the run is over
        and the next one must not wait for it). Any other failure keeps the lock: a retry of the step resumes the
        run."""
        self._go_on_or_refuse(name)
        with self.ending(name):
            outcome = self.attempt(name)
        if self.registry.step(self.plan, name) == self.registry.last(self.plan):
            self._finish(V.PUBLISHED, name)
        return outcome

    def resume(self, name: str, done: set[str]) -> Outcome:
        """Run the step called `name` of a run whose steps keep their staged outputs in memory between them (the
        engine's, `pielake.engine.held`); `done` names the steps that ran since that memory was made, and gains
        each step that succeeds here.

        Every step before `name` (`Registry.before`) that is not in `done` runs first, as it ran the first time:
        what it staged is gone with the engine that held it (stopped, or killed). So a step resumes a run
        wherever its earlier steps ran, as a retried task resumes one from `_staging/`. Ingest and its gate are
        left out once the run has appended its events to the stream's table (`Lake.once`): the events are the
        stream's then, the situations stage reads them there, and ingested again they would count as
        duplicates of themselves."""
        self._go_on_or_refuse(name)
        pending = [step for step in self.registry.before(self.plan, name) if step.name not in done]
        if any(V.EVENTS in step.stage.stages for step in pending) and self._events_admitted():
            pending = [step for step in pending if V.EVENTS not in step.stage.stages]
        for step in pending:
            if self.progress:
                self.progress(f"{step.name} {AGAIN}")
            self.step(step.name)
            done.add(step.name)
        outcome = self.step(name)
        done.add(name)
        return outcome

    def _go_on_or_refuse(self, name: str) -> None:
        """Raise RunOverError if the run has ended and the step called `name` cannot go on with it (`ended`);
        else, if it had ended, it goes on from here: it ends again only if something ends it again."""
        why = ended(self.lake.root, self.plan, self.run_id, name, self.registry)
        if why is not None:
            raise RunOverError(why)
        record_end(self.lake.root, self.plan.name, self.run_id, None)

    def _events_admitted(self) -> bool:
        """The run has appended its events to every one of its streams' tables, in commits of its own since it
        started. Where it appended to some of them only, ingest runs again: it finds the appended events in their
        tables and drops them as exact duplicates, and stages the others again."""
        started = [r.started_at for r in step_records(self.lake.root, self.plan.name, self.run_id)]
        return bool(started) and all(self.lake.committed_by(events_table(stream), self.job.writer, min(started))
                                     for stream in self.job.streams)

    def attempt(self, name: str) -> Outcome:
        """Run the step called `name`, holding the query's lock for this run, and leave its record for the run
        report, whether it succeeds, is stopped by its gate or fails on a wrong input or query; the run goes on
        or ends as its caller says (`step`, `ending`)."""
        step = self.registry.step(self.plan, name)
        self.lock.hold(self.run_id, wait=self.request.lock_wait, say=self.progress)
        started, clock = datetime.now(UTC), time.perf_counter()
        try:
            with self._watched(name):
                outcome = self._run(step)
        except BaseException as error:
            if self.stopped():  # its Spark jobs were cancelled: a gate's failed checks or a step's error say only that
                raise RunStopped(f"run {self.run_id} of query {self.plan.name} stopped at {name}, as asked") from error
            if isinstance(error, GateError):
                self._record(name, started, time.perf_counter() - clock, error.result)
            elif isinstance(error, PielakeError) and error.exit_code == EXIT_USAGE:
                self._record(name, started, time.perf_counter() - clock, None, failed=(str(error),))
            raise
        self._record(name, started, time.perf_counter() - clock, outcome)
        return outcome

    @contextmanager
    def ending(self, name: str | None = None) -> Iterator[None]:
        """End the run if the block (the step called `name`, or gates) raises what ends it: a gate's stop, or a
        wrong input or query."""
        try:
            yield
        except GateError as stop:
            self._finish(V.STOPPED, CHECK + stop.result.gate)
            raise
        except PielakeError as wrong:
            if wrong.exit_code == EXIT_USAGE:
                self._finish(V.FAILED, name or "")
            raise

    def _run(self, step: Step) -> Outcome:
        if step.check:
            gate = step.stage.gate
            assert gate is not None
            if not self.request.checks:
                return None
            last = self.docs_at_last_gate and self.registry.last_check(self.plan) == step
            return run_gate(self.job, gate.suite, gate.frame_function(), last=last, per_stream=gate.per_stream)
        return step.stage.function()(StepContext(self.job, self.request, step.constraints))

    def _watched(self, name: str) -> AbstractContextManager[object]:
        """Spark stage progress while the step runs, if anyone listens."""
        return StageProgress(self.lake.spark, name, self.progress) if self.progress else nullcontext()

    def _record(self, name: str, started: datetime, seconds: float, outcome: Outcome,
                failed: tuple[str, ...] = ()) -> None:
        if isinstance(outcome, GateResult):
            record = StepRecord(name, started, seconds, passed=outcome.success, failed=outcome.failed,
                                report=str(outcome.report))
        else:
            record = StepRecord(name, started, seconds, rows=outcome.rows if outcome else {}, failed=failed)
        record_step(self.lake.root, self.plan.name, self.run_id, record)

    def _finish(self, status: str, step: str) -> None:
        """The run is over: its row in the `runs` table, how it ended (which its later steps find, `ended`), then
        the lock goes."""
        self.over = True
        bound = self._job is not None  # else it ended before it knew its streams (`job`), and read none of them
        self.matches = match_counts(self.job, just_published=status == V.PUBLISHED) if bound else \
            published_counts(self.lake, self.plan.name)
        publish_report(self.lake, self.plan.name, self.run_id, status=status, matches=self.matches,
                       mode=run_mode(self.job, self.request.mode) if bound else self.request.mode)
        record_end(self.lake.root, self.plan.name, self.run_id, RunEnd(status, step))
        self.lock.release(self.run_id)


@contextmanager
def one_process_run(lake: Lake, plan: QueryPlan, run_id: str, request: RunRequest, *,
                    progress: Progress | None = None, registry: Registry = STAGES,
                    stopped: Callable[[], bool] = never) -> Iterator[Run]:
    """A run whose steps all run in this process: its stage outputs wait for their gates in the Spark session,
    not in `_staging/` (`pielake.lake.staging` says why), and are freed when the run is over."""
    staging = SessionStaging()
    try:
        yield Run(lake.staged_in(staging), plan, run_id, request, progress=progress, registry=registry,
                  stopped=stopped)
    finally:
        staging.release()


class Auditor:
    """The gates of a run in one process, checked one at a time in a thread of their own, beside the stages.

    A gate only reads its stage's staged output, and no later stage changes that (each stages tables of its own),
    so the stages after it need not wait for its verdict: only a step that changes the lake outside staging
    waits for every gate before it (`Registry.audited_before`), and a failed gate stops the run there, before
    anything it audited is appended or published. The run's Data Docs, a report rather than a verdict, are built
    once the last verdict is in, beside the publish. A run then costs its gates' time where it exceeds its
    stages', not their sum. The gates run one at a time: Great Expectations' project is not safe for checkpoints
    run at once, and after a failed one no other is checked.
    """

    def __init__(self, run: Run, say: Progress):
        self.run = run
        self.say = say
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gates")
        self.pending: list[Future[Outcome]] = []
        self.stopped = threading.Event()
        self.docs: Future[None] | None = None
        run.docs_at_last_gate = False  # built by `document`, after the verdicts

    def __enter__(self) -> Auditor:
        return self

    def __exit__(self, kind: type[BaseException] | None, *raised: object) -> None:
        """Wait for the Data Docs of a run that ended well; a run that ends early (a stage failed) waits for the
        gate being checked, and the queued ones are dropped."""
        self.worker.shutdown(wait=True, cancel_futures=True)
        if kind is None and self.docs is not None:
            self.docs.result()

    def check(self, step: Step) -> None:
        """Queue the gate `step` behind the gates queued before it."""
        self.pending.append(self.worker.submit(self._check, step))

    def _check(self, step: Step) -> Outcome:
        if self.stopped.is_set():
            return None
        self.say(f"{step.name} ...")
        try:
            outcome = self.run.attempt(step.name)
        except BaseException:
            self.stopped.set()
            raise
        if outcome is not None:
            self.say(f"  {outcome.text()}")
        return outcome

    def verdicts(self) -> list[GateResult]:
        """Wait for every queued gate; their results in order, or the first failure raised (ending the run)."""
        queued, self.pending = self.pending, []
        with self.run.ending():
            return [outcome for outcome in (f.result() for f in queued) if isinstance(outcome, GateResult)]

    def document(self) -> None:
        """Build the run's Data Docs pages in the gates' thread: called once every verdict is in, so it runs
        beside the publish, and the run waits for it at its end (`__exit__`)."""
        self.docs = self.worker.submit(build_docs, self.run.job)


def run_query(lake: Lake, plan: QueryPlan, run_id: str, request: RunRequest, *,
              progress: Progress | None = None, registry: Registry = STAGES,
              stopped: Callable[[], bool] = never) -> RunSummary:
    """Every step of a run in order, in this process, its gates beside the stages (`Auditor`); a failed gate stops
    it before anything is published.

    A run that fails here is over (nothing retries it), so it releases the query's lock; the next run recomputes
    what it had staged."""
    say = progress or (lambda _: None)
    stages: list[StageResult] = []
    gates: list[GateResult] = []
    with one_process_run(lake, plan, run_id, request, progress=progress, registry=registry, stopped=stopped) as run:
        try:
            with Auditor(run, say) as auditor:
                for step in registry.steps(run.plan, parallel=False):
                    if step.check:
                        auditor.check(step)
                        continue
                    if registry.audited_before(step):
                        gates += auditor.verdicts()
                        if gates and step == registry.last(run.plan):  # a gate checked: docs to build
                            auditor.document()
                    say(f"{step.name} ...")
                    outcome = run.step(step.name)
                    if outcome is not None:
                        stages.append(outcome)
                        say(f"  done {outcome.stage} in {outcome.seconds:.2f} s ({outcome.rows_text()})")
                gates += auditor.verdicts()
        except BaseException:
            run.lock.release(run_id)
            raise
    return RunSummary(run_id, tuple(stages), tuple(gates), run.matches, docs_index(lake.root) if gates else None)
