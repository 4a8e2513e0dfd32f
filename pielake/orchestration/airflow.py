"""Airflow DAGs generated from the registered query files: one scheduled DAG and one backfill DAG per query.

A *registered query* is a `<name>.tpq` file in the registry folder (`PIELAKE_QUERIES`), optionally with a
`<name>.yaml` beside it:

    schedule: "*/10 * * * *"         # cron or preset; default @hourly
    events: /landing/cars/{{ data_interval_end | ts_nodash }}.csv   # Jinja, rendered per run
    format: csv                      # default: by suffix
    time_column: ts                  # for streams without a schema in schemas/
    time_unit: s

Every step of a run (`pielake.pipeline.steps`) is one `SparkSubmitOperator` task on the `spark_default`
connection, running `jobs/<job>.py`; the constraints' PiePair tasks run in parallel between two gates:

    ingest >> check_events >> situations >> check_situations >> [pairs_c1, pairs_c2, ...] >> check_pairs
           >> matches >> check_matches >> publish

`pielake_<name>` runs every micro-batch (incremental mode, one run at a time, in order). Airflow's own backfill of
it (`airflow backfill create --dag-id pielake_<name> ...`) replays missed schedule intervals as micro-batches.
`pielake_<name>_backfill` (no schedule, params `from`, `to`, `events`) is the repair of SEMANTICS §7: it re-admits
late and historical events in a range and recomputes from before it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import yaml
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param

from pielake.engine.session import submit_settings
from pielake.errors import PielakeError
from pielake.pipeline.steps import job_of, step_names
from pielake.query.analyzer import QueryPlan, load_query_file

PROJECT = Path(__file__).resolve().parents[2]
JOBS_DIR = PROJECT / "jobs"
DEFAULT_SCHEDULE = "@hourly"
SETTINGS = ("schedule", "events", "format", "time_column", "time_unit")


@dataclass(frozen=True)
class Registration:
    """A registered query: its file, its checked plan and its settings from `<name>.yaml`."""

    path: Path
    plan: QueryPlan
    schedule: str = DEFAULT_SCHEDULE
    events: str = ""
    format: str = ""
    time_column: str = "ts"
    time_unit: str = "s"


def registrations(folder: Path) -> list[Registration]:
    """Every `*.tpq` in `folder` with its settings; a query that does not parse stops the DAG file with its error."""
    found = []
    for path in sorted(folder.glob("*.tpq")):
        plan = load_query_file(path)
        sidecar = path.with_suffix(".yaml")
        settings = (yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}) if sidecar.is_file() else {}
        unknown = set(settings) - set(SETTINGS)
        if unknown:
            raise PielakeError(f"{sidecar}: unknown setting(s) {', '.join(sorted(unknown))}; "
                               f"known: {', '.join(SETTINGS)}")
        found.append(Registration(path, plan, **{k: str(v) for k, v in settings.items()}))
    return found


def operator_arguments() -> dict[str, object]:
    """The `SparkSubmitOperator` arguments every step shares (`pielake.engine.session.submit_settings`), and the
    environment its Python finds pielake's jobs in."""
    settings = submit_settings()
    return {"packages": settings.packages, "driver_memory": settings.driver_memory, "conf": settings.conf,
            "env_vars": {"PYSPARK_PYTHON": settings.python, "PYTHONPATH": str(PROJECT)}}


def _task(dag: DAG, registration: Registration, step: str, run_args: list[str]) -> SparkSubmitOperator:
    job, picked = job_of(step)
    args = ["--query", str(registration.path), "--lake", os.environ.get("PIELAKE_LAKE", str(PROJECT / "lake")),
            "--run-id", "{{ run_id }}", *run_args, *picked]
    return SparkSubmitOperator(task_id=step, dag=dag, application=str(JOBS_DIR / f"{job}.py"),
                               application_args=args, conn_id="spark_default",
                               name=f"pielake-{registration.plan.name}-{step}", **operator_arguments())


def _wire(dag: DAG, registration: Registration, run_args: list[str]) -> None:
    tasks = {step: _task(dag, registration, step, run_args) for step in step_names(registration.plan)}
    pairs = [t for step, t in tasks.items() if step.startswith("pairs_")]
    chain = [t for step, t in tasks.items() if not step.startswith("pairs_")]
    for upstream, downstream in pairwise(chain):
        if downstream.task_id == "check_pairs":
            upstream >> pairs >> downstream  # the PiePairs run in parallel between the two gates
        else:
            upstream >> downstream


# A killed or failed step is retried: every step is idempotent and holds the run's lock by run id.
DEFAULT_ARGS = {"owner": "pielake", "retries": 2,
                "retry_delay": timedelta(seconds=float(os.environ.get("PIELAKE_RETRY_DELAY", "30"))),
                "retry_exponential_backoff": True, "max_retry_delay": timedelta(minutes=10)}


def _input_args(registration: Registration, events: str) -> list[str]:
    return ["--events", events, "--format", registration.format, "--time-column", registration.time_column,
            "--time-unit", registration.time_unit]


def scheduled_dag(registration: Registration) -> DAG:
    """Micro-batches on the query's schedule; runs never overlap (max_active_runs=1) and run in order."""
    name = registration.plan.name
    dag = DAG(f"pielake_{name}", schedule=registration.schedule, start_date=datetime(2026, 1, 1),
              catchup=False, max_active_runs=1, default_args=DEFAULT_ARGS, tags=["pielake"],
              doc_md=f"Micro-batch detection of `{registration.path.name}` into `matches_{name.lower()}`.")
    _wire(dag, registration, ["--mode", "incremental", *_input_args(registration, registration.events)])
    return dag


def backfill_dag(registration: Registration) -> DAG:
    """Manual repair of a time range (SEMANTICS §7). Pause the scheduled DAG while it runs: both write the
    query's tables, and max_active_runs only keeps runs of one DAG apart."""
    name = registration.plan.name
    params = {"from": Param(type="string", description="start of the range, in the stream's time"),
              "to": Param(type="string", description="end of the range, inclusive"),
              "events": Param("", type="string", description="optional history file to add in the range")}
    dag = DAG(f"pielake_{name}_backfill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
              max_active_runs=1, default_args=DEFAULT_ARGS, params=params, tags=["pielake", "backfill"],
              doc_md=f"Recompute `{registration.path.name}` from before `from`, re-admitting late events.")
    _wire(dag, registration, ["--mode", "backfill", "--from", "{{ params['from'] }}", "--to", "{{ params.to }}",
                              *_input_args(registration, "{{ params.events }}")])
    return dag


def build_dags(folder: Path) -> dict[str, DAG]:
    """Both DAGs of every registered query, by dag id."""
    dags = {}
    for registration in registrations(folder):
        for dag in (scheduled_dag(registration), backfill_dag(registration)):
            dags[dag.dag_id] = dag
    return dags
