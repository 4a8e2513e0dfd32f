"""A stream's columns, as a schema declares them and as one inferred from a file is checked
(`pielake.streams.schema_column`): plain names of flat primitive types, or a SchemaError that names the column;
its time unit, wherever it is given."""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.orchestration.airflow import register
from pielake.pipeline.ingest import streams_for
from pielake.pipeline.job import RunRequest
from pielake.query.analyzer import load_query
from pielake.streams import (
    TIMESTAMP_UNIT,
    SchemaError,
    StreamSchema,
    from_mapping,
    lake_streams,
    load_schema,
    parse_ddl,
    save_schema,
    schema_column,
    to_mapping,
    zone_info,
)

pytestmark = pytest.mark.unit


def test_a_declared_schema_spells_its_types_in_upper_case_without_spaces() -> None:
    assert parse_ddl("unit string, speed decimal(10, 2), at TIMESTAMP") == (
        ("unit", "STRING"), ("speed", "DECIMAL(10,2)"), ("at", "TIMESTAMP"))


@pytest.mark.parametrize(("name", "kind", "named"), [
    ("speed km/h", "double", "column name 'speed km/h' is not a plain identifier"),
    ("1st", "int", "column name '1st' is not a plain identifier"),
    ("tags", "struct<a:bigint>", "column 'tags': type struct<a:bigint> is not a flat primitive type"),
    ("path", "array<double>", "column 'path': type array<double> is not a flat primitive type"),
    ("blob", "binary", "column 'blob': type binary is not a flat primitive type"),
])
def test_a_column_no_stream_can_hold_is_named(name: str, kind: str, named: str) -> None:
    with pytest.raises(SchemaError, match=named.replace("(", r"\(")):
        schema_column(name, kind)


def test_a_declared_column_with_a_name_that_is_not_plain_is_named() -> None:
    with pytest.raises(SchemaError, match="column name 'my-speed' is not a plain identifier"):
        parse_ddl("unit STRING, my-speed DOUBLE")


def test_a_declared_type_no_stream_holds_is_named_with_the_types_it_may_be() -> None:
    with pytest.raises(SchemaError, match=r"column 'at': type TIMESTAMP_NTZ is not a flat primitive type \(one of "
                                          r"BIGINT, BOOLEAN, .*, TIMESTAMP, TINYINT or DECIMAL\(p,s\)\)"):
        parse_ddl("unit STRING, at TIMESTAMP_NTZ")


def test_a_stream_s_time_may_be_in_microseconds_and_an_unknown_unit_is_refused_where_it_was_given(
        tmp_path: Path) -> None:
    schema = {"stream": "Ticks", "keys": ["id"], "time": {"column": "ts", "unit": "us"}, "columns": "id INT, ts BIGINT"}
    assert from_mapping(schema, "Ticks.yaml").unit_seconds == Fraction(1, 1_000_000)
    refused = r"unknown time unit 'fortnight'; use s, ms, us, min, h or d \(or a long form"
    with pytest.raises(SchemaError, match=f"Ticks.yaml: {refused}"):
        from_mapping({**schema, "time": {"column": "ts", "unit": "fortnight"}}, "Ticks.yaml")
    with pytest.raises(SchemaError, match=f"--time-unit: {refused}"):
        RunRequest(time_unit="fortnight")
    assert RunRequest(time_unit="MS").time_unit == "ms"
    assert RunRequest(skip_lines="1,3,4").skip_lines == RunRequest(skip_lines=[1, 3, 4]).skip_lines == (1, 3, 4)
    with pytest.raises(SchemaError, match=r"^--skip-lines: a number of lines or a list of line numbers, 1 the first "
                                          r"\(--skip-lines 1 for a title line before the header, --skip-lines 1,3,4 "
                                          r"for a title and two lines after it\), not 'x'$"):
        RunRequest(skip_lines="x")  # in the spelling of the command line it was given on
    with pytest.raises(SchemaError, match=r"^--skip-lines: 1,5 skips line 5 after rows begin"):
        RunRequest(skip_lines="1,5")
    (tmp_path / "q.tpq").write_text("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s")
    (tmp_path / "q.yaml").write_text("time_unit: fortnight\n")
    with pytest.raises(PielakeError, match=f"q.yaml: time_unit: {refused}"):
        register(tmp_path / "q.tpq")


@pytest.mark.parametrize(("unit", "kind", "fix"), [
    ("s", "DOUBLE", "a time is a whole number of the stream's unit (s); for seconds since 1970 with a fraction, "
                    "declare it a TIMESTAMP of unit timestamp written as unix (time: {column: te, unit: timestamp, "
                    "format: unix}), or give whole numbers of a finer unit than s"),
    ("s", "TIMESTAMP", "its unit is s: give the stream unit timestamp (`unit: timestamp` in its schema"),
    ("timestamp", "BIGINT", "a time of unit timestamp is a TIMESTAMP column"),
    ("ms", "STRING", "a time is a whole number of the stream's unit (ms), or a TIMESTAMP"),
], ids=["fractions", "times of a numeric unit", "numbers of unit timestamp", "text"])
def test_a_time_column_of_a_type_no_time_has_is_refused_with_the_fix(unit: str, kind: str, fix: str) -> None:
    """A stream's times are whole numbers of its unit or TIMESTAMPs (docs/semantics.md §1): a DOUBLE time would
    otherwise lose its fraction, silently, in every situation."""
    schema = {"stream": "Ticks", "keys": ["id"], "time": {"start": "ts", "end": "te", "unit": unit},
              "columns": f"id INT, ts {'TIMESTAMP' if unit == 'timestamp' else 'BIGINT'}, te {kind}"}
    with pytest.raises(SchemaError, match=re.escape(f"Ticks.yaml: stream Ticks's time column 'te' is {kind}; {fix}")):
        from_mapping(schema, "Ticks.yaml")


def test_a_time_format_is_a_pattern_of_a_stream_of_unit_timestamp_and_is_kept_with_its_schema() -> None:
    """`dd/MM/yyyy HH:mm:ss`, as a spreadsheet or a public data set writes its times, is how the stream's files
    write them; a stream of numeric times has none."""
    schema = {"stream": "Ships", "keys": ["MMSI"], "columns": "MMSI BIGINT, Timestamp TIMESTAMP",
              "time": {"column": "Timestamp", "unit": "timestamp", "format": "dd/MM/yyyy HH:mm:ss"}}
    declared = from_mapping(schema, "Ships.yaml")
    assert declared.time_format == "dd/MM/yyyy HH:mm:ss"
    assert from_mapping(to_mapping(declared), "kept") == declared
    for unit, written in (("s", "dd/MM/yyyy"), ("timestamp", ""), ("timestamp", 5)):
        numeric = {**schema, "columns": "MMSI BIGINT, Timestamp BIGINT"} if unit == "s" else schema
        with pytest.raises(SchemaError, match=r"Ships.yaml: time.format is how a file writes the times of a stream "
                                              r"of unit timestamp, as a Spark datetime pattern"):
            from_mapping({**numeric, "time": {"column": "Timestamp", "unit": unit, "format": written}}, "Ships.yaml")


LOGGER = {"stream": "Logger", "keys": ["Geraet"], "columns": "Geraet STRING, Datum STRING, Uhrzeit STRING, T DOUBLE",
          "time": {"column": "ts", "from": ["Datum", "Uhrzeit"], "unit": "timestamp", "format": "dd.MM.yyyy HH:mm:ss"}}


def test_a_time_made_from_a_date_and_a_time_of_day_is_a_timestamp_column_the_files_do_not_hold() -> None:
    """`time.from` names the file's columns whose text, joined by a space, writes the time (`Datum;Uhrzeit`, as
    loggers write them): the stream holds a TIMESTAMP column of the time's name besides them, which its files do not
    hold and its kept schema does not declare."""
    declared = from_mapping(LOGGER, "Logger.yaml")
    assert declared.time_from == ("Datum", "Uhrzeit")
    assert declared.type_of("ts") == "TIMESTAMP"
    assert [name for name, _ in declared.file_columns] == ["Geraet", "Datum", "Uhrzeit", "T"]
    kept = to_mapping(declared)
    assert kept["time"]["from"] == ["Datum", "Uhrzeit"] and kept["columns"] == LOGGER["columns"]
    assert from_mapping(kept, "kept") == declared
    assert from_mapping({**LOGGER, "time": {**LOGGER["time"], "from": ["datum", "UHRZEIT"]}}, "x").time_from == (
        "Datum", "Uhrzeit")  # as the columns spell them
    assert "from" not in to_mapping(from_mapping({**LOGGER, "columns": "Geraet STRING, ts TIMESTAMP",
                                                  "time": {"column": "ts", "unit": "timestamp"}}, "x"))["time"]


@pytest.mark.parametrize(("change", "said"), [
    ({"time": {**LOGGER["time"], "from": ["Datum"]}}, "time.from lists two or more of the file's columns, not "
                                                      "['Datum']"),
    ({"time": {**LOGGER["time"], "from": "Datum Uhrzeit"}}, "time.from lists two or more of the file's columns"),
    ({"time": {**LOGGER["time"], "from": ["Datum", "datum"]}}, "time.from lists two or more of the file's columns"),
    ({"time": {**LOGGER["time"], "from": ["Datum", "Zeit"]}}, "time.from names column(s) Zeit not defined in "
                                                              "columns; declare them as the file writes them"),
    ({"columns": LOGGER["columns"] + ", ts TIMESTAMP"}, "time.column 'ts' is made from Datum, Uhrzeit (time.from), so "
                                                        "the file holds no such column: leave it out of columns"),
    ({"time": {**LOGGER["time"], "unit": "s", "format": None}}, "a time made from a date and a time of day "
                                                                "(time.from) is of unit timestamp"),
    ({"time": {"start": "ts", "end": "Datum", "from": ["Datum", "Uhrzeit"], "unit": "timestamp"}},
     "time.from makes a point stream's time (time.column), not an interval's"),
])
def test_a_time_made_otherwise_than_from_two_declared_columns_of_a_point_stream_is_refused_with_the_fix(
        change: dict, said: str) -> None:
    with pytest.raises(SchemaError, match="^Logger.yaml: " + re.escape(said)):
        from_mapping({**LOGGER, **change}, "Logger.yaml")


def test_a_decimal_comma_and_an_encoding_are_kept_with_their_schema_and_what_cannot_be_read_is_refused() -> None:
    """`decimal: ','`: the stream's files write `21,5`, as spreadsheets export in many European locales; a
    stream that says nothing writes a point, and its kept schema says nothing either. `encoding: windows-1252`,
    as Excel writes CSV on Windows; one whose lines a reader of bytes cannot split (UTF-16) is refused."""
    schema = {"stream": "Wetter", "keys": ["station"], "time": {"column": "ts", "unit": "s"}, "decimal": ",",
              "columns": "station STRING, ts BIGINT, temp DOUBLE"}
    declared = from_mapping(schema, "Wetter.yaml")
    assert declared.decimal_mark == ","
    assert to_mapping(declared)["decimal"] == ","
    assert from_mapping(to_mapping(declared), "kept") == declared
    plain = from_mapping({k: v for k, v in schema.items() if k != "decimal"}, "Wetter.yaml")
    assert plain.decimal_mark == "." and "decimal" not in to_mapping(plain)
    assert from_mapping({**schema, "encoding": "windows-1252"}, "Wetter.yaml").encoding == "windows-1252"
    assert to_mapping(from_mapping({**schema, "encoding": "cp1252"}, "Wetter.yaml"))["encoding"] == "cp1252"
    for encoding, said in (("utf-16", "does not write ASCII as ASCII"), ("klingon", "is not the name of an "
                                                                                   "encoding")):
        with pytest.raises(SchemaError, match=f"^Wetter.yaml: encoding '{encoding}' {said}"):
            from_mapping({**schema, "encoding": encoding}, "Wetter.yaml")
    with pytest.raises(SchemaError, match=r"^Wetter.yaml: decimal is the mark before a number's fraction in the "
                                          r"stream's files, '.' or ',' \(decimal: ',' for 21,5\), not ';'$"):
        from_mapping({**schema, "decimal": ";"}, "Wetter.yaml")


def test_a_zone_of_times_written_without_one_is_kept_with_its_schema_and_names_a_zone() -> None:
    """`time.zone` names the zone whose wall clock a stream's files write (a logger's local time), by IANA name or
    offset; only a stream of unit timestamp that is not Unix time has such times."""
    schema = {"stream": "Hobo", "keys": [], "time": {"column": "ts", "unit": "timestamp", "zone": "Europe/Berlin"},
              "columns": "ts TIMESTAMP, temp DOUBLE"}
    declared = from_mapping(schema, "Hobo.yaml")
    assert declared.time_zone == "Europe/Berlin"
    assert to_mapping(declared)["time"]["zone"] == "Europe/Berlin"
    assert from_mapping(to_mapping(declared), "kept") == declared
    for offset, hours in (("+02:00", 2), ("-0530", -5.5), ("UTC+2", 2), ("Z", 0)):
        assert from_mapping({**schema, "time": {**schema["time"], "zone": offset}}, "Hobo.yaml").time_zone == offset
        assert zone_info(offset).utcoffset(None) == timedelta(hours=hours)
    utc = from_mapping({**schema, "time": {"column": "ts", "unit": "timestamp"}}, "Hobo.yaml")
    assert utc.time_zone is None and "zone" not in to_mapping(utc)["time"]
    said = r"^Hobo.yaml: time.zone is the zone whose wall clock a stream of unit timestamp writes its times in"
    for time in ({"zone": "Mars/Base"}, {"zone": 2}, {"zone": "+25:00"}, {"zone": "Europe/Berlin", "format": "unix"}):
        with pytest.raises(SchemaError, match=said):
            from_mapping({**schema, "time": {**schema["time"], **time}}, "Hobo.yaml")
    with pytest.raises(SchemaError, match=said):
        from_mapping({**schema, "time": {"column": "ts", "unit": "s", "zone": "Europe/Berlin"},
                      "columns": "ts BIGINT, temp DOUBLE"}, "Hobo.yaml")
    assert RunRequest(time_zone="Europe/Berlin").time_zone == "Europe/Berlin"  # an unknown stream's, by a run
    for given in ("Mars/Base", "Berlin", ""):
        with pytest.raises(PielakeError, match=f"^--time-zone '{given}' names no time zone: give an IANA name"):
            RunRequest(time_zone=given)
    assert RunRequest(time_format="dd/MM/yyyy HH:mm").time_format == "dd/MM/yyyy HH:mm"
    for given in ("unix", " "):
        with pytest.raises(SchemaError, match=f"^--time-format is the Spark datetime pattern .* not '{given}'; a "
                                              "number of seconds since 1970 is read with --time-unit s"):
            RunRequest(time_format=given)


def test_the_lines_a_stream_skips_are_kept_with_its_schema_and_never_lie_among_its_rows() -> None:
    """`skip_lines: 1` skips a logger's title before the header; `[1, 3, 4]` a title, then (the header on line 2)
    a line of units and one of processing, as Campbell Scientific's TOA5 files write them. The skipped lines and
    the header are a file's first lines: a list that skips a line after the rows begin would drop an event."""
    schema = {"stream": "Station", "keys": [], "time": {"column": "TIMESTAMP", "unit": "timestamp"},
              "columns": "TIMESTAMP TIMESTAMP, AirTC_Avg DOUBLE"}
    assert from_mapping(schema, "Station.yaml").skip_lines == ()
    assert "skip_lines" not in to_mapping(from_mapping(schema, "Station.yaml"))
    for given, skipped in ((1, (1,)), (2, (1, 2)), ([4, 3, 1], (1, 3, 4)), ([2, 3], (2, 3)), (0, ()),
                           ("1,3,4", (1, 3, 4)), ("2", (1, 2)), ("", ())):  # text: as --skip-lines gives them
        declared = from_mapping({**schema, "skip_lines": given}, "Station.yaml")
        assert declared.skip_lines == skipped
        assert from_mapping(to_mapping(declared), "kept") == declared
    for given in ([3], [1, 3, 5], [1, 2, 5]):
        with pytest.raises(SchemaError, match=rf"^Station.yaml: skip_lines {re.escape(str(given))} skips line "
                                              r"\d after rows begin: the skipped lines and the header \(line \d\) "
                                              r"are a file's first lines"):
            from_mapping({**schema, "skip_lines": given}, "Station.yaml")
    for given in (-1, True, "x", "1,x", [0], [1.5], {"1": 2}):
        with pytest.raises(SchemaError, match=r"^Station.yaml: skip_lines is a number of lines or a list of line "
                                              r"numbers, 1 the first"):
            from_mapping({**schema, "skip_lines": given}, "Station.yaml")


@pytest.mark.parametrize(("text", "said"), [
    (b"stream: Ticks\nkeys: [id]\ntime: {column: ts, unit: s}\ncolumns: id STRING, ts BIGINT\n"
     b"time: {column: ts, unit: ms}\n", "Ticks.yaml, line 5, column 1: 'time' is set here and on line 3; keep one"),
    (b"- stream\n- Ticks\n", "Ticks.yaml: holds a list, not a schema; write one setting a line"),
    (b"", "Ticks.yaml: holds nothing, not a schema"),
    (b"stream: 'Ticks\n", "Ticks.yaml, line 1, column 9: not YAML (while scanning a quoted scalar"),
    (b"stream: Ticks\nkey: [id]\ntime: {column: ts, units: ms}\ncolumns: id STRING, ts BIGINT\nnote: x\n",
     "Ticks.yaml: unknown setting(s) key (did you mean keys?), note, time.units (did you mean time.unit?); a schema "
     "has stream, keys, time, columns, "),
])
def test_a_schema_file_that_says_a_setting_twice_or_holds_no_schema_is_refused_with_where(
        text: bytes, said: str, tmp_path: Path) -> None:
    """YAML keeps the last of two values of a key: a unit written twice, the second by mistake, would change
    every window silently; so would a misspelt one (`units: ms`), left unread while the default (s) applies."""
    (tmp_path / "Ticks.yaml").write_bytes(text)
    with pytest.raises(PielakeError, match=re.escape(said)):
        load_schema("Ticks", tmp_path)


def test_a_run_s_settings_for_a_known_stream_are_its_schema_s_or_refused_naming_its_file(tmp_path: Path) -> None:
    """`--time-column`, `--time-unit`, `--skip-lines`, `--time-zone` and `--time-format` type a stream without a
    schema; for a
    known one, a value that differs from its schema is refused, naming the schema's file, not ignored (times in
    milliseconds would be read as seconds). Given as the schema says (a column in any case), or not given, the
    schema reads the stream; a unit given for times that are TIMESTAMPs is moot, as for an unknown stream."""
    kept = {"Logger": StreamSchema("Logger", ("unit",), "ts", "s", (("unit", "STRING"), ("ts", "BIGINT")),
                                   skip_lines=(1,)),
            "Clock": StreamSchema("Clock", ("unit",), "at", TIMESTAMP_UNIT, (("unit", "STRING"), ("at", "TIMESTAMP")),
                                  time_zone="Europe/Berlin")}
    for schema in kept.values():
        save_schema(schema, lake_streams(tmp_path))
    lake = Lake(None, tmp_path)  # a known stream's schema is read from the lake's files, with no Spark job

    def stream(name: str, **given: object) -> StreamSchema:
        plan = load_query(f"FROM {name} PARTITION BY unit DEFINE A AS unit = 'a', B AS unit = 'b' PATTERN A meets B "
                          "WITHIN 1 h")
        return streams_for(lake, plan, RunRequest(**given), tmp_path / "schemas")[0]

    for given in ({}, {"time_column": "TS", "time_unit": "seconds", "skip_lines": "1"}):
        assert stream("Logger", **given) == kept["Logger"]
    for given in ({"time_column": "AT", "time_unit": "ms", "time_zone": "Europe/Berlin"}, {"time_unit": "s"}):
        assert stream("Clock", **given) == kept["Clock"]
    file = lake_streams(tmp_path) / "Logger.yaml"
    for given, said, option, field in [
        ({"time_column": "t2"}, "reads its times from column ts, not --time-column 't2'", "--time-column",
         "time.column"),
        ({"time_unit": "ms"}, "reads its times as whole numbers of unit s, not --time-unit 'ms'", "--time-unit",
         "time.unit"),
        ({"skip_lines": "1,3,4"}, "skips line(s) 1 of its files, not --skip-lines '1,3,4'", "--skip-lines",
         "skip_lines"),
        ({"time_zone": "+02:00"}, "reads its times as UTC where they carry no zone, not --time-zone '+02:00'",
         "--time-zone", "time.zone"),
        ({"time_format": "dd.MM.yyyy"}, "reads its times as ISO-8601 or as its files' types hold them, not "
         "--time-format 'dd.MM.yyyy'", "--time-format", "time.format"),
    ]:
        with pytest.raises(PielakeError) as refused:
            stream("Logger", **given)
        assert str(refused.value) == (f"stream Logger's schema ({file}) {said}: leave {option} out, or, before the "
                                      f"stream holds events, set {field} in that schema")
    with pytest.raises(PielakeError, match=r"as the wall clock of Europe/Berlin, not --time-zone 'UTC'"):
        stream("Clock", time_zone="UTC")
