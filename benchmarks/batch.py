"""Batch benchmark (issue 3): TPStream's synthetic law, a chain of 4 symbols, W = 10,000.

    .venv/bin/python benchmarks/batch.py --events 1000000 10000000

Generates the events (one key: the hardest case for parallelism), ingests them from Parquet into Delta, and times
every stage, printing events/s per stage. The Spark session is started before the clock runs; its start-up is
reported separately. Not part of the default tests.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from pielake.bench import chain_query
from pielake.engine.session import build_session
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.runner import run_query
from pielake.pipeline.synthetic import generate
from pielake.query.analyzer import load_query


def bench(events: int, symbols: int, workdir: Path, master: str | None) -> None:
    started = time.perf_counter()
    spark = build_session(master, app_name="pielake-bench")
    spark.range(1).count()
    startup = time.perf_counter() - started
    data = workdir / f"synthetic-{events}"
    if not data.exists():
        generate(data, events, columns=symbols)
    lake_dir = workdir / f"lake-{events}"
    shutil.rmtree(lake_dir, ignore_errors=True)
    plan = load_query(chain_query(symbols), f"chain{symbols}")
    request = RunRequest(events_path=str(data), fmt="parquet", checks=False)
    summary = run_query(Lake(spark, lake_dir), plan, "bench", request, progress=lambda line: print(line, flush=True))
    total = sum(s.seconds for s in summary.stages)
    print(f"\n{events:,} events, {symbols} symbols, spark start-up {startup:.1f} s (not counted)")
    print(f"{'stage':<14}{'seconds':>10}{'events/s':>14}")
    for stage in summary.stages:
        print(f"{stage.stage:<14}{stage.seconds:>10.2f}{events / stage.seconds:>14,.0f}")
    print(f"{'total':<14}{total:>10.2f}{events / total:>14,.0f}")
    print(f"matches by status: {summary.matches}\n", flush=True)


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    args.add_argument("--symbols", type=int, default=4)
    args.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "pielake-bench")
    args.add_argument("--master", default=None)
    options = args.parse_args()
    for events in options.events:
        bench(events, options.symbols, options.workdir, options.master)


if __name__ == "__main__":
    main()
