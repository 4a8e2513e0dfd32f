"""A query over another query's matches (docs/semantics.md §1): the upstream's published matches as the
downstream's interval stream.

The lake is all the two levels share. Every publish of a query describes its matches as a stream
(`matches_stream_schema`, saved as `<lake>/_streams/matches_<query>.yaml`): its key, `started_at` and
`completed_at`, the symbols' starts that order rows spanning one interval, and its horizon lag, the query's
window. A run of a query over them ingests them from the upstream's results table, read at one version, so that
the matches and the progress it reads are one commit's (`matches_input`):

- the rows are the complete matches starting after the key's processed time downstream and at or before the
  key's **horizon**, the upstream's time less its window: every match starting there is final;
- each key whose horizon moved gets a **horizon mark**, a row at its horizon with no end. It holds at no time
  (`pielake.spark.intervals`), but it moves the key's time on, so that situations close and statuses settle as
  the upstream's time moves, with new rows or none. Marks are not input: ingest stages them beside the admitted
  rows and counts them apart.

A batch run replaces the stream's table instead of appending to it (`mirrors`). A micro-batch is one too when the
upstream has published a batch run or a backfill since the query's last publish read it (`read_upstream`): such
a publish may change matches the query admitted before, and a micro-batch would only read the newer ones.
Every publish says in its commit's note what it was and, over matches, which version of the upstream it read
(`pielake.pipeline.notes`), so the next run tells this from the two tables' logs.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import DataFrame

from pielake import vocabulary as V
from pielake.lake.delta import Commit
from pielake.lake.results import results_table
from pielake.pipeline.job import QueryJob, StepContext
from pielake.pipeline.notes import last_noted, note_of
from pielake.pipeline.run_folder import UpstreamRead, record_upstream_read
from pielake.pipeline.scope import mark_unprocessed
from pielake.query.analyzer import QueryPlan
from pielake.spark.columns import LAST_TIME
from pielake.streams import StreamSchema

HORIZON = "__horizon"
NEW = "__new"
REWRITES = ("batch", "backfill")  # the publishes that may change matches a query over them has admitted
KEEPS_ROWS = ("OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES")  # unnoted commits that change no row


def matches_stream_schema(job: QueryJob, matches: DataFrame) -> StreamSchema:
    """The published matches of `job`'s query as a stream: its keys, `started_at`, `completed_at`,
    `detected_at`, each symbol's `_ts` and `_te`, and the RETURN columns, typed as `matches` (the rows the run
    published, in the stream's time) types them."""
    q, plan = job.query, job.plan
    types = {f.name.lower(): f.dataType.simpleString().upper() for f in matches.schema.fields}
    times = types[V.COMPLETED_AT]
    spans = [column for s in plan.symbols for column in (V.symbol_ts(s.name), V.symbol_te(s.name))]
    keys = q.stored(q.keys)
    columns = [*((k, types[k.lower()]) for k in keys),
               *((c, times) for c in (V.STARTED_AT, V.COMPLETED_AT, V.DETECTED_AT)),
               *((c, types[c.lower()]) for c in [*spans, *(r.name for r in plan.returns)])]
    return StreamSchema(V.table_name(V.MATCHES, plan.name), keys, V.STARTED_AT, q.stream.time_unit,
                        tuple(columns), V.COMPLETED_AT, q.window_ceiling,
                        tuple(V.symbol_ts(s.name) for s in plan.symbols))


def read_upstream(ctx: StepContext) -> tuple[DataFrame, DataFrame, bool]:
    """What the ingest of a run over matches reads of its upstream (`matches_input`), at the upstream's newest
    version, and whether the run rebuilds from all of it: a micro-batch does if the upstream was rewritten since
    (`_rewritten`). Both are recorded for the run's later steps (`pielake.pipeline.job.run_mode`)."""
    job = ctx.job
    version = job.lake.version(results_table(job.plan.sources[0].upstream))
    rebuilds = ctx.request.mode == "incremental" and _rewritten(job, version)
    record_upstream_read(job.lake.root, job.plan.name, job.run_id, UpstreamRead(version, rebuilds))
    return *matches_input(job, ctx.mode, version), rebuilds


def _rewritten(job: QueryJob, version: int) -> bool:
    """Whether the upstream's publishes after the version the query's last publish read, up to `version`, may
    have changed matches it admitted: one is a batch run or a backfill, or has no note and changes rows, or the
    upstream's log no longer holds them all; so may a query whose publishes name no version read. A query that
    has published nothing reads everything anyway."""
    lake, own = job.lake, results_table(job.plan.name)
    if not lake.exists(own):
        return False
    last = last_noted(lake, own, "read")
    if last is None:
        return True
    upstream = results_table(job.plan.sources[0].upstream)
    newer = [c for c in lake.commits_after(upstream, last) if c.version <= version]
    return len(newer) != version - last or any(_rewrites(c) for c in newer)


def _rewrites(commit: Commit) -> bool:
    mode = note_of(commit).get("mode")
    return mode in REWRITES if mode is not None else commit.info.get("operation") not in KEEPS_ROWS


def matches_input(job: QueryJob, mode: str, version: int) -> tuple[DataFrame, DataFrame]:
    """The upstream's matches a run of `job` ingests from `version` of its results, in the stream's columns, and
    the horizon marks of the keys whose horizon moved. A batch run reads every final match and marks every key
    (`mirrors`); a micro-batch those after its keys' processed time (the earlier ones are the stream's already)."""
    stream, q, lake = job.stream, job.declared_query(), job.lake
    upstream = job.plan.sources[0].upstream
    keys = list(stream.keys)
    assert stream.horizon_lag is not None
    horizons = lake.read(V.table_name(V.PROGRESS, upstream), version) \
        .select(*keys, (F.col(LAST_TIME) - stream.horizon_lag).alias(HORIZON))
    complete = lake.read(V.table_name(V.MATCHES, upstream), version).filter(F.col(V.STATUS) == V.COMPLETE) \
        .withColumn(V.STARTED_AT, F.least(*(F.col(c) for c in stream.order_columns)))
    rows = (complete.crossJoin(horizons) if not keys else complete.join(horizons, keys)) \
        .filter(q.kernel_time(F.col(V.STARTED_AT)) <= F.col(HORIZON))
    marks = horizons.withColumn(V.STARTED_AT, q.time_out(F.col(HORIZON)))
    processed = job.published(V.PROGRESS) if mode == "incremental" else None
    if processed is not None:
        rows, marks = (_after(job, part, processed) for part in (rows, marks))
    return rows.select(*stream.column_names), _as_marks(marks, stream)


def rebuild_hint(plan: QueryPlan) -> str:
    """How a query over matches catches up with what its upstream has published whole."""
    return (f"Run it in batch mode (`pielake run` without --incremental): it reads every final match of query "
            f"{plan.sources[0].upstream} again (docs/semantics.md §1).")


def mirrors(stream: StreamSchema, mode: str) -> bool:
    """A batch run over a matches stream replaces the stream's table with the upstream's final matches and a
    mark per key: the table mirrors what the upstream has published, so a batch run also repairs it after a
    backfill of the upstream changed matches it holds."""
    return stream.of_matches and mode == "batch"


def _after(job: QueryJob, rows: DataFrame, processed: DataFrame) -> DataFrame:
    """`rows` that start after their key's time in `processed` (keys, `__last_t`)."""
    q = job.declared_query()
    marked = mark_unprocessed(q.keyed(rows), processed, q, time=q.event_time(), mark=NEW)
    return q.unkeyed(marked.filter(F.col(NEW)).drop(NEW))


def _as_marks(horizons: DataFrame, stream: StreamSchema) -> DataFrame:
    """A horizon mark per key: its key and its start, every other column NULL, in the stream's columns."""
    kinds = dict(stream.columns)
    present = {*stream.keys, stream.time_column}
    return horizons.select(*(F.col(c) if c in present else F.lit(None).cast(kinds[c]).alias(c)
                             for c in stream.column_names))

