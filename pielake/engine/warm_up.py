"""What the engine runs before it says it is ready: a batch run and a few micro-batches of a small query of its own,
on a scratch lake inside the lake it serves, which it deletes afterwards.

A JVM runs Spark's planner, Delta's log handling and the kernels' generated code slowly until its JIT has compiled
them, and a micro-batch of a few thousand events is mostly that fixed work: on a new engine the first micro-batch
costs three times what a warm one does, and the next few still more than later ones (docs/performance.md). Those
code paths are the same whatever the query and however few its events, so the engine takes them once on its own
small input, and the first run a user schedules finds them compiled.

The query pairs its symbols both ways the pipeline finds pairs (automata, and endpoints for `before`), returns an
aggregate, and runs with its gates on, over synthetic events (`pielake.pipeline.synthetic`) in CSV files, as a
user's run reads them. The scratch lake is under `<lake>/_engine/`, which nothing registers or reads, and on the
lake's own file system, so an engine on a cluster's master warms its executors too.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.runner import run_query
from pielake.pipeline.synthetic import write_landings
from pielake.query.analyzer import load_runnable

QUERY = """FROM Synthetic PARTITION BY id
DEFINE A AS a_1, B AS a_2, C AS a_3
PATTERN A overlaps; starts; during B AND B before C
WITHIN 400 s
RETURN max(C.ts) AS last_c"""
KEYS = 3
HISTORY = 200  # events a key in the batch run
SLICE = 20  # events a key in each micro-batch
SCRATCH = "warm-up"


def warm_up(spark: SparkSession, lake_root: Path, micro_batches: int, say: Callable[[str], None]) -> float:
    """Run the warm-up query's batch and then `micro_batches` micro-batches on a scratch lake under `lake_root`;
    its seconds. Nothing is left of it: the scratch lake goes, whether the runs end well or not."""
    scratch = lake_root / V.ENGINE_DIR / SCRATCH
    shutil.rmtree(scratch, ignore_errors=True)  # what an engine killed while warming up left
    started = time.perf_counter()
    try:
        files = _event_files(scratch / "landing", micro_batches)
        plan, lake = load_runnable(QUERY, "warm_up"), Lake(spark.newSession(), scratch / "lake")
        for number, events in enumerate(files):
            mode = "batch" if number == 0 else "incremental"
            run_query(lake, plan, f"warm-up-{number}", RunRequest(mode=mode, events_path=str(events), fmt="csv"))
            say(f"warm-up: {mode} run {number + 1} of {len(files)} done at {time.perf_counter() - started:.1f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.perf_counter() - started


def _event_files(folder: Path, micro_batches: int) -> list[Path]:
    """The batch run's events, then each micro-batch's newer ones, as CSV files in `folder`."""
    folder.mkdir(parents=True)
    files = [folder / f"events-{number}.csv" for number in range(micro_batches + 1)]
    write_landings(files, keys=KEYS, history=HISTORY, per_slice=SLICE, columns=3, seed=7)
    return files
