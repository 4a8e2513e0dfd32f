"""A query over several streams (docs/semantics.md §1, §5): the analyzer's checks, `explain`, and the reference's
matches, on hand-built cases and on random ones against the same query over one stream."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pielake.errors import QueryError
from pielake.exitcodes import EXIT_OK, EXIT_USAGE
from pielake.explain import explain
from pielake.pipeline.job import RunRequest
from pielake.query.analyzer import QueryPlan, load_query
from pielake.semantics.reference import StreamEvents, derive_situations_of, find_matches, find_matches_of
from pielake.semantics.relations import RELATIONS
from pielake.streams import StreamSchema, events_files
from pielake.vocabulary import COMPLETE, PROVISIONAL, RETRACTED
from tests.helpers import drawn
from tests.unit.test_cli import invoke

TWO = "FROM S, R PARTITION BY key DEFINE A AS S.a, B AS R.b PATTERN {pattern} WITHIN {within}"


def plan(pattern: str = "A during B", within: str = "100 s") -> QueryPlan:
    return load_query(TWO.format(pattern=pattern, within=within), "two")


def schema(name: str, *columns: str, unit: str = "s", keys: tuple[str, ...] = ()) -> StreamSchema:
    return StreamSchema(name, keys, "ts", unit, (("ts", "BIGINT"), *(tuple(c.split()) for c in columns)))


def error_of(query: str, *schemas: StreamSchema) -> tuple[str, int, int, str | None]:
    with pytest.raises(QueryError) as caught:
        load_query(query, "q", schemas)
    first = caught.value.first
    return first.description, first.line, first.col, first.suggestion


def matches(events_s: list[dict], events_r: list[dict], **kw: str) -> list[tuple]:
    """(A.ts, A.te, B.ts, B.te, detected_at, completed_at, status) of every match."""
    found = find_matches_of({"S": StreamEvents(events_s), "R": StreamEvents(events_r)}, plan(**kw))
    return [(m.situation("A").ts, m.situation("A").te, m.situation("B").ts, m.situation("B").te,
             m.detected_at, m.completed_at, m.status) for m in found]


# ---------------------------------------------------------------- the analyzer


def test_each_symbol_belongs_to_the_stream_its_predicate_reads() -> None:
    two = plan()
    assert [(s.stream, s.alias) for s in two.sources] == [("S", None), ("R", None)]
    assert [(s.name, s.source) for s in two.symbols] == [("A", "S"), ("B", "R")]
    assert two.crosses_streams(two.constraints[0])


def test_a_bare_column_belongs_to_the_one_stream_that_has_it() -> None:
    query = "FROM CarSensors CS, RoadWorks RW PARTITION BY road DEFINE A AS speed > 1, B AS active " \
            "PATTERN A during B WITHIN 5 min"
    cars = schema("CarSensors", "road STRING", "speed DOUBLE")
    works = schema("RoadWorks", "road STRING", "active BOOLEAN")
    found = load_query(query, "q", [cars, works])
    assert [s.source for s in found.symbols] == ["CS", "RW"]


@pytest.mark.parametrize(("query", "expected"), [
    ("FROM S, R DEFINE A AS S.a AND R.b, B AS R.b PATTERN A meets B WITHIN 5 s",
     ("the predicate of A reads several streams (S, R)", 1, 23)),
    ("FROM S, R DEFINE A AS 1 = 1, B AS R.b PATTERN A meets B WITHIN 5 s",
     ("the predicate of A reads no stream's column", 1, 23)),
    ("FROM S, R DEFINE A AS a, B AS R.b PATTERN A meets B WITHIN 5 s",
     ("column 'a' may be of S or R", 1, 23)),
    ("FROM S, R DEFINE A AS S.a, B AS S.b PATTERN A meets B WITHIN 5 s",
     ("no symbol reads stream R", 1, 9)),
    ("FROM S, S DEFINE A AS S.a, B AS S.b PATTERN A meets B WITHIN 5 s",
     ("stream S appears twice in FROM", 1, 9)),
    ("FROM S X, R X DEFINE A AS X.a, B AS X.b PATTERN A meets B WITHIN 5 s",
     ("'X' names two streams of FROM", 1, 13)),
    ("FROM S, R DEFINE A AS Q.a, B AS R.b PATTERN A meets B WITHIN 5 s",
     ("unknown stream alias 'Q'", 1, 23)),
])
def test_a_query_over_several_streams_is_checked_naming_line_and_column(query: str, expected: tuple) -> None:
    assert error_of(query)[:3] == expected


def test_every_stream_has_every_key_column() -> None:
    query = "FROM S, R PARTITION BY road DEFINE A AS S.a, B AS R.b PATTERN A meets B WITHIN 5 s"
    found = error_of(query, schema("S", "road STRING", "a BOOLEAN"), schema("R", "street STRING", "b BOOLEAN"))
    assert found[:3] == ("stream R has no column 'road', which PARTITION BY names", 1, 9)
    assert "street" in (found[3] or "")


def test_the_streams_keys_and_times_compare() -> None:
    query = "FROM S, R PARTITION BY road DEFINE A AS S.a, B AS R.b PATTERN A meets B WITHIN 5 s"
    keys = error_of(query, schema("S", "road STRING", "a BOOLEAN"), schema("R", "road BIGINT", "b BOOLEAN"))
    assert keys[:3] == ("key column 'road' is number in R and string in S", 1, 9)
    times = error_of(query, schema("S", "road STRING", "a BOOLEAN"),
                     schema("R", "road STRING", "b BOOLEAN", unit="ms"))
    assert times[:3] == ("stream R's times are integers of unit 'ms', S's integers of unit 's'", 1, 9)
    assert "format: unix" not in (times[3] or "")
    times = error_of(query, schema("S", "road STRING", "a BOOLEAN"),
                     StreamSchema("R", (), "at", "timestamp", (("at", "TIMESTAMP"), ("road", "STRING"),
                                                               ("b", "BOOLEAN"))))
    assert times[:3] == ("stream R's times are TIMESTAMP, S's integers of unit 's'", 1, 9)
    assert (times[3] or "").endswith("If S's times are seconds since 1970, declare them as times in "
                                     "schemas/S.yaml: time: {column: ts, unit: timestamp, format: unix}, and ts "
                                     "TIMESTAMP in its columns.")


def test_a_column_is_typed_by_its_symbols_stream() -> None:
    query = "FROM S, R DEFINE A AS S.x > 1, B AS R.x PATTERN A meets B WITHIN 5 s RETURN avg(B.x) AS bx"
    found = error_of(query, schema("S", "x DOUBLE"), schema("R", "x BOOLEAN"))
    assert found[:3] == ("avg() takes a number, and B.x is a boolean", 1, 81)


def test_what_only_one_stream_has_is_refused_naming_the_second() -> None:
    with pytest.raises(QueryError) as caught:
        plan().one_stream("generates the events of")
    assert (caught.value.first.line, caught.value.first.col, caught.value.first.highlight) == (1, 9, "R")
    assert "one stream" in caught.value.first.description


def test_run_asks_for_each_streams_file_by_name_before_it_touches_a_lake(tmp_path) -> None:
    query = tmp_path / "two.tpq"
    query.write_text(TWO.format(pattern="A during B", within="100 s"), encoding="utf-8")
    events = tmp_path / "s.csv"
    events.write_text("key,ts,a\nk,0,true\n", encoding="utf-8")
    invoke(["run", str(query), "--events", str(events), "--lake", str(tmp_path / "lake")], EXIT_USAGE,
           "name each file's stream (--events S=FILE --events R=FILE)")
    invoke(["run", str(query), "--events", f"Q={events}", "--lake", str(tmp_path / "lake")], EXIT_USAGE,
           "events given for Q, which query two does not read; it reads S, R")
    assert not (tmp_path / "lake").exists()


def test_a_stream_named_with_no_file_has_none() -> None:
    """What a backfill DAG's param left empty renders to (`S=`): the run reads no file of that stream."""
    request = RunRequest(mode="backfill", **events_files(plan(), ["S=", "R=r.csv"]))
    assert request.stream_events == (("R", "r.csv"),)
    assert request.events_of(plan(), "S") is None and request.events_of(plan(), "R") == "r.csv"


def test_explain_says_which_stream_each_symbol_reads_and_how_each_pair_is_found() -> None:
    query = "FROM S, R PARTITION BY key DEFINE A AS S.a, B AS R.b, C AS S.c " \
            "PATTERN A during B AND A overlaps C WITHIN 100 s"
    text = explain(load_query(query, "q"))
    assert "query q: FROM S, R" in text
    assert "A  S.a  [S]" in text and "B  R.b  [R]" in text
    assert "    across streams S and R: read as one timeline" in text
    assert "A during B:" in text and "A overlaps C:" in text  # automata, across streams and within one


def test_explain_json_names_each_pairs_detector(tmp_path) -> None:
    query = tmp_path / "q.tpq"
    query.write_text("FROM S, R PARTITION BY key DEFINE A AS S.a, B AS R.b, C AS S.c "
                     "PATTERN A during B AND A overlaps;after C WITHIN 100 s", encoding="utf-8")
    shown = json.loads(invoke(["explain", str(query), "--format", "json"], EXIT_OK).output)
    assert shown["streams"] == [{"stream": "S", "alias": None}, {"stream": "R", "alias": None}]
    assert [c["found_by"] for c in shown["constraints"]] == [
        {"during": "automaton"}, {"overlaps": "automaton", "after": "range join"}]


# ---------------------------------------------------------------- the reference, by hand


def test_a_pair_across_streams_is_decided_at_its_endpoint() -> None:
    assert matches(drawn(a=".X...."), drawn(b="XXX...")) == [(1, 2, 0, 3, 2, 3, COMPLETE)]


def test_a_pair_across_streams_waits_for_the_slower_stream() -> None:
    # R has told its events up to 1 only: B may still end before A does, so `during` is not decided.
    assert matches(drawn(a=".X...."), drawn(b="XX")) == []
    # An event of R at 4 that satisfies no symbol (a heartbeat) says B lasted until 4.
    heartbeat = {"key": "k", "ts": 4, "b": False}
    assert matches(drawn(a=".X...."), [*drawn(b="XX"), heartbeat]) == [(1, 2, 0, 4, 2, 4, COMPLETE)]


def test_followed_by_across_streams_judges_each_predicate_on_its_own_stream() -> None:
    # R's B at 3 is the first after A with no A in S and no B in R between; R's B at 5 has R's B at 3 between.
    found = matches(drawn(a="XX......"), drawn(b="...X.XX."), pattern="A followed-by B")
    assert found == [(0, 2, 3, 4, 3, 4, COMPLETE)]
    # An event satisfying A in S between them breaks the succession; one in R (which has no A) does not.
    assert matches(drawn(a="XX.X...."), drawn(b="....X..."), pattern="A followed-by B") == []
    # R's B of [0, 2) still holds after A ends at 1, though R has no event in the gap: B at 3 does not follow A.
    r_events = [{"key": "k", "ts": t, "b": b} for t, b in ((0, True), (2, False), (3, True), (10, False))]
    assert matches(drawn(a="X."), r_events, pattern="A followed-by B") == []


def test_an_open_situation_is_retracted_by_its_own_streams_time() -> None:
    # A closed at 1 meets B, open since 1; R's events to 6 show B lasting past the 3 s window, though S stops at 1.
    assert matches(drawn(a="X."), drawn(b=".XXXXXX"), pattern="A meets B", within="3 s") == \
        [(0, 1, 1, None, 1, None, RETRACTED)]
    assert matches(drawn(a="X."), drawn(b=".XX"), pattern="A meets B", within="3 s") == \
        [(0, 1, 1, None, 1, None, PROVISIONAL)]


def test_a_key_missing_from_a_stream_has_situations_but_no_matches() -> None:
    s_events = [*drawn(a=".X...."), *drawn(key="lonely", a="XX..")]
    two = plan()
    streams = {"S": StreamEvents(s_events), "R": StreamEvents(drawn(b="XXX..."))}
    assert {m.key for m in find_matches_of(streams, two)} == {("k",)}
    assert ("lonely",) in {s.key for s in derive_situations_of(streams, two)}


def test_an_interval_stream_and_a_point_stream_mix() -> None:
    # Road works as interval rows of R, [2, 9) and [9, 12): one situation [2, 12); speeding in S during it.
    works = [{"key": "k", "ts": 2, "until": 9, "b": True}, {"key": "k", "ts": 9, "until": 12, "b": True},
             {"key": "k", "ts": 14, "until": 15, "b": False}]
    found = find_matches_of({"S": StreamEvents(drawn(a="....XX......")), "R": StreamEvents(works, "ts", "until")},
                            plan())
    assert [(m.situation("A").ts, m.situation("A").te, m.situation("B").ts, m.situation("B").te, m.detected_at,
             m.status) for m in found] == [(4, 6, 2, 12, 6, COMPLETE)]


# ---------------------------------------------------------------- the reference, on random cases

RELATION_NAMES = sorted(RELATIONS)
RELATION_LISTS = st.lists(st.sampled_from(RELATION_NAMES), min_size=1, max_size=3).map(";".join)


@st.composite
def rows(draw: st.DrawFn, intervals: bool) -> list[dict]:
    """Rows of key k holding flags `a` and `b`: point events at 0, 1, ...; or interval rows, unique per start and
    end, which may overlap, touch, nest or leave gaps."""
    if not intervals:
        flags = draw(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=9))
        return [{"key": "k", "ts": t, "a": a, "b": b} for t, (a, b) in enumerate(flags)]
    drawn_rows = draw(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 4), st.booleans(), st.booleans()),
                               min_size=1, max_size=7, unique_by=lambda r: r[:2]))
    return [{"key": "k", "ts": start, "until": start + length, "a": a, "b": b}
            for start, length, a, b in drawn_rows]


def events_of(rows: list[dict], intervals: bool, drop: str) -> StreamEvents:
    """One stream's share of the rows: every column but `drop`."""
    kept = [{k: v for k, v in row.items() if k != drop} for row in rows]
    return StreamEvents(kept, "ts", "until") if intervals else StreamEvents(kept)


def one_and_two(pattern: str) -> tuple[QueryPlan, QueryPlan]:
    one = load_query(f"FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN {pattern} WITHIN 4 s", "one")
    two = load_query(f"FROM S, R PARTITION BY key DEFINE A AS S.a, B AS R.b PATTERN {pattern} WITHIN 4 s", "two")
    return one, two


def described(found: list) -> list[tuple]:
    return sorted((m.key, tuple((n, s.ts, s.te) for n, s in m.bindings), m.detected_at, m.completed_at, m.status)
                  for m in found)


ONE_KIND = st.booleans().flatmap(lambda intervals: st.tuples(st.just(intervals), rows(intervals)))
TWO_OF_A_KIND = st.booleans().flatmap(lambda intervals: st.tuples(st.just(intervals), rows(intervals),
                                                                  rows(intervals)))


@settings(max_examples=150, deadline=None)
@given(case=ONE_KIND, relations=RELATION_LISTS)
def test_two_streams_with_the_same_instants_find_what_one_stream_finds(case: tuple, relations: str) -> None:
    """S holding a and R holding b at the very same instants (the same events, or the same interval rows) tell
    exactly what one stream holding both tells: situations, decisions, quiet gaps and statuses all agree."""
    intervals, events = case
    one, two = one_and_two(f"A {relations} B")
    split = {"S": events_of(events, intervals, "b"), "R": events_of(events, intervals, "a")}
    alone = find_matches(events, one, end_column="until" if intervals else None)
    assert described(find_matches_of(split, two)) == described(alone)


@settings(max_examples=300, deadline=None)
# R told up to 1 only, B still open: whether A ends inside B is not known yet (R's event at 2 ends B with A).
@example(case=(False, [{"key": "k", "ts": t, "a": t == 1, "b": False} for t in range(6)],
               [{"key": "k", "ts": t, "a": False, "b": t < 2} for t in range(3)]),
         s_cut=9, r_cut=1, relations="during")
@given(case=TWO_OF_A_KIND, s_cut=st.integers(0, 9), r_cut=st.integers(0, 9), relations=RELATION_LISTS)
def test_what_streams_out_of_step_tell_is_final(case: tuple, s_cut: int, r_cut: int, relations: str) -> None:
    """Each stream cut at its own time, as micro-batches leave them: every match found then is a match of the
    whole history with the same starts and detection time (a complete one unchanged), and every match of the
    whole history detected by the time both streams reach is found then (docs/semantics.md §5, §7)."""
    intervals, s_rows, r_rows = case
    _, two = one_and_two(f"A {relations} B")
    whole = {(m.situation("A").ts, m.situation("B").ts): m
             for m in find_matches_of({"S": events_of(s_rows, intervals, "b"),
                                       "R": events_of(r_rows, intervals, "a")}, two)}
    s_part, r_part = [r for r in s_rows if r["ts"] <= s_cut], [r for r in r_rows if r["ts"] <= r_cut]
    early = find_matches_of({"S": events_of(s_part, intervals, "b"), "R": events_of(r_part, intervals, "a")}, two)
    if not s_part or not r_part:  # a stream that has told nothing yet: the key has no matches
        assert early == []
        return
    for m in early:
        full = whole[(m.situation("A").ts, m.situation("B").ts)]
        assert full.detected_at == m.detected_at
        if m.status in (COMPLETE, RETRACTED):
            assert (full.status, full.completed_at) == (m.status, m.completed_at)
    known = min(max(r["ts"] for r in s_part), max(r["ts"] for r in r_part))
    found = {(m.situation("A").ts, m.situation("B").ts) for m in early}
    assert {k for k, m in whole.items() if m.detected_at <= known} <= found


def carried_forward(s_rows: list[dict], r_rows: list[dict]) -> list[dict]:
    """S's and R's events as one stream at the union of their instants, each flag carried forward from its own
    stream's latest event (false before its first)."""
    a_at, b_at = {r["ts"]: r["a"] for r in s_rows}, {r["ts"]: r["b"] for r in r_rows}
    merged, a, b = [], False, False
    for t in sorted(a_at.keys() | b_at.keys()):
        a, b = a_at.get(t, a), b_at.get(t, b)
        merged.append({"key": "k", "ts": t, "a": a, "b": b})
    return merged


TIMES = st.sets(st.integers(0, 9), max_size=8).map(lambda times: sorted(times | {10}))


@settings(max_examples=200, deadline=None)
@given(s_times=TIMES, r_times=TIMES, flags=st.lists(st.booleans(), min_size=22, max_size=22),
       relations=RELATION_LISTS)
def test_streams_that_reach_the_same_time_are_one_timeline_carried_forward(s_times: list, r_times: list,
                                                                          flags: list, relations: str) -> None:
    """Two streams that have both told their events up to the same time find what one stream finds at the union
    of their instants, each symbol's truth carried forward from its own stream's latest event: situations change
    only at their own stream's events, and a decision is taken at one of its endpoints. So the one-stream kernels
    can run several streams, once decisions across streams stop at the slower stream and statuses read each
    stream's own time (docs/semantics.md §5)."""
    s_rows = [{"key": "k", "ts": t, "a": flags[i]} for i, t in enumerate(s_times)]
    r_rows = [{"key": "k", "ts": t, "b": flags[11 + i]} for i, t in enumerate(r_times)]
    one, two = one_and_two(f"A {relations} B")
    split = find_matches_of({"S": StreamEvents(s_rows), "R": StreamEvents(r_rows)}, two)
    assert described(split) == described(find_matches(carried_forward(s_rows, r_rows), one))
