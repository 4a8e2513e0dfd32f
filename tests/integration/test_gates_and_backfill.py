"""Write-audit-publish and backfill on real Delta tables.

- A corrupted stage output fails its Great Expectations gate: the run stops before publish, every published
  table keeps its Delta version, a stage after it does nothing, and the lake's Data Docs, opened in a headless
  Chromium, list the gates of the run before it as passed and show the failed one with its failing expectation
  and unexpected count.
- Late events are quarantined by a micro-batch; a backfill of their range re-admits them, and the tables then
  equal what the brute-force reference computes over all events (docs/semantics.md §7), those of another query
  over the stream too, after its next micro-batch.
- A gate checks a few rows on the driver (GX's pandas engine) and many on Spark; both give each suite the same
  verdict on the same rows, clean or broken in each way the suites look for.
- In one process the gates check beside the later stages; a gate that fails there still stops the run before
  publish, and the stages that ran beside it are in the run's report.
- A stream's or a query's own suite (`expectations/<gate>/<name>.json`) checks its runs alone.
- Steps run again with the same run id (a retried task) apply nothing twice.
- A run whose input is missing ends as `failed` (also the first run of a stream, whose schema would come from that
  input), its later steps find it over, and it leaves the query's lock to the next run.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyspark.sql.functions as F
import pytest
from pyspark.sql import DataFrame, SparkSession

from pielake import vocabulary as V
from pielake.errors import PielakeError
from pielake.exitcodes import EXIT_USAGE
from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock
from pielake.lake.results import results_table
from pielake.pipeline import stages
from pielake.pipeline.gates import GateError, GateResult, SuiteError, batch_data, load_suite, run_gate
from pielake.pipeline.job import RunRequest, StageResult, StepContext
from pielake.pipeline.notes import last_noted
from pielake.pipeline.registry import STAGES, Registry
from pielake.pipeline.runner import Run, RunOverError, RunStopped, run_query
from pielake.pipeline.stages import kernel_reading
from pielake.query.analyzer import QueryPlan, load_query
from pielake.semantics.reference import derive_situations, find_matches
from pielake.spark.columns import LAST_TIME
from pielake.spark.query import SparkQuery
from pielake.streams import StreamSchema, save_schema
from tests.helpers import browser_text, extend_suite, json_lines
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=400)  # about this long in CI: scheduled first

STREAM = StreamSchema("Line", ("m",), "ts", "s", (("m", "STRING"), ("ts", "BIGINT"), ("v", "DOUBLE")))
QUERY = """FROM Line PARTITION BY m
DEFINE High AS v > 5, Mid AS v > 2
PATTERN High during; finishes; starts; equals Mid
WITHIN 20 s
RETURN max(High.v) AS peak
"""
VALUES = [1, 3, 6, 7, 3, 1, 4, 8, 8, 4, 2, 6, 3, 3, 9, 1, 1, 3, 7, 7, 3, 0]
EVENTS = [{"m": m, "ts": t, "v": float(v + (1 if m == "m2" and t % 5 == 0 else 0))}
          for m in ("m1", "m2") for t, v in enumerate(VALUES, start=1)]


def write(path: Path, rows: list[dict]) -> str:
    path.write_text(json_lines(rows))
    return str(path)


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Lake:
    save_schema(STREAM, tmp_path / "lake" / "_streams")
    return Lake(spark, tmp_path / "lake")


def test_a_corrupt_stage_output_stops_the_run_before_publish(lake: Lake, tmp_path: Path) -> None:
    plan = load_query(QUERY, "mid")
    first = run_query(lake, plan, "first", RunRequest(events_path=write(tmp_path / "a.json", EVENTS[:10])))
    tables = ["situations_mid", "pairs_mid", "matches_mid", "progress_mid"]
    versions = {t: lake.version(t) for t in tables}
    run = Run(lake, plan, "second", RunRequest(mode="incremental",
                                               events_path=write(tmp_path / "b.json", EVENTS[10:])))
    for step in ("ingest", "check_events", "situations"):
        run.step(step)
    staged = lake.staging.read("situations_mid")
    broken = staged.withColumn("te", F.when(F.col("te").isNotNull(), F.col("ts") - 1))  # every end before its start
    lake.staging.overwrite(broken.localCheckpoint(), "situations_mid")
    with pytest.raises(GateError, match=r"gate situations: .* FAILED: .*__ordered\): [1-9]\d* rows") as stopped:
        run.step("check_situations")
    assert {t: lake.version(t) for t in tables} == versions
    [stored] = (lake.root / "_checks" / "gx" / "uncommitted" / "validations" / "mid" / "situations" / "second").glob(
        "*/*.json")  # the verdict's result was replaced by the detailed one: one result for the gate
    report = json.loads(stored.read_text())
    assert report["success"] is False
    [ordered] = [r for r in report["results"] if r["expectation_config"]["kwargs"].get("column") == "__ordered"]
    # a failed gate's report has the detail (counts, example values), not only the verdict the gate first asked for
    unexpected = ordered["result"]["unexpected_count"]
    assert unexpected > 0 and False in ordered["result"]["partial_unexpected_list"]
    runs = {r.run_id: r for r in lake.read("runs").collect()}
    assert (runs["first"].status, runs["second"].status) == ("published", "stopped")
    assert [s.step for s in runs["second"].steps] == ["ingest", "check_events", "situations", "check_situations"]
    gate = runs["second"].steps[-1]
    assert gate.passed is False and any("__ordered" in f for f in gate.failed)
    assert gate.report == str(stopped.value.result.report) and gate.report.endswith(".html")
    # A stage that comes after the gate stopped the run (a task cleared and run again by hand) finds it over, and
    # leaves the lock the stopped run released; the gate itself, run again, checks again.
    with pytest.raises(RunOverError, match=r"run second of mid has ended \(stopped at check_situations\), so its "
                                           r"step pairs has nothing to do"):
        run.step("pairs")
    assert RunLock(lake.root, "mid").holder() is None
    with pytest.raises(GateError, match=r"gate situations: .* FAILED"):
        run.step("check_situations")
    assert RunLock(lake.root, "mid").holder() is None

    # What a user opens: the lake's Data Docs, in a real browser.
    index = browser_text(first.docs)
    assert [(g, "Success") for g in ("events", "situations", "pairs", "matches")] == sorted(
        ((g, status) for status, run_id, g in re.findall(r"(Success|Failed) \S+ \S+ UTC (\S+) mid\.(\w+)", index)
         if run_id == "first"), key=lambda found: ["events", "situations", "pairs", "matches"].index(found[0]))
    assert re.search(r"Failed \S+ \S+ UTC second mid\.situations", index)
    page = browser_text(Path(gate.report))
    assert "Status: Failed" in page and "__ordered" in page and f"{unexpected} unexpected values found" in page


def one_row_changed(column: str, value: object) -> Callable[[DataFrame], DataFrame]:
    """The rows with `column` set to `value` in the first of them (by every column), the others as they are."""
    def change(rows: DataFrame) -> DataFrame:
        first = rows.orderBy(*rows.columns).limit(1)
        changed = first.withColumn(column, F.lit(value).cast(rows.schema[column].dataType))
        return rows.exceptAll(first).unionByName(changed)
    return change


def one_row_twice(rows: DataFrame) -> DataFrame:
    return rows.unionByName(rows.orderBy(*rows.columns).limit(1))


BREAKAGES: dict[str, dict[str, Callable[[DataFrame], DataFrame]]] = {
    "situations": {"an end before its start": lambda r: r.withColumn("te", F.col("ts") - 1),
                   "an unknown symbol": one_row_changed("symbol", "Low"), "a key missing": one_row_changed("m", None),
                   "a row twice": one_row_twice},
    "pairs": {"a relation the constraint does not allow": one_row_changed("relation", "before"),
              "no decision time": one_row_changed("decided_at", None), "an unknown constraint":
              one_row_changed("constraint_id", "c9"), "a row twice": one_row_twice},
    "matches": {"an unknown status": one_row_changed("status", "pending"),
                "no detection time": one_row_changed("detected_at", None), "a row twice": one_row_twice},
}


def test_a_gate_gives_the_same_verdict_on_the_driver_as_on_spark(lake: Lake, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    plan = load_query(QUERY, "mid")
    run_query(lake, plan, "first", RunRequest(events_path=write(tmp_path / "a.json", EVENTS[:10])))
    run = Run(lake, plan, "second", RunRequest(mode="incremental", events_path=write(tmp_path / "b.json", EVENTS[10:])))
    for step in ("ingest", "check_events", "situations", "pairs", "matches"):
        run.step(step)
    job = run.job

    def verdict(gate: str, rows_on_driver: str) -> tuple[str, GateResult]:
        monkeypatch.setenv("PIELAKE_DRIVER_GATE_ROWS", rows_on_driver)
        checked = STAGES.step(plan, f"check_{gate}").stage.gate.frame_function()
        frame, fill = checked(job)
        engine = batch_data(frame, load_suite(gate, fill, "mid", frame.columns)["expectations"])[1]
        try:
            return engine, run_gate(job, gate, checked, last=False)
        except GateError as stopped:
            return engine, stopped.result

    for gate, breakages in BREAKAGES.items():
        table = job.table(gate)
        staged = job.staging.read(table).localCheckpoint()
        for breakage, change in {"nothing": lambda r: r, **breakages}.items():
            job.staging.overwrite(change(staged).localCheckpoint(), table)
            (driver, on_driver), (spark, on_spark) = verdict(gate, "100000"), verdict(gate, "0")
            assert (driver, spark) == ("pandas", "spark")
            assert on_driver.success == (breakage == "nothing"), f"{gate}, {breakage}: {on_driver.text()}"
            assert (on_driver.success, on_driver.evaluated, on_driver.failed) == (
                on_spark.success, on_spark.evaluated, on_spark.failed), f"{gate}, {breakage}"
        job.staging.overwrite(staged, table)


def corrupted_situations(ctx: StepContext) -> StageResult:
    """pielake's situations stage, then every staged end set before its start."""
    result = stages.derive_situations(ctx)
    staging, table = ctx.job.staging, ctx.job.table(V.SITUATIONS)
    staging.overwrite(staging.read(table).withColumn("te", F.when(F.col("te").isNotNull(), F.col("ts") - 1)), table)
    return result


CORRUPTING = Registry(tuple(stage if stage.name != "situations" else
                            dataclasses.replace(stage, run=f"{__name__}:corrupted_situations")
                            for stage in STAGES.stages))


def test_a_gate_checked_beside_the_later_stages_still_stops_the_run_before_publish(lake: Lake,
                                                                                   tmp_path: Path) -> None:
    plan = load_query(QUERY, "mid")
    run_query(lake, plan, "first", RunRequest(events_path=write(tmp_path / "a.json", EVENTS[:10])))
    published = lake.version(results_table("mid"))
    request = RunRequest(mode="incremental", events_path=write(tmp_path / "b.json", EVENTS[10:]))
    with pytest.raises(GateError, match=r"gate situations: .* FAILED: .*__ordered\): [1-9]\d* rows"):
        run_query(lake, plan, "second", request, registry=CORRUPTING)
    assert lake.version(results_table("mid")) == published
    assert RunLock(lake.root, "mid").holder() is None
    [second] = [r for r in lake.read("runs").collect() if r.run_id == "second"]
    steps = {s.step: s for s in second.steps}
    assert second.status == "stopped" and "publish" not in steps and "check_pairs" not in steps
    assert steps["check_situations"].passed is False
    gate = steps["check_situations"]
    gate_ended = gate.started_at.timestamp() + gate.seconds
    assert steps["pairs"].started_at.timestamp() < gate_ended, "the next stage did not wait for the gate"


def test_a_gate_that_fails_in_a_run_asked_to_stop_is_no_verdict_and_does_not_end_the_run(lake: Lake,
                                                                                          tmp_path: Path) -> None:
    """A stopped run's cancelled Spark jobs fail its gate's checks (`WorkInEngine`): what fails then is the stop, so
    the run keeps no verdict and no `runs` row, and a run of the same events after it publishes."""
    plan = load_query(QUERY, "mid")
    request = RunRequest(events_path=write(tmp_path / "a.json", EVENTS))
    with pytest.raises(RunStopped, match=r"^run asked of query mid stopped at check_situations, as asked$"):
        run_query(lake, plan, "asked", request, registry=CORRUPTING, stopped=lambda: True)
    assert RunLock(lake.root, "mid").holder() is None
    assert not lake.exists("runs") or not lake.read("runs").filter("run_id = 'asked'").count()
    run_query(lake, plan, "after", request)
    assert [(r.run_id, r.status) for r in lake.read("runs").collect()] == [("after", "published")]


@pytest.mark.parametrize("known", [True, False], ids=["stream known", "stream never read"])
def test_a_run_whose_input_is_missing_ends_and_frees_the_query_for_the_next(lake: Lake, tmp_path: Path,
                                                                          known: bool) -> None:
    """A scheduled run whose file never landed fails for good (Airflow does not retry it): it must not hold the
    query's lock, or every later run and the maintenance would wait for it. So too the first run of a stream the
    lake has no schema of, which would infer it from that file."""
    if not known:
        lake = Lake(lake.spark, tmp_path / "new-lake")
    plan = load_query(QUERY, "mid")
    run = Run(lake, plan, "lost", RunRequest(mode="incremental", events_path=str(tmp_path / "never-landed.json")))
    with pytest.raises(PielakeError, match=r"never-landed\.json") as failed:
        run.step("ingest")
    assert failed.value.exit_code == EXIT_USAGE
    assert RunLock(lake.root, "mid").holder() is None
    [report] = lake.read("runs").collect()
    assert report.status == "failed" and "never-landed.json" in report.steps[0].failed[0]
    with pytest.raises(RunOverError, match=r"\(failed at ingest\)"):
        run.step("check_events")
    run_query(lake, plan, "next", RunRequest(mode="incremental", checks=False,
                                            events_path=write(tmp_path / "a.json", EVENTS[:10])))
    assert {r.run_id: r.status for r in lake.read("runs").collect()} == {"lost": "failed", "next": "published"}


def test_a_suite_extended_with_a_mistake_stops_the_run_at_its_gate_saying_what_to_change(lake: Lake, tmp_path: Path,
                                                                                       suites: Path) -> None:
    """Users extend the suites (`expectations/`): an expectation GX has no such type of, or one on a column the
    stream does not have, ends the run at its gate with the suite's error, not as a failed gate (the data is not
    at fault); nothing is published and the next run may start."""
    plan = load_query(QUERY, "mid")
    events = write(tmp_path / "a.json", EVENTS[:10])
    extend_suite(suites, "events", {"type": "expect_column_values_to_be_betwen",
                                    "kwargs": {"column": "v", "min_value": 0}})
    with pytest.raises(SuiteError, match=r"expectations/events\.json, expectation 6 .*did you mean "
                                         r"expect_column_values_to_be_between"):
        run_query(lake, plan, "misspelt", RunRequest(events_path=events))
    shutil.copy(Path(__file__).parents[2] / "expectations" / "events.json", suites / "events.json")
    extend_suite(suites, "events", {"type": "expect_column_values_to_be_between",
                                    "kwargs": {"column": "speed", "min_value": 0}})
    with pytest.raises(SuiteError, match=r"expectations/events\.json, expectation 6 "
                                         r"\(expect_column_values_to_be_between\): the events gate's rows have no "
                                         r"column 'speed' \(they have m, ts, v, run_id\)"):
        run_query(lake, plan, "no-such-column", RunRequest(events_path=events))
    runs = {r.run_id: r for r in lake.read("runs").collect()}
    assert {run_id: r.status for run_id, r in runs.items()} == {"misspelt": "failed", "no-such-column": "failed"}
    assert "did you mean" in runs["misspelt"].steps[-1].failed[0]
    assert not lake.exists(results_table("mid")) and RunLock(lake.root, "mid").holder() is None


GAUGE = StreamSchema("Gauge", ("m",), "ts", "s", (("m", "STRING"), ("ts", "BIGINT"), ("level", "DOUBLE")))


def test_a_stream_s_or_a_query_s_own_suite_checks_its_runs_and_no_other_s(lake: Lake, tmp_path: Path,
                                                                          suites: Path) -> None:
    """`expectations/events/<stream>.json` adds to the events gate of every query over that stream alone, and
    `expectations/<gate>/<query>.json` to that query's gate alone: an expectation on a column one stream has, or
    on one query's RETURN column, leaves the lake's other streams and queries as they were."""
    save_schema(GAUGE, lake.root / "_streams")
    extend_suite(suites, "events/LINE", {"type": "expect_column_values_to_be_between",
                                         "kwargs": {"column": "v", "min_value": 0}})
    extend_suite(suites, "matches/mid", {"type": "expect_column_values_to_be_between",
                                         "kwargs": {"column": "peak", "max_value": 5}})
    gauge = QUERY.replace("Line", "Gauge").replace("v ", "level ").replace(".v)", ".level)")
    readings = [{"m": e["m"], "ts": e["ts"], "level": e["v"]} for e in EVENTS[:10]]
    ran = run_query(lake, load_query(gauge, "gauge"), "g", RunRequest(events_path=write(tmp_path / "g.json",
                                                                                          readings)))
    other = run_query(lake, load_query(QUERY, "other"), "o", RunRequest(events_path=write(tmp_path / "a.json",
                                                                                           EVENTS[:10])))
    said = {name: [g.text() for g in summary.gates] for name, summary in (("gauge", ran), ("other", other))}
    assert said["gauge"][0] == "gate events: 6 expectations passed", said
    assert said["other"][0] == "gate events: 7 expectations passed (with expectations/events/LINE.json)", said
    assert not any("(with" in text for text in said["gauge"][1:] + said["other"][1:]), said
    with pytest.raises(GateError, match=r"gate matches: 6 expectations FAILED \(with expectations/matches/mid\.json\)"
                                        r": expect_column_values_to_be_between\(peak\): \d+ rows"):
        run_query(lake, load_query(QUERY, "mid"), "m", RunRequest(events_path=write(tmp_path / "a.json",
                                                                                    EVENTS[:10])))
    assert not lake.exists(results_table("mid")) and lake.exists(results_table("other"))


def test_steps_run_again_with_the_same_run_id_apply_nothing_twice(lake: Lake, tmp_path: Path) -> None:
    """Airflow re-runs a task (a retry, a cleared run) with the same run id: the events the run appended are not
    appended again, and a publish run again commits nothing, although the stages before it, run again after the
    first publish moved the progress on, now stage other rows."""
    plan = load_query(QUERY, "mid")
    run_query(lake, plan, "first", RunRequest(events_path=write(tmp_path / "a.json", EVENTS[:10]), checks=False))
    run = Run(lake, plan, "second", RunRequest(mode="incremental", checks=False,
                                               events_path=write(tmp_path / "b.json", EVENTS[10:])))
    steps = [s.name for s in run.registry.steps(plan, parallel=False)]
    for step in steps:
        run.step(step)
    tables = ["events_line", "situations_mid", "pairs_mid", "matches_mid", "progress_mid"]
    versions = {t: lake.version(t) for t in tables}
    for step in steps[steps.index("situations"):]:
        run.step(step)
    assert {t: lake.version(t) for t in tables} == versions
    assert lake.read("events_line").count() == len(EVENTS)
    assert_published_equal_the_reference(lake, plan, EVENTS)


def test_two_queries_over_one_stream_with_one_run_id_each_append_their_events(lake: Lake, tmp_path: Path) -> None:
    """Airflow names the runs of every DAG at one logical time alike: a run of another query over the same stream,
    with the same run id and its own file, still appends its events."""
    machines = {m: [e for e in EVENTS if e["m"] == m] for m in ("m1", "m2")}
    for name, machine in (("mid", "m1"), ("other", "m2")):
        run_query(lake, load_query(QUERY, name), "scheduled__2026-01-01T00:00:00+00:00",
                  RunRequest(mode="incremental", checks=False,
                             events_path=write(tmp_path / f"{machine}.json", machines[machine])))
    assert lake.read("events_line").count() == len(EVENTS)


def test_backfill_after_late_history_equals_the_reference_over_everything(lake: Lake, tmp_path: Path) -> None:
    plan = load_query(QUERY, "mid")
    late = [e for e in EVENTS if e["m"] == "m1" and 8 <= e["ts"] <= 10]
    early = [e for e in EVENTS if e["ts"] <= 14 and e not in late]
    rest = [e for e in EVENTS if e["ts"] > 14]
    run_query(lake, plan, "mb1", RunRequest(mode="incremental", events_path=write(tmp_path / "1.json", early),
                                            checks=False))
    summary = run_query(lake, plan, "mb2", RunRequest(mode="incremental", checks=False,
                                                      events_path=write(tmp_path / "2.json", late + rest)))
    assert summary.ingest.quarantined == len(late)
    assert lake.read("quarantine_line").filter(F.col("reason") == "late").count() == len(late)
    run_query(lake, plan, "repair", RunRequest(mode="backfill", since="8", until="10", checks=False))
    assert_published_equal_the_reference(lake, plan, EVENTS)
    assert lake.read("quarantine_line").filter(F.col("reason") == "late").count() == 0
    assert lake.read("events_line").count() == len(EVENTS)


def test_a_micro_batch_after_another_querys_backfill_recomputes_with_the_events_it_admitted(
        lake: Lake, tmp_path: Path) -> None:
    """Two queries over one stream: the backfill of one admits late events behind the other's progress too. The
    other's next micro-batch finds them among the events appended since it last read, and, as its cuts do not
    reach back to them, recomputes every row as a batch run does: its tables then equal the reference over every
    event, and its publish says it is a batch's, for a query over its matches to read again. Events the first
    appended after the other's progress are a micro-batch's as usual."""
    plan, other = load_query(QUERY, "mid"), load_query(QUERY, "other")
    late = [e for e in EVENTS if e["m"] == "m1" and 8 <= e["ts"] <= 10]
    early = [e for e in EVENTS if e["ts"] <= 14 and e not in late]
    rest = [e for e in EVENTS if e["ts"] > 14]
    run_query(lake, plan, "mb1", RunRequest(mode="incremental", events_path=write(tmp_path / "1.json", early),
                                            checks=False))
    run_query(lake, other, "o1", RunRequest(mode="incremental", checks=False))
    run_query(lake, plan, "mb2", RunRequest(mode="incremental", checks=False,
                                            events_path=write(tmp_path / "2.json", late + rest)))
    newer = run_query(lake, other, "o2", RunRequest(mode="incremental", checks=False))  # `rest`: after its progress
    assert next(s for s in newer.stages if s.stage == "situations").details["mode"] == "incremental"
    assert_published_equal_the_reference(lake, other, early + rest)
    run_query(lake, plan, "repair", RunRequest(mode="backfill", since="8", until="10", checks=False))
    summary = run_query(lake, other, "o3", RunRequest(mode="incremental", checks=False))
    situations = next(s for s in summary.stages if s.stage == "situations")
    assert situations.details["mode"] == f"batch: {len(late)} {stages.BEHIND}"
    ran = lake.read("runs").filter(F.col("run_id") == "o3").first()
    assert ran is not None and ran["mode"] == "batch"
    assert_published_equal_the_reference(lake, other, EVENTS)
    assert last_noted(lake, results_table("other"), "mode") == "batch"
    again = run_query(lake, other, "o4", RunRequest(mode="incremental", checks=False))
    assert next(s for s in again.stages if s.stage == "situations").details["mode"] == "incremental"
    assert_published_equal_the_reference(lake, other, EVENTS)


def assert_published_equal_the_reference(lake: Lake, plan: QueryPlan, events: list[dict]) -> None:
    """The matches and situations, and the progress the next micro-batch starts from: each key's latest event
    (a batch run reading in place takes it from the kernel's bounds, else from the events)."""
    name = plan.name
    assert spark_rows(lake.read(f"matches_{name}"), plan) == reference_rows(find_matches(events, plan), plan)
    situations = sorted((r["m"], r["symbol"], r["ts"], r["te"]) for r in lake.read(f"situations_{name}").collect())
    assert situations == sorted((s.key[0], s.symbol, s.ts, s.te) for s in derive_situations(events, plan))
    latest = {r["m"]: r[LAST_TIME] for r in lake.read(f"progress_{name}").collect()}
    assert latest == {key: max(e["ts"] for e in events if e["m"] == key) for key in {e["m"] for e in events}}


def micro_batches(lake: Lake, plan: QueryPlan, tmp_path: Path, *parts: list[dict]) -> None:
    """Each part a micro-batch of its own: an events file each."""
    for index, part in enumerate(parts):
        run_query(lake, plan, f"mb{index}", RunRequest(mode="incremental", checks=False,
                                                       events_path=write(tmp_path / f"{index}.json", part)))


def events_read(lake: Lake, plan: QueryPlan, run_id: str) -> object:
    """How a batch run's situations stage read the events (`pielake.spark.runs.Reading`)."""
    stages = run_query(lake, plan, run_id, RunRequest(checks=False)).stages
    return next(s for s in stages if s.stage == "situations").details["events read"]


def test_a_batch_run_reads_the_events_files_in_place_until_a_backfill_appends_history(lake: Lake,
                                                                                     tmp_path: Path) -> None:
    """Two micro-batches leave two events files, each a long stretch of time per key: a batch run's tasks read
    them as they lie, with pyarrow (Spark, for a predicate the Arrow backend declines). A backfill appends late
    events inside the first file's stretch: the next batch run finds the overlap and range-partitions the events
    instead. Both equal the reference."""
    plan = load_query(QUERY, "mid")
    history = [{"m": m, "ts": t, "v": float(VALUES[t % len(VALUES)] + (m == "m2"))}
               for m in ("m1", "m2") for t in range(1, 401)]
    late = [e for e in history if e["m"] == "m1" and 8 <= e["ts"] <= 10]
    on_time = [e for e in history if e not in late]
    micro_batches(lake, plan, tmp_path, on_time[:len(on_time) // 2], on_time[len(on_time) // 2:] + late)
    assert events_read(lake, plan, "whole") == "in place, by pyarrow"
    declined = SparkQuery(load_query(QUERY.replace("v > 5", "v % 7 > 5"), "mid"), STREAM, dict(STREAM.columns))
    chosen = kernel_reading(lake, {"events_line": lake.version("events_line")}, declined)
    assert chosen.reading.in_place and chosen.files == ()
    assert_published_equal_the_reference(lake, plan, on_time)
    run_query(lake, plan, "repair", RunRequest(mode="backfill", since="8", until="10", checks=False))
    assert events_read(lake, plan, "whole2") == "range-partitioned"
    assert_published_equal_the_reference(lake, plan, history)


def test_a_batch_run_over_many_keys_of_few_events_each_reads_them_by_key(lake: Lake, tmp_path: Path) -> None:
    """Read in place, every key of every file is at an edge, and the stitch would read more rows than there are
    events (`pielake.pipeline.stages.STITCHED_PER_EVENT`): the events are read by key, each key whole in a task."""
    plan = load_query(QUERY, "mid")
    fleet = [{"m": f"m{k}", "ts": t, "v": float(VALUES[(t + k) % len(VALUES)])} for k in range(30) for t in range(8)]
    micro_batches(lake, plan, tmp_path, [e for e in fleet if e["ts"] < 4], [e for e in fleet if e["ts"] >= 4])
    assert events_read(lake, plan, "whole") == "partitioned by key"
    assert_published_equal_the_reference(lake, plan, fleet)
