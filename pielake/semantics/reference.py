"""The brute-force reference: docs/semantics.md followed literally, on plain Python lists of events.

It is slow on purpose and obviously correct: situations are maximal runs found by a linear scan; matches are
found by trying every combination of situations per key; decision times come from `detection.decision_time`,
which asks at each event time whether anything could still break the constraint. Every faster
implementation in pielake (the Spark kernels, micro-batches, backfills) is tested against this module.

Input events must already follow §1 (validated by ingest): per key, event times strictly increasing; interval
rows (an interval stream's) each ending after they start, unique per key, start and end. A query over several
streams takes each stream's events apart (`StreamEvents`): a symbol's situations come from its own stream, and
a pair across two streams is decided with both streams' knowledge (§5).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pielake.errors import PielakeError
from pielake.query import ast
from pielake.query.analyzer import PairConstraint, QueryPlan, SymbolDef
from pielake.query.evaluate import Evaluator, holds, in_bigint
from pielake.semantics.detection import Endpoints, decision_time
from pielake.vocabulary import (
    COMPLETE,
    COMPLETED_AT,
    DETECTED_AT,
    PROVISIONAL,
    RETRACTED,
    STARTED_AT,
    symbol_te,
    symbol_ts,
)

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Situation:
    """A maximal run of one key's events satisfying a symbol's predicate (docs/semantics.md §2).

    `te` is the time of the first event after the run, or None while the situation is open. `rows` are the
    run's own events (not the closing one): the aggregates read them.
    """

    symbol: str
    key: tuple[Any, ...]
    ts: Any
    te: Any | None
    rows: tuple[Row, ...]

    @property
    def is_open(self) -> bool:
        return self.te is None

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints(self.ts, self.te)


@dataclass(frozen=True)
class Match:
    """One binding of every symbol to a situation of the same key (docs/semantics.md §4-§6)."""

    key: tuple[Any, ...]
    bindings: tuple[tuple[str, Situation], ...]
    detected_at: Any
    completed_at: Any | None
    status: str
    values: tuple[tuple[str, Any], ...] = ()

    def situation(self, symbol: str) -> Situation:
        return dict(self.bindings)[symbol]

    def natural_key(self) -> tuple[Any, ...]:
        return (self.key, *(s.ts for _, s in self.bindings))


@dataclass(frozen=True)
class StreamEvents:
    """One stream's events as the reference reads them: rows, the event-time column (an interval stream's
    start) and, of an interval stream, the end column. A matches stream (`matches_stream`) adds the columns
    that order its rows sharing a start and an end (`order_columns`), and each key's horizon (`known_until`):
    how far its time is known, beyond its latest row."""

    rows: Sequence[Row]
    time_column: str = "ts"
    end_column: str | None = None
    order_columns: tuple[str, ...] = ()
    known_until: Mapping[tuple[Any, ...], Any] = field(default_factory=dict)


class _KeyStream:
    """One key's instants in one stream, in time order, with its symbols' truth at each (docs/semantics.md §2).

    A point stream's instants are its events. An interval stream's are its rows' starts and ends up to its latest
    start, and a symbol holds at one when a row covering it satisfies the predicate. `rows` are in start order,
    rows sharing a start in end order. `now` is the key's latest event (latest start): nothing is known of the
    stream beyond it.
    """

    def __init__(self, key: tuple[Any, ...], rows: list[Row], symbols: Sequence[SymbolDef], given: StreamEvents):
        self.key = key
        self.rows = rows
        self.starts = [_field(r, given.time_column) for r in rows]
        self.now = max(self.starts[-1], given.known_until.get(key, self.starts[-1]))
        self.satisfied = {s.name: [holds(s.predicate, r) for r in rows] for s in symbols}
        if given.end_column is None:
            self.times, self.truth = self.starts, self.satisfied
            return
        ends = [_field(r, given.end_column) for r in rows]
        self.times = sorted({t for t in [*self.starts, *ends] if t <= self.now})
        spans = list(zip(self.starts, ends, strict=True))
        self.truth = {name: [any(ok and start <= t < end for ok, (start, end) in zip(flags, spans, strict=True))
                             for t in self.times] for name, flags in self.satisfied.items()}

    def situations(self, symbol: str) -> list[Situation]:
        out: list[Situation] = []
        truth = self.truth[symbol]
        start: int | None = None
        for i, value in enumerate([*truth, False]):
            if value and start is None:
                start = i
            elif not value and start is not None:
                ts, te = self.times[start], self.times[i] if i < len(self.times) else None
                out.append(Situation(symbol, self.key, ts, te, self.rows_of(symbol, ts, te)))
                start = None
        return out

    def rows_of(self, symbol: str, ts: Any, te: Any | None) -> tuple[Row, ...]:
        """The rows a situation's aggregates read: the symbol's rows starting in [ts, te), in start order. Of a
        point stream, these are exactly the run's own events."""
        low = bisect.bisect_left(self.starts, ts)
        high = len(self.starts) if te is None else bisect.bisect_left(self.starts, te)
        return tuple(self.rows[i] for i in range(low, high) if self.satisfied[symbol][i])


class _KeyTimeline:
    """One key across the query's streams: each symbol reads its own stream's instants (docs/semantics.md §1-§2),
    and a pair of symbols is judged on what both their streams tell (§3, §5). A stream the key is missing from
    gives its symbols no situations."""

    def __init__(self, key: tuple[Any, ...], streams: dict[str, _KeyStream], plan: QueryPlan):
        self.key = key
        self.plan = plan
        self.streams = streams
        self._situations: dict[str, list[Situation]] = {}
        self._times: dict[str, list[Any]] = {}  # by constraint id: every pair of the constraint reads them

    def stream_of(self, symbol: str) -> _KeyStream | None:
        return self.streams.get(self.plan.symbol(symbol).source)

    def situations(self, symbol: str) -> list[Situation]:
        if symbol not in self._situations:
            stream = self.stream_of(symbol)
            self._situations[symbol] = [] if stream is None else stream.situations(symbol)
        return self._situations[symbol]

    def now(self, symbol: str) -> Any:
        """How far the key's time is known in the symbol's stream."""
        stream = self.stream_of(symbol)
        assert stream is not None
        return stream.now

    def times(self, c: PairConstraint) -> list[Any]:
        """The instants at which the constraint's pair may be decided: both streams' instants, up to the earlier
        of the two streams' times (beyond it, the slower stream may still bring events). Of two symbols of one
        stream, that stream's instants."""
        if c.id not in self._times:
            left, right = self.stream_of(c.left), self.stream_of(c.right)
            assert left is not None and right is not None
            known = min(left.now, right.now)
            self._times[c.id] = left.times if left is right else \
                sorted({t for t in [*left.times, *right.times] if t <= known})
        return self._times[c.id]

    def quiet_gap(self, c: PairConstraint, a: Situation, b: Situation) -> bool:
        """Neither symbol holds at any time between the earlier situation's end and the later one's start: no
        situation of either overlaps the gap. Of one stream, that is that no event in the gap satisfies either
        predicate (a situation overlapping it holds at its first instant, the earlier situation's end); across
        streams, a situation of the other stream may begin before the gap and still hold in it."""
        if a.te is not None and a.te < b.ts:
            lo, hi = a.te, b.ts
        elif b.te is not None and b.te < a.ts:
            lo, hi = b.te, a.ts
        else:
            return False
        return not any(s.ts < hi and (s.te is None or s.te > lo)
                       for symbol in (c.left, c.right) for s in self.situations(symbol))


def _field(row: Row, name: str) -> Any:
    lowered = name.lower()
    for column, value in row.items():
        if column.lower() == lowered:
            return value
    raise PielakeError(f"event has no column '{name}': {dict(row)}")


def _group_by_key(given: StreamEvents, plan: QueryPlan) -> dict[tuple[Any, ...], list[Row]]:
    """One stream's rows per key, in time order (then end, then `order_columns`), checked against §1."""
    groups: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for row in given.rows:
        groups[tuple(_field(row, k) for k in plan.keys)].append(row)
    ends = () if given.end_column is None else (given.end_column,)
    columns = (given.time_column, *ends, *given.order_columns)
    for key, rows in groups.items():
        rows.sort(key=lambda r: tuple(_field(r, c) for c in columns))
        order = [tuple(_field(r, c) for c in columns) for r in rows]
        if any(a >= b for a, b in itertools.pairwise(order)):
            raise PielakeError(f"key {key}: {' and '.join(columns)} must be unique per key (docs/semantics.md §1)")
        if ends and any(end <= start for start, end, *_ in order):
            raise PielakeError(f"key {key}: every interval row must end after it starts (docs/semantics.md §1)")
    return dict(groups)


def _timelines(streams: Mapping[str, StreamEvents], plan: QueryPlan) -> list[_KeyTimeline]:
    """Every key of any stream, in a stable order, with its rows of each stream."""
    unknown = {name.lower() for name in streams} - {s.stream.lower() for s in plan.sources}
    if unknown:
        raise PielakeError(f"events given for {', '.join(sorted(unknown))}, which the query does not read")
    by_key: dict[tuple[Any, ...], dict[str, _KeyStream]] = defaultdict(dict)
    for source in plan.sources:
        given = next((e for name, e in streams.items() if name.lower() == source.stream.lower()), StreamEvents(()))
        symbols = [s for s in plan.symbols if s.source == source.label]
        for key, rows in _group_by_key(given, plan).items():
            by_key[key][source.label] = _KeyStream(key, rows, symbols, given)
    return [_KeyTimeline(key, by_key[key], plan) for key in sorted(by_key, key=repr)]


def _one_stream(plan: QueryPlan, events: Iterable[Row], time_column: str,
                end_column: str | None) -> dict[str, StreamEvents]:
    """The events of a query over one stream, as `StreamEvents` of that stream."""
    return {plan.sources[0].stream: StreamEvents(list(events), time_column, end_column)}


def derive_situations(events: Iterable[Row], plan: QueryPlan, time_column: str = "ts",
                      end_column: str | None = None) -> list[Situation]:
    """Every situation of every symbol and key, open ones included (te None); `end_column` names the end of an
    interval stream's rows (`time_column` is then their start)."""
    return derive_situations_of(_one_stream(plan, events, time_column, end_column), plan)


def derive_situations_of(streams: Mapping[str, StreamEvents], plan: QueryPlan) -> list[Situation]:
    """`derive_situations` of a query over any number of streams: `streams` maps each stream's name to its
    events."""
    return [s for timeline in _timelines(streams, plan) for sym in plan.symbol_names
            for s in timeline.situations(sym)]


class _Matcher:
    def __init__(self, plan: QueryPlan, time_unit_seconds: Fraction | float | int):
        self.plan = plan
        # A float unit such as 0.001 means the decimal it is written as, not its binary approximation.
        self.unit = Fraction(str(time_unit_seconds)) if isinstance(time_unit_seconds, float) \
            else Fraction(time_unit_seconds)

    def seconds(self, span: Any) -> Fraction:
        return Fraction(span) * self.unit

    def takes_part(self, situation: Situation) -> bool:
        """A duration-constrained situation takes part only once closed and within its bounds (§2)."""
        symbol = self.plan.symbol(situation.symbol)
        if not symbol.has_duration:
            return True
        if situation.te is None:
            return False
        length = self.seconds(situation.te - situation.ts)
        low_ok = symbol.min_seconds is None or length >= symbol.min_seconds
        return low_ok and (symbol.max_seconds is None or length <= symbol.max_seconds)

    def matches(self, stream: _KeyTimeline) -> list[Match]:
        """Every binding of the symbols to situations that `match` accepts, tried one symbol at a time: a partial
        binding is given up where a constraint between symbols bound so far is never decided, or where their
        starts already lie further apart than the window (a match is detected at or after its latest start, and
        `match` refuses one detected more than the window after its earliest). Both only skip bindings `match`
        would refuse, and spare it trying every combination."""
        candidates = {sym: [s for s in stream.situations(sym) if self.takes_part(s)] for sym in self.plan.symbol_names}
        decisions: dict[tuple[str, Any, Any], Any | None] = {}
        found: list[Match] = []

        def extend(binding: dict[str, Situation], rest: tuple[str, ...]) -> None:
            if not rest:
                matched = self.match(stream, binding, decisions)
                if matched is not None:
                    found.append(matched)
                return
            for situation in candidates[rest[0]]:
                trial = {**binding, rest[0]: situation}
                starts = [s.ts for s in trial.values()]
                if self.seconds(max(starts) - min(starts)) > self.plan.window_seconds:
                    continue
                if all(self.decided(stream, c, trial, decisions) is not None for c in self.plan.constraints
                       if c.left in trial and c.right in trial):
                    extend(trial, rest[1:])

        extend({}, self.plan.symbol_names)
        return found

    @staticmethod
    def decided(stream: _KeyTimeline, c: PairConstraint, binding: dict[str, Situation],
                decisions: dict[tuple[str, Any, Any], Any | None]) -> Any | None:
        """When constraint `c` is decided for the binding's pair (None: never, or not yet known), computed once
        per pair."""
        a, b = binding[c.left], binding[c.right]
        pair = (c.id, a.ts, b.ts)
        if pair not in decisions:
            decisions[pair] = decision_time(c.relations, a.endpoints, b.endpoints, stream.times(c),
                                            stream.quiet_gap(c, a, b))
        return decisions[pair]

    def match(self, stream: _KeyTimeline, binding: dict[str, Situation],
              decisions: dict[tuple[str, Any, Any], Any | None]) -> Match | None:
        decided = []
        for c in self.plan.constraints:
            at = self.decided(stream, c, binding, decisions)
            if at is None:
                return None
            decided.append(at)
        situations = [binding[symbol] for symbol in self.plan.symbol_names]
        first_start = min(s.ts for s in situations)
        detected = max([*decided, *(s.ts for s in situations),
                        *(s.te for s in situations if self.plan.symbol(s.symbol).has_duration)])
        if self.seconds(detected - first_start) > self.plan.window_seconds:
            return None  # can never fit the window: never reported
        status, completed = self.status(situations, first_start, stream)
        values = tuple((out.name, self.value(out.expr, binding, stream.key)) for out in self.plan.returns)
        bindings = tuple((symbol, binding[symbol]) for symbol in self.plan.symbol_names)
        return Match(stream.key, bindings, detected, completed, status, values)

    def status(self, situations: Sequence[Situation], first_start: Any,
               stream: _KeyTimeline) -> tuple[str, Any | None]:
        """Status as the key's events tell (§5): an open situation is known to last at least to its stream's
        latest event."""
        open_until = [stream.now(s.symbol) for s in situations if s.is_open]
        if open_until:
            alive = all(self.seconds(now - first_start) <= self.plan.window_seconds for now in open_until)
            return (PROVISIONAL if alive else RETRACTED), None
        last_end = max(s.te for s in situations)
        if self.seconds(last_end - first_start) <= self.plan.window_seconds:
            return COMPLETE, last_end
        return RETRACTED, None

    def value(self, expr: ast.Expr, binding: dict[str, Situation], key: tuple[Any, ...]) -> Any:
        by_symbol = {name.lower(): s for name, s in binding.items()}
        keys = {k.lower(): v for k, v in zip(self.plan.keys, key, strict=True)}

        def column(col: ast.Column) -> Any:
            if col.qualifier is None:
                return keys[col.name.lower()]
            situation = by_symbol[col.qualifier.lower()]
            return situation.ts if col.name.lower() == "ts" else situation.te

        def call(c: ast.Call) -> Any:
            arg = c.args[0]
            assert isinstance(arg, ast.Column)
            if c.name == "duration":
                s = by_symbol[arg.name.lower()]
                return None if s.te is None else s.te - s.ts
            return aggregate(c.name, [_field(r, arg.name) for r in by_symbol[arg.qualifier.lower()].rows])

        return Evaluator(column, call)(expr)


def aggregate(name: str, values: list[Any]) -> Any:
    """Situation aggregates over the run's own events, NULLs skipped as Spark's aggregates skip them."""
    present = [v for v in values if v is not None]
    if name == "first":
        return values[0] if values else None
    if name == "last":
        return values[-1] if values else None
    if name == "count":
        return len(present)
    if not present:
        return None
    if name == "min":
        return min(present)
    if name == "max":
        return max(present)
    total = exact_sum(present)
    # a sum of whole numbers beyond 64 bits is NULL, as arithmetic's; an average is the exact sum as a double (a
    # whole number's as Spark casts its exact sum) over the count
    return in_bigint(total) if name == "sum" else float(total) / len(present)


def exact_sum(values: list[Any]) -> Any:
    """A sum as docs/semantics.md §2 defines it: of whole numbers, exact; of any other numbers, their exact sum
    rounded once to a double (an infinity beyond a double's range), so that it does not depend on the order in
    which a situation's events are added."""
    if all(isinstance(v, int) for v in values):
        return sum(values)
    exact = sum((Fraction(float(v)) for v in values), Fraction(0))
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def find_matches(events: Iterable[Row], plan: QueryPlan, time_column: str = "ts",
                 time_unit_seconds: Fraction | float | int = 1, end_column: str | None = None) -> list[Match]:
    """Every match of the plan over the events, with status as known after the last event of each key.

    Args:
        events: rows with the key columns, the time column and the attributes.
        plan: an analyzed query.
        time_column: the event-time column.
        time_unit_seconds: how many seconds one unit of event time is (windows and durations are in seconds).
        end_column: of an interval stream, the column its rows end at; `time_column` is then their start.
    """
    return find_matches_of(_one_stream(plan, events, time_column, end_column), plan, time_unit_seconds)


def find_matches_of(streams: Mapping[str, StreamEvents], plan: QueryPlan,
                    time_unit_seconds: Fraction | float | int = 1) -> list[Match]:
    """`find_matches` of a query over any number of streams: `streams` maps each stream's name to its events
    (a stream given no events has none)."""
    matcher = _Matcher(plan, time_unit_seconds)
    return [m for timeline in _timelines(streams, plan) for m in matcher.matches(timeline)]


def matches_stream(streams: Mapping[str, StreamEvents], plan: QueryPlan,
                   time_unit_seconds: Fraction | float | int = 1) -> StreamEvents:
    """The matches of `plan` over `streams` as the interval stream a query over them reads (docs/semantics.md §1,
    a query over another query's matches): a row per complete match that starts at or before its key's horizon,
    the key's time less the window (rounded up to a whole time unit: times are whole units), by which every match
    starting there is final."""
    matcher = _Matcher(plan, time_unit_seconds)
    window = math.ceil(plan.window_seconds / matcher.unit)  # in whole units of the stream's time
    timelines = _timelines(streams, plan)
    horizon = {t.key: min(s.now for s in t.streams.values()) - window for t in timelines
               if len(t.streams) == len(plan.sources)}  # a key missing from a stream has no matches
    rows = [_match_row(m, plan) for t in timelines for m in matcher.matches(t)
            if m.status == COMPLETE and min(s.ts for _, s in m.bindings) <= horizon[m.key]]
    return StreamEvents(rows, STARTED_AT, COMPLETED_AT, tuple(symbol_ts(s) for s in plan.symbol_names), horizon)


def _match_row(match: Match, plan: QueryPlan) -> dict[str, Any]:
    """A complete match as a row of its matches stream: keys, its span, its situations' ends, its RETURN values."""
    ends = {column: value for symbol, s in match.bindings
            for column, value in ((symbol_ts(symbol), s.ts), (symbol_te(symbol), s.te))}
    return {**dict(zip(plan.keys, match.key, strict=True)), STARTED_AT: min(s.ts for _, s in match.bindings),
            COMPLETED_AT: match.completed_at, DETECTED_AT: match.detected_at, **ends, **dict(match.values)}
