"""A task whose engine never answers ends at the task's timeout (a registration's `step_timeout`), under
Airflow's own timeout, so that its retry, not a hung task, follows. The task runs in an Airflow process of its
own, as a worker runs it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.helpers import FLAGS_QUERY, process_env

ROOT = Path(__file__).parents[2]
TASK = """
import json, time
from airflow.sdk.exceptions import AirflowTaskTimeout
from airflow.sdk.execution_time.timeout import timeout
from pielake.orchestration.tasks import run_step_on_engine

started = time.monotonic()
try:
    with timeout(2):
        run_step_on_engine(conn_id="hung_engine", query={query!r}, lake={lake!r}, run_id="r1", step="ingest",
                           request={{"mode": "incremental"}})
    ended = "answered"
except AirflowTaskTimeout:  # a BaseException: the client's own error handling cannot take it for a lost engine
    ended = "timed out"
print(json.dumps({{"ended": ended, "seconds": time.monotonic() - started}}))
"""


def silent_engine(held: list[socket.socket]) -> int:
    """A server on the engine's runs port that takes connections into `held` and never answers: a hung engine.
    Returns its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held.append(server)
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
    return server.getsockname()[1]


def test_a_step_on_an_engine_that_never_answers_ends_at_the_task_timeout(tmp_path: Path) -> None:
    held: list[socket.socket] = []
    runs_port = silent_engine(held)
    connection = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": runs_port - 1}
    query = tmp_path / "flag_pairs.tpq"
    query.write_text(FLAGS_QUERY, encoding="utf-8")
    script = TASK.format(query=str(query), lake=str(tmp_path / "lake"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120,
                          cwd=ROOT, env=process_env(AIRFLOW_HOME=str(tmp_path / "airflow"),
                                                    AIRFLOW_CONN_HUNG_ENGINE=json.dumps(connection)))
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["ended"] == "timed out" and outcome["seconds"] < 10
    assert len(held) == 2  # the step reached the engine, and waited for its answer
    for end in held:
        end.close()
