"""What a publish says of itself: the note of its commit to the query's results table (Delta's `userMetadata`),
which later runs read from the table's log, at no Spark cost.

    {"mode": "incremental", "query": "3f9c2a6e0b1d4c57", "read": 12}

- `mode`: the mode the run ran in (`pielake.pipeline.job.run_mode`). A query over these matches reads a batch run's
  or a backfill's publish as one that may have changed matches it admitted (`pielake.pipeline.upstream`).
- `query`: a digest of the query's canonical text (`pielake.query.printer`), so that a layout or a comment
  changes nothing. A micro-batch or a backfill of a query whose definition is not the one that published the
  table is refused (`check_definition`): it would put rows of two definitions in one table. So is one whose
  rows have a whole-number column wider than the table stores it (`check_widths`).
- `read`: for a query over matches, the version of the upstream's results its ingest read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql.types import ByteType, DataType, IntegerType, LongType, ShortType

from pielake.errors import PielakeError
from pielake.lake.delta import Commit, Lake
from pielake.lake.results import results_table
from pielake.pipeline.job import StepContext
from pielake.pipeline.run_folder import upstream_read
from pielake.query.analyzer import QueryPlan
from pielake.query.parser import parse
from pielake.query.printer import query_text


class ChangedQueryError(PielakeError):
    """A micro-batch or backfill of a query that is not the one whose runs published its tables."""


def publish_note(ctx: StepContext) -> str:
    """The note of a publish's commit (the module docstring)."""
    job = ctx.job
    read = upstream_read(job.lake.root, job.plan.name, job.run_id) if job.plan.upstream_source is not None else None
    return json.dumps({"mode": ctx.mode, "query": definition(job.plan),
                       **({"read": read.version} if read is not None else {})})


def note_of(commit: Commit) -> dict:
    """A publish's note; empty for any other commit (maintenance, or a lake's writes before notes)."""
    try:
        note = json.loads(commit.note or "")
    except ValueError:
        return {}
    return note if isinstance(note, dict) else {}


def last_noted(lake: Lake, table: str, field: str) -> object | None:
    """`field` of the newest note in the table's log that has it, or None."""
    return next((note[field] for commit in lake.history(table) if field in (note := note_of(commit))), None)


def definition(plan: QueryPlan) -> str:
    """A digest of the query's canonical text: equal for two texts that parse to the same query."""
    canonical = query_text(parse(plan.source).query)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def check_definition(ctx: StepContext) -> None:
    """Refuse a micro-batch or backfill of a query that is not the one that last published its results table.
    Such a run recomputes only its scope, and the rows outside it would stay those of the old definition. A
    batch run recomputes every row, so it is how a changed query starts over."""
    job = ctx.job
    table = results_table(job.plan.name)
    if ctx.request.mode == "batch" or not job.lake.exists(table):
        return
    published = last_noted(job.lake, table, "query")
    if published is not None and published != definition(job.plan):
        verb = "micro-batch" if ctx.request.mode == "incremental" else "backfill"
        raise ChangedQueryError(
            f"query {job.plan.name} is not the query that published {table}: its definition changed since, and a "
            f"{verb} recomputes only part of the table, which would then hold rows of both. Run it once in batch "
            "mode (`pielake run` without --incremental or --from/--to), which recomputes every row from the events in "
            "the lake (docs/semantics.md §7); micro-batches and backfills go on from there.")


_INTEGER_WIDTHS = {ByteType(): 8, ShortType(): 16, IntegerType(): 32, LongType(): 64}


def _narrower(stored: DataType, computed: DataType) -> bool:
    return _INTEGER_WIDTHS.get(stored, 64) < _INTEGER_WIDTHS.get(computed, 0)


def check_widths(table: str, published: Mapping[str, DataFrame], computed: Mapping[str, DataFrame]) -> None:
    """Refuse to merge rows into a results table that stores one of their whole-number columns narrower than the
    run computes it (a RETURN column of INT arithmetic, computed in 64 bits, docs/semantics.md §1, in a table a
    version that computed it as an INT published). Delta would fail the MERGE at the first value past the
    table's width, deep inside the commit, and every later run of the query with it; a batch run rewrites the
    table in the computed types. `published` and `computed` are each kind's rows as the table holds them and as
    the run computed them."""
    for kind, rows in computed.items():
        stored = {f.name: f.dataType for f in published[kind].schema.fields}
        for field in rows.schema.fields:
            if field.name in stored and _narrower(stored[field.name], field.dataType):
                raise ChangedQueryError(
                    f"{table} stores {kind} column {field.name!r} as {stored[field.name].simpleString().upper()}, "
                    f"and this run computes it as {field.dataType.simpleString().upper()}: whole numbers meet in "
                    "64 bits (docs/semantics.md §1), and a value past the stored width would not fit. Run the query "
                    "once in batch mode (`pielake run` without --incremental or --from/--to), which rewrites the "
                    "table in the computed types; micro-batches and backfills go on from there.")
