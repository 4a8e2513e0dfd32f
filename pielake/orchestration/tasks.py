"""What an Airflow task of a pielake DAG runs when its steps run on the engine: one step, sent to the engine (or
the lake's table maintenance, below); and, of a query that runs when events land, the task that takes them.

The task is a thin client (`pielake.engine.client`): it reads the query file, finds the engine through an Airflow
connection of Spark Connect's type (`spark_connect`: host, port and the token as its password), sends the step and
writes the engine's progress lines to the task's log. The engine runs the step warm, as `Run.step` runs it in a
process of its own. So a task imports neither Spark nor Great Expectations, and takes the seconds its step takes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from pielake.engine.client import EngineAddress, EngineError, RunOrder, run_on_engine
from pielake.exitcodes import EXIT_FINDINGS, EXIT_OVER, EXIT_USAGE
from pielake.lake.landed import Landing, held, ledger_of, take_each
from pielake.orchestration.cleared import skip_if_cleared_alone
from pielake.pipeline.registry import STAGES
from pielake.pipeline.run_folder import unadmitted_runs
from pielake.query.analyzer import read_query_file

TAKE_TASK = "take_landed"  # the first task of a query that runs when events land


def run_step_on_engine(*, conn_id: str, query: str, lake: str, run_id: str, step: str, request: dict[str, Any],
                       ti: Any = None) -> dict[str, Any]:
    """Run one step of a run on the engine of `conn_id`. A failed gate or a query that is wrong fails the task for
    good (running it again gives the same answer); a step after the one its run ended at is skipped (`ended`), and
    so is a step of an ended run cleared without its last step (`skip_if_cleared_alone`, which asks Airflow through the
    task instance `ti`); anything else (the engine not up, a busy lock, the engine stopped mid-step) is left to the
    task's retries, which redo the step from what the engine holds of the run's earlier steps, running them again
    first if the engine has restarted since (`Run.resume`)."""
    skip_if_cleared_alone(ti, lake, query, run_id, step)
    address = EngineAddress.parse(SparkConnectHook(conn_id).get_connection_url())
    source, name = read_query_file(query)
    order = RunOrder(source, name, lake, run_id, {**request, "events_path": request.get("events_path") or None},
                     step)
    try:
        result = run_on_engine(address, order, lambda line: print(line, flush=True))
    except EngineError as error:
        if error.exit_code == EXIT_OVER:  # its run ended at a step before it: nothing to do
            raise AirflowSkipException(str(error)) from None
        final = error.exit_code in (EXIT_FINDINGS, EXIT_USAGE)
        raise (AirflowFailException if final else AirflowException)(str(error)) from None
    print(json.dumps(result), flush=True)
    return result


def maintain_on_engine(*, conn_id: str, query: str, lake: str, keep_days: float, lock_wait: float) -> list[str]:
    """Table maintenance of one query (`pielake maintain`) on the engine of `conn_id`, through a Spark Connect
    session: its work is Delta's `OPTIMIZE` and `VACUUM` statements, which run in the engine; this task only
    sends them. Returns what was done to each table."""
    from pielake.engine.session import connect_session  # noqa: PLC0415 (a daily task may import Spark's client)
    from pielake.lake.delta import Lake  # noqa: PLC0415
    from pielake.pipeline.maintenance import maintain  # noqa: PLC0415
    from pielake.query.analyzer import load_query_file  # noqa: PLC0415

    address = EngineAddress.parse(SparkConnectHook(conn_id).get_connection_url())
    cared = maintain(Lake(connect_session(address), lake), load_query_file(query), keep_days=keep_days,
                     lock_wait=lock_wait, say=lambda line: print(line, flush=True))
    return [c.text() for c in cared]


def take_landed(*, landings: dict[str, str], lake: str, query: str, run_id: str, ti: Any = None) -> dict[str, str]:
    """Take the files that landed for each stream since the query's last run into the query's ledger in `lake`
    (`pielake.lake.landed`). Returns each stream's files as the run's ingest reads them ("" for a stream with
    none); skips the run, and so every task after this one, when no stream has any. In a run that has ended, and
    was cleared without its later tasks, it takes nothing and is skipped (`skip_if_cleared_alone`): no ingest would read
    what it took."""
    skip_if_cleared_alone(ti, lake, query, run_id, TAKE_TASK)
    root, name = Path(lake).resolve(), read_query_file(query)[1]
    retaken = unadmitted_runs(root, name, STAGES.before_admission())
    taken = take_each({stream: Landing.parse(glob) for stream, glob in landings.items()}, ledger_of(root, name),
                      run_id, retaken)
    for stream, glob in landings.items():
        files = taken.get(stream)
        print(f"{stream}: " + (f"took {len(held(Path(files)))} file(s) into {files}" if files
                               else f"no new file in {glob}"), flush=True)
    if not taken:
        raise AirflowSkipException("no file has landed since the last run")
    return {stream: taken.get(stream, "") for stream in landings}
