"""The brute-force reference: docs/semantics.md followed literally, on plain Python lists of events.

It is slow on purpose and obviously correct: situations are maximal runs found by a linear scan; matches are
found by trying every combination of situations per key; decision times come from `detection.decision_time`,
which asks at each event time whether anything could still break the constraint. Every faster
implementation in pielake (the Spark kernels, micro-batches, backfills) is tested against this module.

Input events must already follow §1 (validated by ingest): per key, event times strictly increasing; interval
rows (an interval stream's) each ending after they start, unique per key, start and end.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pielake.errors import PielakeError
from pielake.query import ast
from pielake.query.analyzer import PairConstraint, QueryPlan
from pielake.query.evaluate import Evaluator, holds
from pielake.semantics.detection import Endpoints, decision_time
from pielake.vocabulary import COMPLETE, PROVISIONAL, RETRACTED

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


class _KeyStream:
    """One key's instants in time order, with every symbol's truth at each instant (docs/semantics.md §2).

    A point stream's instants are its events. An interval stream's are its rows' starts and ends up to its latest
    start, and a symbol holds at one when a row covering it satisfies the predicate. `rows` are in start order,
    rows sharing a start in end order.
    """

    def __init__(self, key: tuple[Any, ...], rows: list[Row], plan: QueryPlan, time_column: str,
                 end_column: str | None = None):
        self.key = key
        self.rows = rows
        self.starts = [_field(r, time_column) for r in rows]
        self.satisfied = {s.name: [holds(s.predicate, r) for r in rows] for s in plan.symbols}
        if end_column is None:
            self.times, self.truth = self.starts, self.satisfied
            return
        ends = [_field(r, end_column) for r in rows]
        self.times = sorted({t for t in [*self.starts, *ends] if t <= self.starts[-1]})
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

    def quiet_gap(self, c: PairConstraint, a: Situation, b: Situation) -> bool:
        """No event between the earlier situation's end and the later one's start satisfies either predicate."""
        if a.te is not None and a.te < b.ts:
            lo, hi = a.te, b.ts
        elif b.te is not None and b.te < a.ts:
            lo, hi = b.te, a.ts
        else:
            return False
        left, right = self.truth[c.left], self.truth[c.right]
        return not any(left[i] or right[i] for i, t in enumerate(self.times) if lo <= t < hi)


def _field(row: Row, name: str) -> Any:
    lowered = name.lower()
    for column, value in row.items():
        if column.lower() == lowered:
            return value
    raise PielakeError(f"event has no column '{name}': {dict(row)}")


def _group_by_key(events: Iterable[Row], plan: QueryPlan, time_column: str,
                  end_column: str | None) -> dict[tuple[Any, ...], list[Row]]:
    groups: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for row in events:
        groups[tuple(_field(row, k) for k in plan.keys)].append(row)
    times = [time_column] if end_column is None else [time_column, end_column]
    for key, rows in groups.items():
        rows.sort(key=lambda r: tuple(_field(r, t) for t in times))
        order = [tuple(_field(r, t) for t in times) for r in rows]
        if any(a >= b for a, b in itertools.pairwise(order)):
            raise PielakeError(f"key {key}: {' and '.join(times)} must be unique per key (docs/semantics.md §1)")
        if end_column is not None and any(end <= start for start, end in order):
            raise PielakeError(f"key {key}: every interval row must end after it starts (docs/semantics.md §1)")
    return dict(groups)


def _streams(events: Iterable[Row], plan: QueryPlan, time_column: str, end_column: str | None) -> list[_KeyStream]:
    return [_KeyStream(key, rows, plan, time_column, end_column) for key, rows in
            sorted(_group_by_key(events, plan, time_column, end_column).items(), key=lambda kv: repr(kv[0]))]


def derive_situations(events: Iterable[Row], plan: QueryPlan, time_column: str = "ts",
                      end_column: str | None = None) -> list[Situation]:
    """Every situation of every symbol and key, open ones included (te None); `end_column` names the end of an
    interval stream's rows (`time_column` is then their start)."""
    return [s for stream in _streams(events, plan, time_column, end_column) for sym in plan.symbol_names
            for s in stream.situations(sym)]


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

    def matches(self, stream: _KeyStream) -> list[Match]:
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
    def decided(stream: _KeyStream, c: PairConstraint, binding: dict[str, Situation],
                decisions: dict[tuple[str, Any, Any], Any | None]) -> Any | None:
        """When constraint `c` is decided for the binding's pair (None: never), computed once per pair."""
        a, b = binding[c.left], binding[c.right]
        pair = (c.id, a.ts, b.ts)
        if pair not in decisions:
            decisions[pair] = decision_time(c.relations, a.endpoints, b.endpoints, stream.times,
                                            stream.quiet_gap(c, a, b))
        return decisions[pair]

    def match(self, stream: _KeyStream, binding: dict[str, Situation],
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
        status, completed = self.status(situations, first_start, stream.times[-1])
        values = tuple((out.name, self.value(out.expr, binding, stream.key)) for out in self.plan.returns)
        bindings = tuple((symbol, binding[symbol]) for symbol in self.plan.symbol_names)
        return Match(stream.key, bindings, detected, completed, status, values)

    def status(self, situations: Sequence[Situation], first_start: Any, now: Any) -> tuple[str, Any | None]:
        """Status at `now`, the key's last event time (§5)."""
        if any(s.is_open for s in situations):
            alive = self.seconds(now - first_start) <= self.plan.window_seconds
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
    if name == "sum":
        return sum(present)
    return sum(present) / len(present)  # avg


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
    matcher = _Matcher(plan, time_unit_seconds)
    return [m for stream in _streams(events, plan, time_column, end_column) for m in matcher.matches(stream)]
