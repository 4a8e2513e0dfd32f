"""The README's quick start: `pielake demo` runs the whole pipeline and prints matches through SQL; on its lake,
the example query over its matches (`examples/queries/repeated_aggression.tpq`) runs as a second level, through
Delta, SQL and `pielake plot`, and finds what the reference finds."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.cli import main
from pielake.lake.delta import Lake
from pielake.query.analyzer import bind, load_query_file
from pielake.semantics.reference import StreamEvents, find_matches_of, matches_stream
from pielake.streams import load_schema
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=30)  # about this long in CI: scheduled first

QUERIES = Path(__file__).parents[2] / "examples" / "queries"


def test_the_demo_writes_matches_and_shows_them(tmp_path: Path, spark: SparkSession) -> None:
    result = CliRunner().invoke(main, ["demo", "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "21600 rows in = 21600 events + 0 quarantined + 0 exact duplicates dropped" in result.output
    assert "matches by status: complete:" in result.output
    header = next(line for line in result.output.splitlines() if line.startswith("car_id"))
    assert [column.strip() for column in header.split("|")][:4] == ["car_id", "a_ts", "b_ts", "c_ts"]
    assert "(10 rows)" in result.output
    assert (tmp_path / "lake" / "results_aggressive_driving" / "_delta_log").is_dir()  # the matches' table
    picture = tmp_path / "lake" / "_plots" / "aggressive_driving.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"to {picture}" in result.output
    second_level(tmp_path / "lake", spark)


def second_level(lake: Path, spark: SparkSession) -> None:
    """Repeated aggressive driving over the demo's aggressive-driving matches: run, read in SQL, drawn, and equal
    to the reference over the sample events."""
    query, cli = QUERIES / "repeated_aggression.tpq", CliRunner()
    run = cli.invoke(main, ["run", str(query), "--lake", str(lake)])
    assert run.exit_code == 0, run.output + repr(run.exception)
    with (lake / V.INCOMING_DIR / "car_sensors.csv").open(newline="", encoding="utf-8") as f:
        events = [{"car_id": r["car_id"], "ts": int(r["ts"]), **{c: float(r[c]) for c in
                                                                 ("speed", "accel", "lateral_accel")}}
                  for r in csv.DictReader(f)]
    upstream = bind(load_query_file(QUERIES / "aggressive_driving.tpq"), load_schema("CarSensors"))
    rows = matches_stream({"CarSensors": StreamEvents(events)}, upstream)
    assert f"{len(rows.rows)} rows in = {len(rows.rows)} events + 0 quarantined + 0 exact duplicates dropped; " \
           f"{len(rows.known_until)} horizon marks" in run.output  # the upstream's final matches, and its 6 cars
    plan = load_query_file(query)
    expected = reference_rows(find_matches_of({"matches_aggressive_driving": rows}, plan), plan)
    assert spark_rows(Lake(spark, lake).read("matches_repeated_aggression"), plan) == expected
    assert len(expected) >= 20, "the example should show repeated aggression in every car"
    sql = cli.invoke(main, ["sql", "SELECT car_id, count(*) AS repeats FROM matches_repeated_aggression WHERE "
                                   "status = 'complete' GROUP BY car_id ORDER BY car_id", "--lake", str(lake)])
    assert sql.exit_code == 0 and "car-01" in sql.output and "(6 rows)" in sql.output, sql.output
    picture = lake / "_plots" / "repeated_aggression.png"
    drawn = cli.invoke(main, ["plot", str(query), "--lake", str(lake), "--key", "car-03", "--out", str(picture)])
    assert drawn.exit_code == 0, drawn.output + repr(drawn.exception)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
