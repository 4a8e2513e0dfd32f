"""What a publish says of itself: the note of its commit to the query's results table (Delta's `userMetadata`),
which later runs read from the table's log, at no Spark cost.

    {"mode": "incremental", "query": "3f9c2a6e0b1d4c57", "read": 12}

- `mode`: the mode the run ran in. A query over these matches reads a batch run's or a backfill's publish as
  one that may have changed matches it admitted (`pielake.pipeline.upstream`).
- `query`: a digest of the query's canonical text (`pielake.query.printer`), so that a layout or a comment
  changes nothing. A micro-batch or a backfill of a query whose definition is not the one that published the
  table is refused (`check_definition`): it would put rows of two definitions in one table.
- `read`: for a query over matches, the version of the upstream's results its ingest read.
"""

from __future__ import annotations

import hashlib
import json

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
