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
