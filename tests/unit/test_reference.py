"""The brute-force reference on hand-built event lists (docs/semantics.md §2-§5)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pielake.errors import PielakeError
from pielake.query.analyzer import load_query
from pielake.semantics.reference import derive_situations, find_matches
from pielake.semantics.relations import inverse
from pielake.vocabulary import COMPLETE, PROVISIONAL, RETRACTED
from tests.helpers import drawn


def query(pattern: str, within: str = "100 s", a: str = "a", b: str = "b", returns: str = "") -> str:
    ret = f" RETURN {returns}" if returns else ""
    return f"FROM S PARTITION BY key DEFINE A AS {a}, B AS {b} PATTERN {pattern} WITHIN {within}{ret}"


def pairs(pattern: str, events: list[dict], **kw: str) -> list[tuple]:
    """(A.ts, A.te, B.ts, B.te, detected_at, completed_at, status) of every match."""
    plan = load_query(query(pattern, **kw))
    return [(m.situation("A").ts, m.situation("A").te, m.situation("B").ts, m.situation("B").te,
             m.detected_at, m.completed_at, m.status) for m in find_matches(events, plan)]


# relation, a, b, expected (A.ts, A.te, B.ts, B.te, detected_at, completed_at, status)
RELATION_CASES = [
    ("before", "XX......", "....XX..", [(0, 2, 4, 6, 4, 6, COMPLETE)]),
    ("meets", "XX....", "..XX..", [(0, 2, 2, 4, 2, 4, COMPLETE)]),
    ("overlaps", "XXX...", ".XXX..", [(0, 3, 1, 4, 3, 4, COMPLETE)]),
    ("starts", "XX....", "XXX...", [(0, 2, 0, 3, 2, 3, COMPLETE)]),
    ("during", ".X....", "XXX...", [(1, 2, 0, 3, 2, 3, COMPLETE)]),
    ("finishes", ".XX...", "XXX...", [(1, 3, 0, 3, 3, 3, COMPLETE)]),
    ("equals", ".XX..", ".XX..", [(1, 3, 1, 3, 3, 3, COMPLETE)]),
    ("followed-by", "XX......", "...X.XX.", [(0, 2, 3, 4, 3, 4, COMPLETE)]),
]


@pytest.mark.parametrize(("relation", "a", "b", "expected"), RELATION_CASES, ids=[c[0] for c in RELATION_CASES])
def test_each_relation_is_found_with_its_detection_time(relation: str, a: str, b: str, expected: list) -> None:
    assert pairs(f"A {relation} B", drawn(a=a, b=b)) == expected


@pytest.mark.parametrize(("relation", "a", "b", "expected"), RELATION_CASES, ids=[c[0] for c in RELATION_CASES])
def test_each_inverse_relation_finds_the_same_pairs_with_roles_swapped(relation: str, a: str, b: str,
                                                                       expected: list) -> None:
    swapped = [(bts, bte, ats, ate, d, c, s) for ats, ate, bts, bte, d, c, s in expected]
    assert pairs(f"A {inverse(relation)} B", drawn(a=b, b=a)) == swapped


@pytest.mark.parametrize(("relation", "a", "b"), [(r, a, b) for r, a, b, _ in RELATION_CASES],
                         ids=[c[0] for c in RELATION_CASES])
def test_writing_the_inverse_in_the_other_orientation_is_the_same_constraint(relation: str, a: str, b: str) -> None:
    events = drawn(a=a, b=b)
    assert pairs(f"B {inverse(relation)} A", events) == pairs(f"A {relation} B", events)


def test_before_pairs_every_later_situation_but_followed_by_only_the_next() -> None:
    events = drawn(a="XX......", b="...X.XX.")
    assert [p[:4] for p in pairs("A before B", events)] == [(0, 2, 3, 4), (0, 2, 5, 7)]
    assert [p[:4] for p in pairs("A followed-by B", events)] == [(0, 2, 3, 4)]


def test_followed_by_needs_at_least_one_quiet_event_between() -> None:
    assert pairs("A followed-by B", drawn(a="XX..", b="..XX")) == []  # that is meets


def test_situations_close_at_the_next_event_and_stay_open_at_the_end() -> None:
    plan = load_query(query("A meets B"))
    found = [(s.symbol, s.ts, s.te) for s in derive_situations(drawn(a="X.XX", b=".X.."), plan)]
    assert found == [("A", 0, 1), ("A", 2, None), ("B", 1, 2)]


def test_a_gap_in_arrival_stretches_a_situation() -> None:
    events = [{"key": "k", "ts": t, "a": v, "b": False} for t, v in [(0, True), (1, True), (50, False)]]
    plan = load_query(query("A meets B"))
    assert [(s.ts, s.te) for s in derive_situations(events, plan)] == [(0, 50)]


def test_an_undecided_pair_with_open_situations_is_not_a_match_yet() -> None:
    # A = [0, open), B = [1, open): overlaps, finished-by or contains, not yet known which.
    assert pairs("A overlaps B", drawn(a="XXX", b=".XX")) == []


def test_a_whole_prefix_group_is_decided_at_the_later_start() -> None:
    events = drawn(a="XXX", b=".XX")
    assert pairs("A overlaps; finished-by; contains B", events) == [(0, None, 1, None, 1, None, PROVISIONAL)]


def test_starts_equals_started_by_is_decided_at_the_common_start() -> None:
    events = drawn(a=".XXX", b=".XX.")
    expected = [(1, None, 1, 3, 1, None, PROVISIONAL)]
    assert pairs("A starts; equals; started-by B", events) == expected


def test_a_partial_prefix_group_waits_for_the_third_endpoint() -> None:
    events = drawn(a=".XXX", b=".XX.")  # A started-by B, known at B.te = 3
    assert pairs("A equals; started-by B", events) == [(1, None, 1, 3, 3, None, PROVISIONAL)]


def test_relations_at_the_first_event_of_a_key_are_found() -> None:
    assert pairs("A starts B", drawn(a="X..", b="XX.")) == [(0, 1, 0, 2, 1, 2, COMPLETE)]


@pytest.mark.parametrize(("within", "expected"), [
    ("10 s", [(0, 2, 8, 10, 8, 10, COMPLETE)]),  # span max(te) - min(ts) = 10: inclusive edge
    ("9 s", [(0, 2, 8, 10, 8, None, RETRACTED)]),  # reported at 8 (8 - 0 <= 9), fails when B closes
    ("7 s", []),  # already outside the window when decided: never reported
])
def test_window_edges_are_inclusive(within: str, expected: list) -> None:
    assert pairs("A before B", drawn(a="XX........", b="........XX."), within=within) == expected


def test_an_open_match_past_its_window_is_retracted() -> None:
    events = drawn(a="X.X.......", b="...XXXXXXX")  # A2 = [2, 3) meets B, so only A1 is before B
    assert pairs("A before B", events, within="8 s") == [(0, 1, 3, None, 3, None, RETRACTED)]  # 9 - 0 > 8


@pytest.mark.parametrize(("bound", "expected"), [
    ("AT LEAST 3 s", [(0, 3, 5, 6, 5, 6, COMPLETE)]),
    ("AT MOST 2 s", [(7, 9, 10, 11, 10, 11, COMPLETE)]),
    ("BETWEEN 2 s AND 2 s", [(7, 9, 10, 11, 10, 11, COMPLETE)]),
])
def test_duration_constraints_filter_situations_bounds_inclusive(bound: str, expected: list) -> None:
    events = drawn(a="XXX....XX....X", b=".....X....X...")
    # A situations: [0,3) (3 s), [7,9) (2 s), [13, open) never qualifies
    plan = load_query(f"FROM S PARTITION BY key DEFINE A AS a {bound}, B AS b PATTERN A followed-by B WITHIN 100 s")
    found = [(m.situation("A").ts, m.situation("A").te, m.situation("B").ts, m.situation("B").te,
              m.detected_at, m.completed_at, m.status) for m in find_matches(events, plan)]
    assert found == expected


def test_a_duration_constrained_situation_is_not_detected_before_it_ends() -> None:
    events = drawn(a="XXXX..", b=".XX...")
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a AT LEAST 2 s, B AS b PATTERN A contains B WITHIN 100 s")
    [match] = find_matches(events, plan)
    assert (match.detected_at, match.status) == (4, COMPLETE)  # contains decided at B.te = 3, A ends at 4


def test_self_pairs_bind_one_situation_to_both_symbols_when_the_constraint_allows() -> None:
    events = drawn(a="XX.XX.")
    assert pairs("A equals B", events, b="a") == [(0, 2, 0, 2, 2, 2, COMPLETE), (3, 5, 3, 5, 5, 5, COMPLETE)]
    assert pairs("A before B", events, b="a") == [(0, 2, 3, 5, 3, 5, COMPLETE)]
    assert pairs("A followed-by B", events, b="a") == [(0, 2, 3, 5, 3, 5, COMPLETE)]


def test_keys_never_mix() -> None:
    events = drawn(key="car1", a="XX...", b="....") + drawn(key="car2", a="....", b="..XX.")
    assert pairs("A before B", events) == []


def test_disconnected_patterns_are_a_cross_product_per_key() -> None:
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b, C AS c, D AS d "
                      "PATTERN A meets B AND C meets D WITHIN 100 s")
    events = drawn(a="XX......", b="..X.....", c="....X...", d=".....X..")
    [match] = find_matches(events, plan)
    assert [(s, sit.ts) for s, sit in match.bindings] == [("A", 0), ("B", 2), ("C", 4), ("D", 5)]
    assert match.detected_at == 5


def test_return_aggregates_read_the_runs_own_events_not_the_closing_one() -> None:
    events = [{"key": "k", "ts": t, "a": a, "b": b, "speed": s}
              for t, a, b, s in [(0, True, False, 10), (1, True, True, 20), (2, False, True, 30),
                                 (3, False, True, None), (4, False, False, 99)]]
    plan = load_query(query("A overlaps B", returns="first(B.speed) AS f, last(B.speed) AS l, avg(B.speed) AS av, "
                                                    "count(B.speed) AS n, sum(A.speed) AS sa, duration(B) AS d, "
                                                    "B.te - A.ts AS span, key AS car"))
    [match] = find_matches(events, plan)
    assert dict(match.values) == {"f": 20, "l": None, "av": 25.0, "n": 2, "sa": 30, "d": 3, "span": 4, "car": "k"}


def test_predicates_that_are_null_count_as_false() -> None:
    events = [{"key": "k", "ts": t, "x": x, "b": False} for t, x in enumerate([5, None, 5])]
    plan = load_query(query("A meets B", a="x > 1"))
    assert [(s.ts, s.te) for s in derive_situations(events, plan)] == [(0, 1), (2, None)]


def test_time_units_scale_the_window() -> None:
    events = drawn(a="XX........", b="........XX.")  # span 10 units
    plan = load_query(query("A before B", within="10 ms"))
    assert [m.status for m in find_matches(events, plan, time_unit_seconds=0.001)] == [COMPLETE]
    assert find_matches(events, plan, time_unit_seconds=Fraction(1, 100)) == []


def spans(*rows: tuple[int, int, bool, bool]) -> list[dict]:
    """Interval rows of key k: (start, end, a, b)."""
    return [{"key": "k", "ts": s, "te_": e, "a": a, "b": b} for s, e, a, b in rows]


def interval_situations(rows: list[dict], pattern: str = "A overlaps B") -> list[tuple]:
    plan = load_query(query(pattern))
    return [(s.symbol, s.ts, s.te) for s in derive_situations(rows, plan, end_column="te_")]


def test_interval_rows_that_overlap_or_touch_coalesce_into_one_situation() -> None:
    rows = spans((0, 4, True, False), (2, 6, True, False), (6, 8, True, False), (9, 12, False, False),
                 (13, 14, False, False))
    assert interval_situations(rows) == [("A", 0, 8)]


def test_a_gap_between_interval_rows_ends_a_situation() -> None:
    rows = spans((0, 3, True, False), (5, 7, True, False), (10, 11, False, False))
    assert interval_situations(rows) == [("A", 0, 3), ("A", 5, 7)]


def test_an_interval_situation_is_open_until_the_latest_start_reaches_its_end() -> None:
    # The row starting at 3 covers 3..9; at the latest start (5) the union's end (9) is not known yet.
    rows = spans((0, 2, True, False), (3, 9, True, False), (5, 6, False, True))
    assert interval_situations(rows) == [("A", 0, 2), ("A", 3, None), ("B", 5, None)]
    assert interval_situations([*rows, *spans((9, 10, False, False))]) == [("A", 0, 2), ("A", 3, 9), ("B", 5, 6)]


def test_a_row_holds_where_it_covers_whatever_rows_overlap_it() -> None:
    # B's row [2, 4) lies inside A's [0, 10): A holds throughout, B only on [2, 4).
    rows = spans((0, 10, True, False), (2, 4, False, True), (12, 13, False, False))
    plan = load_query(query("B during A"))
    [match] = find_matches(rows, plan, end_column="te_")
    assert (match.situation("A").ts, match.situation("A").te, match.situation("B").ts, match.situation("B").te,
            match.detected_at, match.status) == (0, 10, 2, 4, 4, COMPLETE)


def test_interval_aggregates_read_the_rows_of_the_situation() -> None:
    rows = [{"key": "k", "ts": s, "te_": e, "a": a, "b": b, "speed": v} for s, e, a, b, v in
            [(0, 5, True, False, 10), (1, 3, False, True, 99), (3, 8, True, False, 20), (9, 10, False, False, 5)]]
    plan = load_query(query("A contains B", returns="first(A.speed) AS f, last(A.speed) AS l, count(A.speed) AS n, "
                                                    "duration(A) AS d"))
    [match] = find_matches(rows, plan, end_column="te_")
    assert dict(match.values) == {"f": 10, "l": 20, "n": 2, "d": 8}


def test_interval_rows_sharing_a_start_are_read_in_end_order() -> None:
    rows = [{"key": "k", "ts": s, "te_": e, "a": a, "b": b, "speed": v} for s, e, a, b, v in
            [(0, 9, True, False, 30), (0, 4, True, False, 10), (2, 3, False, True, 0), (5, 6, True, False, 20),
             (10, 11, False, False, 0)]]
    plan = load_query(query("A contains B", returns="first(A.speed) AS f, last(A.speed) AS l, count(A.speed) AS n"))
    [match] = find_matches(rows, plan, end_column="te_")
    assert (match.situation("A").ts, match.situation("A").te) == (0, 9)
    assert dict(match.values) == {"f": 10, "l": 20, "n": 3}
    with pytest.raises(PielakeError, match="unique per key"):
        interval_situations(spans((0, 4, True, False), (0, 4, False, True)))


def test_interval_rows_must_end_after_they_start() -> None:
    with pytest.raises(PielakeError, match="end after it starts"):
        interval_situations(spans((0, 0, True, False)))
