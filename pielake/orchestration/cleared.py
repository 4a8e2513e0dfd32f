"""A task of a run that has ended, cleared by hand: it runs only if the run's last step runs after it.

Airflow clears a task with or without the tasks after it. A run that has ended (published, stopped by a gate,
failed) goes on again from a task cleared with its downstream tasks: its last step runs again and frees the
query's lock (`pielake.pipeline.runner.Run`). A task cleared alone would run with no step after it: a step would
take the lock for a run that never frees it, so that the query's next runs wait behind it until it goes stale;
`take_landed` would take the files that landed since into a run whose ingest is done, and no run would read
them. So such a task is skipped, and its log says how to run it with its run. Every task of a run asks before it
does anything: a step on the engine before it sends the step, spark-submit's before it starts a JVM,
`take_landed` before it takes a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException
from airflow.utils.state import State

from pielake.pipeline.registry import STAGES
from pielake.pipeline.run_folder import run_end
from pielake.query.analyzer import load_query_file, read_query_file


def skip_if_cleared_alone(ti: Any, lake: str, query: str, run_id: str, task: str) -> None:
    """Skip the task `task` of the run `run_id` (AirflowSkipException, saying why) if the run has ended and its
    last step has finished (`State.finished`: done, failed, skipped…), so will not run after it. The task goes on
    if the run has not ended, if it is that last step, or outside Airflow's task runtime (`ti` None: a task's
    `execute` called by hand), where no task states exist to ask. A run that has not ended costs a file's look,
    not a query's parse."""
    _, name = read_query_file(query)
    end = None if ti is None else run_end(Path(lake), name, run_id)
    last = None if end is None else STAGES.last(load_query_file(query)).name
    if end is None or task == last:
        return
    state = ti.get_task_states(dag_id=ti.dag_id, task_ids=[last], run_ids=[ti.run_id]).get(ti.run_id, {}).get(last)
    if state in State.finished:
        raise AirflowSkipException(
            f"run {run_id} of {name} has ended ({end.status} at {end.step}) and its last step {last} is {state}: "
            f"{task}, cleared without its downstream tasks, would run with no step after it; clear it with them to "
            f"run the run again from {task}")
