"""A query over another query's matches, run by the pipeline (docs/semantics.md §1): after every micro-batch of
the upstream and the downstream's run after it, both levels' published tables equal the reference's over the
events so far."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pielake.errors import QueryError
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.maintenance import maintain
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import QueryPlan, load_query
from pielake.semantics.reference import StreamEvents, derive_situations_of, find_matches_of, matches_stream
from pielake.streams import save_schema
from tests.helpers import json_lines
from tests.integration.test_incremental import MICRO_SETTINGS, micro_batches, situation_rows
from tests.spark.kernels import reference_rows, spark_rows
from tests.strategies import RELATION_NAMES, Case

pytestmark = pytest.mark.heavy(seconds=190)

PREDICATES = ("M.nb >= 1", "M.nb >= 2", "M.sa > 3", "NOT (M.nb >= 2)", "M.a_te > M.b_ts")


@st.composite
def upstream(draw: st.DrawFn, keys: tuple[str, ...]) -> str:
    """A query over `tests.strategies.scenario`'s stream whose matches a downstream reads: many relations and a
    short window, so that about half the drawn streams have final matches (a wide window leaves none final)."""
    predicates = st.sampled_from(["a", "b", "c", "a AND b", "a OR c", "NOT b"])
    relations = ";".join(draw(st.lists(st.sampled_from(RELATION_NAMES), min_size=3, max_size=8, unique=True)))
    partition = f" PARTITION BY {', '.join(keys)}" if keys else ""
    return (f"FROM S{partition} DEFINE A AS {draw(predicates)}, B AS {draw(predicates)} PATTERN A {relations} B "
            f"WITHIN {draw(st.integers(4, 20))} s RETURN sum(A.x) AS sa, count(B.x) AS nb, duration(A) AS da")


@st.composite
def downstream(draw: st.DrawFn, keys: tuple[str, ...]) -> str:
    """A query over the matches of `upstream`'s query (RETURN sa, nb, da), named `up`."""
    relations = ";".join(draw(st.lists(st.sampled_from(RELATION_NAMES), min_size=1, max_size=4, unique=True)))
    partition = f" PARTITION BY {', '.join(keys)}" if keys else ""
    return (f"FROM matches_up M{partition} DEFINE X AS {draw(st.sampled_from(PREDICATES))}, "
            f"Y AS {draw(st.sampled_from(PREDICATES))} PATTERN X {relations} Y WITHIN {draw(st.integers(2, 60))} s "
            f"RETURN count(X.nb) AS n, first(Y.sa) AS fy, last(X.b_ts) AS lb")


def expected(case: Case, rows: list[dict], up: QueryPlan, down: QueryPlan) -> tuple[list[tuple], list[tuple]]:
    """The reference's matches and situations of `down` over the matches `up` finds in `rows`."""
    upstream = {"S": StreamEvents(case.kernel_rows(rows), "ts", case.end_column)}
    streams = {"matches_up": matches_stream(upstream, up, time_unit_seconds=case.unit)}
    matches = find_matches_of(streams, down, time_unit_seconds=case.unit)
    situations = sorted((s.key, s.symbol, s.ts, s.te) for s in derive_situations_of(streams, down))
    return reference_rows(matches, down), situations


def case_lake(spark: SparkSession, root: Path, case: Case) -> Lake:
    """A new lake at `root` that knows the case's stream."""
    shutil.rmtree(root, ignore_errors=True)
    save_schema(case.stream, root / "_streams")
    return Lake(spark, root)


def events_file(path: Path, case: Case, rows: list[dict]) -> str:
    """`rows` of the case's stream as a JSON-lines file at `path`."""
    path.write_text(json_lines(case.json_rows(rows)))
    return str(path)


def run_modes(lake: Lake, query: str) -> dict[str, str]:
    """Each run of `query` in the `runs` table, and the mode it ran in."""
    return {r.run_id: r.mode for r in lake.read("runs").filter(f"query = '{query}'").collect()}


def assert_both_levels_equal_the_reference(spark: SparkSession, root: Path, case: tuple[Case, list[list[dict]]],
                                           down_text: str) -> int:
    """Micro-batches of the upstream, each followed by a run of the downstream; returns how many complete
    upstream matches the downstream read in the end."""
    drawn, batches = case
    lake = case_lake(spark, root, drawn)
    up, down = load_query(drawn.query, "up"), load_query(down_text, "down")
    seen: list[dict] = []
    for index, batch in enumerate(batches):
        path = events_file(root / f"batch{index}.json", drawn, batch)
        # The gates over a matches stream run in test_demo.py and test_airflow.py; here the tables are compared.
        run_query(lake, up, f"u{index}", RunRequest(mode="incremental", events_path=path, checks=False))
        summary = run_query(lake, down, f"d{index}", RunRequest(mode="incremental", checks=False))
        assert summary.ingest is not None and summary.ingest.quarantined == 0
        seen += [r for r in batch if r in drawn.rows]
        matches, situations = expected(drawn, seen, up, down)
        assert spark_rows(lake.read("matches_down"), down) == matches, (drawn.query, down_text, index)
        assert situation_rows(lake, down) == situations, (drawn.query, down_text, index)
    # The upstream only ran micro-batches: none of the downstream's runs had to read everything again.
    assert set(run_modes(lake, "down").values()) == {"incremental"}
    # A batch run replaces the stream's table with every final match and a mark per key, and finds the same.
    final, keys = lake.read("events_matches_up").filter("completed_at IS NOT NULL").count(), \
        lake.read("progress_up").count()
    again = run_query(lake, down, "batch", RunRequest(checks=False))
    assert again.ingest is not None and (again.ingest.events, again.ingest.horizon_marks) == (final, keys)
    assert lake.read("events_matches_up").count() == final + keys
    assert spark_rows(lake.read("matches_down"), down) == matches
    return final


def _hand_case() -> tuple[Case, list[list[dict]]]:
    """Key k: A meets B three times; the second batch completes the first two matches, the third moves the
    horizon past them without a match of its own, so the downstream's situations close on a horizon mark."""
    a = "XX..XX.....X..........."
    b = "..XX..XX....X.........."
    rows = [{"key": "k", "ts": t, "a": a[t] == "X", "b": b[t] == "X", "c": False, "x": float(t)} for t in range(len(a))]
    case = Case("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s "
                "RETURN sum(A.x) AS sa, count(B.x) AS nb, duration(A) AS da", rows, ("key",), timed=False)
    return case, [rows[:6], rows[6:12], rows[12:]]


HAND_DOWNSTREAM = ("FROM matches_up M PARTITION BY key DEFINE X AS M.nb >= 1, Y AS M.sa > 3 "
                   "PATTERN X overlaps; meets; before Y WITHIN 30 s RETURN count(X.nb) AS n, first(Y.sa) AS fy, "
                   "last(X.b_ts) AS lb")


@MICRO_SETTINGS
@given(case=st.booleans().flatmap(lambda intervals: micro_batches(intervals=intervals, most=4)), data=st.data())
@example(case=_hand_case(), data=None)
def test_a_query_over_matches_equals_the_reference_after_every_micro_batch_of_its_upstream(
        spark: SparkSession, tmp_path: Path, case: tuple[Case, list[list[dict]]], data: st.DataObject | None) -> None:
    if data is not None:
        case = (replace(case[0], query=data.draw(upstream(case[0].keys))), case[1])
    down_text = HAND_DOWNSTREAM if data is None else data.draw(downstream(case[0].keys))
    read = assert_both_levels_equal_the_reference(spark, tmp_path / "lake", case, down_text)
    event(f"upstream matches read: {'none' if not read else 'some'}")
    if data is None:
        assert read == 3


def test_a_micro_batch_over_matches_after_a_backfill_of_the_upstream_runs_as_a_batch_run(spark: SparkSession,
                                                                                      tmp_path: Path) -> None:
    """The event at 6 s reaches the upstream only through its backfill, which changes a final match the downstream
    had admitted: its next micro-batch replaces its stream's table, as a batch run, and finds what the reference
    finds in every event. The upstream's table maintenance changes no row, and the micro-batches after it, or
    after the rebuild, with no backfill between, stay micro-batches."""
    case, _ = _hand_case()
    held = case.rows[6]
    root = tmp_path / "lake"
    lake = case_lake(spark, root, case)
    up, down = load_query(case.query, "up"), load_query(HAND_DOWNSTREAM, "down")
    history = events_file(root / "history.json", case, [r for r in case.rows if r is not held])
    run_query(lake, up, "u0", RunRequest(events_path=history, checks=False))
    run_query(lake, down, "d0", RunRequest(mode="incremental", checks=False))
    maintain(lake, up, keep_days=0, say=lambda _: None)
    run_query(lake, down, "d1", RunRequest(mode="incremental", checks=False))
    before = spark_rows(lake.read("matches_down"), down)
    late = events_file(root / "late.json", case, [held])
    run_query(lake, up, "u1", RunRequest(mode="backfill", events_path=late, since="6", until="6", checks=False))
    rebuilt = run_query(lake, down, "d2", RunRequest(mode="incremental", checks=False))
    matches, situations = expected(case, case.rows, up, down)
    assert spark_rows(lake.read("matches_down"), down) == matches != before
    assert situation_rows(lake, down) == situations
    assert "published a batch run or a backfill" in str(rebuilt.stages[0].details["mode"])
    run_query(lake, down, "d3", RunRequest(mode="incremental", checks=False))
    assert spark_rows(lake.read("matches_down"), down) == matches
    assert run_modes(lake, "down") == {"d0": "incremental", "d1": "incremental", "d2": "batch", "d3": "incremental"}


def test_matches_whose_columns_changed_are_rebuilt_by_the_next_micro_batch(spark: SparkSession,
                                                                          tmp_path: Path) -> None:
    """The upstream gains a RETURN column in a batch run: the downstream's next micro-batch is a batch run and
    its stream's table gains the column."""
    case, _ = _hand_case()
    root = tmp_path / "lake"
    lake = case_lake(spark, root, case)
    events = events_file(root / "events.json", case, case.rows)
    down = load_query(HAND_DOWNSTREAM, "down")
    run_query(lake, load_query(case.query, "up"), "u0", RunRequest(events_path=events, checks=False))
    run_query(lake, down, "d0", RunRequest(checks=False))
    wider = replace(case, query=case.query.replace("RETURN ", "RETURN max(B.x) AS mb, "))
    up = load_query(wider.query, "up")
    run_query(lake, up, "u1", RunRequest(events_path=events, checks=False))
    run_query(lake, down, "d1", RunRequest(mode="incremental", checks=False))
    assert "mb" in lake.read("events_matches_up").columns
    assert spark_rows(lake.read("matches_down"), down) == expected(wider, wider.rows, up, down)[0]


def test_a_query_over_matches_that_have_not_been_published_is_refused_naming_the_stream(
        spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(QueryError) as caught:
        run_query(Lake(spark, tmp_path / "lake"), load_query(HAND_DOWNSTREAM, "down"), "d0", RunRequest())
    assert "query up has published no matches" in str(caught.value) and "Line 1, Col 6" in str(caught.value)
