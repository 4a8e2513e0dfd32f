"""One Delta table per query holds every row its runs publish: `results_<query>`.

A run publishes four kinds of rows: situations, pairs, matches, and the progress the next micro-batch starts from.
They live in one table, partitioned by `kind`, so that a run publishes them in one commit. A Delta commit costs a
nearly fixed amount, whatever it writes: reading the table's log and rebuilding its snapshot, and for a MERGE about
twenty small Spark jobs. A micro-batch changes a few hundred rows, so one commit instead of four is most of what
its publish costs (docs/performance.md). One commit is also one atomic step: a reader never sees a run's matches
without its pairs, or its rows without the progress that says they are there.

The layout, in this column order:

    kind | the query's key columns | anchor | run_id | matches | situations | pairs | progress

- each kind's own columns sit in a struct named after the kind, so the names and types of one kind never meet
  another's (a RETURN column may be called `ts`, which situations have as a time);
- `anchor` is the row's earliest start, in kernel time (`pielake.pipeline.scope`), NULL for progress: the one
  column a micro-batch's MERGE bounds the files it reads by, and the one maintenance orders the files by;
- `run_id` is the run that wrote the row.

Readers see each kind as a table of its own, `<kind>_<query>`: its rows, as the key columns, the fields of its
struct, and for matches the run id (`unpack`). `Lake.read` resolves those names, `pielake sql` shows them as
views, and the engine's catalog as views over the registered `results_<query>`.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake import vocabulary as V

KIND, ANCHOR = V.KIND, V.ANCHOR
KINDS = (V.MATCHES, V.SITUATIONS, V.PAIRS, V.PROGRESS)  # the order of their structs: matches' columns first get
# Delta's file statistics (it keeps them for a table's first 32 columns), as users filter matches most
LAYOUT = (KIND, ANCHOR, V.RUN_ID, *KINDS)  # every column but the keys


def results_table(query: str) -> str:
    return V.table_name(V.RESULTS, query)


def kind_table(name: str) -> tuple[str, str] | None:
    """For the name of a kind's rows (`matches_<query>`), the results table that holds them and the kind."""
    kind, _, query = name.partition("_")
    return (results_table(query), kind) if kind in KINDS and query else None


def kind_names(table: str) -> list[str]:
    """The names a results table's kinds are read by; none for another table."""
    found = table.partition("_")
    return [V.table_name(kind, found[2]) for kind in KINDS] if found[0] == V.RESULTS and found[2] else []


def key_columns(columns: list[str]) -> list[str]:
    """A results table's key columns: every column outside its layout."""
    return [c for c in columns if c not in LAYOUT]


def pack(rows: DataFrame, kind: str, *, keys: tuple[str, ...], anchor: Column | None, run_id: str) -> DataFrame:
    """Rows of one kind (`keys`, then the kind's columns, maybe a run id) in the results table's layout."""
    own = [c for c in rows.columns if c not in keys and c != V.RUN_ID]
    run = F.col(V.RUN_ID) if V.RUN_ID in rows.columns else F.lit(run_id)
    return rows.select(F.lit(kind).alias(KIND), *keys,
                       (F.lit(None) if anchor is None else anchor).cast("bigint").alias(ANCHOR),
                       run.alias(V.RUN_ID), F.struct(*own).alias(kind))


def combine(parts: list[DataFrame], keys: tuple[str, ...]) -> DataFrame:
    """Packed rows of several kinds as one DataFrame in the layout's order: each row's other kinds' structs NULL
    (a kind none of `parts` holds has no column)."""
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    return union.select(KIND, *keys, ANCHOR, V.RUN_ID, *(kind for kind in KINDS if kind in union.columns))


def unpack(results: DataFrame, kind: str) -> DataFrame:
    """A kind's rows of a results table, as a table of their own."""
    run = [V.RUN_ID] if kind == V.MATCHES else []
    return results.filter(F.col(KIND) == kind).select(*key_columns(results.columns), f"{kind}.*", *run)


def row_key(keys: tuple[str, ...], own_keys: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The columns that name a row of the results table: its kind, its key and each kind's natural key fields
    (`own_keys`, those outside the key). Compared NULL-safe, a row's fields of the other kinds (NULL on both
    sides) agree, and one list serves every kind."""
    fields = [f"{kind}.{c}" for kind in KINDS for c in own_keys.get(kind, ())]
    return (KIND, *keys, *fields)
