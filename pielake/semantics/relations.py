"""The 15 interval relations of docs/semantics.md §3, each copied literally from its table row.

Every condition is written with `&` and comparison operators only, so the same function evaluates on plain
numbers (the brute-force reference) and on Spark Columns (the kernels): one definition serves both.
`A finishes B` is Allen's standard orientation (A starts later, both end together); TPStream prints it
mirrored, and we do not follow it.

`followed-by` and `follows` are `before`/`after` plus a condition on the events in the gap (no event in
[A.te, B.ts) satisfies either predicate). That condition is not a function of the endpoints, so callers pass it
in as `quiet_gap`.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from pielake.query.evaluate import COMPARE


class Interval(Protocol):
    """Anything with a start and an end: a reference situation or a pair of Spark Columns."""

    @property
    def ts(self) -> Any: ...

    @property
    def te(self) -> Any: ...


def before(a: Interval, b: Interval) -> Any:
    return a.te < b.ts


def meets(a: Interval, b: Interval) -> Any:
    return a.te == b.ts


def overlaps(a: Interval, b: Interval) -> Any:
    return (a.ts < b.ts) & (b.ts < a.te) & (a.te < b.te)


def starts(a: Interval, b: Interval) -> Any:
    return (a.ts == b.ts) & (a.te < b.te)


def during(a: Interval, b: Interval) -> Any:
    return (b.ts < a.ts) & (a.te < b.te)


def finishes(a: Interval, b: Interval) -> Any:
    return (b.ts < a.ts) & (a.te == b.te)


def equals(a: Interval, b: Interval) -> Any:
    return (a.ts == b.ts) & (a.te == b.te)


def _inverse(fn: Callable[[Interval, Interval], Any]) -> Callable[[Interval, Interval], Any]:
    def inverse(a: Interval, b: Interval) -> Any:
        return fn(b, a)

    return inverse


@dataclass(frozen=True)
class Relation:
    """One relation: its canonical name, its inverse's name and its endpoint condition."""

    name: str
    inverse: str
    condition: Callable[[Interval, Interval], Any]
    needs_quiet_gap: bool = False  # followed-by / follows
    allen: bool = True  # one of Allen's 13 (mutually exclusive, jointly exhaustive)

    def holds(self, a: Interval, b: Interval, quiet_gap: bool = False) -> Any:
        """Whether `a <name> b` holds for closed intervals; `quiet_gap` feeds followed-by/follows."""
        result = self.condition(a, b)
        return (result & quiet_gap) if self.needs_quiet_gap else result


def _pair(name: str, inverse: str, fn: Callable[[Interval, Interval], Any],
          **flags: bool) -> tuple[Relation, Relation]:
    forward = Relation(name, inverse, fn, **flags)
    backward = Relation(inverse, name, _inverse(fn), **flags) if inverse != name else forward
    return forward, backward


RELATIONS: dict[str, Relation] = {r.name: r for pair in (
    _pair("before", "after", before),
    _pair("meets", "met-by", meets),
    _pair("overlaps", "overlapped-by", overlaps),
    _pair("starts", "started-by", starts),
    _pair("during", "contains", during),
    _pair("finishes", "finished-by", finishes),
    _pair("equals", "equals", equals),
    _pair("followed-by", "follows", before, needs_quiet_gap=True, allen=False),
) for r in pair}

ALLEN_RELATIONS: tuple[str, ...] = tuple(name for name, r in RELATIONS.items() if r.allen)
# Relations recognised by a PiePair automaton over minterm runs; the others need a range join (PieStream §3.2).
RANGE_JOIN_RELATIONS = frozenset({"before", "after"})
_ALIASES = {"equal": "equals", "follow": "follows"}


def canonical_name(text: str) -> str | None:
    """The canonical relation name for what a user wrote, or None: case-insensitive, `_` = `-`."""
    key = text.lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    return key if key in RELATIONS else None


def suggest(text: str) -> str | None:
    """The closest relation name, for "did you mean" hints."""
    key = text.lower().replace("_", "-")
    matches = difflib.get_close_matches(key, [*RELATIONS, *_ALIASES], n=1, cutoff=0.6)
    return canonical_name(matches[0]) if matches else None


def inverse(name: str) -> str:
    return RELATIONS[name].inverse


# ---------------------------------------------------------------- what constraints imply together

@dataclass(frozen=True)
class _Span:
    ts: int
    te: int


def allen_of(name: str) -> str:
    """The Allen relation a relation implies: `followed-by` is `before` with a condition on the gap."""
    return {"followed-by": "before", "follows": "after"}.get(name, name)


def _spans(points: int) -> list[_Span]:
    """Every interval between `points` points, `[s, e)` with s < e."""
    return [_Span(s, e) for s in range(points) for e in range(s + 1, points)]


@cache
def _composition() -> dict[tuple[str, str], frozenset[str]]:
    """Allen's composition table: for `a r1 b` and `b r2 c`, the relations `a` and `c` may stand in. Enumerated
    from the definitions above over every interval between six points (three intervals have at most six distinct
    endpoints, so every arrangement occurs), not copied from a table."""
    spans = _spans(6)
    found: dict[tuple[str, str], set[str]] = {}
    for a in spans:
        for b in spans:
            r1 = _allen_between(a, b)
            for c in spans:
                found.setdefault((r1, _allen_between(b, c)), set()).add(_allen_between(a, c))
    return {pair: frozenset(names) for pair, names in found.items()}


def _allen_between(a: Interval, b: Interval) -> str:
    return next(name for name in ALLEN_RELATIONS if RELATIONS[name].condition(a, b))


ENDPOINTS = ("ts", "te")  # where a situation starts and where it ends, as a query names them


@cache
def allen_where(left_end: str, op: str, right_end: str) -> tuple[str, ...]:
    """The Allen relations `a r b` under which `a.<left_end> <op> b.<right_end>` holds, as ISEQ writes a pattern
    (`A.ts < B.ts`). Each of Allen's relations is one order of the two intervals' four endpoints, so the comparison
    holds under every arrangement of a relation or under none; the arrangements are enumerated over four points,
    among which every order of four endpoints occurs."""
    spans = _spans(4)
    compare = COMPARE[op]
    return tuple(name for name in ALLEN_RELATIONS if any(
        _allen_between(a, b) == name and compare(getattr(a, left_end), getattr(b, right_end))
        for a in spans for b in spans))


# A set of Allen relations as the bits of an int (one bit a relation, in ALLEN_RELATIONS' order): path
# consistency intersects and compares these sets once per triangle, and ints do that in one operation.
FULL = (1 << len(ALLEN_RELATIONS)) - 1
# The triangles path consistency looks at before it gives up finding none: the closure of a chain of about 120
# symbols, about a second. A query of hundreds of symbols is then checked in that time, not in minutes.
LOOKS = 1_500_000


def _mask(names: frozenset[str]) -> int:
    return sum(1 << ALLEN_RELATIONS.index(name) for name in names)


def _names(mask: int) -> frozenset[str]:
    return frozenset(name for i, name in enumerate(ALLEN_RELATIONS) if mask >> i & 1)


@cache
def _inverse(mask: int) -> int:
    return _mask(frozenset(inverse(name) for name in _names(mask)))


@cache
def _composed(first: int, second: int) -> int:
    """The Allen relations `a` and `c` may stand in when `a` and `b` stand in one of `first` and `b` and `c` in
    one of `second`; kept once computed, as a pattern's pairs take few distinct sets."""
    table = _composition()
    return _mask(frozenset().union(*(table[(r1, r2)] for r1 in _names(first) for r2 in _names(second))))


@dataclass(frozen=True)
class Contradiction:
    """Constraints that cannot hold together: `left` and `via` may stand only in `to_via`, `via` and `right` only
    in `from_via`, so `left` and `right` only in `implied`, none of which their own constraint allows
    (`allowed`)."""

    left: str
    via: str
    right: str
    to_via: frozenset[str]
    from_via: frozenset[str]
    implied: frozenset[str]
    allowed: frozenset[str]

    def mirrored(self) -> Contradiction:
        """The same, said from `right` to `left`."""
        def inverted(names: frozenset[str]) -> frozenset[str]:
            return frozenset(inverse(n) for n in names)

        return Contradiction(self.right, self.via, self.left, inverted(self.from_via), inverted(self.to_via),
                             inverted(self.implied), inverted(self.allowed))


def contradiction(symbols: list[str], constraints: dict[tuple[str, str], frozenset[str]], *,
                  looks: int = LOOKS) -> Contradiction | None:
    """A triangle of symbols whose constraints cannot hold together, found by path consistency over Allen's
    algebra: each pair's relations are narrowed to those its paths through a third symbol allow, until nothing
    changes or a pair has none left. Sound, so a pattern it names can never match (every match binds intervals
    that satisfy every constraint at once); it need not find every pattern that cannot, and gives up after
    `looks` triangles.

    Only the triangles of a pair that has just narrowed can narrow another (Allen's propagation), so a pair is
    looked at again only then, and the work follows the narrowings, not the cube of the symbols at every pass."""
    at = {symbol: i for i, symbol in enumerate(symbols)}
    allowed = [[FULL] * len(symbols) for _ in symbols]
    for (a, b), names in constraints.items():
        mask = _mask(frozenset(allen_of(n) for n in names))
        allowed[at[a]][at[b]], allowed[at[b]][at[a]] = mask, _inverse(mask)
    # Propagation starts from the constraints in the order written: where the constraints as given contradict,
    # what the first ones imply then excludes one written after them.
    waiting = deque((at[a], at[b]) for a, b in constraints)
    queued = set(waiting)

    def narrow(left: int, via: int, right: int) -> Contradiction | None:
        """`left`-`right` narrowed to what its path through `via` allows; queued again if that changed it."""
        first, second = allowed[left][via], allowed[via][right]
        if FULL in (first, second):
            return None
        implied = _composed(first, second)
        narrowed = allowed[left][right] & implied
        if not narrowed:
            return Contradiction(symbols[left], symbols[via], symbols[right], _names(first), _names(second),
                                 _names(implied), _names(allowed[left][right]))
        if narrowed != allowed[left][right]:
            allowed[left][right], allowed[right][left] = narrowed, _inverse(narrowed)
            if (left, right) not in queued and (right, left) not in queued:
                waiting.append((left, right))
                queued.add((left, right))
        return None

    while waiting and looks > 0:
        a, b = waiting.popleft()
        queued.discard((a, b))
        looks -= len(symbols)
        for other in range(len(symbols)):
            if other not in (a, b):
                found = narrow(a, b, other) or narrow(other, a, b)  # each pair holds its mirror too
                if found is not None:
                    return found
    return None
