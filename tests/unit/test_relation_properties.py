"""Properties of the relations and of detection time, on random intervals (hypothesis)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pielake.query.evaluate import COMPARE
from pielake.semantics.detection import Endpoints, decision_time, possible_relations
from pielake.semantics.relations import (
    ALLEN_RELATIONS,
    ENDPOINTS,
    RELATIONS,
    allen_of,
    allen_where,
    contradiction,
)


@st.composite
def intervals(draw: st.DrawFn) -> Endpoints:
    ts = draw(st.integers(0, 12))
    return Endpoints(ts, draw(st.integers(ts + 1, 14)))


@given(intervals(), intervals())
def test_exactly_one_allen_relation_holds(a: Endpoints, b: Endpoints) -> None:
    assert sum(bool(RELATIONS[name].holds(a, b)) for name in ALLEN_RELATIONS) == 1


@given(intervals(), intervals(), st.booleans())
def test_each_relation_holds_exactly_when_its_inverse_holds_swapped(a: Endpoints, b: Endpoints, quiet: bool) -> None:
    for relation in RELATIONS.values():
        assert bool(relation.holds(a, b, quiet)) == bool(RELATIONS[relation.inverse].holds(b, a, quiet))


@given(intervals(), intervals())
def test_an_endpoint_comparison_holds_exactly_where_one_of_its_relations_holds(a: Endpoints, b: Endpoints) -> None:
    """`A.ts < B.ts` in PATTERN is read as the relations `allen_where` names: the reading is exact on any pair of
    situations, not just on the arrangements it was enumerated from."""
    [holding] = [name for name in ALLEN_RELATIONS if RELATIONS[name].holds(a, b)]
    for left, right in itertools.product(ENDPOINTS, repeat=2):
        for op, compare in COMPARE.items():
            assert compare(getattr(a, left), getattr(b, right)) == (holding in allen_where(left, op, right))


@given(intervals(), intervals(), st.booleans())
def test_followed_by_implies_before(a: Endpoints, b: Endpoints, quiet: bool) -> None:
    if RELATIONS["followed-by"].holds(a, b, quiet):
        assert RELATIONS["before"].holds(a, b)


@given(intervals(), intervals())
def test_a_single_relation_is_decided_at_the_third_endpoint(a: Endpoints, b: Endpoints) -> None:
    [holding] = [name for name in ALLEN_RELATIONS if RELATIONS[name].holds(a, b)]
    third = sorted([a.ts, a.te, b.ts, b.te])[2]
    decided = decision_time(frozenset({holding}), a, b, range(0, 16))
    intersect = a.ts < b.te and b.ts < a.te
    assert decided == third
    assert decided == (min(a.te, b.te) if intersect else max(a.ts, b.ts))  # the closed form in TPStream's digest


@given(intervals(), intervals(), st.integers(0, 15))
def test_what_is_still_possible_always_includes_what_will_hold(a: Endpoints, b: Endpoints, now: int) -> None:
    if now < max(a.ts, b.ts):
        return
    [holding] = [name for name in ALLEN_RELATIONS if RELATIONS[name].holds(a, b)]
    assert holding in possible_relations(a, b, now)


@given(intervals(), intervals(), st.sets(st.sampled_from(ALLEN_RELATIONS), min_size=1))
def test_a_decided_constraint_holds_in_the_end(a: Endpoints, b: Endpoints, relations: set[str]) -> None:
    decided = decision_time(frozenset(relations), a, b, range(0, 16))
    holds = any(RELATIONS[name].holds(a, b) for name in relations)
    assert (decided is not None) == holds


SPANS = [Endpoints(ts, te) for ts in range(6) for te in range(ts + 1, 6)]  # every arrangement of three intervals
SYMBOLS = ["A", "B", "C"]


@st.composite
def triangles(draw: st.DrawFn) -> dict[tuple[str, str], frozenset[str]]:
    """A random set of relations on A and B, on B and C, and maybe on A and C (closing the cycle)."""
    names = st.frozensets(st.sampled_from(sorted(RELATIONS)), min_size=1, max_size=5)
    pairs = [("A", "B"), ("B", "C"), *([("A", "C")] if draw(st.booleans()) else [])]
    return {pair: draw(names) for pair in pairs}


def satisfiable(constraints: dict[tuple[str, str], frozenset[str]]) -> bool:
    """Some three intervals satisfy every constraint (a gap condition aside: `followed-by` as `before`)."""
    return any(all(any(RELATIONS[allen_of(n)].holds(bound[a], bound[b]) for n in names)
                   for (a, b), names in constraints.items())
               for spans in itertools.product(SPANS, repeat=3) for bound in [dict(zip(SYMBOLS, spans, strict=True))])


@settings(max_examples=150, deadline=None)
@given(triangles())
def test_three_symbols_contradict_exactly_when_no_three_intervals_satisfy_them(
        constraints: dict[tuple[str, str], frozenset[str]]) -> None:
    """Path consistency over the composition table is exact for three symbols: it names a contradiction where no
    three intervals satisfy the constraints, and only there (for more symbols it is sound, not complete)."""
    assert (contradiction(SYMBOLS, constraints) is None) == satisfiable(constraints)


def test_a_contradiction_is_found_along_a_longer_cycle() -> None:
    chain = {("A", "B"): frozenset({"meets"}), ("B", "C"): frozenset({"meets"}), ("C", "D"): frozenset({"meets"}),
             ("A", "D"): frozenset({"met-by"})}
    assert contradiction([*SYMBOLS, "D"], chain) is not None
    assert contradiction([*SYMBOLS, "D"], {**chain, ("A", "D"): frozenset({"before"})}) is None


def meets_chain(n: int) -> tuple[list[str], dict[tuple[str, str], frozenset[str]]]:
    """S0 meets S1, S1 meets S2, …: every later symbol of the chain starts after an earlier one ends."""
    symbols = [f"S{i}" for i in range(n)]
    return symbols, {(symbols[i], symbols[i + 1]): frozenset({"meets"}) for i in range(n - 1)}


def test_a_contradiction_is_found_along_a_cycle_of_a_hundred_symbols() -> None:
    """What a chain implies reaches its far end one narrowing at a time; the first symbol is then before the last."""
    symbols, chain = meets_chain(100)
    found = contradiction(symbols, {**chain, ("S0", "S99"): frozenset({"after"})})
    assert found is not None and found.implied <= {"before"}
    assert contradiction(symbols, {**chain, ("S0", "S99"): frozenset({"before"})}) is None


def test_path_consistency_gives_up_after_its_looks_finding_nothing() -> None:
    """A bounded amount of work, so that a pattern of hundreds of symbols is checked in about a second: given the
    looks at one pair's triangles alone, the cycle's contradiction is not found (a warning missed, never one
    given wrongly); given the default, it is."""
    symbols, chain = meets_chain(100)
    closed = {**chain, ("S0", "S99"): frozenset({"after"})}
    assert contradiction(symbols, closed, looks=len(symbols)) is None
    assert contradiction(symbols, closed) is not None
