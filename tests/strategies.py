"""Hypothesis strategies shared by the property tests: random streams and random queries over them.

A drawn `Case` has one of three key shapes (no PARTITION BY: one global key; one key column; two) and a numeric or
a TIMESTAMP event time, so every property test that draws it runs over each of them. An interval case's rows start
at `ts` and end at `until` (docs/semantics.md §1): they overlap, touch, nest and leave gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from pielake.semantics.relations import RELATIONS
from pielake.streams import TIMESTAMP_UNIT, StreamSchema

KEY_SHAPES: tuple[tuple[str, ...], ...] = ((), ("key",), ("key", "part"))
KEY_TYPES = {"key": "STRING", "part": "INT"}
ATTRIBUTES = (("a", "BOOLEAN"), ("b", "BOOLEAN"), ("c", "BOOLEAN"), ("x", "DOUBLE"))
EPOCH = datetime(1970, 1, 1)  # kernel time 0 of a TIMESTAMP stream; Spark hands back naive datetimes, UTC (conftest)
MICROSECOND = timedelta(microseconds=1)
RELATION_NAMES = sorted(RELATIONS)
UNTIL = "until"  # where an interval case's rows end
Row = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """A query and its stream's events, with times as whole numbers of seconds (`rows`).

    A `timed` stream stores them as TIMESTAMPs (`stored_rows`); the reference reads them as the kernels do, in
    microseconds (`kernel_rows`, `unit`), so both compare in one time."""

    query: str
    rows: list[Row]
    keys: tuple[str, ...]
    timed: bool
    intervals: bool = False
    name: str = "S"  # the stream's

    @property
    def end_column(self) -> str | None:
        return UNTIL if self.intervals else None

    @property
    def times(self) -> tuple[str, ...]:
        return ("ts", UNTIL) if self.intervals else ("ts",)

    @property
    def stream(self) -> StreamSchema:
        kind = "TIMESTAMP" if self.timed else "BIGINT"
        columns = (*((k, KEY_TYPES[k]) for k in self.keys), *((t, kind) for t in self.times), *ATTRIBUTES)
        return StreamSchema(self.name, self.keys, "ts", TIMESTAMP_UNIT if self.timed else "s", columns, self.end_column)

    @property
    def unit(self) -> Fraction:
        return self.stream.unit_seconds

    def _times(self, rows: list[Row] | None, convert: Any) -> list[Row]:
        """`rows` (default: the case's) with `convert` applied to each time that is not NULL."""
        return [{**r, **{t: convert(r[t]) for t in self.times if r[t] is not None}}
                for r in (self.rows if rows is None else rows)]

    def stored_rows(self, rows: list[Row] | None = None) -> list[Row]:
        return self._times(rows, lambda t: EPOCH + t * timedelta(seconds=1)) if self.timed else \
            list(self.rows if rows is None else rows)

    def kernel_rows(self, rows: list[Row] | None = None) -> list[Row]:
        return self._times(rows, lambda t: t * 1_000_000) if self.timed else list(self.rows if rows is None else rows)

    def json_rows(self, rows: list[Row]) -> list[Row]:
        """Rows as a JSON file of the stream holds them: times as ISO-8601 text with a zone."""
        return self._times(rows, self.written_time) if self.timed else list(rows)

    def written_time(self, t: int) -> str:
        """A time as a user writes it (in a JSON file, or `--from`): of a TIMESTAMP stream, ISO-8601 with a zone."""
        return (EPOCH + t * timedelta(seconds=1)).replace(tzinfo=UTC).isoformat() if self.timed else str(t)

    def key_of(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.keys)


def kernel_time(value: Any) -> Any:
    """A time Spark hands back from a TIMESTAMP column, in kernel time (microseconds); anything else as it is."""
    return (value - EPOCH) // MICROSECOND if isinstance(value, datetime) else value


# Readings whose sums depend on the order they are added in, as doubles add them: ten times 0.1 is not 1.0 left
# to right, and 1e16 + 1.0 is 1e16, so a situation's sum must not depend on how its events fall into tasks.
UNEVEN_READINGS = (0.1, 0.7, 3.3, 1e16, -1e16)


def attribute() -> st.SearchStrategy[float | None]:
    """A numeric attribute, NULL now and then (a reading that is missing), so that whole runs of NULLs occur."""
    return st.one_of(st.none(), st.integers(-3, 9).map(float), st.sampled_from(UNEVEN_READINGS))


@st.composite
def key_stream(draw: st.DrawFn, key: Row) -> list[Row]:
    """One key's events: gaps in time, runs of several lengths (single events too), a numeric attribute."""
    rows, t = [], draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 28))):
        t += draw(st.sampled_from([1, 1, 1, 2, 5]))
        rows.append({**key, "ts": t, "a": draw(st.booleans()), "b": draw(st.booleans()),
                     "c": draw(st.booleans()), "x": draw(attribute())})
    return rows


@st.composite
def key_spans(draw: st.DrawFn, key: Row) -> list[Row]:
    """One key's interval rows, each lasting 1-8, so that rows overlap, touch, nest inside longer ones, share a
    start (with different ends: a key's rows are unique per start and end) and leave gaps."""
    rows, t = [], draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 24))):
        if rows:  # at most three rows share a start: the durations below leave each a different end
            sharing = sum(r["ts"] == t for r in rows)
            t += draw(st.sampled_from([0, 1, 1, 2, 3, 4, 6] if sharing < 3 else [1, 2, 3, 4, 6]))
        taken = {r[UNTIL] for r in rows if r["ts"] == t}
        end = t + draw(st.sampled_from([1, 1, 1, 2, 3, 5, 8]).filter(lambda d, t=t, taken=taken: t + d not in taken))
        rows.append({**key, "ts": t, UNTIL: end, "a": draw(st.booleans()), "b": draw(st.booleans()),
                     "c": draw(st.booleans()), "x": draw(attribute())})
    return rows


@st.composite
def key_values(draw: st.DrawFn, keys: tuple[str, ...]) -> list[Row]:
    """1-4 distinct keys of the shape `keys` (the one global key where there are none)."""
    if not keys:
        return [{}]
    candidates = [{"key": k, "part": p} for k in ("k1", "k2") for p in (0, 1)] if len(keys) == 2 else \
        [{"key": k} for k in ("k1", "k2", "k3", "k4")]
    return draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=4, unique_by=lambda r: tuple(r.values())))


PREDICATES = ["a", "b", "c", "a AND b", "a OR c", "NOT b", "x > 3", "c OR x IS NULL"]
DURATIONS = ["", "", " AT LEAST 2 s", " AT MOST 3 s", " BETWEEN 1 s AND 4 s"]


def relation_lists() -> st.SearchStrategy[list[str]]:
    """One to four distinct relations, which a constraint allows any of."""
    return st.lists(st.sampled_from(RELATION_NAMES), min_size=1, max_size=4, unique=True)


@st.composite
def scenario(draw: st.DrawFn, intervals: bool = False) -> Case:
    """A query over 2-3 symbols (self pairs, duration constraints and cyclic patterns included) over a stream of
    1-4 keys of a drawn key shape and time type: point events, or interval rows (`intervals`)."""
    first, second = draw(st.sampled_from(PREDICATES)), draw(st.sampled_from(PREDICATES))
    defines = [f"A AS {first}{draw(st.sampled_from(DURATIONS))}", f"B AS {second}"]
    pattern = [f"A {';'.join(draw(relation_lists()))} B"]
    if draw(st.booleans()):
        defines.append(f"C AS {draw(st.sampled_from(PREDICATES))}")
        other = draw(st.sampled_from(["A", "B"]))
        pattern.append(f"{other} {';'.join(draw(relation_lists()))} C")
        if draw(st.booleans()):  # close the cycle A-B-C: the last join is on two symbols already bound
            pattern.append(f"{'B' if other == 'A' else 'A'} {';'.join(draw(relation_lists()))} C")
    return draw(_over_a_stream(defines, pattern, "sum(A.x) AS sa, count(B.x) AS nb, duration(A) AS da, "
                               "avg(B.x) AS mb, min(A.x) AS la, first(B.x) AS fb, last(A.x) AS za", intervals))


@st.composite
def wide_scenario(draw: st.DrawFn, intervals: bool = False) -> Case:
    """A query over 4-5 symbols, each with a duration constraint now and then: a random tree of constraints, and up
    to two more that close cycles, so that the join order over many symbols (`pielake.query.join_order`) meets
    stars, chains and joins on symbols already bound; over a stream as `scenario` draws it."""
    symbols = "ABCDE"[:draw(st.integers(4, 5))]
    defines = [f"{s} AS {draw(st.sampled_from(PREDICATES))}{draw(st.sampled_from(DURATIONS))}" for s in symbols]
    edges: list[tuple[str, str]] = []
    for i in range(1, len(symbols)):  # each symbol after the first tied to one before it, either way round
        pair = (symbols[draw(st.integers(0, i - 1))], symbols[i])
        edges.append(pair if draw(st.booleans()) else pair[::-1])
    for _ in range(draw(st.integers(0, 2))):
        left, right = draw(st.lists(st.sampled_from(symbols), min_size=2, max_size=2, unique=True))
        if not {(left, right), (right, left)} & set(edges):
            edges.append((left, right))
    pattern = [f"{left} {';'.join(draw(relation_lists()))} {right}" for left, right in edges]
    return draw(_over_a_stream(defines, pattern, "sum(A.x) AS sa, count(B.x) AS nb, duration(D) AS dd, "
                               "first(C.x) AS fc, max(D.x) AS md", intervals))


@st.composite
def _over_a_stream(draw: st.DrawFn, defines: list[str], pattern: list[str], returns: str, intervals: bool) -> Case:
    """The query of `defines`, `pattern` and `returns` under a drawn window and key shape, and its stream's events
    for 1-4 keys, in a drawn time type: point events, or interval rows (`intervals`)."""
    window = draw(st.integers(2, 40))
    keys = draw(st.sampled_from(KEY_SHAPES))
    partition = f" PARTITION BY {', '.join(keys)}" if keys else ""
    query = (f"FROM S{partition} DEFINE {', '.join(defines)} PATTERN {' AND '.join(pattern)} "
             f"WITHIN {window} s RETURN {returns}")
    per_key = key_spans if intervals else key_stream
    rows = [r for key in draw(key_values(keys)) for r in draw(per_key(key))]
    return Case(query, rows, keys, draw(st.booleans()), intervals)


@st.composite
def two_streams(draw: st.DrawFn) -> tuple[str, Case, Case]:
    """A query over two streams S and R of one key shape and time type, and each stream's events: A of S, B of R,
    and maybe C of either, related by random relations; point events or interval rows in each, and keys that may
    be missing from one of them. Each stream and key ends at a time of its own."""
    predicates = ["{0}.a", "{0}.b", "{0}.a AND {0}.c", "NOT {0}.b"]
    durations = ["", "", " AT LEAST 2 s", " AT MOST 3 s"]
    defines = [f"A AS {draw(st.sampled_from(predicates)).format('S')}{draw(st.sampled_from(durations))}",
               f"B AS {draw(st.sampled_from(predicates)).format('R')}"]
    pattern = [f"A {';'.join(draw(relation_lists()))} B"]
    returns = ["count(A.x) AS na", "max(B.x) AS mb", "duration(A) AS da", "sum(A.x) AS sa", "avg(B.x) AS ab"]
    if draw(st.booleans()):
        stream = draw(st.sampled_from("SR"))
        defines.append(f"C AS {draw(st.sampled_from(predicates)).format(stream)}")
        pattern.append(f"{draw(st.sampled_from(['A', 'B']))} {';'.join(draw(relation_lists()))} C")
        returns.append("first(C.x) AS fc")
    keys = draw(st.sampled_from(KEY_SHAPES))
    partition = f" PARTITION BY {', '.join(keys)}" if keys else ""
    query = (f"FROM S, R{partition} DEFINE {', '.join(defines)} PATTERN {' AND '.join(pattern)} "
             f"WITHIN {draw(st.integers(2, 40))} s RETURN {', '.join(returns)}")
    timed = draw(st.booleans())

    def stream(name: str) -> Case:
        intervals = draw(st.booleans())
        per_key = key_spans if intervals else key_stream
        rows = [r for key in draw(key_values(keys)) for r in draw(per_key(key))]
        return Case(query, rows, keys, timed, intervals, name)

    return query, stream("S"), stream("R")
