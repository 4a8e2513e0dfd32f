"""A backfill DAG's bounds (`from`, `to`) are checked as Airflow checks a trigger's params, before it makes the run:
for a stream whose schema gives its times in a numeric unit, a whole number of it, as the run itself reads a bound
(`pielake.spark.query.typed_time`); for a stream of TIMESTAMPs, or one with no schema yet, any text, which the run
checks. The DAG is built in an Airflow process of its own, as a DAG processor builds it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pielake.streams import StreamSchema, save_schema
from tests.helpers import FLAGS_QUERY, process_env

ROOT = Path(__file__).parents[2]
CHECK = """
import copy, json
from pathlib import Path
from airflow.sdk.definitions.param import ParamValidationError
from pielake.orchestration.airflow import backfill_dag, register

params = backfill_dag(register(Path({query!r}))).params
verdicts = {{}}
for bound in ["1767225600", " -5 ", "2026-01-01T06:00:00Z", "yesterday", "1.5"]:
    try:
        given = copy.deepcopy(params)  # as Airflow takes a trigger's conf
        given.update({{"from": bound, "to": "1767225600"}})
        given.validate()
        verdicts[bound] = "taken"
    except ParamValidationError:
        verdicts[bound] = "refused"
print(json.dumps(verdicts))
"""
NUMERIC = StreamSchema("Flags", ("key",), "ts", "s", (("key", "STRING"), ("ts", "BIGINT"), ("a", "BOOLEAN"),
                                                        ("b", "BOOLEAN")))


def verdicts(tmp_path: Path, schema: StreamSchema | None) -> dict[str, str]:
    lake = tmp_path / "lake"
    if schema is not None:
        save_schema(schema, lake / "_streams")
    query = tmp_path / "flag_pairs.tpq"
    query.write_text(FLAGS_QUERY)
    done = subprocess.run([sys.executable, "-c", CHECK.format(query=str(query))], cwd=ROOT, text=True,
                          capture_output=True, timeout=300, check=False,
                          env=process_env(AIRFLOW_HOME=str(tmp_path / "airflow"), PIELAKE_LAKE=str(lake)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("schema", "refused"), [
    (NUMERIC, {"2026-01-01T06:00:00Z", "yesterday", "1.5"}),
    (dataclasses.replace(NUMERIC, time_unit="timestamp", columns=(("key", "STRING"), ("ts", "TIMESTAMP"),
                                                                  ("a", "BOOLEAN"), ("b", "BOOLEAN"))), set()),
    (None, set()),
], ids=["numeric times", "timestamps", "no schema yet"])
def test_a_backfill_bound_that_is_no_time_of_the_streams_is_refused_by_the_trigger_form(
        schema: StreamSchema | None, refused: set[str], tmp_path: Path) -> None:
    said = verdicts(tmp_path, schema)
    assert {bound for bound, verdict in said.items() if verdict == "refused"} == refused, said
