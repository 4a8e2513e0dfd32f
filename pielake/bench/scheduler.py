"""`pielake bench --scheduler N`: N consecutive runs of Airflow's real scheduler, a run a minute, each run's steps on
the engine, and how long after its minute each run's matches are published; with `--on-landing`, N runs of the
query registered on a landing folder instead, and how long after each file lands its matches are published.

What a user deploys with `infra/airflow-local.sh`: `airflow standalone` (scheduler, DAG processor, API server,
LocalExecutor) over the generated DAGs, the query registered with `schedule: "* * * * *"` and an `events`
template naming a file per minute. The lake holds the history of `pielake.bench.freshness` (a batch run on the
engine first); before each minute a slice of 1,000 newer events lands under the name of that minute. A run
triggered at minute T is on time when its row in `runs` says it was published within the target of T, and the
schedule keeps up (no backlog) when every run's first step started before the next minute: Airflow runs one run
of the query at a time, so a run that outlasts its minute delays the next one's start, and the delays add up.

On landing (`pielake.orchestration.landing`), the query has no clock: Airflow's triggerer watches its landing
folder. A slice lands (written under a hidden name, then renamed), the bench waits until the run that took it has
published, and the next slice lands 5-15 s later; the first slice warms Airflow and the engine up and is not
measured. The clock runs from the rename to the run's publish in `runs`: what a user waits for from the moment a
file is there.
"""

from __future__ import annotations

import os
import random
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
LANDING_ROUTE = "Airflow triggerer, engine"
PAUSE_S = (5.0, 15.0)  # between a run's publish and the next file landing


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


def _watched(workdir: Path) -> Path:
    return workdir / "landing-watched"


def register(bench: Bench, history: Path, *, on_landing: bool = False) -> tuple[Path, dict[str, str]]:
    """The query registered to run every minute (or when files land) on a lake that holds the history; Airflow's
    environment. The lake, the registry, Airflow's home and the landing folder of an earlier bench are replaced
    (its runs, its lock, its DAG runs, its files)."""
    lake = bench.workdir / "lakes" / "airflow-scheduler"
    queries = lake.with_name("airflow-scheduler-queries")
    for earlier in (lake, queries, lake.with_name("airflow-scheduler-airflow"), _watched(bench.workdir)):
        shutil.rmtree(earlier, ignore_errors=True)
    queries.mkdir(parents=True)
    (queries / f"{QUERY}.tpq").write_text(chain_query(4) + "\n", encoding="utf-8")
    (queries / f"{QUERY}.yaml").write_text(
        f"landing: {_watched(bench.workdir)}/*.csv\n" if on_landing else
        'schedule: "* * * * *"\n'
        f"events: {_landing(bench.workdir)}/{{{{ data_interval_end | ts_nodash }}}}.csv\nformat: csv\n",
        encoding="utf-8")
    bench.say(f"{LANDING_ROUTE if on_landing else ROUTE}: the history into {lake}")
    bench.run_on_engine(queries / f"{QUERY}.tpq", history, lake, "airflow-scheduler-0.log")
    return lake, {**airflow_env(bench, lake, queries, runner="engine"),
                  "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False"}


def land(slices: list[Path], first: datetime, workdir: Path) -> None:
    """Each slice as the file of its minute, from `first` on (a file named for minute T lands before T)."""
    _landing(workdir).mkdir(parents=True, exist_ok=True)
    for i, piece in enumerate(slices):
        minute = first + timedelta(minutes=i)
        (_landing(workdir) / f"{minute.strftime('%Y%m%dT%H%M%S')}.csv").write_bytes(piece.read_bytes())


def _airflow_runs(spark: SparkSession, lake: Path, kind: str) -> list[tuple[str, datetime, datetime, str]]:
    """The runs in `runs` whose Airflow run ids start with `kind` (`scheduled`, `asset_triggered`): run id, first
    step's start, publish and status."""
    table = lake / V.RUNS
    if not (table / "_delta_log").is_dir():
        return []
    rows = (spark.read.format("delta").load(str(table))  # epoch seconds: no time zone between engine and here
            .select(V.RUN_ID, F.array_min("steps.started_at").cast("double").alias("started_at"),
                    F.col("finished_at").cast("double").alias("finished_at"), V.STATUS).collect())
    return [(row[V.RUN_ID], datetime.fromtimestamp(row["started_at"], UTC),
             datetime.fromtimestamp(row["finished_at"], UTC), row[V.STATUS])
            for row in rows if row[V.RUN_ID].startswith(f"{kind}__")]


def published_runs(spark: SparkSession, lake: Path, since: datetime) -> list[ScheduledRun]:
    """The scheduled runs in `runs` that were due at `since` or later, in order."""
    runs = []
    for run_id, started, published, status in _airflow_runs(spark, lake, "scheduled"):
        due = datetime.fromisoformat(run_id.removeprefix("scheduled__"))
        if due >= since:
            runs.append(ScheduledRun(run_id, due, started, published, status))
    return sorted(runs, key=lambda r: r.due)


def run(workdir: Path, *, events: int, runs: int, say: Callable[[str], None],
        on_landing: bool = False) -> list[ScheduledRun]:
    """Start the engine and Airflow, land a slice before every minute from now on, and wait until each of the
    `runs` minutes measured has its run published (or is far past its target). The minutes measured begin
    `WARM_UP` after Airflow starts: the runs due while it comes up start late for reasons of their own. On
    landing, land one slice at a time instead (`_land_one_at_a_time`)."""
    from pielake.engine.session import connect_session  # noqa: PLC0415 (Spark's Connect client: only here)

    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    history, slices = split(workdir, events, runs + WARM_UP.seconds // 60 + 1)
    bench = start(workdir, say)
    airflow = None
    try:
        spark = connect_session(bench.address)
        lake, env = register(bench, history, on_landing=on_landing)
        process([str(BIN / "airflow"), "db", "migrate"], workdir / "logs" / "airflow-scheduler-migrate.log", env)
        if not on_landing:
            land(slices, _next_minute(datetime.now(UTC)), workdir)
            first = _next_minute(datetime.now(UTC) + WARM_UP)
            say(f"starting airflow standalone; the runs measured are due from {first:%H:%M} UTC on")
        with (workdir / "logs" / "airflow-standalone.log").open("w", encoding="utf-8") as log:
            airflow = subprocess.Popen([str(BIN / "airflow"), "standalone"], env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        if on_landing:
            return _land_one_at_a_time(spark, lake, slices[:runs + 1], _watched(workdir), airflow=airflow, say=say)
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


def _land_one_at_a_time(spark: SparkSession, lake: Path, slices: list[Path], folder: Path, *,
                        airflow: subprocess.Popen, say: Callable[[str], None]) -> list[ScheduledRun]:
    """Land each slice in `folder` once the run of the one before has published; each measured run, its `due` the
    moment its file landed. The first slice waits for Airflow to come up and is not measured."""
    folder.mkdir(parents=True, exist_ok=True)
    measured: list[ScheduledRun] = []
    for i, piece in enumerate(slices):
        if i:
            time.sleep(random.uniform(*PAUSE_S))
        part = folder / f".events-{i:03d}.csv.part"
        part.write_bytes(piece.read_bytes())
        landed = datetime.now(UTC)
        part.rename(folder / f"events-{i:03d}.csv")
        took = _published_after(spark, lake, landed, WARM_UP if i == 0 else timedelta(seconds=3 * TARGET_S),
                                airflow=airflow)
        if took is None:
            say(f"{LANDING_ROUTE}: no run published within its time of events-{i:03d}.csv landing")
            break
        say(f"{LANDING_ROUTE}: events-{i:03d}.csv {'(warm-up) ' if not i else ''}published after {took.lag_s:.1f} s")
        measured += [took] if i else []
    return measured


def _published_after(spark: SparkSession, lake: Path, landed: datetime, within: timedelta, *,
                     airflow: subprocess.Popen) -> ScheduledRun | None:
    """The first run triggered by a landing that published after `landed`, once there is one (None after
    `within`)."""
    while datetime.now(UTC) < landed + within:
        if airflow.poll() is not None:
            raise PielakeError(f"airflow standalone exited with {airflow.returncode} (its log: {airflow.args})")
        after = sorted((published, run_id, started, status) for run_id, started, published, status
                       in _airflow_runs(spark, lake, "asset_triggered") if published > landed)
        if after:
            published, run_id, started, status = after[0]
            return ScheduledRun(run_id, landed, started, published, status)
        time.sleep(1)
    return None


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


def landing_summary(runs: list[ScheduledRun], wanted: int) -> str:
    """Each file's wait from landing to its matches published."""
    lags = [r.lag_s for r in runs]
    table = ["| runs published | median s | fastest, slowest s |", "|---|---|---|",
             f"| {len(runs)} of {wanted} | {statistics.median(lags) if lags else float('nan'):.1f} | "
             f"{min(lags, default=float('nan')):.1f}, {max(lags, default=float('nan')):.1f} |"]
    each = ", ".join(f"{lag:.0f}" for lag in lags)
    return "\n".join(table) + f"\n\n(seconds from each file landing to its run's publish: {each})\n"


def write_docs(runs: list[ScheduledRun], wanted: int, page: Path, command: str, *, on_landing: bool = False) -> Path:
    if on_landing:
        return write_block(page, "landing", f"`{command}`\n\n{landing_summary(runs, wanted)}")
    return write_block(page, "scheduler", f"`{command}`\n\n{summary(runs, wanted)}")
