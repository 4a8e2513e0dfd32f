"""Properties of the relations and of detection time, on random intervals (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pielake.semantics.detection import Endpoints, decision_time, possible_relations
from pielake.semantics.relations import ALLEN_RELATIONS, RELATIONS


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
