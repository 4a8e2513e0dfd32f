"""The interval-stream example end to end: a machine log (`examples/data/machine_log.csv`, rows from `started`
until `ended`) through `pielake run`, Delta, SQL and `pielake plot`, its matches equal to the reference's."""

from __future__ import annotations

import csv
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake.cli import main
from pielake.exitcodes import EXIT_USAGE
from pielake.lake.delta import Lake
from pielake.lake.plotted import timeline
from pielake.query.analyzer import QueryPlan, load_query
from pielake.semantics.reference import find_matches
from pielake.spark import zones
from pielake.streams import load_schema
from tests.helpers import local_zone
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=65)  # about this long in CI: scheduled first

EXAMPLES = Path(__file__).parents[2] / "examples"
QUERY = EXAMPLES / "queries" / "alarm_before_repair.tpq"
LOG = EXAMPLES / "data" / "machine_log.csv"


def micros(text: str) -> int:
    """An ISO-8601 time of the log in kernel time (microseconds since the epoch)."""
    return (datetime.fromisoformat(text) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def log_rows() -> list[dict]:
    """The log as the reference reads it: times in microseconds, empty fields NULL, numbers typed."""
    typed = {"severity": int, "temp": float}
    with LOG.open(newline="", encoding="utf-8") as f:
        return [{k: None if v == "" else micros(v) if k in ("started", "ended") else typed.get(k, str)(v)
                 for k, v in row.items()} for row in csv.DictReader(f)]


def reference_matches(plan: QueryPlan) -> list[tuple]:
    """The reference's matches over the whole log, as `spark_rows` puts the published ones."""
    stream = load_schema("MachineLog")
    assert stream is not None and stream.end_column == "ended"
    return reference_rows(find_matches(log_rows(), plan, time_column="started", end_column="ended",
                                       time_unit_seconds=stream.unit_seconds), plan)


def test_the_machine_log_example_runs_end_to_end(tmp_path: Path, spark: SparkSession) -> None:
    lake_dir = str(tmp_path / "lake")
    cli = CliRunner()
    result = cli.invoke(main, ["run", str(QUERY), "--events", str(LOG), "--lake", lake_dir])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "87 rows in = 87 events + 0 quarantined + 0 exact duplicates dropped" in result.output

    plan = load_query(QUERY.read_text(encoding="utf-8"), "alarm_before_repair")
    expected = reference_matches(plan)
    assert spark_rows(Lake(spark, Path(lake_dir)).read("matches_alarm_before_repair"), plan) == expected
    assert len(expected) >= 3, "the example should show several matches"

    sql = cli.invoke(main, ["sql", "SELECT machine, alarm, severity FROM matches_alarm_before_repair "
                                   "WHERE status = 'complete' ORDER BY machine, alarm_ts", "--lake", lake_dir])
    assert sql.exit_code == 0, sql.output
    assert f"({len(expected)} rows)" in sql.output and "press-1" in sql.output
    # Situations and pairs read in the stream's time, as matches do: timestamps, not microseconds
    first = cli.invoke(main, ["sql", "SELECT min(ts), min(te) FROM situations_alarm_before_repair UNION ALL "
                                     "SELECT min(a_ts), min(decided_at) FROM pairs_alarm_before_repair",
                              "--lake", lake_dir])
    assert first.exit_code == 0, first.output
    assert first.output.count("2026-03-02") == 4, first.output

    # The lake's times are UTC wherever they are read or drawn: on a machine set to New York's zone too.
    with local_zone("UTC"):
        drawn_in_utc = timeline(Lake(spark, Path(lake_dir)), plan, ("lathe-3",))
    with local_zone("America/New_York"):
        assert timeline(Lake(spark, Path(lake_dir)), plan, ("lathe-3",)) == drawn_in_utc
        earliest = cli.invoke(main, ["sql", "SELECT min(started) FROM events_machinelog", "--format", "csv",
                                     "--lake", lake_dir])
    assert drawn_in_utc.unit == "UTC" and drawn_in_utc.bars[0].start.tzinfo is None
    assert earliest.output.splitlines()[-1] == "2026-03-02 06:00:10", earliest.output  # the log's first `started`

    picture = tmp_path / "lathe-3.png"
    drawn = cli.invoke(main, ["plot", str(QUERY), "--lake", lake_dir, "--key", "lathe-3", "--out", str(picture)])
    assert drawn.exit_code == 0, drawn.output + repr(drawn.exception)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_late_interval_row_is_repaired_by_a_backfill(tmp_path: Path, spark: SparkSession) -> None:
    """The log in two micro-batches, one alarm of the morning held back into the afternoon's file: it starts
    before its machine's latest start, so it is quarantined as late; a backfill of the morning re-admits it and
    the tables equal the reference's over the whole log."""
    with LOG.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    morning = [r for r in rows if r["started"] < "2026-03-02T12:00:00Z"]
    late = next(r for r in morning if r["kind"] == "alarm" and r["started"] > "2026-03-02T10:00:00Z")
    parts = {"morning.csv": [r for r in morning if r is not late],
             "afternoon.csv": [late, *(r for r in rows if r["started"] >= "2026-03-02T12:00:00Z")]}
    for name, part in parts.items():
        with (tmp_path / name).open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(part)
    lake_dir, cli = str(tmp_path / "lake"), CliRunner()
    common = ["--lake", lake_dir, "--no-checks"]
    steps = [["run", str(QUERY), "--events", str(tmp_path / "morning.csv"), *common],
             ["run", str(QUERY), "--events", str(tmp_path / "afternoon.csv"), "--incremental", *common],
             ["backfill", str(QUERY), "--from", "2026-03-02T06:00:00", "--to", "2026-03-02T12:00:00", *common]]
    outputs = [cli.invoke(main, step) for step in steps]
    assert all(o.exit_code == 0 for o in outputs), [o.output for o in outputs]
    assert f"{len(parts['afternoon.csv'])} rows in = {len(parts['afternoon.csv']) - 1} events + 1 quarantined" \
        in outputs[1].output
    assert "1 rows in = 1 events + 0 quarantined" in outputs[2].output

    plan = load_query(QUERY.read_text(encoding="utf-8"), "alarm_before_repair")
    assert spark_rows(Lake(spark, Path(lake_dir)).read("matches_alarm_before_repair"), plan) == \
        reference_matches(plan)


def test_a_query_reads_the_log_s_times_on_the_clock_of_the_zone_it_names(tmp_path: Path, spark: SparkSession,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The example query for the evening shift (`examples/queries/evening_alarm.tpq`): alarms raised from 17:00 on
    Berlin's clock (the log's times are UTC, an hour behind it in March) in runs that end after a time written
    with Berlin's offset, its matches' hours on that clock and their weekday in RETURN: what the reference finds,
    a part of the example's matches, and more than UTC's clock gives (pielake/query/time_fields.py). Where the
    zone data pielake carries reads Berlin's clock otherwise than Spark's Java (here it is given Paris's rules for
    Berlin, which kept summer time four years before it), the run says from when, and follows Java."""
    query = EXAMPLES / "queries" / "evening_alarm.tpq"
    text = query.read_text(encoding="utf-8")
    lake_dir = str(tmp_path / "lake")
    newest_zone = zones.newest_zone
    monkeypatch.setattr(zones, "newest_zone", lambda zone: newest_zone("Europe/Paris" if zone == "Europe/Berlin"
                                                                       else zone))
    result = CliRunner().invoke(main, ["run", str(query), "--events", str(LOG), "--lake", lake_dir, "--no-checks"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "(time zones: Spark's Java reads the clock of 'Europe/Berlin' by older rules than the IANA time-zone " \
           "data pielake carries" in result.output and "from 1976-03-28 to 1976-09-25 (and in 3 later spans) it " \
           "reads +01:00 where that data says +02:00, and the run follows Java" in result.output, result.output

    plan = load_query(text, "evening_alarm", load_schema("MachineLog"))
    expected = reference_matches(plan)
    assert spark_rows(Lake(spark, Path(lake_dir)).read("matches_evening_alarm"), plan) == expected
    every = reference_matches(load_query(QUERY.read_text(encoding="utf-8"), "alarm_before_repair"))
    on_utc_s_clock = reference_matches(load_query(text.replace("'Europe/Berlin'", "'UTC'"), "evening_alarm"))
    assert 0 < len(on_utc_s_clock) < len(expected) < len(every)
    assert {values[1:3] for *_, values in expected} <= {(h, m) for h in range(17, 24) for m in range(60)}


def test_a_zone_python_knows_and_spark_s_java_does_not_is_refused_before_the_run_reads_an_event(
        tmp_path: Path, spark: SparkSession) -> None:
    """The query's check reads a zone with Python's zone database and Spark with its Java's, which may be older:
    a zone added to the database since is missing from it (`Factory`, a placeholder of the database, is missing
    from every Java's). The run refuses such a zone where the query names it, before ingest admits an event,
    where Spark would stop it at the first time it read on that clock."""
    query = tmp_path / "evening_alarm.tpq"
    query.write_text((EXAMPLES / "queries" / "evening_alarm.tpq").read_text(encoding="utf-8").replace(
        "hour(Alarm.ts, 'Europe/Berlin')", "hour(Alarm.ts, 'Factory')"), encoding="utf-8")
    assert CliRunner().invoke(main, ["check", str(query)]).exit_code == 0
    lake = tmp_path / "lake"
    result = CliRunner().invoke(main, ["run", str(query), "--events", str(LOG), "--lake", str(lake), "--no-checks"])
    assert result.exit_code == EXIT_USAGE, result.output + repr(result.exception)
    assert "Spark's Java does not know the time zone 'Factory'. Line 12, Col 23. Its time-zone data is older than " \
           "Python's, which names it: give the zone's offset instead ('+00:00' now)" in result.output, result.output
    assert not Lake(spark, lake).exists("events_machinelog")
