"""A run compares how Spark's Java reads each named zone's clock with the zone data pielake carries, day by day, and
says from when and by how much they differ (`pielake.spark.zones`)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from pielake.query.analyzer import QueryPlan, load_query
from pielake.spark import zones
from pielake.streams import load_schema

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def evening_alarm_on(zone: str) -> QueryPlan:
    text = (EXAMPLES / "queries" / "evening_alarm.tpq").read_text(encoding="utf-8")
    return load_query(text.replace("'Europe/Berlin'", f"'{zone}'"), "evening_alarm", load_schema("MachineLog"))


def test_java_reads_a_zone_whose_rules_are_old_as_pielakes_zone_data_does(spark: SparkSession) -> None:
    """Tokyo's clock has not changed since 1951 and Berlin's rules since 1996, so every Java's data reads both as
    the newest data does, and an offset or UTC reads alike on every Java."""
    assert zones.check_zones(spark, evening_alarm_on("Asia/Tokyo"), ["Europe/Berlin", "+05:30", "UTC"]) == []


def test_a_drift_is_the_first_span_of_days_the_clocks_differ_its_offsets_and_the_spans_after_it(
        spark: SparkSession) -> None:
    """Java's reading of Paris's clock, compared with the data's Berlin: France kept summer time from 1976, West
    Germany from 1980, and the two have agreed since. So they differ on the summer days of 1976 to 1979, four
    spans, the first from 28 March 1976 (Paris's clock went forward at 01:00 UTC) to 25 September (it went back
    at 01:00 UTC on the 26th, before that day's noon), where Paris read +02:00 and Berlin +01:00."""
    paris = zones._java_offsets(spark, "Europe/Paris")
    assert paris is not None and len(paris) == zones.days_compared(date.today())
    found = zones.drift("Europe/Berlin", paris)
    assert found == zones.Drift("Europe/Berlin", date(1976, 3, 28), date(1976, 9, 25), timedelta(hours=2),
                                timedelta(hours=1), 3)
    assert "'Europe/Berlin'" in found.text() and \
        "from 1976-03-28 to 1976-09-25 (and in 3 later spans) it reads +02:00 where that data says +01:00" in \
        found.text()
    assert zones.drift("Europe/Paris", paris) is None


def test_a_drift_that_lasts_is_said_from_its_first_day(spark: SparkSession) -> None:
    """Java's UTC compared with the data's Tokyo: every day differs, so the drift is said from its first day on."""
    found = zones.drift("Asia/Tokyo", zones._java_offsets(spark, "UTC"))
    assert found is not None and (found.first, found.last, found.more) == (date(1970, 1, 1), None, 0)
    assert "from 1970-01-01 on it reads +00:00 where that data says +09:00" in found.text()
