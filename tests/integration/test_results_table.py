"""A query's situations, pairs, matches and progress live in one Delta table, `results_<query>` (docs/semantics.md
§6): a run publishes all four in one commit, each kind reads by its own name as a table of its own (the lake, and
`pielake sql`), and a RETURN column may take a name another kind has, with another type."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, LongType

from pielake.lake.delta import Lake
from pielake.lake.results import KINDS
from pielake.lake.sql import query_lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import load_query
from pielake.semantics.reference import derive_situations, find_matches
from pielake.streams import StreamSchema, save_schema
from tests.helpers import json_lines
from tests.spark.kernels import reference_rows, spark_rows

STREAM = StreamSchema("Boiler", ("unit",), "ts", "s",
                      (("unit", "STRING"), ("ts", "BIGINT"), ("temp", "DOUBLE"), ("valve", "BOOLEAN")))
QUERY = """FROM Boiler PARTITION BY unit
DEFINE Hot AS temp > 50, Open AS valve
PATTERN Hot overlaps; during; meets; before Open
WITHIN 12 s
RETURN avg(Open.temp) AS ts
"""
DRAW = random.Random(11)
EVENTS = [{"unit": unit, "ts": t, "temp": float(DRAW.choice([20, 40, 60, 80])), "valve": DRAW.random() < 0.4}
          for unit in ("u1", "u2") for t in range(1, 41)]


def run(lake: Lake, tmp_path: Path, run_id: str, events: list[dict], mode: str) -> None:
    path = tmp_path / f"{run_id}.json"
    path.write_text(json_lines(events))
    run_query(lake, load_query(QUERY, "boiler"), run_id, RunRequest(mode=mode, events_path=str(path), checks=False))


def test_a_run_publishes_every_kind_in_one_commit_and_each_reads_as_its_own_table(tmp_path: Path,
                                                                                   spark: SparkSession) -> None:
    save_schema(STREAM, tmp_path / "lake" / "_streams")
    lake, plan = Lake(spark, tmp_path / "lake"), load_query(QUERY, "boiler")
    first = [e for e in EVENTS if e["ts"] <= 25]
    run(lake, tmp_path, "batch", first, "batch")
    assert "results_boiler" in lake.tables() and not {f"{kind}_boiler" for kind in KINDS} & set(lake.tables())
    assert {f"{kind}_boiler" for kind in KINDS} <= set(lake.readable())
    version = lake.version("results_boiler")

    run(lake, tmp_path, "micro", [e for e in EVENTS if e["ts"] > 25], "incremental")
    assert lake.version("results_boiler") == version + 1  # situations, pairs, matches and progress: one commit
    assert lake.last_commit("results_boiler")["operation"] == "MERGE"

    matches, situations = lake.read("matches_boiler"), lake.read("situations_boiler")
    assert spark_rows(matches, plan) == reference_rows(find_matches(EVENTS, plan), plan)
    assert sorted((r.unit, r.symbol, r.ts, r.te) for r in situations.collect()) == sorted(
        (s.key[0], s.symbol, s.ts, s.te) for s in derive_situations(EVENTS, plan))
    assert matches.schema["ts"].dataType == DoubleType() and situations.schema["ts"].dataType == LongType()
    assert matches.columns[0] == "unit" and matches.columns[-1] == "run_id"
    assert {"constraint_id", "a_ts", "b_te", "decided_at"} <= set(lake.read("pairs_boiler").columns)
    assert "run_id" not in situations.columns

    listed = "".join(query_lake(lake, "SELECT status, count(*) AS n FROM matches_boiler GROUP BY status", "json"))
    counted = {r["status"]: r["n"] for r in map(json.loads, listed.splitlines())}
    assert counted == Counter(m.status for m in find_matches(EVENTS, plan))
