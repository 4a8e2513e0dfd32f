"""Run-length encoding of every series of a query, in parallel over time ranges, stitched at range edges.

A *series* is a per-event value whose maximal runs matter: each symbol's predicate (runs of true are the
situations, docs/semantics.md §2) and each constraint's minterm O/I/Z/E (PieStream's alphabet; runs of minterms are what
the PiePair patterns read). One pass over the events computes all of them.

Why not window functions: a window partitioned by key puts a whole key in one task, so a single key with many
events would use one core. Instead each partition of events is sorted on (key, time) and encoded with numpy
(`mapInArrow`), and stitching needs only that, per key, the partitions hold disjoint stretches of time. Events are
either range-partitioned on (key, time), which a shuffle of every event buys, or read *in place*, one task per
file chunk: the events table is written in time ranges, each file sorted on (key, time) (`publish_events`), so
its file chunks are such stretches already. Whether they are is checked, not assumed: each task also reports its
keys' first and last times, and if any two tasks' stretches of one key overlap (late events appended by a
backfill, a table written otherwise) the fragments are dropped and the events range-partitioned after all. A
slice of few events a key (a micro-batch's, or a batch run's over many short keys, whose edge fragments in place
would rival the events in number: `stitched_per_key`) is instead shuffled by key, every key whole in one task: its
runs are final as the kernel emits them, and nothing is stitched (`_whole_keys`).

Read in place, the files are read by the kernel's tasks themselves where they can be (`EventFiles`: plain Parquet
files, and predicates that `pielake.spark.arrow_predicates` computes in Arrow): Spark then hands the kernel no
event row by row, which is most of the JVM's work in this stage.

A run that touches a partition edge is emitted as a *fragment*: a key's first or last run in a partition, of
the first and last key of a range partition, of every key of events read in place (an events file is a range of
time, holding every key's events in it). Fragments are few (at most two per series per key per partition), so
merging them is a small window over a small table:

- a fragment continues the previous fragment of its key if that one ended its partition, this one starts its
  partition, and both have the same value;
- a run's end is the start of the next run of its key (or NULL: the situation is open);
- a run's neighbours' values (`prev`/`next`, what PiePair patterns test) are known inside a partition; across an
  edge they are the values of the adjacent edge fragments.

Of each series only the runs some reader takes as a row are kept, and every fragment at an edge (stitching needs
them): a symbol's true runs (its situations; no PiePair reads a symbol series) and, of a constraint's minterm
series, the runs its PiePair patterns read as their current run: those whose value, and whose neighbours' values,
a pattern accepts (`RunSpec.pair_reads`). The other runs reach detection only as a neighbour's `prev`/`next`, so
writing them would be writing rows nobody reads back (of the chain query: a symbol's false runs, a pair's O and Z
runs, and its I runs that do not follow a Z run).

Each constraint run also names, for each of its two predicates (`Side`), the situation its PiePair patterns
locate, by its start (`since`) and end (`until`): where the predicate holds in the run, the situation holding
there; where it does not, `since` is the start of the one that ended at the run's start and `until` the end of the
one that begins at the run's end (NULL where there is none). Detection then reads both situations of a pair off
the run's row, instead of looking them up in the situations table (two joins of every candidate).
Where such a situation reaches past the partition, the kernel marks the value pending, with the situation's start
in the partition as its value: the stitch fills in the stitched start or end from the edge table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window

from pielake.engine.checkpoints import hold, release
from pielake.engine.session import settings_within
from pielake.spark import columns as C
from pielake.spark.arrow_predicates import ArrowInput
from pielake.spark.sums import EXACT_DOUBLE_SUM, joined, run_expansions, whole_sums

PARTIAL_FUNCTIONS = ("first", "last", "min", "max", "sum", "count")
BOUNDS = -1  # the series of the rows reporting a task's first and last time of each key (events read in place)
MINTERMS = 4  # the values of a pair's series: 2 * left + right
NO_RUN = -1  # the neighbour value of a run that has none: its key's first or last (PiePair patterns' BOUNDARY)
# A scan whose every file chunk is a task of its own: a chunk's open cost fills a task (Spark packs chunks into a
# task while their sizes and open costs fit in the split size, which is at most `maxPartitionBytes`).
ONE_TASK_PER_FILE_CHUNK = {"spark.sql.files.openCostInBytes": "1g", "spark.sql.files.maxPartitionBytes": "1g"}


@dataclass(frozen=True)
class Partial:
    """One partial aggregate over a symbol's runs: `func` of input column `source`, typed `spark_type`."""

    symbol: int
    func: str
    source: str
    spark_type: str

    @property
    def name(self) -> str:
        return f"{self.func}__{self.source}__{self.symbol}"


@dataclass(frozen=True)
class RunSpec:
    """What to encode: `symbols` predicates (bits of `C.flags_word` columns), `pairs` (left, right) symbol
    indexes with `pair_reads`, per pair the (previous, current, next) minterm values of the runs detection reads
    (next None: any; `NO_RUN`: no such neighbour), and partials."""

    keys: tuple[str, ...]
    key_types: tuple[str, ...]
    symbols: int
    pairs: tuple[tuple[int, int], ...]
    pair_reads: tuple[frozenset[tuple[int, int, int | None]], ...]
    partials: tuple[Partial, ...] = ()

    def series_of_pair(self, index: int) -> int:
        return self.symbols + index

    def read(self, series: int, previous: np.ndarray, values: np.ndarray, following: np.ndarray) -> np.ndarray:
        """Which of the series' runs (their values and their neighbours', `NO_RUN` for none) some reader takes as
        a row, and so are emitted inside a time range (see the module docstring)."""
        if series < self.symbols:
            return values == 1
        accepted = np.zeros((MINTERMS + 1, MINTERMS, MINTERMS + 1), dtype=bool)  # NO_RUN at index 0
        for prev, value, nxt in self.pair_reads[series - self.symbols]:
            accepted[prev + 1, value, slice(None) if nxt is None else nxt + 1] = True
        return accepted[previous + 1, values, following + 1]

    def output_schema(self) -> list[tuple[str, str]]:
        """The kernel's output columns in order: Spark matches Arrow batches to it by position."""
        return [(C.SERIES, "INT"), (C.VALUE, "INT"), *zip(self.keys, self.key_types, strict=True),
                (C.START, "BIGINT"), (C.END, "BIGINT"), (C.PREV, "INT"), (C.NEXT, "INT"),
                (C.FIRST_IN_PART, "BOOLEAN"), (C.LAST_IN_PART, "BOOLEAN"),
                *((c, "BIGINT") for side in SIDES for c in (side.since, side.until)),
                (C.PENDING, "INT"), *((p.name, p.spark_type) for p in self.partials)]

    def output_ddl(self) -> str:
        return ", ".join(f"`{name}` {kind}" for name, kind in self.output_schema())


def _key_starts(table: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    n = table.num_rows
    starts = np.zeros(n, dtype=bool)
    starts[0] = True
    for key in keys:
        values = table.column(key).to_numpy(zero_copy_only=False)
        starts[1:] |= values[1:] != values[:-1]
    return starts


def _begins_run(values: np.ndarray, key_starts: np.ndarray) -> np.ndarray:
    """True where an event starts a run: its key starts there, or its value differs from the event before."""
    change = key_starts.copy()
    change[1:] |= values[1:] != values[:-1]
    return change


def _run_starts(values: np.ndarray, key_starts: np.ndarray) -> np.ndarray:
    return np.flatnonzero(_begins_run(values, key_starts))


@dataclass(frozen=True)
class Side:
    """One predicate of a constraint's pair: its place in the pair and the run columns that name its situation."""

    index: int  # 0: left, 1: right
    since: str
    since_pending: str
    until: str
    until_pending: str

    @property
    def bit(self) -> int:
        """Its bit in a minterm value (2 * left + right)."""
        return 2 if self.index == 0 else 1


SIDES = (Side(0, C.LEFT_SINCE, C.LEFT_PENDING, C.LEFT_UNTIL, C.LEFT_UNTIL_PENDING),
         Side(1, C.RIGHT_SINCE, C.RIGHT_PENDING, C.RIGHT_UNTIL, C.RIGHT_UNTIL_PENDING))
PENDING_COLUMNS = tuple(c for side in SIDES for c in (side.since_pending, side.until_pending))
# The kernel packs the four pending flags into the bits of one column (`C.PENDING`): its output is held whole
# until the stitch, where only the few rows at an edge or with a pending value are unpacked (`_unpacked`).
PENDING_BITS = {column: 1 << bit for bit, column in enumerate(PENDING_COLUMNS)}


# Where a partition's keys may go on in other partitions (`_Partition`), by how the events were partitioned.
EVERY_KEY = "every key"  # read in place: an events file is a range of time holding every key's events in it
OUTER_KEYS = "outer keys"  # a range partition on (key, time): whole keys between its first and its last
NO_KEY = "no key"  # partitioned by key: every key whole in one partition


class _Partition:
    """One sorted partition's arrays, shared by the encoding of every series.

    `spans` says which keys may go on in other partitions (`EVERY_KEY`, `OUTER_KEYS`, `NO_KEY`). Their first and
    last runs here are edge fragments, for the stitch to join with the key's other partitions; of a partition
    that holds whole keys there are none, and its runs are final as the kernel emits them.
    """

    def __init__(self, table: pa.Table, spec: RunSpec, *, spans: str):
        self.table = table
        self.spec = spec
        self.n = table.num_rows
        self.t = table.column(C.T).to_numpy()
        self.key_starts = _key_starts(table, spec.keys)
        self.opens = np.zeros(self.n, dtype=bool)  # events whose key may have events before them elsewhere
        self.opens[0] = spans != NO_KEY
        if spans == EVERY_KEY:
            self.opens |= self.key_starts
        # events whose key may have events after them elsewhere
        self.closes = np.append(self.opens[1:], spans != NO_KEY)
        words = {name: table.column(name).to_numpy() for name in dict.fromkeys(map(C.flags_word, range(spec.symbols)))}
        self.flags = [((words[C.flags_word(i)] >> (i % C.FLAGS_PER_WORD)) & 1).astype(bool)
                      for i in range(spec.symbols)]
        self.symbol_runs = [_run_starts(flags, self.key_starts) for flags in self.flags]  # every run, true or not

    def _since(self, symbol: int, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start time of the symbol's run holding event `at`, and whether it is pending (it begins its key's
        stretch in the partition, so it may have begun in an earlier one)."""
        runs = self.symbol_runs[symbol]
        first = runs[np.searchsorted(runs, at, side="right") - 1]
        return self.t[first], self.opens[first]

    def _until(self, symbol: int, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """End time of the symbol's run holding event `at` (the time of the next event of its key), whether it has
        one (not: it is open at its key's last event), and whether it is pending (it reaches the end of its key's
        stretch in the partition, so it may go on in a later one). A pending value is the run's start here, what
        the stitch finds it by."""
        runs = self.symbol_runs[symbol]
        index = np.searchsorted(runs, at, side="right")
        following = np.append(runs, self.n)[index]  # the next run's first event; n: the partition ends first
        pending = self.closes[following - 1]
        inside = following < self.n
        following = np.minimum(following, self.n - 1)
        ends = pending | (inside & ~self.key_starts[following])
        return np.where(pending, self.t[runs[index - 1]], self.t[following]), ends, pending

    def _situation_columns(self, series: int, starts: np.ndarray, after: np.ndarray, has_prev: np.ndarray,
                           has_next: np.ndarray) -> dict[str, pa.Array]:
        """Each constraint run's `Side` columns (module docstring); NULL for a symbol's series. `after`: the event
        after each run (clipped to the partition; `has_next` says whether it is the run's key's)."""
        pair = series - self.spec.symbols
        if pair < 0:
            return {C.PENDING: pa.array(np.zeros(len(starts), dtype=np.int32)),
                    **{c: pa.nulls(len(starts), pa.int64()) for side in SIDES for c in (side.since, side.until)}}
        out = {}
        pending = np.zeros(len(starts), dtype=np.int32)
        before = np.maximum(starts - 1, 0)
        for side in SIDES:
            symbol = self.spec.pairs[pair][side.index]
            flags = self.flags[symbol]
            holds = flags[starts]
            since, since_pending = self._since(symbol, np.where(holds, starts, before))
            has_since = holds | (has_prev & flags[before])
            until, has_until, until_pending = self._until(symbol, np.where(holds, starts, after))
            has_until &= holds | (has_next & flags[after])
            out[side.since] = pa.array(since, mask=~has_since)
            out[side.until] = pa.array(until, mask=~has_until)
            pending |= np.where(since_pending & has_since, PENDING_BITS[side.since_pending], 0).astype(np.int32)
            pending |= np.where(until_pending & has_until, PENDING_BITS[side.until_pending], 0).astype(np.int32)
        out[C.PENDING] = pa.array(pending)
        return out

    def bounds(self) -> pa.RecordBatch:
        """One row per key: its first time here (`START`) and its last (`END`), under the series `BOUNDS`."""
        firsts = np.flatnonzero(self.key_starts)
        lasts = np.append(firsts[1:], self.n) - 1
        out = {C.SERIES: pa.array(np.full(len(firsts), BOUNDS, dtype=np.int32)),
               C.START: pa.array(self.t[firsts]), C.END: pa.array(self.t[lasts]),
               **{key: self.table.column(key).take(pa.array(firsts)).combine_chunks() for key in self.spec.keys}}
        schema = self.spec.output_schema()
        return pa.RecordBatch.from_arrays(
            [out[name] if name in out else pa.nulls(len(firsts), C.arrow_type(kind)) for name, kind in schema],
            names=[name for name, _ in schema])

    def encode(self, series: int, values: np.ndarray, starts: np.ndarray | None = None) -> pa.RecordBatch:
        """The runs of one series that have a reader (`RunSpec.read`) and the fragments at the edges;
        `starts`: the runs' first events, where they are known already. Columns are made for those runs only.
        Reading a run's neighbours too halves the chain query's constraint runs against reading its value alone."""
        starts = _run_starts(values, self.key_starts) if starts is None else starts
        ends = np.append(starts[1:], self.n) - 1
        run_values = values[starts].astype(np.int32)
        after = np.minimum(ends + 1, self.n - 1)
        has_next = (ends + 1 < self.n) & ~self.key_starts[after]
        has_prev = ~self.key_starts[starts]  # a key's first run here has none in this partition: stitching finds it
        previous = np.where(has_prev, np.roll(run_values, 1), np.int32(NO_RUN))
        following = np.where(has_next, np.roll(run_values, -1), np.int32(NO_RUN))
        first_in_part, last_in_part = self.opens[starts], self.closes[ends]
        kept = np.flatnonzero(self.spec.read(series, previous, run_values, following) | first_in_part | last_in_part)
        partials = self._partials(series, values, starts, ends, first_in_part | last_in_part)
        starts, ends, run_values, after = starts[kept], ends[kept], run_values[kept], after[kept]
        previous, following, has_prev, has_next = previous[kept], following[kept], has_prev[kept], has_next[kept]
        out: dict[str, pa.Array] = {
            C.SERIES: pa.array(np.full(len(starts), series, dtype=np.int32)),
            C.VALUE: pa.array(run_values),
            C.PREV: pa.array(previous, mask=~has_prev),
            C.NEXT: pa.array(following, mask=~has_next),
        }
        for key in self.spec.keys:
            out[key] = self.table.column(key).take(pa.array(starts)).combine_chunks()
        out[C.START] = pa.array(self.t[starts])
        out[C.END] = pa.array(self.t[after], mask=~has_next)
        out[C.FIRST_IN_PART] = pa.array(first_in_part[kept])
        out[C.LAST_IN_PART] = pa.array(last_in_part[kept])
        out.update(self._situation_columns(series, starts, after, has_prev, has_next))
        out.update({name: column.take(pa.array(kept)) for name, column in partials.items()})
        names = [name for name, _ in self.spec.output_schema()]
        return pa.RecordBatch.from_arrays([out[name] for name in names], names=names)

    def _partials(self, series: int, values: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                  edges: np.ndarray) -> dict[str, pa.Array]:
        out: dict[str, pa.Array] = {}
        wanted = [p for p in self.spec.partials if p.symbol == series]
        if not wanted:
            for p in self.spec.partials:
                out[p.name] = pa.nulls(len(starts), C.arrow_type(p.spark_type))
            return out
        true_runs = values[starts].astype(bool)
        labels = np.repeat(np.arange(len(starts)), ends - starts + 1)
        attributes: dict[str, pd.Series] = {}  # each attribute for pandas, converted once for all its partials
        for p in self.spec.partials:
            kind = C.arrow_type(p.spark_type)
            if p.symbol != series:
                out[p.name] = pa.nulls(len(starts), kind)
                continue
            column = self.table.column(p.source)
            if p.func in ("first", "last"):
                picked = column.take(pa.array(starts if p.func == "first" else ends)).combine_chunks()
            elif p.spark_type == EXACT_DOUBLE_SUM:
                picked = run_expansions(column, starts, true_runs, edges)
            else:
                if p.source not in attributes:
                    attributes[p.source] = _series(column)
                attribute = attributes[p.source]
                grouped = whole_sums(attribute, labels) if p.func == "sum" else \
                    getattr(attribute.groupby(labels), p.func)()
                picked = pa.array(grouped.reindex(np.arange(len(starts))), from_pandas=True)
            out[p.name] = pc.if_else(pa.array(true_runs), picked.cast(kind), pa.scalar(None, kind))
        return out


def _series(column: pa.ChunkedArray) -> pd.Series:
    """A column for pandas, its NULLs kept apart from its values: whole numbers as 64-bit integers with NULLs (as
    doubles, which pandas would make of them, those beyond 2^53 would round); text, booleans and dates as Arrow
    holds them (as Python objects, NULLs among them fail pandas' `min` and `max`)."""
    kind = column.type
    if pa.types.is_integer(kind):
        return column.cast(pa.int64()).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_boolean(kind) \
            or pa.types.is_date(kind):
        return column.to_pandas(types_mapper=pd.ArrowDtype)
    return pd.Series(column.to_pandas())


def _kernel(spec: RunSpec, *, spans: str):  # type: ignore[no-untyped-def]
    """The kernel over one partition; events read in place (`EVERY_KEY`) are sorted here, the others arrive so."""
    in_place = spans == EVERY_KEY

    def encode_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        part = _Partition(_in_order(table, (*spec.keys, C.T)) if in_place else table, spec, spans=spans)
        if in_place:
            yield part.bounds()
        for symbol in range(spec.symbols):
            yield part.encode(symbol, part.flags[symbol].astype(np.int8), part.symbol_runs[symbol])
        for index, (left, right) in enumerate(spec.pairs):
            minterm = part.flags[left].astype(np.int8) * 2 + part.flags[right].astype(np.int8)
            yield part.encode(spec.series_of_pair(index), minterm)

    return encode_partition


def _file_kernel(spec: RunSpec, files: EventFiles):  # type: ignore[no-untyped-def]
    """The in-place kernel over whole events files that each task reads itself: task i reads `files.paths[i]`."""
    encode = _kernel(spec, spans=EVERY_KEY)

    def encode_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from encode(iter(files.reading.read(files.paths[index]).to_batches()))

    return encode_files


def _in_order(table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    """`table` sorted on `columns`; a file chunk written in that order (the usual case) is only checked."""
    if _is_sorted(table, columns):
        return table
    return table.take(pc.sort_indices(table, sort_keys=[(name, "ascending") for name in columns]))


def _is_sorted(table: pa.Table, columns: tuple[str, ...]) -> bool:
    n = table.num_rows
    tied = np.ones(max(n - 1, 0), dtype=bool)  # rows whose order against the row before is not decided yet
    for name in columns:
        column = table.column(name)
        before, after = column.slice(0, n - 1), column.slice(1)
        if np.any(tied & pc.fill_null(pc.less(after, before), True).to_numpy(zero_copy_only=False)):
            return False
        tied &= pc.fill_null(pc.equal(after, before), False).to_numpy(zero_copy_only=False)
    return True


@dataclass(frozen=True)
class EventFiles:
    """The events' Parquet files, for tasks that read them themselves (pyarrow, one task a file), and how the
    kernel's input is made of their columns: Spark's row-by-row hand-over of every event to the kernel's worker
    is then skipped (`pielake.spark.arrow_predicates`)."""

    paths: tuple[str, ...]
    reading: ArrowInput


class Reading(Enum):
    """How the runs kernel reads a run's events. Asked for: in place (tried first), by time range, or by key.
    Done: one of those, in place read by the kernel's tasks themselves (`BY_PYARROW`) where they were given the
    files, or by time range where the file chunks in place overlap."""

    IN_PLACE = "in place"
    BY_PYARROW = "in place, by pyarrow"
    RANGES = "range-partitioned"
    BY_KEY = "partitioned by key"

    @property
    def in_place(self) -> bool:
        return self in (Reading.IN_PLACE, Reading.BY_PYARROW)


@dataclass(frozen=True)
class EncodedRuns:
    """Stitched runs, and how the events were read."""

    runs: DataFrame
    reading: Reading
    key_bounds: DataFrame | None = None  # read in place: each task's first and last time of each key (START, END)


def stitched_per_key(spec: RunSpec) -> int:
    """The kernel's rows that an in-place read stitches for each key an events file holds: the key's first and last
    run there of every series, and its bounds."""
    return 2 * (spec.symbols + len(spec.pairs)) + 1


def encode_runs(events: DataFrame, spec: RunSpec, partitions: int, *, reading: Reading = Reading.RANGES,
                files: EventFiles | None = None) -> EncodedRuns:
    """Stitched runs of every series: one row per maximal run per key (see the module docstring).

    `reading` (`Reading`): in place tries the events as their file chunks lie first, from `files` if given (the
    files that `events` reads), and shuffles them into `partitions` time ranges where the chunks overlap; by time
    range or by key (`_whole_keys`) shuffles them into `partitions` so.
    """
    if reading is Reading.BY_KEY:
        return EncodedRuns(_whole_keys(events, spec, partitions), Reading.BY_KEY)
    if reading.in_place:
        fragments = _fragments_in_place(events, spec, files)
        aside = _set_aside(fragments)
        bounds = aside.filter(F.col(C.SERIES) == BOUNDS).select(*spec.keys, C.START, C.END)
        if _stretches_disjoint(bounds, spec):
            return EncodedRuns(stitch(fragments, aside, spec),
                               Reading.IN_PLACE if files is None else Reading.BY_PYARROW, key_bounds=bounds)
        release(fragments)
        release(aside)
    ordered = [*spec.keys, C.T]
    sorted_events = events.repartitionByRange(partitions, *ordered).sortWithinPartitions(*ordered)
    fragments = sorted_events.mapInArrow(_kernel(spec, spans=OUTER_KEYS), spec.output_ddl()).localCheckpoint()
    return EncodedRuns(stitch(fragments, _set_aside(fragments), spec), Reading.RANGES)


def _whole_keys(events: DataFrame, spec: RunSpec, partitions: int) -> DataFrame:
    """The runs of events shuffled by key, each key whole in one partition: the kernel emits no fragment and no
    pending value, so its output is the runs as they are, with no stitch, no sampling job for range bounds and no
    held fragments. A key's events then take one task, which suits a small slice of many keys (a micro-batch's)
    and not a long history of few (range partitions split a key over every core). One global key (no key
    columns) is one partition."""
    ordered = [*spec.keys, C.T]
    grouped = events.repartition(partitions, *spec.keys) if spec.keys else events.repartition(1)
    runs = grouped.sortWithinPartitions(*ordered).mapInArrow(_kernel(spec, spans=NO_KEY), spec.output_ddl())
    return runs.select(*_run_columns(spec))


def _run_columns(spec: RunSpec) -> list[str]:
    """The columns of stitched runs: the kernel's, less what only the stitch reads (edges, pending flags)."""
    return [C.SERIES, C.VALUE, *spec.keys, C.START, C.END, C.PREV, C.NEXT,
            *(c for side in SIDES for c in (side.since, side.until)), *(p.name for p in spec.partials)]


def _at_edge() -> Column:
    return F.col(C.FIRST_IN_PART) | F.col(C.LAST_IN_PART)


def _pending() -> Column:
    return F.col(C.PENDING) != 0


def _unpacked(rows: DataFrame) -> DataFrame:
    """`rows` of the kernel's output with its pending flags as one boolean column each (`PENDING_BITS`)."""
    return rows.withColumns({c: F.col(C.PENDING).bitwiseAND(bit) != 0 for c, bit in PENDING_BITS.items()})


def _set_aside(fragments: DataFrame) -> DataFrame:
    """The few rows of the held kernel output that the stitch reads more than once, held apart in one pass: the
    `BOUNDS` rows, the fragments at an edge and the runs with a pending value. Read from the whole output, the
    check of the bounds, the merge and the two lookups of `_resolve_pending` would scan every run four times."""
    return hold(fragments.filter((F.col(C.SERIES) == BOUNDS) | _at_edge() | _pending()))[0]


def _fragments_in_place(events: DataFrame, spec: RunSpec, files: EventFiles | None) -> DataFrame:
    """The kernel's output over each file chunk as it lies, with every task's `BOUNDS` rows, held."""
    spark = events.sparkSession
    if files is not None:
        tasks = spark.range(len(files.paths), numPartitions=len(files.paths))  # one file index per task
        return tasks.mapInArrow(_file_kernel(spec, files), spec.output_ddl()).localCheckpoint()
    with settings_within(spark, ONE_TASK_PER_FILE_CHUNK):
        return events.mapInArrow(_kernel(spec, spans=EVERY_KEY), spec.output_ddl()).localCheckpoint()


def _stretches_disjoint(bounds: DataFrame, spec: RunSpec) -> bool:
    """Whether no two tasks' stretches of time of one key overlap (`bounds`: a task's first and last times)."""
    earlier = Window.partitionBy(*spec.keys).orderBy(C.START).rowsBetween(Window.unboundedPreceding, -1)
    overlapping = bounds.withColumn("_earlier_end", F.max(C.END).over(earlier)).filter(
        F.col("_earlier_end") >= F.col(C.START))
    return overlapping.limit(1).count() == 0


def stitch(fragments: DataFrame, aside: DataFrame, spec: RunSpec) -> DataFrame:
    """Merge fragments that continue across partition edges; fill the ends and the pending situation values.

    Only the edge fragments and the runs with a pending value (`aside`: `_set_aside` of `fragments`) go through
    the merge and the lookup joins; every other run, nearly all of them, is passed through as it is, where joining
    every run to the lookup would cost a join of millions of rows for a few dozen pending values.
    """
    runs, at_edge, pending = F.col(C.SERIES) != BOUNDS, _at_edge(), _pending()
    by_series = Window.partitionBy(C.SERIES, *spec.keys).orderBy(C.START)
    aside = _unpacked(aside)
    edge = _across_edges(aside.filter(runs & at_edge), by_series, spec)
    settled = fragments.filter(runs & ~at_edge & ~pending)
    previous_value = F.lag(C.VALUE).over(by_series)
    continues = F.col(C.FIRST_IN_PART) & F.lag(C.LAST_IN_PART).over(by_series) & (previous_value == F.col(C.VALUE))
    chained = edge.withColumn("_chain", F.sum(F.when(continues, 0).otherwise(1)).over(
        by_series.rowsBetween(Window.unboundedPreceding, 0)))
    merged = chained.groupBy(C.SERIES, *spec.keys, "_chain").agg(
        F.min(C.START).alias(C.START), F.first(C.VALUE).alias(C.VALUE),
        _of_last(C.END), F.max_by(C.LAST_IN_PART, C.START).alias("_open_edge"), _of_first(C.PREV), _of_last(C.NEXT),
        *(_of_first(c) for side in SIDES for c in (side.since, side.since_pending)),
        *(_of_last(c) for side in SIDES for c in (side.until, side.until_pending)),
        F.collect_list(F.struct(C.START, C.VALUE)).alias("_parts"),
        *(_merge_partial(p) for p in spec.partials),
    )
    next_start = F.lead(C.START).over(Window.partitionBy(C.SERIES, *spec.keys).orderBy(C.START))
    merged = merged.withColumn(C.END, F.when(F.col("_open_edge"), next_start).otherwise(F.col(C.END)))
    chain_starts = merged.select(C.SERIES, *spec.keys, F.explode("_parts").alias("_p"),
                                 F.col(C.START).alias("_chain_start"), F.col(C.END).alias("_chain_end")).select(
        C.SERIES, *spec.keys, F.col("_p." + C.START).alias("_frag_start"), "_chain_start", "_chain_end")
    columns = _run_columns(spec)
    to_resolve = (aside.filter(runs & ~at_edge & pending).select(*columns, *PENDING_COLUMNS)
                  .unionByName(merged.select(*columns, *PENDING_COLUMNS)))
    return settled.select(*columns).unionByName(_resolve_pending(to_resolve, chain_starts, spec))


def _of_first(column: str) -> Column:
    """A merged run's `column`: its first fragment's (what precedes the run)."""
    return F.min_by(column, C.START).alias(column)


def _of_last(column: str) -> Column:
    """A merged run's `column`: its last fragment's (what follows the run)."""
    return F.max_by(column, C.START).alias(column)


def _holds(value: Column, side: Side) -> Column:
    """Whether `side`'s predicate holds in a run of minterm `value`."""
    return value.bitwiseAND(side.bit) != 0


def _across_edges(edge: DataFrame, by_series: Window, spec: RunSpec) -> DataFrame:
    """The edge fragments with what their neighbours across an edge tell: a neighbour's value is the adjacent
    edge fragment's (none: the key begins or ends there), and so is a situation that ends at a partition's first
    run or begins after its last one, where that run's predicate does not hold (`Side`)."""
    pair_run = F.col(C.SERIES) >= spec.symbols
    values = {C.PREV: F.when(F.col(C.FIRST_IN_PART), F.lag(C.VALUE).over(by_series)).otherwise(F.col(C.PREV)),
              C.NEXT: F.when(F.col(C.LAST_IN_PART), F.lead(C.VALUE).over(by_series)).otherwise(F.col(C.NEXT))}
    for side in SIDES:
        before = pair_run & F.col(C.FIRST_IN_PART) & ~_holds(F.col(C.VALUE), side)
        after = pair_run & F.col(C.LAST_IN_PART) & ~_holds(F.col(C.VALUE), side)
        for column, edge_run, neighbour in ((side.since, before, F.lag), (side.since_pending, before, F.lag),
                                            (side.until, after, F.lead), (side.until_pending, after, F.lead)):
            across = F.when(_holds(neighbour(C.VALUE).over(by_series), side), neighbour(column).over(by_series))
            values[column] = F.when(edge_run, across).otherwise(F.col(column))
    return edge.withColumns(values)


def _merge_partial(p: Partial):  # type: ignore[no-untyped-def]
    """A stitched run's partial from its fragments'; a sum of doubles is the expansion of their expansions' terms
    (pielake/spark/sums.py)."""
    col = F.col(p.name)
    total = joined(F.flatten(F.collect_list(col))) if p.spark_type == EXACT_DOUBLE_SUM else F.sum(col)
    rule = {"first": F.min_by(col, C.START), "last": F.max_by(col, C.START), "min": F.min(col), "max": F.max(col),
            "sum": total, "count": F.sum(col)}[p.func]
    return rule.cast(p.spark_type).alias(p.name)


def _resolve_pending(runs: DataFrame, chain_starts: DataFrame, spec: RunSpec) -> DataFrame:
    """Replace pending situation values by the start or end of the stitched situation they belong to.

    One pass over the runs: a pending value is the start of the fragment its situation has in the run's
    partition, so a left join with the (small, broadcast) fragment-to-chain table on that start fixes it, one join
    per side and end; the other rows find no partner and keep their value.
    """
    if not spec.pairs:
        return runs.drop(*PENDING_COLUMNS)
    out = runs
    for side in SIDES:
        symbol_of_series = F.element_at(F.array(*(F.lit(pair[side.index]) for pair in spec.pairs)),
                                        F.col(C.SERIES) - spec.symbols + 1)
        for column, pending, chained in ((side.since, side.since_pending, "_chain_start"),
                                         (side.until, side.until_pending, "_chain_end")):
            lookup = chain_starts.select(F.col(C.SERIES).alias("_sym"), *spec.keys, "_frag_start",
                                         F.col(chained).alias("_fixed"))
            is_pending = F.coalesce(F.col(pending), F.lit(False))  # NULL: no situation across the edge
            out = (out.withColumn("_sym", F.when(is_pending, symbol_of_series))
                   .withColumn("_frag_start", F.when(is_pending, F.col(column)))
                   .join(F.broadcast(lookup), [*spec.keys, "_sym", "_frag_start"], "left")
                   .withColumn(column, F.when(is_pending, F.col("_fixed")).otherwise(F.col(column)))
                   .drop("_sym", "_frag_start", "_fixed"))
    return out.drop(*PENDING_COLUMNS)
