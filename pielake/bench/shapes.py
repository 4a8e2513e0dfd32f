"""`pielake bench`: PieStream's Figure 4 and TPStream's query shapes on this machine, with two floors.

Every measurement runs one query over TPStream's synthetic law (`pielake.pipeline.synthetic`) in a fresh lake:

1. the events are generated once per (symbols, events) and cached in the work folder; the stream `Synthetic`
   has no schema file, its n columns are inferred from the files (n varies);
2. `ingest`, `check_events` and the admission that begins the situations stage (`admit_events`: the append, and
   the staged rows freed) put them into the Delta events table: timed, but apart ("events Delta in");
3. the clock runs over situations -> pairs -> matches -> publish (gates off: they are measured on their own),
   which is the end-to-end time, "matches Delta out";
4. two floors: a bare Spark scan of the same Delta events (every column read once), and a bare Delta write of the
   run's own result rows (situations, pairs, matches) from memory, what delivering the contract's tables costs
   once they are computed;
5. a sampler thread records the peak resident memory of the Spark JVM (driver and executors, local mode) and of
   everything this process started (the JVM, the Python workers, this driver).

Results go to `bench.csv` (one row per measurement) and `bench.png` (time against events per shape and symbol
count, the scan floor dashed; time against symbols at the largest event count; each case's stages against its
floors).
"""

from __future__ import annotations

import csv
import shutil
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import psutil
import pyspark.sql.functions as F
from pyspark.sql import SparkSession

from pielake.bench.pages import write_block
from pielake.bench.queries import shape_query
from pielake.engine.checkpoints import hold, release
from pielake.lake.delta import Lake
from pielake.lake.results import results_table
from pielake.pipeline.ingest import admit_events
from pielake.pipeline.job import RunRequest, StageResult, StepContext, events_table
from pielake.pipeline.runner import Run, one_process_run
from pielake.pipeline.synthetic import generate
from pielake.plot import pyplot
from pielake.query.analyzer import load_query

LOADING = ("ingest", "check_events")
STAGES = ("situations", "pairs", "matches", "publish")  # the steps of the end-to-end time, each timed on its own
GIB = 1024**3


@dataclass(frozen=True)
class Measurement:
    shape: str
    symbols: int
    events: int
    repeat: int
    load_s: float
    situations_s: float
    pairs_s: float
    matches_s: float
    publish_s: float
    end_to_end_s: float
    scan_s: float
    write_s: float
    events_per_s: float
    times_scan: float
    peak_jvm_gb: float
    peak_total_gb: float
    matches: int


class MemoryPeak:
    """Peak resident memory, sampled every `every` seconds: the Spark JVM(s) and this whole process tree.

    A JVM's child that is a JVM too is not counted: it is a process the JVM is starting, between its fork and its
    exec, and shares all of its parent's pages (Hadoop's local file system, without its native library, runs
    `chmod` for every file it writes): counted, a run would show twice its memory for a moment. Such a child is
    told by the binary it runs (`exe`), not by its name: Linux names a forked process after the thread that forked
    it, a Java thread's name ("Executor task ...").
    """

    def __init__(self, every: float = 0.1):
        self.every = every
        self.jvm = 0
        self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            jvm, total = _resident(me)
            self.jvm, self.total = max(self.jvm, jvm), max(self.total, total)
            self._stop.wait(self.every)

    @contextmanager
    def watching(self) -> Iterator[MemoryPeak]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()


def _resident(root: psutil.Process) -> tuple[int, int]:
    """Resident bytes of the JVMs under `root` and of its whole tree, without JVMs being started by a JVM."""
    seen = []
    for process in [root, *root.children(recursive=True)]:
        try:
            seen.append((process.pid, process.ppid(), Path(process.exe()).name == "java", process.memory_info().rss))
        except psutil.Error:  # it ended, or is a zombie, since it was listed
            continue
    return resident_sums(seen)


def resident_sums(seen: list[tuple[int, int, bool, int]]) -> tuple[int, int]:
    """From (pid, parent pid, is a JVM, resident bytes) of a process tree: the JVMs' and everything's bytes, a JVM
    whose parent is a JVM left out (see `MemoryPeak`)."""
    jvms = {pid for pid, _, java, _ in seen if java}
    counted = [(java, rss) for _, parent, java, rss in seen if not (java and parent in jvms)]
    return sum(rss for java, rss in counted if java), sum(rss for _, rss in counted)


def _timed_steps(run: Run, steps: list[str]) -> tuple[float, dict[str, float]]:
    """Run `steps`; the wall time, and each stage's own time summed by stage kind (pairs c1 + c2 + ...)."""
    by_kind: dict[str, float] = {}
    started = time.perf_counter()
    for step in steps:
        outcome = run.step(step)
        if isinstance(outcome, StageResult):
            kind = outcome.stage.split()[0]
            by_kind[kind] = by_kind.get(kind, 0.0) + outcome.seconds
    return time.perf_counter() - started, by_kind


def scan_seconds(lake: Lake, table: str) -> float:
    """The floor: one Spark pass that reads every value of the events (a hash of each row; counts alone could be
    answered from Delta's file statistics). The table's files are listed before the clock starts: the floor is
    the scan, not Delta's reconstruction of the snapshot, which the runs do not pay either
    (`Lake.plain_files`) and which a scan after them used to find done."""
    frame = lake.read(table)
    frame.inputFiles()
    started = time.perf_counter()
    frame.agg(F.max(F.xxhash64(*frame.columns))).collect()
    return time.perf_counter() - started


def write_seconds(lake: Lake, table: str, floor: Path) -> float:
    """The write floor: the rows of `table` (the query's results table), held in memory first, written as a new
    Delta table in the lake at `floor` in one overwrite, as `publish` writes a batch run's rows, with Delta's and
    Spark's default settings.

    It is what delivering the result tables of docs/semantics.md §6 costs on this machine once they are computed,
    however they are computed: the part of "events Delta in -> matches Delta out" that faster detection cannot take
    away, and beside which the scan floor's ratio is to be read. (`publish` writes the same rows sorted, in files
    of at most `ROWS_PER_FILE` rows, partitioned by kind and without dictionaries on its times: it can take a
    little more or less.)"""
    held, _ = hold(lake.read(table))
    try:
        started = time.perf_counter()
        Lake(lake.spark, floor).overwrite(held, table)
        return time.perf_counter() - started
    finally:
        release(held)


def synthetic_events(symbols: int, events: int, workdir: Path) -> Path:
    """The folder of `events` events of the synthetic law with `symbols` columns, generated once and kept."""
    data = workdir / f"synthetic-n{symbols}-{events}"
    if not data.exists():
        generate(data, events, columns=symbols)
    return data


def measure(spark: SparkSession, shape: str, symbols: int, events: int, *, workdir: Path, repeat: int) -> Measurement:
    """One run of one shape on `events` events of the synthetic law, in a fresh lake."""
    text, symbols = shape_query(shape, symbols)
    data = synthetic_events(symbols, events, workdir)
    root = workdir / "lake"
    shutil.rmtree(root, ignore_errors=True)
    lake = Lake(spark, root)
    plan = load_query(text, f"{shape}{symbols}")
    request = RunRequest(events_path=str(data), fmt="parquet", checks=False)
    with one_process_run(lake, plan, f"bench-{repeat}", request) as run:
        load, _ = _timed_steps(run, list(LOADING))
        started = time.perf_counter()  # the clock starts with the events in Delta and their staged rows freed
        admit_events(StepContext(run.job, run.request))
        load += time.perf_counter() - started
        with MemoryPeak().watching() as memory:
            steps = [s.name for s in run.registry.steps(run.job.plan, parallel=False)]
            total, stages = _timed_steps(run, [s for s in steps if s not in LOADING])
    scan = scan_seconds(lake, events_table(run.job.stream))
    floor = workdir / "write-floor"
    shutil.rmtree(floor, ignore_errors=True)
    write = write_seconds(lake, results_table(run.job.plan.name), floor)
    matches = sum(run.matches.values())  # counted by the run's own report at publish
    return Measurement(shape, symbols, events, repeat, round(load, 3),
                       *(round(stages.get(k, 0.0), 3) for k in STAGES),
                       round(total, 3), round(scan, 3), round(write, 3), round(events / total),
                       round(total / scan, 2),
                       round(memory.jvm / GIB, 2), round(memory.total / GIB, 2), matches)


def grid(shapes: list[str], symbol_counts: list[int], event_counts: list[int]) -> list[tuple[str, int, int]]:
    """Every (shape, symbols, events) once, in that order; Q1-Q3 once per event count (they have three
    symbols)."""
    return list(dict.fromkeys((shape, shape_query(shape, n)[1], events) for shape in shapes for n in symbol_counts
                              for events in event_counts))


def run_grid(spark: SparkSession, shapes: list[str], symbol_counts: list[int], event_counts: list[int], *,
             workdir: Path, repeats: int, say: Callable[[str], None]) -> list[Measurement]:
    """Every case of the `grid` `repeats` times."""
    cases = grid(shapes, symbol_counts, event_counts)
    out = []
    for index, (shape, symbols, events) in enumerate(cases, 1):
        for repeat in range(1, repeats + 1):
            say(f"[{index}/{len(cases)}] {shape} n={symbols} N={events:,} run {repeat}/{repeats} ...")
            result = measure(spark, shape, symbols, events, workdir=workdir, repeat=repeat)
            say(f"    {result.end_to_end_s:.1f} s end to end ({result.times_scan}x the {result.scan_s:.2f} s scan; "
                f"writing the results alone {result.write_s:.2f} s), {result.events_per_s:,.0f} events/s, "
                f"peak JVM {result.peak_jvm_gb} GB, {result.matches} matches")
            out.append(result)
    return out


def by_case(results: list[Measurement]) -> list[list[Measurement]]:
    """The repeats of each (shape, symbols, events), in the order the cases first appear."""
    groups: dict[tuple[str, int, int], list[Measurement]] = {}
    for r in results:
        groups.setdefault((r.shape, r.symbols, r.events), []).append(r)
    return list(groups.values())


def medians(results: list[Measurement]) -> list[Measurement]:
    """One row per case: the measurement with the median end-to-end time."""
    return [sorted(g, key=lambda r: r.end_to_end_s)[len(g) // 2] for g in by_case(results)]


def write_csv(results: list[Measurement], path: Path) -> Path:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(Measurement)])
        writer.writeheader()
        writer.writerows(asdict(r) for r in results)
    return path


def summary(results: list[Measurement]) -> str:
    """The medians as a Markdown table, for notes and the terminal."""
    head = ("| shape | n | events | end to end s | scan s | x scan | write floor s | publish s | events/s "
            "| peak JVM GB | matches |")
    rows = [head, "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows += [f"| {r.shape} | {r.symbols} | {r.events:,} | {r.end_to_end_s:.2f} | {r.scan_s:.2f} | {r.times_scan} | "
             f"{r.write_s:.2f} | {r.publish_s:.2f} | {r.events_per_s:,.0f} | {r.peak_jvm_gb} | {r.matches} |"
             for r in medians(results)]
    spread = max(statistics.pstdev([m.end_to_end_s for m in case]) for case in by_case(results))
    return "\n".join(rows) + f"\n(median of each case; largest spread between repeats {spread:.2f} s)\n"


def write_docs(results: list[Measurement], page: Path, command: str) -> Path:
    """Write the command, the summary and the plot (drawn beside the page as `bench.png`) between `page`'s bench
    markers (`pielake.bench.pages`)."""
    picture = plot(results, page.parent / "bench.png")
    return write_block(page, "bench", f"`{command}`\n\n{summary(results)}\n"
                       f"![end to end against events and symbols, and where the time goes]({picture.name})\n")


def plot(results: list[Measurement], path: Path) -> Path:
    """Time against events per (shape, n) on log axes with the scan floor dashed; time against n at the
    largest event count; where the time of each case goes, stage by stage, against its scan."""
    plt = pyplot()
    best = medians(results)
    figure, (by_events, by_symbols, by_stage) = plt.subplots(1, 3, figsize=(19, 5))
    for shape, symbols in dict.fromkeys((r.shape, r.symbols) for r in best):
        rows = sorted((r for r in best if (r.shape, r.symbols) == (shape, symbols)), key=lambda r: r.events)
        line, = by_events.plot([r.events for r in rows], [r.end_to_end_s for r in rows], marker="o",
                               label=f"{shape} n={symbols}")
        by_events.plot([r.events for r in rows], [r.scan_s for r in rows], linestyle="--", marker="x",
                       color=line.get_color(), alpha=0.6)  # the marker shows a case of one event count too
    by_events.set(xscale="log", yscale="log", xlabel="events", ylabel="seconds (dashed: bare Delta scan)",
                  title="end to end, events Delta in -> matches Delta out")
    by_events.legend(fontsize=8)
    largest = max(r.events for r in best)
    for shape in dict.fromkeys(r.shape for r in best):
        rows = sorted((r for r in best if r.shape == shape and r.events == largest), key=lambda r: r.symbols)
        by_symbols.plot([r.symbols for r in rows], [r.end_to_end_s for r in rows], marker="o", label=shape)
    by_symbols.set(xlabel="symbols n", ylabel="seconds", title=f"growth in n at {largest:,} events")
    by_symbols.legend(fontsize=8)
    _plot_stages(by_stage, best)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _plot_stages(axes: Any, best: list[Measurement]) -> None:
    """One stacked bar per case: the seconds of each stage, the case's two floors as ticks (the bare scan, and the
    bare scan followed by the bare write of the results: both before any detection is computed)."""
    labels = [f"{r.shape} n={r.symbols} N={r.events:.0e}" for r in best]
    left = [0.0] * len(best)
    for stage in STAGES:
        seconds = [getattr(r, f"{stage}_s") for r in best]
        axes.barh(labels, seconds, left=left, label=stage)
        left = [a + b for a, b in zip(left, seconds, strict=True)]
    axes.scatter([r.scan_s for r in best], labels, marker="|", s=300, color="black", label="bare scan", zorder=3)
    axes.scatter([r.scan_s + r.write_s for r in best], labels, marker="|", s=300, color="red",
                 label="bare scan + bare write of the results", zorder=3)
    axes.set(xlabel="seconds", title="where the time goes (median run of each case)")
    axes.legend(fontsize=8)
