"""A query over another query's matches (docs/semantics.md §1): the reference's matches stream, by hand and on
random upstream streams cut at random times, level by level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pielake.errors import QueryError
from pielake.explain import explain
from pielake.query.analyzer import QueryPlan, load_query, runnable
from pielake.semantics.reference import StreamEvents, derive_situations_of, find_matches_of, matches_stream
from pielake.semantics.relations import RELATIONS
from pielake.streams import SchemaError, StreamSchema, load_schema, save_schema
from pielake.vocabulary import COMPLETE, RETRACTED
from tests.helpers import drawn

UPSTREAM = ("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A {relations} B WITHIN {within} "
            "RETURN count(B.b) AS nb")
DOWNSTREAM = ("FROM matches_up M PARTITION BY key DEFINE X AS M.nb >= 1, Y AS M.b_te - M.b_ts >= 2 "
              "PATTERN X {relations} Y WITHIN 20 s")


def upstream(relations: str = "meets", within: str = "3 s") -> QueryPlan:
    return load_query(UPSTREAM.format(relations=relations, within=within), "up")


def rows_of(events: list[dict]) -> StreamEvents:
    return matches_stream({"S": StreamEvents(events)}, upstream())


def quiet(*times: int) -> list[dict]:
    """Events satisfying neither symbol: they only move the key's time on."""
    return [{"key": "k", "ts": t, "a": False, "b": False} for t in times]


def test_a_complete_match_is_a_row_from_its_earliest_start_to_its_completion() -> None:
    stream = rows_of(drawn(a="XX......X.", b="..X......X"))
    # A@[0,2) meets B@[2,3), complete at 3; A@[8,9) meets B@[9,...), still open, is no row.
    assert stream.rows == [{"key": "k", "started_at": 0, "completed_at": 3, "detected_at": 2, "a_ts": 0, "a_te": 2,
                            "b_ts": 2, "b_te": 3, "nb": 1}]
    assert stream.known_until == {("k",): 6}  # the key's time 9, less the 3 s window
    assert (stream.time_column, stream.end_column, stream.order_columns) == ("started_at", "completed_at",
                                                                            ("a_ts", "b_ts"))


def test_a_complete_match_waits_until_no_match_starting_earlier_can_still_complete() -> None:
    events = drawn(a="XX......X.", b="..X......X")
    # B closes at 10: the second match completes, but it starts at 8, after the horizon 10 - 3.
    waiting = rows_of([*events, *quiet(10)])
    assert [r["started_at"] for r in waiting.rows] == [0] and waiting.known_until == {("k",): 7}
    admitted = rows_of([*events, *quiet(10, 11)])
    assert [(r["started_at"], r["completed_at"]) for r in admitted.rows] == [(0, 3), (8, 10)]


def test_a_situation_over_matches_closes_once_the_horizon_reaches_its_end() -> None:
    down = load_query(DOWNSTREAM.format(relations="before"), "down")
    stream = rows_of([*drawn(a="XX......X.", b="..X......X"), *quiet(10, 11)])
    situations = derive_situations_of({"matches_up": stream}, down)
    # Rows [0, 3) and [8, 10) with the horizon at 8: the first situation has closed, the second has not.
    assert [(s.symbol, s.ts, s.te) for s in situations if s.symbol == "X"] == [("X", 0, 3), ("X", 8, None)]


def test_rows_sharing_a_start_and_an_end_are_distinct_matches_in_binding_order() -> None:
    # A@[0,5) contains both B@[1,2) and B@[3,4): two matches spanning [0, 5).
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A contains B WITHIN 10 s "
                      "RETURN count(B.b) AS nb", "up")
    events = [*drawn(a="XXXXX", b=".X.X."), *quiet(5, 20)]
    stream = matches_stream({"S": StreamEvents(events)}, plan)
    assert [(r["started_at"], r["completed_at"], r["b_ts"]) for r in stream.rows] == [(0, 5, 1), (0, 5, 3)]


def test_explain_reads_matches_as_interval_rows_and_the_pipeline_runs_them() -> None:
    down = load_query(DOWNSTREAM.format(relations="before"), "down")
    text = explain(down)
    assert "FROM matches_up M (the complete matches of query up)" in text
    assert "unions of the interval rows" in text
    assert runnable(down) is down


def test_a_horizon_is_a_whole_time_unit_at_or_before_the_key_s_time_less_the_window() -> None:
    events = [*drawn(a="XX......X.", b="..X......X"), *quiet(10, 11)]
    stream = matches_stream({"S": StreamEvents(events)}, upstream(within="2500 ms"))
    assert stream.known_until == {("k",): 8}  # 11 - 2.5 s, rounded down to a whole second


MATCHES_SCHEMA = StreamSchema("matches_up", ("key",), "started_at", "s",
                              (("key", "STRING"), ("started_at", "BIGINT"), ("completed_at", "BIGINT"),
                               ("a_ts", "BIGINT"), ("nb", "BIGINT")),
                              "completed_at", horizon_lag=3, order_columns=("a_ts",))


def test_a_matches_stream_s_schema_keeps_its_horizon_lag_and_order_in_the_lake(tmp_path: Path) -> None:
    path = save_schema(MATCHES_SCHEMA, tmp_path)
    assert load_schema("matches_up", tmp_path) == MATCHES_SCHEMA
    assert MATCHES_SCHEMA.natural_key == ("key", "started_at", "completed_at", "a_ts")
    path.write_text(path.read_text().replace("horizon_lag: 3", "horizon_lag: -1"))
    with pytest.raises(SchemaError, match="horizon_lag is a whole number >= 0"):
        load_schema("matches_up", tmp_path)


def test_a_query_over_matches_partitions_by_its_upstream_s_key_alone() -> None:
    schema = MATCHES_SCHEMA
    text = "FROM matches_up M PARTITION BY key, nb DEFINE X AS M.nb >= 1, Y AS M.nb < 1 PATTERN X before Y WITHIN 9 s"
    with pytest.raises(QueryError) as caught:
        load_query(text, "down", schema)
    first = caught.value.first
    assert (first.line, first.col, first.highlight) == (1, 6, "matches_up")
    assert first.description.startswith("a query over matches partitions by its upstream's key (key), not by nb")


def test_a_query_reading_its_own_matches_is_an_error_naming_the_stream() -> None:
    with pytest.raises(QueryError) as caught:
        load_query(DOWNSTREAM.format(relations="before"), "up")
    assert (caught.value.first.description, caught.value.first.col) == ("query up reads its own matches", 6)


# ---------------------------------------------------------------- level by level, on random streams

RELATION_LISTS = st.lists(st.sampled_from(sorted(RELATIONS)), min_size=1, max_size=3).map(";".join)


def described(match: Any) -> tuple:
    return tuple((name, s.ts) for name, s in match.bindings)


@settings(max_examples=400, deadline=None)
# A match as long as the upstream's window, cut just before it completes: it starts at the horizon, and is no row.
@example(flags=[(True, False), (False, True), (False, False)], cut=1, up_relations="meets", down_relations="before")
@given(flags=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=10), cut=st.integers(0, 9),
       up_relations=RELATION_LISTS, down_relations=RELATION_LISTS)
def test_each_level_tells_only_final_facts_while_its_input_is_cut_short(flags: list, cut: int, up_relations: str,
                                                                         down_relations: str) -> None:
    """The upstream's events cut at any time, as a micro-batch leaves them: the matches stream's rows then are
    rows of the whole history's, every row of the whole history up to the horizon is there, and the downstream's
    matches are final facts, as for any stream (docs/semantics.md §1, §5, §7)."""
    events = [{"key": "k", "ts": t, "a": a, "b": b} for t, (a, b) in enumerate(flags)]
    up = upstream(up_relations, "2 s")
    down = load_query(DOWNSTREAM.format(relations=down_relations), "down")
    whole = matches_stream({"S": StreamEvents(events)}, up)
    early = matches_stream({"S": StreamEvents(events[:cut + 1])}, up)
    horizon = early.known_until.get(("k",))
    assert all(row in whole.rows for row in early.rows)
    assert [r for r in whole.rows if horizon is not None and r["started_at"] <= horizon] == early.rows

    later = {described(m): m for m in find_matches_of({"matches_up": whole}, down)}
    found = find_matches_of({"matches_up": early}, down)
    for m in found:
        full = later[described(m)]
        assert full.detected_at == m.detected_at
        if m.status in (COMPLETE, RETRACTED):
            assert (full.status, full.completed_at) == (m.status, m.completed_at)
    if early.rows:
        assert {k for k, m in later.items() if m.detected_at <= horizon} <= {described(m) for m in found}
