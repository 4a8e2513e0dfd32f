"""Where a run's stage outputs wait for their gates: Delta tables under `<lake>/_staging/`, or the Spark session.

A run whose steps are processes of their own (Airflow's tasks run by `spark-submit jobs/<step>.py`) must hand
each stage's output to the next step through the lake, so it stages Delta tables: a killed write is never
half-visible, and a retried step finds what the steps before it committed. A run whose steps all run in one
process (`pielake run`, `pielake bench`, and Airflow's tasks on the engine, which outlives them:
`pielake.engine.held`) keeps its stage outputs in the Spark session instead (`SessionStaging`: local
checkpoints, spilled to local disk past memory), which saves a Delta commit and its snapshot jobs on every staged
write and read, about a second each, a third of the fixed cost of a small run. What such a run staged ends with
its process: a run in one process that crashes is over, and the next one recomputes from the published tables;
a step on an engine that was restarted runs the run's earlier steps again (`Run.resume`).

Both are a `Staging`: the stages and gates read and write through it and do not know which one they have.
"""

from __future__ import annotations

import math
from typing import Protocol

import pyspark.sql.functions as F
from pyspark.sql import DataFrame

from pielake.engine.checkpoints import checkpoint_rdd, hold, release
from pielake.errors import PielakeError

ROWS_PER_PARTITION = 250_000


class Staging(Protocol):
    """What the stages need of the place their outputs wait in."""

    def read(self, table: str) -> DataFrame: ...

    def exists(self, table: str) -> bool: ...

    def overwrite(self, df: DataFrame, table: str, *, partition_by: tuple[str, ...] = (),
                  replace_where: str | None = None, rows_per_file: int | None = None,
                  commit_note: str | None = None) -> int: ...

    def commit_note(self, table: str) -> str | None: ...

    def done_with(self, table: str) -> None: ...


class SessionStaging:
    """Staged tables held in the Spark session for one run in one process; `release` frees them.

    `overwrite` has the meaning of `Lake.overwrite` (the whole table, or the rows `replace_where` selects, is
    replaced; returns the rows written; the note is read back by `commit_note`). File layout (`partition_by`,
    `rows_per_file`) does not apply to rows held in memory and is ignored.

    A staged table is a local checkpoint, not a cached DataFrame: reading it back gives a plan of one leaf, as
    reading a Delta table does. A cached DataFrame keeps its whole lineage in every plan built on it, and the
    later stages' plans (pairs over situations over runs over events) then cost more to analyse and optimise
    than the staged Delta commit saved. It is read back in about one partition per `ROWS_PER_PARTITION` rows, as
    a Delta table of small files would be: a stage's output keeps its compute partitions (a dozen for a few rows),
    and every later read would pay a task for each.
    """

    def __init__(self) -> None:
        self._held: dict[str, tuple[DataFrame, str | None]] = {}  # as read, note

    def exists(self, table: str) -> bool:
        return table in self._held

    def read(self, table: str) -> DataFrame:
        if table not in self._held:
            raise PielakeError(f"no staged table '{table}' in this run; the step that writes it has not run")
        return self._held[table][0]

    def overwrite(self, df: DataFrame, table: str, *, partition_by: tuple[str, ...] = (),
                  replace_where: str | None = None, rows_per_file: int | None = None,
                  commit_note: str | None = None) -> int:
        old = self._held.get(table)
        kept = 0
        if replace_where is not None and old is not None:
            others = old[0].filter(~F.expr(replace_where))  # a condition the stages build from analyzer ids
            kept = others.count()
            df = others.unionByName(df)
        held, rows = hold(df)
        blocks = checkpoint_rdd(held)
        replaced = None if old is None else checkpoint_rdd(old[0])
        if replaced is not None and replaced.id() != blocks.id():  # a table written over with itself keeps them
            replaced.unpersist(False)
        wanted = max(1, math.ceil(rows / ROWS_PER_PARTITION))
        self._held[table] = (held.coalesce(wanted) if wanted < blocks.getNumPartitions() else held, commit_note)
        return rows - kept

    def commit_note(self, table: str) -> str | None:
        return self._held[table][1] if table in self._held else None

    def done_with(self, table: str) -> None:
        """The run will not read `table` again (the events, once published): free its rows now."""
        if table in self._held:
            release(self._held.pop(table)[0])

    def release(self) -> None:
        """Free every staged table (the run is over, published or stopped)."""
        for table in list(self._held):
            self.done_with(table)

