"""Stream schemas: key columns, the event-time column with its unit, attributes and types (schemas/*.yaml).

A point stream names one time column (`time: {column: ts}`); an interval stream names where its rows start and
end (`time: {start: arrived, end: departed}`), and its start is then its event time (docs/semantics.md §1).
Types are given as a Spark DDL string and loaded, never retyped. Only flat columns of primitive types are
allowed: events have scalar attributes.
"""

from __future__ import annotations

import difflib
import os
import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, timedelta, timezone, tzinfo
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from pielake.errors import PielakeError
from pielake.lake.inputs import local_files, refuse_unread, text_format
from pielake.query.ast import TIME_UNIT_SECONDS
from pielake.query.tokens import PLAIN_NAME
from pielake.vocabulary import STREAMS_DIR
from pielake.yaml_file import read_yaml, unknown_settings

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pielake.query.analyzer import QueryPlan

SCHEMAS_DIR = Path(__file__).resolve().parents[1] / "schemas"
TIMESTAMP_UNIT = "timestamp"
# A stream typed from its file reads its time from this column, as numbers of this unit, unless a run says otherwise.
DEFAULT_TIME_COLUMN, DEFAULT_TIME_UNIT = "ts", "s"
FORMATS = ("csv", "parquet", "json")  # the files a stream's events come in
NARROW_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INT", "INTEGER")
INTEGER_TYPES = (*NARROW_INTEGER_TYPES, "BIGINT", "LONG")
PRIMITIVE_TYPES = {"STRING", "BIGINT", "LONG", "INT", "INTEGER", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "REAL",
                   "BOOLEAN", "TIMESTAMP", "DATE"}
_DDL_COLUMN = re.compile(r"^\s*(\S+)\s+([A-Za-z_]+(?:\(\s*\d+\s*(?:,\s*\d+\s*)?\))?)\s*$")
# A whole number as a stream's file writes one, and a time given for such a stream (`typed_time`): ASCII digits, as
# Python's `int` also reads `1_000` and other scripts' digits, which no file's times are.
WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
UTF_8 = "utf-8"
SCHEMA_EXAMPLE = "write one setting a line, as schemas/CarSensors.yaml does (stream, keys, time, columns)"


def format_of(path: str) -> str | None:
    """The format a file's suffix names (`events.jsonl`, `events.jsonl.gz`: json; `events.tsv`: csv, whose header
    tells its separator), if it names one; Parquet compresses within its files, never as a whole."""
    text = text_format(path)
    fmt = {"csv": "csv", "tsv": "csv", "parquet": "parquet", "json": "json", "jsonl": "json", "ndjson": "json"}.get(
        Path(text).suffix.lower().lstrip("."))
    return None if fmt == "parquet" and text != path else fmt


def _named_suffix(path: str) -> str:
    """The suffix a file's name tells its format by, with its codec's (`.csv`, `.csv.gz`)."""
    text = text_format(path)
    return (Path(text).suffix + path[len(text):]).lower()


def guess_format(path: str) -> str:
    """The format `path`'s suffix names, or, for a folder or a pattern, the one its files' suffixes all name (a
    landing folder, or a run's `_landed` folder, holds files named by their writers)."""
    refuse_unread(path)
    fmt = format_of(path)
    if fmt is not None:
        return fmt
    files = local_files(path)
    for file in files:
        refuse_unread(file)
    named = {_named_suffix(file) or "no suffix": format_of(file) for file in files}
    formats = set(named.values())
    if len(formats) == 1 and None not in formats:
        return formats.pop()
    found = f" (its files end in {', '.join(sorted(named))})" if named else ""
    fix = "land each format in a folder of its own, or " if len(formats - {None}) > 1 else ""
    raise PielakeError(f"cannot tell the format of '{path}'{found}; {fix}pass --format ({', '.join(FORMATS)})")


class SchemaError(PielakeError):
    """A stream schema file that cannot be used."""


@dataclass(frozen=True)
class StreamSchema:
    """What pielake knows of one event stream."""

    name: str
    keys: tuple[str, ...]
    time_column: str  # of an interval stream, where its rows start
    time_unit: str
    columns: tuple[tuple[str, str], ...]  # (name, Spark SQL type), in order
    end_column: str | None = None  # where an interval stream's rows end; None for a point stream
    # A query's matches read as a stream (docs/semantics.md §1): its rows up to a key's time less this lag (the
    # query's window, in whole kernel time units) are final. None for a stream of events.
    horizon_lag: int | None = None
    # Of a matches stream, the columns that tell apart and order its rows sharing a start and an end: each
    # symbol's start, in definition order (docs/semantics.md §1).
    order_columns: tuple[str, ...] = ()
    # How a file writes the stream's times where it writes them as text that is not ISO-8601: a Spark datetime
    # pattern (`dd/MM/yyyy HH:mm:ss`), or `UNIX_TIME`; None: ISO-8601 text, or times the file holds as TIMESTAMPs.
    time_format: str | None = None
    # The zone whose wall clock the stream's files write times in where a time carries no zone or offset (a
    # logger's local time): an IANA name (`Europe/Berlin`, its daylight saving time too) or an offset (`+02:00`);
    # None: such a time is UTC.
    time_zone: str | None = None
    # The mark before a number's fraction where the stream's files write numbers as text: "." or `DECIMAL_COMMA`
    # (`21,5`, as spreadsheets export in locales that write a decimal comma).
    decimal_mark: str = "."
    # The character encoding of the stream's CSV files, as Python and Java name it (`windows-1252`, as Excel on
    # Windows writes CSV in Western Europe); JSON is UTF-8 by its standard.
    encoding: str = UTF_8
    # The lines of each of the stream's CSV files that hold neither its column names nor rows, by number (1 is the
    # first), as data loggers write a title before the header and units after it (`check_skip_lines`).
    skip_lines: tuple[int, ...] = ()
    # The file's columns whose text, joined by a space, writes the event time, where a file writes a date and a
    # time of day in columns of their own (`Datum;Uhrzeit`, as loggers do): the time column is then made from
    # them, and the file holds no column of its name. Empty: the file holds the time column.
    time_from: tuple[str, ...] = ()

    @property
    def of_matches(self) -> bool:
        """The stream is a query's published matches, not events from outside."""
        return self.horizon_lag is not None

    @property
    def natural_key(self) -> tuple[str, ...]:
        """What makes an event one (docs/semantics.md §1): its key and time; an interval row's key, start and end,
        so that rows of one key may share a start (a state and an alarm beginning in the same second); of a
        matches stream, also its order columns (two matches may span the same interval)."""
        return (*self.keys, *self.time_columns, *self.order_columns)

    @property
    def time_columns(self) -> tuple[str, ...]:
        """The columns holding times in the stream's time type: the event time, and an interval's end."""
        return (self.time_column,) if self.end_column is None else (self.time_column, self.end_column)

    @property
    def ddl(self) -> str:
        return ddl_of(self.columns)

    @property
    def file_columns(self) -> tuple[tuple[str, str], ...]:
        """The columns the stream's files hold: all but a time column made from others (`time_from`)."""
        made = self.time_column.lower() if self.time_from else None
        return tuple((name, kind) for name, kind in self.columns if name.lower() != made)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    @property
    def unit_seconds(self) -> Fraction:
        """Seconds per unit of event time (microseconds for TIMESTAMP streams, which kernels see as micros)."""
        return Fraction(1, 1_000_000) if self.time_unit == TIMESTAMP_UNIT else TIME_UNIT_SECONDS[self.time_unit]

    def type_of(self, column: str) -> str:
        return {n.lower(): t for n, t in self.columns}[column.lower()]


def ddl_of(columns: Iterable[tuple[str, str]]) -> str:
    """Columns as a schema's DDL string writes them (`a BIGINT, b DOUBLE`), which `parse_ddl` reads back."""
    return ", ".join(f"{name} {kind}" for name, kind in columns)


def parse_ddl(ddl: str) -> tuple[tuple[str, str], ...]:
    """`a BIGINT, b DOUBLE` -> (("a", "BIGINT"), ("b", "DOUBLE")); nested types are refused."""
    columns = []
    for part in re.split(r",(?![^()]*\))", ddl):  # commas outside DECIMAL(p, s)
        found = _DDL_COLUMN.match(part)
        if not found:
            raise SchemaError(f"cannot read column definition '{part.strip()}' (expected '<name> <TYPE>')")
        columns.append(schema_column(found.group(1), found.group(2)))
    return tuple(columns)


def closest_column(name: str, columns: Iterable[str]) -> str | None:
    """The column of `columns` whose name is closest to `name`, as `columns` spells it, for a 'did you mean'; None
    where none is close. Case does not tell a stream's columns apart, so it is not compared. Short of a close
    spelling, the one column whose path ends in `name` is meant: a nested record's field is read as the column
    named by its path (`readings.rpm` is `readings_rpm`), and the field's own name is what a user knows."""
    spelled = {column.lower(): column for column in columns}
    close = difflib.get_close_matches(name.lower(), list(spelled), n=1)
    if close:
        return spelled[close[0]]
    field = re.compile(rf"_{re.escape(name.lower())}$")  # a path read as a plain name joins its fields by '_'
    ending = [column for lowered, column in spelled.items() if field.search(lowered)]
    return ending[0] if len(ending) == 1 else None


def schema_column(name: str, kind: str) -> tuple[str, str]:
    """The column as a schema holds it, its type spelled in upper case without spaces, if its name is a plain
    identifier and its type a flat primitive one, as every column of a stream is (docs/semantics.md §1); else a
    SchemaError naming the column. Declared schemas and inferred ones pass the same test, so a schema the lake
    keeps always loads again."""
    if not PLAIN_NAME.fullmatch(name):
        raise SchemaError(f"column name '{name}' is not a plain identifier (letters, digits and '_', not first a "
                          "digit)")
    spelled = re.sub(r"\s+", "", kind.upper())
    if spelled.split("(")[0] not in PRIMITIVE_TYPES | {"DECIMAL"}:
        raise SchemaError(f"column '{name}': type {kind} is not a flat primitive type (one of "
                          f"{', '.join(sorted(PRIMITIVE_TYPES))} or DECIMAL(p,s))")
    return name, spelled


DECIMAL_MARKS = (".", ",")
DECIMAL_COMMA = ","

# The time format of a file that writes times as Unix time: seconds since 1970-01-01 UTC, a fraction of a second
# allowed (Python's `time.time()`, many loggers and exporters); read to the microsecond.
UNIX_TIME = "unix"


def check_time_unit(unit: str, origin: str) -> str:
    """`unit` in lower case, as a schema holds it, if a stream's time may be in it; else a SchemaError naming
    where it was given (`origin`)."""
    spelled = unit.lower()
    if spelled != TIMESTAMP_UNIT and spelled not in TIME_UNIT_SECONDS:
        raise SchemaError(f"{origin}: unknown time unit '{unit}'; use s, ms, us, min, h or d (or a long form: "
                          "seconds, minutes, ...) for a numeric time, timestamp for a TIMESTAMP column")
    return spelled


FLOATING = ("DOUBLE", "FLOAT", "REAL")


def fractional(kind: str) -> bool:
    """A column type of numbers with a fraction."""
    return kind.upper() in FLOATING or kind.upper().startswith("DECIMAL")


def check_time_columns(stream: StreamSchema, origin: str) -> None:
    """A stream's times are whole numbers of its unit, or TIMESTAMPs of unit `timestamp` (docs/semantics.md §1):
    any other type of a time column is a SchemaError naming it, where it was given (`origin`), and the fix."""
    timestamps = stream.time_unit == TIMESTAMP_UNIT
    for column in stream.time_columns:
        kind = stream.type_of(column)
        if timestamps and kind != "TIMESTAMP":
            fix = "a time of unit timestamp is a TIMESTAMP column"
        elif kind == "TIMESTAMP" and not timestamps:
            fix = f"its unit is {stream.time_unit}: give the stream unit timestamp (`unit: timestamp` in its schema)"
        elif fractional(kind):
            fix = (f"a time is a whole number of the stream's unit ({stream.time_unit}); for seconds since 1970 with "
                   f"a fraction, declare it a TIMESTAMP of unit timestamp written as {UNIX_TIME} (time: {{column: "
                   f"{column}, unit: timestamp, format: {UNIX_TIME}}}), or give whole numbers of a finer unit than "
                   f"{stream.time_unit}")
        elif kind not in INTEGER_TYPES and not timestamps:
            fix = f"a time is a whole number of the stream's unit ({stream.time_unit}), or a TIMESTAMP"
        else:
            continue
        raise SchemaError(f"{origin}: stream {stream.name}'s time column '{column}' is {kind}; {fix}")


# What a schema's file may set (`to_mapping` writes them), and its `time` mapping.
SCHEMA_KEYS = ("stream", "keys", "time", "columns", "order", "decimal", "encoding", "skip_lines")
TIME_KEYS = ("column", "start", "end", "unit", "format", "zone", "from", "horizon_lag")


def from_mapping(doc: object, origin: str) -> StreamSchema:
    if not isinstance(doc, dict):
        raise SchemaError(f"{origin}: holds {'nothing' if doc is None else f'a {type(doc).__name__}'}, not a "
                          f"schema; {SCHEMA_EXAMPLE}")
    time = doc.get("time")
    unknown = unknown_settings(doc, SCHEMA_KEYS) + (unknown_settings(time, TIME_KEYS, "time.")
                                                    if isinstance(time, dict) else [])
    if unknown:  # a misspelt setting (`key:`, `units:`) would be left unread, its default taken in silence
        raise SchemaError(f"{origin}: unknown setting(s) {', '.join(unknown)}; a schema has {', '.join(SCHEMA_KEYS)}, "
                          f"and its time {', '.join(TIME_KEYS)}")
    try:
        name, keys, time, ddl = doc["stream"], doc.get("keys", []), doc["time"], doc["columns"]
        unit = str(time.get("unit", "s")).lower()
        column, end = (time["start"], time["end"]) if "start" in time else (time["column"], None)
        lag, order, written = time.get("horizon_lag"), tuple(doc.get("order", ())), time.get("format")
        zone, parts = time.get("zone"), time.get("from", [])
        mark, encoding, skip = doc.get("decimal", "."), doc.get("encoding", UTF_8), doc.get("skip_lines", ())
    except (KeyError, TypeError) as missing:
        raise SchemaError(f"{origin}: missing {missing}; a schema has stream, keys, columns and time.column "
                          "(or time.start and time.end, for interval rows)") from None
    columns = parse_ddl(ddl)
    parts = check_time_from(parts, column, end, columns, origin)
    if parts:
        columns = (*columns, (column, "TIMESTAMP"))
    names = {n.lower() for n, _ in columns}
    for needed in [*keys, column, *([end] if end else []), *order]:
        if needed.lower() not in names:
            raise SchemaError(f"{origin}: column '{needed}' is named in keys/time but not defined in columns")
    if end is not None and end.lower() == column.lower():
        raise SchemaError(f"{origin}: time.start and time.end name the same column '{end}'")
    check_time_unit(unit, origin)
    if lag is not None and (end is None or not isinstance(lag, int) or lag < 0):
        raise SchemaError(f"{origin}: time.horizon_lag is a whole number >= 0, of an interval stream")
    if parts and unit != TIMESTAMP_UNIT:
        raise SchemaError(f"{origin}: a time made from a date and a time of day (time.from) is of unit timestamp "
                          "(unit: timestamp)")
    if written is not None and (unit != TIMESTAMP_UNIT or not isinstance(written, str) or not written.strip()):
        raise SchemaError(f"{origin}: time.format is how a file writes the times of a stream of unit timestamp, as a "
                          f"Spark datetime pattern (format: dd/MM/yyyy HH:mm:ss), or {UNIX_TIME} for seconds since "
                          "1970 with a fraction")
    if zone is not None:
        check_time_zone(zone, written, unit, origin)
    if mark not in DECIMAL_MARKS:
        raise SchemaError(f"{origin}: decimal is the mark before a number's fraction in the stream's files, '.' or "
                          f"',' (decimal: ',' for 21,5), not {mark!r}")
    check_encoding(encoding, origin)
    schema = StreamSchema(name, tuple(keys), column, unit, columns, end, lag, order, written, zone, mark, encoding,
                          check_skip_lines(skip, origin), parts)
    check_time_columns(schema, origin)
    return schema


def check_time_from(parts: object, column: str, end: str | None, columns: tuple[tuple[str, str], ...],
                    origin: str) -> tuple[str, ...]:
    """The columns a stream's time is made from (`time.from`), as declared: two or more declared columns, of a
    point stream whose time column is made from them and so not declared itself; else a SchemaError naming where
    it was given (`origin`) and the fix."""
    example = (f"time: {{column: {column}, from: [Datum, Uhrzeit], unit: timestamp, format: dd.MM.yyyy HH:mm:ss}} "
               "makes the time from a date column and a time-of-day column")
    if parts in ([], ()):
        return ()
    declared = {n.lower(): n for n, _ in columns}
    if end is not None:
        raise SchemaError(f"{origin}: time.from makes a point stream's time (time.column), not an interval's; "
                          f"{example}")
    if not isinstance(parts, list) or len(parts) < 2 or not all(isinstance(p, str) for p in parts) or \
            len({p.lower() for p in parts}) < len(parts):
        raise SchemaError(f"{origin}: time.from lists two or more of the file's columns, not {parts!r}; {example}")
    unknown = [p for p in parts if p.lower() not in declared]
    if unknown:
        raise SchemaError(f"{origin}: time.from names column(s) {', '.join(unknown)} not defined in columns; "
                          f"declare them as the file writes them (Datum STRING, Uhrzeit STRING)")
    if column.lower() in declared:
        raise SchemaError(f"{origin}: time.column '{column}' is made from {', '.join(parts)} (time.from), so the file "
                          f"holds no such column: leave it out of columns, or name the time otherwise")
    return tuple(declared[p.lower()] for p in parts)


def to_mapping(schema: StreamSchema) -> dict:
    time = {"column": schema.time_column} if schema.end_column is None else \
        {"start": schema.time_column, "end": schema.end_column}
    time |= {"from": list(schema.time_from)} if schema.time_from else {}
    lag = {} if schema.horizon_lag is None else {"horizon_lag": schema.horizon_lag}
    written = {} if schema.time_format is None else {"format": schema.time_format}
    written |= {} if schema.time_zone is None else {"zone": schema.time_zone}
    order = {"order": list(schema.order_columns)} if schema.order_columns else {}
    mark = {} if schema.decimal_mark == "." else {"decimal": schema.decimal_mark}
    encoding = {} if schema.encoding == UTF_8 else {"encoding": schema.encoding}
    skip = {"skip_lines": list(schema.skip_lines)} if schema.skip_lines else {}
    return {"stream": schema.name, "keys": list(schema.keys),
            "time": {**time, "unit": schema.time_unit, **written, **lag}, **order, **mark, **encoding, **skip,
            "columns": ddl_of(schema.file_columns)}


# An offset as Spark reads it in a zone's place: `+02:00`, `-0530`, `UTC+2`, `Z`.
ZONE_OFFSET = re.compile(r"(?:(?:UTC|GMT)?(?P<sign>[+-])(?P<hours>\d{1,2})(?::?(?P<minutes>\d{2}))?|Z)")


ZONE_KINDS = "an IANA name (Europe/Berlin, its daylight saving time too) or an offset (+02:00)"


def zone_info(zone: str) -> tzinfo:
    """The zone `zone` names: an offset, or an IANA name Python's zone database knows (a ValueError otherwise)."""
    offset = ZONE_OFFSET.fullmatch(zone)
    if offset is None:
        try:
            return zoneinfo.ZoneInfo(zone)
        except zoneinfo.ZoneInfoNotFoundError:
            raise ValueError(f"no time zone is named {zone!r}") from None
    if zone == "Z":
        return UTC
    sign = -1 if offset["sign"] == "-" else 1
    return timezone(sign * timedelta(hours=int(offset["hours"]), minutes=int(offset["minutes"] or 0)))


def names_zone(zone: object) -> bool:
    """Whether `zone` names a time zone (`zone_info`)."""
    if not isinstance(zone, str):
        return False
    try:
        zone_info(zone)
    except ValueError:
        return False
    return True


def check_zone_named(zone: str, setting: str) -> None:
    """A run's zone (`--time-zone`, a registration's `time_zone`) names one; else a SchemaError naming the setting."""
    if not names_zone(zone):
        raise SchemaError(f"{setting} '{zone}' names no time zone: give {ZONE_KINDS}")


def check_pattern_given(pattern: str, setting: str) -> None:
    """A run's pattern of an unknown stream's text times (`--time-format`, a registration's `time_format`) is a
    pattern; Unix time is a number, which `--time-unit s` reads. Spark tells a pattern it does not take as it reads
    a time with it (`_check_time_reading` in `pielake.pipeline.ingest`)."""
    if not pattern.strip() or pattern == UNIX_TIME:
        raise SchemaError(f"{setting} is the Spark datetime pattern an unknown stream's files write text times in "
                          f"(dd/MM/yyyy HH:mm:ss), not {pattern!r}; a number of seconds since 1970 is read with "
                          "--time-unit s (a registration's time_unit: s)")


def check_time_zone(zone: object, written: str | None, unit: str, origin: str) -> None:
    """A stream's `time.zone` names a zone, of a stream of unit timestamp whose times are not Unix time (a number
    of seconds since 1970 is an instant); else a SchemaError naming where it was given (`origin`)."""
    said = ("time.zone is the zone whose wall clock a stream of unit timestamp writes its times in where they carry "
            "no offset (a logger's local time): an IANA name (zone: Europe/Berlin) or an offset (zone: '+02:00')")
    if unit != TIMESTAMP_UNIT or written == UNIX_TIME:
        raise SchemaError(f"{origin}: {said}; Unix time and whole numbers of a unit are instants, of no zone")
    if not names_zone(zone):
        raise SchemaError(f"{origin}: {said}; not {zone!r}")


def check_encoding(encoding: object, origin: str) -> None:
    """A stream's files may be in an encoding that writes ASCII as ASCII (UTF-8, and the one-byte encodings:
    `windows-1252`, `iso-8859-15`, ...), whose line ends, separators and quotes a reader of bytes finds; else a
    SchemaError naming it, where it was given (`origin`)."""
    fix = "convert the files to UTF-8 (iconv -f <encoding> -t utf-8), or name one such as windows-1252"
    try:
        ascii_safe = "a,1\n".encode(str(encoding)) == b"a,1\n"
    except LookupError:
        raise SchemaError(f"{origin}: encoding {encoding!r} is not the name of an encoding; {fix}") from None
    if not ascii_safe:
        raise SchemaError(f"{origin}: encoding {encoding!r} does not write ASCII as ASCII (one byte a "
                          f"character), as a CSV file must be for its lines to be split; {fix}")


def check_skip_lines(given: object, origin: str) -> tuple[int, ...]:
    """The lines a stream's CSV files skip, in order, from a schema's `skip_lines` (or `--skip-lines`, as text: `2`,
    `1,3,4`): a number n (the first n lines, as a title before the header) or a list of line numbers (`[1, 3, 4]`:
    a title, then the header, then two lines of units, as Campbell Scientific's TOA5 files write them). The
    skipped lines and the header are the file's first lines, so no line among its rows is ever skipped; any other
    list is a SchemaError naming where it was given (`origin`)."""
    def counts(n: object) -> bool:
        return isinstance(n, int) and not isinstance(n, bool) and n > 0

    written = _numbers(given) if isinstance(given, str) else given
    lines = list(range(1, written + 1)) if counts(written) or written == 0 else written
    named = origin.endswith(("--skip-lines", "skip_lines"))  # the origin is the setting: not named again
    example = ("--skip-lines 1 for a title line before the header, --skip-lines 1,3,4 for a title and two lines "
               "after it") if origin.startswith("--") else ("skip_lines: 1 for a title line before the header, "
                                                            "[1, 3, 4] for a title and two lines after it")
    if not isinstance(lines, list | tuple) or not all(counts(n) for n in lines):
        raise SchemaError(f"{origin}: {'' if named else 'skip_lines is '}a number of lines or a list of line "
                          f"numbers, 1 the first ({example}), not {given!r}")
    skipped = sorted(set(lines))
    header = next((n for n in range(1, len(skipped) + 2) if n not in skipped), 1)
    if skipped and set(skipped) | {header} != set(range(1, max(skipped[-1], header) + 1)):
        listed = ("" if named else "skip_lines ") + (given if isinstance(given, str) else str(list(lines)))
        raise SchemaError(f"{origin}: {listed} skips line {max(n for n in skipped if n > header)} after rows begin: "
                          f"the skipped lines and the header (line {header}) are a file's first lines ({example})")
    return tuple(skipped)


def _numbers(text: str) -> object:
    """Text as the numbers it lists (`1,3,4`), or the one it is (`2`); what is no number stays text. Empty: 0."""
    parts = [int(part) if part.strip().isdigit() else part for part in text.split(",")] if text.strip() else [0]
    return parts if len(parts) > 1 else parts[0]


def schema_file(directory: Path, stream: str) -> Path:
    """The file in `directory` that `save_schema` writes the schema of `stream` to."""
    return directory / f"{stream}.yaml"


def save_schema(schema: StreamSchema, directory: Path) -> Path:
    """Write `directory/<stream>.yaml` whole or not at all: every run of a query saves it, and a run starting
    at the same moment must never read it half-written (written beside it, then renamed over it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = schema_file(directory, schema.name)
    draft = directory / f".{schema.name}.yaml.{os.getpid()}.tmp"
    draft.write_text(yaml.safe_dump(to_mapping(schema), sort_keys=False), encoding="utf-8")
    os.replace(draft, path)
    return path


def lake_streams(lake_root: Path) -> Path:
    """Where a lake keeps the schemas of the streams ingested into it."""
    return lake_root / STREAMS_DIR


def declared_schema(stream: str, lake_root: Path | None, schemas_dir: Path = SCHEMAS_DIR) -> StreamSchema | None:
    """The stream's schema as the lake at `lake_root` keeps it, else as `schemas_dir` declares it, else None: what
    a run binds its query to before it reads a file."""
    return _schema_at(declared_file(stream, lake_root, schemas_dir))


def declared_file(stream: str, lake_root: Path | None, schemas_dir: Path = SCHEMAS_DIR) -> Path | None:
    """The file `declared_schema` reads the stream's schema from, or None."""
    kept = named_file(lake_streams(lake_root), stream, ".yaml") if lake_root is not None else None
    return kept or named_file(schemas_dir, stream, ".yaml")


def where_to_declare(stream: str | None = None) -> str:
    """Where a message tells a user to declare `stream`'s schema (the folder, for None): every run reads the
    project's `schemas/`, whatever folder it is started in, so it is named from the working folder where that holds
    it (`schemas/Rooms.yaml`), else by its whole path, as a `schemas/` beside a user elsewhere is never read."""
    if stream is None:
        return f"{_from_here(SCHEMAS_DIR)}/"
    return str(_from_here(SCHEMAS_DIR / f"{stream}.yaml"))


def _from_here(path: Path) -> Path:
    """`path` from the working folder where that holds it, else whole."""
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def load_schema(stream: str, directory: Path = SCHEMAS_DIR) -> StreamSchema | None:
    """The schema of `stream` from `directory/<stream>.yaml` (case-insensitive), or None if there is none."""
    return _schema_at(named_file(directory, stream, ".yaml"))


def _schema_at(path: Path | None) -> StreamSchema | None:
    return None if path is None else from_mapping(read_yaml(path, SCHEMA_EXAMPLE), str(path))


def named_file(directory: Path, name: str, suffix: str) -> Path | None:
    """The file `<name><suffix>` in `directory`, its name in any case (as a query names streams and queries), or
    None: a stream's schema, a query's file, a stream's or query's own gate suite."""
    return next((p for p in sorted(directory.glob(f"*{suffix}")) if p.stem.lower() == name.lower()), None)


def events_files(plan: QueryPlan, given: Sequence[str]) -> dict[str, object]:
    """A run request's events files (`RunRequest`'s `events_path`, or `stream_events`) from what a user gives
    (`--events`, a registration's `events`): a query over one stream takes one file (`_one_stream_path`); a query
    over several a `STREAM=FILE` for each of its streams with new events (`STREAM=` alone, what an Airflow param
    left empty renders to, gives that stream none: `RunRequest`)."""
    if len(plan.sources) == 1:
        if len(given) > 1:
            raise PielakeError(f"query {plan.name} reads one stream: give one events path, not {len(given)}; for "
                               "several files, a folder of them or a pattern of their names (/landing/cars/*.csv)")
        return {"events_path": _one_stream_path(plan, given[0]) if given else None}
    pairs = [value.partition("=") for value in given]
    wrong = [value for value, (name, eq, _) in zip(given, pairs, strict=True) if not (name and eq)]
    if wrong:
        streams = " ".join(f"--events {s.stream}=FILE" for s in plan.sources)
        raise PielakeError(f"query {plan.name} reads {len(plan.sources)} streams: name each file's stream "
                           f"({streams}); not '{wrong[0]}'")
    chosen: dict[str, str] = {}
    for stream, path in ((plan.source_named(name).stream, path) for name, _, path in pairs):
        if path and chosen.get(stream, path) not in (path, ""):  # one of the two files would not be read
            raise PielakeError(f"stream {stream} is given two events paths, '{chosen[stream]}' and '{path}': give it "
                               "one, a folder of its files or a pattern of their names (/landing/cars/*.csv)")
        if path or stream not in chosen:
            chosen[stream] = path
    return {"stream_events": list(chosen.items())}


def _one_stream_path(plan: QueryPlan, given: str) -> str:
    """The events path of a query over one stream, given alone or, as a query over several takes its paths, as
    `STREAM=FILE`, which must name the query's stream (`source_named`); a file whose own name holds the `=` is read
    as named."""
    name, eq, path = given.partition("=")
    if not (eq and PLAIN_NAME.fullmatch(name)) or local_files(given):
        return given
    plan.source_named(name)
    return path


def files_by_stream(plan: QueryPlan, given: Sequence[str]) -> dict[str, str]:
    """The files `given` as `--events` gives them (`events_files`), by stream; a stream given none left out."""
    files = events_files(plan, given)
    pairs = files.get("stream_events") or [(plan.sources[0].stream, files.get("events_path"))]
    return {stream: path for stream, path in pairs if path}


def as_given(plan: QueryPlan, by_stream: dict[str, str]) -> tuple[str, ...]:
    """Files by stream as `--events` gives them: the one file of a query over one stream, else STREAM=FILE."""
    if len(plan.sources) == 1:
        return tuple(by_stream.values())
    return tuple(f"{stream}={path}" for stream, path in by_stream.items())
