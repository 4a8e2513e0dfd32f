"""The command-line entry point of a run's steps, as `spark-submit jobs/step.py --step <step>` runs them.

It builds (or, under spark-submit, joins) the SparkSession, loads the query, and calls the same `Run.step` the
terminal's `pielake run` calls, so a step behaves the same from the terminal, from spark-submit and from an Airflow
task. Every step gets the whole run request (mode, events, range), whichever part it needs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pielake.engine.session import build_session
from pielake.errors import for_the_user
from pielake.lake.delta import Lake
from pielake.pipeline.gates import import_gx_meanwhile
from pielake.pipeline.job import RunRequest, StageResult
from pielake.pipeline.registry import CHECK
from pielake.pipeline.runner import Run, ended
from pielake.pipeline.scope import MODES
from pielake.query.analyzer import load_query_file
from pielake.streams import events_files


def parser() -> argparse.ArgumentParser:
    args = argparse.ArgumentParser(prog="jobs/step.py", description="One step of a pielake run.")
    args.add_argument("--step", required=True, help="the step: ingest, check_events, situations, pairs_c1, ...")
    args.add_argument("--query", required=True, help="query file (.tpq); its stem names the tables")
    args.add_argument("--lake", required=True, help="lake folder or URI")
    args.add_argument("--run-id", required=True)
    args.add_argument("--master", default=None, help="ignored under spark-submit, which sets the master")
    args.add_argument("--mode", choices=MODES, default="batch")
    args.add_argument("--events", action="append", default=[],
                      help="events file or folder (ingest); empty: none. Over several streams STREAM=FILE, once "
                           "for each stream with new events")
    args.add_argument("--time-column", default=None, help="an unknown stream's time column (default: ts, else the "
                      "file's one column of times)")
    args.add_argument("--time-unit", default=None, help="an unknown stream's unit of numeric times (default: s)")
    args.add_argument("--skip-lines", default="", help="an unknown stream's lines around its header: N or 1,3,4")
    args.add_argument("--time-zone", default=None, help="the zone of an unknown stream's times written as a clock")
    args.add_argument("--time-format", default=None, help="the pattern an unknown stream's text times are written in")
    args.add_argument("--from", dest="since", default=None, help="backfill range start (stream time)")
    args.add_argument("--to", dest="until", default=None, help="backfill range end (stream time)")
    args.add_argument("--format", default=None)
    args.add_argument("--no-checks", action="store_true", help="skip the gates")
    args.add_argument("--lock-wait", type=float, default=0.0,
                      help="seconds to wait for another run of the query to publish (default: stop at once)")
    return args


def _to_log(line: str) -> None:
    """Progress lines go to stderr, which the Airflow task log shows as they come."""
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run one step; prints its result as one JSON line. Returns the process exit code."""
    options = parser().parse_args(argv)
    if options.step.startswith(CHECK) and not options.no_checks:
        import_gx_meanwhile()
    try:
        plan = load_query_file(options.query)
        over = ended(Path(options.lake), plan, options.run_id, options.step)
        if over is not None:  # nothing to do: said before a Spark session starts (Airflow's task skips it sooner)
            print(json.dumps({"step": options.step, "skipped": over}))
            return 0
        lake = Lake(build_session(options.master, app_name=f"pielake-{options.step}-{plan.name}"), options.lake)
        request = RunRequest(mode=options.mode, **events_files(plan, [e for e in options.events if e]),
                             fmt=options.format or None,
                             time_column=options.time_column, time_unit=options.time_unit,
                             skip_lines=options.skip_lines, time_zone=options.time_zone,
                             time_format=options.time_format, since=options.since,
                             until=options.until, checks=not options.no_checks, lock_wait=options.lock_wait)
        outcome = Run(lake, plan, options.run_id, request, progress=_to_log).step(options.step)
        if isinstance(outcome, StageResult):
            print(json.dumps({"step": options.step, "rows": outcome.rows, "seconds": round(outcome.seconds, 3)}))
        else:
            print(json.dumps({"step": options.step, "gate": outcome.text() if outcome else "skipped"}))
        return 0
    except Exception as raised:
        error = for_the_user(raised)
        if error is None:
            raise
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
