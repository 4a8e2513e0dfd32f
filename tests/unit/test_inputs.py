"""Which files a run's input path names, which format they are in, and which of them share a header line or a
schema."""

from __future__ import annotations

import bz2
import gzip
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pielake.errors import PielakeError
from pielake.lake import inputs
from pielake.lake.inputs import CsvHead, FileGroup
from pielake.pipeline.job import RunRequest
from pielake.query.analyzer import analyze
from pielake.query.parser import parse
from pielake.streams import events_files, format_of, guess_format

SPANNING = {
    b'"unit","ts"\nu1,1\n': False,  # quotes in the header alone: read by lines
    b'unit,label\nu1,"say ""hi"", twice"\n': False,  # doubled quotes and a separator inside quotes
    b'unit,label\nu1,"two\nlines"\n': True,
    b'unit,label\nu1,"a ""quote"" and\na line break"\n': True,
    b'unit,label\nu1,""\n': False,
    # A quote opened before the first 4 MiB the check reads at a time, its line break after them (and none after
    # the closing quote, which read as an opening one would find).
    b"unit,label\n" + b"u1,x\n" * 838_848 + b'u1,"' + b"y" * 100 + b'\nz"': True,
}


@pytest.mark.parametrize("content", SPANNING, ids=range(len(SPANNING)))
def test_a_csv_record_spans_lines_where_a_line_break_is_inside_quotes(content: bytes, tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"unit\nu1\n")
    (tmp_path / "b.csv").write_bytes(content)
    assert inputs.spans_lines(str(tmp_path)) is SPANNING[content]
    assert inputs.spans_lines(str(tmp_path / "a.csv")) is False
    assert inputs.spans_lines("s3a://bucket/landing/*.csv") is False


def test_files_are_grouped_by_header_line_without_its_byte_order_mark_or_line_end(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"unit,ts\nu1,1\n")
    (tmp_path / "b.csv").write_bytes(b"ts,unit\n2,u1\n")
    (tmp_path / "c.csv").write_bytes(b"\xef\xbb\xbfunit,ts\r\nu1,3\r\n")
    (tmp_path / "d.csv").write_bytes(b"")
    (tmp_path / ".e.csv.part").write_bytes(b"x,y\n")
    (tmp_path / "_f.csv").write_bytes(b"x,y\n")
    (tmp_path / "g.csv.gz").write_bytes(gzip.compress(b"\n\nunit,ts\nu1,4\n"))  # Spark skips blank lines first
    named = [FileGroup((str(tmp_path / "a.csv"), str(tmp_path / "c.csv"), str(tmp_path / "g.csv.gz")),
                       CsvHead(b"unit,ts")),
             FileGroup((str(tmp_path / "b.csv"),), CsvHead(b"ts,unit"))]
    assert inputs.header_groups(str(tmp_path)) == [replace(group, base=str(tmp_path)) for group in named]
    assert inputs.header_groups(str(tmp_path / "*.csv*")) == named
    assert inputs.header_groups(str(tmp_path / "b.csv")) == [named[1]]


def test_a_stream_s_skipped_lines_are_read_around_the_header_and_group_files_with_it(tmp_path: Path) -> None:
    title = b'"TOA5","CR1000","CR1000","1234","CR1000.Std.32","CPU:met.CR1","4321","Table15min"'
    units, kinds, header = b'"TS","RN","Deg C","%"', b'"","","Avg","Smp"', b'"TIMESTAMP","RECORD","AirTC_Avg","RH"'
    (tmp_path / "a.dat").write_bytes(b"\r\n".join([title, header, units, kinds, b'"2024-07-01 00:00:00",0,15.1,76']))
    (tmp_path / "b.dat").write_bytes(b"\n".join([title.replace(b"1234", b"5678"), header, units, kinds]))
    (tmp_path / "c.dat").write_bytes(b"\xef\xbb\xbf" + b"\n".join([title, header, b"", kinds, b"x"]))
    a, b, c = (str(tmp_path / name) for name in ("a.dat", "b.dat", "c.dat"))
    assert inputs.csv_head(a, (1, 3, 4)) == CsvHead(header, (title, units, kinds))
    assert inputs.csv_head(c, (1, 3, 4)) == CsvHead(header, (title, kinds))  # a blank line holds no row to skip
    assert inputs.csv_head(a, (1,)) == CsvHead(header, (title,))
    assert inputs.csv_head(a) == CsvHead(title)
    assert inputs.header_groups(str(tmp_path / "*.dat"), (1, 3, 4)) == [
        FileGroup((a,), CsvHead(header, (title, units, kinds))),
        FileGroup((b,), CsvHead(header, (title.replace(b"1234", b"5678"), units, kinds))),
        FileGroup((c,), CsvHead(header, (title, kinds)))]


def test_parquet_files_are_grouped_by_their_columns_and_types_in_any_order(tmp_path: Path) -> None:
    pq.write_table(pa.table({"unit": ["u1"], "ts": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"ts": [2], "unit": ["u1"]}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"unit": ["u1"], "ts": ["3"]}), tmp_path / "c.parquet")
    (tmp_path / "d.parquet").write_bytes(b"")  # Spark reads no row of an empty file
    groups = inputs.schema_groups(str(tmp_path / "*.parquet"))
    assert [group.files for group in groups] == [
        (str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")), (str(tmp_path / "c.parquet"),)]
    assert groups[1].shared == {("unit", "string"), ("ts", "string")}


def test_a_file_that_is_not_parquet_is_refused_by_name_not_left_out(tmp_path: Path) -> None:
    pq.write_table(pa.table({"unit": ["u1"], "ts": [1]}), tmp_path / "a.parquet")
    whole = (tmp_path / "a.parquet").read_bytes()
    (tmp_path / "b.parquet").write_bytes(whole[:len(whole) // 2])  # cut short as it was copied
    with pytest.raises(PielakeError, match=re.escape(f"{tmp_path / 'b.parquet'} is not a Parquet file")):
        inputs.schema_groups(str(tmp_path))


def test_the_columns_of_times_in_nanoseconds_are_named_from_the_footers_of_local_files(tmp_path: Path) -> None:
    pq.write_table(pa.table({"ts": pa.array([1], pa.timestamp("ns")), "At": pa.array([1], pa.timestamp("us"))}),
                   tmp_path / "a.parquet")
    pq.write_table(pa.table({"At": pa.array([1], pa.timestamp("ns", tz="UTC")), "ts": pa.array([1], pa.int64())}),
                   tmp_path / "b.parquet")
    assert [inputs.nanosecond_columns(group.shared) for group in inputs.schema_groups(str(tmp_path))] == [
        {"ts"}, {"at"}]


JSON_LAYOUTS = {
    b'{"a": 1}\n{"a": 2}\n': False,  # JSON Lines
    b'\n{"a": \n{"a": 2}\n': False,  # JSON Lines whose first record is dirty: that line's fault alone
    b'[{"a": 1}, {"a": 2}]\n': False,  # an array on one line, which a reader of lines reads
    b'[\n  {\n    "a": 1\n  }\n]\n': True,  # json.dump(rows, indent=2)
    b'\xef\xbb\xbf[{"a": 1},\n {"a": 2}]\n': True,  # an array of a record a line, after a byte-order mark
    b'{\n  "a": 1\n}\n': True,  # one pretty-printed record
}


@pytest.mark.parametrize("content", JSON_LAYOUTS, ids=range(len(JSON_LAYOUTS)))
def test_a_json_file_is_one_value_over_many_lines_where_its_first_line_opens_one(content: bytes,
                                                                                 tmp_path: Path) -> None:
    (tmp_path / "lines.json").write_bytes(b'{"a": 0}\n')
    (tmp_path / "b.json").write_bytes(content)
    (tmp_path / "c.json.bz2").write_bytes(bz2.compress(content))
    layout = inputs.JSON_DOCUMENT if JSON_LAYOUTS[content] else inputs.JSON_LINES
    assert [group.shared for group in inputs.json_groups(str(tmp_path / "b.json"))] == [layout]
    base = str(tmp_path)
    assert inputs.json_groups(str(tmp_path)) == sorted(
        {FileGroup((str(tmp_path / "b.json"), str(tmp_path / "c.json.bz2")), layout, base),
         FileGroup((str(tmp_path / "lines.json"),), inputs.JSON_LINES, base)} if JSON_LAYOUTS[content] else
        {FileGroup((str(tmp_path / "b.json"), str(tmp_path / "c.json.bz2"), str(tmp_path / "lines.json")),
                   inputs.JSON_LINES, base)}, key=lambda group: group.files)
    assert inputs.json_groups("s3a://bucket/landing/") == []


def test_the_first_json_record_that_names_a_key_twice_or_two_ways_is_found_by_its_line_and_column(
        tmp_path: Path) -> None:
    """Spark refuses a file with such a record whole, naming neither; a key is told apart without its case, as
    Spark tells columns apart, in a nested record too, and one spelled in another case than an earlier record's,
    in any file read with it, is one column named two ways. A record cut short, or keys that differ, repeat
    nothing."""
    (tmp_path / "a.json").write_bytes(b'{"v": 1}\n{"v": 2, "w": {"x": 1, "y": 2}}\n{"cut": \n')
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b'{"v": 1}\n{"v": 2, "w": {"x": 1, "X": 2}}\n'))
    (tmp_path / "c.json").write_bytes(b'[\n {"v": 1,\n  "v": 2}\n]\n')
    assert inputs.first_repeated_key(str(tmp_path / "a.json")) is None
    assert inputs.first_repeated_key(str(tmp_path)) == inputs.RepeatedKey(
        str(tmp_path / "b.json.gz"), 2, 24, "X", '{"v": 2, "w": {"x": 1, "X": 2}}')
    assert inputs.first_repeated_key(str(tmp_path / "c.json")) == inputs.RepeatedKey(str(tmp_path / "c.json"), 0, 0,
                                                                                      "v")
    (tmp_path / "d").mkdir()  # two writers, one key: Spark reads `w.x` and `W.x` as one column
    (tmp_path / "d" / "1.json").write_bytes(b'{"v": 1, "w": {"x": 1}}\n')
    (tmp_path / "d" / "2.json").write_bytes(b'{"v": 2, "W": {"x": 2}}\n')
    assert inputs.first_repeated_key(str(tmp_path / "d")) == inputs.RepeatedKey(
        str(tmp_path / "d" / "2.json"), 1, 10, "W", '{"v": 2, "W": {"x": 2}}',
        f"line 1 of {tmp_path / 'd' / '1.json'} names it 'w'")


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress])
def test_a_compressed_file_cut_short_is_refused_by_name_before_spark_reads_it(compress: Callable[[bytes], bytes],
                                                                               tmp_path: Path) -> None:
    whole = compress(b"".join(b'{"unit": "u1", "ts": %d}\n' % i for i in range(10_000)))
    suffix = ".gz" if compress is gzip.compress else ".bz2"
    cut = tmp_path / f"events.jsonl{suffix}"
    cut.write_bytes(whole[:len(whole) // 2])
    refused = re.escape(f"{cut} does not decompress as its suffix {suffix} says")
    with pytest.raises(PielakeError, match=refused):  # its first line reads: JSON's layout reads on to its end
        inputs.json_groups(str(cut))
    csv = tmp_path / f"events.csv{suffix}"
    csv.write_bytes(compress(b"unit,ts\n" + b"u1,1\n" * 100_000)[:-100])
    with pytest.raises(PielakeError, match=re.escape(f"{csv} does not decompress")):
        inputs.spans_lines(str(csv))


@pytest.mark.parametrize(("name", "fix"), [
    ("events.zip", "land CSV and JSON files as they are, or compressed as .gz or .bz2"),
    ("events.csv.lz4", "land CSV and JSON files as they are, or compressed as .gz or .bz2"),
    ("events.json.zst", "land CSV and JSON files as they are, or compressed as .gz or .bz2"),
    ("readings.xlsx", "save its sheet as CSV")])
def test_an_archive_a_codec_not_looked_into_or_a_spreadsheet_is_refused_with_the_fix(name: str, fix: str,
                                                                                    tmp_path: Path) -> None:
    (tmp_path / name).write_bytes(b"PK\x03\x04")
    fix = f"{re.escape(name)}: a \\.[a-z0-9]+ file is not read; {re.escape(fix)}"
    for path in (tmp_path / name, tmp_path):
        with pytest.raises(PielakeError, match=fix):
            guess_format(str(path))
    with pytest.raises(PielakeError, match=fix):
        inputs.header_groups(str(tmp_path))


def test_a_url_or_a_path_naming_nothing_is_left_to_spark(tmp_path: Path) -> None:
    assert inputs.header_groups("s3a://bucket/landing/*.csv") == []
    assert inputs.header_groups(str(tmp_path / "none" / "*.csv")) == []


def test_a_folder_s_files_are_those_of_its_partition_folders_too(tmp_path: Path) -> None:
    """As Spark reads a folder: a partition's folder (`day=2026-01-01/`, nested `year=2026/month=1/`) holds the
    folder's data; a writer's unfinished work (`_temporary/`), checksums and markers, and a folder that is no
    partition (an `archive/` of files read before) do not."""
    for name in ("day=2026-01-01/a.parquet", "day=2026-01-02/b.parquet", "c.parquet", "archive/d.parquet",
                 "year=2026/month=1/e.parquet", "_temporary/0/f.parquet", ".staging/g.parquet",
                 "day=2026-01-02/.b.parquet.crc", "_SUCCESS", "_day=3/h.parquet"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    assert inputs.local_files(str(tmp_path)) == [str(tmp_path / name) for name in (
        "c.parquet", "day=2026-01-01/a.parquet", "day=2026-01-02/b.parquet", "year=2026/month=1/e.parquet")]
    assert inputs.local_files(str(tmp_path / "*.parquet")) == [str(tmp_path / "c.parquet")]


def test_a_folder_or_pattern_is_in_the_format_its_files_names_tell(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"unit,ts\n")
    (tmp_path / "B.CSV").write_bytes(b"unit,ts\n")
    (tmp_path / "_c.json").write_bytes(b"{}")  # not complete yet: not read
    assert guess_format(str(tmp_path)) == guess_format(str(tmp_path / "*")) == "csv"
    (tmp_path / "d.jsonl").write_bytes(b"{}")
    with pytest.raises(PielakeError, match=r"its files end in \.csv, \.jsonl\); land each format in a folder of its "
                                           r"own, or pass --format \(csv, parquet, json\)"):
        guess_format(str(tmp_path))
    (tmp_path / "d.jsonl").rename(tmp_path / "d.txt")
    with pytest.raises(PielakeError, match=r"its files end in \.csv, \.txt\); pass --format"):
        guess_format(str(tmp_path))


@pytest.mark.parametrize(("name", "fmt"), [("a.csv.gz", "csv"), ("a.JSONL.GZ", "json"), ("a.json.bz2", "json"),
                                           ("a.parquet", "parquet"), ("a.parquet.gz", None), ("a.gz", None)])
def test_a_compressed_file_is_in_the_format_its_name_tells_before_its_codec(name: str, fmt: str | None) -> None:
    assert format_of(name) == fmt


def test_a_folder_of_compressed_files_of_two_formats_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress(b"unit,ts\n"))
    assert guess_format(str(tmp_path)) == "csv"
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b"{}"))
    with pytest.raises(PielakeError, match=r"its files end in \.csv\.gz, \.json\.gz\); land each format"):
        guess_format(str(tmp_path))


def test_an_events_path_that_names_no_file_is_refused_before_spark_reads_it(tmp_path: Path) -> None:
    plan = analyze(parse("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s"))
    for path in (tmp_path / "none.csv", tmp_path / "none", tmp_path / "*.csv"):
        with pytest.raises(PielakeError, match=f"the events path '{re.escape(str(path))}' names no file"):
            RunRequest(events_path=str(path)).check_inputs(plan, tmp_path)
    (tmp_path / "day=2026-12-01").mkdir()  # a partition folder, read, but empty
    with pytest.raises(PielakeError, match=f"the events folder '{re.escape(str(tmp_path))}' holds no file; give"):
        RunRequest(events_path=str(tmp_path)).check_inputs(plan, tmp_path)
    RunRequest(events_path="s3a://bucket/landing/*.csv").check_inputs(plan, tmp_path)  # a URL is Spark's to list


def test_an_events_path_that_names_no_file_says_which_file_beside_it_has_a_close_name(tmp_path: Path) -> None:
    plan = analyze(parse("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s"))
    (tmp_path / "pumps.csv").write_text("ts\n")
    for given in ("Pumps.csv", "pumsp.csv"):
        with pytest.raises(PielakeError, match=re.escape(f"names no file ({tmp_path / 'pumps.csv'} is there); give")):
            RunRequest(events_path=str(tmp_path / given)).check_inputs(plan, tmp_path)
    for far in ("readings.csv", "P*.csv"):
        with pytest.raises(PielakeError, match=r"names no file; give"):
            RunRequest(events_path=str(tmp_path / far)).check_inputs(plan, tmp_path)


def test_a_folder_whose_files_lie_in_subfolders_is_told_the_pattern_that_names_them(tmp_path: Path) -> None:
    """A run reads a folder's own files and its partition folders' (`day=2026-12-01/`), not a `2026-12-01/`."""
    plan = analyze(parse("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s"))
    for day in ("2026-12-01", "2026-12-02"):
        (tmp_path / day).mkdir()
        (tmp_path / day / "cars.csv").write_text("a,b,ts\n1,0,1\n")
    pattern = tmp_path / "*" / "*"
    with pytest.raises(PielakeError, match=(
            rf"holds no file of its own, and of its subfolders \(2026-12-01/, 2026-12-02/\) a run reads only "
            rf"partition folders \(day=2026-12-01/\); name their files with a pattern: '{re.escape(str(pattern))}'$")):
        RunRequest(events_path=str(tmp_path)).check_inputs(plan, tmp_path)
    RunRequest(events_path=str(pattern)).check_inputs(plan, tmp_path)


def test_the_one_stream_of_a_query_may_be_named_with_its_file_as_several_streams_are(tmp_path: Path) -> None:
    """`--events S=FILE` over one stream is that file; another stream's name is refused naming the query's; a file
    whose own name holds `=` is that file."""
    plan = analyze(parse("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s"))
    assert events_files(plan, ["s=/landing/s/*.csv"]) == {"events_path": "/landing/s/*.csv"}
    assert events_files(plan, ["s3a://bucket/S=1/"]) == {"events_path": "s3a://bucket/S=1/"}
    with pytest.raises(PielakeError, match=r"^events given for T, which query query does not read; it reads S$"):
        events_files(plan, ["T=t.csv"])
    named = tmp_path / "S=1.csv"
    named.write_text("ts,a,b\n1,true,false\n", encoding="utf-8")
    assert events_files(plan, [str(named)]) == {"events_path": str(named)}


def test_several_events_files_of_one_stream_are_one_folder_or_pattern() -> None:
    plan = analyze(parse("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s"))
    with pytest.raises(PielakeError, match=r"reads one stream: give one events path, not 2; for several files, a "
                                           r"folder of them or a pattern of their names \(/landing/cars/\*.csv\)"):
        events_files(plan, ["a.csv", "b.csv"])
    plan = analyze(parse("FROM S, T DEFINE A AS S.a, B AS T.b PATTERN A meets B WITHIN 5 s"))
    assert events_files(plan, ["s=a.csv", "S=a.csv", "T=b.csv"]) == {"stream_events": [("S", "a.csv"), ("T", "b.csv")]}
    assert events_files(plan, ["S=a.csv", "S=", "T=", "T=b.csv"]) == {"stream_events": [("S", "a.csv"), ("T", "b.csv")]}
    with pytest.raises(PielakeError, match=r"^stream S is given two events paths, 'a.csv' and 'b.csv': give it one, a "
                                           r"folder of its files or a pattern of their names"):
        events_files(plan, ["S=a.csv", "S=b.csv", "T=c.csv"])
