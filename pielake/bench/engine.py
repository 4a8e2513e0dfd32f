"""`pielake bench --engine`: the shapes of `pielake bench`, each run in this process and on the lake's engine,
alternated, to show what batch detection costs on the engine against a Spark session of its own.

Every repeat of a case runs the same query over the same events twice, each in a fresh lake: once in this
process's Spark session, once on an engine (`pielake engine start` on a lake of its own; a run names its lake),
its steps sent one at a time as Airflow's tasks send them. The order alternates within the repeats (in process
first, then the engine first) so that the machine's drift reaches both alike.

Both sides time the same span as `pielake bench`, from the events in Delta to the matches in Delta: the stages
from situations to publish as the run reports each (gates off), less the events' admission to Delta, which the
situations stage tells apart (`pielake bench` admits them before its clock; on the engine it is the situations
step's first act, and no step of its own). Both must publish the same number of matches, or the bench stops.
"""

from __future__ import annotations

import csv
import shutil
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.bench import freshness
from pielake.bench.pages import write_block
from pielake.bench.queries import shape_query
from pielake.bench.shapes import STAGES, synthetic_events
from pielake.engine.client import EngineAddress, RunOrder, run_on_engine
from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest, StageResult
from pielake.pipeline.registry import STAGES as REGISTRY
from pielake.pipeline.runner import one_process_run
from pielake.pipeline.stages import ADMISSION
from pielake.query.analyzer import load_query

SAME_SPEED = 1.10  # the engine's median within 10% of the in-process one


@dataclass(frozen=True)
class Case:
    shape: str
    symbols: int
    events: int


@dataclass(frozen=True)
class Pair:
    """One repeat of a case: the timed span in process and on the engine, and what each published."""

    case: Case
    repeat: int
    in_process_s: float
    engine_s: float
    matches: int

    @property
    def ratio(self) -> float:
        return self.engine_s / self.in_process_s


def _span(stages: Iterable[tuple[str, float, dict[str, float]]]) -> float:
    """The seconds of the timed stages (`pairs c1, c2` and `pairs` alike) among `stages` (name, seconds, named
    parts), less the events' admission."""
    return sum(seconds - parts.get(ADMISSION, 0.0) for name, seconds, parts in stages if name.split()[0] in STAGES)


def in_process(spark: SparkSession, text: str, name: str, lake: Path, request: RunRequest) -> float:
    """The timed span of a run in this process, every step in turn as `pielake run` takes them."""
    plan = load_query(text, name)
    with one_process_run(Lake(spark, lake), plan, "bench", request) as run:
        outcomes = [run.step(step.name) for step in REGISTRY.steps(plan, parallel=False)]
    return _span((o.stage, o.seconds, o.parts) for o in outcomes if isinstance(o, StageResult))


def on_engine(address: EngineAddress, text: str, name: str, lake: Path, request: RunRequest) -> float:
    """The timed span of a run on the engine, its steps sent one at a time (a stage's answer has its seconds)."""
    plan = load_query(text, name)
    answers = [run_on_engine(address, RunOrder(text, name, str(lake), "bench", asdict(request), step.name),
                             lambda _line: None) for step in REGISTRY.steps(plan, parallel=False)]
    return _span((a["step"], a["seconds"], a["parts"]) for a in answers if "seconds" in a)


def measure(spark: SparkSession, address: EngineAddress, case: Case, repeat: int, workdir: Path) -> Pair:
    """One repeat of a case on both sides, the engine first in even repeats; each in a fresh lake."""
    text, _ = shape_query(case.shape, case.symbols)
    name = f"{case.shape}{case.symbols}"
    events = synthetic_events(case.symbols, case.events, workdir).resolve()  # the engine's cwd is not ours
    request = RunRequest(events_path=str(events), fmt="parquet", checks=False)
    # A lake of its own per repeat: the engine's Delta keeps what it read of a table's log by its path.
    lakes = {side: (workdir / "lakes" / f"{side}-{name}-{case.events}-{repeat}").resolve()
             for side in ("process", "engine")}
    sides = {"process": lambda: in_process(spark, text, name, lakes["process"], request),
             "engine": lambda: on_engine(address, text, name, lakes["engine"], request)}
    for lake in lakes.values():
        shutil.rmtree(lake, ignore_errors=True)
    timed = {side: sides[side]() for side in (("process", "engine") if repeat % 2 else ("engine", "process"))}
    matches = {side: Lake(spark, lake).read(V.table_name(V.MATCHES, name)).count() for side, lake in lakes.items()}
    if matches["process"] != matches["engine"]:
        raise PielakeError(f"{name} at {case.events:,} events: {matches['process']} matches in process, "
                           f"{matches['engine']} on the engine")
    for lake in lakes.values():
        shutil.rmtree(lake, ignore_errors=True)
    return Pair(case, repeat, round(timed["process"], 2), round(timed["engine"], 2), matches["process"])


def run(spark: SparkSession, cases: list[Case], *, workdir: Path, repeats: int,
        say: Callable[[str], None]) -> list[Pair]:
    """Every case `repeats` times on both sides, with one engine started for the bench and stopped after it."""
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    for case in cases:  # generated before the engine starts, so that no repeat waits for it
        synthetic_events(case.symbols, case.events, workdir)
    bench = freshness.start(workdir, say)
    try:
        pairs = []
        for index, case in enumerate(cases, 1):
            for repeat in range(1, repeats + 1):
                say(f"[{index}/{len(cases)}] {case.shape} n={case.symbols} N={case.events:,} repeat "
                    f"{repeat}/{repeats} ...")
                started = time.perf_counter()
                pair = measure(spark, bench.address, case, repeat, workdir)
                say(f"    in process {pair.in_process_s:.1f} s, engine {pair.engine_s:.1f} s (x{pair.ratio:.2f}), "
                    f"{pair.matches} matches; {time.perf_counter() - started:.0f} s with loading")
                pairs.append(pair)
        return pairs
    finally:
        freshness.stop(bench)


def summary(pairs: list[Pair]) -> str:
    """Per case: the medians of both sides, their ratio against the 10% bound, and the ratio within each repeat."""
    rows = ["| shape | n | events | in process s | engine s | engine / in process | within 10% | each repeat "
            "| matches |", "|---|---|---|---|---|---|---|---|---|"]
    for case in dict.fromkeys(p.case for p in pairs):
        mine = [p for p in pairs if p.case == case]
        here, there = (statistics.median(getattr(p, side) for p in mine) for side in ("in_process_s", "engine_s"))
        ratio = there / here
        rows.append(f"| {case.shape} | {case.symbols} | {case.events:,} | {here:.2f} | {there:.2f} | {ratio:.2f} | "
                    f"{'✓' if ratio <= SAME_SPEED else '✗'} | {', '.join(f'{p.ratio:.2f}' for p in mine)} | "
                    f"{mine[0].matches} |")
    return "\n".join(rows) + "\n\n(median of each side: events in Delta to matches in Delta, gates off)\n"


def write_csv(pairs: list[Pair], path: Path) -> Path:
    """One row per repeat of a case: both sides' seconds and what they published."""
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["shape", "symbols", "events", "repeat", "in_process_s", "engine_s", "matches"])
        writer.writerows([p.case.shape, p.case.symbols, p.case.events, p.repeat, p.in_process_s, p.engine_s,
                          p.matches] for p in pairs)
    return path


def write_docs(pairs: list[Pair], page: Path, command: str) -> Path:
    """The command and the summary between the page's engine markers (`pielake.bench.pages`)."""
    return write_block(page, "engine", f"`{command}`\n\n{summary(pairs)}")
