"""The bad-input matrix: one dirty file per case, run through the real ingest step, its events then appended as
a run appends them.

Every case asserts the exact accounting `rows in = events + quarantined + exact duplicates dropped` and the
reason of each quarantined row; a file the run cannot go on with exits non-zero with one readable line.
"""

from __future__ import annotations

import bz2
import gzip
import json
import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark.sql.functions as F
import pytest
from click.testing import CliRunner, Result
from pyspark.sql import SparkSession

from pielake.cli import main
from pielake.errors import PielakeError
from pielake.lake.delta import Lake, LakeError
from pielake.pipeline import ingest as ingest_module
from pielake.pipeline.ingest import MALFORMED_REASON, IngestReport, admit_events, streams_for
from pielake.pipeline.job import RunRequest, StepContext
from pielake.pipeline.runner import Run, run_query
from pielake.query.analyzer import load_query
from pielake.streams import StreamSchema, lake_streams, load_schema, parse_ddl, save_schema

pytestmark = pytest.mark.heavy(seconds=590)  # about this long in CI: scheduled first

QUERY = """FROM Dirty D PARTITION BY D.unit
DEFINE Fast AS D.speed > 10, Tagged AS D.label = 'x'
PATTERN Fast overlaps Tagged
WITHIN 100 s
"""
SCHEMA = StreamSchema("Dirty", ("unit",), "ts", "s",
                      (("unit", "STRING"), ("ts", "BIGINT"), ("speed", "DOUBLE"), ("label", "STRING")))
HEADER = b"unit,ts,speed,label\n"
# The same stream without a key column, read by the same query without PARTITION BY: one global key.
KEYLESS_QUERY = QUERY.replace(" PARTITION BY D.unit", "")
KEYLESS_SCHEMA = StreamSchema("Dirty", (), "ts", "s", SCHEMA.columns[1:])
KEYLESS_HEADER = b"ts,speed,label\n"
# The same stream as interval rows, from `ts` until `until` (docs/semantics.md §1).
SPANS_SCHEMA = StreamSchema("Dirty", ("unit",), "ts", "s", (*SCHEMA.columns[:2], ("until", "BIGINT"),
                                                           *SCHEMA.columns[2:]), "until")
SPANS_HEADER = b"unit,ts,until,speed,label\n"


@dataclass(frozen=True)
class Case:
    body: bytes
    events: int
    reasons: tuple[str, ...] = ()
    dropped: int = 0
    header: bytes = HEADER


CASES = {
    "null key": Case(b",1,5,x\nu1,2,5,x\n", 1, ("null_key: unit",)),
    "null time": Case(b"u1,,5,x\nu1,2,5,x\n", 1, ("null_time",)),
    "unparsable time": Case(b"u1,soon,5,x\nu1,2,5,x\n", 1, ("cast_failed: ts=soon",)),
    "missing values as exporters write them": Case(b"u1,1,NA,x\nu1,2,NULL,NA\nu1,3,\\N,x\nu1,4, N/A ,null\n"
                                                   b"u1,5,5,x\n", 5),
    "a missing time as R writes it": Case(b"u1,NA,5,x\nu1,2,5,x\n", 1, ("null_time",)),
    "value that does not cast": Case(b"u1,1,fast,x\nu1,2,5,x\n", 1, ("cast_failed: speed=fast",)),
    "conflicting duplicates": Case(b"u1,1,5,x\nu1,1,6,x\nu1,2,5,x\n", 1,
                                   ("conflicting_duplicate", "conflicting_duplicate")),
    "exact duplicates": Case(b"u1,1,5,x\nu1,1,5,x\nu1,1,5,x\nu1,2,5,x\n", 2, dropped=2),
    "out of order within the file": Case(b"u1,3,5,x\nu1,1,5,x\nu2,2,5,x\nu1,2,5,x\n", 4),
    "empty file": Case(b"", 0, header=b""),
    "only a header": Case(b"", 0),
    "huge time gap": Case(b"u1,1,50,x\nu1,2,50,x\nu1,4000000000000000000,50,x\n", 3),
    "NaN and infinities": Case(b"u1,1,NaN,x\nu1,2,Infinity,x\nu1,3,-Infinity,x\nu1,4,5,x\n", 1,
                               ("not_finite: speed=-Infinity", "not_finite: speed=Infinity",
                                "not_finite: speed=NaN")),
    "non-UTF-8 byte": Case(b"u1,1,5,caf\xe9\nu1,2,5,x\n", 1, ("invalid_utf8: label=caf\ufffd",)),
    "a line of more fields than the header": Case(b"u1,1,5,x,7\nu1,2,5,x\n", 1, (MALFORMED_REASON,)),
    "a line of fewer fields than the header": Case(b"u1,1,5\nu1,2,5,x\n", 1, (MALFORMED_REASON,)),
    "a separator ending every line, one holding a value after it": Case(
        b"u1,1,5,x,\nu1,2,5,x,\nu1,3,5,x,7\n", 2, (MALFORMED_REASON,), header=b"unit,ts,speed,label,\n"),
}


KEYLESS_CASES = {
    "null time": Case(b",5,x\n2,5,x\n", 1, ("null_time",), header=KEYLESS_HEADER),
    "value that does not cast": Case(b"1,fast,x\n2,5,x\n", 1, ("cast_failed: speed=fast",), header=KEYLESS_HEADER),
    "conflicting duplicates": Case(b"1,5,x\n1,6,x\n2,5,x\n", 1, ("conflicting_duplicate", "conflicting_duplicate"),
                                   header=KEYLESS_HEADER),
    "exact duplicates": Case(b"1,5,x\n1,5,x\n2,5,x\n", 2, dropped=1, header=KEYLESS_HEADER),
    "out of order within the file": Case(b"3,5,x\n1,5,x\n2,5,x\n", 3, header=KEYLESS_HEADER),
    "only a header": Case(b"", 0, header=KEYLESS_HEADER),
}


SPANS_CASES = {
    "null start": Case(b"u1,,4,5,x\nu1,2,4,5,x\n", 1, ("null_time",), header=SPANS_HEADER),
    "null end": Case(b"u1,1,,5,x\nu1,2,4,5,x\n", 1, ("null_end",), header=SPANS_HEADER),
    "unparsable end": Case(b"u1,1,later,5,x\nu1,2,4,5,x\n", 1, ("cast_failed: until=later",), header=SPANS_HEADER),
    "end before start": Case(b"u1,5,3,5,x\nu1,6,9,5,x\n", 1, ("end_before_start",), header=SPANS_HEADER),
    "zero-length row": Case(b"u1,3,3,5,x\nu1,6,9,5,x\n", 1, ("empty_interval",), header=SPANS_HEADER),
    "same start, different ends": Case(b"u1,1,4,5,x\nu1,1,6,5,x\nu1,2,3,5,x\n", 3, header=SPANS_HEADER),
    "same start and end, different payloads": Case(b"u1,1,4,5,x\nu1,1,4,6,x\nu1,2,3,5,x\n", 1,
                                                   ("conflicting_duplicate", "conflicting_duplicate"),
                                                   header=SPANS_HEADER),
    "exact duplicates": Case(b"u1,1,4,5,x\nu1,1,4,5,x\nu1,2,3,5,x\n", 2, dropped=1, header=SPANS_HEADER),
    "overlapping, nested and touching rows": Case(b"u1,1,10,5,x\nu1,2,4,5,x\nu1,3,12,5,x\nu1,12,13,5,x\n", 4,
                                                  header=SPANS_HEADER),
}


def parquet_bytes(columns: dict[str, list]) -> bytes:
    """A Parquet file of `columns`, as pyarrow writes it, in bytes."""
    out = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), out)
    return out.getvalue().to_pybytes()


def new_lake(root: Path, spark: SparkSession, schema: StreamSchema = SCHEMA) -> Lake:
    save_schema(schema, root / "_streams")
    return Lake(spark, root)


def ingest_file(lake: Lake, content: bytes, run_id: str, mode: str = "batch", query: str = QUERY, *,
                suffix: str = ".csv") -> IngestReport:
    """The run's ingest step, as `pielake run` calls it, then its events appended as the stage after the events
    gate appends them (`admit_events`). The gate itself is not run: what it checks of an ingested file is tested
    with its suite (`test_gates_and_backfill.py`), and here it would add a GX validation to every case."""
    path = lake.root / f"{run_id}{suffix}"
    path.write_bytes(content)
    run = Run(lake, load_query(query, "dirty"), run_id, RunRequest(mode=mode, events_path=str(path), fmt="csv",
                                                                   checks=False))
    ingested = run.step("ingest")
    admit_events(StepContext(run.job, run.request))  # as the stage after the gate starts: the events are in
    run.lock.release(run_id)  # the run stops here on purpose: let the case's next run start
    return IngestReport.of(ingested.rows)


def reasons(lake: Lake, run_id: str) -> tuple[str, ...]:
    rows = lake.read("quarantine_dirty").filter(F.col("run_id") == run_id).select("reason").collect()
    return tuple(sorted(r["reason"] for r in rows))


def assert_kept_as_read(lake: Lake, run_id: str, header: bytes, body: bytes) -> None:
    """Every row the run quarantined keeps the row as read (docs/semantics.md §1): a line of the file, or, of a
    row that reads, its fields under the header's names, an empty field as null."""
    names, lines = header.decode().strip().split(","), body.decode(errors="replace").splitlines()
    for row in lake.read("quarantine_dirty").filter(F.col("run_id") == run_id).collect():
        assert row["raw"] is not None, row
        if row["reason"] == MALFORMED_REASON:
            assert row["raw"] in lines, row
        else:
            fields = json.loads(row["raw"])
            assert ",".join(fields[n] or "" for n in names) in lines, row


def assert_accounted(report: IngestReport, *, rows_in: int, events: int, quarantined: int, dropped: int) -> None:
    assert report.rows_in == report.events + report.quarantined + report.duplicates_dropped
    assert (report.rows_in, report.events, report.quarantined, report.duplicates_dropped) == (
        rows_in, events, quarantined, dropped)


@pytest.mark.parametrize("name", CASES)
def test_bad_row_is_accounted_for_with_its_reason(name: str, tmp_path: Path, spark: SparkSession) -> None:
    case = CASES[name]
    lake = new_lake(tmp_path, spark)
    report = ingest_file(lake, case.header + case.body, "r1")
    rows_in = case.body.count(b"\n")
    assert_accounted(report, rows_in=rows_in, events=case.events, quarantined=len(case.reasons),
                     dropped=case.dropped)
    assert reasons(lake, "r1") == tuple(sorted(case.reasons))
    assert_kept_as_read(lake, "r1", case.header, case.body)
    assert lake.read("events_dirty").count() == case.events


@pytest.mark.parametrize("name", KEYLESS_CASES)
def test_bad_row_of_a_stream_without_a_key_is_accounted_for_with_its_reason(name: str, tmp_path: Path,
                                                                            spark: SparkSession) -> None:
    case = KEYLESS_CASES[name]
    lake = new_lake(tmp_path, spark, KEYLESS_SCHEMA)
    report = ingest_file(lake, case.header + case.body, "r1", query=KEYLESS_QUERY)
    assert_accounted(report, rows_in=case.body.count(b"\n"), events=case.events, quarantined=len(case.reasons),
                     dropped=case.dropped)
    assert reasons(lake, "r1") == tuple(sorted(case.reasons))
    assert_kept_as_read(lake, "r1", case.header, case.body)
    assert lake.read("events_dirty").count() == case.events


@pytest.mark.parametrize("name", SPANS_CASES)
def test_bad_interval_row_is_accounted_for_with_its_reason(name: str, tmp_path: Path, spark: SparkSession) -> None:
    case = SPANS_CASES[name]
    lake = new_lake(tmp_path, spark, SPANS_SCHEMA)
    report = ingest_file(lake, case.header + case.body, "r1")
    assert_accounted(report, rows_in=case.body.count(b"\n"), events=case.events, quarantined=len(case.reasons),
                     dropped=case.dropped)
    assert reasons(lake, "r1") == tuple(sorted(case.reasons))
    assert_kept_as_read(lake, "r1", case.header, case.body)
    assert lake.read("events_dirty").count() == case.events


def test_an_interval_row_starting_at_or_before_its_keys_processed_time_is_late(tmp_path: Path,
                                                                              spark: SparkSession) -> None:
    """What a row tells starts at its start (docs/semantics.md §2): a row starting before the key's latest start
    is late, however far it reaches."""
    lake = new_lake(tmp_path, spark, SPANS_SCHEMA)
    (tmp_path / "first.csv").write_bytes(SPANS_HEADER + b"u1,1,9,50,x\nu1,5,6,50,x\n")
    run_query(lake, load_query(QUERY, "dirty"), "r1", RunRequest(events_path=str(tmp_path / "first.csv"),
                                                                 fmt="csv", checks=False))
    # (u1, 5, 6) with another payload conflicts with the ingested row; (u1, 5, 7) would be a row of its own, late.
    body = b"u1,4,30,50,x\nu1,5,6,50,y\nu1,5,7,50,x\nu1,6,8,50,x\n"
    report = ingest_file(lake, SPANS_HEADER + body, "r2", mode="incremental")
    assert_accounted(report, rows_in=4, events=1, quarantined=3, dropped=0)
    assert reasons(lake, "r2") == ("conflicting_duplicate: differs from an ingested event", "late", "late")
    assert_kept_as_read(lake, "r2", SPANS_HEADER, body)


def test_exact_duplicates_across_micro_batches_are_dropped_once(tmp_path: Path, spark: SparkSession) -> None:
    lake = new_lake(tmp_path, spark)
    ingest_file(lake, HEADER + b"u1,1,5,x\nu1,2,5,x\n", "r1")
    report = ingest_file(lake, HEADER + b"u1,2,5,x\nu1,3,5,x\n", "r2", mode="incremental")
    assert_accounted(report, rows_in=2, events=1, quarantined=0, dropped=1)
    assert sorted(r["ts"] for r in lake.read("events_dirty").collect()) == [1, 2, 3]


def test_late_events_of_a_micro_batch_are_quarantined(tmp_path: Path, spark: SparkSession) -> None:
    lake = new_lake(tmp_path, spark)
    (tmp_path / "first.csv").write_bytes(HEADER + b"u1,1,50,x\nu1,5,50,x\nu2,1,5,x\n")
    run_query(lake, load_query(QUERY, "dirty"), "r1", RunRequest(events_path=str(tmp_path / "first.csv"),
                                                                 fmt="csv", checks=False))
    body = b"u1,3,50,x\nu1,5,50,y\nu1,6,50,x\nu2,2,5,x\n"
    report = ingest_file(lake, HEADER + body, "r2", mode="incremental")
    # u1 is processed up to 5: 3 is late, and (u1, 5) with another payload conflicts with the ingested event.
    assert_accounted(report, rows_in=4, events=2, quarantined=2, dropped=0)
    assert reasons(lake, "r2") == ("conflicting_duplicate: differs from an ingested event", "late")
    assert_kept_as_read(lake, "r2", HEADER, body)


def test_late_events_of_a_stream_without_a_key_are_quarantined(tmp_path: Path, spark: SparkSession) -> None:
    lake = new_lake(tmp_path, spark, KEYLESS_SCHEMA)
    (tmp_path / "first.csv").write_bytes(KEYLESS_HEADER + b"1,50,x\n5,50,x\n")
    run_query(lake, load_query(KEYLESS_QUERY, "dirty"), "r1", RunRequest(events_path=str(tmp_path / "first.csv"),
                                                                         fmt="csv", checks=False))
    report = ingest_file(lake, KEYLESS_HEADER + b"3,50,x\n5,50,y\n6,50,x\n", "r2", mode="incremental",
                         query=KEYLESS_QUERY)
    assert_accounted(report, rows_in=3, events=1, quarantined=2, dropped=0)
    assert reasons(lake, "r2") == ("conflicting_duplicate: differs from an ingested event", "late")


DIALECTS = {
    "semicolons": b"unit;ts;speed;label\nu1;1;5;x\nu1;2;fast;x\n",
    "tabs": b"unit\tts\tspeed\tlabel\nu1\t1\t5\tx\nu1\t2\tfast\tx\n",
    "bars": b"unit|ts|speed|label\nu1|1|5|x\nu1|2|fast|x\n",
    "quoted semicolons": b'"unit";"ts";"speed";"label"\n"u1";1;5;"x"\n"u1";2;"fast";"x"\n',
    "byte-order mark and CRLF": b"\xef\xbb\xbfunit,ts,speed,label\r\nu1,1,5,x\r\nu1,2,fast,x\r\n",
    "CR alone (classic Mac OS)": b"unit;ts;speed;label\ru1;1;5;x\ru1;2;fast;x\r",
    "semicolons, gzip-compressed": b"unit;ts;speed;label\nu1;1;5;x\nu1;2;fast;x\n",
    "a separator ending every line": b"unit,ts,speed,label,\nu1,1,5,x,\nu1,2,fast,x,\n",
}
COMPRESSED = {"semicolons, gzip-compressed"}  # written through gzip, as `.csv.gz`
TAB_SEPARATED = {"tabs"}  # named `.tsv`, as tab-separated exports are


@pytest.mark.parametrize("name", DIALECTS)
def test_a_csv_file_of_another_dialect_is_read_by_its_header(name: str, tmp_path: Path,
                                                            spark: SparkSession) -> None:
    """Spreadsheets write semicolons, tabs, a byte-order mark and CRLF (Excel's "CSV (Macintosh)" CR alone), and
    some exporters a separator at the end of every line: the file is read as its header line is separated, into a
    declared stream, and into a stream whose schema it gives, of the columns its header names. A compressed file is
    read so too, its format told by the suffix before its codec's, and a `.tsv` file as the CSV it is."""
    lake = new_lake(tmp_path / "declared", spark)
    write, suffix = (gzip.compress, ".csv.gz") if name in COMPRESSED else (bytes, ".tsv" if name in TAB_SEPARATED
                                                                             else ".csv")
    assert_accounted(ingest_file(lake, write(DIALECTS[name]), "r1", suffix=suffix), rows_in=2, events=1,
                     quarantined=1, dropped=0)
    assert reasons(lake, "r1") == ("cast_failed: speed=fast",)
    result = run_without_schema(tmp_path, write(DIALECTS[name].replace(b"fast", b"7")), file=f"events{suffix}")
    assert result.exit_code == 0, result.output
    assert "2 rows in = 2 events + 0 quarantined" in result.output
    inferred = load_schema("Dirty", lake_streams(tmp_path / "lake"))
    assert inferred is not None and inferred.column_names == ("unit", "ts", "speed", "label")


def test_a_quoted_field_holds_doubled_quotes_separators_and_line_breaks_as_written(tmp_path: Path,
                                                                                  spark: SparkSession) -> None:
    """CSV as RFC 4180, spreadsheets, pandas and Python's csv write it: a record whose quoted field holds a line
    break is one row, not a truncated event and a quarantined line; a doubled quote is one quote. Into a declared
    stream, and into a stream whose types the file gives."""
    content = HEADER + b'u1,1,5,"say ""hi"", then\nstop"\nu1,2,6,plain\n'
    lake = new_lake(tmp_path / "declared", spark)
    assert_accounted(ingest_file(lake, content, "r1"), rows_in=2, events=2, quarantined=0, dropped=0)
    labels = [r["label"] for r in lake.read("events_dirty").orderBy("ts").collect()]
    assert labels == ['say "hi", then\nstop', "plain"]
    result = run_without_schema(tmp_path, content, "--no-checks")
    assert result.exit_code == 0, result.output
    assert "2 rows in = 2 events + 0 quarantined" in result.output
    events = Lake(spark, tmp_path / "lake").read("events_dirty").orderBy("ts").collect()
    assert [r["label"] for r in events] == labels


def run_dirty(tmp_path: Path, lake: Lake, events: Path | str, *options: str, code: int = 0) -> str:
    """`pielake run` of the Dirty query over `events` into `lake`, gates off, as a user runs it; it exits with
    `code`. Its output."""
    (tmp_path / "q.tpq").write_text(QUERY)
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(events), "--lake",
                                       str(lake.root), "--no-checks", *options])
    assert result.exit_code == code, result.output
    return result.output


def stored_events(lake: Lake) -> list[tuple]:
    """The Dirty stream's events in the lake, in time order, as (unit, ts, speed, label)."""
    return [tuple(r) for r in lake.read("events_dirty").orderBy("ts").select("unit", "ts", "speed", "label").collect()]


@pytest.mark.parametrize("on_driver", [True, False], ids=["counted on the driver", "grouped by Spark"])
def test_a_run_says_its_quarantined_rows_by_rule_the_commonest_first_each_with_a_value_that_broke_it(
        on_driver: bool, tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a person reads after a run that quarantined rows, before querying the quarantine: a few rows' reasons
    are counted on the driver, more grouped by Spark, and either way the output is the same."""
    if not on_driver:
        monkeypatch.setattr(ingest_module, "DRIVER_REASONS", 0)
    lake = new_lake(tmp_path / "lake", spark)
    (tmp_path / "dirty.csv").write_bytes(HEADER + b"u1,1,slow,x\nu1,2,fast,x\nu1,x,5,x\n,4,5,x\nu1,5,5,x\n"
                                                  b"u1,6,5,x,9\n")
    output = run_dirty(tmp_path, lake, tmp_path / "dirty.csv")
    assert ("(quarantine: 2 cast_failed: speed (such as fast), 1 cast_failed: ts (such as x), 1 malformed: the "
            "line does not read as one row of the file's columns, and others)") in output


def test_csv_files_read_together_are_each_read_by_their_own_header(tmp_path: Path, spark: SparkSession) -> None:
    """Files of one stream landed by different writers into one folder, whose format their names tell: the same
    columns in another order, another separator. Each value lands under its own column's name; files whose columns
    differ are refused, naming them."""
    lake = new_lake(tmp_path / "lake", spark)
    landed = tmp_path / "landed"
    landed.mkdir()
    (landed / "a.csv").write_bytes(HEADER + b"u1,1,5,x\n")
    (landed / "b.csv").write_bytes(b"label,speed,ts,unit\ny,6,2,u1\n")
    (landed / "c.csv").write_bytes(b"ts;unit;label;speed\n3;u2;z;7\n")
    (landed / "_partial.csv").write_bytes(b"unit,ts\n")  # not complete yet: not read, as Spark does not read it
    run_dirty(tmp_path, lake, landed)
    assert stored_events(lake) == [("u1", 1, 5.0, "x"), ("u1", 2, 6.0, "y"), ("u2", 3, 7.0, "z")]
    (landed / "d.csv").write_bytes(b"unit,ts,speed\nu1,4,8\n")
    output = run_dirty(tmp_path, lake, landed, "--incremental", code=2)
    assert_one_error_line(output, f"do not have the same columns: {landed / 'a.csv'} has unit, ts, speed, "
                                  f"label; {landed / 'b.csv'} has label, speed, ts, unit")
    assert f"{landed / 'd.csv'} has unit, ts, speed;" in output
    assert lake.read("events_dirty").count() == 3


def test_files_are_read_whatever_their_names_hold(tmp_path: Path, spark: SparkSession) -> None:
    """Hadoop reads every path as a pattern of names (`[1]`, `{a,b}`, `?`), and could not open a file whose name
    holds a `:` (`2026-12-02T10:00:00`, as log shippers name files): such files, in a folder or named alone, are
    read as any other. A name with both Spark cannot read at all: refused, saying so."""
    lake = new_lake(tmp_path / "lake", spark)
    landed = tmp_path / "landed"
    landed.mkdir()
    (landed / "a[1].csv").write_bytes(HEADER + b"u1,1,5,x\n")
    (landed / "b{1,2}?.csv").write_bytes(HEADER + b"u1,2,6,y\n")
    (landed / "c 2026-12-02T10:00:00.csv").write_bytes(HEADER + b"u2,3,7,z\n")
    run_dirty(tmp_path, lake, landed)
    assert stored_events(lake) == [("u1", 1, 5.0, "x"), ("u1", 2, 6.0, "y"), ("u2", 3, 7.0, "z")]
    bracketed = tmp_path / "d[2].parquet"
    pq.write_table(pa.table({"unit": ["u2"], "ts": [4], "speed": [8.0], "label": ["w"]}), bracketed)
    assert "1 rows in = 1 events" in run_dirty(tmp_path, lake, bracketed, "--incremental")
    timed = tmp_path / "e 10:00:00.json"
    timed.write_text('{"unit": "u2", "ts": 5, "speed": 9.0, "label": "v"}\n')
    assert "1 rows in = 1 events" in run_dirty(tmp_path, lake, timed, "--incremental")
    assert stored_events(lake)[-2:] == [("u2", 4, 8.0, "w"), ("u2", 5, 9.0, "v")]
    both = tmp_path / "f 10:00[3].csv"
    both.write_bytes(HEADER + b"u2,6,1,t\n")
    assert_one_error_line(run_dirty(tmp_path, lake, both, "--incremental", code=2),
                          f"cannot read '{both}': Spark reads no file whose path holds both ':' and one of "
                          "[ ] { } ? * \\; rename it without one of them (a ':' may be a '-')")


def test_a_data_set_of_a_folder_per_partition_is_read_whole_each_folder_s_value_a_column(tmp_path: Path,
                                                                                        spark: SparkSession) -> None:
    """As Spark, Hive and pyarrow write a table: `label=x/<part>.parquet`, the label a column of the rows in that
    folder, and the files under `_` or `.` names (markers, checksums) not read. A subfolder that is no partition
    (an archive of files read before) is not the folder's data, as Spark does not read it either."""
    lake = new_lake(tmp_path / "lake", spark)
    table = tmp_path / "table"
    pq.write_to_dataset(pa.table({"unit": ["u1", "u1", "u2"], "ts": [1, 2, 3], "speed": [5.0, 6.0, 7.0],
                                  "label": ["x", "y", "x"]}), table, partition_cols=["label"])
    (table / "_SUCCESS").write_bytes(b"")
    run_dirty(tmp_path, lake, table)
    assert stored_events(lake) == [("u1", 1, 5.0, "x"), ("u1", 2, 6.0, "y"), ("u2", 3, 7.0, "x")]
    folder = tmp_path / "landed"
    (folder / "archive").mkdir(parents=True)
    (folder / "archive" / "a.csv").write_bytes(HEADER + b"u1,1,5,x\n")
    (folder / "b.csv").write_bytes(HEADER + b"u1,5,9,y\n")
    assert "1 rows in = 1 events" in run_dirty(tmp_path, lake, folder, "--incremental")
    assert lake.read("events_dirty").count() == 4


def test_parquet_files_read_together_may_differ_in_their_columns_types(tmp_path: Path, spark: SparkSession) -> None:
    """A value of another type in one file (text where the others hold numbers, a 32-bit time) is cast as a CSV
    file's values are: quarantined with its reason where it does not cast, instead of stopping the read."""
    lake = new_lake(tmp_path / "lake", spark)
    landed = tmp_path / "landed"
    landed.mkdir()
    files = {"a": {"unit": ["u1"], "ts": [1], "speed": [5.0], "label": ["x"]},
             "b": {"unit": ["u1"], "ts": [2], "speed": ["fast"], "label": ["y"]},
             "c": {"label": ["z"], "speed": [7.0], "unit": ["u2"], "ts": pa.array([3], pa.int32())}}
    for name, columns in files.items():
        pq.write_table(pa.table(columns), landed / f"{name}.parquet")
    assert "3 rows in = 2 events + 1 quarantined" in run_dirty(tmp_path, lake, landed / "*.parquet")
    assert stored_events(lake) == [("u1", 1, 5.0, "x"), ("u2", 3, 7.0, "z")]
    assert reasons(lake, lake.read("quarantine_dirty").first()["run_id"]) == ("cast_failed: speed=fast",)
    # A file cut short as it was copied, beside files of two schemas, would be read by none of their reads.
    whole = (landed / "a.parquet").read_bytes()
    (landed / "d.parquet").write_bytes(whole[:len(whole) // 2])
    output = run_dirty(tmp_path, lake, landed / "*.parquet", "--incremental", code=2)
    assert_one_error_line(output, f"{landed / 'd.parquet'} is not a Parquet file")


def test_a_parquet_file_of_times_in_nanoseconds_as_pandas_writes_it_is_read_to_the_microsecond(
        tmp_path: Path, spark: SparkSession) -> None:
    """pandas writes a time in nanoseconds unless told otherwise (Parquet's TIMESTAMP(NANOS)), which Spark reads
    as no time at all. Each is the TIMESTAMP of its microsecond (the floor, before 1970 too), a stream typed from
    the file gets unit timestamp without being told, and two times of a key that are one microsecond are
    duplicates: of other values, both quarantined as conflicting. Such a file on object storage is refused, with
    the fix."""
    lake = Lake(spark, tmp_path / "lake")
    nanoseconds = [1_767_225_600_000_000_999, 1_767_225_600_000_001_000, 1_767_225_600_000_001_400, -500]
    table = pa.table({"unit": ["u1", "u1", "u1", "u2"], "ts": pa.array(nanoseconds, pa.timestamp("ns")),
                      "speed": [11.0, 12.0, 13.0, 14.0], "label": ["x", "x", "y", "x"]})
    pq.write_table(table, tmp_path / "events.parquet")  # pyarrow keeps nanoseconds, as pandas' to_parquet does
    (tmp_path / "q.tpq").write_text(QUERY.replace("Dirty", "Timed"))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "events.parquet"),
                                       "--lake", str(lake.root), "--no-checks"])
    assert result.exit_code == 0, result.output
    assert "4 rows in = 2 events + 2 quarantined + 0 exact duplicates dropped" in result.output, result.output
    assert load_schema("Timed", lake_streams(lake.root)).time_unit == "timestamp"
    micros = sorted(r.ts for r in lake.read("events_timed").select(F.unix_micros("ts").alias("ts")).collect())
    assert micros == [-1, 1_767_225_600_000_000]
    assert {r.reason.split(":")[0] for r in lake.read("quarantine_timed").collect()} == {"conflicting_duplicate"}

    # A URL's files are not looked into: read after the file above, in the same session, it is refused with the fix.
    url = (tmp_path / "events.parquet").as_uri()
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", url, "--lake",
                                       str(tmp_path / "other"), "--no-checks"])
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "its times are in nanoseconds (as pandas writes them")


def test_a_parquet_file_of_int96_times_as_hive_impala_and_older_spark_write_them_is_read_as_its_times(
        tmp_path: Path, spark: SparkSession) -> None:
    """INT96 is the time Hive, Impala and Spark before 3 wrote to Parquet, and many lakes still hold: Spark reads it
    as a time, to the microsecond. It is no time in nanoseconds, which a look at the footer would call it."""
    lake = Lake(spark, tmp_path / "lake")
    times = [datetime(2023, 11, 14, 22, 13, 20, 123456), datetime(2023, 11, 14, 22, 13, 21)]
    table = pa.table({"unit": ["u1", "u1"], "ts": pa.array(times, pa.timestamp("us", tz="UTC")),
                      "speed": [11.0, 12.0], "label": ["x", "y"]})
    pq.write_table(table, tmp_path / "events.parquet", use_deprecated_int96_timestamps=True)
    (tmp_path / "q.tpq").write_text(QUERY.replace("Dirty", "Legacy"))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "events.parquet"),
                                       "--lake", str(lake.root), "--no-checks"])
    assert result.exit_code == 0, result.output
    assert "2 rows in = 2 events + 0 quarantined" in result.output, result.output
    assert sorted(r.ts for r in lake.read("events_legacy").collect()) == times


@pytest.mark.parametrize(("name", "content"), [
    ("events.json", b'{"unit":"u1","ts":"2026-01-01T00:00:00.000","speed":11.0,"label":"x"}\n'
                    b'{"unit":"u1","ts":"2026-01-01T00:00:01.000","speed":12.0,"label":"y"}\n'),
    ("events.csv", b"unit,ts,speed,label\nu1,2026-01-01 01:00:00+01:00,11.0,x\nu1,2026-01-01 01:00:01+01:00,12.0,y\n"),
    ("events.parquet", parquet_bytes({"unit": ["u1", "u1"], "ts": ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z"],
                                      "speed": [11.0, 12.0], "label": ["x", "y"]})),
], ids=["JSON as pandas writes it", "CSV with zone offsets", "Parquet of times as text"])
def test_a_stream_typed_from_a_file_of_iso_times_is_a_stream_of_timestamps(name: str, content: bytes, tmp_path: Path,
                                                                          spark: SparkSession) -> None:
    """ISO-8601 text in the time column of a file with no schema is a TIMESTAMP, of unit timestamp, without
    --time-unit: in JSON (which Spark reads as text unless told) as in CSV, and in Parquet whose writer kept the
    times as text."""
    lake = Lake(spark, tmp_path / "lake")
    (tmp_path / name).write_bytes(content)
    (tmp_path / "q.tpq").write_text(QUERY.replace("Dirty", "Iso"))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / name),
                                       "--lake", str(lake.root), "--no-checks"])
    assert result.exit_code == 0, result.output
    assert "2 rows in = 2 events + 0 quarantined" in result.output
    stream = load_schema("Iso", lake_streams(lake.root))
    assert (stream.time_unit, stream.type_of("ts")) == ("timestamp", "TIMESTAMP")
    times = sorted(r.ts for r in lake.read("events_iso").select(F.unix_micros("ts").alias("ts")).collect())
    assert times == [1_767_225_600_000_000, 1_767_225_601_000_000]


@pytest.mark.parametrize("name", ["days.csv", "days.parquet"])
def test_a_stream_typed_from_a_file_of_dates_is_a_stream_of_timestamps_each_at_its_day_s_midnight(
        name: str, tmp_path: Path, spark: SparkSession) -> None:
    """Daily data (a date a row, as weather and sales exports write it): Spark types the column as DATE, which no
    event time is; each event is at its day's midnight, UTC, in CSV and Parquet alike, and a later file's dates are
    read so too."""
    lake = Lake(spark, tmp_path / "lake")
    days = tmp_path / name
    if name.endswith(".csv"):
        days.write_bytes(b"unit,ts,speed,label\nu1,2026-01-01,11.0,x\nu1,2026-01-02,12.0,y\n")
    else:
        pq.write_table(pa.table({"unit": ["u1", "u1"], "ts": pa.array([datetime(2026, 1, 1).date(),
                                                                      datetime(2026, 1, 2).date()], pa.date32()),
                                 "speed": [11.0, 12.0], "label": ["x", "y"]}), days)
    (tmp_path / "q.tpq").write_text(QUERY.replace("Dirty", "Daily"))
    later = tmp_path / "later.csv"
    later.write_bytes(b"unit,ts,speed,label\nu1,2026-01-03,13.0,z\n")
    for events, mode in ((days, ()), (later, ("--incremental",))):
        result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(events), *mode,
                                           "--lake", str(lake.root), "--no-checks"])
        assert result.exit_code == 0, result.output
    stream = load_schema("Daily", lake_streams(lake.root))
    assert (stream.time_unit, stream.type_of("ts")) == ("timestamp", "TIMESTAMP")
    times = sorted(r.ts for r in lake.read("events_daily").select(F.unix_micros("ts").alias("ts")).collect())
    assert times == [1_767_225_600_000_000 + day * 86_400_000_000 for day in range(3)]


def test_times_in_milliseconds_read_as_seconds_are_refused_with_the_unit_they_are_in(tmp_path: Path,
                                                                                   spark: SparkSession) -> None:
    """pandas' `to_json` writes a time as milliseconds since 1970. Typed from such a file in seconds, the times lie
    past the year 5000 and every window would be a thousandth of what it says: the run is refused with the unit in
    which they are dates, and runs with it."""
    lake = Lake(spark, tmp_path / "lake")
    (tmp_path / "events.json").write_bytes(b'{"unit":"u1","ts":1767225600000,"speed":11.0,"label":"x"}\n'
                                           b'{"unit":"u1","ts":1767225601000,"speed":12.0,"label":"y"}\n')
    (tmp_path / "q.tpq").write_text(QUERY.replace("Dirty", "Epoch"))
    command = ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "events.json"), "--lake", str(lake.root),
               "--no-checks"]
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "numbers such as 1767225601000, which in s (the stream's unit) lie past "
                                         "the year 5000: pass --time-unit ms")
    assert not lake.exists("events_epoch")
    result = CliRunner().invoke(main, [*command, "--time-unit", "ms"])
    assert result.exit_code == 0, result.output
    assert load_schema("Epoch", lake_streams(lake.root)).time_unit == "ms"


def test_json_files_of_records_on_many_lines_are_read_whole_beside_json_lines(tmp_path: Path,
                                                                            spark: SparkSession) -> None:
    """A pretty-printed array of records (`json.dump(rows, indent=2)`) holds no record on any one line; read
    whole, its records are events, beside the JSON Lines files of the same folder, and a malformed one is
    quarantined whole."""
    lake = new_lake(tmp_path / "lake", spark)
    landed = tmp_path / "landed"
    landed.mkdir()
    (landed / "a.json").write_text('{"unit": "u1", "ts": 1, "speed": 5.0, "label": "x"}\n')
    (landed / "b.json").write_text(json.dumps([{"unit": "u1", "ts": 2, "speed": 6.0, "label": "y"},
                                               {"unit": "u2", "ts": 3, "speed": 7.0, "label": "z"}], indent=2))
    (landed / "c.json").write_text('[\n  {"unit": "u3", "ts": 4,\n')
    # Compressed as log shippers and exports land them: Spark decompresses them, pielake looks into them.
    (landed / "d.json.gz").write_bytes(gzip.compress(json.dumps(
        [{"unit": "u4", "ts": 5, "speed": 8.0, "label": "w"}], indent=2).encode()))
    (landed / "e.jsonl.bz2").write_bytes(bz2.compress(b'{"unit": "u5", "ts": 6, "speed": 9.0, "label": "v"}\n'))
    (tmp_path / "q.tpq").write_text(QUERY)
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(landed), "--lake",
                                       str(lake.root), "--no-checks"])
    assert result.exit_code == 0, result.output
    assert "6 rows in = 5 events + 1 quarantined" in result.output
    rows = lake.read("events_dirty").orderBy("ts").select("unit", "ts", "speed", "label").collect()
    assert [tuple(r) for r in rows] == [("u1", 1, 5.0, "x"), ("u1", 2, 6.0, "y"), ("u2", 3, 7.0, "z"),
                                        ("u4", 5, 8.0, "w"), ("u5", 6, 9.0, "v")]
    [quarantined] = lake.read("quarantine_dirty").collect()
    assert (quarantined.reason, quarantined.raw) == (MALFORMED_REASON, '[\n  {"unit": "u3", "ts": 4,\n')


def assert_one_error_line(output: str, text: str) -> None:
    """The run's progress lines, then one line saying what is wrong: no traceback."""
    *_, last = output.strip().splitlines()
    assert last.startswith("error: ") and text in last and "Traceback" not in output, output


@pytest.mark.parametrize(("header", "named"), [
    (b"unit,ts,speed\n", "no column(s) label"),
    (b"unit,ts,speed,label,colour\n", "column(s) colour that"),
    (b"unit;ts;speed;label;Speed\n", "names the column 'Speed' twice (its fields 3 and 5); rename one"),
])
def test_columns_not_in_the_stream_stop_the_run_with_one_line(header: bytes, named: str, tmp_path: Path,
                                                             spark: SparkSession) -> None:
    lake = new_lake(tmp_path, spark)
    (tmp_path / "q.tpq").write_text(QUERY)
    (tmp_path / "events.csv").write_bytes(header + b"u1,1,5,x,red\n")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "events.csv"),
                                       "--lake", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, named)
    assert not lake.exists("events_dirty")
    with pytest.raises(LakeError, match=named.replace("(", r"\(").replace(")", r"\)")):
        ingest_file(lake, header + b"u1,1,5,x,red\n", "r1")


@pytest.mark.parametrize("declared", [True, False], ids=["declared stream", "stream to infer"])
def test_a_missing_events_file_is_one_line(declared: bool, tmp_path: Path, spark: SparkSession) -> None:
    """From the command line, before Spark starts; from a step (an Airflow task's), whether it reads the file to
    ingest it or, first, to infer its stream's schema."""
    lake = new_lake(tmp_path, spark) if declared else Lake(spark, tmp_path)
    missing = tmp_path / "none.csv"
    (tmp_path / "q.tpq").write_text(QUERY)
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(missing),
                                       "--lake", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"the events path '{missing}' names no file")
    run = Run(lake, load_query(QUERY, "dirty"), "r1", RunRequest(events_path=str(missing)))
    with pytest.raises(LakeError, match=f"cannot read {missing} as csv: .*PATH_NOT_FOUND"):
        run.step("ingest")


def test_a_run_of_a_stream_it_can_neither_read_nor_find_says_what_to_give(tmp_path: Path, spark: SparkSession) -> None:
    """A backfill, or a run over matches or without --events, of a stream no run has ingested and no schema
    declares."""
    with pytest.raises(PielakeError, match=r"stream Dirty has not been ingested into .*, and the run reads no file of "
                                           r"it: give its events \(--events\), or declare the stream in "
                                           r"schemas/Dirty.yaml"):
        streams_for(Lake(spark, tmp_path), load_query(QUERY, "q"), RunRequest(mode="backfill", since="1", until="2"))


def test_a_refused_file_leaves_no_schema_and_a_held_stream_keeps_its_columns(tmp_path: Path,
                                                                            spark: SparkSession) -> None:
    """The lake keeps a stream's schema once a run has read its file with it: a file refused for its columns at a
    stream's first run leaves the schema in `schemas/` in charge, so mending it there is what the next run takes;
    a stream the lake holds events of keeps its columns, and its refusal says so."""
    (tmp_path / "q.tpq").write_text("FROM CarSensors C PARTITION BY C.car_id\nDEFINE A AS C.speed > 1, "
                                    "B AS C.accel > 1\nPATTERN A meets B\nWITHIN 5 s\n")
    header = b"car_id,ts,speed,accel,lateral_accel"
    files = {"extra": header + b",colour\nc1,1,2,2,0,red\n", "good": header + b"\nc1,1,2,2,0\n",
             "later": header + b",colour\nc1,2,2,2,0,red\n", "fewer": b"car_id,ts,speed,accel\nc1,2,2,2\n"}
    for name, content in files.items():
        (tmp_path / f"{name}.csv").write_bytes(content)
    lake = tmp_path / "lake"

    def run(name: str, code: int) -> str:
        result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / f"{name}.csv"),
                                           "--lake", str(lake), "--no-checks", "--incremental"])
        assert result.exit_code == code, result.output
        return result.output

    assert_one_error_line(run("extra", 2), "add them to the stream's schema (schemas/CarSensors.yaml)")
    assert load_schema("CarSensors", lake_streams(lake)) is None
    run("good", 0)
    assert load_schema("CarSensors", lake_streams(lake)) == load_schema("CarSensors")
    fixed = f"the stream's columns are fixed since its first run ({lake_streams(lake) / 'CarSensors.yaml'})"
    assert_one_error_line(run("later", 2), f"{fixed}: drop them from the file")
    assert_one_error_line(run("fewer", 2), f"no column(s) lateral_accel declared by stream CarSensors; it has car_id, "
                                           f"ts, speed, accel; {fixed}: give the file every one of them")


def run_without_schema(tmp_path: Path, content: bytes, *options: str, file: str = "events.csv") -> Result:
    """`pielake run` of the Dirty query over `content`, in `file`, into a lake that has no schema of the stream
    (nor has the project's `schemas/`), so the run infers one from the file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "q.tpq").write_text(QUERY)
    (tmp_path / file).write_bytes(content)
    return CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / file),
                                     "--lake", str(tmp_path / "lake"), *options])


def test_a_query_that_does_not_fit_the_types_inferred_from_its_file_says_so_and_leaves_them_behind(
        tmp_path: Path, spark: SparkSession) -> None:
    """One value that is not a number makes `speed` text, and `D.speed > 10` compares it with a number: the
    refusal shows the inferred types and where to declare them, and the lake keeps none of them, so the schema the
    user then declares is the one the next run takes."""
    result = run_without_schema(tmp_path, HEADER + b"u1,1,fast,x\nu1,2,5,x\n")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "mixes D.speed (string) and 10 (number)" in result.output
    assert "Stream Dirty has no schema: its columns were typed from its file, as unit STRING, ts INT, speed " \
           "STRING, label STRING" in result.output and "schemas/Dirty.yaml" in result.output
    lake = Lake(spark, tmp_path / "lake")
    assert load_schema("Dirty", lake_streams(lake.root)) is None
    save_schema(SCHEMA, tmp_path / "schemas")
    plan = load_query(QUERY, "q")
    assert streams_for(lake, plan, RunRequest(events_path=str(tmp_path / "events.csv")),
                       schemas_dir=tmp_path / "schemas") == (SCHEMA,)


def test_missing_values_as_r_and_sql_exports_write_them_are_null_in_the_types_of_the_values_present(
        tmp_path: Path, spark: SparkSession) -> None:
    """R's `write.csv` writes a missing number as `NA` (and quotes text), a SQL export as `NULL`: the stream is
    typed from the values present, each token is NULL, over which `Fast` does not hold, so `Fast` ends at it; in
    the text column `label`, `NA` is text. Were the rows quarantined instead, `Fast` would hold from 1 to 5 and
    the match would start at 1."""
    result = run_without_schema(tmp_path, b'"unit","ts","speed","label"\n"u1",1,12.5,"y"\n"u1",2,NA,"y"\n'
                                          b'"u1",3,12.5,"y"\n"u1",4,12.5,"x"\n"u1",5,NULL,"x"\n"u1",6,3,"NA"\n')
    assert result.exit_code == 0, result.output
    assert "quarantined: 0" in result.output
    lake = Lake(spark, tmp_path / "lake")
    assert load_schema("Dirty", lake_streams(lake.root)).columns == (
        ("unit", "STRING"), ("ts", "INT"), ("speed", "DOUBLE"), ("label", "STRING"))
    assert [tuple(r) for r in lake.read("events_dirty").orderBy("ts").select("speed", "label").collect()] == [
        (12.5, "y"), (None, "y"), (12.5, "y"), (12.5, "x"), (None, "x"), (3.0, "NA")]
    matches = lake.read("matches_q").select("fast_ts", "fast_te", "tagged_ts", "tagged_te", "status").collect()
    assert [tuple(r) for r in matches] == [(3, 5, 4, 6, "complete")]


def test_numbers_with_a_decimal_comma_as_spreadsheets_export_them_are_read_with_the_comma_as_the_point(
        tmp_path: Path, spark: SparkSession) -> None:
    """A spreadsheet of a locale that writes a decimal comma exports `12,5` between semicolons: typed from the
    file, the stream's files write a decimal comma (its kept schema says so) and `speed` is a number. `1,234`
    alone may be a thousands comma, so a column of such values stays text; a later file's `1.234,5` (a thousands
    point) is quarantined, not misread."""
    result = run_without_schema(tmp_path, b"unit;ts;speed;label;count\nu1;1;12,5;x;1,234\nu1;2;3;x;2,000\n"
                                          b"u1;3;-0,25;y;1,500\n", "--no-checks")
    assert result.exit_code == 0, result.output
    lake = Lake(spark, tmp_path / "lake")
    kept = load_schema("Dirty", lake_streams(lake.root))
    assert kept.decimal_mark == "," and kept.columns == (
        ("unit", "STRING"), ("ts", "INT"), ("speed", "DOUBLE"), ("label", "STRING"), ("count", "STRING"))
    (tmp_path / "later.csv").write_bytes(b"unit;ts;speed;label;count\nu1;4;1.234,5;x;1\nu1;5;7,5;x;2\n")
    output = run_dirty(tmp_path, lake, tmp_path / "later.csv", "--incremental")
    assert "2 rows in = 1 events + 1 quarantined" in output
    assert reasons(lake, lake.read("quarantine_dirty").first()["run_id"]) == ("cast_failed: speed=1.234,5",)
    assert [tuple(r) for r in lake.read("events_dirty").orderBy("ts").select("speed", "count").collect()] == [
        (12.5, "1,234"), (3.0, "2,000"), (-0.25, "1,500"), (7.5, "2")]


def test_a_csv_file_in_the_encoding_its_stream_declares_is_read_in_it_and_one_typed_from_a_file_is_utf_8(
        tmp_path: Path, spark: SparkSession) -> None:
    """Excel on Windows writes CSV in windows-1252 (`ü` as the byte FC, `€` as 80, which ISO-8859-1 has not): a
    stream that declares that encoding reads the file's text as written. A stream typed from such a file is refused
    before any schema is kept, naming the line and the bytes, and the fix; so is a file in UTF-16 (Excel's
    "Unicode Text"), whose lines a reader of bytes cannot split."""
    lake = new_lake(tmp_path / "declared", spark, replace(SCHEMA, encoding="windows-1252"))
    content = (HEADER.decode() + "u1,1,5,Zürich\nu1,2,5,5 €\n").encode("windows-1252")
    assert_accounted(ingest_file(lake, content, "r1"), rows_in=2, events=2, quarantined=0, dropped=0)
    assert [r["label"] for r in lake.read("events_dirty").orderBy("ts").collect()] == ["Zürich", "5 €"]
    result = run_without_schema(tmp_path, content)
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"stream Dirty has no schema, and its file {tmp_path / 'events.csv'} is "
                                         "not UTF-8: line 2 holds the byte(s) FC after 'u1,1,5,Z'; declare the "
                                         "encoding its writer used in schemas/Dirty.yaml (encoding: windows-1252")
    assert load_schema("Dirty", lake_streams(tmp_path / "lake")) is None
    result = run_without_schema(tmp_path, content.decode("windows-1252").encode("utf-16"), file="unicode.csv")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"{tmp_path / 'unicode.csv'} is UTF-16 (its byte-order mark says so), "
                                         "which pielake does not read as CSV: convert it to UTF-8 (iconv -f UTF-16 -t "
                                         "UTF-8), or save it as CSV UTF-8")


def test_a_logger_s_title_and_units_around_the_header_are_skipped_as_its_stream_declares(
        tmp_path: Path, spark: SparkSession) -> None:
    """A data logger's file (Campbell Scientific's TOA5) writes a title line, the header, then a line of units and
    one of processing, each in every file: a stream that declares `skip_lines: [1, 3, 4]` reads its rows alone, a
    bad one quarantined as ever, also where two files were joined end to end. Typed from such a file, the stream is
    refused with the header's names and the fix; given the lines (`--skip-lines 1,3,4`), it is typed from the rows
    alone and keeps them."""
    title = b'"TOA5","CR1000_Mast","CR1000","1234","CR1000.Std.32","CPU:mast.CR1","4321","Table1"\r\n'
    head = title + b'"unit","ts","speed","label"\r\n"","s","m/s",""\r\n"","Smp","Avg","Smp"\r\n'
    content = head + b'"u1",1,12.5,"x"\r\n"u1",2,fast,"x"\r\n' + head + b'"u1",3,3,"y"\r\n'
    lake = new_lake(tmp_path / "declared", spark, replace(SCHEMA, skip_lines=(1, 3, 4)))
    assert_accounted(ingest_file(lake, content, "r1"), rows_in=3, events=2, quarantined=1, dropped=0)
    assert reasons(lake, "r1") == ("cast_failed: speed=fast",)
    assert stored_events(lake) == [("u1", 1, 12.5, "x"), ("u1", 3, 3.0, "y")]
    result = run_without_schema(tmp_path, content)
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "its first line has 8 field(s) and its second 4 (unit, ts, speed, label), "
                                         "as data loggers write a title before the header: pass --skip-lines 1")
    typed = head + b'"u1",1,12.5,"x"\r\n"u1",2,3,"y"\r\n' + head + b'"u1",3,11,"y"\r\n'
    result = run_without_schema(tmp_path, typed, "--skip-lines", "1,3,4", "--no-checks")
    assert result.exit_code == 0 and "3 rows in = 3 events" in result.output, result.output
    kept = load_schema("Dirty", lake_streams(tmp_path / "lake"))
    assert kept.skip_lines == (1, 3, 4) and kept.columns == (
        ("unit", "STRING"), ("ts", "INT"), ("speed", "DOUBLE"), ("label", "STRING"))
    (tmp_path / "stamped").mkdir()  # times and a missing value, typed from the rows as from a file of no title
    stamped = head + b'"u1","2026-07-01 00:00:01",12.5,"x"\r\n"u1","2026-07-01 00:00:02",NA,"y"\r\n'
    result = run_without_schema(tmp_path / "stamped", stamped, "--skip-lines", "1,3,4", "--no-checks")
    assert result.exit_code == 0, result.output
    kept = load_schema("Dirty", lake_streams(tmp_path / "stamped" / "lake"))
    assert kept.time_unit == "timestamp" and kept.columns == (
        ("unit", "STRING"), ("ts", "TIMESTAMP"), ("speed", "DOUBLE"), ("label", "STRING"))


@pytest.mark.parametrize("content", [b"", HEADER], ids=["empty", "header alone"])
def test_a_file_of_no_events_cannot_type_a_stream_and_says_so(content: bytes, tmp_path: Path,
                                                              spark: SparkSession) -> None:
    """With no rows, a header types every column as text: the refusal says what the file lacks, not that its time
    column is text."""
    result = run_without_schema(tmp_path, content)
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"its file {tmp_path / 'events.csv'} holds no events to type its columns "
                                         "from: run it first with a file of events, or declare the stream in "
                                         "schemas/Dirty.yaml")


def test_a_file_of_another_format_than_the_run_reads_says_so(tmp_path: Path, spark: SparkSession) -> None:
    """A CSV file read as JSON is one column of lines that do not parse: the run names the format to pass."""
    result = run_without_schema(tmp_path, HEADER + b"u1,1,5,x\n", "--format", "json")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "read as json, has no column 'unit' (it has _corrupt_record); no line of "
                                         "it reads as json: pass --format if the file is not json")


DECLARE = ", or declare the stream in schemas/Dirty.yaml"


@pytest.mark.parametrize(("content", "named"), [
    (b"unit,time,speed,label\nu1,2026-01-01T00:00:30Z,5,x\n", "time"),
    (b"unit,First Seen,speed,label\nu1,2026-01-01,5,x\n", "First_Seen"),
    # a row's decimal comma does not make the header of a file of ';' read as a logger's title
    (b"unit;Zeit;speed;label\nu1;2026-01-01T00:00:30Z;5,5;x\n", "Zeit"),
    (b"unit,Datum,speed,label\nu1,14.11.2026 10:00:00,5,x\n", "Datum"),
], ids=["one column of times", "a name made plain", "decimal commas", "times as text in a pattern"])
def test_a_file_with_one_column_of_times_and_none_named_ts_is_timed_by_it(content: bytes, named: str,
                                                                        tmp_path: Path, spark: SparkSession) -> None:
    """A file exported by another system seldom calls its time column `ts`: where it holds one column of times
    (TIMESTAMPs, dates, or text that reads as times), a run that names no time column reads its times there and
    says so, and the schema it keeps is the one a run naming that column keeps."""
    result = run_without_schema(tmp_path / "found", content, "--no-checks")
    assert result.exit_code == 0, result.output
    assert "1 rows in = 1 events + 0 quarantined" in result.output
    assert f"time {named} (the file's one column of times; --time-column names another)" in result.output
    named_run = run_without_schema(tmp_path / "named", content, "--no-checks", "--time-column", named)
    assert named_run.exit_code == 0, named_run.output
    assert "the file's one column of times" not in named_run.output
    found = load_schema("Dirty", lake_streams(tmp_path / "found" / "lake"))
    assert found is not None and found.time_column == named
    assert found == load_schema("Dirty", lake_streams(tmp_path / "named" / "lake"))


@pytest.mark.parametrize(("content", "options", "fix"), [
    (b"unit,start,end,speed,label\nu1,2026-01-01 00:00:30,2026-01-01 00:01:00,5,x\n", (),
     f"pass --time-column with the one of its columns of times (start, end) that times its events{DECLARE} (as an "
     "interval stream, `time: {start: start, end: end, unit: timestamp}`, where each row holds from its start until "
     "its end)"),
    (b"unit,seconds,speed,label\nu1,30,5,x\n", (), f"pass --time-column to name the file's time column{DECLARE}"),
    (b"unit,time,speed,label\nu1,2026-01-01T00:00:30Z,5,x\n", ("--time-column", "when"),
     f"pass --time-column time, its column of times{DECLARE}"),
], ids=["two columns of times", "times as numbers", "another column named"])
def test_a_file_whose_time_column_is_not_one_to_take_is_told_the_option_that_names_it(
        content: bytes, options: tuple[str, ...], fix: str, tmp_path: Path, spark: SparkSession) -> None:
    """Where a file holds several columns of times, or its times as numbers (which other numbers could be), or the
    run names a time column the file lacks, no column is taken for the time: the refusal gives the option that
    names it, and where the file has two columns of times, the interval stream each row may be."""
    result = run_without_schema(tmp_path, content, *options)
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"; {fix}")
    assert load_schema("Dirty", lake_streams(tmp_path / "lake")) is None


def test_a_file_with_two_columns_of_times_runs_as_the_interval_stream_its_refusal_describes(
        tmp_path: Path, spark: SparkSession) -> None:
    """The `time:` block the refusal gives, declared with the file's columns, is a schema the next run takes: each
    row holds from its start until its end."""
    content = b"unit,start,end,speed,label\nu1,2026-01-01 00:00:30,2026-01-01 00:01:00,5,x\n"
    refused = run_without_schema(tmp_path, content)
    time = re.search(r"`time: (\{[^`]*\})`", refused.output)
    assert refused.exit_code == 2 and time, refused.output
    kept = lake_streams(tmp_path / "lake")
    kept.mkdir(parents=True, exist_ok=True)
    (kept / "Dirty.yaml").write_text(f"stream: Dirty\nkeys: [unit]\ntime: {time.group(1)}\ncolumns: unit STRING, "
                                     "start TIMESTAMP, end TIMESTAMP, speed DOUBLE, label STRING\n")
    again = run_without_schema(tmp_path, content, "--no-checks")
    assert again.exit_code == 0, again.output
    assert "1 rows in = 1 events + 0 quarantined" in again.output


@pytest.mark.parametrize(("header", "guess"), [(b"units,ts,speed,label\n", " (is it units?)"),
                                              (b"vehicle,ts,speed,label\n", "")], ids=["a close name", "none close"])
def test_a_file_without_the_key_column_is_asked_for_the_column_of_the_closest_name(header: bytes, guess: str,
                                                                                   tmp_path: Path,
                                                                                   spark: SparkSession) -> None:
    result = run_without_schema(tmp_path, header + b"u1,1,5,x\n")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"has no column 'unit' (it has {header.decode().strip().replace(',', ', ')}"
                                         f"); name the key in PARTITION BY as the file does{guess}, or declare")


@pytest.mark.parametrize(("wrapped", "shown"), [
    ({"data": "$rows"}, "its field data holds a list of records, as a web API's answer wraps its items: pielake "
                        "reads one event a record, so write the list's records one a line (JSON Lines), as `jq -c "
                        "'.data[]' {path}` does, or as one JSON array"),
    ({"count": 2, "result": {"items": "$rows"}}, "its field result_items holds a list of records"),
], ids=["a field at the top", "a nested field"])
def test_a_json_file_that_wraps_its_events_in_one_record_names_the_list_to_write_out(
        wrapped: dict, shown: str, tmp_path: Path, spark: SparkSession) -> None:
    """A web API answers with one record around its items (`{"data": [{…}, …]}`): typed from the file, the stream
    would be that record, and a declared stream finds none of its columns, so the run names the field that holds
    the events and how to write them out."""
    rows = [{"unit": "u1", "ts": 1, "speed": 5.0, "label": "x"}, {"unit": "u1", "ts": 2, "speed": 6.0, "label": "y"}]
    text = json.dumps(wrapped, indent=2).replace('"$rows"', json.dumps(rows))
    result = run_without_schema(tmp_path, text.encode(), file="answer.json")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, shown.format(path=tmp_path / "answer.json"))
    new_lake(tmp_path / "declared", spark)  # a stream with a schema is told the same
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "answer.json"),
                                       "--lake", str(tmp_path / "declared")])
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, shown.format(path="FILE"))


def test_a_line_that_does_not_read_as_a_row_is_quarantined_whole_and_types_no_column(
        tmp_path: Path, spark: SparkSession) -> None:
    """Spark reads such a line into a column of its own (`_corrupt_record`): a stream typed from the file does not
    get that column, and the line is quarantined as it is, the file's other rows ingested."""
    lines = b'{"unit": "u1", "ts": 1, "speed": 5, "label": "x"}\nnot json at all\n{"unit": "u1", "ts": 2, ' \
            b'"speed": 6, "label": "x"}\n'
    result = run_without_schema(tmp_path, lines, "--no-checks", file="events.jsonl")
    assert result.exit_code == 0, result.output
    assert "3 rows in = 2 events + 1 quarantined" in result.output
    assert [c for c, _ in load_schema("Dirty", lake_streams(tmp_path / "lake")).columns] == ["label", "speed", "ts",
                                                                                             "unit"]
    [row] = Lake(spark, tmp_path / "lake").read("quarantine_dirty").collect()
    assert (row["reason"], row["raw"]) == (MALFORMED_REASON, "not json at all")


@pytest.mark.parametrize(("file", "content"), [
    ("events.csv", HEADER + b"u1,1767225600.1,5,x\nu1,1767225601.000001,5,x\nu1,1767225602,5,x\n"),
    ("events.jsonl", b'{"unit": "u1", "ts": 1767225600.1, "speed": 5, "label": "x"}\n'
                     b'{"unit": "u1", "ts": 1767225601.000001, "speed": 5, "label": "x"}\n'
                     b'{"unit": "u1", "ts": 1767225602, "speed": 5, "label": "x"}\n'),
], ids=["csv", "json"])
def test_a_file_of_seconds_with_a_fraction_types_its_times_as_unix_time_to_the_microsecond(
        file: str, content: bytes, tmp_path: Path, spark: SparkSession) -> None:
    """As Python's `time.time()` and many loggers write a time: no whole number of seconds holds it, so the stream
    is one of TIMESTAMPs its files write as Unix time (`format: unix`), each read exactly to its microsecond (a
    DOUBLE's own cast would give .099999 for .1). Its next files are read so too; one that is not a number is
    quarantined."""
    result = run_without_schema(tmp_path, content, "--no-checks", file=file)
    assert result.exit_code == 0, result.output
    kept = load_schema("Dirty", lake_streams(tmp_path / "lake"))
    assert (kept.time_unit, kept.time_format, kept.type_of("ts")) == ("timestamp", "unix", "TIMESTAMP")
    (tmp_path / "next.csv").write_bytes(HEADER + b"u1,1767225603.5,5,x\nu1,soon,5,x\n")
    more = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "next.csv"),
                                     "--lake", str(tmp_path / "lake"), "--incremental", "--no-checks"])
    assert "2 rows in = 1 events + 1 quarantined" in more.output, more.output
    lake = Lake(spark, tmp_path / "lake")
    times = [r.ts for r in lake.read("events_dirty").orderBy("ts").collect()]
    assert times == [datetime(2026, 1, 1, 0, 0, 0, 100000), datetime(2026, 1, 1, 0, 0, 1, 1),
                     datetime(2026, 1, 1, 0, 0, 2), datetime(2026, 1, 1, 0, 0, 3, 500000)]
    assert reasons(lake, lake.read("quarantine_dirty").first()["run_id"]) == ("cast_failed: ts=soon",)


def test_milliseconds_with_a_fraction_are_refused_naming_the_unit_they_are_in(tmp_path: Path,
                                                                            spark: SparkSession) -> None:
    """Seconds with a fraction are Unix time; read so, milliseconds would lie past the year 5000. Given in
    milliseconds, a fraction still has no whole number of the unit to be, and the refusal names the fixes."""
    content = HEADER + b"u1,1767225600123.5,5,x\n"
    result = run_without_schema(tmp_path, content)
    assert result.exit_code == 2 and "past the year 5000: pass --time-unit ms" in result.output, result.output
    result = run_without_schema(tmp_path, content, "--time-unit", "ms")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "time column 'ts' is DOUBLE; a time is a whole number of the stream's unit (ms); for seconds since 1970 " \
           "with a fraction, declare it a TIMESTAMP of unit timestamp written as unix" in result.output
    assert "Declare its types in schemas/Dirty.yaml" in result.output
    assert load_schema("Dirty", lake_streams(tmp_path / "lake")) is None


def test_a_file_whose_times_are_text_shows_one_and_the_forms_a_time_is_typed_from(tmp_path: Path,
                                                                                  spark: SparkSession) -> None:
    """A spreadsheet's `01/02/2026 13:45` is text, and no declared TIMESTAMP would read it either: the refusal shows
    a value (one that is no time, among ISO-8601 times), and the forms a file's times are typed from (a column empty
    in every row says so). Declared with the pattern its files write a time in, the stream reads them, and a time
    written otherwise is quarantined."""
    content = HEADER + b"u1,01/02/2026 13:45,5,x\nu1,01/02/2026 13:46,5,x\nu1,2026-02-01T13:47:00,5,x\n"
    result = run_without_schema(tmp_path, content)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert ("time column 'ts' is STRING; a time is a whole number of the stream's unit (s), or a TIMESTAMP; it holds "
            "text such as '01/02/2026 13:45': a column of times reads as TIMESTAMPs where every value is an ISO-8601 "
            "time (2026-01-02T13:45:00Z, or with its zone)") in result.output
    assert "declare the stream with their pattern (time: {column: ts, unit: timestamp, format: dd/MM/yyyy HH:mm})" \
        in result.output
    assert load_schema("Dirty", lake_streams(tmp_path / "lake")) is None
    result = run_without_schema(tmp_path, HEADER + b"u1,2026-02-01T13:47:00Z,5,x\nu1,yesterday,5,x\n", file="odd.csv")
    assert result.exit_code == 2, result.output  # the value shown is the one that is no time
    assert "it holds text such as 'yesterday': a column of times reads as TIMESTAMPs where" in result.output
    result = run_without_schema(tmp_path, HEADER + b"u1,,5,x\nu1,,6,x\n", file="untimed.csv")
    assert result.exit_code == 2, result.output
    assert ("time column 'ts' is STRING; a time is a whole number of the stream's unit (s), or a TIMESTAMP; it is "
            "empty in every row, so no event has a time: name the file's column of times with --time-column") \
        in result.output
    timed = ((name, "TIMESTAMP" if name == "ts" else kind) for name, kind in SCHEMA.columns)
    lake = new_lake(tmp_path / "lake", spark, StreamSchema("Dirty", ("unit",), "ts", "timestamp", tuple(timed),
                                                           time_format="dd/MM/yyyy HH:mm"))
    result = run_without_schema(tmp_path, content, "--no-checks")
    assert result.exit_code == 0, result.output
    assert "3 rows in = 2 events + 1 quarantined" in result.output
    assert [r.ts for r in lake.read("events_dirty").orderBy("ts").collect()] == [
        datetime(2026, 2, 1, 13, 45), datetime(2026, 2, 1, 13, 46)]
    assert reasons(lake, lake.read("quarantine_dirty").first()["run_id"]) == ("cast_failed: ts=2026-02-01T13:47:00",)
    save_schema(replace(load_schema("Dirty", lake_streams(lake.root)), time_format="dd/MM/yyyy HH:mm.qqq"),
                lake_streams(lake.root))
    result = run_without_schema(tmp_path, content, "--no-checks", "--incremental")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "stream Dirty's time.format 'dd/MM/yyyy HH:mm.qqq' is not how Spark reads "
                                         "times: [INVALID_DATETIME_PATTERN")


def test_times_a_logger_writes_in_its_local_time_are_read_as_the_instants_of_the_stream_s_zone(
        tmp_path: Path, spark: SparkSession) -> None:
    """A stream whose files write Berlin's wall clock (`time.zone: Europe/Berlin`): a time without an offset is
    that clock's, in summer and winter; one that says its zone (`Z`, `+02:00`, `Europe/Paris`) or a Parquet
    TIMESTAMP keeps its instant, and a Parquet time without a zone is the clock's too. The hour that Berlin's clock
    repeats in October reads as its first pass, so two readings in it of other values are conflicting duplicates,
    quarantined."""
    timed = tuple((name, "TIMESTAMP" if name == "ts" else kind) for name, kind in SCHEMA.columns)
    lake = new_lake(tmp_path / "lake", spark, StreamSchema("Dirty", ("unit",), "ts", "timestamp", timed,
                                                           time_zone="Europe/Berlin"))
    content = HEADER + (b"u1,2026-07-01 12:00:00,5,x\nu1,2026-07-01T12:30:00Z,5,x\nu1,2026-07-01T13:00:00+02:00,5,x\n"
                        b"u1,2026-07-01 13:30:00 Europe/Paris,5,x\nu1,2026-01-15 12:00,5,x\n"
                        b"u1,2026-10-25 02:30:00,5,x\nu1,2026-10-25 02:30:00,6,x\n")
    (tmp_path / "local.csv").write_bytes(content)
    assert "7 rows in = 5 events + 2 quarantined" in run_dirty(tmp_path, lake, tmp_path / "local.csv")
    assert reasons(lake, lake.read("quarantine_dirty").first()["run_id"]) == (
        "conflicting_duplicate", "conflicting_duplicate")
    clock = pa.array([datetime(2026, 8, 1, 12)], pa.timestamp("us"))  # no zone: pandas' naive datetime
    instant = pa.array([datetime(2026, 8, 1, 12, 30)], pa.timestamp("us", tz="UTC"))
    for name, times in (("clock.parquet", clock), ("instant.parquet", instant)):
        pq.write_table(pa.table({"unit": ["u1"], "ts": times, "speed": [5.0], "label": ["x"]}), tmp_path / name)
        assert "1 rows in = 1 events" in run_dirty(tmp_path, lake, tmp_path / name, "--incremental")
    assert [r.ts for r in lake.read("events_dirty").orderBy("ts").collect()] == [
        datetime(2026, 1, 15, 11), datetime(2026, 7, 1, 10), datetime(2026, 7, 1, 11), datetime(2026, 7, 1, 11, 30),
        datetime(2026, 7, 1, 12, 30), datetime(2026, 8, 1, 10), datetime(2026, 8, 1, 12, 30)]


def test_a_time_of_day_alone_names_no_instant_in_a_declared_stream_nor_in_one_typed_from_its_file(
        tmp_path: Path, spark: SparkSession) -> None:
    """Spark reads `08:05:00` as that time of the day it reads it on, so one file would hold other instants on
    another day. A declared stream's row of such a time is quarantined; a file whose only times are times of day
    beside their dates (as loggers write `Datum;Uhrzeit`) makes its time from the two, and is refused with the fix
    where --time-column names the time of day; a file with a time column keeps its column of times of day as
    text."""
    timed = tuple((name, "TIMESTAMP" if name == "ts" else kind) for name, kind in SCHEMA.columns)
    lake = new_lake(tmp_path / "lake", spark, StreamSchema("Dirty", ("unit",), "ts", "timestamp", timed))
    (tmp_path / "day.csv").write_bytes(HEADER + b"u1,2026-07-01T12:00:00Z,5,x\nu1,08:05:00,5,x\nu1,T09:10,5,x\n")
    assert "3 rows in = 1 events + 2 quarantined" in run_dirty(tmp_path, lake, tmp_path / "day.csv")
    assert reasons(lake, lake.read("quarantine_dirty").first()["run_id"]) == (
        "cast_failed: ts=08:05:00", "cast_failed: ts=T09:10")
    apart = b"unit,date,time,speed,label\nu1,2026-01-10,08:05:00,5,x\nu1,2026-01-10,08:10:00,6,x\n"
    (tmp_path / "apart").mkdir()
    (tmp_path / "beside").mkdir()
    result = run_without_schema(tmp_path / "apart", apart, "--time-column", "time")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "its column(s) time hold a time of day alone, which names no instant: write "
                                         "each row's date and time of day in one column (2026-01-10T08:05:00) and "
                                         "pass --time-column with its name; beside one column of dates, a time of day "
                                         "makes the time with it where --time-column names no column of the file")
    (tmp_path / "clock").mkdir()
    result = run_without_schema(tmp_path / "clock", b"unit,day,time,speed,label\nu1,Mon,08:05:00,5,x\n")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "has no column 'ts' (it has unit, day, time, speed, label); its column(s) "
                                         "time hold a time of day alone, which names no instant: write each row's date")
    result = run_without_schema(tmp_path / "apart", apart, "--no-checks")
    assert result.exit_code == 0, result.output
    assert [r.ts for r in Lake(spark, tmp_path / "apart" / "lake").read("events_dirty").orderBy("ts").collect()] == [
        datetime(2026, 1, 10, 8, 5), datetime(2026, 1, 10, 8, 10)]
    beside = b"unit,ts,shift_start,speed,label\nu1,2026-01-10T08:05:00Z,06:00,5,x\n"
    result = run_without_schema(tmp_path / "beside", beside, "--no-checks")
    assert result.exit_code == 0, result.output
    kept = load_schema("Dirty", lake_streams(tmp_path / "beside" / "lake"))
    assert (kept.type_of("ts"), kept.type_of("shift_start")) == ("TIMESTAMP", "STRING")


def test_a_key_whose_numbers_would_merge_two_keys_is_typed_as_text_where_its_file_types_the_stream(
        tmp_path: Path, spark: SparkSession) -> None:
    """Order numbers, postal codes and vehicle ids are written with leading zeros (`007`), sensor and version
    numbers with a fraction (`3.10`): read as numbers, `007` and `7`, `3.1` and `3.10` would be one key, so such
    a key is text. A key of whole numbers written without them stays a number, and so does a reading written with
    one (`05`)."""
    padded = HEADER + b"007,1,05,x\n7,1,6,x\n007,2,7,x\n"
    result = run_without_schema(tmp_path / "padded", padded, "--no-checks")
    assert result.exit_code == 0, result.output
    kept = load_schema("Dirty", lake_streams(tmp_path / "padded" / "lake"))
    assert (kept.type_of("unit"), kept.type_of("speed")) == ("STRING", "INT")
    events = Lake(spark, tmp_path / "padded" / "lake").read("events_dirty")
    assert sorted((r.unit, r.ts, r.speed) for r in events.collect()) == [("007", 1, 5), ("007", 2, 7), ("7", 1, 6)]
    result = run_without_schema(tmp_path / "plain", HEADER + b"7,1,5,x\n12,1,6,x\n", "--no-checks")
    assert result.exit_code == 0, result.output
    assert load_schema("Dirty", lake_streams(tmp_path / "plain" / "lake")).type_of("unit") == "INT"
    result = run_without_schema(tmp_path / "versions", HEADER + b"3.1,1,5,x\n3.10,1,6,x\n", "--no-checks")
    assert result.exit_code == 0, result.output
    assert "2 rows in = 2 events" in result.output
    assert load_schema("Dirty", lake_streams(tmp_path / "versions" / "lake")).type_of("unit") == "STRING"


def test_a_stream_typed_from_its_file_reads_times_written_as_a_date_and_a_time_of_day_in_the_pattern_they_take(
        tmp_path: Path, spark: SparkSession) -> None:
    """A German logger writes each reading's date and time of day in columns of their own (`Datum;Uhrzeit`,
    `05.12.2026;08:05:00`, decimal commas): typed from the file, the stream's time is made from them in the one
    pattern that reads every row, which the run says and the kept schema holds; a row without its time of day is
    quarantined, not read at midnight. An AIS file writes `14/11/2026 10:00:00` in one column. Where the rows read
    in two patterns (no day past the 12th), the run is refused with the schema of one in a line a schema file takes
    as it is, and the other, and that line declared runs."""
    content = (b"unit;Datum;Uhrzeit;speed;label\nu1;05.12.2026;08:05:00;12,5;x\nu1;13.12.2026;23:59;3,0;x\n"
               b"u1;14.12.2026;;4,0;x\n")
    result = run_without_schema(tmp_path, content, "--time-zone", "Europe/Berlin", "--no-checks")
    assert result.exit_code == 0 and "3 rows in = 2 events + 1 quarantined" in result.output, result.output
    assert "schema Dirty: typed from its file, time ts from Datum and Uhrzeit written d.M.yyyy[ H:mm[:ss][.SSS]], " \
           "kept in " in result.output
    kept = load_schema("Dirty", lake_streams(tmp_path / "lake"))
    assert (kept.time_from, kept.time_zone, kept.decimal_mark) == (("Datum", "Uhrzeit"), "Europe/Berlin", ",")
    lake = Lake(spark, tmp_path / "lake")
    assert [(r.ts, r.speed) for r in lake.read("events_dirty").orderBy("ts").collect()] == [
        (datetime(2026, 12, 5, 7, 5), 12.5), (datetime(2026, 12, 13, 22, 59), 3.0)]
    assert reasons(lake, lake.read("quarantine_dirty").first()["run_id"]) == ("null_time",)
    (tmp_path / "ais").mkdir()
    ais = b"unit,Timestamp,speed,label\nu1,14/11/2026 10:00:00,5,x\nu1,14/11/2026 10:00:30,12,x\n"
    result = run_without_schema(tmp_path / "ais", ais, "--time-column", "Timestamp", "--no-checks")
    assert result.exit_code == 0 and "2 rows in = 2 events" in result.output, result.output
    assert [r.Timestamp for r in Lake(spark, tmp_path / "ais" / "lake").read("events_dirty").orderBy("Timestamp")
            .collect()] == [datetime(2026, 11, 14, 10), datetime(2026, 11, 14, 10, 0, 30)]
    (tmp_path / "slashes").mkdir()
    slashes = b"unit,day,at,speed,label\nu1,01/02/2026,08:05,5,x\n"
    refused = run_without_schema(tmp_path / "slashes", slashes)
    assert refused.exit_code == 2, refused.output
    assert_one_error_line(refused.output, "writes its times (day and at) so that they read both as d/M/yyyy[ "
                                          "H:mm[:ss][.SSS]] and as M/d/yyyy[ H:mm[:ss][.SSS]]: no day past the 12th "
                                          "tells day and month apart")
    schema = re.search(r"Declare the stream in schemas/Dirty.yaml as (\{.*\}), or with format: M/d/yyyy\[ "
                       r"H:mm\[:ss\]\[.SSS\]\] if its dates are written month first", refused.output)
    assert schema, refused.output
    kept_dir = lake_streams(tmp_path / "slashes" / "lake")
    kept_dir.mkdir(parents=True, exist_ok=True)
    (kept_dir / "Dirty.yaml").write_text(schema.group(1))
    result = run_without_schema(tmp_path / "slashes", slashes, "--no-checks")
    assert result.exit_code == 0 and "1 rows in = 1 events" in result.output, result.output
    assert Lake(spark, tmp_path / "slashes" / "lake").read("events_dirty").first().ts == datetime(2026, 2, 1, 8, 5)
    (tmp_path / "later").mkdir()  # the first 1,000 rows read both ways, a later one day first alone
    rows = [f"u1,01/02/2026 {i // 60:02d}:{i % 60:02d},5,x" for i in range(1000)] + ["u1,13/02/2026 08:00,5,x"]
    later = ("unit,Timestamp,speed,label\n" + "\n".join(rows) + "\n").encode()
    result = run_without_schema(tmp_path / "later", later, "--time-column", "Timestamp", "--no-checks")
    assert result.exit_code == 0 and "1001 rows in = 1001 events" in result.output, result.output
    assert load_schema("Dirty", lake_streams(tmp_path / "later" / "lake")).time_format == "d/M/yyyy[ H:mm[:ss][.SSS]]"


def test_a_stream_typed_from_its_file_reads_its_times_in_the_pattern_a_run_gives(tmp_path: Path,
                                                                                  spark: SparkSession) -> None:
    """`--time-format` gives the pattern an unknown stream's file writes its times in, which pielake does not find
    itself: month-first dates that also read day first (no day past the 12th), which it refuses, naming the
    option, or a pattern of none of its candidates (`20260102 080500`). Typed so, the stream keeps the pattern in
    its schema, and a run giving another is refused in one line. A row whose time the pattern does not read is
    quarantined; a pattern that reads none of the file's first rows is refused with the first of their times, and
    a pattern Spark does not take with what Spark says."""
    for folder in ("slashes", "packed", "unread", "wrong"):
        (tmp_path / folder).mkdir()
    slashes = b"unit,day,at,speed,label\nu1,01/02/2026,08:05,5,x\n"
    refused = run_without_schema(tmp_path / "slashes", slashes)
    assert refused.exit_code == 2, refused.output
    assert "or give the run the pattern: --time-format 'd/M/yyyy[ H:mm[:ss][.SSS]]' (a registration's time_format)" \
        in refused.output, refused.output
    month_first = "M/d/yyyy[ H:mm[:ss][.SSS]]"
    result = run_without_schema(tmp_path / "slashes", slashes, "--time-format", month_first, "--no-checks")
    assert result.exit_code == 0 and "1 rows in = 1 events" in result.output, result.output
    assert f"time ts from day and at written {month_first}, kept in" in result.output, result.output
    assert Lake(spark, tmp_path / "slashes" / "lake").read("events_dirty").first().ts == datetime(2026, 1, 2, 8, 5)
    packed = HEADER + b"u1,20260102 080500,5,x\nu1,20260102 080510,12,x\n"
    result = run_without_schema(tmp_path / "packed", packed, "--time-format", "yyyyMMdd HHmmss", "--no-checks")
    assert result.exit_code == 0 and "2 rows in = 2 events" in result.output, result.output
    assert [r.ts for r in Lake(spark, tmp_path / "packed" / "lake").read("events_dirty").orderBy("ts").collect()] \
        == [datetime(2026, 1, 2, 8, 5), datetime(2026, 1, 2, 8, 5, 10)]
    other = run_without_schema(tmp_path / "packed", packed, "--time-format", "yyyyMMddHHmmss", "--no-checks")
    assert other.exit_code == 2, other.output
    assert_one_error_line(other.output, "reads its times written yyyyMMdd HHmmss, not --time-format 'yyyyMMddHHmmss'")
    unread = run_without_schema(tmp_path / "unread", packed, "--time-format", "yyyy-MM-dd HH:mm:ss")
    assert unread.exit_code == 2, unread.output
    assert_one_error_line(unread.output, "--time-format 'yyyy-MM-dd HH:mm:ss' reads none of the times its file")
    assert "writes in ts in its first 1,000 rows: the first is '20260102 080500'" in unread.output, unread.output
    mixed = packed + b"u1,2026-01-02 08:05:20,5,x\n"
    result = run_without_schema(tmp_path / "unread", mixed, "--time-format", "yyyyMMdd HHmmss", "--no-checks")
    assert result.exit_code == 0 and "3 rows in = 2 events + 1 quarantined" in result.output, result.output
    wrong = run_without_schema(tmp_path / "wrong", packed, "--time-format", "yyyyMMdd HHmmss bbb")
    assert wrong.exit_code == 2, wrong.output
    assert_one_error_line(wrong.output, "stream Dirty's --time-format 'yyyyMMdd HHmmss bbb' is not how Spark reads "
                                        "times")


def test_a_stream_typed_from_its_file_reads_its_times_in_the_zone_a_run_names_and_keeps_it(
        tmp_path: Path, spark: SparkSession) -> None:
    """`--time-zone Europe/Berlin` types an unknown stream whose file writes Berlin's wall clock: its times are that
    clock's instants, in summer and winter, its kept schema says the zone, and a later run naming it again (as a
    registration names it in every run) reads by it. A run naming another zone, or another time column, is refused
    in one line naming the schema it contradicts, as is a zone given to times written as numbers, which are
    instants of no zone."""
    content = HEADER + b"u1,2026-07-01 12:00:00,5,x\nu1,2026-01-15 12:00:00,6,x\n"
    result = run_without_schema(tmp_path, content, "--time-zone", "Europe/Berlin", "--no-checks")
    assert result.exit_code == 0 and "2 rows in = 2 events" in result.output, result.output
    kept = lake_streams(tmp_path / "lake") / "Dirty.yaml"
    assert load_schema("Dirty", kept.parent).time_zone == "Europe/Berlin"
    later = HEADER + b"u1,2026-07-02 12:00:00,7,x\n"
    result = run_without_schema(tmp_path, later, "--time-zone", "Europe/Berlin", "--incremental", "--no-checks",
                                file="later.csv")
    assert result.exit_code == 0 and "1 rows in = 1 events" in result.output, result.output
    assert [r.ts for r in Lake(spark, tmp_path / "lake").read("events_dirty").orderBy("ts").collect()] == [
        datetime(2026, 1, 15, 11), datetime(2026, 7, 1, 10), datetime(2026, 7, 2, 10)]
    result = run_without_schema(tmp_path, later, "--time-zone", "+02:00", "--incremental", file="later.csv")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"stream Dirty's schema ({kept}) reads its times as the wall clock of "
                                         "Europe/Berlin, not --time-zone '+02:00'")
    result = run_without_schema(tmp_path, later, "--time-column", "when", "--incremental", file="later.csv")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"stream Dirty's schema ({kept}) reads its times from column ts, not "
                                         "--time-column 'when'")
    (tmp_path / "numbers").mkdir()
    result = run_without_schema(tmp_path / "numbers", HEADER + b"u1,1,5,x\n", "--time-zone", "Europe/Berlin")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "holds its times (ts) as whole numbers of unit s, instants of no zone: "
                                         "--time-zone 'Europe/Berlin' is the zone of times written as a wall clock")
    assert load_schema("Dirty", lake_streams(tmp_path / "numbers" / "lake")) is None


def test_a_file_whose_columns_no_stream_can_hold_is_refused_before_its_schema_is_kept(
        tmp_path: Path, spark: SparkSession) -> None:
    """A schema inferred from such a file would be kept in the lake and refused by every later run that loads it:
    the first run refuses the file instead, in one line naming every such column, and keeps nothing."""
    (tmp_path / "q.tpq").write_text(QUERY)
    pq.write_table(pa.table({"unit": ["u1"], "ts": [1], "speed": [5.0], "label": ["x"],
                             "blob": pa.array([b"\x00\x01"], pa.binary()), "raw": pa.array([b"\x02"], pa.binary())}),
                   tmp_path / "events.parquet")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "events.parquet"),
                                       "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"stream Dirty has no schema, and its file {tmp_path / 'events.parquet'} "
                                         "cannot give it one: column 'blob': type binary is not a flat primitive "
                                         "type")
    assert "or DECIMAL(p,s)); column 'raw': type binary is not a flat primitive type" in result.output
    assert result.output.rstrip().endswith("write those columns as text, or drop them from the file")
    assert load_schema("Dirty", lake_streams(tmp_path / "lake")) is None


def test_nested_records_are_read_as_a_column_a_field_and_lists_as_their_json(tmp_path: Path,
                                                                           spark: SparkSession) -> None:
    """An event as a message queue or an IoT hub writes it, `{"meta": {"unit": …, "ts": …}, "reading": {…},
    "tags": […]}`: each field of a record is a column named by its path (`meta_unit`), a list its JSON text, into a
    stream typed from the file and into one declared with those names; a field whose path names a column the record
    has already is refused, naming both, and a record naming a key twice (in any case), or in another case than
    an earlier record, is refused naming its line, where Spark's own refusal names neither the line nor the
    record."""
    (tmp_path / "q.tpq").write_text("FROM Feed F PARTITION BY F.meta_unit DEFINE Fast AS F.reading_speed > 10, "
                                    "Tagged AS F.tags = '[\"x\"]' PATTERN Fast overlaps Tagged WITHIN 1 h "
                                    "RETURN max(Fast.reading_speed) AS top")
    tags = [[], [], ["x"], ["x"], ["x", "y"]]
    lines = [{"meta": {"unit": "u1", "ts": t}, "reading": {"speed": speed}, "tags": tag}
             for t, speed, tag in zip([1, 2, 3, 4, 5], [5, 12, 12, 3, 3], tags, strict=True)]
    (tmp_path / "feed.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    for lake, declared in (("inferred", ""), ("declared", "meta_unit STRING, meta_ts BIGINT, reading_speed DOUBLE, "
                                                           "tags STRING")):
        if declared:
            new_lake(tmp_path / lake, spark, StreamSchema("Feed", ("meta_unit",), "meta_ts", "s", parse_ddl(declared)))
        result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "feed.jsonl"),
                                           "--lake", str(tmp_path / lake), "--time-column", "meta_ts"])
        assert result.exit_code == 0, result.output
        assert "5 rows in = 5 events + 0 quarantined" in result.output and "complete: 1" in result.output
        events = Lake(spark, tmp_path / lake).read("events_feed").orderBy("meta_ts")
        assert [r.tags for r in events.collect()] == ["[]", "[]", '["x"]', '["x"]', '["x","y"]']
    (tmp_path / "twice.jsonl").write_text('{"unit": "u1", "ts": 1, "speed": {"km_h": 5}, "speed_km_h": 5, '
                                          '"label": "x"}\n')
    result = run_without_schema(tmp_path, (tmp_path / "twice.jsonl").read_bytes(), file="twice.jsonl")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "the columns 'speed.km_h' and 'speed_km_h' of")
    repeated = b'{"unit": "u1", "ts": 1, "speed": 5, "label": "x"}\n{"unit": "u1", "ts": 2, "speed": 5, "Speed": 9}\n'
    result = run_without_schema(tmp_path, repeated, file="repeated.jsonl")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"cannot read {tmp_path / 'repeated.jsonl'} as json: its record on line 2 "
                                         f"({repeated.splitlines()[1].decode()}) names the key 'Speed' twice (the "
                                         "second at col 37)")
    spelled = b'{"unit": "u1", "ts": 1, "speed": 5, "label": "x"}\n{"unit": "u1", "ts": 2, "Speed": 9, "label": "x"}\n'
    result = run_without_schema(tmp_path, spelled, file="spelled.jsonl")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, f"names the key 'Speed' (col 25), and line 1 of {tmp_path / 'spelled.jsonl'} "
                                         "names it 'speed': keys are told apart without their case")


def test_a_header_as_a_public_data_set_writes_it_is_read_under_plain_names(tmp_path: Path,
                                                                          spark: SparkSession) -> None:
    """`# Timestamp`, `Type of mobile`, `SOG (knots)`, `Température (°C)`: a query reads them as `Timestamp`,
    `Type_of_mobile`, `SOG_knots` and `Temperature_C`, and the stream keeps those names; two headers that become
    one name are refused, naming both."""
    (tmp_path / "q.tpq").write_text("FROM Ships S PARTITION BY S.MMSI DEFINE Fast AS S.SOG_knots > 10, "
                                    "A AS S.Type_of_mobile = 'Class A' AND S.Temperature_C < 30 "
                                    "PATTERN Fast during A WITHIN 1 h")
    (tmp_path / "ais.csv").write_text("# Timestamp,Type of mobile,MMSI,SOG (knots),Température (°C)\n"
                                      "1,Class A,7,1,20\n2,Class A,7,12,21\n3,Class A,7,3,21\n4,Class B,7,3,22\n",
                                      encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "ais.csv"),
                                       "--lake", str(tmp_path / "lake"), "--time-column", "Timestamp"])
    assert result.exit_code == 0, result.output
    assert "complete: 1" in result.output
    assert [n for n, _ in load_schema("Ships", lake_streams(tmp_path / "lake")).columns] == [
        "Timestamp", "Type_of_mobile", "MMSI", "SOG_knots", "Temperature_C"]
    (tmp_path / "twice.csv").write_bytes(b"unit,ts,speed km/h,Speed_km_h,label\nu1,1,5,5,x\n")
    result = run_without_schema(tmp_path, (tmp_path / "twice.csv").read_bytes(), file="twice.csv")
    assert result.exit_code == 2, result.output
    assert_one_error_line(result.output, "the columns 'speed km/h' and 'Speed_km_h' of")
