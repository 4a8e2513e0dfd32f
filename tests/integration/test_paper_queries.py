"""Every golden valid query (tests/fixtures/queries/valid: the papers' own queries among them, as they write them)
runs end to end from the command line, gates on, on a sample stream made for it (`pielake.pipeline.synthetic`):
it exits 0, and its published matches equal what the brute-force reference computes over the same events. A
query whose columns its stream's schema does not have is refused in lines that name them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake.cli import main
from pielake.lake.delta import Lake
from pielake.pipeline.synthetic import query_events, sample_stream, write_query_events
from pielake.query.analyzer import load_query_file
from pielake.semantics.reference import find_matches
from pielake.streams import TIMESTAMP_UNIT, save_schema
from tests.conftest import FIXTURES
from tests.spark.kernels import reference_rows, spark_rows
from tests.strategies import kernel_time

pytestmark = pytest.mark.heavy(seconds=80)  # about this long in CI: scheduled first

GOLDEN = FIXTURES / "queries" / "valid"
VALID = sorted(GOLDEN.glob("*.tpq"))
# Events and seed of each query's sample stream, chosen so that its matches are not none: a comparison of two empty
# tables would show nothing. The queries of many constraints match seldom in random data, so they get more events.
SAMPLES = {"piestream_example1": (3000, 4), "tpstream_listing1": (1000, 9), "piestream_correctness": (1000, 18),
           "lng_rollover": (1000, 24), "syntax_tour": (1000, 23), "tpstream_figure4": (1000, 4),
           "keyword_columns": (1000, 1), "text_patterns": (1000, 1), "iseq_endpoints": (1000, 1)}


def test_every_golden_query_has_a_sample() -> None:
    assert sorted(SAMPLES) == [path.stem for path in VALID]


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_a_golden_query_runs_from_the_command_line_and_equals_the_reference(path: Path, tmp_path: Path,
                                                                            spark: SparkSession) -> None:
    assert_golden_run_equals_the_reference(path, tmp_path, spark)


def assert_golden_run_equals_the_reference(path: Path, folder: Path, spark: SparkSession, *options: str) -> None:
    """`pielake run` of a golden query (with `options`: `--remote` sends it to an engine) over its sample stream,
    into a lake in `folder`, publishes the reference's matches. The sample stream's schema is the lake's own,
    which a run takes before the project's `schemas/`."""
    events, seed = SAMPLES[path.stem]
    plan = load_query_file(path)
    stream = sample_stream(plan)
    save_schema(stream, folder / "lake" / "_streams")
    sample = write_query_events(plan, folder / "in", events, keys=2, seed=seed, stream=stream)
    result = CliRunner().invoke(main, ["run", str(path), "--events", str(sample), "--lake", str(folder / "lake"),
                                       *options])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output + repr(result.exception)
    expected = reference_rows(find_matches(query_events(plan, events, keys=2, seed=seed, stream=stream), plan), plan)
    assert spark_rows(Lake(spark, folder / "lake").read(f"matches_{plan.name}"), plan) == expected
    assert expected, "the sample stream should hold matches to compare"


def test_a_sample_stream_writes_its_times_as_its_schema_reads_them(tmp_path: Path, spark: SparkSession) -> None:
    """A stream whose files write a date and a time of day in columns of their own, in a pattern (`Datum;Uhrzeit`,
    `dd.MM.yyyy HH:mm:ss`, as a German logger exports them, in Berlin's wall clock), gets a sample written so: every
    row is an event at the instant the sample drew, and the matches equal the reference's over the sample's
    events."""
    plan = load_query_file(GOLDEN / "lng_rollover.tpq")
    drawn = sample_stream(plan)
    stream = replace(drawn, time_unit=TIMESTAMP_UNIT, time_format="dd.MM.yyyy HH:mm:ss", time_from=("Datum", "Uhrzeit"),
                     time_zone="Europe/Berlin",
                     columns=(*((n, "TIMESTAMP" if n == "ts" else k) for n, k in drawn.columns),
                              ("Datum", "STRING"), ("Uhrzeit", "STRING")))
    save_schema(stream, tmp_path / "lake" / "_streams")
    events, seed = SAMPLES["lng_rollover"]
    sample = write_query_events(plan, tmp_path / "in", events, keys=2, seed=seed, stream=stream)
    assert sample.read_text().splitlines()[1].split(",")[-2:] == ['"01.01.2026"', '"01:00:00"']
    result = CliRunner().invoke(main, ["run", str(GOLDEN / "lng_rollover.tpq"), "--events", str(sample), "--lake",
                                       str(tmp_path / "lake")])
    assert result.exit_code == 0 and f"rows in: {events}, staged events: {events}," in result.output, result.output
    drawn_rows = query_events(plan, events, keys=2, seed=seed, stream=stream)
    rows = [{**r, "ts": kernel_time(r["ts"].replace(tzinfo=None))} for r in drawn_rows]  # Spark's times are UTC
    lake = Lake(spark, tmp_path / "lake")
    assert sorted(kernel_time(r.ts) for r in lake.read("events_lngtanks").collect()) == sorted(r["ts"] for r in rows)
    expected = reference_rows(find_matches(rows, plan, time_unit_seconds=stream.unit_seconds), plan)
    assert spark_rows(lake.read(f"matches_{plan.name}"), plan) == expected
    assert expected, "the sample stream should hold matches to compare"


def test_a_sample_stream_follows_the_schema_of_its_stream(tmp_path: Path) -> None:
    """TPStream's Listing 1 reads the CarSensors stream of `schemas/`: its sample has every column of it."""
    result = CliRunner().invoke(main, ["generate", str(tmp_path), "--query", str(GOLDEN / "tpstream_listing1.tpq"),
                                       "--events", "20", "--keys", "2"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "carsensors.csv").read_text().splitlines()[0] == \
        '"car_id","ts","speed","accel","lateral_accel"'


def test_a_query_over_columns_its_stream_lacks_is_refused_with_their_places(tmp_path: Path) -> None:
    """PieStream's Example 1 reads `lateralAccel` and `timestamp` of a stream without a key; the CarSensors schema
    of `schemas/` (the demo's) is keyed by car and spells the column `lateral_accel`."""
    result = CliRunner().invoke(main, ["generate", str(tmp_path), "--query", str(GOLDEN / "piestream_example1.tpq"),
                                       "--events", "20"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: stream Carsensors is keyed by car_id, which the query does not "
                                    "partition by. Line 3, Col 6. Write FROM Carsensors PARTITION BY car_id: its "
                                    "events are in time order within each car_id, and two of them may share a time")
    assert "unknown column 'lateralAccel'. Line 8, Col 14. Did you mean 'lateral_accel'?" in result.output
    assert "unknown column 'timestamp'. Line 17, Col 14." in result.output

