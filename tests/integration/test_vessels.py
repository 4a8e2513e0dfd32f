"""The several-streams example end to end: AIS positions (point events) and port calls (interval rows) of the same
vessels in one query (`examples/queries/moving_at_berth.tpq`), through `pielake run`, the gates, Delta, SQL and
`pielake plot`. The published tables equal the reference's, with the streams' files arriving out of step (a
batch run, then a micro-batch of one stream, then heartbeats of the other), bad rows of each stream in its own
quarantine."""

from __future__ import annotations

import csv
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pyspark.sql import SparkSession

from pielake.cli import main
from pielake.lake.delta import Lake
from pielake.query.analyzer import QueryPlan, load_query
from pielake.semantics.reference import StreamEvents, derive_situations_of, find_matches_of
from pielake.streams import load_schema
from pielake.vocabulary import COMPLETE
from tests.spark.kernels import reference_rows, spark_rows
from tests.strategies import kernel_time

pytestmark = pytest.mark.heavy(seconds=80)

EXAMPLES = Path(__file__).parents[2] / "examples"
QUERY = EXAMPLES / "queries" / "moving_at_berth.tpq"
DATA = {"VesselPositions": EXAMPLES / "data" / "vessel_positions.csv",
        "PortCalls": EXAMPLES / "data" / "port_calls.csv"}
TIMES = {"VesselPositions": ("ts",), "PortCalls": ("arrived", "departed")}
SPLIT = "2026-05-05T00:00:00Z"  # the first run has the positions before it, and every port call


def read(name: str) -> list[dict]:
    with DATA[name].open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write(path: Path, rows: list[dict]) -> str:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def kernel_rows(name: str, rows: list[dict]) -> list[dict]:
    """Rows as the reference reads them: times in microseconds since the epoch, numbers typed, an empty field
    NULL (as Spark reads a CSV file)."""
    typed = {"speed": float, "heading": int}

    def value(column: str, text: str) -> object:
        if column in TIMES[name]:
            return (datetime.fromisoformat(text) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        return None if text == "" else typed.get(column, str)(text)

    return [{c: value(c, v) for c, v in row.items()} for row in rows]


def vessels_plan() -> QueryPlan:
    """The example query, bound to its streams' schemas (`schemas/`)."""
    return load_query(QUERY.read_text(encoding="utf-8"), "moving_at_berth",
                      [load_schema("VesselPositions"), load_schema("PortCalls")])


def reference(plan: QueryPlan, given: dict[str, list[dict]]) -> tuple[list[tuple], list[tuple]]:
    """The reference's matches and situations over each stream's good rows."""
    streams = {name: StreamEvents(kernel_rows(name, rows), *TIMES[name]) for name, rows in given.items()}
    unit = load_schema("PortCalls").unit_seconds
    situations = sorted((s.key, s.symbol, s.ts, s.te) for s in derive_situations_of(streams, plan))
    return reference_rows(find_matches_of(streams, plan, unit), plan), situations


def published(lake: Lake, plan: QueryPlan) -> tuple[list[tuple], list[tuple]]:
    situations = sorted(((r["mmsi"],), r["symbol"], kernel_time(r["ts"]), kernel_time(r["te"]))
                        for r in lake.read("situations_moving_at_berth").collect())
    return spark_rows(lake.read("matches_moving_at_berth"), plan), situations


def run(lake_dir: str, *events: str, incremental: bool = False) -> Result:
    given = [arg for pair in events for arg in ("--events", pair)]
    micro = ["--incremental"] if incremental else []
    return CliRunner().invoke(main, ["run", str(QUERY), *given, *micro, "--lake", lake_dir])


def test_vessels_and_port_calls_in_one_query_equal_the_reference(tmp_path: Path, spark: SparkSession) -> None:
    positions, calls = read("VesselPositions"), read("PortCalls")
    early = [r for r in positions if r["ts"] < SPLIT]
    bad_position = {"mmsi": "244110352", "ts": "", "speed": "3.0", "heading": "90"}  # no time: quarantined
    bad_call = {**calls[0], "departed": "2026-05-03T00:00:00Z"}  # before it arrived: quarantined
    lake_dir = str(tmp_path / "lake")
    first = run(lake_dir, f"VesselPositions={write(tmp_path / 'early.csv', [*early, bad_position, early[0]])}",
                f"PortCalls={write(tmp_path / 'calls.csv', [*calls, bad_call])}")
    assert first.exit_code == 0, first.output + repr(first.exception)
    rows_in = len(early) + 2 + len(calls) + 1
    assert f"{rows_in} rows in = {rows_in - 3} events + 2 quarantined + 1 exact duplicates dropped" in first.output
    assert f"{len(early) + 2} rows in = {len(early)} events + 1 quarantined + 1 exact" in first.output
    assert "gate events: " in first.output and "FAILED" not in first.output

    lake = Lake(spark, Path(lake_dir))
    plan = vessels_plan()
    reasons = {table: [r["reason"] for r in lake.read(table).collect()]
               for table in ("quarantine_vesselpositions", "quarantine_portcalls")}
    assert reasons == {"quarantine_vesselpositions": ["null_time"], "quarantine_portcalls": ["end_before_start"]}
    assert published(lake, plan) == reference(plan, {"VesselPositions": early, "PortCalls": calls})

    # The rest of the positions alone, as a micro-batch, the port calls already in the lake: the tables are then
    # those of one run over everything.
    second = run(lake_dir, f"VesselPositions={write(tmp_path / 'late.csv', positions[len(early):])}",
                 incremental=True)
    assert second.exit_code == 0, second.output + repr(second.exception)
    expected = reference(plan, {"VesselPositions": positions, "PortCalls": calls})
    assert published(lake, plan) == expected
    assert sum(m[4] == COMPLETE for m in expected[0]) >= 3, "the example should show several matches"

    # The port-call stream has told nothing of any vessel since its latest call's arrival, which holds back every
    # pair across the streams after it. A heartbeat of each vessel, a port call with no port (it satisfies no
    # symbol), moves the vessel's time in that stream on: the situations it passes close, and the pairs it held
    # back are decided.
    beats = [{"mmsi": m, "arrived": "2026-05-06T01:00:00Z", "departed": "2026-05-06T01:01:00Z", "port": "",
              "berth": ""} for m in sorted({r["mmsi"] for r in positions})]
    third = run(lake_dir, f"PortCalls={write(tmp_path / 'beats.csv', beats)}", incremental=True)
    assert third.exit_code == 0, third.output + repr(third.exception)
    decided = reference(plan, {"VesselPositions": positions, "PortCalls": [*calls, *beats]})
    assert published(lake, plan) == decided
    assert len(decided[1]) == len(expected[1]), "a heartbeat is no situation (it closes those it passes)"
    assert sum(m[4] == COMPLETE for m in decided[0]) > sum(m[4] == COMPLETE for m in expected[0])
    expected = decided

    cli = CliRunner()
    sql = cli.invoke(main, ["sql", "SELECT mmsi, port, berth, top_speed FROM matches_moving_at_berth "
                                   "WHERE status = 'complete' ORDER BY mmsi, moving_ts", "--lake", lake_dir])
    assert sql.exit_code == 0, sql.output
    assert f"({len(expected[0])} rows)" in sql.output
    picture = tmp_path / "vessel.png"
    drawn = cli.invoke(main, ["plot", str(QUERY), "--lake", lake_dir, "--out", str(picture)])
    assert drawn.exit_code == 0, drawn.output + repr(drawn.exception)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_backfill_of_one_streams_history_makes_the_tables_those_of_one_run_over_everything(
        tmp_path: Path, spark: SparkSession) -> None:
    """Positions of a morning missing from the first run come in a backfill of that range, its file named by its
    stream (`--events VesselPositions=FILE`); one row outside the range goes to the quarantine with its reason.
    The tables are then those of one run over every position, the port calls unchanged."""
    positions, calls = read("VesselPositions"), read("PortCalls")
    since, until = "2026-05-04T06:00:00Z", "2026-05-04T10:00:00Z"
    held = [r for r in positions if since <= r["ts"] <= until]
    lake_dir = str(tmp_path / "lake")
    first = run(lake_dir, f"VesselPositions={write(tmp_path / 'most.csv', [r for r in positions if r not in held])}",
                f"PortCalls={write(tmp_path / 'calls.csv', calls)}")
    assert first.exit_code == 0, first.output + repr(first.exception)
    outside = {**held[0], "ts": "2026-05-04T11:01:00Z"}  # no position of it at that minute
    backfill = CliRunner().invoke(main, ["backfill", str(QUERY), "--from", since, "--to", until, "--events",
                                         f"VesselPositions={write(tmp_path / 'morning.csv', [*held, outside])}",
                                         "--lake", lake_dir])
    assert backfill.exit_code == 0, backfill.output + repr(backfill.exception)
    assert f"{len(held) + 1} rows in = {len(held)} events + 1 quarantined" in backfill.output
    lake = Lake(spark, Path(lake_dir))
    plan = vessels_plan()
    assert [r["reason"] for r in lake.read("quarantine_vesselpositions").collect()] == ["outside_backfill_range"]
    assert published(lake, plan) == reference(plan, {"VesselPositions": positions, "PortCalls": calls})
