"""`pielake bench --scheduler N`: N consecutive runs of Airflow's real scheduler, a run a minute, each run's steps on
the engine, and how long after its minute each run's matches are published.

What a user deploys with `infra/airflow-local.sh`: `airflow standalone` (scheduler, DAG processor, API server,
LocalExecutor) over the generated DAGs, the query registered with `schedule: "* * * * *"` and an `events`
template naming a file per minute. The lake holds the history of `pielake.bench.freshness` (a batch run on the
engine first); before each minute a slice of 1,000 newer events lands under the name of that minute. A run
triggered at minute T is on time when its row in `runs` says it was published within the target of T, and the
schedule keeps up (no backlog) when every run's first step started before the next minute: Airflow runs one run
of the query at a time, so a run that outlasts its minute delays the next one's start, and the delays add up.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyspark.sql.functions as F
from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.bench.freshness import BIN, QUERY, Bench, airflow_env, process, split, start
from pielake.bench.pages import write_block
from pielake.bench.queries import chain_query
from pielake.errors import PielakeError

TARGET_S = 60.0
WARM_UP = timedelta(minutes=3)  # from starting Airflow to the first minute measured
ROUTE = "Airflow scheduler, engine"


@dataclass(frozen=True)
class ScheduledRun:
    run_id: str
    due: datetime  # the minute the run is triggered at: its data interval's end
    started: datetime  # its first step's start
    published: datetime
    status: str

    @property
    def lag_s(self) -> float:
        return (self.published - self.due).total_seconds()


def _landing(workdir: Path) -> Path:
    return workdir / "landing-scheduled"


def register(bench: Bench, history: Path) -> tuple[Path, dict[str, str]]:
    """The query registered to run every minute on a lake that holds the history; Airflow's environment. The
    lake, the registry and Airflow's home of an earlier bench are replaced (its runs, its lock, its DAG runs)."""
    lake = bench.workdir / "lakes" / "airflow-scheduler"
    queries = lake.with_name("airflow-scheduler-queries")
    for earlier in (lake, queries, lake.with_name("airflow-scheduler-airflow")):
        shutil.rmtree(earlier, ignore_errors=True)
    queries.mkdir(parents=True)
    (queries / f"{QUERY}.tpq").write_text(chain_query(4) + "\n", encoding="utf-8")
    (queries / f"{QUERY}.yaml").write_text(
        'schedule: "* * * * *"\n'
        f"events: {_landing(bench.workdir)}/{{{{ data_interval_end | ts_nodash }}}}.csv\nformat: csv\n",
        encoding="utf-8")
    bench.say(f"{ROUTE}: the history into {lake}")
    bench.run_on_engine(queries / f"{QUERY}.tpq", history, lake, "airflow-scheduler-0.log")
    return lake, {**airflow_env(bench, lake, queries, runner="engine"),
                  "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False"}


def land(slices: list[Path], first: datetime, workdir: Path) -> None:
    """Each slice as the file of its minute, from `first` on (a file named for minute T lands before T)."""
    _landing(workdir).mkdir(parents=True, exist_ok=True)
    for i, piece in enumerate(slices):
        minute = first + timedelta(minutes=i)
        (_landing(workdir) / f"{minute.strftime('%Y%m%dT%H%M%S')}.csv").write_bytes(piece.read_bytes())


def published_runs(spark: SparkSession, lake: Path, since: datetime) -> list[ScheduledRun]:
    """The scheduled runs in `runs` that were due at `since` or later, in order."""
    table = lake / V.RUNS
    if not (table / "_delta_log").is_dir():
        return []
    rows = (spark.read.format("delta").load(str(table))  # epoch seconds: no time zone between engine and here
            .select(V.RUN_ID, F.array_min("steps.started_at").cast("double").alias("started_at"),
                    F.col("finished_at").cast("double").alias("finished_at"), V.STATUS).collect())
    runs = []
    for row in rows:
        if not row[V.RUN_ID].startswith("scheduled__"):
            continue
        due = datetime.fromisoformat(row[V.RUN_ID].removeprefix("scheduled__"))
        if due >= since:
            runs.append(ScheduledRun(row[V.RUN_ID], due, datetime.fromtimestamp(row["started_at"], UTC),
                                     datetime.fromtimestamp(row["finished_at"], UTC), row[V.STATUS]))
    return sorted(runs, key=lambda r: r.due)


def run(workdir: Path, *, events: int, runs: int, say: Callable[[str], None]) -> list[ScheduledRun]:
    """Start the engine and Airflow, land a slice before every minute from now on, and wait until each of the
    `runs` minutes measured has its run published (or is far past its target). The minutes measured begin
    `WARM_UP` after Airflow starts: the runs due while it comes up start late for reasons of their own."""
    from pielake.engine.session import connect_session  # noqa: PLC0415 (Spark's Connect client: only here)

    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    history, slices = split(workdir, events, runs + WARM_UP.seconds // 60 + 1)
    bench = start(workdir, say)
    airflow = None
    try:
        spark = connect_session(bench.address)
        lake, env = register(bench, history)
        process([str(BIN / "airflow"), "db", "migrate"], workdir / "logs" / "airflow-scheduler-migrate.log", env)
        landed = _next_minute(datetime.now(UTC))
        land(slices, landed, workdir)
        first = _next_minute(datetime.now(UTC) + WARM_UP)
        say(f"starting airflow standalone; the runs measured are due from {first:%H:%M} UTC on")
        with (workdir / "logs" / "airflow-standalone.log").open("w", encoding="utf-8") as log:
            airflow = subprocess.Popen([str(BIN / "airflow"), "standalone"], env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        return _wait_for(spark, lake, first, runs, airflow=airflow, say=say)
    finally:
        if airflow is not None:
            os.killpg(airflow.pid, signal.SIGTERM)
            airflow.wait(timeout=120)
        process([str(BIN / "pielake"), "engine", "stop", "--lake", str(bench.engine_lake)],
                workdir / "engine-stop.log")


def _next_minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=1)


def _wait_for(spark: SparkSession, lake: Path, first: datetime, runs: int, *, airflow: subprocess.Popen,
              say: Callable[[str], None]) -> list[ScheduledRun]:
    """The published runs due from `first` on, once `runs` of them are there or the last is far overdue."""
    deadline = first + timedelta(minutes=runs - 1, seconds=3 * TARGET_S)
    done: list[ScheduledRun] = []
    while len(done) < runs and datetime.now(UTC) < deadline:
        if airflow.poll() is not None:
            raise PielakeError(f"airflow standalone exited with {airflow.returncode} (its log: {airflow.args})")
        time.sleep(5)
        now = published_runs(spark, lake, first)
        for new in now[len(done):]:
            say(f"{ROUTE}: the run due at {new.due:%H:%M} {new.status} after {new.lag_s:.1f} s")
        done = now
    return done[:runs]


def summary(runs: list[ScheduledRun], wanted: int) -> str:
    """The runs' lags and whether each met the target and the schedule kept up."""
    lags = [r.lag_s for r in runs]
    on_time = sum(lag <= TARGET_S for lag in lags)
    kept_up = len(runs) == wanted and all(r.started < r.due + timedelta(minutes=1) for r in runs)
    table = ["| runs published | median s | slowest s | on time (≤ 60 s) | no backlog |", "|---|---|---|---|---|"]
    table.append(f"| {len(runs)} of {wanted} | {statistics.median(lags) if lags else float('nan'):.1f} | "
                 f"{max(lags, default=float('nan')):.1f} | {on_time} of {wanted} {'✓' if on_time == wanted else '✗'} |"
                 f" {'✓' if kept_up else '✗'} |")
    each = ", ".join(f"{lag:.0f}" for lag in lags)
    return "\n".join(table) + f"\n\n(seconds from each run's minute to its publish: {each})\n"


def write_docs(runs: list[ScheduledRun], wanted: int, page: Path, command: str) -> Path:
    return write_block(page, "scheduler", f"`{command}`\n\n{summary(runs, wanted)}")
