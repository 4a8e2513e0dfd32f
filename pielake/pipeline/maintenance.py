"""Table care for one query: its tables compacted back into time order, and files no snapshot needs deleted.

Every micro-batch's MERGE rewrites the newest files of the tables it changes and adds a small file for its new
rows, and every run appends a small events file. After many micro-batches a table is many small files that
overlap in time, so a micro-batch's time bound skips fewer of them and every read opens more. `maintain`:

- lays the query's results table (`pielake.lake.results`) out again as a batch run writes it:
  `OPTIMIZE … ZORDER BY (anchor)`, each kind's rows in files of about `ROWS_PER_FILE` rows. Z-order on the time
  alone, not on key and time: a micro-batch's MERGE bounds the files it reads by time only (`Scope.floor`), and
  files that each hold a stretch of time, every key in it, let it skip all files older than its cut; files laid
  out on key and time each cover a longer stretch for fewer keys, and the newest stretch would be spread over
  more files. Liquid clustering would need a table without partitions (the table is partitioned by kind) and
  clustering declared at its creation;
- lays the stream's events out the same way on their time, in files of about `ROWS_PER_EVENTS_FILE` rows, the
  layout a batch run reads in place (`pielake.spark.runs`);
- vacuums both, and the stream's quarantine and the lake's `runs`, keeping `keep_days` of time travel,
  and gives each the log retention of as many days (`log_retention`; tables a pielake session creates have it
  from the start, and a table made by an older pielake, or with other `PIELAKE_KEEP_DAYS`, gets it here): the
  commits Delta lists at every write and read of a table in a folder stay a bounded number;
- of a query registered with a landing folder, releases the data of the files its runs took more than
  `keep_days` ago (`pielake.lake.landed.release`), keeping their names;
- deletes the records of the query's runs of more than `keep_days` ago (`pielake.pipeline.run_folder.prune_records`),
  whose rows are in `runs`.

It holds the query's run lock, so no run of the query writes its tables meanwhile (Delta would fail one of the
two); a run that holds it is waited for. The events are shared with other queries over the stream, but only ever
appended to, and an append never conflicts with a compaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pielake import vocabulary as V
from pielake.engine.settings import log_retention
from pielake.lake.delta import Lake
from pielake.lake.landed import ledger_of, release
from pielake.lake.lock import RunLock
from pielake.lake.results import ANCHOR, results_table
from pielake.pipeline.ingest import ROWS_PER_EVENTS_FILE, streams_for
from pielake.pipeline.job import QueryJob, RunRequest, events_table, quarantine_table
from pielake.pipeline.run_folder import prune_records
from pielake.pipeline.stages import ROWS_PER_FILE
from pielake.query.analyzer import QueryPlan, bind

HOURS_PER_DAY = 24


@dataclass(frozen=True)
class TableCare:
    """What maintenance did to one table: files rewritten into fewer, and old files deleted."""

    table: str
    files_removed: int
    files_added: int
    files_deleted: int

    def text(self) -> str:
        return (f"{self.table}: {self.files_removed} files rewritten as {self.files_added}, "
                f"{self.files_deleted} unreferenced files deleted")


@dataclass(frozen=True)
class Layout:
    """How one table is rewritten: in Z-order on `order` (none: compacted only), files of about `rows` rows."""

    table: str
    order: tuple[str, ...]
    rows: int


def layouts(job: QueryJob) -> list[Layout]:
    """The tables `maintain` rewrites, and how."""
    return [Layout(results_table(job.plan.name), (ANCHOR,), ROWS_PER_FILE),
            *(Layout(events_table(stream), (stream.time_column,), ROWS_PER_EVENTS_FILE) for stream in job.streams)]


def file_bytes(lake: Lake, table: str, rows: int) -> int:
    """The size of a file of `rows` of the table's rows, at the table's current bytes per row."""
    files, size = lake.file_stats(table, lake.version(table))
    count = lake.read(table).count()  # from the files' statistics: no file is read
    return max(1, size * rows // count) if files and count else size or 1


def maintain(lake: Lake, plan: QueryPlan, *, keep_days: float, say: Callable[[str], None],
             lock_wait: float = 0.0) -> list[TableCare]:
    """Rewrite and vacuum the query's tables (module docstring), under the query's lock, waiting up to `lock_wait`
    seconds for a run that holds it."""
    if not any(lake.exists(V.table_name(V.EVENTS, source.stream)) for source in plan.sources):
        say(f"query {plan.name} has not run in {lake.root} yet: nothing to maintain")
        return []
    streams = streams_for(lake, plan, RunRequest())
    # The lock's holder names this maintenance alone: a second one started meanwhile (the DAG's and a user's)
    # then waits for it or stops, where a shared name would let both rewrite the tables at once.
    holder = f"maintenance-{uuid.uuid4().hex[:8]}"
    job = QueryJob(lake, bind(plan, streams), streams, holder)
    lock = RunLock(lake.root, plan.name)
    lock.hold(holder, wait=lock_wait, say=say)
    try:
        keep_hours = round(keep_days * HOURS_PER_DAY)
        rewritten = {layout.table: layout for layout in layouts(job) if lake.exists(layout.table)}
        vacuumed_only = [t for t in (*map(quarantine_table, streams), V.RUNS) if lake.exists(t)]
        cared = []
        for table in [*rewritten, *vacuumed_only]:
            say(f"{table} ...")
            layout = rewritten.get(table)
            removed, added = (lake.optimize(table, order=layout.order,
                                            file_bytes=file_bytes(lake, table, layout.rows))
                              if layout is not None else (0, 0))
            lake.keep_log(table, log_retention(keep_days))
            cared.append(TableCare(table, removed, added, lake.vacuum(table, keep_hours=keep_hours)))
            say(f"  {cared[-1].text()}")
        released = release(ledger_of(lake.root, plan.name), keep_days=keep_days)
        if released:
            say(f"{V.LANDED_DIR}/{plan.name}: the data of {released} landed files taken over {keep_days:g} days ago "
                "released, their names kept")
        pruned = prune_records(lake.root, plan.name, keep_days=keep_days)
        if pruned:
            say(f"{V.RUNS_DIR}/{plan.name}: the records of {pruned} runs of over {keep_days:g} days ago deleted, "
                "their rows kept in runs")
        return cared
    finally:
        lock.release(holder)
