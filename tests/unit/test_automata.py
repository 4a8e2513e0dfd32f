"""PiePair automata: their shape, their validation, and agreement with the reference on random streams."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pielake.query.analyzer import load_query
from pielake.semantics.automata import (
    AUTOMATA,
    Action,
    MalformedAutomatonError,
    PairAutomaton,
    Transition,
    minterm,
    recognise,
    validate,
)
from pielake.semantics.reference import find_matches
from pielake.semantics.relations import RANGE_JOIN_RELATIONS, RELATIONS


def test_every_relation_but_before_and_after_has_an_automaton() -> None:
    assert set(AUTOMATA) == set(RELATIONS) - RANGE_JOIN_RELATIONS


def test_overlaps_unfolds_to_the_expected_transitions() -> None:
    assert AUTOMATA["overlaps"].unfolded() == {
        ("start", "Z", "take", "armed"), ("armed", "Z", "take", "armed"), ("armed", "E", "take", "body"),
        ("body", "E", "take", "body"), ("body", "I", "trigger", "open"),
        ("open", "I", "ignore", "open"), ("open", "E", "ignore", "open"),
        ("open", "O", "complete", "done"), ("open", "Z", "complete", "done"),
    }


def test_equals_may_start_at_a_keys_first_event_and_completes_when_it_triggers() -> None:
    unfolded = AUTOMATA["equals"].unfolded()
    assert ("start", "^", "take", "armed") in unfolded
    assert ("body", "O", "trigger", "done") in unfolded
    assert AUTOMATA["equals"].completion_endpoint is None


def test_inverse_automata_swap_the_roles_of_i_and_z() -> None:
    assert AUTOMATA["contains"].sre == "Z · E+ · Z · (Z|E)* (O|I)"
    assert AUTOMATA["during"].sre == "I · E+ · I · (I|E)* (O|Z)"


@pytest.mark.parametrize(("transitions", "message"), [
    ((Transition("start", frozenset("Z"), Action.TAKE, "armed"),
      Transition("start", frozenset("Z"), Action.TAKE, "body")), "two transitions from start on Z"),
    ((Transition("start", frozenset("Q"), Action.TRIGGER, "done"),), "reads unknown symbols ['Q']"),
    ((Transition("start", frozenset("Z"), Action.TAKE, "armed"),), "needs exactly one trigger transition, has 0"),
    ((Transition("start", frozenset("Z"), Action.TRIGGER, "open"),), "the final state cannot be reached"),
])
def test_malformed_automata_are_rejected_with_the_defect_named(transitions: tuple, message: str) -> None:
    with pytest.raises(MalformedAutomatonError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(PairAutomaton("broken", "", transitions, "A.te", None))


flags = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=16)


@pytest.mark.parametrize("relation", sorted(AUTOMATA))
@settings(max_examples=150, deadline=None)
@given(events=flags)
def test_automaton_recognises_exactly_the_pairs_the_reference_finds(relation: str, events: list) -> None:
    stream = [{"ts": t, "a": a, "b": b} for t, (a, b) in enumerate(events)]
    plan = load_query(f"FROM S DEFINE A AS a, B AS b PATTERN A {relation} B WITHIN 1 day")
    recognised = sorted((r.trigger, r.completion) for r in recognise(AUTOMATA[relation],
                                                                      [minterm(a, b) for a, b in events]))
    expected = sorted((m.detected_at, m.completed_at) for m in find_matches(stream, plan))
    assert recognised == expected
