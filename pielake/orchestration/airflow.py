"""Airflow DAGs generated from the registered query files: one scheduled DAG and one backfill DAG per query, and
one maintenance DAG for the lake.

A *registered query* is a `<name>.tpq` file in the registry folder (`PIELAKE_QUERIES`), optionally with a
`<name>.yaml` beside it:

    schedule: "*/10 * * * *"         # cron or preset; null: runs only when triggered; default @hourly
    events: /landing/cars/{{ data_interval_end | ts_nodash }}.csv   # Jinja, rendered per run
    format: csv                      # default: by suffix
    time_column: ts                  # for streams without a schema in schemas/ (default ts, else its one time column)
    time_unit: ms                    # of their numeric times (default s)
    skip_lines: [1, 3, 4]            # their CSV files' lines around the header (a logger's title, units)
    time_zone: Europe/Berlin         # the zone of their times written as a wall clock; default UTC
    time_format: dd/MM/yyyy HH:mm:ss # the pattern of their text times; default ISO-8601 or the one that reads them
    runner: engine                   # or spark-submit; default PIELAKE_RUNNER, else engine

or, instead of a schedule and an events file, a folder its events land in (`pielake.orchestration.landing`):

    landing: /landing/cars/*.csv     # runs when files land there; over several streams {Stream: glob}

Every step of a run (`pielake.pipeline.registry`) is one task. On the engine (`pielake.engine`), a task is a thin
client that sends its step to the engine found through the `spark_connect` connection `pielake_engine`
(`PIELAKE_ENGINE_CONN`): it runs warm there, in seconds. Where no engine runs, each step is a
`SparkSubmitOperator` task on the `spark_default` connection (`pielake.orchestration.submit`), running
`jobs/step.py --step <step>` in a Spark application of its own. Either way the steps of a stage that runs per
constraint (the PiePairs) run in parallel between two gates:

    ingest >> check_events >> situations >> check_situations >> [pairs_c1, pairs_c2, ...] >> check_pairs
           >> matches >> check_matches >> publish

A registered query that does not parse, or does not fit the schemas its streams have before its first run, hides
no other query's DAGs: it becomes a DAG of its own, unscheduled, tagged `broken`, whose documentation and only
task say its file, line, column and error.

`pielake_<name>` runs every micro-batch (incremental mode, one run at a time, in order). Airflow's own backfill of
it (`airflow backfill create --dag-id pielake_<name> ...`) replays missed schedule intervals as micro-batches: their
events are admitted where no later interval has run, else quarantined as `late` for the backfill DAG below. Of a
query registered with `landing`, it runs when files land, and its first task, `take_landed`, takes them.
`pielake_<name>_backfill` (no schedule, params `from`, `to`, `events`; over several streams `events_<Stream>`
for each; a bound checked by the trigger form where it can be, `_bounds`) is the repair of docs/semantics.md §7:
it re-admits late and historical events in a range and recomputes from before it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, cached_property
from itertools import pairwise
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import (
    DAG,
    Asset,
    AssetAny,
    AssetWatcher,
    BaseOperator,
    Context,
    CronTriggerTimetable,
    Param,
    TaskGroup,
)
from airflow.sdk.exceptions import AirflowFailException, AirflowTimetableInvalid
from jinja2 import Environment, TemplateError, meta

from pielake import vocabulary as V
from pielake.engine.jvm import utf8_locale
from pielake.engine.settings import keep_days, landing_poll, lock_wait, short_lived, submit_settings
from pielake.environment import longest, number
from pielake.errors import PielakeError
from pielake.lake.landed import Landing, ledger_of
from pielake.orchestration.landing import LandingTrigger
from pielake.orchestration.tasks import TAKE_TASK, maintain_on_engine, run_step_on_engine, take_landed
from pielake.pipeline.registry import STAGES, Registry, Step
from pielake.query.analyzer import QueryPlan, bind_declared, load_query_file
from pielake.query.hierarchy import check_upstreams
from pielake.streams import (
    FORMATS,
    TIMESTAMP_UNIT,
    WHOLE_NUMBER,
    as_given,
    check_pattern_given,
    check_skip_lines,
    check_time_unit,
    check_zone_named,
    declared_schema,
    events_files,
    files_by_stream,
    format_of,
)
from pielake.yaml_file import read_yaml, unknown_settings

PROJECT = Path(__file__).resolve().parents[2]
JOBS_DIR = PROJECT / "jobs"
DEFAULT_SCHEDULE = "@hourly"
# A registration's settings, each with a value a refusal shows as its example.
SETTINGS = {"schedule": '"*/10 * * * *"', "events": "/landing/cars.csv", "landing": "/landing/cars/*.csv",
            "format": "csv", "time_column": "ts", "time_unit": "ms", "skip_lines": "[1, 3, 4]",
            "time_zone": "Europe/Berlin", "time_format": "dd/MM/yyyy HH:mm:ss", "runner": "engine",
            "step_timeout": "30"}
RUNNERS = ("engine", "spark-submit")
# The settings a deployment gives every registration that gives none: the variable each is read from.
DEPLOYED = {"runner": "PIELAKE_RUNNER", "step_timeout": "PIELAKE_STEP_TIMEOUT"}
UNCLOCKED = ("@once", "@continuous")  # Airflow's schedule presets that are no cron expression
ENGINE_CONNECTION = os.environ.get("PIELAKE_ENGINE_CONN", "pielake_engine")
MAINTENANCE_DAG = "pielake_maintenance"
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)  # aware: Airflow reads a naive date in its configured zone


@dataclass(frozen=True)
class Registration:
    """A registered query: its file, its checked plan and its settings from `<name>.yaml`."""

    path: Path
    plan: QueryPlan
    schedule: str | None = DEFAULT_SCHEDULE  # None: runs only when triggered
    events: tuple[str, ...] = ()  # as `--events` values: a path, or STREAM=PATH for each of several streams
    landing: tuple[str, ...] = ()  # as `events`, each a folder (and a pattern of names) files land in
    format: str = ""
    time_column: str = ""  # an unknown stream's (`--time-column`); none: ts, else the file's one column of times
    time_unit: str = ""  # an unknown stream's (`--time-unit`); none: s
    skip_lines: str = ""  # as `--skip-lines` gives them: `1,3,4`
    time_zone: str = ""  # an unknown stream's zone (`--time-zone`); none: UTC
    time_format: str = ""  # the pattern of an unknown stream's text times (`--time-format`)
    runner: str = "engine"  # where the steps run: RUNNERS
    # Minutes a step may run before Airflow stops its task, which is then retried: a step whose engine hangs,
    # or whose connection is lost without an error, would otherwise hold the run (and its query's lock) forever.
    step_timeout: str = "60"

    def __post_init__(self) -> None:
        """Every setting checked here, where a wrong one is this query's broken DAG (`register` says in which
        file): found while Airflow builds or stores the DAGs, it would fail the whole DAG file."""
        check_runner(self.runner, "runner")
        check_step_timeout(self.step_timeout, "step_timeout", "step_timeout: 30")
        check_schedule(self.schedule, "schedule")
        if self.time_unit:
            check_time_unit(self.time_unit, "time_unit")
        check_skip_lines(self.skip_lines, "skip_lines")
        if self.time_zone:
            check_zone_named(self.time_zone, "time_zone")
        if self.time_format:
            check_pattern_given(self.time_format, "time_format")
        if self.format and self.format not in FORMATS:
            raise PielakeError(f"format '{self.format}' is not one of {', '.join(FORMATS)}")
        for stream, path in files_by_stream(self.plan, self.events).items():
            check_template(path, "events" if len(self.plan.sources) == 1 else f"events of {stream}")
        for landing in self.landings.values():
            if not (self.format or format_of(landing.pattern)):
                raise PielakeError(f"the files of landing '{landing}' have no suffix that names their format; add "
                                   f"format: ({', '.join(FORMATS)})")

    @cached_property
    def landings(self) -> dict[str, Landing]:
        """Each stream's landing folder, by stream, when the query runs as events land."""
        return {stream: Landing.parse(glob) for stream, glob in files_by_stream(self.plan, self.landing).items()}

    @property
    def execution_timeout(self) -> timedelta:
        return timedelta(minutes=float(self.step_timeout))


@dataclass(frozen=True)
class Broken:
    """A registered query that cannot be scheduled: its file and why."""

    path: Path
    error: PielakeError


def register(path: Path) -> Registration:
    """A query file with its settings from `<name>.yaml` beside it. A query over another query's matches runs
    when that query has published (`scheduled_dag`) and reads no file: it takes neither a schedule nor events.
    A query that does not fit the schemas its streams already have (the lake's, `schemas/`) is refused here, as
    its first task would refuse it."""
    plan = load_query_file(path)
    bind_declared(plan, Path(_lake()))
    sidecar = path.with_suffix(".yaml")
    settings = _settings(sidecar)
    unknown = unknown_settings(sorted(settings), SETTINGS)
    if unknown:
        raise PielakeError(f"{sidecar}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(SETTINGS)}")
    source = plan.upstream_source
    fixed = sorted({"schedule", "events", "landing"} & set(settings)) if source is not None else []
    if fixed:
        raise PielakeError(f"{sidecar}: query {plan.name} reads the matches of query {source.upstream} and runs "
                           f"each time that query publishes them; drop {' and '.join(fixed)}")
    clock = sorted({"schedule", "events"} & set(settings)) if "landing" in settings else []
    if clock:
        raise PielakeError(f"{sidecar}: query {plan.name} runs when files land in its landing folder and reads "
                           f"them; drop {' and '.join(clock)}")
    events, landing = settings.pop("events", ""), settings.pop("landing", "")
    if isinstance(settings.get("skip_lines"), list):  # as `--skip-lines` gives them
        settings["skip_lines"] = ",".join(str(line) for line in settings["skip_lines"])
    nested = next((k for k, v in settings.items() if isinstance(v, list | dict)), None)
    if nested is not None:  # its text would be taken for one value (a column named "['a', 'b']")
        raise PielakeError(f"{sidecar}: {nested} is a {type(settings[nested]).__name__}: give one value, as "
                           f"{nested}: {SETTINGS[nested]}")
    given = {k: v if v is None else str(v) for k, v in settings.items() if v is not None or k == "schedule"}
    deployed = _deployed(set(given))
    try:
        return Registration(path, plan, events=_events_setting(plan, "events", events),
                            landing=_events_setting(plan, "landing", landing), **deployed, **given)
    except PielakeError as error:
        raise PielakeError(f"{sidecar}: {error}") from None


def _deployed(given: set[str]) -> dict[str, str]:
    """The deployment's settings (`DEPLOYED`) for those a registration does not give, from the environment, checked
    here: a wrong one is refused naming its variable, not a `<query>.yaml`, which may not exist."""
    deployed = {setting: os.environ[variable] for setting, variable in DEPLOYED.items()
                if setting not in given and os.environ.get(variable, "").strip()}
    if "runner" in deployed:
        check_runner(deployed["runner"], DEPLOYED["runner"])
    if "step_timeout" in deployed:
        check_step_timeout(deployed["step_timeout"], DEPLOYED["step_timeout"], f"{DEPLOYED['step_timeout']}=30")
    return deployed


def check_runner(runner: str, where: str) -> None:
    """A runner a query's steps run on (`RUNNERS`): the engine, or spark-submit where no engine runs."""
    if runner not in RUNNERS:
        raise PielakeError(f"{where} '{runner}' is not one of {', '.join(RUNNERS)}")


def check_step_timeout(minutes: str, where: str, example: str) -> None:
    """A step's timeout: minutes above 0, and no longer than the longest span a setting gives (`longest`), which
    every clock it reaches holds: a longer one fails every task as it starts its timer."""
    try:
        value = float(minutes)
    except ValueError:
        value = 0.0
    if not 0 < value <= longest("minutes"):
        raise PielakeError(f"{where} '{minutes}' is not a number of minutes above 0 and at most "
                           f"{longest('minutes'):,.0f}, a hundred years (e.g. {example})")


def check_template(text: str, where: str) -> None:
    """A setting Airflow renders for each run (`{{ data_interval_end | ts_nodash }}`), read as Airflow reads it: a
    template that does not parse, names a filter Airflow has not or a value no run's context holds is refused
    here, as the query's broken DAG. Found as a run renders it, it would fail every run, each after its retries."""
    templates = _templates()
    try:
        named = meta.find_undeclared_variables(templates.parse(text))
        templates.from_string(text)  # what parsing alone leaves unchecked: the filters it names
    except TemplateError as error:
        raise PielakeError(f"{where} '{text}' is not a template Airflow renders: {error.message} Write each value "
                           "Airflow fills in as {{ data_interval_end | ts_nodash }}") from None
    unknown = sorted(named - set(Context.__annotations__))
    if unknown:
        raise PielakeError(f"{where} '{text}' names {unknown[0]}, which Airflow gives no run: name one it does, as "
                           "{{ data_interval_end | ts_nodash }}, {{ ds }} or {{ logical_date }}")


@cache
def _templates() -> Environment:
    """The Jinja environment Airflow renders a pielake DAG's task arguments in: its filters (`ts_nodash`), and
    every name it is not given undefined."""
    return DAG("pielake_templates", schedule=None).get_template_env()


def check_schedule(schedule: str | None, where: str) -> None:
    """A schedule Airflow takes: a cron expression, one of Airflow's presets (`@hourly`), or none."""
    if schedule is not None and schedule not in UNCLOCKED:
        cron_timetable(schedule, where, also=", or null to run only when triggered")


def cron_timetable(schedule: str, where: str, *, also: str = "", **options: Any) -> CronTriggerTimetable:
    """The timetable of a cron expression or preset that `where` gives. Airflow checks one only as it stores the
    DAG, where a bad one fails the whole DAG file: every query's DAGs would be gone."""
    timetable = CronTriggerTimetable(schedule, timezone="UTC", **options)
    try:
        timetable.validate()
    except AirflowTimetableInvalid as error:
        raise PielakeError(f"{where} '{schedule}' is not a cron expression ({error}); write five fields, as "
                           f'"*/10 * * * *", a preset such as @hourly{also}') from None
    return timetable


def _settings(sidecar: Path) -> dict[str, Any]:
    """A registration's settings: the mapping its `<name>.yaml` holds (none without one). A file that is not YAML,
    or holds no mapping, is refused here, naming where: raised from the DAG file, it would hide every query's DAGs."""
    if not sidecar.is_file():
        return {}
    settings = read_yaml(sidecar, 'write one setting a line, as schedule: "*/10 * * * *"') or {}
    if not isinstance(settings, dict):
        raise PielakeError(f"{sidecar}: holds a {type(settings).__name__}, not settings; write one setting a line, "
                           f"as schedule: \"*/10 * * * *\" (known: {', '.join(SETTINGS)})")
    return settings


def _events_setting(plan: QueryPlan, setting: str, events: object) -> tuple[str, ...]:
    """A registration's `events` (or `landing`) as `--events` gives them (`events_files`): one path, or a path per
    stream (`{Stream: path}`; over one stream, the path of that stream)."""
    if isinstance(events, dict):
        return as_given(plan, {plan.source_named(str(stream)).stream: str(path) for stream, path in events.items()})
    if isinstance(events, list):
        raise PielakeError(f"{setting} is a list: give one path (a folder, or a pattern of names for several files: "
                           f"/landing/cars/*.csv){', or a path per stream' if len(plan.sources) > 1 else ''}")
    return (str(events),) if events else ()


def registrations(folder: Path) -> list[Registration | Broken]:
    """Every `*.tpq` in `folder`, registered, or broken with its error: one query's error hides no other's. A
    query over another query's matches is broken where that query is not registered here, or where the queries
    read each other's matches in a cycle (`pielake.query.hierarchy`)."""
    found: list[Registration | Broken] = []
    for path in sorted(folder.glob("*.tpq")):
        try:
            found.append(register(path))
        except PielakeError as error:
            found.append(Broken(path, error))
    registered = {r.plan.name.lower(): r.plan for r in found if isinstance(r, Registration)}
    checked: list[Registration | Broken] = []
    for each in found:
        try:
            if isinstance(each, Registration):
                check_upstreams(each.plan, lambda name: registered.get(name.lower()), str(folder))
            checked.append(each)
        except PielakeError as error:
            checked.append(Broken(each.path, error))
    return checked


def operator_arguments(*, short_lived: bool = False) -> dict[str, object]:
    """The `SparkSubmitOperator` arguments every step shares (`pielake.engine.settings.submit_settings`), and the
    environment its Python finds pielake's jobs in, in a UTF-8 locale (`pielake.engine.jvm.utf8_locale`). A
    `short_lived` step's driver compiles with C1 alone (`SHORT_LIVED_JIT`): a step of a micro-batch ends before
    C2's compilations pay back, as a micro-batch run in process does."""
    settings = submit_settings(short_lived=short_lived)
    return {"packages": settings.packages, "driver_memory": settings.driver_memory, "conf": settings.conf,
            "env_vars": {**settings.environment, "PYTHONPATH": str(PROJECT), **utf8_locale(os.environ)}}


def _lake() -> str:
    return os.environ.get("PIELAKE_LAKE", str(PROJECT / "lake"))


def table_asset(name: str, kind: str) -> Asset:
    """The Asset of a published table: its folder in the lake, as a `file` URI. A DAG scheduled on it runs after
    each run that published the table (docs/operations.md)."""
    return Asset((Path(_lake()).resolve() / V.table_name(kind, name)).as_uri())


def _task(dag: DAG, registration: Registration, step: Step, request: dict[str, Any]) -> BaseOperator:
    """The task of one step: sent to the engine (a thin client), or a spark-submit of `jobs/step.py`. The step
    that publishes declares the tables it changes as its outlets."""
    common = {"task_id": step.name, "dag": dag, "doc_md": _step_doc(step),
              "execution_timeout": registration.execution_timeout,
              "outlets": [table_asset(registration.plan.name, kind) for kind in step.stage.publishes]}
    if registration.runner == "engine":
        return PythonOperator(python_callable=run_step_on_engine, **common,
                              op_kwargs={"conn_id": ENGINE_CONNECTION, "query": str(registration.path),
                                         "lake": _lake(), "run_id": "{{ run_id }}", "step": step.name,
                                         "request": request})
    args = ["--step", step.name, "--query", str(registration.path), "--lake", _lake(), "--run-id", "{{ run_id }}",
            *_job_args(request)]
    return _spark_submit(application=str(JOBS_DIR / "step.py"), application_args=args,
                         name=f"pielake-{registration.plan.name}-{step.name}", query=str(registration.path),
                         lake=_lake(), run="{{ run_id }}", step=step.name,
                         **common, **operator_arguments(short_lived=short_lived(request["mode"])))


def _spark_submit(**arguments: Any) -> BaseOperator:
    """A spark-submit task on the `spark_default` connection: a run's step (`step` given) ends as its run's folder
    says (`pielake.orchestration.submit`), maintenance as spark-submit's exit code says. Spark's provider is
    imported here (by `pielake.orchestration.submit`) rather than with this module: Airflow parses the DAG file
    again before every task it runs, and that import is half of the parse (about 0.2 s of each task's start),
    which no task of a query on the engine needs."""
    from pielake.orchestration.submit import ClassicSubmitOperator, StepSubmitOperator  # noqa: PLC0415

    operator = StepSubmitOperator if "step" in arguments else ClassicSubmitOperator
    return operator(conn_id="spark_default", **arguments)


def _job_args(request: dict[str, Any]) -> list[str]:
    """The run's request as `jobs/step.py`'s options (`pielake.pipeline.jobs`)."""
    flags = {"mode": "--mode", "events_path": "--events", "fmt": "--format", "time_column": "--time-column",
             "time_unit": "--time-unit", "skip_lines": "--skip-lines", "time_zone": "--time-zone",
             "time_format": "--time-format", "since": "--from",
             "until": "--to", "lock_wait": "--lock-wait"}
    streams = [part for stream, path in request.get("stream_events", []) for part in ("--events", f"{stream}={path}")]
    return [*(part for key, flag in flags.items() if request.get(key) is not None
              for part in (flag, str(request[key]))), *streams]


def _step_doc(step: Step) -> str:
    if step.check:
        return f"Runs the Great Expectations suite `expectations/{step.name.removeprefix('check_')}.json`."
    writes = f"; writes {', '.join(step.stage.writes)}" if step.stage.writes else ""
    return (f"{step.stage.doc} Reads {', '.join(step.stage.reads)}; stages {', '.join(step.stage.stages) or 'nothing'}"
            f"{writes}.")


def _wire(dag: DAG, registration: Registration, request: dict[str, Any], registry: Registry) -> None:
    """A task per step; each layer of steps (a per-constraint stage's, side by side) after the one before. A
    stage's steps and its gate form a TaskGroup named after the stage, so the graph reads as the pipeline; task
    ids stay the step names (the group's id, `<stage>_stage`, is not prefixed to them)."""
    groups: dict[str, TaskGroup] = {}

    def grouped(step: Step) -> BaseOperator:
        stage = step.stage
        if stage.name not in groups:
            groups[stage.name] = TaskGroup(f"{stage.name}_stage", group_display_name=stage.name, dag=dag,
                                           prefix_group_id=False, tooltip=stage.doc)
        with groups[stage.name]:
            return _task(dag, registration, step, request)

    layers = [[grouped(step) for step in layer] for layer in registry.layers(registration.plan)]
    for upstream, downstream in pairwise(layers):
        for task in upstream:
            task >> downstream


# A killed or failed step is retried: every step is idempotent and holds the run's lock by run id.
DEFAULT_ARGS = {"owner": "pielake", "retries": 2,
                "retry_delay": timedelta(seconds=number("PIELAKE_RETRY_DELAY", 30, "seconds")),
                "retry_exponential_backoff": True, "max_retry_delay": timedelta(minutes=10)}


def _request(registration: Registration, mode: str, events: tuple[str, ...], **more: str) -> dict[str, Any]:
    """The run's request (`pielake.pipeline.job.RunRequest`'s fields), its values Airflow templates."""
    given = {"time_column": registration.time_column, "time_unit": registration.time_unit,
             "skip_lines": registration.skip_lines, "time_zone": registration.time_zone,
             "time_format": registration.time_format}
    return {"mode": mode, **events_files(registration.plan, events), "fmt": registration.format or None,
            "lock_wait": lock_wait(), **{setting: value for setting, value in given.items() if value}, **more}


def _dag_doc(registration: Registration, purpose: str) -> str:
    """What a DAG's page says: what it does, the query as written, the tables it publishes and the SQL that reads
    them."""
    name = registration.plan.name
    tables = [V.table_name(kind, name) for kind in (V.MATCHES, V.SITUATIONS, V.PAIRS)]
    matches = tables[0]
    return (f"{purpose}\n\n**Query** `{registration.path}`:\n\n```\n{registration.plan.source.strip()}\n```\n\n"
            f"**Tables** in the lake `{_lake()}`: " + ", ".join(f"`{t}`" for t in tables) + "\n\n"
            f"**Read them** with `pielake sql --lake {_lake()} \"SELECT * FROM {matches} WHERE status = "
            f"'complete'\"`, or from any JDBC client of the lake's engine (docs/operations.md).\n")


def scheduled_dag(registration: Registration, registry: Registry = STAGES) -> DAG:
    """Micro-batches on the query's schedule; runs never overlap (max_active_runs=1) and run in order."""
    name, source = registration.plan.name, registration.plan.upstream_source
    schedule: str | list[Asset] | None = registration.schedule
    purpose = "Micro-batch detection: each run reads the events that landed since the last one."
    if source is not None:  # a level of a hierarchy: after each publish of the query below it
        schedule = [table_asset(source.upstream, V.MATCHES)]
        purpose = (f"Micro-batch detection over the matches of query {source.upstream}: each run follows a "
                   "publish of them and reads the matches that became final since the last one.")
    events = registration.events
    if registration.landings:  # when files land, each run reading those it takes (`take_landed`)
        schedule = AssetAny(*(landing_asset(name, stream, landing) for stream, landing in
                              registration.landings.items()))
        events = as_given(registration.plan, {stream: f"{{{{ ti.xcom_pull(task_ids='{TAKE_TASK}')['{stream}'] }}}}"
                                              for stream in registration.landings})
        purpose = ("Micro-batch detection when events land: each run takes the files that landed since the last "
                   "one (" + ", ".join(f"`{landing}`" for landing in registration.landings.values()) + ").")
    dag = DAG(f"pielake_{name}", schedule=schedule, start_date=START_DATE,
              catchup=False, max_active_runs=1, default_args=DEFAULT_ARGS, tags=["pielake"],
              doc_md=_dag_doc(registration, purpose))
    _wire(dag, registration, _request(registration, "incremental", events), registry)
    if registration.landings:
        first = dag.roots  # read before take_landed is one of them
        take_task(dag, registration) >> first
    return dag


def landing_asset(query: str, stream: str, landing: Landing) -> Asset:
    """The Asset of the files of `stream` that land for `query`, watched by Airflow's triggerer: each firing of
    its `LandingTrigger` queues a run of the query's DAG. Its URI is the query's ledger of taken files, so that
    queries over one landing folder each have an Asset of their own."""
    ledger, name = ledger_of(Path(_lake()).resolve(), query) / stream, f"pielake_{query}_landing_{stream}".lower()
    trigger = LandingTrigger(landing=str(landing), ledger=str(ledger), poke_interval=landing_poll())
    return Asset(name=name, uri=ledger.as_uri(), watchers=[AssetWatcher(name=name, trigger=trigger)])


def take_task(dag: DAG, registration: Registration) -> BaseOperator:
    """The run's first task: takes the files that landed for each stream (`take_landed`). It runs in Airflow's
    worker, which sees the landing folders and the lake as the engine does; a run that finds none is skipped."""
    name = registration.plan.name
    return PythonOperator(task_id=TAKE_TASK, dag=dag, python_callable=take_landed,
                          op_kwargs={"landings": {s: str(landing) for s, landing in registration.landings.items()},
                                     "lake": _lake(), "query": str(registration.path), "run_id": "{{ run_id }}"},
                          doc_md="Takes the files that landed since the last run into a folder of the run's own in "
                                 f"`{_lake()}/{V.LANDED_DIR}/{name}/`, which ingest reads; skips the run when "
                                 "none did.")


# How a backfill's bounds are written (`pielake.spark.query.typed_time`, which refuses any other form in the run)
TIME_AS_WRITTEN = ("as the streams write their times: a whole number of their unit (1767225600), or an ISO-8601 "
                   "time for streams of TIMESTAMPs (2026-01-01T06:00:00Z)")


def _bounds(registration: Registration) -> dict[str, Param]:
    """A backfill's `from` and `to` as the trigger form takes them: whole numbers, for streams whose schema (the
    lake's, or `schemas/`, read once for both) gives their times in a numeric unit, which Airflow checks before it
    makes the run, as the run checks them (`WHOLE_NUMBER`, `pielake.spark.query.typed_time`); any text otherwise,
    which the run checks."""
    declared = declared_schema(registration.plan.sources[0].stream, Path(_lake()))
    numeric = declared is not None and declared.time_unit != TIMESTAMP_UNIT

    def bound(description: str) -> Param:
        if not numeric:
            return Param(type="string", description=description)
        return Param(type="string", pattern=rf"^\s*{WHOLE_NUMBER.pattern}\s*$",
                     description=f"{description}; for these streams, a whole number of {declared.time_unit}")

    return {"from": bound(f"start of the range, {TIME_AS_WRITTEN}"),
            "to": bound(f"end of the range, inclusive, {TIME_AS_WRITTEN}")}


def backfill_dag(registration: Registration, registry: Registry = STAGES) -> DAG:
    """Manual repair of a time range (docs/semantics.md §7). It and the scheduled DAG write the same tables, and
    max_active_runs only keeps runs of one DAG apart: the query's run lock keeps the two apart, each run's first
    step waiting (`PIELAKE_LOCK_WAIT`) until the other has published."""
    name, streams = registration.plan.name, [source.stream for source in registration.plan.sources]
    # each events param: the run's --events value it gives, and what the trigger form says of it
    if len(streams) == 1:
        files = {"events": ("{{ params.events }}", "optional history file to add in the range")}
    else:
        files = {f"events_{stream}": (f"{stream}={{{{ params['events_{stream}'] }}}}",
                                      f"optional history file of stream {stream} to add in the range")
                 for stream in streams}
    params = {**_bounds(registration),
              **{param: Param("", type="string", description=said) for param, (_, said) in files.items()}}
    dag = DAG(f"pielake_{name}_backfill", schedule=None, start_date=START_DATE, catchup=False,
              max_active_runs=1, default_args=DEFAULT_ARGS, params=params, tags=["pielake", "backfill"],
              doc_md=_dag_doc(registration, "Repair of a range: recomputes from before `from`, re-admitting late "
                                            "and historical events (docs/semantics.md §7)."))
    _wire(dag, registration, _request(registration, "backfill", tuple(given for given, _ in files.values()),
                                      since="{{ params['from'] }}", until="{{ params.to }}"), registry)
    return dag


def _refuse(message: str) -> None:
    raise AirflowFailException(message)


def broken_dag(broken: Broken) -> DAG:
    """What an Airflow user sees of a query that does not parse: a DAG of its name, never scheduled, tagged
    `broken`, whose documentation shows the error with its line, column and caret, and whose only task fails
    with it."""
    return refusing_dag(f"pielake_{broken.path.stem}", f"The query file `{broken.path.name}` cannot be scheduled.",
                        f"{broken.path}: {broken.error}", "parse_query")


def refusing_dag(dag_id: str, title: str, message: str, task_id: str) -> DAG:
    """A DAG that is never scheduled, tagged `broken`, whose documentation says `title` and `message` and whose
    only task fails with `message`: a user sees the error where the DAG would be, and every other DAG loads."""
    dag = DAG(dag_id, schedule=None, start_date=START_DATE, catchup=False,
              tags=["pielake", "broken"], default_args={"owner": "pielake", "retries": 0},
              doc_md=f"**{title}**\n\n```\n{message}\n```")
    PythonOperator(task_id=task_id, dag=dag, python_callable=_refuse, op_args=[message],
                   doc_md=f"```\n{message}\n```")
    return dag


def maintenance_dag(registered: list[Registration]) -> DAG:
    """Table care for the lake (`pielake.pipeline.maintenance`): a task per registered query, each holding its
    query's lock while it compacts and vacuums, on `PIELAKE_MAINTENANCE_SCHEDULE` (daily by default). It and the
    query's runs wait for each other (`PIELAKE_LOCK_WAIT`).

    It has no start date, so its first run is the schedule's next time after a scheduler first sees it: with a
    start date in the past Airflow runs the latest past time at once, and a scheduler just started would compact
    the lake first, holding every query's lock for minutes while the queries' first runs wait behind it."""
    # A cron schedule given as text runs its latest past time at once when that is within a tenth of the period
    # (2.4 h of a day): a buffer of none waits for the next time whatever the hour.
    schedule = cron_timetable(os.environ.get("PIELAKE_MAINTENANCE_SCHEDULE", "@daily"),
                              "PIELAKE_MAINTENANCE_SCHEDULE", run_immediately=timedelta(0))
    dag = DAG(MAINTENANCE_DAG, schedule=schedule,
              catchup=False, max_active_runs=1, default_args=DEFAULT_ARGS,
              tags=["pielake", "maintenance"],
              doc_md=f"Table care for the lake `{_lake()}`: each registered query's tables compacted back into time "
                     f"order (`OPTIMIZE … ZORDER BY`) and the files no snapshot of the last {keep_days():g} days "
                     "needs deleted (`VACUUM`; `PIELAKE_KEEP_DAYS`), with as many days of each table's log. "
                     "The same as `pielake maintain` "
                     "(docs/operations.md).")
    for registration in registered:
        common = {"task_id": f"maintain_{registration.plan.name}", "dag": dag}
        if registration.runner == "engine":
            PythonOperator(python_callable=maintain_on_engine, **common,
                           op_kwargs={"conn_id": ENGINE_CONNECTION, "query": str(registration.path), "lake": _lake(),
                                      "keep_days": keep_days(), "lock_wait": lock_wait()})
        else:
            _spark_submit(application=str(JOBS_DIR / "maintain.py"),
                          application_args=[str(registration.path), "--lake", _lake(),
                                            "--keep-days", str(keep_days()), "--lock-wait", str(lock_wait())],
                          name=f"pielake-{registration.plan.name}-maintain", **common, **operator_arguments())
    return dag


def build_dags(folder: Path, registry: Registry = STAGES) -> dict[str, DAG]:
    """Both DAGs of every registered query (a query over matches: its scheduled one), and one for each that does
    not parse, by dag id; and the lake's maintenance DAG."""
    dags = {}
    found = registrations(folder)
    for each in found:
        if isinstance(each, Broken):
            made = [broken_dag(each)]
        elif each.plan.upstream_source is not None:  # backfilled by no pipeline: rebuilt by its upstream's
            made = [scheduled_dag(each, registry)]
        else:
            made = [scheduled_dag(each, registry), backfill_dag(each, registry)]
        dags |= {dag.dag_id: dag for dag in made}
    try:
        maintenance = maintenance_dag([r for r in found if isinstance(r, Registration)])
    except PielakeError as error:  # the deployment's setting: no query's DAG depends on it
        maintenance = refusing_dag(MAINTENANCE_DAG, "The lake's table maintenance cannot be scheduled.", str(error),
                                   "maintain")
    return dags | {maintenance.dag_id: maintenance}
