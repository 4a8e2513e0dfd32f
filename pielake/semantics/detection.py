"""When is a constraint decided? docs/semantics.md §5, computed by brute force over what is still possible.

Knowledge at time t is every event with time <= t. A situation's `te` is known once it is <= t; otherwise it
is only known to be later than t. A constraint on a pair is decided at the earliest t (no earlier than both
starts) at which every way the unknown ends could still turn out makes the constraint hold.

Only the order of endpoints matters, so the unknown ends range over two values past t (`t+1`, `t+2`): that
covers "both equal", "A first" and "B first", every order an unknown pair can take.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pielake.semantics.relations import ALLEN_RELATIONS, RELATIONS


@dataclass(frozen=True)
class Endpoints:
    """A situation's interval as far as it is known: `te` None means open (later than every event seen)."""

    ts: Any
    te: Any | None = None

    def at(self, now: Any) -> Endpoints:
        """The interval as known at `now`: an end after `now` is not known yet."""
        return self if self.te is not None and self.te <= now else Endpoints(self.ts, None)


def completions(a: Endpoints, b: Endpoints, now: Any) -> Iterator[tuple[Endpoints, Endpoints]]:
    """Every order the ends of `a` and `b` unknown at `now` can still take."""
    a, b = a.at(now), b.at(now)
    a_ends = [a.te] if a.te is not None else [now + 1, now + 2]
    b_ends = [b.te] if b.te is not None else [now + 1, now + 2]
    for a_te in a_ends:
        for b_te in b_ends:
            yield Endpoints(a.ts, a_te), Endpoints(b.ts, b_te)


def holds_any(relations: Iterable[str], a: Endpoints, b: Endpoints, quiet_gap: bool) -> bool:
    return any(RELATIONS[name].holds(a, b, quiet_gap) for name in relations)


def is_decided(relations: frozenset[str], a: Endpoints, b: Endpoints, now: Any, quiet_gap: bool = False) -> bool:
    """True when, knowing the events up to `now`, the pair satisfies the constraint however it goes on.

    `quiet_gap` says whether the events between the earlier situation's end and the later one's start
    satisfy neither predicate (followed-by / follows); those events are all known once both have started.
    """
    if a.ts > now or b.ts > now:
        return False
    return all(holds_any(relations, ca, cb, quiet_gap) for ca, cb in completions(a, b, now))


def possible_relations(a: Endpoints, b: Endpoints, now: Any, quiet_gap: bool = False) -> frozenset[str]:
    """The relations that may still turn out to hold between `a` and `b` given the events up to `now`."""
    return frozenset(name for name in RELATIONS
                     if any(RELATIONS[name].holds(ca, cb, quiet_gap) for ca, cb in completions(a, b, now)))


def decision_time(relations: frozenset[str], a: Endpoints, b: Endpoints, times: Iterable[Any],
                  quiet_gap: bool = False) -> Any | None:
    """The earliest of `times` (the key's event times, ascending) at which the constraint is decided."""
    start = max(a.ts, b.ts)
    for now in times:
        if now >= start and is_decided(relations, a, b, now, quiet_gap):
            return now
    return None


# ---------------------------------------------------------------- symbolic rules, for `explain`

# One canonical instance per Allen relation: A and B on small integer endpoints.
CANONICAL: dict[str, tuple[Endpoints, Endpoints]] = {
    "before": (Endpoints(0, 1), Endpoints(2, 3)),
    "after": (Endpoints(2, 3), Endpoints(0, 1)),
    "meets": (Endpoints(0, 1), Endpoints(1, 2)),
    "met-by": (Endpoints(1, 2), Endpoints(0, 1)),
    "overlaps": (Endpoints(0, 2), Endpoints(1, 3)),
    "overlapped-by": (Endpoints(1, 3), Endpoints(0, 2)),
    "starts": (Endpoints(0, 1), Endpoints(0, 2)),
    "started-by": (Endpoints(0, 2), Endpoints(0, 1)),
    "during": (Endpoints(1, 2), Endpoints(0, 3)),
    "contains": (Endpoints(0, 3), Endpoints(1, 2)),
    "finishes": (Endpoints(1, 2), Endpoints(0, 2)),
    "finished-by": (Endpoints(0, 2), Endpoints(1, 2)),
    "equals": (Endpoints(0, 1), Endpoints(0, 1)),
}
assert set(CANONICAL) == set(ALLEN_RELATIONS)


def decided_at_endpoint(relations: frozenset[str], holding: str) -> str | None:
    """For a pair in relation `holding`, which endpoint decides the constraint (e.g. 'A.te'), or None.

    followed-by/follows are judged on their `before`/`after` instance with a quiet gap.
    """
    base = {"followed-by": "before", "follows": "after"}.get(holding, holding)
    a, b = CANONICAL[base]
    quiet = holding in ("followed-by", "follows")
    labelled = sorted([(a.ts, 0, "A.ts"), (b.ts, 0, "B.ts"), (a.te, 1, "A.te"), (b.te, 1, "B.te")])
    for now, _, _label in labelled:
        if is_decided(relations, a, b, now, quiet):
            names = [lab for t, _, lab in labelled if t == now]
            return " = ".join(names)
    return None
