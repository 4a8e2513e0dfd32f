"""Micro-batches equal batch (docs/semantics.md §7): after every micro-batch the published tables hold exactly what the
brute-force reference computes from the events so far, provisional matches included; re-running changes nothing."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import QueryPlan, load_query
from pielake.semantics.reference import StreamEvents, derive_situations_of, find_matches, find_matches_of
from pielake.streams import save_schema
from tests.helpers import json_lines
from tests.spark.kernels import reference_rows, spark_rows
from tests.strategies import UNTIL, Case, kernel_time, scenario, two_streams

pytestmark = pytest.mark.heavy(seconds=540)  # about this long in CI: scheduled first


BAD_SPANS = {"empty_interval": 0, "end_before_start": -1, "null_end": None}  # a bad row's end, from its start


def cut_per_key(draw: st.DrawFn, case: Case, count: int) -> list[list[dict]]:
    """The case's rows in `count` batches (some maybe empty), each key's rows cut in time order at random places,
    never between rows sharing a start (docs/semantics.md §1: the later would be late)."""
    batches: list[list[dict]] = [[] for _ in range(count)]
    for key in dict.fromkeys(map(case.key_of, case.rows)):
        own = [r for r in case.rows if case.key_of(r) == key]
        places = [i for i in range(len(own) + 1) if i in (0, len(own)) or own[i - 1]["ts"] != own[i]["ts"]]
        cuts = sorted(draw(st.lists(st.sampled_from(places), min_size=count - 1, max_size=count - 1)))
        for index, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, len(own)], strict=True)):
            batches[index] += own[lo:hi]
    return batches


@st.composite
def micro_batches(draw: st.DrawFn, intervals: bool = False, most: int = 8) -> tuple[Case, list[list[dict]]]:
    """A scenario whose events (interval rows: `intervals`) are cut, per key in time order, into 1 to `most`
    micro-batches at random places, never between rows sharing a start (docs/semantics.md §1: the later would be
    late). Interval rows come with up to three bad ones (`BAD_SPANS`), each at a start no good row of its key has,
    in a batch of its own choosing: ingest quarantines them."""
    case = draw(scenario(intervals))
    batches = cut_per_key(draw, case, draw(st.integers(1, most)))
    for reason in draw(st.lists(st.sampled_from(sorted(BAD_SPANS)), max_size=3)) if intervals else []:
        like = draw(st.sampled_from(case.rows))
        taken = {r["ts"] for r in case.rows if case.key_of(r) == case.key_of(like)}
        start = draw(st.integers(like["ts"] + 1, like["ts"] + 40).filter(lambda t, taken=taken: t not in taken))
        end = None if BAD_SPANS[reason] is None else start + BAD_SPANS[reason]
        draw(st.sampled_from(batches)).append({**like, "ts": start, UNTIL: end})
    return case, [b for b in batches if b]


def _window_edge_case() -> tuple[Case, list[list[dict]]]:
    """A match still provisional after the first batch that starts exactly one window before the key's latest
    event (A 0-2, B 2-6, C from 4 on; latest event 10, window 10). The second batch, in which C closes at 13,
    must retract it, so the first batch's cut must lie before 0, although the open situation (C) and the open
    pair (B, C) start later, at 4 and 2: the progress rows' reach back from the latest event has to cover it."""
    query = ("FROM S PARTITION BY key DEFINE A AS a, B AS b, C AS c PATTERN A meets B AND B overlaps C "
             "WITHIN 10 s RETURN sum(A.x) AS sa, count(B.x) AS nb, duration(A) AS da")
    rows = [{"key": "k1", "ts": t, "a": t < 2, "b": 2 <= t < 6, "c": 4 <= t < 13, "x": 1.0} for t in range(16)]
    return Case(query, rows, ("key",), timed=False), [rows[:11], rows[11:]]


def _global_key_case() -> tuple[Case, list[list[dict]]]:
    """A query without PARTITION BY over a TIMESTAMP stream, in three micro-batches: one global key, whose
    progress row the second and third batch merge into."""
    draw = random.Random(11)
    rows = [{"ts": t, "a": draw.random() < .6, "b": draw.random() < .5, "c": draw.random() < .3, "x": float(t)}
            for t in range(40)]
    query = ("FROM S DEFINE A AS a, B AS b PATTERN A overlaps; meets; during; before B WITHIN 8 s "
             "RETURN sum(A.x) AS sa")
    return Case(query, rows, (), timed=True), [rows[:15], rows[15:31], rows[31:]]


def _long_row_case() -> tuple[Case, list[list[dict]]]:
    """Interval rows where a long row (A, 0-30) has closed but reaches past the window's reach back from the
    latest start: the later batches recompute from a cut inside it, from the row clipped to start there. B's
    rows inside it, touching and overlapping each other, are one situation during A."""
    query = ("FROM S PARTITION BY key DEFINE A AS a, B AS b, C AS c PATTERN B during A AND B before C "
             "WITHIN 20 s RETURN count(B.x) AS nb, max(B.x) AS mb, duration(A) AS da")
    spans = [(0, 30, True, False, False), (4, 8, False, True, False), (6, 9, False, True, False),
             (9, 12, False, True, False), (20, 26, False, False, True), (31, 32, False, False, False),
             (38, 40, False, True, False), (44, 47, True, False, True), (50, 51, False, False, False)]
    rows = [{"key": "k1", "ts": s, "until": e, "a": a, "b": b, "c": c, "x": float(s)} for s, e, a, b, c in spans]
    return Case(query, rows, ("key",), timed=False, intervals=True), [rows[:3], rows[3:6], rows[6:8], rows[8:]]


def situation_rows(lake: Lake, plan: QueryPlan) -> list[tuple]:
    table = lake.read(f"situations_{plan.name}")
    return sorted((tuple(r[k] for k in plan.keys), r["symbol"], kernel_time(r["ts"]), kernel_time(r["te"]))
                  for r in table.collect())


def snapshot(lake: Lake, plan: QueryPlan) -> list[tuple]:
    """Every published row, run ids included: what a re-run must leave exactly as it was."""
    rows = []
    for kind in ("situations", "pairs", "matches", "progress"):
        rows += [(kind, *sorted(r.asDict().items())) for r in lake.read(f"{kind}_{plan.name}").collect()]
    return sorted(rows, key=repr)


def assert_micro_batches_equal_the_reference(spark: SparkSession, root: Path,
                                             case: tuple[Case, list[list[dict]]]) -> list[int | None]:
    """Run the batches one after the other as micro-batches; after each, the published matches and situations
    equal the reference's over the events so far; re-running the last changes nothing. Returns the cut each
    batch leaves for the next (the least over the keys; None: some key is recomputed from its first event)."""
    drawn, batches = case
    return assert_streams_in_micro_batches(spark, root, drawn.query, [drawn], [{drawn.name: b} for b in batches])


def assert_streams_in_micro_batches(spark: SparkSession, root: Path, query: str, streams: list[Case],
                                    batches: list[dict[str, list[dict]]]) -> list[int | None]:
    """`assert_micro_batches_equal_the_reference` of a query over any number of streams: each batch holds some
    of each stream's rows (by stream name; a stream with none in it gets no file)."""
    lake, plan = streams_lake(spark, root, query, streams)
    seen: dict[str, list[dict]] = {stream.name: [] for stream in streams}
    cuts: list[int | None] = []
    for index, batch in enumerate(batches):
        request = _request(streams, batch_files(root, streams, batch, f"batch{index}"))
        summary = run_query(lake, plan, f"mb{index}", request)
        good = {s.name: [r for r in batch.get(s.name, []) if r in s.rows] for s in streams}
        assert (summary.ingest.events, summary.ingest.quarantined) == (
            sum(map(len, good.values())), sum(len(batch.get(s.name, [])) - len(good[s.name]) for s in streams))
        for name, rows in good.items():
            seen[name] += rows
        expected = assert_published_equal_the_reference(lake, plan, streams, seen, index)
        assert summary.matches == Counter(row[4] for row in expected)  # the report counts what was published
        progress = lake.read("progress_q")
        cuts.append(None if progress.filter("__cut IS NULL").count() else progress.agg({"__cut": "min"}).first()[0])
    before = snapshot(lake, plan)
    run_query(lake, plan, f"mb{len(batches) - 1}", request)
    assert snapshot(lake, plan) == before
    return cuts


def streams_lake(spark: SparkSession, root: Path, query: str, streams: list[Case]) -> tuple[Lake, QueryPlan]:
    """An empty lake at `root` that knows the streams' schemas, and the query bound to them."""
    shutil.rmtree(root, ignore_errors=True)
    for stream in streams:
        save_schema(stream.stream, root / "_streams")
    return Lake(spark, root), load_query(query, "q", [stream.stream for stream in streams])


def batch_files(root: Path, streams: list[Case], batch: dict[str, list[dict]], name: str) -> dict[str, Path]:
    """Each stream's rows of `batch` as a JSON-lines file of its own; a stream with none in it gets no file."""
    files = {}
    for stream in (s for s in streams if batch.get(s.name)):
        files[stream.name] = root / f"{name}_{stream.name}.json"
        files[stream.name].write_text(json_lines(stream.json_rows(batch[stream.name])))
    return files


def assert_published_equal_the_reference(lake: Lake, plan: QueryPlan, streams: list[Case],
                                         rows: dict[str, list[dict]], label: object) -> list[tuple]:
    """The published matches and situations are the reference's over `rows` (by stream name); returns the
    matches."""
    given = {s.name: StreamEvents(s.kernel_rows(rows[s.name]), "ts", s.end_column) for s in streams}
    expected = reference_rows(find_matches_of(given, plan, streams[0].unit), plan)
    assert spark_rows(lake.read("matches_q"), plan) == expected, (plan.source, label)
    assert situation_rows(lake, plan) == sorted(
        (s.key, s.symbol, s.ts, s.te) for s in derive_situations_of(given, plan)), (plan.source, label)
    return expected


def _request(streams: list[Case], files: dict[str, Path], mode: str = "incremental", **more: str) -> RunRequest:
    """A run's request (a micro-batch's unless `mode` says otherwise): the one stream's file, or each stream's
    that has one."""
    if len(streams) == 1:
        return RunRequest(mode=mode, events_path=str(files[streams[0].name]), checks=False, **more)
    return RunRequest(mode=mode, stream_events=tuple((n, str(f)) for n, f in files.items()), checks=False, **more)


@st.composite
def two_streams_in_micro_batches(draw: st.DrawFn, most: int = 5) -> tuple[str, list[Case], list[dict]]:
    """A query over two streams (`two_streams`) and their rows in 1 to `most` micro-batches, each stream's cut
    per key at places of its own: the streams arrive out of step, and a batch may hold none of a stream's rows."""
    query, *streams = draw(two_streams())
    count = draw(st.integers(1, most))
    cut = {stream.name: cut_per_key(draw, stream, count) for stream in streams}
    return query, streams, [{name: parts[index] for name, parts in cut.items()} for index in range(count)]


MICRO_SETTINGS = settings(
    max_examples=int(os.environ.get("PIELAKE_MICRO_EXAMPLES", "2")), deadline=None,
    phases=(Phase.explicit, Phase.generate),  # each example is several real Delta runs: no shrinking
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])


@MICRO_SETTINGS
@given(case=micro_batches())
@example(case=_window_edge_case())
@example(case=_global_key_case())
def test_micro_batches_equal_the_reference_after_every_batch(spark: SparkSession, tmp_path: Path,
                                                             case: tuple[Case, list[list[dict]]]) -> None:
    event(f"keys: {len(case[0].keys)}, {'TIMESTAMP' if case[0].timed else 'numeric'} time")
    assert_micro_batches_equal_the_reference(spark, tmp_path / "lake", case)


@MICRO_SETTINGS
@given(case=micro_batches(intervals=True))
def test_micro_batches_of_interval_rows_equal_the_reference_after_every_batch(
        spark: SparkSession, tmp_path: Path, case: tuple[Case, list[list[dict]]]) -> None:
    event(f"keys: {len(case[0].keys)}, {'TIMESTAMP' if case[0].timed else 'numeric'} time")
    assert_micro_batches_equal_the_reference(spark, tmp_path / "lake", case)


@MICRO_SETTINGS
@given(case=two_streams_in_micro_batches())
def test_micro_batches_of_two_streams_equal_the_reference_after_every_batch(
        spark: SparkSession, tmp_path: Path, case: tuple[str, list[Case], list[dict]]) -> None:
    query, streams, batches = case
    event(f"keys: {len(streams[0].keys)}, {'TIMESTAMP' if streams[0].timed else 'numeric'} time")
    assert_streams_in_micro_batches(spark, tmp_path / "lake", query, streams, batches)


@st.composite
def two_streams_backfilled(draw: st.DrawFn, most: int = 3) -> tuple[str, list[Case], list[dict], Case, tuple]:
    """A query over two streams in micro-batches (`two_streams_in_micro_batches`) whose one stream's events in a
    range of time are held back: some arrive after the others as a micro-batch of their own (late, so
    quarantined), the rest only in that stream's file of the backfill over the range. Returns the query, the
    streams, the micro-batches, the stream held back, and the range with what arrives late and in the backfill."""
    query, *streams = draw(two_streams())
    held_stream = draw(st.sampled_from([s for s in streams if s.rows]))
    times = sorted({r["ts"] for r in held_stream.rows})
    low = draw(st.sampled_from(times))
    high = draw(st.sampled_from([t for t in times if t >= low]))
    held = [r for r in held_stream.rows if low <= r["ts"] <= high]
    late = [r for r in held if draw(st.booleans())]
    kept = {s.name: [r for r in s.rows if r not in held] for s in streams}
    count = draw(st.integers(1, most))
    cut = {s.name: cut_per_key(draw, dataclasses.replace(s, rows=kept[s.name]), count) for s in streams}
    batches = [{name: parts[index] for name, parts in cut.items()} for index in range(count)]
    return query, streams, batches, held_stream, (low, high, late, [r for r in held if r not in late])


@MICRO_SETTINGS
@given(case=two_streams_backfilled())
def test_a_backfill_of_two_streams_equals_the_reference_over_everything(
        spark: SparkSession, tmp_path: Path, case: tuple[str, list[Case], list[dict], Case, tuple]) -> None:
    """Over several streams as over one (docs/semantics.md §7): after the micro-batches and the late events, a
    backfill of the range re-admits the quarantined ones and ingests its file's; the tables then equal the
    reference over every event, the quarantine holds no late row, and the backfill run again changes nothing."""
    query, streams, batches, held, (low, high, late, in_file) = case
    root = tmp_path / "lake"
    lake, plan = streams_lake(spark, root, query, streams)
    for index, batch in enumerate([*batches, {held.name: late}]):
        run_query(lake, plan, f"mb{index}", _request(streams, batch_files(root, streams, batch, f"mb{index}")))
    backfill = _request(streams, batch_files(root, streams, {held.name: in_file}, "backfill"), "backfill",
                        since=held.written_time(low), until=held.written_time(high))
    summary = run_query(lake, plan, "repair", backfill)
    assert summary.ingest.quarantined == 0
    assert_published_equal_the_reference(lake, plan, streams, {s.name: s.rows for s in streams}, "backfill")
    quarantine = f"quarantine_{held.name.lower()}"
    assert not late or lake.read(quarantine).filter("reason = 'late'").count() == 0
    before = snapshot(lake, plan)
    run_query(lake, plan, "repair", backfill)
    assert snapshot(lake, plan) == before


def test_a_backfill_of_the_stream_ahead_cuts_where_the_lagging_stream_needs(spark: SparkSession,
                                                                            tmp_path: Path) -> None:
    """S has told up to 200 and R only up to 50, so a pair across them after about 40 (R's time less the window)
    waits for R, and the next micro-batch's cut lies before it. A backfill of S's history at 150-160 cuts at or
    before that too, not at its own range's reach: the progress it leaves then still cuts every key, where
    otherwise its slice would hold no event time early enough and the next micro-batch would recompute the key
    from its first event. The tables equal the reference over everything."""
    query = "FROM S, R PARTITION BY key DEFINE A AS S.a, B AS R.b PATTERN A overlaps; during; before B WITHIN 10 s"
    rows = {"S": [{"key": "k", "ts": t, "a": t % 7 < 3, "b": False, "c": False, "x": float(t)} for t in range(201)],
            "R": [{"key": "k", "ts": t, "a": False, "b": t % 5 < 2, "c": False, "x": float(t)} for t in range(51)]}
    streams = [Case(query, rows[name], ("key",), timed=False, name=name) for name in rows]
    held = [r for r in rows["S"] if 150 <= r["ts"] <= 160]
    root = tmp_path / "lake"
    lake, plan = streams_lake(spark, root, query, streams)
    most = {"S": [r for r in rows["S"] if r not in held], "R": rows["R"]}
    run_query(lake, plan, "whole", _request(streams, batch_files(root, streams, most, "whole"), "batch"))
    assert lake.read("progress_q").filter("__cut IS NULL").count() == 0
    run_query(lake, plan, "repair", _request(streams, batch_files(root, streams, {"S": held}, "backfill"), "backfill",
                                             since="150", until="160"))
    assert lake.read("progress_q").filter("__cut IS NULL OR __cut >= 40").count() == 0
    assert_published_equal_the_reference(lake, plan, streams, rows, "backfill")


def test_a_micro_batch_recomputes_from_a_cut_inside_a_long_interval_row(spark: SparkSession, tmp_path: Path) -> None:
    cuts = assert_micro_batches_equal_the_reference(spark, tmp_path / "lake", _long_row_case())
    assert any(cut is not None and 0 < cut < 30 for cut in cuts[:-1]), cuts  # a later batch clipped A's row


def test_a_timestamp_stream_in_micro_batches_equals_the_reference(spark: SparkSession, tmp_path: Path) -> None:
    """The second micro-batch prunes its reads and MERGEs with TIMESTAMP literals (every key has a cut). The key
    has two columns, and the two keys share the first: events at one time in both are two keys' events."""
    draw = random.Random(7)
    rows = [{"key": "k1", "part": p, "ts": t, "a": draw.random() < .6, "b": draw.random() < .5,
             "c": draw.random() < .3, "x": float(t)} for p in (0, 1) for t in range(60)]
    case = Case("FROM S PARTITION BY key, part DEFINE A AS a, B AS b, C AS c "
                "PATTERN A overlaps; meets; during B AND B before; contains C WITHIN 6 s RETURN sum(A.x) AS sa",
                rows, ("key", "part"), timed=True)
    plan = load_query(case.query, "q")
    root = tmp_path / "lake"
    save_schema(case.stream, root / "_streams")
    lake = Lake(spark, root)
    batches = (rows[:35] + rows[60:95], rows[35:60] + rows[95:])  # each key's first 35 events, then the rest
    for index, part in enumerate(batches):
        path = root / f"batch{index}.json"
        path.write_text(json_lines(case.json_rows(part)))
        run_query(lake, plan, f"mb{index}", RunRequest(mode="incremental", events_path=str(path), checks=False))
        if index == 0:
            assert lake.read("progress_q").filter("__cut IS NULL").count() == 0, "every key should have a cut"
    expected = reference_rows(find_matches(case.kernel_rows(), plan, time_unit_seconds=case.unit), plan)
    assert spark_rows(lake.read("matches_q"), plan) == expected
    assert len(expected) >= 3, "the stream should have matches to compare"
