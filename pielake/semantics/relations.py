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
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol


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


@cache
def _composition() -> dict[tuple[str, str], frozenset[str]]:
    """Allen's composition table: for `a r1 b` and `b r2 c`, the relations `a` and `c` may stand in. Enumerated
    from the definitions above over every interval between six points (three intervals have at most six distinct
    endpoints, so every arrangement occurs), not copied from a table."""
    spans = [_Span(s, e) for s in range(6) for e in range(s + 1, 6)]
    found: dict[tuple[str, str], set[str]] = {}
    for a in spans:
        for b in spans:
            r1 = _allen_between(a, b)
            for c in spans:
                found.setdefault((r1, _allen_between(b, c)), set()).add(_allen_between(a, c))
    return {pair: frozenset(names) for pair, names in found.items()}


def _allen_between(a: Interval, b: Interval) -> str:
    return next(name for name in ALLEN_RELATIONS if RELATIONS[name].condition(a, b))


def composed(first: frozenset[str], second: frozenset[str]) -> frozenset[str]:
    """The Allen relations `a` and `c` may stand in when `a` and `b` stand in one of `first` and `b` and `c` in
    one of `second`."""
    table = _composition()
    return frozenset().union(*(table[(r1, r2)] for r1 in first for r2 in second))


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


def contradiction(symbols: list[str], constraints: dict[tuple[str, str], frozenset[str]]) -> Contradiction | None:
    """A triangle of symbols whose constraints cannot hold together, found by path consistency over Allen's
    algebra: each pair's relations are narrowed to those its paths through a third symbol allow, until nothing
    changes or a pair has none left. Sound, so a pattern it names can never match (every match binds intervals
    that satisfy every constraint at once); it need not find every pattern that cannot."""
    full = frozenset(ALLEN_RELATIONS)
    allowed = {(a, b): full for a in symbols for b in symbols if a != b}
    for (a, b), names in constraints.items():
        allen = frozenset(allen_of(n) for n in names)
        allowed[(a, b)], allowed[(b, a)] = allen, frozenset(inverse(n) for n in allen)
    # The constrained pairs first, the last given first: where the constraints as given contradict, the one found
    # excluded is then the one written last.
    pairs = [*reversed(constraints), *(pair for pair in allowed if pair not in constraints)]
    changed = True
    while changed:
        changed = False
        for a, b in pairs:
            for via in symbols:
                if via in (a, b) or allowed[(a, via)] == full or allowed[(via, b)] == full:
                    continue
                implied = composed(allowed[(a, via)], allowed[(via, b)])
                narrowed = allowed[(a, b)] & implied
                if not narrowed:
                    return Contradiction(a, via, b, allowed[(a, via)], allowed[(via, b)], implied, allowed[(a, b)])
                if narrowed != allowed[(a, b)]:
                    allowed[(a, b)], allowed[(b, a)] = narrowed, frozenset(inverse(n) for n in narrowed)
                    changed = True
    return None
