"""A task whose engine never answers ends at the task's timeout (a registration's `step_timeout`), under
Airflow's own timeout, so that its retry, not a hung task, follows."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowTaskTimeout
from airflow.sdk.execution_time.timeout import timeout

from pielake.orchestration.tasks import run_step_on_engine
from tests.helpers import FLAGS_QUERY


def silent_engine(held: list[socket.socket]) -> int:
    """A server on the engine's runs port that takes connections into `held` and never answers: a hung engine.
    Returns its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held.append(server)
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
    return server.getsockname()[1]


def test_a_step_on_an_engine_that_never_answers_ends_at_the_task_timeout(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    held: list[socket.socket] = []
    runs_port = silent_engine(held)
    connection = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": runs_port - 1}
    monkeypatch.setenv("AIRFLOW_CONN_HUNG_ENGINE", json.dumps(connection))
    query = tmp_path / "flag_pairs.tpq"
    query.write_text(FLAGS_QUERY, encoding="utf-8")
    started = time.monotonic()
    # AirflowTaskTimeout is a BaseException: the client's own error handling cannot take it for a lost engine.
    with pytest.raises(AirflowTaskTimeout), timeout(2):
        run_step_on_engine(conn_id="hung_engine", query=str(query), lake=str(tmp_path / "lake"), run_id="r1",
                           step="ingest", request={"mode": "incremental"})
    assert time.monotonic() - started < 10
    assert len(held) == 2  # the step reached the engine, and waited for its answer
    for end in held:
        end.close()
