"""The order in which PiePair results are joined into matches.

Greedy on estimated selectivity, as TPStream's cost model suggests (the TPStream paper, Table 3 priors): start with the
most selective constraint, then keep adding the most selective constraint that shares a symbol with what is
joined so far, so every join has a key to join on; a disconnected pattern falls back to a cross product
(bounded by the window) only when nothing connected is left.
"""

from __future__ import annotations

import math

from pielake.query.analyzer import PairConstraint

# TPStream Table 3 priors; inverses share their relation's value, followed-by is rarer than before.
_PRIORS = {"before": 0.445, "during": 0.03, "overlaps": 0.01, "starts": 0.0049, "finishes": 0.0049,
           "meets": 0.0049, "equals": 0.0006, "followed-by": 0.01}
SELECTIVITY = {**_PRIORS, "after": 0.445, "contains": 0.03, "overlapped-by": 0.01, "started-by": 0.0049,
               "finished-by": 0.0049, "met-by": 0.0049, "follows": 0.01}


def selectivity(constraint: PairConstraint) -> float:
    """Estimated fraction of situation pairs that satisfy the constraint (relations are exclusive)."""
    return min(1.0, math.fsum(SELECTIVITY[r] for r in constraint.relations))  # exact: no set-order rounding


def join_order(constraints: tuple[PairConstraint, ...]) -> tuple[PairConstraint, ...]:
    remaining = sorted(constraints, key=lambda c: (selectivity(c), c.id))
    ordered: list[PairConstraint] = []
    joined: set[str] = set()
    while remaining:
        connected = [c for c in remaining if {c.left, c.right} & joined]
        chosen = (connected or remaining)[0]
        remaining.remove(chosen)
        ordered.append(chosen)
        joined |= {chosen.left, chosen.right}
    return tuple(ordered)
