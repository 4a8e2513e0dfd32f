"""Synthetic streams: TPStream's synthetic law for the benchmarks, and a sample stream for any query.

TPStream's law (the TPStream paper's experiments, PieStream's Figure 4): boolean columns with random true runs.
Per key, events arrive one per time unit (ts = 0, 1, 2, ...). Each column a_i starts with a gap, then alternates
true runs of U[10, 100] events and gaps of U[10, 50] events (bounds inclusive). Everything is vectorised with
numpy and seeded per key and column, so the same arguments always give the same events, whatever the chunking.
Consecutive keys share a file: a stream of many short keys is a few files, not a file per key, which a run would
open one by one; the files are written in parallel, one process per core.

A sample stream for a query (`query_events`) has the columns of the query's stream (its schema in `schemas/`,
or the columns the query reads, typed by how it reads them), so a query can be tried before there is data for it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from pielake.errors import PielakeError
from pielake.query import ast
from pielake.query.analyzer import QueryPlan, bind, children, walk
from pielake.query.like import like_example
from pielake.query.time_fields import TIME_FIELDS
from pielake.semantics.relations import ENDPOINTS
from pielake.spark import columns as C
from pielake.streams import INTEGER_TYPES, TIMESTAMP_UNIT, UNIX_TIME, StreamSchema, zone_info

RUN = (10, 100)
GAP = (10, 50)
ROWS_PER_FILE = 2_000_000


def column(length: int, rng: np.random.Generator) -> np.ndarray:
    """One boolean column of `length` events: gap, run, gap, run, ..."""
    pairs = length // (RUN[0] + GAP[0]) + 2
    gaps = rng.integers(GAP[0], GAP[1] + 1, size=pairs)
    runs = rng.integers(RUN[0], RUN[1] + 1, size=pairs)
    lengths = np.column_stack([gaps, runs]).ravel()
    values = np.tile([False, True], pairs)
    return np.repeat(values, lengths)[:length]


def keys_table(keys: Sequence[tuple[int, int]], columns: int, seed: int) -> pa.Table:
    """The events of `keys`, each a (key, events), one key after another: every column drawn per key as numpy
    arrays and joined once, so many short keys cost no Arrow table each."""
    data = {"id": np.concatenate([np.full(events, key, dtype=np.int64) for key, events in keys]),
            "ts": np.concatenate([np.arange(events, dtype=np.int64) for _, events in keys])}
    for c in range(1, columns + 1):
        data[f"a_{c}"] = np.concatenate([column(events, np.random.default_rng([seed, key, c])) for key, events in keys])
    return pa.table(data)


def write_landings(paths: Sequence[Path], *, keys: int, history: int, per_slice: int, columns: int,
                   seed: int) -> None:
    """Events of `keys` keys as CSV files in time order, as they land: `paths[0]` holds each key's first `history`
    events, each later path the next `per_slice` of each key. A batch run of the first and micro-batches of the
    rest see a stream that goes on in time (the freshness bench, the engine's warm-up)."""
    events = keys_table([(k, history + (len(paths) - 1) * per_slice) for k in range(keys)], columns, seed)
    bounds = [0, *(history + per_slice * n for n in range(len(paths)))]
    for path, (low, high) in zip(paths, pairwise(bounds), strict=True):
        pacsv.write_csv(events.filter(pc.and_(pc.greater_equal(events["ts"], low), pc.less(events["ts"], high))), path)


def generate(out: Path, events: int, *, columns: int = 4, keys: int = 1, seed: int = 42,
             layout: str = "parquet") -> list[Path]:
    """Write `events` events over `keys` keys into `out`; returns the files written, in key order.

    layout: "parquet" (id, ts, a_1..a_n) or "csv" (header), or "tpstream-csv": the headerless `id,a_1..a_n,t1,t2`
    layout of the PieStream/TPStream engines, where [t1, t2) = [ts, ts + 1).
    """
    out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    groups = _key_groups(_per_key(events, keys), min(ROWS_PER_FILE, -(-events // cores)))
    tasks = [(out, group, columns, seed, layout) for group in groups]
    if len(tasks) == 1:
        return _write_keys(tasks[0])
    with ProcessPoolExecutor(max_workers=min(len(tasks), cores)) as pool:
        return [path for paths in pool.map(_write_keys, tasks) for path in paths]


def _per_key(events: int, keys: int) -> list[int]:
    """`events` dealt over `keys` keys as evenly as they go."""
    return [events // keys + (1 if k < events % keys else 0) for k in range(keys)]


def _key_groups(counts: Sequence[int], most: int) -> list[list[tuple[int, int]]]:
    """The keys, as (key, events) with `counts[key]` events, in groups of consecutive keys that hold at most `most`
    events together; a key with more is a group of its own. A group is one process's work, and each key is in one
    group, so it is drawn once; `generate` gives `most` as a core's share, so there is a group a core where the
    keys allow it."""
    groups: list[list[tuple[int, int]]] = []
    held = 0
    for key, count in enumerate(counts):
        if not groups or held + count > most:
            groups.append([])
            held = 0
        groups[-1].append((key, count))
        held += count
    return groups


def _write_keys(task: tuple[Path, list[tuple[int, int]], int, int, str]) -> list[Path]:
    """A group's keys, whole and in order, in files of at most `ROWS_PER_FILE` events."""
    out, group, columns, seed, layout = task
    table = keys_table(group, columns, seed)
    stem = f"keys{group[0][0]:05d}-{group[-1][0]:05d}"
    return [_write(table.slice(start, ROWS_PER_FILE), out / f"{stem}-part{part:04d}", layout, columns)
            for part, start in enumerate(range(0, len(table), ROWS_PER_FILE))]


def _write(table: pa.Table, stem: Path, layout: str, columns: int) -> Path:
    if layout == "parquet":
        path = stem.with_suffix(".parquet")
        pq.write_table(table, path)
    elif layout == "csv":
        path = stem.with_suffix(".csv")
        pacsv.write_csv(table, path)
    elif layout == "tpstream-csv":
        path = stem.with_suffix(".csv")
        ts = table.column("ts")
        flags = [table.column(f"a_{c}").cast(pa.int8()) for c in range(1, columns + 1)]
        plain = pa.table({"id": table.column("id"), **{f"a_{c}": f for c, f in enumerate(flags, 1)},
                          "t1": ts, "t2": pa.compute.add(ts, 1)})
        pacsv.write_csv(plain, path, pacsv.WriteOptions(include_header=False))
    else:
        raise ValueError(f"unknown layout {layout}")
    return path


# ---------------------------------------------------------------- a sample stream for any query

STRING_FUNCTIONS = frozenset({"lower", "upper"})
COMPARISONS = frozenset({"=", "!=", "<", "<=", ">", ">="})
NULL_SHARE = 0.02  # attribute values left out, so that NULL handling is exercised too
KEEP_VALUE = 0.8  # chance an attribute keeps its value from one event to the next: runs form, situations last
EVENTS_PER_WINDOW = 50
SAMPLE_START = datetime(2026, 1, 1, tzinfo=UTC)  # time 0 of a sample stream with TIMESTAMP times


def column_types(plan: QueryPlan) -> dict[str, str]:
    """The Spark type of every column the query reads besides the keys, as its use suggests: STRING where it is
    compared with text or passed to lower/upper, TIMESTAMP where a time's field is read from it (`hour(x)`),
    BOOLEAN where it stands as a condition, DOUBLE otherwise."""
    kinds: dict[str, str] = {}

    def note(expr: ast.Expr, kind: str) -> None:
        if isinstance(expr, ast.Column):
            kinds.setdefault(expr.name.lower(), kind)

    def visit(expr: ast.Expr, condition: bool) -> None:
        if condition:
            note(expr, "BOOLEAN")
        logical = (isinstance(expr, ast.Binary) and expr.op in ("AND", "OR")) or \
            (isinstance(expr, ast.Unary) and expr.op == "NOT")
        if isinstance(expr, ast.Call) and expr.name in STRING_FUNCTIONS:
            for node in walk(expr):
                note(node, "STRING")
        if isinstance(expr, ast.Call) and expr.name in TIME_FIELDS:  # its text is a zone's name, not a value
            note(expr.args[0], "TIMESTAMP")
        elif any(isinstance(c, ast.Literal) and isinstance(c.value, str) for c in children(expr)):
            for child in children(expr):
                note(child, "STRING")
        for child in children(expr):
            visit(child, logical)

    for symbol in plan.symbols:
        visit(symbol.predicate, True)
    for out in plan.returns:
        visit(out.expr, False)
    columns = {node.name.lower(): node.name for e in plan.expressions
               for node in walk(e) if isinstance(node, ast.Column) and not _names_situation(node, plan)}
    keys = {k.lower() for k in plan.keys}
    return {name: kinds.get(lowered, "DOUBLE") for lowered, name in sorted(columns.items()) if lowered not in keys}


def _names_situation(column: ast.Column, plan: QueryPlan) -> bool:
    """`S.ts`, `S.te` in RETURN, or `duration(S)`'s argument: a situation's own value, not a stream column."""
    symbols = {s.name.lower() for s in plan.symbols}
    qualified = column.qualifier is not None and column.qualifier.lower() in symbols
    return (qualified and column.name.lower() in ENDPOINTS) or \
        (column.qualifier is None and column.name.lower() in symbols)


GENERATES = "generates the events of"  # what a query over several streams is refused, naming its second


def sample_stream(plan: QueryPlan) -> StreamSchema:
    """The stream a query reads, as far as the query tells: its keys (STRING), a time `ts` in seconds, and the
    columns it reads (`column_types`)."""
    columns = ((*((k, "STRING") for k in plan.keys), ("ts", "BIGINT"), *column_types(plan).items()))
    return StreamSchema(plan.one_stream(GENERATES).stream, plan.keys, "ts", "s", columns)


def _literals(plan: QueryPlan) -> dict[str, list[Decimal | str]]:
    """Per column (lower-case), the literals the predicates compare it with: every literal of a comparison,
    BETWEEN or IN that the column takes part in (for a LIKE, a text its pattern holds), and zero where other
    columns take part too."""
    found: dict[str, list[Decimal | str]] = {}
    for symbol in plan.symbols:
        for node in walk(symbol.predicate):
            compared = (isinstance(node, ast.Binary) and node.op in COMPARISONS) or \
                isinstance(node, ast.Between | ast.InList | ast.Like)
            if not compared:
                continue
            parts = list(walk(node))
            values = [like_example(str(node.pattern.value))] if isinstance(node, ast.Like) else \
                [n.value for n in parts if isinstance(n, ast.Literal) and isinstance(n.value, Decimal | str)]
            columns = {n.name.lower() for n in parts if isinstance(n, ast.Column)}
            if len(columns) > 1:  # compared with each other too: values about zero make either side the larger
                values.append(Decimal(0))
            for column in columns:
                found.setdefault(column, []).extend(values)
    return found


def _value_draw(kind: str, literals: list[Decimal | str], rng: np.random.Generator) -> Callable[[], Any]:
    """Values of one column: for a number, one of the literals it is compared with, or a little either side of
    one (so each comparison holds and fails); for text, one of its literals or another word."""
    numbers = [float(v) for v in literals if isinstance(v, Decimal)] or [0.0, 1.0]
    texts = [v for v in literals if isinstance(v, str)]
    base = kind.split("(", maxsplit=1)[0]
    if base == "BOOLEAN":
        return lambda: bool(rng.random() < 0.5)
    if base == "STRING":
        return lambda: str(rng.choice([*texts, "other"]))
    if base == "DATE":
        return lambda: SAMPLE_START + timedelta(days=int(rng.integers(0, 30)))
    if base == "TIMESTAMP":  # every field varies, the hour too
        return lambda: SAMPLE_START + timedelta(minutes=int(rng.integers(0, 30 * 24 * 60)))

    def number() -> float | int:
        near = float(rng.choice(numbers))
        side = int(rng.integers(-1, 2))  # below, at or above
        value = near + side * (abs(near) / 10 + 1) * float(rng.uniform(0.5, 1))
        return round(value) if base in INTEGER_TYPES else round(value, 3)

    return number


def query_events(plan: QueryPlan, events: int, *, keys: int = 1, seed: int = 42,
                 stream: StreamSchema | None = None) -> list[dict[str, Any]]:
    """A sample of `stream` (by default `sample_stream(plan)`) for `plan`: `events` events over `keys` keys (one
    global key where the stream has none), `EVENTS_PER_WINDOW` to a window (or closer, for the shortest duration
    bound to span a few), values that hold and change in runs near the literals each column is compared with (and
    sometimes NULL), so that the query's predicates turn true and false.

    Raises:
        QuerySemanticError: the query reads a column `stream` lacks, or does not partition by its keys.
    """
    stream = stream or sample_stream(plan)
    bind(plan, stream)
    literals = _literals(plan)
    bounds = [b for s in plan.symbols for b in (s.min_seconds, s.max_seconds) if b is not None]
    step = max(1, int(min([plan.window_seconds / EVENTS_PER_WINDOW, *(b / 3 for b in bounds)])))
    rng = np.random.default_rng(seed)
    fixed = {*stream.keys, stream.time_column, *stream.time_from}
    draws = {name: _value_draw(kind, literals.get(name.lower(), []), rng) for name, kind in stream.columns
             if name not in fixed}
    rows: list[dict[str, Any]] = []
    for key, count in enumerate(_per_key(events, keys if stream.keys else 1), start=1):
        values = {name: draw() for name, draw in draws.items()}
        for index in range(count):
            for name, draw in draws.items():
                if rng.random() > KEEP_VALUE:
                    values[name] = None if rng.random() < NULL_SHARE else draw()
            time = SAMPLE_START + timedelta(seconds=index * step) if stream.time_unit == TIMESTAMP_UNIT \
                else int(index * step / stream.unit_seconds)
            rows.append({**{k: f"{k.lower()}{key}" for k in stream.keys}, stream.time_column: time, **values})
    return rows


def write_query_events(plan: QueryPlan, out: Path, events: int, *, keys: int = 1, seed: int = 42,
                       stream: StreamSchema | None = None) -> Path:
    """`query_events` as a CSV file with a header, `out/<stream>.csv`, its times written as the stream's schema
    reads them (`written_times`)."""
    stream = stream or sample_stream(plan)
    rows = query_events(plan, events, keys=keys, seed=seed, stream=stream)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{plan.one_stream(GENERATES).stream.lower()}.csv"
    time_type = {stream.time_column: "TIMESTAMP"} if stream.time_unit == TIMESTAMP_UNIT else {}
    columns = written_times(stream, [r[stream.time_column] for r in rows])
    columns |= {name: pa.array([r[name] for r in rows], C.arrow_type(time_type.get(name, kind)))
                for name, kind in stream.file_columns if name not in columns}
    pacsv.write_csv(pa.table({name: columns[name] for name, _ in stream.file_columns}), path)
    return path


def written_times(stream: StreamSchema, times: list[Any]) -> dict[str, pa.Array]:
    """A sample's times as the columns a file of the stream writes them in, where the schema says how
    (`time.format`, `time.from`): Unix time as a number, a pattern's text, and a time made from several columns
    cut into them at spaces (ingest joins them with one). Text is written as the wall clock of the stream's zone
    (`time.zone`, UTC where it names none), which ingest reads it as. A stream of other times has none to write
    otherwise than as values."""
    if stream.time_unit != TIMESTAMP_UNIT or (stream.time_format is None and not stream.time_from):
        return {}
    if stream.time_format == UNIX_TIME:
        return {stream.time_column: pa.array([t.timestamp() for t in times], pa.float64())}
    zone = UTC if stream.time_zone is None else zone_info(stream.time_zone)
    texts = [_as_pattern(t.astimezone(zone), stream.time_format) for t in times]
    if not stream.time_from:
        return {stream.time_column: pa.array(texts, pa.string())}
    cut = [text.rsplit(" ", len(stream.time_from) - 1) for text in texts]
    if any(len(parts) != len(stream.time_from) for parts in cut):
        raise PielakeError(f"stream {stream.name}'s time is made from {len(stream.time_from)} columns "
                           f"({', '.join(stream.time_from)}), and its format writes a time with fewer spaces: "
                           "give time.format a space between the parts each column writes")
    return {part: pa.array([parts[i] for parts in cut], pa.string()) for i, part in enumerate(stream.time_from)}


# A Spark datetime pattern's parts a sample writes: quoted text, an optional section's brackets, a run of one
# letter (a field) and any other character, written as it is.
_PATTERN_PART = re.compile(r"'([^']*)'|([\[\]])|(([A-Za-z])\4*)|(.)")


def _as_pattern(time: datetime, pattern: str | None) -> str:
    """`time` as text of a Spark datetime pattern's fields of a date and a time of day (y, M, d, H, m, s, S; an
    optional section written in full), or ISO-8601 where there is no pattern; a PielakeError names any other
    field, which a sample does not write."""
    if pattern is None:
        return time.strftime("%Y-%m-%d %H:%M:%S")
    written = []
    for part in _PATTERN_PART.finditer(pattern):
        quoted, _, run, letter, other = part.groups()
        if run is None:
            written.append(quoted or other or "")
            continue
        if letter not in _FIELDS:
            raise PielakeError(f"a sample's time is written in its stream's time.format '{pattern}', whose field "
                               f"'{run}' it does not write: it writes {', '.join(_FIELDS)}")
        written.append(_FIELDS[letter](time, len(run)))
    return "".join(written)


_FIELDS: dict[str, Callable[[datetime, int], str]] = {
    "y": lambda t, n: f"{t.year % 100:02d}" if n == 2 else f"{t.year:0{n}d}",
    "M": lambda t, n: t.strftime("%B" if n > 3 else "%b") if n >= 3 else f"{t.month:0{n}d}",
    "d": lambda t, n: f"{t.day:0{n}d}",
    "H": lambda t, n: f"{t.hour:0{n}d}",
    "m": lambda t, n: f"{t.minute:0{n}d}",
    "s": lambda t, n: f"{t.second:0{n}d}",
    "S": lambda t, n: f"{t.microsecond:06d}"[:n].ljust(n, "0"),
}
