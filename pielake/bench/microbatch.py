"""Micro-batch benchmark: 1% new events on top of N processed ones, against a full batch run over N.

    .venv/bin/python -m pielake.bench.microbatch --events 10000000

One key (the hardest case: its whole history is one timeline), TPStream's synthetic law, the 4-symbol chain query
of `pielake bench`, W = 10,000. Times the batch run over the first N events, then the incremental run over the
next N/100, both with gates off (what the gates cost is measured on its own), Spark start-up excluded.
Prints both, their ratio and the micro-batch's stages. Not part of the default tests.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pielake.bench.queries import chain_query
from pielake.engine.session import build_session
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.runner import RunSummary, run_query
from pielake.pipeline.synthetic import generate
from pielake.query.analyzer import load_query


def split(events: int, workdir: Path) -> tuple[Path, Path]:
    """History (ts < events) and the next 1% (ts >= events), one Parquet file each."""
    total = events + events // 100
    source = workdir / f"synthetic-{total}"
    if not source.exists():
        generate(source, total, columns=4)
    table = ds.dataset(source).to_table()
    history, fresh = workdir / f"history-{events}.parquet", workdir / f"fresh-{events}.parquet"
    pq.write_table(table.filter(ds.field("ts") < events), history)
    pq.write_table(table.filter(ds.field("ts") >= events), fresh)
    return history, fresh


def timed_run(lake: Lake, name: str, request: RunRequest) -> tuple[float, RunSummary]:
    plan = load_query(chain_query(4), "chain4")
    started = time.perf_counter()
    summary = run_query(lake, plan, name, request, progress=lambda line: print(line, flush=True))
    return time.perf_counter() - started, summary


def bench(events: int, workdir: Path, master: str | None) -> None:
    history, fresh = split(events, workdir)
    started = time.perf_counter()
    spark = build_session(master, app_name="pielake-microbatch-bench")
    spark.range(1).count()
    startup = time.perf_counter() - started
    lake_dir = workdir / f"lake-micro-{events}"
    shutil.rmtree(lake_dir, ignore_errors=True)
    lake = Lake(spark, lake_dir)
    full, _ = timed_run(lake, "full", RunRequest(events_path=str(history), fmt="parquet", checks=False))
    micro, summary = timed_run(lake, "micro", RunRequest(mode="incremental", events_path=str(fresh),
                                                         fmt="parquet", checks=False))
    print(f"\n{events:,} processed events + {events // 100:,} new, 4 symbols, spark start-up {startup:.1f} s")
    print(f"{'stage':<14}{'seconds':>10}")
    for stage in summary.stages:
        print(f"{stage.stage:<14}{stage.seconds:>10.2f}")
    print(f"full batch over {events:,}: {full:.1f} s; micro-batch of {events // 100:,}: {micro:.1f} s "
          f"= {100 * micro / full:.1f}% of the full run (target < 5%)")


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args.add_argument("--events", type=int, nargs="+", default=[1_000_000])
    args.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "pielake-bench")
    args.add_argument("--master", default=None)
    options = args.parse_args()
    options.workdir.mkdir(parents=True, exist_ok=True)
    for events in options.events:
        bench(events, options.workdir, options.master)


if __name__ == "__main__":
    main()
