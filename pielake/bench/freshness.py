"""`pielake bench --freshness`: how long a file of new events takes from landing to its matches being readable in
SQL, on every route a user can schedule detection by, and how long a whole run takes, each timed the way users
meet it: a process, from its start to its exit.

The data is TPStream's synthetic law (`pielake.pipeline.synthetic`) over ten keys, the query PieStream's 4-symbol
chain (`PARTITION BY id`, gates on, as users run it). The history is N events (N/10 a key) in one CSV file; each
round lands a slice of 1,000 newer events (100 a key) as a CSV file.

The routes, alternated within every round so that the machine's drift reaches all of them alike:

- micro-batch routes, each on a lake of its own that holds the history (a batch run, before the rounds) and every
  earlier round's slice: `pielake run --incremental` in process (a cold Spark driver) and on the lake's engine
  (`--remote`), and one scheduled run through Airflow (`airflow dags test`) with its steps on the engine
  (`runner: engine`) and as a Spark application each (`runner: spark-submit`). Landed-to-readable is the
  process's time plus reading the new matches over Spark Connect, as a SQL client already connected reads them.
- whole-run routes: `pielake run` of the history on an empty lake, in process and on the engine.

Every route's tables must hold the same matches after every round: the bench stops if they do not.
"""

from __future__ import annotations

import csv
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pielake import vocabulary as V
from pielake.bench.pages import write_block
from pielake.bench.queries import chain_query
from pielake.engine.client import CONNECT_MARKS, EngineAddress, free_port, free_ports, lake_engine
from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.pipeline.synthetic import write_landings
from pielake.plot import pyplot

KEYS = 10
SLICE = 1_000  # the events of one landed file, SLICE / KEYS a key
QUERY = "chain4"
BIN = Path(sys.executable).parent
DAGS = Path(__file__).resolve().parents[2] / "dags"
AIRFLOW_SETTINGS = DAGS.parent / "infra" / "airflow.env"


@dataclass(frozen=True)
class Route:
    """One way to get events into matches: what a user runs, and the target its median must meet."""

    name: str
    kind: str  # "micro-batch" (landed -> readable) or "whole run"
    target_s: float
    remote: bool = False
    runner: str | None = None  # Airflow's runner; None: the CLI

    @property
    def front(self) -> str:
        """What a user starts (the CLI, Airflow) or times (a whole run): the route's name before its comma."""
        return self.name.partition(", ")[0]

    @property
    def on_engine(self) -> bool:
        """Its runs, or its run's steps, are sent to the lake's engine."""
        return self.remote or self.runner == "engine"


ROUTES = (
    Route("CLI, in process", "micro-batch", 10),
    Route("CLI, engine", "micro-batch", 10, remote=True),
    Route("Airflow, spark-submit", "micro-batch", 30, runner="spark-submit"),
    Route("Airflow, engine", "micro-batch", 30, runner="engine"),
    Route("whole run, in process", "whole run", 45),
    Route("whole run, engine", "whole run", 10, remote=True),
)


@dataclass(frozen=True)
class Timing:
    route: str
    kind: str
    round: int
    process_s: float
    read_s: float
    total_s: float
    matches: int


@dataclass
class Bench:
    """The work folder, the engine and the lakes of one bench."""

    workdir: Path
    engine_lake: Path
    address: EngineAddress
    say: Callable[[str], None]

    def lake(self, route: Route, round_: int = 0) -> Path:
        slug = "".join(c if c.isalnum() else "-" for c in route.name.lower()).replace("--", "-")
        return self.workdir / "lakes" / (slug if route.kind == "micro-batch" else f"{slug}-{round_}")

    def query_file(self, route: Route) -> Path:
        """The query, in a registry folder of the route's own (an Airflow route reads its registration there)."""
        return self.lake(route).with_name(self.lake(route).name + "-queries") / f"{QUERY}.tpq"

    def run_on_engine(self, query: Path, events: Path, lake: Path, log: str, *options: str) -> float:
        """`pielake run` of `query` over `events` into `lake`, sent to the bench's engine, as a process of its own
        logging to `logs/<log>`; its seconds."""
        return process([str(BIN / "pielake"), "run", str(query), "--events", str(events), "--lake", str(lake),
                        *options, "--remote", self.address.connect_url], self.workdir / "logs" / log)


def split(workdir: Path, events: int, rounds: int) -> tuple[Path, list[Path]]:
    """The history (`events` events) and `rounds` slices of newer events, as CSV files, written once."""
    history = workdir / f"history-{events}.csv"
    slices = [workdir / f"slice-{events}-{r}.csv" for r in range(1, rounds + 1)]
    if history.exists() and all(s.exists() for s in slices):
        return history, slices
    write_landings([history, *slices], keys=KEYS, history=events // KEYS, per_slice=SLICE // KEYS, columns=4, seed=42)
    return history, slices


def process(argv: list[str], log: Path, env: dict[str, str] | None = None) -> float:
    """Run a command as a user runs it; its seconds from start to exit. Its output goes to `log`."""
    # The bench's own Spark Connect client marks its environment as Connect's; a child is what a user starts.
    clean = {k: v for k, v in (env or os.environ).items() if k not in CONNECT_MARKS}
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=clean, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = "".join(log.read_text(encoding="utf-8").splitlines(keepends=True)[-30:])
        raise PielakeError(f"{' '.join(argv[:3])} … exited with {done.returncode} after {seconds:.0f} s:\n{tail}")
    return seconds


def start(workdir: Path, say: Callable[[str], None]) -> Bench:
    """The engine, on a lake of its own (runs name their lakes), on free ports."""
    engine_lake = workdir / "lakes" / "engine"
    port, jdbc = free_ports(2), free_port()
    say(f"starting the engine on 127.0.0.1:{port}")
    process([str(BIN / "pielake"), "engine", "start", "--lake", str(engine_lake), "--port", str(port),
             "--jdbc-port", str(jdbc)], workdir / "engine-start.log")
    return Bench(workdir, engine_lake, lake_engine(engine_lake), say)


def stop(bench: Bench) -> None:
    """Stop the bench's engine."""
    process([str(BIN / "pielake"), "engine", "stop", "--lake", str(bench.engine_lake)],
            bench.workdir / "engine-stop.log")


def airflow_env(bench: Bench, lake: Path, queries: Path, runner: str) -> dict[str, str]:
    """Airflow's environment for a lake and a registry folder, as a deployment's (`deployment_settings`): a home of
    their own (a route's DAG differs from another route's under the same name), the engine's connection and
    `runner`."""
    home = lake.with_name(lake.name + "-airflow")
    return {**deployment_settings(), **os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS), "PIELAKE_QUERIES": str(queries),
            "PIELAKE_LAKE": str(lake), "PIELAKE_RUNNER": runner,
            "AIRFLOW_CONN_PIELAKE_ENGINE": bench.address.airflow_connection(),
            "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[*]"}',
            "PYSPARK_PYTHON": sys.executable, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def deployment_settings() -> dict[str, str]:
    """The Airflow settings of a deployment (`infra/airflow.env`: `KEY=value` lines, `#` comments), which
    `infra/airflow-local.sh` exports unless the environment sets them."""
    lines = AIRFLOW_SETTINGS.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def _route_airflow_env(bench: Bench, route: Route) -> dict[str, str]:
    return airflow_env(bench, bench.lake(route), bench.query_file(route).parent, route.runner or "")


def prepare(bench: Bench, history: Path) -> None:
    """Each micro-batch route's lake holds the history, and Airflow's metadata database is migrated."""
    for route in (r for r in ROUTES if r.kind == "micro-batch"):
        query = bench.query_file(route)
        shutil.rmtree(bench.lake(route), ignore_errors=True)
        query.parent.mkdir(parents=True, exist_ok=True)
        query.write_text(chain_query(4) + "\n", encoding="utf-8")
        landing = bench.workdir / f"landing-{bench.lake(route).name}.csv"
        query.with_suffix(".yaml").write_text(f"events: {landing}\nformat: csv\n", encoding="utf-8")
        bench.say(f"{route.name}: the history into {bench.lake(route)}")
        bench.run_on_engine(query, history, bench.lake(route), f"{bench.lake(route).name}-0.log")
        if route.runner is not None:
            process([str(BIN / "airflow"), "db", "migrate"],
                    bench.workdir / "logs" / f"{bench.lake(route).name}-migrate.log", _route_airflow_env(bench, route))


def _command(bench: Bench, route: Route, round_: int, events: Path) -> tuple[list[str], dict[str, str] | None]:
    lake, query = bench.lake(route, round_), bench.query_file(route)
    if route.runner is not None:
        shutil.copyfile(events, bench.workdir / f"landing-{lake.name}.csv")
        logical = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=round_)
        return [str(BIN / "airflow"), "dags", "test", f"pielake_{QUERY}", logical.isoformat()], \
            _route_airflow_env(bench, route)
    argv = [str(BIN / "pielake"), "run", str(query), "--events", str(events), "--lake", str(lake)]
    argv += ["--incremental"] if route.kind == "micro-batch" else []
    argv += ["--remote", bench.address.connect_url] if route.remote else []
    return argv, None


def measure(bench: Bench, route: Route, round_: int, events: Path, read: Callable[[Path], int]) -> Timing:
    """One route in one round: the process's time, then the time to read the matches over Spark Connect."""
    lake = bench.lake(route, round_)
    if route.kind == "whole run":
        shutil.rmtree(lake, ignore_errors=True)
        bench.query_file(route).parent.mkdir(parents=True, exist_ok=True)
        bench.query_file(route).write_text(chain_query(4) + "\n", encoding="utf-8")
    argv, env = _command(bench, route, round_, events)
    process_s = process(argv, bench.workdir / "logs" / f"{lake.name}-{round_}.log", env)
    started = time.perf_counter()
    matches = read(lake)
    read_s = time.perf_counter() - started
    if route.kind == "whole run":
        shutil.rmtree(lake, ignore_errors=True)
    return Timing(route.name, route.kind, round_, round(process_s, 2), round(read_s, 2),
                  round(process_s + read_s, 2), matches)


def run_rounds(bench: Bench, history: Path, slices: list[Path], read: Callable[[Path], int]) -> list[Timing]:
    """Every route once a round, in the order of `ROUTES`; the routes must agree on the matches every round."""
    timings = []
    for round_, landed in enumerate(slices, 1):
        this_round = []
        for route in ROUTES:
            timing = measure(bench, route, round_, landed if route.kind == "micro-batch" else history, read)
            bench.say(f"round {round_}/{len(slices)}: {route.name}: {timing.total_s:.1f} s "
                      f"(process {timing.process_s:.1f} s, read {timing.read_s:.1f} s), {timing.matches:,} matches")
            this_round.append(timing)
        for kind in ("micro-batch", "whole run"):
            counts = {t.route: t.matches for t in this_round if t.kind == kind}
            if len(set(counts.values())) > 1:
                raise PielakeError(f"round {round_}: the {kind} routes disagree on the matches: {counts}")
        timings += this_round
    return timings


def medians(timings: list[Timing]) -> list[tuple[Route, float, float, float]]:
    """Per route: the median landed-to-readable (or whole-run) time, the fastest and the slowest round."""
    rows = []
    for route in ROUTES:
        totals = [t.total_s for t in timings if t.route == route.name]
        if totals:
            rows.append((route, statistics.median(totals), min(totals), max(totals)))
    return rows


def summary(timings: list[Timing], events: int) -> str:
    """The medians as a Markdown table, for the terminal and the docs."""
    rounds = max(t.round for t in timings)
    rows = ["| route | what is timed | median s | fastest, slowest s | target s |", "|---|---|---|---|---|"]
    for route, median, low, high in medians(timings):
        timed = (f"{SLICE:,} events landed → matches readable in SQL" if route.kind == "micro-batch"
                 else f"`pielake run` of {events:,} events, start to exit")
        met = "✓" if median <= route.target_s else "✗"
        rows.append(f"| {route.name} | {timed} | {median:.1f} | {low:.1f}, {high:.1f} | ≤ {route.target_s:g} {met} |")
    faster = "; ".join(f"{front} {', '.join(f'{r:.1f}x' for r in ratios)}" for front, ratios in speedups(timings))
    return "\n".join(rows) + f"\n\n(median of {rounds} rounds, routes alternated within each round)\n" + (
        f"\nHow many times faster each route ran on the engine than without it, round by round: {faster}.\n"
        if faster else "")


def speedups(timings: list[Timing]) -> list[tuple[str, list[float]]]:
    """Per front (`Route.front`), how many times faster its route on the engine was than its route without one,
    round by round. The machine's speed changes from hour to hour, and both routes of a round ran in the same
    minutes: the ratios compare tables of different hours, where the medians do not."""
    seconds = {(t.route, t.round): t.total_s for t in timings}
    out = []
    for engine in (r for r in ROUTES if r.on_engine):
        alone = next(r for r in ROUTES if r.front == engine.front and not r.on_engine)
        rounds = sorted(n for name, n in seconds if name == engine.name and (alone.name, n) in seconds)
        if rounds:
            out.append((engine.front, [seconds[(alone.name, n)] / seconds[(engine.name, n)] for n in rounds]))
    return out


def write_csv(timings: list[Timing], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(Timing)])
        writer.writeheader()
        writer.writerows(asdict(t) for t in timings)
    return path


def plot(timings: list[Timing], path: Path) -> Path:
    """One bar per route (median, with the fastest and slowest round as a whisker), its target as a tick, the
    micro-batch routes and the whole runs side by side."""
    plt = pyplot()
    figure, panels = plt.subplots(1, 2, figsize=(14, 4))
    for axes, kind, title in ((panels[0], "micro-batch", f"{SLICE:,} events landed → matches readable in SQL"),
                              (panels[1], "whole run", "a whole run, process start to exit")):
        rows = [row for row in medians(timings) if row[0].kind == kind]
        names = [route.name for route, *_ in rows]
        values = [median for _, median, _, _ in rows]
        errors = [[median - low for _, median, low, _ in rows], [high - median for _, median, _, high in rows]]
        bars = axes.barh(names, values, xerr=errors, capsize=4,
                         color=["tab:green" if "engine" in n else "tab:gray" for n in names])
        axes.bar_label(bars, labels=[f"{v:.0f} s" for v in values], padding=6)
        axes.scatter([route.target_s for route, *_ in rows], names, marker="|", s=400, color="red", zorder=3,
                     label="target")
        axes.set(xlabel="seconds (median; whisker: fastest and slowest round)", title=title)
        axes.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def run(workdir: Path, *, events: int, rounds: int, say: Callable[[str], None]) -> list[Timing]:
    """Generate the data, start the engine, prime the lakes, run the rounds; the engine is stopped at the end."""
    from pielake.engine.session import connect_session  # noqa: PLC0415 (Spark's Connect client: only here)

    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    history, slices = split(workdir, events, rounds)
    bench = start(workdir, say)
    try:
        spark = connect_session(bench.address)
        prepare(bench, history)
        return run_rounds(bench, history, slices,
                          lambda lake: Lake(spark, lake).read(V.table_name(V.MATCHES, QUERY)).count())
    finally:
        stop(bench)


def write_docs(timings: list[Timing], events: int, page: Path, command: str) -> Path:
    """The command, the summary and the plot (`freshness.png` beside the page) between the page's freshness
    markers."""
    picture = plot(timings, page.parent / "freshness.png")
    return write_block(page, "freshness", f"`{command}`\n\n{summary(timings, events)}\n"
                       f"![landed to readable and whole runs, by route]({picture.name})\n")
