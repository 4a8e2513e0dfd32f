"""The stages of one query's run, each reading its inputs from the lake and writing its outputs to staging.

    ingest -> [gate] -> situations -> [gate] -> pairs (one job per constraint) -> [gate] -> matches -> [gate]
           -> publish

`situations` first fixes the run's scope (`pielake.pipeline.scope`: which keys, from which cut); every later stage
reads it. Nothing reaches the published tables before `publish`, which merges the staged rows, and the state the
next micro-batch starts from, into the query's results table in one commit (a batch run replaces the table), so
a run that stops anywhere before that commit is simply run again.

Every stage reads its inputs back from staging (`pielake.lake.staging`: Delta tables when the steps are separate
processes, the Spark session in one process): each stage stays a separate, re-runnable unit, and Spark's query
plans stay small.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake import vocabulary as V
from pielake.engine.session import settings_within
from pielake.lake.delta import Commit, Lake, LakeError
from pielake.lake.results import ANCHOR, KIND, combine, pack, results_table, row_key
from pielake.pipeline.ingest import admit_events
from pielake.pipeline.job import QueryJob, StageResult, StepContext, events_table, timed
from pielake.pipeline.notes import check_widths, publish_note
from pielake.pipeline.run_folder import record_rebuild
from pielake.pipeline.scope import (
    FULL,
    UNPROCESSED,
    Scope,
    backfill_cut,
    derived_tables,
    events_versions,
    mark_unprocessed,
    next_progress,
    plan_scope,
    unsettled,
)
from pielake.pipeline.upstream import matches_stream_schema
from pielake.spark import columns as C
from pielake.spark.matches import MATCHES_SETTINGS, find_matches
from pielake.spark.pairs import detect_pairs
from pielake.spark.query import SparkQuery, kernel_floor
from pielake.spark.runs import Reading, stitched_per_key
from pielake.streams import StreamSchema, lake_streams, save_schema

BYTES_PER_PARTITION = 32 * 1024 * 1024
FILES_PER_TIME_RANGE = 4  # at most this many events files per time range a shuffle would make: read in place
BEHIND = "events another run admitted behind this query's progress"
ADMISSION = "events admitted in"  # the part of the situations stage that loads (a batch appends every event)
# Published tables: a micro-batch's MERGE rewrites the newest file of each kind whole and reads the files its scope
# reaches, so small files keep both small; a reader of the whole table pays a few milliseconds a file
# (docs/performance.md).
ROWS_PER_FILE = 10_000


# Read in place, a batch run's kernel emits a few rows of every key at every file's edges for the stitch
# (`pielake.spark.runs.stitched_per_key`); with many keys of few events each they rival the events in number, and
# stitching a row costs far more than shuffling an event. Past this many stitched rows per event, reading the
# events by key is the faster (docs/performance.md, "How it runs on Spark").
STITCHED_PER_EVENT = 0.05


@dataclass(frozen=True)
class KernelReading:
    """How the runs kernel reads a run's events: in place, a task per file chunk (tried first), or shuffled into
    `partitions` time ranges or by key. `files`: read in place, the Parquet files the tasks may read themselves."""

    partitions: int
    reading: Reading
    files: tuple[str, ...] = ()


def kernel_reading(lake: Lake, versions: dict[str, int], q: SparkQuery) -> KernelReading:
    """For the whole events tables (`versions`: each at the version the run reads): enough time ranges to keep
    every core busy, more when the tables are large; read in place when the events are the kernel's input as they
    are (`SparkQuery.readable_in_place`: one point stream's) and its table has a file for every core and not many
    more files than time ranges (a table of many small micro-batch files would cost a task each), by the kernel's
    tasks themselves where the files are plain Parquet and the query's predicates compute in Arrow
    (`SparkQuery.arrow_input`); by key instead where those files hold many keys of few events each
    (`_short_keys`)."""
    stats = [lake.file_stats(table, version) for table, version in versions.items()]
    files, size = sum(f for f, _ in stats), sum(b for _, b in stats)
    cores = lake.spark.sparkContext.defaultParallelism
    partitions = max(2 * cores, math.ceil(size / BYTES_PER_PARTITION))
    in_place = q.readable_in_place and cores <= files <= FILES_PER_TIME_RANGE * partitions
    if not in_place:
        return KernelReading(partitions, Reading.RANGES)
    [(table, version)] = versions.items()  # readable in place: one point stream's table
    plain = lake.plain_files(table, version)
    if plain and _short_keys(max(plain, key=os.path.getsize), q):
        return KernelReading(partitions, Reading.BY_KEY)
    return KernelReading(partitions, Reading.IN_PLACE, plain if q.arrow_input is not None else ())


def _short_keys(file: str, q: SparkQuery) -> bool:
    """Whether the events are many keys of few events each, judged on the largest events file (each holds every
    key of its range of time, `publish_events`; a backfill's few late events are a small file of their own): read
    in place, the stitch would read more than `STITCHED_PER_EVENT` of the kernel's rows per event, and the events
    are read by key instead, each key whole in a task and nothing stitched, as a micro-batch's slice is."""
    if not q.spec.keys:
        return False
    sample = pq.ParquetFile(file)
    named = {name.lower(): name for name in sample.schema_arrow.names}  # as Spark, case does not tell columns apart
    keys = sample.read(columns=[named[key.lower()] for key in q.spec.keys])
    return distinct_rows(keys) * stitched_per_key(q.spec) > STITCHED_PER_EVENT * keys.num_rows


def distinct_rows(table: pa.Table) -> int:
    """How many distinct rows `table` holds (of no NULL), by pyarrow's compute functions and numpy: pyarrow's
    grouping engine takes a second to start in a new process. Each column's codes are folded into the codes so far
    and numbered anew, so that they stay below the number of rows."""
    codes = np.zeros(table.num_rows, dtype=np.int64)
    for column in table.columns:
        encoded = pc.dictionary_encode(column.combine_chunks())
        folded = codes * len(encoded.dictionary) + encoded.indices.to_numpy(zero_copy_only=False)
        codes = np.unique(folded, return_inverse=True)[1]
    return int(codes.max()) + 1 if len(codes) else 0


def derive_situations(ctx: StepContext) -> StageResult:
    """Admit the audited events (`admit_events`), fix the run's scope, then derive all symbols in one pass over
    its slice: staged `segments_<q>`, `situations_<q>`."""
    job, mode = ctx.job, ctx.mode
    since = ctx.backfill_range[0] if ctx.backfill_range is not None else None
    details: dict[str, object] = {"mode": mode}
    parts: dict[str, float] = {}

    def work() -> dict[str, int]:
        started = time.perf_counter()
        already = admit_events(ctx)
        parts[ADMISSION] = time.perf_counter() - started
        if already:
            details["events another run appended first"] = already
        versions = {events_table(stream): job.lake.version(events_table(stream)) for stream in job.streams}
        q = job.query
        events = job.events_at(versions)
        progress = job.published(V.PROGRESS) if mode == "incremental" else None  # only a micro-batch reads it
        read = _last_read(job, progress)
        new_events = _new_events(job, None if read is None else read.versions)
        scope_mode = mode
        if (progress is not None and read is not None and new_events is not None
                and (behind := _behind(job, read, new_events, progress))):
            record_rebuild(job.lake.root, job.plan.name, job.run_id)
            scope_mode = "batch"
            details["mode"] = f"batch: {behind} {BEHIND}"

        def stage_scope(key_bounds: DataFrame | None = None) -> int:
            scope_rows = plan_scope(events, q, mode=scope_mode, progress=progress, new_events=new_events,
                                    backfill_cuts=_backfill_cuts(job, q, since, events) if mode == "backfill" else None,
                                    key_bounds=key_bounds)
            read = {name: F.lit(v) for name, v in zip(events_versions(len(versions)), versions.values(), strict=True)}
            return job.staging.overwrite(scope_rows.withColumns(read), job.table(V.SCOPE),
                                         commit_note=FULL if scope_mode == "batch" else None)

        if scope_mode == "batch":  # every key, every event: the kernel's bounds then tell each key's latest time
            chosen = kernel_reading(job.lake, versions, q)
            encoded = q.runs(events, chosen.partitions, reading=chosen.reading, files=chosen.files)
            keys = stage_scope(encoded.key_bounds)
        else:  # the scope says what the slice is; a micro-batch's is small: its keys whole in a task each
            keys = stage_scope()
            events = job.scope().slice(events, q)
            encoded = q.runs(events, 2 * job.lake.spark.sparkContext.defaultParallelism,
                             reading=Reading.BY_KEY if mode == "incremental" else Reading.RANGES)
        details["events read"] = encoded.reading.value
        job.staging.overwrite(encoded.runs, job.table(V.SEGMENTS), partition_by=(C.SERIES,))
        situations = job.scope().owned(q.situations(job.staged(V.SEGMENTS), events),
                                       derived_tables(q)[V.SITUATIONS])
        written = job.staging.overwrite(situations, job.table(V.SITUATIONS))
        return {"keys in scope": keys, job.table(V.SITUATIONS): written}

    return timed("situations", work, details, parts)


@dataclass(frozen=True)
class LastRead:
    """What the previous run read, as its progress says: the version of each stream's events, and the latest
    time it processed of any key in any stream (kernel time; None where no key has one)."""

    versions: tuple[int, ...]
    until: int | None


def _last_read(job: QueryJob, progress: DataFrame | None) -> LastRead | None:
    """What the previous run read, if its progress says (else None): one Spark job over the progress rows."""
    versions = events_versions(len(job.streams))
    if progress is None or not set(versions) <= set(progress.columns):
        return None
    *seen, until = progress.agg(*(F.max(v) for v in versions), F.max(C.LAST_TIME)).first()
    return None if any(v is None for v in seen) else LastRead(tuple(int(v) for v in seen), until)


def _new_events(job: QueryJob, seen: tuple[int, ...] | None) -> DataFrame | None:
    """The events appended since the versions the previous run read, if the lake can tell (else None): over
    several streams, each stream's since its own."""
    if seen is None:
        return None
    inserted = [job.lake.inserted_since(events_table(s), v) for s, v in zip(job.streams, seen, strict=True)]
    return None if any(frame is None for frame in inserted) else job.query.events_of(inserted)


def _behind(job: QueryJob, read: LastRead, new_events: DataFrame, progress: DataFrame) -> int:
    """How many of the events appended since the previous run lie at or before their key's processed time: events
    another run admitted behind this query's progress (a backfill of another query over the stream, or a
    micro-batch of one that had processed less). The query's rows after them were derived without them, and no
    micro-batch's cut reaches back to them, so the run recomputes every row as a batch run does
    (docs/semantics.md §7). A query's own runs admit no such event (its ingest quarantines them as late), and
    another's that all lie after every key's processed time are none either: only where the streams' logs (read
    from the log files, no Spark job) show another's append of rows that its files' statistics do not place
    after that time are they counted."""
    if all(appended_after(stream, commit, read.until) for stream, commit in _appended_by_others(job, read.versions)):
        return 0
    q = job.query
    marked = mark_unprocessed(new_events, progress, q, time=q.event_time(), mark=UNPROCESSED)
    return marked.filter(~F.col(UNPROCESSED)).count()


def _appended_by_others(job: QueryJob, seen: tuple[int, ...]) -> Iterator[tuple[StreamSchema, Commit]]:
    """The writes other than this query's runs' (`QueryJob.wrote`) that appended events to its streams after the
    versions `seen`, each with its stream."""
    return ((stream, commit) for stream, version in zip(job.streams, seen, strict=True)
            for commit in job.lake.commits_after(events_table(stream), version)
            if _appends_rows(commit) and not job.wrote(commit))


def _appends_rows(commit: Commit) -> bool:
    """Whether `commit` writes rows: a run of another query over the same files appends none (its events are the
    table's already), and its commit says so; maintenance rewrites files, as no write."""
    rows = commit.info.get("operationMetrics", {}).get("numOutputRows")
    return commit.info.get("operation") == "WRITE" and rows != "0"


def appended_after(stream: StreamSchema, commit: Commit, until: int | None) -> bool:
    """Whether every event `commit` appends to the stream lies after kernel time `until`, as the least time of each
    file it adds says in Delta's statistics (a lower bound: Delta rounds a timestamp down to its millisecond).
    False where a file has no statistics or `until` is unknown."""
    minima = commit.minima(stream.time_column)
    if minima is None or until is None:
        return False
    return all((floor := kernel_floor(value, stream)) is not None and floor > until for value in minima)


def _backfill_cuts(job: QueryJob, q: SparkQuery, since: int | None, events: DataFrame) -> DataFrame:
    if since is None:
        raise ValueError("a backfill needs the time it starts from")
    published = {kind: job.published(kind) for kind in (V.SITUATIONS, V.PAIRS, V.MATCHES, V.PROGRESS)}
    if any(rows is None for rows in published.values()):
        raise LakeError(f"query {job.plan.name} has no published results to backfill; run it once first")
    tables = derived_tables(q)  # read in the form the stages compute in
    situations, pairs, matches = (tables[kind].to_staged(published[kind])
                                  for kind in (V.SITUATIONS, V.PAIRS, V.MATCHES))
    return backfill_cut(q, since, events=events, situations=situations, progress=published[V.PROGRESS],
                        unsettled_rows=unsettled(q, situations=situations, pairs=pairs, matches=matches))


def detect_constraints(ctx: StepContext) -> StageResult:
    """PiePair detection of the step's constraints (Airflow: one task each, in parallel; a run in one process: all
    in one plan and one write) over the run's slice, into their partitions of staged `pairs_<q>`."""
    job, constraint_ids = ctx.job, ctx.constraints

    def work() -> dict[str, int]:
        constraints = [job.constraint(c) for c in constraint_ids]
        q = job.query
        pairs = job.scope().owned(detect_pairs(job.staged(V.SEGMENTS), job.staged(V.SITUATIONS), constraints, q,
                                               job.scope().last_times(q)),
                                  derived_tables(q)[V.PAIRS])  # the rows of the situations it owns
        chosen = ", ".join(f"'{c.id}'" for c in constraints)  # analyzer-made ids: c1, c2, ...
        written = job.staging.overwrite(pairs, job.table(V.PAIRS), partition_by=(V.CONSTRAINT_ID,),
                                        replace_where=f"{V.CONSTRAINT_ID} IN ({chosen})")
        return {f"{job.table('pairs')}[{', '.join(constraint_ids)}]": written}

    return timed(f"pairs {', '.join(constraint_ids)}", work)


def join_matches(ctx: StepContext) -> StageResult:
    """Natural joins of the staged pair tables into staged `matches_<q>`."""
    job = ctx.job

    def work() -> dict[str, int]:
        q = job.query
        matches = find_matches(job.staged(V.PAIRS), job.staged(V.SITUATIONS), job.scope().last_times(q), q,
                               job.run_id)
        with settings_within(job.lake.spark, MATCHES_SETTINGS):
            return {job.table(V.MATCHES): job.staging.overwrite(matches, job.table(V.MATCHES))}

    return timed("matches", work)


def publish(ctx: StepContext) -> StageResult:
    """Merge the staged rows of every kind, and the progress the next micro-batch starts from, into the query's
    results table (`pielake.lake.results`) in one commit; a batch run replaces the table. Then describe the
    published matches as a stream (`pielake.pipeline.upstream`), for queries over them to read.

    The commit is the run's (`Lake.once`): a retried publish commits nothing again. Until it is made, the lake
    holds none of the run's rows and the next run has the same scope and recomputes the same rows, so a publish
    that stops anywhere is repaired by running it again. The rows are written with one file size, and their times
    without a dictionary (`Lake.writing`); the commit's note says what the run was (`publish_note`).
    """
    job = ctx.job

    def work() -> dict[str, int]:
        q, scope = job.query, job.scope()
        tables = derived_tables(q)
        times = (ANCHOR, *(f"{kind}.{t}" for kind, derived in tables.items() for t in derived.times))
        state = next_progress(scope, q, situations=job.staged(V.SITUATIONS), pairs=job.staged(V.PAIRS),
                              run_starts=job.staged(V.SEGMENTS).select(*q.keys, F.col(C.START).alias(C.T)))
        staged = {kind: job.staged(kind) for kind in tables}
        with job.lake.once(job.writer), job.lake.writing(ROWS_PER_FILE, plain=times, note=publish_note(ctx)):
            written = _publish_rows(job, staged, state, scope)
        # What a query over its matches reads, typed as the staged matches the commit published.
        save_schema(matches_stream_schema(job, staged[V.MATCHES]), lake_streams(job.lake.root))
        return {results_table(job.plan.name): written}

    return timed("publish", work)


def _publish_rows(job: QueryJob, staged: dict[str, DataFrame], state: DataFrame, scope: Scope) -> int:
    """Rows changed in the results table: replaced whole for a batch run, else merged within the scope.

    A batch run writes each kind's rows in anchor order (`in_time_order`), so each file holds a stretch of time; a
    micro-batch's MERGE then names the scope's floor (`Scope.floor`) and Delta reads and rewrites only the files
    of recent time, and those of the progress rows (no anchor). Rows are published with their times in the
    stream's own type (`Derived.to_stored`). A run deletes the rows it owns that it no longer derives; progress
    has none such: the run leaves a progress row for every key in its scope.
    """
    q, table = job.query, results_table(job.plan.name)
    keys, computed = q.stored(q.keys), derived_tables(q)
    tables = {kind: derived.stored() for kind, derived in computed.items()}
    full = scope.full or not job.lake.exists(table)  # a batch keeps nothing of the old table: not read
    published = {kind: None if full else job.published(kind) for kind in tables}
    stored = {kind: computed[kind].to_stored(rows if published[kind] is None else rows.select(*published[kind].columns))
              for kind, rows in staged.items()}  # in the published column order, which MERGE assigns by
    if not full:
        check_widths(table, published, stored)

    def packed(kind: str, rows: DataFrame) -> DataFrame:
        derived = tables.get(kind)
        return pack(q.unkeyed(rows), kind, keys=keys, anchor=None if derived is None else derived.anchor,
                    run_id=job.run_id)

    new = combine([*(packed(kind, rows) for kind, rows in stored.items()), packed(V.PROGRESS, state)], keys)
    if full:
        return job.lake.overwrite(in_time_order(new, F.col(ANCHOR), (KIND,)), table, partition_by=(KIND,),
                                  rows_per_file=ROWS_PER_FILE)
    own_keys = {kind: tuple(c for c in derived.natural_key if c not in q.keys) for kind, derived in tables.items()}
    natural_key = row_key(keys, own_keys)
    recent = None if scope.floor is None else F.col(f"t.{ANCHOR}").isNull() | (F.col(f"t.{ANCHOR}") > scope.floor)
    counts = job.lake.replace_rows(new, table, natural_key=natural_key, stale=_stale(job, scope, new, natural_key),
                                   ignore=(V.RUN_ID,), target_only=recent, rows_per_file=ROWS_PER_FILE)
    return sum(counts.values())


def _stale(job: QueryJob, scope: Scope, new: DataFrame, natural_key: tuple[str, ...]) -> DataFrame:
    """The published rows the run owns that it no longer derives: of every kind at once, in one read of the results
    table and one join, as stored (a MERGE source's rows carry the table's columns). A row is named by its
    `natural_key` (`row_key`), compared NULL-safe as the MERGE compares it."""
    q = job.query
    owned = q.unkeyed(scope.owned_results(q.keyed(job.lake.read(results_table(job.plan.name)))))
    named = new.select(*(F.col(c).alias(f"__new{i}") for i, c in enumerate(natural_key)))
    same = reduce(Column.__and__, (F.col(c).eqNullSafe(F.col(f"__new{i}")) for i, c in enumerate(natural_key)))
    return owned.join(named, same, "left_anti")


def in_time_order(rows: DataFrame, anchor: Column, partitions: tuple[str, ...] = ()) -> DataFrame:
    """`rows` with each partition sorted by `anchor`: written out, each partition's files cover consecutive
    stretches of time, and a micro-batch touches only the newest file of each. A global order would save a few
    of those files per micro-batch (a staged table is read in a few partitions), but its sampling job and shuffle
    cost every batch run more.

    A table partitioned on disk (`partitions`) is sorted on those columns first: a partitioned write needs its
    rows grouped by them, and Spark adds a sort of its own when the order it is given does not group them."""
    return rows.sortWithinPartitions(*partitions, anchor)


def match_counts(job: QueryJob, *, just_published: bool = False) -> dict[str, int]:
    """Published matches per status (none before the first publish).

    Just after a batch run's publish the published table holds exactly the staged rows (`publish` replaced it with
    them), so those are counted: a run in one process holds them in memory, where the table would be read back
    from its files."""
    if just_published and job.scope().full:
        return _by_status(job.staged(V.MATCHES))
    return published_counts(job.lake, job.plan.name)


def published_counts(lake: Lake, query: str) -> dict[str, int]:
    """The query's published matches per status, as its table holds them (none before its first publish)."""
    table = V.table_name(V.MATCHES, query)
    return _by_status(lake.read(table)) if lake.exists(table) else {}


def _by_status(matches: DataFrame) -> dict[str, int]:
    return {r[V.STATUS]: int(r["count"]) for r in matches.groupBy(V.STATUS).count().collect()}
