"""Command-line entry points of the stages, as `spark-submit jobs/<stage>.py` runs them.

Each job builds (or, under spark-submit, joins) the SparkSession, loads the query, and calls the same stage
function the CLI's `pielake run` calls, so a stage behaves the same from the terminal, from spark-submit and from
an Airflow task.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pielake.errors import PielakeError
from pielake.exitcodes import EXIT_USAGE
from pielake.lake.delta import Lake
from pielake.pipeline.batch import guess_format, resolve_stream, stream_of
from pielake.pipeline.ingest import ingest
from pielake.pipeline.stages import QueryJob, derive_situations, detect_constraint, join_matches
from pielake.query.analyzer import analyze
from pielake.query.parser import parse
from pielake.spark.session import build_session

STAGES = ("ingest", "situations", "pairs", "matches")


def parser(stage: str) -> argparse.ArgumentParser:
    args = argparse.ArgumentParser(prog=f"jobs/{stage}.py", description=f"pielake stage: {stage}")
    args.add_argument("--query", required=True, help="query file (.tpq); its stem names the tables")
    args.add_argument("--lake", required=True, help="lake folder or URI")
    args.add_argument("--run-id", required=True)
    args.add_argument("--master", default=None, help="ignored under spark-submit, which sets the master")
    if stage == "ingest":
        args.add_argument("--events", required=True)
        args.add_argument("--format", default=None)
        args.add_argument("--time-column", default="ts")
        args.add_argument("--time-unit", default="s")
    if stage == "pairs":
        args.add_argument("--constraint", required=True, help="constraint id, e.g. c1")
    return args


def main(stage: str, argv: list[str] | None = None) -> int:
    """Run one stage; prints its result as one JSON line. Returns the process exit code."""
    options = parser(stage).parse_args(argv)
    try:
        path = Path(options.query)
        plan = analyze(parse(path.read_text(encoding="utf-8")), path.stem)
        lake = Lake(build_session(options.master, app_name=f"pielake-{stage}-{plan.name}"), options.lake)
        if stage == "ingest":
            fmt = options.format or guess_format(options.events)
            stream = resolve_stream(lake, plan, options.events, fmt=fmt, time_column=options.time_column,
                                    time_unit=options.time_unit)
            report = ingest(lake, options.events, fmt, stream, options.run_id)
            print(json.dumps({"stage": stage, **report.__dict__}))
            return 0
        job = QueryJob(lake, plan, stream_of(lake, plan), options.run_id)
        result = {"situations": lambda: derive_situations(job),
                  "pairs": lambda: detect_constraint(job, options.constraint),
                  "matches": lambda: join_matches(job)}[stage]()
        print(json.dumps({"stage": result.stage, "rows": result.rows, "seconds": round(result.seconds, 3)}))
        return 0
    except PielakeError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
