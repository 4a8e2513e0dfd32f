"""The SQL endpoint (`infra/sql-endpoint.sh` -> `pielake serve`): a JDBC client (the beeline pyspark ships)
reads the lake's result tables through the Spark Thrift Server, the tables are registered in the lake's own
persistent catalog, and a table written after the start is served without a restart."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark.sql.functions as F
import pytest
from pyspark.sql import SparkSession

from pielake.lake.catalog import CATALOG_DIR
from pielake.lake.delta import Lake
from pielake.pipeline.runner import RunRequest, run_query
from pielake.query.analyzer import load_query
from tests.integration.cli_runs import free_port, run_command
from tests.integration.test_gates_and_backfill import QUERY

SCRIPT = Path(__file__).parents[2] / "infra" / "sql-endpoint.sh"
PROMPT = re.compile(r"^\d+: jdbc:hive2://\S+> ")  # beeline echoes its prompt before the output when not on a tty


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Iterator[tuple[Path, dict[str, str]]]:
    """A lake with one batch run of the `mid` query, served by the endpoint; stopped afterwards."""
    folder = tmp_path_factory.mktemp("endpoint")
    root, _ = run_command(folder, "r1")
    run_query(Lake(spark, root), load_query(QUERY, "mid"), "r1",
              RunRequest(events_path=str(folder / "events.json"), checks=False))
    env = {**os.environ, "PIELAKE_SQL_PORT": str(free_port()), "PIELAKE_SQL_REFRESH": "1",
           "PIELAKE_SPARK_MASTER": "local[1]"}
    started = subprocess.run(["bash", str(SCRIPT), "start", str(root)], env=env, capture_output=True, text=True,
                             timeout=300, check=False)
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == f"jdbc:hive2://127.0.0.1:{env['PIELAKE_SQL_PORT']}/default"
        yield root, env
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(root)], env=env, check=False, timeout=120)


def beeline(served: tuple[Path, dict[str, str]], statement: str) -> list[list[str]]:
    """The statement's rows over JDBC, as beeline prints them in CSV (header first). With quoting off, its
    default, beeline encloses a field that holds a comma in NUL characters instead of double quotes."""
    root, env = served
    done = subprocess.run(["bash", str(SCRIPT), "beeline", str(root), "--silent=true", "--outputformat=csv2",
                           "-e", statement], env=env, capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return list(csv.reader(PROMPT.sub("", done.stdout).splitlines(), quotechar="\x00"))


def as_json(lake: Lake, table: str) -> list[str]:
    return sorted(r[0] for r in lake.read(table).select(F.to_json(F.struct("*"))).collect())


def test_a_jdbc_client_reads_the_matches_table_as_the_lake_holds_it(served: tuple[Path, dict[str, str]],
                                                                    spark: SparkSession) -> None:
    # arrange
    lake = Lake(spark, served[0])
    # act: Spark renders every row as JSON on both sides, so types print alike
    header, *rows = beeline(served, "SELECT to_json(struct(*)) AS row FROM matches_mid")
    # assert
    assert header == ["row"]
    assert sorted(r[0] for r in rows) == as_json(lake, "matches_mid")
    assert len(rows) > 0


def test_every_lake_table_is_registered_in_the_lake_s_own_catalog(served: tuple[Path, dict[str, str]],
                                                                  spark: SparkSession) -> None:
    header, *rows = beeline(served, "SHOW TABLES")
    assert {r[header.index("tableName")] for r in rows} == set(Lake(spark, served[0]).tables())
    assert (served[0] / CATALOG_DIR / "metastore_db").is_dir()  # persistent: Derby under the lake folder


def test_a_table_written_after_the_start_is_served_without_a_restart(served: tuple[Path, dict[str, str]],
                                                                     spark: SparkSession) -> None:
    # arrange: a new table, as the first run of another query would leave it
    lake = Lake(spark, served[0])
    lake.overwrite(spark.createDataFrame([(1, "a"), (2, "b")], "n INT, s STRING"), "late_arrival")
    # act: the endpoint looks for new tables every second
    deadline = time.monotonic() + 60
    while "late_arrival" not in {r[1] for r in beeline(served, "SHOW TABLES")[1:]} and time.monotonic() < deadline:
        time.sleep(2)
    # assert
    assert beeline(served, "SELECT n, s FROM late_arrival ORDER BY n") == [["n", "s"], ["1", "a"], ["2", "b"]]
