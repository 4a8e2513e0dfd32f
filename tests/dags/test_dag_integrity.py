"""DAG integrity: the DAG folder loads in a fresh Airflow process, each registered query as its scheduled and its
backfill DAG with the run's task graph, and a query that does not parse as a DAG of its own that names the error,
hiding no other query's DAGs; the lake's maintenance DAG has a task per valid query."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pielake.bench.freshness import deployment_settings
from pielake.engine.settings import SHORT_LIVED_JIT
from pielake.orchestration.airflow import Broken, Registration, registrations, scheduled_dag
from tests.helpers import FLAGS_QUERY as QUERY
from tests.helpers import process_env

ROOT = Path(__file__).parents[2]
BROKEN = "FROM S DEFINE A AS x, B AS y PATTERN A overlap B WITHIN 5 s\n"
MISSPELT = ("FROM CarSensors PARTITION BY car_id\nDEFINE F AS sped > 60, B AS accel < -3\n"
            "PATTERN F overlaps B WITHIN 1 min\n")  # schemas/CarSensors.yaml: speed
SPANS = ("FROM matches_flag_pairs M PARTITION BY key DEFINE L AS M.b_te - M.a_ts >= 4, S AS M.b_te - M.a_ts < 4 "
         "PATTERN L before; meets S WITHIN 1 min\n")
LOAD = """
import json, time
started = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
from airflow.sdk.bases.timetable import BaseTimetable
from airflow.timetables.base import TimeRestriction, Timetable
bag = DagBag(dag_folder={dags!r})

def schedule(dag):
    if isinstance(dag.schedule, (Timetable, BaseTimetable)):  # as the scheduler sees it
        return DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable.summary
    return str(dag.schedule)

def first_run(dag):
    scheduled = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    info = scheduled.timetable.next_dagrun_info(last_automated_data_interval=None, restriction=TimeRestriction(
        earliest=scheduled.start_date, latest=None, catchup=scheduled.catchup))
    return None if info is None else info.run_after.timestamp()

print(json.dumps({{"seconds": time.perf_counter() - started, "loaded_at": time.time(),
                  "errors": {{str(k): str(v) for k, v in bag.import_errors.items()}},
                  "dags": {{d.dag_id: {{"tags": sorted(d.tags), "doc": d.doc_md, "schedule": schedule(d),
                                       "params": sorted(d.params.keys()),
                                       "retries": d.default_args.get("retries"),
                                       "start_zone": str(d.start_date.tzinfo) if d.start_date else None,
                                       "first_run": first_run(d),
                                       "outlets": {{t.task_id: [a.uri for a in t.outlets] for t in d.tasks
                                                   if t.outlets}},
                                       "groups": {{t.task_id: t.task_group.group_id for t in d.tasks}},
                                       "timeouts": {{t.task_id: t.execution_timeout.total_seconds()
                                                    for t in d.tasks if t.execution_timeout}},
                                       "driver_options": {{t.task_id: t.conf["spark.driver.defaultJavaOptions"]
                                                          for t in d.tasks if isinstance(getattr(t, "conf", None),
                                                                                         dict)}},
                                       "requests": {{t.task_id: t.op_kwargs["request"] for t in d.tasks
                                                    if "request" in (getattr(t, "op_kwargs", None) or {{}})}},
                                       "args": {{t.task_id: list(t.application_args) for t in d.tasks
                                                if getattr(t, "application_args", None)}},
                                       "tasks": {{t.task_id: sorted(t.downstream_task_ids) for t in d.tasks}}}}
                           for d in bag.dags.values()}}}}))
"""
VESSELS = (ROOT / "examples" / "queries" / "moving_at_berth.tpq").read_text()
# Settings a registration may get wrong, with what its broken DAG says: Airflow would find all but the list and the
# format only as it builds or stores the DAGs, failing the whole DAG file.
SETTINGS_TYPED_WRONG = {
    "unquoted": (QUERY, b'schedule: "*/5 * * * *\nevents: /landing/flags.json\n',
                 "unquoted.yaml, line 1, column 11: not YAML (while scanning a quoted scalar, found unexpected end "
                 "of stream)"),
    "in_words": (QUERY, b"schedule: every 5 minutes\n",
                 "in_words.yaml: schedule 'every 5 minutes' is not a cron expression"),
    "listed": (QUERY, b"- schedule\n- events\n", "listed.yaml: holds a list, not settings"),
    "typo": (QUERY, b'schedual: "*/5 * * * *"\nevents: /landing/flags.json\nplace: here\n',
                 "typo.yaml: unknown setting(s) place, schedual (did you mean schedule?); known: schedule, "),
    "files_listed": (QUERY, b"events:\n  - /landing/a.json\n  - /landing/b.json\n",
                     "files_listed.yaml: events is a list: give one path (a folder, or a pattern of names"),
    "columns_listed": (QUERY, b"time_column: [at, ts]\n",
                       "columns_listed.yaml: time_column is a list: give one value, as time_column: ts"),
    "spreadsheet": (QUERY, b"events: /landing/flags.xlsx\nformat: excel\n",
                    "spreadsheet.yaml: format 'excel' is not one of csv, parquet, json"),
    "misnamed": (VESSELS, b"events:\n  Positions: /landing/positions.csv\n  PortCalls: /landing/calls.csv\n",
                 "misnamed.yaml: events given for Positions, which query misnamed does not read; it reads "
                 "VesselPositions, PortCalls"),
    "latin": (QUERY, b"events: /landing/caf\xe9.json\n",
              "latin.yaml: not YAML (unacceptable character #x00e9: invalid continuation byte in"),
    "unnamed": (VESSELS, b"events: /landing/positions.csv\n",
                "unnamed.yaml: query unnamed reads 2 streams: name each file's stream"),
    "unzoned": (QUERY, b"time_zone: Berlin\n", "unzoned.yaml: time_zone 'Berlin' names no time zone: give an IANA "
                                                "name (Europe/Berlin"),
    "unpatterned": (QUERY, b"time_format: unix\n", "unpatterned.yaml: time_format is the Spark datetime pattern an "
                                                    "unknown stream's files write text times in"),
    "twice": (QUERY, b'schedule: "@hourly"\nevents: /landing/flags.json\nschedule: "*/5 * * * *"\n',
              "twice.yaml, line 3, column 1: 'schedule' is set here and on line 1; keep one"),
    "forever": (QUERY, b"step_timeout: 1e308\n", "forever.yaml: step_timeout '1e308' is not a number of minutes above "
                                                 "0 and at most 52,560,000, a hundred years (e.g. step_timeout: 30)"),
}
EXPECTED_GRAPH = {"ingest": ["check_events"], "check_events": ["situations"], "situations": ["check_situations"],
                  "check_situations": ["pairs_c1"], "pairs_c1": ["check_pairs"], "check_pairs": ["matches"],
                  "matches": ["check_matches"], "check_matches": ["publish"], "publish": []}


def load_dags(home: Path, queries: Path, dags: Path = ROOT / "dags", script: str = LOAD, **settings: str) -> dict:
    """What a fresh Airflow process finds in `dags` with `queries` registered (the last line it prints), with the
    deployment's `settings` in its environment."""
    env = process_env(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False", PIELAKE_QUERIES=str(queries),
                      PIELAKE_LAKE=str(home / "lake"), **settings)
    done = subprocess.run([sys.executable, "-c", script.format(dags=str(dags))], env=env, text=True,
                          capture_output=True, check=True, timeout=300, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = tmp_path_factory.mktemp("airflow")
    queries = home / "queries"
    queries.mkdir()
    (queries / "flag_pairs.tpq").write_text(QUERY)
    (queries / "flag_pairs.yaml").write_text('schedule: "*/5 * * * *"\nevents: /landing/flags.json\n'
                                             'step_timeout: 15\nrunner: spark-submit\n')
    (queries / "vessels.tpq").write_text(VESSELS)
    (queries / "vessels.yaml").write_text("events:\n  VesselPositions: /landing/positions.csv\n"
                                          "  PortCalls: /landing/calls.csv\nrunner: spark-submit\n")
    (queries / "landed.tpq").write_text(QUERY)
    (queries / "landed.yaml").write_text("landing: /landing/flags/*.json.gz\nrunner: spark-submit\n"
                                         "skip_lines: [1, 3, 4]\ntime_zone: '+02:00'\ntime_unit: ms\n"
                                         "time_format: dd.MM.yyyy HH:mm\n")
    (queries / "vessels_landed.tpq").write_text(VESSELS)
    (queries / "vessels_landed.yaml").write_text("landing:\n  VesselPositions: /landing/positions/*.csv\n"
                                                 "  PortCalls: /landing/calls/\nformat: csv\nrunner: spark-submit\n")
    (queries / "clocked.tpq").write_text(QUERY)
    (queries / "clocked.yaml").write_text('landing: /landing/flags/*.json\nschedule: "@hourly"\n')
    (queries / "broken.tpq").write_text(BROKEN)
    for name, (query, settings, _) in SETTINGS_TYPED_WRONG.items():
        (queries / f"{name}.tpq").write_text(query)
        (queries / f"{name}.yaml").write_bytes(settings)
    (queries / "by_hand.tpq").write_text(QUERY)
    (queries / "by_hand.yaml").write_text("schedule: null\nevents:\n  Flags: /landing/flags.json\nformat:\n"
                                          "time_zone: Europe/Berlin\n")
    (queries / "misspelt.tpq").write_text(MISSPELT)
    (queries / "flag_spans.tpq").write_text(SPANS)
    (queries / "orphan.tpq").write_text("FROM matches_nowhere M DEFINE X AS M.a_ts > 0, Y AS M.a_ts < 0 "
                                        "PATTERN X before Y WITHIN 1 h\n")
    for name, other in (("ping", "pong"), ("pong", "ping")):
        (queries / f"{name}.tpq").write_text(f"FROM matches_{other} M DEFINE X AS M.x_ts > 0, Y AS M.x_ts < 0 "
                                             "PATTERN X before Y WITHIN 1 h\n")
    return {**load_dags(home, queries), "lake": str(home / "lake")}


def test_the_dag_folder_loads_without_import_errors_in_under_a_minute(loaded: dict) -> None:
    assert loaded["errors"] == {}
    assert loaded["seconds"] < 60


def test_each_valid_query_is_a_scheduled_and_a_backfill_dag_of_the_run_s_steps(loaded: dict) -> None:
    scheduled, backfill = loaded["dags"]["pielake_flag_pairs"], loaded["dags"]["pielake_flag_pairs_backfill"]
    assert scheduled["tasks"] == backfill["tasks"] == EXPECTED_GRAPH
    stages = {"check_events": "ingest", "pairs_c1": "pairs", "check_pairs": "pairs"}
    assert scheduled["groups"] == {task: f"{stages.get(task, task.removeprefix('check_'))}_stage"
                                   for task in EXPECTED_GRAPH}
    assert scheduled["schedule"] == "*/5 * * * *" and backfill["schedule"] == "None"
    assert scheduled["tags"] == ["pielake"] and backfill["tags"] == ["backfill", "pielake"]
    assert scheduled["retries"] == backfill["retries"] == 2
    # A step that hangs is stopped after the registration's step_timeout (minutes), and retried.
    assert scheduled["timeouts"] == backfill["timeouts"] == dict.fromkeys(EXPECTED_GRAPH, 15 * 60.0)
    assert scheduled["start_zone"] == backfill["start_zone"] == "UTC"


def test_a_scheduled_micro_batch_s_spark_submit_drivers_compile_with_c1_alone_and_a_backfill_s_keep_c2(
        loaded: dict) -> None:
    """A step of a scheduled micro-batch is a driver that lives for one small step, as a micro-batch run in process
    is (`SHORT_LIVED_JIT`); a backfill's steps may read years of events, where C2 pays back."""
    scheduled, backfill = loaded["dags"]["pielake_flag_pairs"], loaded["dags"]["pielake_flag_pairs_backfill"]
    assert set(scheduled["driver_options"]) == set(backfill["driver_options"]) == set(EXPECTED_GRAPH)
    assert all(SHORT_LIVED_JIT in options for options in scheduled["driver_options"].values())
    assert not any(SHORT_LIVED_JIT in options for options in backfill["driver_options"].values())


def test_each_dag_shows_its_query_and_tables_and_publish_declares_them_as_assets(loaded: dict, tmp_path: Path) -> None:
    scheduled, backfill = loaded["dags"]["pielake_flag_pairs"], loaded["dags"]["pielake_flag_pairs_backfill"]
    for dag in (scheduled, backfill):
        assert QUERY.strip() in dag["doc"]
        assert "SELECT * FROM matches_flag_pairs WHERE status = 'complete'" in dag["doc"]
        lake = Path(loaded["lake"]).resolve()
        assert dag["outlets"] == {"publish": [(lake / f"{kind}_flag_pairs").as_uri()
                                              for kind in ("situations", "pairs", "matches")]}


def test_a_query_over_several_streams_runs_micro_batches_and_backfills_of_each_streams_file(loaded: dict) -> None:
    """Its registration names each stream's file; its backfill DAG takes a history file of each stream, and one
    left empty gives that stream none (`RunRequest`)."""
    scheduled, backfill = loaded["dags"]["pielake_vessels"], loaded["dags"]["pielake_vessels_backfill"]
    assert scheduled["tasks"] == backfill["tasks"] == EXPECTED_GRAPH
    args = scheduled["args"]["ingest"]
    given = [args[i + 1] for i, arg in enumerate(args) if arg == "--events"]
    assert given == ["VesselPositions=/landing/positions.csv", "PortCalls=/landing/calls.csv"]
    assert args[args.index("--mode") + 1] == "incremental"
    assert backfill["params"] == ["events_PortCalls", "events_VesselPositions", "from", "to"]
    args = backfill["args"]["ingest"]
    given = [args[i + 1] for i, arg in enumerate(args) if arg == "--events"]
    assert given == ["VesselPositions={{ params['events_VesselPositions'] }}",
                     "PortCalls={{ params['events_PortCalls'] }}"]
    assert args[args.index("--mode") + 1] == "backfill"


def test_a_query_registered_with_a_landing_folder_runs_when_files_land_and_reads_those_its_first_task_took(
        loaded: dict) -> None:
    """Scheduled on an Asset whose watcher is the landing's trigger, not on a clock; `take_landed` comes first, and
    ingest reads what it returns (`pielake.orchestration.landing`)."""
    landed, ledger = loaded["dags"]["pielake_landed"], Path(loaded["lake"]).resolve() / "_landed" / "landed"
    assert landed["first_run"] is None
    assert "LandingTrigger" in landed["schedule"] and f"landing=/landing/flags/*.json.gz, ledger={ledger}/Flags" in \
        landed["schedule"]
    assert landed["tasks"] == {"take_landed": ["ingest"], **EXPECTED_GRAPH}
    args = landed["args"]["ingest"]
    assert args[args.index("--events") + 1] == "{{ ti.xcom_pull(task_ids='take_landed')['Flags'] }}"
    assert args[args.index("--skip-lines") + 1] == "1,3,4"  # a logger's lines around the header, as registered
    assert args[args.index("--time-zone") + 1] == "+02:00"
    assert args[args.index("--time-unit") + 1] == "ms"
    assert args[args.index("--time-format") + 1] == "dd.MM.yyyy HH:mm"
    # a known stream's schema says
    for unsaid in ("--skip-lines", "--time-zone", "--time-unit", "--time-column", "--time-format"):
        assert unsaid not in loaded["dags"]["pielake_flag_pairs"]["args"]["ingest"]
    assert loaded["dags"]["pielake_landed_backfill"]["tasks"] == EXPECTED_GRAPH  # history: a file given by hand

    vessels = loaded["dags"]["pielake_vessels_landed"]  # either stream's files landing runs it
    assert vessels["schedule"].startswith("AssetAny(") and vessels["schedule"].count("LandingTrigger") == 2
    args = vessels["args"]["ingest"]
    assert [args[i + 1] for i, arg in enumerate(args) if arg == "--events"] == [
        "VesselPositions={{ ti.xcom_pull(task_ids='take_landed')['VesselPositions'] }}",
        "PortCalls={{ ti.xcom_pull(task_ids='take_landed')['PortCalls'] }}"]
    assert args[args.index("--format") + 1] == "csv"  # a folder's files name no format

    clocked = loaded["dags"]["pielake_clocked"]
    assert clocked["tags"] == ["broken", "pielake"]
    assert "query clocked runs when files land in its landing folder and reads them; drop schedule" in clocked["doc"]


def test_a_query_that_does_not_parse_is_a_dag_that_names_its_file_line_and_column(loaded: dict) -> None:
    broken = loaded["dags"]["pielake_broken"]
    assert set(loaded["dags"]) == {"pielake_flag_pairs", "pielake_flag_pairs_backfill", "pielake_broken",
                                   "pielake_flag_spans", "pielake_orphan", "pielake_ping", "pielake_pong",
                                   "pielake_vessels", "pielake_vessels_backfill", "pielake_landed",
                                   "pielake_landed_backfill", "pielake_vessels_landed",
                                   "pielake_vessels_landed_backfill", "pielake_clocked", "pielake_misspelt",
                                   "pielake_by_hand", "pielake_by_hand_backfill", "pielake_maintenance",
                                   *(f"pielake_{name}" for name in SETTINGS_TYPED_WRONG)}
    assert broken["tags"] == ["broken", "pielake"] and broken["schedule"] == "None"
    assert broken["tasks"] == {"parse_query": []}
    assert "broken.tpq: unknown relation 'overlap'. Line 1, Col 40. Did you mean 'overlaps'?" in broken["doc"]
    assert "^^^^^^^" in broken["doc"]  # the caret under the offending text


def test_a_query_that_does_not_fit_its_stream_s_declared_schema_is_a_broken_dag_before_its_first_run(
        loaded: dict) -> None:
    misspelt = loaded["dags"]["pielake_misspelt"]
    assert misspelt["tags"] == ["broken", "pielake"] and misspelt["tasks"] == {"parse_query": []}
    assert "misspelt.tpq: unknown column 'sped'" in misspelt["doc"] and "Line 2, Col 13" in misspelt["doc"]
    assert "speed" in misspelt["doc"]


def test_settings_that_are_not_yaml_or_not_a_schedule_are_a_broken_dag_saying_where(loaded: dict) -> None:
    """A registration's settings are read before Airflow sees them: one mistyped hides no other query's DAGs."""
    for name, (_, _, said) in SETTINGS_TYPED_WRONG.items():
        dag = loaded["dags"][f"pielake_{name}"]
        assert dag["tags"] == ["broken", "pielake"] and dag["tasks"] == {"parse_query": []}
        assert said in dag["doc"], dag["doc"]


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("PIELAKE_RUNNER", "local", "PIELAKE_RUNNER 'local' is not one of engine, spark-submit"),
    ("PIELAKE_STEP_TIMEOUT", "1e300", "PIELAKE_STEP_TIMEOUT '1e300' is not a number of minutes above 0 and at most "
                                      "52,560,000, a hundred years (e.g. PIELAKE_STEP_TIMEOUT=30)"),
])
def test_a_deployment_s_setting_that_cannot_be_used_breaks_the_dags_that_take_it_naming_its_variable(
        variable: str, value: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registration that gives no runner or step timeout takes the deployment's; one that gives its own does not
    read the variable."""
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("PIELAKE_LAKE", str(tmp_path / "lake"))
    (tmp_path / "deployed.tpq").write_text(QUERY)
    (tmp_path / "own.tpq").write_text(QUERY)
    (tmp_path / "own.yaml").write_text("runner: engine\nstep_timeout: 30\n")
    deployed, own = registrations(tmp_path)
    assert isinstance(deployed, Broken) and str(deployed.error) == said
    assert isinstance(own, Registration) and (own.runner, own.step_timeout) == ("engine", "30")


def test_an_events_template_is_rendered_for_each_run_and_one_airflow_cannot_render_is_a_broken_dag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registration's events path is Jinja that Airflow renders as each run starts: a filter misspelt or a name no
    run has is found as the DAGs load, not by every run failing after its retries."""
    monkeypatch.setenv("PIELAKE_LAKE", str(tmp_path / "lake"))
    for name, events in (("hourly", "/landing/{{ data_interval_end | ts_nodash }}.json"),
                         ("misspelt", "/landing/{{ data_interval_end | ts_nodsah }}.json"),
                         ("unnamed", "/landing/{{ interval_end }}.json"), ("unended", "/landing/{{ ds .json")):
        (tmp_path / f"{name}.tpq").write_text(QUERY)
        (tmp_path / f"{name}.yaml").write_text(f'events: "{events}"\n')
    hourly, misspelt, unended, unnamed = registrations(tmp_path)
    ingest = scheduled_dag(hourly).get_task("ingest")
    ingest.render_template_fields({"run_id": "scheduled__2026-12-01T10:00:00+00:00",
                                   "data_interval_end": datetime(2026, 12, 1, 10, tzinfo=UTC)})
    assert ingest.op_kwargs["request"]["events_path"] == "/landing/20261201T100000.json"
    assert isinstance(misspelt, Broken) and str(misspelt.error).endswith(
        "misspelt.yaml: events '/landing/{{ data_interval_end | ts_nodsah }}.json' is not a template Airflow renders: "
        "No filter named 'ts_nodsah'. Write each value Airflow fills in as {{ data_interval_end | ts_nodash }}")
    assert isinstance(unnamed, Broken) and str(unnamed.error).endswith(
        "unnamed.yaml: events '/landing/{{ interval_end }}.json' names interval_end, which Airflow gives no run: name "
        "one it does, as {{ data_interval_end | ts_nodash }}, {{ ds }} or {{ logical_date }}")
    assert isinstance(unended, Broken) and "is not a template Airflow renders: unexpected end of template" in str(
        unended.error)


def test_a_query_of_no_schedule_runs_only_when_triggered(loaded: dict) -> None:
    """`schedule: null`, Airflow's own word for a DAG no clock starts; an empty setting is the default; the events
    of a query over one stream may be named by their stream, as over several; the zone of an unknown stream's
    times goes with each step's request."""
    by_hand = loaded["dags"]["pielake_by_hand"]
    assert by_hand["schedule"] == "None" and by_hand["first_run"] is None and by_hand["tasks"] == EXPECTED_GRAPH
    assert by_hand["requests"]["ingest"]["events_path"] == "/landing/flags.json"
    assert by_hand["requests"]["ingest"]["fmt"] is None
    assert by_hand["requests"]["ingest"]["time_zone"] == "Europe/Berlin"  # an unknown stream's, sent to the engine
    assert "time_unit" not in by_hand["requests"]["ingest"]  # not registered: a known stream's schema says it


def test_the_lake_has_a_daily_maintenance_dag_with_a_task_per_valid_query(loaded: dict) -> None:
    maintenance = loaded["dags"]["pielake_maintenance"]
    assert maintenance["tasks"] == {"maintain_flag_pairs": [], "maintain_flag_spans": [], "maintain_landed": [],
                                    "maintain_vessels": [], "maintain_vessels_landed": [], "maintain_by_hand": []}
    assert maintenance["schedule"] == "0 0 * * *" and maintenance["tags"] == ["maintenance", "pielake"]
    assert "OPTIMIZE" in maintenance["doc"] and "VACUUM" in maintenance["doc"]


def test_a_maintenance_schedule_airflow_cannot_read_is_a_broken_maintenance_dag_beside_the_queries(
        tmp_path: Path) -> None:
    """A deployment's setting, read as the DAG file loads: Airflow would refuse the whole file as it stores the
    DAGs, saying neither the variable nor the fix."""
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "flag_pairs.tpq").write_text(QUERY)
    loaded = load_dags(tmp_path, queries, PIELAKE_MAINTENANCE_SCHEDULE="every night")
    assert loaded["errors"] == {}
    assert {"pielake_flag_pairs", "pielake_flag_pairs_backfill"} <= set(loaded["dags"])
    maintenance = loaded["dags"]["pielake_maintenance"]
    assert maintenance["tags"] == ["broken", "pielake"] and maintenance["schedule"] == "None"
    assert "PIELAKE_MAINTENANCE_SCHEDULE 'every night' is not a cron expression" in maintenance["doc"]


def test_a_scheduler_just_started_runs_the_queries_at_once_and_leaves_maintenance_for_its_next_time(
        loaded: dict) -> None:
    """Maintenance holds each query's lock for minutes: run when a scheduler starts, it would make the queries'
    first runs wait behind it."""
    scheduled, maintenance = loaded["dags"]["pielake_flag_pairs"], loaded["dags"]["pielake_maintenance"]
    assert scheduled["first_run"] <= loaded["loaded_at"] < maintenance["first_run"]


def test_a_query_over_matches_runs_after_each_publish_of_the_query_it_reads(loaded: dict) -> None:
    spans = loaded["dags"]["pielake_flag_spans"]
    matches = (Path(loaded["lake"]).resolve() / "matches_flag_pairs").as_uri()
    assert matches in spans["schedule"] and spans["first_run"] is None  # no clock: the Asset's events
    assert spans["tasks"] == EXPECTED_GRAPH and SPANS.strip() in spans["doc"]
    assert "pielake_flag_spans_backfill" not in loaded["dags"]  # the pipeline backfills no query over matches


def test_a_query_over_unregistered_or_cyclic_matches_is_a_broken_dag_naming_its_from(loaded: dict) -> None:
    orphan = loaded["dags"]["pielake_orphan"]
    assert orphan["tags"] == ["broken", "pielake"]
    assert "orphan.tpq: no query nowhere (nowhere.tpq) is in" in orphan["doc"]
    assert "whose matches query orphan reads. Line 1, Col 6. Put nowhere.tpq beside it" in orphan["doc"]
    for name in ("ping", "pong"):
        other = "pong" if name == "ping" else "ping"
        doc = loaded["dags"][f"pielake_{name}"]["doc"]
        assert f"queries read each other's matches in a cycle: {name} -> {other} -> {name}. Line 1, Col 6" in doc


LOAD_MODULES = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder={dags!r})
print(json.dumps({{"dags": sorted(bag.dag_ids), "errors": list(bag.import_errors),
                  "submit_operator": "airflow.providers.apache.spark.operators.spark_submit" in sys.modules}}))
"""


def test_dags_of_queries_on_the_engine_load_without_spark_s_submit_operator(tmp_path: Path) -> None:
    """Airflow parses the DAG file again before every task it runs, and importing Spark's submit operator would be
    half of that parse: tasks on the engine never use it, so a registry of engine queries does not import it (the
    other tests of this file load queries that run with spark-submit)."""
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "flag_pairs.tpq").write_text(QUERY)
    (tmp_path / "queries" / "flag_pairs.yaml").write_text("landing: /landing/flags/*.json\n")
    loaded = load_dags(tmp_path, tmp_path / "queries", script=LOAD_MODULES)
    assert loaded["errors"] == [] and "pielake_flag_pairs" in loaded["dags"], loaded
    assert loaded["submit_operator"] is False


READ_SETTINGS = """
import json
from airflow.configuration import conf
documented = {{(section, option) for section, described in conf.configuration_description.items()
              for option in described["options"]}}
read = {{}}
for name in {names!r}:
    section, option = name.lower().split("__")[1:]
    read[name] = [(section, option) in documented, conf.get(section, option)]
print(json.dumps(read))
"""


def test_the_deployment_s_airflow_settings_are_options_airflow_documents_and_reads(tmp_path: Path) -> None:
    """`infra/airflow.env` names options of Airflow's own configuration (a misspelt one would be ignored without
    a word), and Airflow reads each value from the environment the deployment exports."""
    settings = deployment_settings()
    assert settings
    env = process_env(AIRFLOW_HOME=str(tmp_path), **settings)
    done = subprocess.run([sys.executable, "-c", READ_SETTINGS.format(names=sorted(settings))], env=env, text=True,
                          capture_output=True, check=True, timeout=300)
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read == {name: [True, value] for name, value in settings.items()}
