"""`pielake bench --soak N`: one engine serving N micro-batches in a row, and what it holds as they go by.

The engine is one Spark application that lives as long as the lake is in use: a query scheduled every minute sends
it 1,440 runs a day, each in a Spark session of its own. Whatever a run leaves behind that nothing frees would
grow with the runs until the engine fails. So the bench sends N micro-batches of the freshness bench's slices
(1,000 events for 10 keys on a lake that holds the history) one after another, as `pielake run --incremental
--remote` sends them, and about every tenth of them reads:

- the JVM's heap in use right after a full collection (`jcmd GC.run`, then `GC.heap_info`): what the engine
  holds, not what it has yet to collect;
- the resident memory of the JVM and of the engine's Python process, which runs the runs' Python;
- the JVM's threads and loaded classes (a class of Spark's generated code is loaded anew for each plan it compiles,
  and unloaded when its cache lets go of it).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import psutil

from pielake.bench.freshness import Bench, split, start, stop
from pielake.bench.pages import write_block
from pielake.bench.queries import chain_query
from pielake.engine.client import engine_status
from pielake.engine.jvm import spark_jvm
from pielake.errors import PielakeError

SAMPLES = 10  # readings over the runs, besides the one before the first


@dataclass(frozen=True)
class Reading:
    runs: int  # micro-batches served before this reading
    heap_mb: float  # the JVM's heap in use after a full collection
    jvm_rss_mb: float
    python_rss_mb: float
    threads: int
    classes: int
    last_run_s: float  # the latest micro-batch, as a process from start to exit


def _jcmd(pid: int, *command: str) -> str:
    """The JDK's `jcmd` (on the PATH, else in JAVA_HOME) told `command` for the JVM `pid`; what it answers."""
    home = os.environ.get("JAVA_HOME")
    jcmd = shutil.which("jcmd") or (shutil.which("jcmd", path=str(Path(home) / "bin")) if home else None)
    if jcmd is None:
        raise PielakeError("the soak bench reads the engine's JVM with the JDK's jcmd, which is neither on the PATH "
                           "nor in $JAVA_HOME/bin")
    return subprocess.run([jcmd, str(pid), *command], capture_output=True, text=True, check=True).stdout


def _heap_used_kb(heap_info: str) -> int | None:
    """The heap in use, in KB, from `jcmd GC.heap_info`: the sum over the heap's parts, each a line `<part> total
    …K, used …K`. G1 reports its heap as one part; the throughput collector (`JAVA_OPTIONS`) as its young and old
    generations, whose first line alone is the young generation, nearly empty after a full collection. Metaspace
    is no part of the heap (its line has no total)."""
    used = [int(kb) for kb in re.findall(r"total \d+K, used (\d+)K", heap_info)]
    return sum(used) if used else None


def read(engine: psutil.Process, runs: int, last_run_s: float) -> Reading:
    """The engine's memory now (module docstring)."""
    jvm = spark_jvm(engine)
    if jvm is None:
        raise PielakeError(f"the engine (pid {engine.pid}) has no JVM")
    _jcmd(jvm.pid, "GC.run")
    heap = _heap_used_kb(_jcmd(jvm.pid, "GC.heap_info"))
    counters = dict(re.findall(r"^java\.cls\.(\w+)=(\d+)$", _jcmd(jvm.pid, "PerfCounter.print"), flags=re.M))
    if heap is None or not {"loadedClasses", "unloadedClasses"} <= counters.keys():
        raise PielakeError(f"jcmd of the engine's JVM (pid {jvm.pid}) did not say its heap or classes")
    return Reading(runs, round(heap / 1024, 1), round(jvm.memory_info().rss / 2**20, 1),
                   round(engine.memory_info().rss / 2**20, 1), jvm.num_threads(),
                   int(counters["loadedClasses"]) - int(counters["unloadedClasses"]), round(last_run_s, 2))


def run(workdir: Path, *, events: int, runs: int, say: Callable[[str], None]) -> list[Reading]:
    """Start an engine, run the history into a lake of its own, then `runs` micro-batches, reading the engine's
    memory before the first and about every tenth of them; the engine is stopped at the end."""
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    history, slices = split(workdir, events, runs)
    bench = start(workdir, say)
    try:
        engine = psutil.Process(engine_status(bench.address)["pid"])
        lake, query = _prepare(bench, history)
        readings = [read(engine, 0, 0.0)]
        every = max(1, runs // SAMPLES)
        for n, landed in enumerate(slices, 1):
            took = bench.run_on_engine(query, landed, lake, f"soak-{n}.log", "--incremental")
            if n % every == 0 or n == runs:
                readings.append(read(engine, n, took))
                say(f"soak: {describe(readings[-1])}")
        return readings
    finally:
        stop(bench)


def _prepare(bench: Bench, history: Path) -> tuple[Path, Path]:
    lake = bench.workdir / "lakes" / "soak"
    shutil.rmtree(lake, ignore_errors=True)
    query = bench.workdir / "soak.tpq"
    query.write_text(chain_query(4) + "\n", encoding="utf-8")
    bench.say(f"soak: the history into {lake}")
    bench.run_on_engine(query, history, lake, "soak-0.log")
    return lake, query


def describe(reading: Reading) -> str:
    return (f"{reading.runs} runs: heap after a full GC {reading.heap_mb:.0f} MB, JVM {reading.jvm_rss_mb:.0f} MB, "
            f"Python {reading.python_rss_mb:.0f} MB, {reading.threads} threads, {reading.classes} classes, "
            f"last run {reading.last_run_s:.1f} s")


def summary(readings: list[Reading]) -> str:
    """The readings as a table, and how fast heap and Python grew over the runs: the least-squares slope of the
    readings after the first, which the first runs' caches and compiled code are still filling."""
    table = ["| runs served | heap after a full GC MB | JVM resident MB | Python resident MB | JVM threads | "
             "classes loaded | last run s |", "|---|---|---|---|---|---|---|"]
    table += [f"| {r.runs} | {r.heap_mb:.0f} | {r.jvm_rss_mb:.0f} | {r.python_rss_mb:.0f} | {r.threads} | "
              f"{r.classes:,} | {r.last_run_s:.1f} |" for r in readings]
    served = readings[1:]
    if len(served) < 2:
        return "\n".join(table) + "\n"
    runs = [r.runs for r in served]
    heap = statistics.linear_regression(runs, [r.heap_mb for r in served]).slope * 1000
    python = statistics.linear_regression(runs, [r.python_rss_mb for r in served]).slope * 1000
    return "\n".join(table) + (
        f"\n\nFrom {runs[0]} to {runs[-1]} runs (least squares): heap after a full GC {heap:+.0f} MB a thousand runs "
        f"(readings {min(r.heap_mb for r in served):.0f}-{max(r.heap_mb for r in served):.0f} MB), Python "
        f"{python:+.0f} MB a thousand runs, classes {served[-1].classes - served[0].classes:+,}.\n")


def write_csv(readings: list[Reading], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow([f.name for f in fields(Reading)])
        writer.writerows(astuple(r) for r in readings)
    return path


def plot(readings: list[Reading], path: Path) -> Path:
    """Memory against runs served: the heap after a full GC and the two processes' resident memory."""
    import matplotlib  # noqa: PLC0415 (only a bench draws)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(7, 3.5))
    runs = [r.runs for r in readings]
    for label, values in (("JVM resident", [r.jvm_rss_mb for r in readings]),
                          ("engine's Python resident", [r.python_rss_mb for r in readings]),
                          ("JVM heap after a full GC", [r.heap_mb for r in readings])):
        axes.plot(runs, values, marker="o", label=label)
    axes.set(xlabel="micro-batches served", ylabel="MB", ylim=(0, None),
             title="One engine serving micro-batches in a row")
    axes.legend(loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def write_docs(readings: list[Reading], page: Path, command: str) -> Path:
    return write_block(page, "soak", f"`{command}`\n\n{summary(readings)}\n![memory against runs served](soak.png)")
