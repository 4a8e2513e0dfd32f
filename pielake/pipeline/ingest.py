"""Ingest: a file of raw events -> the stream's `events_<stream>` table, bad rows -> `quarantine_<stream>`.

docs/semantics.md §1, row by row, nothing dropped silently:
- a NULL key or event time is quarantined (`null_key`, `null_time`);
- a value that does not cast to its declared type is quarantined with the column and the raw value
  (`cast_failed`); so is a NaN or an infinity in a floating column (`not_finite`: predicates and aggregates
  over them have no meaning docs/semantics.md can give), and text that was not valid UTF-8 (`invalid_utf8`: the reader
  has replaced the bad bytes, so the value is no longer what was sent);
- an exact duplicate (same key, time and payload) of a row of this file or of an ingested event is dropped once
  and counted;
- rows with the same key and time but different payloads are all quarantined (`conflicting_duplicate`);
- an interval row (an interval stream's) with a NULL end, an end before its start or an end equal to it is
  quarantined (`null_end`, `end_before_start`, `empty_interval`); its start is its event time for the other
  rules, except that its natural key is its key, start and end (`StreamSchema.natural_key`);
- a run may add one more rule (`Admission`): a micro-batch quarantines events at or before their key's processed
  time (`late`), a backfill the events outside its range.

Every quarantined row keeps the raw row as JSON. The report's counts satisfy
`rows_in = events + quarantined + duplicates_dropped`. A file whose columns are not the stream's (one missing,
or one the schema does not declare) is refused whole with an error naming them, as Delta's schema enforcement
refuses such a write; an empty file, or one with only a header, is an empty micro-batch. Each CSV file is read by
its own header line, and each Parquet file by its own schema, whatever the other files of its path
(`pielake.lake.inputs`).

The admitted events are staged as the query's own (`_staging/events_<query>`: queries over one stream ingest side
by side) for the events gate; the stage after it appends them to the stream's table (`admit_events`), leaving out
any that another query's run appended meanwhile (`publish_events`).
"""

from __future__ import annotations

import codecs
import csv
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import reduce
from pathlib import Path

import pyspark.sql.functions as F
import yaml
from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession, Window
from pyspark.sql import types as T

from pielake import vocabulary as V
from pielake.engine.checkpoints import hold, release
from pielake.engine.session import settings_within
from pielake.errors import PielakeError, QueryError, spark_said
from pielake.lake.delta import Lake, LakeError, quoted_identifier
from pielake.lake.inputs import (
    JSON_DOCUMENT,
    URL,
    CsvHead,
    FileGroup,
    RepeatedKey,
    Shared,
    csv_head,
    first_records,
    first_repeated_key,
    first_undecoded,
    header_groups,
    json_groups,
    local_files,
    nanosecond_columns,
    schema_groups,
    spans_lines,
)
from pielake.lake.lock import exclusive
from pielake.lake.results import results_table
from pielake.pipeline.job import RunRequest, StageResult, StepContext, events_table, quarantine_table, timed
from pielake.pipeline.notes import check_definition
from pielake.pipeline.scope import mark_unprocessed
from pielake.pipeline.upstream import mirrors, read_upstream, rebuild_hint
from pielake.query.analyzer import QueryPlan, bind
from pielake.query.ast import TIME_UNIT_SECONDS
from pielake.query.tokens import column_name
from pielake.spark.zones import check_zones
from pielake.streams import (
    DECIMAL_COMMA,
    DEFAULT_TIME_COLUMN,
    FLOATING,
    FORMATS,
    INTEGER_TYPES,
    SCHEMAS_DIR,
    TIMESTAMP_UNIT,
    UNIX_TIME,
    UTF_8,
    SchemaError,
    StreamSchema,
    check_time_columns,
    closest_column,
    declared_file,
    declared_schema,
    fractional,
    lake_streams,
    load_schema,
    save_schema,
    schema_column,
    schema_file,
    to_mapping,
    where_to_declare,
)

PAYLOAD = "__payload"
OLD_PAYLOAD = "__old"  # the payload an ingested event at the same key and time has
NO_VERSION = -1  # the stream's table did not exist yet
ADMITTED = "__admitted"
PAYLOADS, COPY = "__payloads", "__copy"  # how many payloads a row's natural key has in the file; which copy it is
DROPPED = "__dropped"  # an exact duplicate: neither staged nor quarantined, counted
CONFLICTING = "conflicting_duplicate"  # the reason of every copy of a natural key with several payloads in the input
UNIX_DIGITS = "DECIMAL(24,6)"  # a Unix time to the microsecond, exactly (a DOUBLE cast to a time is not)
ROWS_PER_EVENTS_FILE = 1_000_000
MIN_ROWS_PER_CORE = 100_000  # fewer events a core than this are one file, as a micro-batch's are
SEPARATORS = (";", "\t", "|")  # a CSV's separators besides the comma, read from its header line
# Where Spark keeps a line that does not read as one row of the file's columns (a JSON line that is no object, a CSV
# line of more or fewer fields than its header): the whole line, the row's other columns as far as they parse.
CORRUPT_RECORD = "_corrupt_record"
MALFORMED = "__malformed"  # a row's line, where it is malformed
MALFORMED_REASON = "malformed: the line does not read as one row of the file's columns"
# How exporters write a missing value in a text file: R's `NA`, `N/A`, SQL exports' `NULL` and `\N`.
MISSING_TOKENS = ("NA", "N/A", "NULL", "null", "\\N")
REPLACEMENT_CHARACTER = "\ufffd"  # what Spark's UTF-8 decoder puts in place of bytes it cannot decode


@dataclass(frozen=True)
class Admission:
    """A rule of the run's own: `judge` adds a boolean `__admitted` column; refused rows get `reason`."""

    reason: str
    judge: Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class IngestReport:
    """Where every row of the input went: `rows_in = events + quarantined + duplicates_dropped`."""

    rows_in: int
    events: int
    quarantined: int
    duplicates_dropped: int
    horizon_marks: int = 0  # a matches stream's (`pielake.pipeline.upstream`): staged, but no input rows
    reasons: str = ""  # the quarantined rows by rule, as a person reads them (`_by_rule`)

    def rows(self) -> dict[str, int]:
        """As the ingest stage reports its rows."""
        marks = {HORIZON_MARKS: self.horizon_marks} if self.horizon_marks else {}
        return {ROWS_IN: self.rows_in, STAGED_EVENTS: self.events, QUARANTINED: self.quarantined,
                DUPLICATES_DROPPED: self.duplicates_dropped, **marks}

    @classmethod
    def sum(cls, reports: Iterable[IngestReport]) -> IngestReport:
        """Where the rows of several streams' inputs went, together (each stream's reasons are its own)."""
        total: Counter[str] = Counter()
        for report in reports:
            total.update(report.rows())  # keeps a count of 0, which `Counter`'s `+` drops
        return cls.of(total)

    @classmethod
    def of(cls, rows: dict[str, int]) -> IngestReport:
        return cls(rows[ROWS_IN], rows[STAGED_EVENTS], rows[QUARANTINED], rows[DUPLICATES_DROPPED],
                   rows.get(HORIZON_MARKS, 0))

    def text(self) -> str:
        marks = f"; {self.horizon_marks} horizon marks" if self.horizon_marks else ""
        return (f"{self.rows_in} rows in = {self.events} events + {self.quarantined} quarantined + "
                f"{self.duplicates_dropped} exact duplicates dropped{marks}")


ROWS_IN, STAGED_EVENTS, QUARANTINED, DUPLICATES_DROPPED, HORIZON_MARKS = (
    "rows in", "staged events", "quarantined", "exact duplicates dropped", "horizon marks")


def read_raw(spark: SparkSession, path: str, fmt: str, *, typed: bool = False, encoding: str = UTF_8,
             skip_lines: tuple[int, ...] = ()) -> DataFrame:
    """The file as it is, under plain column names (`_with_plain_names`); CSV columns stay strings so that every
    cast failure can be seen and reported, unless `typed` (Spark infers their types, which is how a stream without
    a schema gets one). A line that does not read as a row is kept whole in `CORRUPT_RECORD`, for ingest to
    quarantine. A file that cannot be read is a LakeError naming it, whichever the purpose. CSV files are read in
    `encoding`, without the lines `skip_lines` numbers (the stream's, `StreamSchema.encoding` and `skip_lines`)."""
    if fmt not in FORMATS:
        raise LakeError(f"unknown input format '{fmt}'; use one of {', '.join(FORMATS)}")
    if fmt == "csv" and skip_lines and URL.match(path):
        raise LakeError(f"cannot read {path}: its stream skips lines of its files (skip_lines), which pielake finds "
                        "in local files only; copy the files to this machine, or land them without those lines")
    return _with_plain_names(_read_as(spark, path, fmt, typed, encoding=encoding, skip_lines=skip_lines), path)


def _read_as(spark: SparkSession, path: str, fmt: str, typed: bool, *, encoding: str,
             skip_lines: tuple[int, ...]) -> DataFrame:
    """The files of `path` in `fmt`, each group of one layout read as that layout must be (`pielake.lake.inputs`)."""
    try:
        if fmt == "json":
            return _read_by_group(path, json_groups(path), lambda group: _read_json_files(spark, group, typed), typed)
        if fmt == "csv":
            return _read_by_group(path, header_groups(path, skip_lines),
                                  lambda group: _read_csv_files(spark, group, typed, encoding), typed)
        return _read_by_group(path, schema_groups(path), lambda group: _read_parquet_files(spark, group), typed)
    except AnalysisException as error:  # no such path, or a file Spark cannot read as `fmt`
        said = spark_said(error)
        repeated = first_repeated_key(path) if fmt == "json" and "COLUMN_ALREADY_EXISTS" in said else None
        if repeated is not None:
            raise LakeError(_repeated_key_said(repeated)) from None
        hint = NANOSECONDS_HINT if "TIMESTAMP(NANOS" in said else ""
        raise LakeError(f"cannot read {path} as {fmt}: {said}{hint}") from None


def _repeated_key_said(repeated: RepeatedKey) -> str:
    """A JSON key Spark reads as one column twice, where: within a record no column can hold both of its values,
    and which one the writer meant is not the reader's to guess; spelled in two cases by two records, the two are
    one column (Spark tells columns apart without their case) that Spark will not name two ways."""
    where = f"its record on line {repeated.line} ({repeated.text})" if repeated.line else "a record of it"
    said = f"cannot read {repeated.file} as json: {where} names the key '{repeated.key}'"
    column = repeated.column
    if repeated.earlier:
        return (f"{said}{f' (col {column})' if column else ''}, and {repeated.earlier}: keys are told apart "
                "without their case, so the two are one column; spell each key one way in every record, and land "
                "the files again")
    return (f"{said} twice{f' (the second at col {column})' if column else ''}, and a column holds one value of a "
            "record (keys are told apart without their case); write each key once in a record, and land the file "
            "again")


def _read_json_files(spark: SparkSession, group: FileGroup[str | None], typed: bool) -> DataFrame:
    """JSON files of one layout: JSON Lines, a record a line, split among tasks by lines; or each file one JSON
    value over many lines (a pretty-printed array of records), read whole, one task a file (Spark's `multiLine`),
    where a reader of lines would read no record (`JSON_DOCUMENT`). A URL's files are JSON Lines.

    Typed, ISO-8601 text is a time (as a CSV file's is), so a stream typed from a file that pandas or a JSON
    encoder wrote gets TIMESTAMPs; untyped, text stays text, which ingest casts to the stream's type."""
    return _reader(spark, group).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_RECORD) \
        .option("inferTimestamp", str(typed).lower()) \
        .option("multiLine", str(group.shared == JSON_DOCUMENT).lower()).json(group.paths)


# A local file is read through Hadoop's raw local file system, which opens the file alone. Its default one also
# opens the file's checksum beside it, `.<name>.crc`, a name Hadoop cannot form where the file's holds a `:`
# (`events 2026-12-02T10:00:00.csv`, as log shippers name files): every such read failed. A reader's options reach
# the Hadoop configuration of its read, and the uncached file system is one of that configuration.
RAW_LOCAL_FILES = {"fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem", "fs.file.impl.disable.cache": "true"}


def _reader(spark: SparkSession, group: FileGroup[Shared | None]) -> DataFrameReader:
    """Spark's reader of a group's files (`RAW_LOCAL_FILES`). Under a folder they are read with it as their base,
    so that the value of a `name=value` subfolder is a column of the rows in it, as when Spark reads the folder
    whole."""
    reader = spark.read.options(**RAW_LOCAL_FILES)
    return reader.option("basePath", group.base) if group.base else reader


def _with_plain_names(raw: DataFrame, path: str) -> DataFrame:
    """The file's columns under plain names, which a query reads and a Delta table holds: a header's `Type of
    mobile`, `# Timestamp` or `speed km/h`, as a spreadsheet or a public data set writes it, is `Type_of_mobile`,
    `Timestamp` or `speed_km_h` (`plain_name`); a plain name stays as it is. Two columns whose names become one
    are refused, naming both."""
    named = {c: column_name(c) for c in raw.columns}
    seen: dict[str, str] = {}
    for original, plain in named.items():
        other = seen.setdefault(plain.lower(), original)
        if other != original:
            raise LakeError(f"the columns '{other}' and '{original}' of {path} are both read as '{plain}' (a stream's "
                            "columns have plain names, and case does not tell them apart); rename one of them")
    renamed = {c: plain for c, plain in named.items() if c != plain}
    return raw.withColumnsRenamed(renamed) if renamed else raw


NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
JAVA_CHARSETS = "spark.sql.legacy.javaCharsets"
SHOWN_REASONS = 3  # the rules of a run's quarantined rows its output names; the table holds every row's
DRIVER_REASONS = 10_000  # quarantined rows whose reasons are counted on the driver (`_by_rule`)
NANOSECONDS_HINT = ("; its times are in nanoseconds (as pandas writes them unless told otherwise), which pielake reads "
                    "from local files only: copy the file to this machine, or write its times in microseconds "
                    "(`df.to_parquet(path, coerce_timestamps='us', allow_truncated_timestamps=True)`)")


def _read_parquet_files(spark: SparkSession, group: FileGroup[frozenset[tuple[str, str]] | None]) -> DataFrame:
    """Parquet files; a column of times in nanoseconds (Parquet's TIMESTAMP(NANOS), as pandas writes a time unless
    told otherwise) as the TIMESTAMP of its microsecond, Spark's precision.

    Spark reads no such column as a time: its read fails. Where a local file holds one, the session reads those
    columns as the whole numbers they are (Spark's `nanosAsLong`; the read consults it again when it runs, so it
    stays set for the session) and each becomes a TIMESTAMP, its sub-microsecond part dropped (two events of a key
    that then share a time are duplicates, as any two are). Other files are read with it unset: their schema,
    which Spark reads from a footer as the read is built, fails on a time in nanoseconds rather than taking it for
    a number (a URL's files are not looked into), and the failure names the fix (`NANOSECONDS_HINT`)."""
    nanos = nanosecond_columns(group.shared or frozenset())
    if not nanos:
        with settings_within(spark, {NANOS_AS_LONG: "false"}):
            return _reader(spark, group).parquet(*group.paths)
    spark.conf.set(NANOS_AS_LONG, "true")
    raw = _reader(spark, group).parquet(*group.paths)
    return raw.withColumns({c: _microsecond_time(F.col(c)) for c in raw.columns if c.lower() in nanos})


def _microsecond_time(nanoseconds: Column) -> Column:
    """Nanoseconds since the epoch as the TIMESTAMP of their microsecond (the floor: exact, in decimals; a
    BIGINT of nanoseconds is beyond a DOUBLE's exact integers)."""
    return F.timestamp_micros(F.floor(nanoseconds.cast("decimal(20,0)") / F.lit(1000)).cast("bigint"))


def _read_by_group(path: str, groups: list[FileGroup[Shared]], read: Callable[[FileGroup[Shared | None]], DataFrame],
                   typed: bool) -> DataFrame:
    """The files of `path`, which `pielake.lake.inputs` groups by header line (CSV), schema (Parquet) or layout
    (JSON): in one read where they are one group, or where they are a URL's, which Spark alone lists. A schema is
    inferred (`typed`) from the first group alone, as from a first file. Otherwise each group is read on its own,
    its values as text, which ingest casts to the stream's types (quarantining a value that does not cast, as in a
    CSV file), and the groups are joined by column name; groups whose columns differ are refused, naming a file of
    each, as a file whose columns are not the stream's is. Every read's nested records are flattened first
    (`_flattened`)."""
    def read_flat(group: FileGroup[Shared | None]) -> DataFrame:
        return _flattened(read(group))

    if not groups:  # a URL's files, which Spark lists
        return read_flat(FileGroup((path,), None))
    if len(groups) == 1 or typed:
        return read_flat(groups[0])
    frames = [_in_text(read_flat(group)) for group in groups]
    columns = [sorted(c.lower() for c in file_columns(frame)) for frame in frames]
    if any(names != columns[0] for names in columns):
        raise LakeError(f"the files of {path} do not have the same columns: " + "; ".join(
            f"{group.files[0]} has {', '.join(file_columns(frame))}"
            for group, frame in zip(groups, frames, strict=True))
            + "; give every file of a stream the stream's columns (in any order)")
    # A group with a malformed line has `CORRUPT_RECORD`, the others not: theirs is NULL.
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def _flattened(raw: DataFrame) -> DataFrame:
    """Each field of a nested record a column of its own, named by its path (`position.lat`, which
    `_with_plain_names` makes `position_lat`), and a list or a map its JSON text, as IoT hubs, AIS feeds and
    message queues write an event: a stream's columns hold one value each, and no value is left behind."""
    leaves = list(_leaves(raw.schema, ()))
    if all(len(path) == 1 and not isinstance(kind, T.ArrayType | T.MapType) for path, kind in leaves):
        return raw
    return raw.select(*(_as_one_value(reduce(lambda column, name: column.getField(name), path[1:],
                                             F.col(quoted_identifier(path[0]))), kind).alias(".".join(path))
                        for path, kind in leaves))


def _leaves(schema: T.StructType, parents: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], T.DataType]]:
    """The path and type of every field of `schema` that is not itself a record, in the schema's order."""
    for field in schema.fields:
        path = (*parents, field.name)
        if isinstance(field.dataType, T.StructType) and field.dataType.fields:
            yield from _leaves(field.dataType, path)
        else:
            yield path, field.dataType


def _as_one_value(column: Column, kind: T.DataType) -> Column:
    """A list or a map as its JSON text; any other value as it is."""
    return F.to_json(column) if isinstance(kind, T.ArrayType | T.MapType) else column


def file_columns(raw: DataFrame) -> list[str]:
    """The columns the file holds, in its order: not Spark's `CORRUPT_RECORD`."""
    return [c for c in raw.columns if c != CORRUPT_RECORD]


def _in_text(frame: DataFrame) -> DataFrame:
    """Every column of `frame` as STRING, as a CSV file's columns are read."""
    return frame.select(*(F.col(c).cast("string").alias(c) for c in frame.columns))


def _read_csv_files(spark: SparkSession, group: FileGroup[CsvHead | None], typed: bool, encoding: str) -> DataFrame:
    """CSV files of one head (`CsvHead`: a header line, and any lines their stream skips), separated by commas, or by
    the one of `SEPARATORS` the header holds when read with commas it is one column: a stream's columns have plain
    names (`schema_column`), so a header that reads as one name holding a separator is a file of another
    separator, never a one-column stream.

    Fields are quoted as RFC 4180 (and Excel, pandas, Python's csv) write them: a quote inside a quoted field is
    doubled, and a quoted field may hold a line break. Files where one does are read whole, one task a file (Spark's
    `multiLine`), since a record of theirs spans lines; others are split among tasks by lines.

    Read as text (not `typed`), every line is read against the header's columns: a line of more or fewer fields
    is kept whole in `CORRUPT_RECORD`, where Spark would otherwise drop its extra fields or read its missing ones
    as empty, and ingest quarantines it. Files whose stream skips lines (a logger's title before the header, units
    after it) are read against the header their head holds, without those lines (`_without_lines`), and as text
    even when `typed`: Spark would type their columns from the skipped lines too, so the inference types them from
    the rows (`_typed_text_columns`).

    Spark 4 reads CSV in a few encodings of its own choice (UTF-8, ISO-8859-1, ...) unless the session lets it use
    Java's (`JAVA_CHARSETS`, which the read consults again when it runs, so it stays set for the session): a file
    in another, as `windows-1252`, is read so."""
    head = group.shared
    whole_files = any(spans_lines(path) for path in group.files)
    skipped = head.skipped if head else ()
    if codecs.lookup(encoding).name != codecs.lookup(UTF_8).name:
        spark.conf.set(JAVA_CHARSETS, "true")

    def read(separator: str, columns: list[str] | None = None) -> DataFrame:
        reader = _reader(spark, group).option("header", str(not skipped).lower()) \
            .option("inferSchema", str(typed).lower()).option("mode", "PERMISSIVE").option("sep", separator) \
            .option("columnNameOfCorruptRecord", CORRUPT_RECORD).option("escape", '"') \
            .option("multiLine", str(whole_files).lower()).option("encoding", encoding)
        if columns is not None:
            reader = reader.schema(T.StructType([T.StructField(c, T.StringType()) for c in [*columns, CORRUPT_RECORD]]))
        return reader.csv(group.paths)

    if head and skipped:
        separator = _line_separator(head.header, encoding)
        names = _fields(head.header, separator, encoding)
        _check_header(names, group)
        raw = _without_lines(read(separator, [name or f"_c{i}" for i, name in enumerate(names)]),
                             [head.header, *skipped], separator, encoding)
        return _without_trailing_field(raw, names, separator)
    raw = read(",")
    separator = _separator(raw.columns)
    raw = raw if separator == "," else read(separator)
    names = _fields(head.header, separator, encoding) if head else []  # a URL's files are not looked into
    _check_header(names, group)
    if not raw.columns:  # an empty file has no header to read lines against
        return raw
    if not typed:
        raw = read(separator, raw.columns)
    return _without_trailing_field(raw, names, separator)


def _separator(names_read_with_commas: list[str]) -> str:
    """The separator of a header that reads as these names with commas: a comma, unless it reads as one name
    holding one of `SEPARATORS`."""
    header = names_read_with_commas[0] if len(names_read_with_commas) == 1 else ""
    return next((s for s in SEPARATORS if s in header), ",")


def _line_separator(line: bytes, encoding: str) -> str:
    """The separator of a header line read in Python (`_separator` of its fields read with commas)."""
    return _separator(_fields(line, ",", encoding))


def _fields(line: bytes, separator: str, encoding: str) -> list[str]:
    """The fields of a line of a CSV file as written, quoted as the file's reader reads them."""
    return next(csv.reader([line.decode(encoding, "replace")], delimiter=separator), [])


def _without_lines(raw: DataFrame, lines: list[bytes], separator: str, encoding: str) -> DataFrame:
    """The rows read from a file's lines less those read from `lines` (its header and the lines its stream skips).
    Spark's reader of lines does not know a line's number, so the rows are told by what they hold: a line of as
    many fields as the header is read as those fields (an empty one NULL, as Spark reads it), any other kept whole
    in `CORRUPT_RECORD`. A line that repeats one of them (files joined end to end) is one of them too; such lines
    hold no event (their times are names and units), so no row is lost that ingest would not quarantine."""
    columns = file_columns(raw)

    def read_from(line: bytes) -> Column:
        values = _fields(line, separator, encoding)
        if len(values) != len(columns):
            return F.col(CORRUPT_RECORD).eqNullSafe(line.decode(encoding, "replace"))
        same = (F.col(c).eqNullSafe(F.lit(value or None)) for c, value in zip(columns, values, strict=True))
        return reduce(operator.and_, same, F.col(CORRUPT_RECORD).isNull())

    return raw.where(~reduce(operator.or_, map(read_from, lines)))


def _without_trailing_field(raw: DataFrame, names: list[str], separator: str) -> DataFrame:
    """The rows without the nameless last field of a file whose every line ends in a separator, as some exporters
    write them (`a,b,`): Spark reads it as a column `_c<n>`, which no stream has. A line that holds a value there
    holds more fields than its header names, and is kept whole in `CORRUPT_RECORD` (as its fields, joined by the
    separator), for ingest to quarantine as malformed."""
    if len(names) < 2 or names[-1].strip():
        return raw
    fields, nameless = raw.columns[:len(names) - 1], raw.columns[len(names) - 1]
    if CORRUPT_RECORD in raw.columns:
        line = F.concat_ws(separator, *(F.coalesce(F.col(c), F.lit("")) for c in [*fields, nameless]))
        raw = raw.withColumn(CORRUPT_RECORD, F.coalesce(F.col(CORRUPT_RECORD),
                                                        F.when(F.col(nameless).isNotNull(), line)))
    return raw.drop(nameless)


def _check_header(names: list[str], group: FileGroup[CsvHead | None]) -> None:
    """A header that names a column twice is refused, naming it: Spark would read the two as other names (`temp`
    twice as `temp2` and `temp3`, by position), which neither the query nor the stream's schema knows."""
    first: dict[str, int] = {}
    for position, name in enumerate(names, 1):
        earlier = first.setdefault(name.strip().lower(), position)
        if name.strip() and earlier != position:
            raise LakeError(f"the header of {group.files[0]} names the column '{name.strip()}' twice (its fields "
                            f"{earlier} and {position}); rename one of them")


def _check_columns(raw: DataFrame, stream: StreamSchema, kept: Path | None) -> None:
    """The file's columns are the stream's (in any order and case), or the whole file is refused. `kept`: where
    the lake keeps the schema of a stream it already holds events of, whose columns are then fixed."""
    declared = {n.lower() for n, _ in stream.file_columns}
    columns = file_columns(raw)
    present = {c.lower() for c in columns}
    missing = [n for n, _ in stream.file_columns if n.lower() not in present]
    extra = [c for c in columns if c.lower() not in declared]
    fixed = f"the stream's columns are fixed since its first run ({kept})"
    if missing:
        listed = _listed_records(raw)
        if listed is not None:
            fix = _listed_hint(listed, "FILE")
        elif kept:
            fix = f"{fixed}: give the file every one of them"
        else:
            fix = ("give the file those columns, or declare the stream as the file is in "
                   f"{where_to_declare(stream.name)}")
        raise LakeError(f"the input has no column(s) {', '.join(missing)} declared by stream {stream.name}; "
                        f"it has {', '.join(columns) or 'none'}; {fix}")
    if extra:
        fix = f"{fixed}: drop them from the file" if kept else \
            f"add them to the stream's schema ({where_to_declare(stream.name)}) or drop them from the file"
        raise LakeError(f"the input has column(s) {', '.join(extra)} that stream {stream.name} does not declare; "
                        + fix)


def _cast(raw: DataFrame, stream: StreamSchema, kept: Path | None) -> DataFrame:
    """The file's rows in the stream's types, each with the row as read (`raw`: every column, an empty one as
    null, so that a quarantined row shows what it lacks; a malformed row's line) and its values as text, which
    the reasons quote."""
    if not raw.columns:  # an empty file: Spark sees neither rows nor a header
        raw = raw.sparkSession.createDataFrame([], _as_text(stream))
    _check_columns(raw, stream, kept)
    present = {c.lower(): c for c in file_columns(raw)}
    typed = []
    kinds = {f.name: f.dataType for f in raw.schema.fields}
    text = {name for name, kind in kinds.items() if isinstance(kind, T.StringType)}
    # The columns a time format reads: text, and of Unix time numbers too (a file's TIMESTAMPs are times already).
    readable = (T.StringType, T.NumericType) if stream.time_format == UNIX_TIME else T.StringType
    fields = {name: _field(F.col(present[name.lower()]), present[name.lower()] in text, kind)
              for name, kind in stream.file_columns}
    sources = dict(present)
    if stream.time_from:  # the time's text, from the file's columns that write it (`StreamSchema.time_from`)
        fields[stream.time_column] = _joined_time(fields, stream.time_from)
        kinds[stream.time_column], sources[stream.time_column.lower()] = T.StringType(), stream.time_column
        text.add(stream.time_column)
    for name, kind in stream.columns:
        source = sources[name.lower()]
        if name in stream.time_columns and stream.time_unit == TIMESTAMP_UNIT:
            written = stream.time_format if isinstance(kinds[source], readable) else None
            time = _as_time(fields[name], written, is_text=source in text)
            typed.append(_from_wall_clock(time, fields[name], kinds[source], stream).alias(name))
        elif source in text and fractional(kind) and stream.decimal_mark == DECIMAL_COMMA:
            typed.append(_with_decimal_comma(fields[name]).try_cast(kind).alias(name))
        elif source in text and kind == "TIMESTAMP":
            typed.append(_as_timestamp(fields[name]).alias(name))
        else:
            typed.append(fields[name].try_cast(kind).alias(name))
    line = F.col(CORRUPT_RECORD) if CORRUPT_RECORD in raw.columns else F.lit(None).cast("string")
    as_read = F.to_json(F.struct(*(F.col(c) for c in present.values())), {"ignoreNullFields": "false"})
    return raw.select(*typed, F.coalesce(line, as_read).alias(V.RAW), line.alias(MALFORMED),
                      *(fields[n].cast("string").alias(f"__raw_{n}") for n in stream.column_names))


def _joined_time(fields: dict[str, Column], parts: tuple[str, ...]) -> Column:
    """The text of a time a file writes in several columns (a date, a time of day), joined by a space in their
    order, as one pattern reads it (`dd.MM.yyyy HH:mm:ss`); NULL where one of them is missing, which leaves the
    row without a time."""
    values = [F.trim(fields[part].cast("string")) for part in parts]
    present = reduce(lambda acc, value: acc & value.isNotNull(), values, F.lit(True))
    return F.when(present, F.concat_ws(" ", *values))


def _field(source: Column, is_text: bool, kind: str) -> Column:
    """A file's field as the stream's column reads it: a text field that holds a missing-value token (`NA`,
    `NULL`, ...) is NULL in a column of another type than text (docs/semantics.md §1), as an empty one is, and
    not a value that fails to cast."""
    if not is_text or kind == "STRING":
        return source
    return F.when(~_missing_value(source), source)


def _missing_value(text: Column) -> Column:
    """Whether a text field holds one of the tokens exporters write a missing value as (`MISSING_TOKENS`)."""
    return F.trim(text).isin(*MISSING_TOKENS)


def _with_decimal_comma(text: Column) -> Column:
    """A number as a stream whose files write a decimal comma writes it (`12,5`), with a point for the comma. One
    that also holds a point is left as it is, to fail its cast: `1.234,5`, as the comma's locales write a
    thousands point, is quarantined rather than misread."""
    return F.when(text.contains("."), text).otherwise(F.translate(text, DECIMAL_COMMA, "."))


def _as_time(value: Column, written: str | None, *, is_text: bool) -> Column:
    """A time as a TIMESTAMP: as the stream's schema says its files write it (`time.format`: Unix time, a number
    of seconds read exactly to the microsecond, or text of a Spark datetime pattern), else ISO-8601 text
    (`_as_timestamp`) or a value of another type as Spark casts it; NULL where it does not read."""
    if written == UNIX_TIME:
        return F.timestamp_micros(F.round(value.try_cast(UNIX_DIGITS) * F.lit(1_000_000)).try_cast("BIGINT"))
    if written is not None:
        return F.try_to_timestamp(value, F.lit(written))
    return _as_timestamp(value) if is_text else value.try_cast("TIMESTAMP")


# A time of day alone (`08:05:00`, `T08:05`), as loggers write a reading's time beside its date in a column of its
# own. Spark reads it as that time of the day it reads it on, so one file would hold other instants on another
# day: it names no instant, and reads as none.
TIME_OF_DAY = r"^\s*T?[0-9]{1,2}:[0-9]{2}"


def _is_time_of_day(text: Column) -> Column:
    """Whether `text` is a time of day alone (`TIME_OF_DAY`)."""
    return text.cast("string").rlike(TIME_OF_DAY)


def _as_timestamp(text: Column) -> Column:
    """Text as Spark casts it to a TIMESTAMP; NULL where it is a time of day alone. A value of another type (a
    Parquet file's TIMESTAMP, a number) is no text to ask."""
    return F.when(~_is_time_of_day(text), text.try_cast("TIMESTAMP"))


# The end of time text that says its zone, as Spark reads it: a time of day, then an offset (`+02:00`, `-0530`,
# `+02`) or a zone's name (`Z`, `UTC`, `Europe/Paris`).
SAYS_ZONE = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[+-]\d{2}(?::?\d{2})?|[A-Za-z][\w/+:-]*)\s*$"
ZONE_LETTERS = re.compile(r"[VzOXxZ]")  # the letters of a Spark datetime pattern that read a zone or an offset


def _from_wall_clock(time: Column, value: Column, kind: T.DataType, stream: StreamSchema) -> Column:
    """A time as the instant it is where the stream's files write it as the wall clock of the stream's zone
    (`time.zone`): text that carries no zone (ISO-8601 without an offset, or a pattern without a zone's letters),
    or a time without a zone (Parquet's `timestamp_ntz`), both read as UTC first. Text that says its zone, a file's
    TIMESTAMP and Unix time are instants already."""
    if stream.time_zone is None or isinstance(kind, T.TimestampType):  # a schema's zone is never of Unix time
        return time
    instant = F.to_utc_timestamp(time, stream.time_zone)
    if not isinstance(kind, T.StringType):
        return instant
    if stream.time_format is None:
        return F.when(value.rlike(SAYS_ZONE), time).otherwise(instant)
    pattern = re.sub(r"'[^']*'", "", stream.time_format)  # a quoted letter is text, not a field
    return time if ZONE_LETTERS.search(pattern) else instant


def _check_time_reading(spark: SparkSession, stream: StreamSchema,
                        settings: tuple[str, str] = ("time.format", "time.zone")) -> None:
    """Spark tells a pattern or a zone it does not take only as it reads a time with it, mid-run: one time read
    here (a small job) refuses it before, naming where they were given (`settings`: the schema's fields, or a
    run's options) and what Spark says is wrong. A stream with neither runs no job."""
    pattern = stream.time_format if stream.time_format not in (None, UNIX_TIME) else None
    if pattern is None and stream.time_zone is None:
        return
    time = F.lit("2000-01-01").cast("timestamp") if pattern is None else \
        F.try_to_timestamp(F.lit("2000-01-01"), F.lit(pattern))
    try:
        spark.range(1).select(F.to_utc_timestamp(time, stream.time_zone or "UTC")).collect()
    except Exception as error:  # Spark's INVALID_DATETIME_PATTERN, INVALID_TIMEZONE and their kin
        said = spark_said(error)
        named = " with its ".join(f"{key} '{value}'" for key, value in zip(settings, (pattern, stream.time_zone),
                                                                          strict=True) if value)
        raise SchemaError(f"stream {stream.name}'s {named} is not how Spark reads times: {said}; see Spark's "
                          "datetime patterns (dd/MM/yyyy HH:mm:ss, yyyy-MM-dd HH:mm:ss.SSS) and zones "
                          "(Europe/Berlin, +02:00)") from None


def _reason(stream: StreamSchema) -> Column:
    """The first rule a row breaks, or NULL for a good row."""
    checks = [(F.col(MALFORMED).isNotNull(), F.lit(MALFORMED_REASON))]
    for key in stream.keys:
        checks.append((F.col(f"__raw_{key}").isNull(), F.lit(f"null_key: {key}")))
    checks.append((F.col(f"__raw_{stream.time_column}").isNull(), F.lit("null_time")))
    for name, kind in stream.columns:
        raw = F.col(f"__raw_{name}")
        checks.append((F.contains(raw, F.lit(REPLACEMENT_CHARACTER)), F.concat(F.lit(f"invalid_utf8: {name}="), raw)))
        checks.append((raw.isNotNull() & F.col(name).isNull(), F.concat(F.lit(f"cast_failed: {name}="), raw)))
        if kind in FLOATING:
            infinite = F.abs(F.col(name)) == F.lit(float("inf"))
            checks.append((F.isnan(F.col(name)) | infinite, F.concat(F.lit(f"not_finite: {name}="), raw)))
    checks.extend(_interval_checks(stream))
    return reduce(lambda acc, check: F.when(check[0], check[1]).otherwise(acc), reversed(checks),
                  F.lit(None).cast("string"))


def _interval_checks(stream: StreamSchema) -> list[tuple[Column, Column]]:
    """An interval row ends after it starts (docs/semantics.md §1); a zero-length row holds at no time."""
    if stream.end_column is None:
        return []
    start, end = F.col(stream.time_column), F.col(stream.end_column)
    return [(F.col(f"__raw_{stream.end_column}").isNull(), F.lit("null_end")),
            (end < start, F.lit("end_before_start")),
            (end == start, F.lit("empty_interval"))]


def ingest_rows(lake: Lake, raws: list[DataFrame], stream: StreamSchema, run_id: str, *, staged_as: str,
                admission: Admission | None = None, marks: DataFrame | None = None,
                replaces: bool = False) -> IngestReport:
    """Stage the good events of `raws` (files as `read_raw` reads them) as `staged_as`, for `events_<stream>`;
    write the bad rows to `quarantine_<stream>`. The staged table's note is the version of the stream's table
    they were compared with (`publish_events` reads it). A matches stream's horizon marks (`marks`,
    `pielake.pipeline.upstream`) are staged with the events, unchecked: they are no input, but the run's own.
    Rows that will `replace` the stream's table are compared with nothing in it.

    Every row is judged once (`_judge`) and the verdicts are held: the staged events and the quarantined rows are
    both read from them, so the window over the natural key and the join with the ingested events run once a
    run, not once for each output. What is held is narrow (the stream's columns, the verdict, and the raw row
    only of a quarantined one): holding every cast row as well, so that the join's time range is not read from
    the file again, made a 10^6-row ingest slower, not faster (docs/performance.md). The raw rows of copies that
    conflict within the input are read from it again, only when it has any (`_with_raw_rows`)."""
    if not raws:
        raws = [lake.spark.createDataFrame([], _as_text(stream))]
    table = events_table(stream)
    held = lake.exists(table)
    kept = schema_file(lake_streams(lake.root), stream.name) if held else None
    _check_time_reading(lake.spark, stream)  # once, before a row of the files is read
    casts = [_cast(raw, stream, kept) for raw in raws]
    checked = reduce(DataFrame.unionByName, casts).withColumn(V.REASON, _reason(stream))
    seen = lake.version(table) if held else NO_VERSION
    judged, rows_in = hold(_judge(lake, stream, checked, NO_VERSION if replaces else seen, admission)
                           .select(*stream.column_names, V.REASON, DROPPED,
                                   F.when(F.col(V.REASON).isNotNull(), F.col(V.RAW)).alias(V.RAW)))
    horizons = 0
    try:
        # The staged events count what they wrote: counting the rows before would compute them once more.
        staged = judged.filter(F.col(V.REASON).isNull() & ~F.col(DROPPED)).select(*stream.column_names)
        if marks is not None:
            marks, horizons = hold(marks)
            staged = staged.unionByName(marks)
        written = lake.staging.overwrite(staged.withColumn(V.RUN_ID, F.lit(run_id)), staged_as, commit_note=str(seen))
        bad = judged.filter(F.col(V.REASON).isNotNull())
        if written - horizons < rows_in:  # some rows were not staged: quarantined, or dropped as duplicates
            bad = _with_raw_rows(bad, checked, stream)
        bad = bad.select(V.REASON, V.RAW, F.lit(run_id).alias(V.RUN_ID),
                         F.current_timestamp().alias("quarantined_at"))
        quarantined, reasons = _quarantine(lake, bad, stream, run_id)
    finally:
        release(judged)
        if marks is not None:
            release(marks)
    events = written - horizons
    return IngestReport(rows_in, events, quarantined, rows_in - events - quarantined, horizons, reasons)


def _judge(lake: Lake, stream: StreamSchema, checked: DataFrame, version: int,
           admission: Admission | None) -> DataFrame:
    """Every row of `checked` with its verdict: the reason it is quarantined (`__reason`), or `__dropped` for an
    exact duplicate, or neither for an event to stage. The rules apply in this order:
    1. a row that broke a rule of `_reason` keeps that reason;
    2. within the file, one payload per natural key keeps its first copy (the others are dropped); several
       payloads are all `conflicting_duplicate`;
    3. against the events `version` of the stream's table holds, an identical event is dropped, a different one
       is a `conflicting_duplicate`;
    4. the run's own rule (`admission`) refuses what is left with its reason.

    The window over the natural key moves and sorts every row, so it carries the raw row (`raw`) only of a row
    that rule 1, 3 or 4 may quarantine, which most rows of a large input are not (docs/performance.md). Rule 2's
    copies are known only after the window: `_with_raw_rows` reads theirs from the input again."""
    good = F.col(V.REASON).isNull()
    # A bad row has no payload: the set of a key's payloads leaves it out, and its copies come after the good ones.
    # One order serves both of the window's functions, so the rows are sorted once.
    in_order = Window.partitionBy(*stream.natural_key).orderBy(F.col(PAYLOAD).asc_nulls_last())
    same_key = in_order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    rows = _with_ingested(lake, stream, checked, version=version)
    refusable = ~good | F.col(OLD_PAYLOAD).isNotNull()
    if admission is not None:
        rows = admission.judge(rows)
        refusable = refusable | ~F.col(ADMITTED)
    rows = (rows.withColumn(V.RAW, F.when(refusable, F.col(V.RAW)))
            .withColumn(PAYLOAD, F.when(good, _payload(stream)))
            .withColumn(PAYLOADS, F.size(F.collect_set(PAYLOAD).over(same_key)))
            .withColumn(COPY, F.row_number().over(in_order)))
    first = good & (F.col(PAYLOADS) == 1) & (F.col(COPY) == 1)
    fresh = first & F.col(OLD_PAYLOAD).isNull()
    reason = (F.when(~good, F.col(V.REASON))
              .when(F.col(PAYLOADS) > 1, F.lit(CONFLICTING))
              .when(first & _other_values(F.col(PAYLOAD)),
                    F.lit(f"{CONFLICTING}: differs from an ingested event")))
    if admission is not None:
        reason = reason.when(fresh & ~F.col(ADMITTED), F.lit(admission.reason))
    dropped = good & (F.col(PAYLOADS) == 1) & ~fresh & reason.isNull()
    return rows.withColumns({V.REASON: reason, DROPPED: dropped})  # both judged on the rows as they came


def _with_raw_rows(bad: DataFrame, checked: DataFrame, stream: StreamSchema) -> DataFrame:
    """The judged rows `bad` (`_judge`'s columns) with the raw row of each: the copies that conflict within the
    input (`CONFLICTING`) are all the good rows of their natural keys in `checked`, read from it again with
    theirs. Only an input with such copies is read again; finding that out is one job over the held verdicts."""
    in_input = F.col(V.REASON) == CONFLICTING
    if bad.filter(in_input).isEmpty():
        return bad
    keys = bad.filter(in_input).select(*stream.natural_key).distinct()
    again = checked.filter(F.col(V.REASON).isNull()).join(keys, list(stream.natural_key), "left_semi")
    return bad.filter(~in_input).unionByName(again.select(
        *stream.column_names, F.lit(CONFLICTING).alias(V.REASON), F.lit(False).alias(DROPPED), V.RAW))


def _quarantine(lake: Lake, bad: DataFrame, stream: StreamSchema, run_id: str) -> tuple[int, str]:
    """Write the run's bad rows to the quarantine, replacing its own (a run run again writes them once), and say
    them by rule (`_by_rule`). A run with none leaves an existing quarantine as it is, a commit fewer, since the
    same input run again has none either; the first run creates the table even so, for SQL to find it. Held
    first, the rows are computed once."""
    table = quarantine_table(stream)
    held, rows = hold(bad)
    try:
        if not rows and lake.exists(table):
            return 0, ""
        written = lake.overwrite(held, table, replace_where=f"run_id = '{V.check_run_id(run_id)}'")
        return written, _by_rule(held, rows) if rows else ""
    finally:
        release(held)


def _by_rule(bad: DataFrame, rows: int) -> str:
    """The `rows` quarantined rows by the rule they broke, the commonest first, each with one value that broke it
    (`2 cast_failed: temp (such as hot), 1 null_time`): what a person reads first after a run that quarantined
    rows, before querying the table, which holds every row's reason and raw row. A few rows' reasons are
    collected and counted here, in a job without a shuffle, as a micro-batch's late events are; more are
    grouped by Spark, which returns each rule (a reason less its value) once."""
    if rows <= DRIVER_REASONS:
        reasons = [r[0] for r in bad.select(V.REASON).collect()]
        found = [(rule, len(each), min(each)) for rule, each in _grouped(reasons).items()]
    else:
        rule = F.regexp_extract(F.col(V.REASON), r"^[^=]*", 0)
        found = [tuple(r) for r in bad.groupBy(rule).agg(F.count(F.lit(1)), F.min(V.REASON)).collect()]
    found.sort(key=lambda f: (-f[1], f[0]))
    said = [f"{count} {rule}" + (f" (such as {one[len(rule) + 1:]})" if "=" in one else "")
            for rule, count, one in found[:SHOWN_REASONS]]
    return ", ".join(said) + (", and others" if len(found) > SHOWN_REASONS else "")


def _grouped(reasons: list[str]) -> dict[str, list[str]]:
    """Reasons by rule: a reason up to its value (`cast_failed: temp` of `cast_failed: temp=hot`)."""
    by_rule: dict[str, list[str]] = {}
    for reason in reasons:
        by_rule.setdefault(reason.partition("=")[0], []).append(reason)
    return by_rule


def _with_ingested(lake: Lake, stream: StreamSchema, rows: DataFrame, *, version: int) -> DataFrame:
    """`rows` with the payload (`__old`) of the event `version` of the stream's table holds at each row's natural
    key, NULL where it holds none. Only the ingested events within the rows' time range are read: a literal range
    lets Delta skip every file outside it (events are appended in time order), so a micro-batch does not read the
    history."""
    time, natural_key = stream.time_column, list(stream.natural_key)
    low, high = rows.agg(F.min(time), F.max(time)).first() if version != NO_VERSION else (None, None)
    if low is None:
        return rows.withColumn(OLD_PAYLOAD, F.lit(None).cast("string"))
    ingested = lake.read(events_table(stream), version).filter(F.col(time).between(F.lit(low), F.lit(high)))
    return rows.join(ingested.select(*natural_key, _payload(stream).alias(OLD_PAYLOAD)), natural_key, "left")


def _payload(stream: StreamSchema) -> Column:
    """A row's attributes (its columns outside the natural key) as one comparable value: two events of one natural
    key are the same event when theirs are equal."""
    return F.to_json(F.struct(*(F.col(a) for a in stream.column_names if a not in stream.natural_key)))


def _other_values(payload: Column) -> Column:
    """The stream's table holds an event at the row's natural key (`_with_ingested`) with values other than
    `payload`, the row's own."""
    return F.col(OLD_PAYLOAD).isNotNull() & (F.col(OLD_PAYLOAD) != payload)


def publish_events(lake: Lake, stream: StreamSchema, staged_as: str, writer: str, *, replace: bool = False) -> int:
    """Append the staged events (after their gate passed) to `events_<stream>` as `writer`'s (`QueryJob.writer`),
    once (`Lake.once`): a step that is retried after it appended them does not append them again. Returns how
    many of them the table held already.

    Another query's run over the stream may have appended since this run's ingest compared the events with the
    table (the version its staged table notes). The append then first drops the staged events the table holds
    now; the comparison and the append are one section of the stream's (`exclusive`), so two runs that ingested
    the same event append it once. An event the table now holds with other values stops the run: run again, and
    ingest quarantines it as a `conflicting_duplicate`. Staged events that `replace` the table's rows
    (`ingest_rows`) are written in their place, in the same section."""
    table = events_table(stream)
    staged = lake.staging.read(staged_as)
    with exclusive(lake.root, table):
        held = None
        if not replace and lake.exists(table) and lake.staging.commit_note(staged_as) != str(lake.version(table)):
            staged, held = _not_in_table(lake, stream, staged)
        try:
            rows = staged.count()
            ordered = (staged.repartitionByRange(events_files(rows, lake.spark.sparkContext.defaultParallelism),
                                                 stream.time_column, *stream.keys)
                       .sortWithinPartitions(*stream.keys, stream.time_column))
            lake.append(ordered, table, change_feed=True, writer=writer, replace=replace)
            return 0 if held is None else held[1] - rows
        finally:
            if held is not None:
                release(held[0])


def _not_in_table(lake: Lake, stream: StreamSchema, staged: DataFrame) -> tuple[DataFrame, tuple[DataFrame, int]]:
    """The staged events the stream's table does not hold yet, and the compared rows held (with their count) for
    the caller to free; a PielakeError if the table holds one of them with other values."""
    held, rows = hold(_with_ingested(lake, stream, staged, version=lake.version(events_table(stream))))
    conflicting = held.filter(_other_values(_payload(stream))).count()
    if conflicting:
        release(held)
        raise PielakeError(f"{conflicting} staged events of stream {stream.name} have the key and time of events "
                           f"another run appended meanwhile, with other values; run again: its ingest quarantines "
                           f"them as conflicting_duplicate")
    return held.filter(F.col(OLD_PAYLOAD).isNull()).drop(OLD_PAYLOAD), (held, rows)


def events_files(rows: int, cores: int) -> int:
    """How many files an append of `rows` events is written as: one for a micro-batch (fewer than
    `MIN_ROWS_PER_CORE` events a core), else a whole number of files per core of at most `ROWS_PER_EVENTS_FILE`
    rows.

    Each file is a range of time sorted on (key, time), the order the runs kernel reads, so a batch run reads
    each file as a task of its own, without a shuffle (`pielake.spark.runs`). A whole number per core keeps every
    core busy to the end, in the append that writes them as in the runs that read them; files of a million rows
    keep a task's Python worker small.
    """
    if rows < cores * MIN_ROWS_PER_CORE:
        return 1
    return cores * math.ceil(rows / (cores * ROWS_PER_EVENTS_FILE))


def _as_text(stream: StreamSchema) -> str:
    """The stream's columns all as STRING: raw rows, as a CSV file or a quarantined row's JSON holds them."""
    return ", ".join(f"`{n}` STRING" for n, _ in stream.file_columns)


def _late_rows(lake: Lake, stream: StreamSchema, event_time: Callable[[Column], Column], low: int,
               high: int) -> tuple[DataFrame, Column] | None:
    """The quarantined `late` rows with a time in [low, high], read back into the stream's columns as strings."""
    table = quarantine_table(stream)
    if not lake.exists(table):
        return None
    parsed = F.from_json(F.col(V.RAW), _as_text(stream))
    time = stream.time_column
    typed = parsed[time].try_cast("TIMESTAMP" if stream.time_unit == TIMESTAMP_UNIT else "BIGINT")
    return lake.read(table), (F.col(V.REASON) == "late") & event_time(typed).between(low, high)


def replay_quarantined(lake: Lake, stream: StreamSchema, event_time: Callable[[Column], Column], low: int,
                       high: int) -> DataFrame:
    """Late events in [low, high] from the quarantine, as raw rows to ingest again (a backfill repairs them)."""
    found = _late_rows(lake, stream, event_time, low, high)
    if found is None:
        return lake.spark.createDataFrame([], _as_text(stream))
    table, late = found
    return table.filter(late).select(F.from_json(F.col(V.RAW), _as_text(stream)).alias("__row")).select("__row.*")


def forget_replayed(lake: Lake, stream: StreamSchema, event_time: Callable[[Column], Column], low: int,
                    high: int) -> None:
    """Remove the replayed late rows: they are events now, dropped duplicates, or quarantined again under the
    backfill's run with their new reason."""
    found = _late_rows(lake, stream, event_time, low, high)
    if found is not None:
        DeltaTable.forPath(lake.spark, lake.path(quarantine_table(stream))).delete(found[1])


# ---------------------------------------------------------------- the stream and the ingest stage


def streams_for(lake: Lake, plan: QueryPlan, request: RunRequest,
                schemas_dir: Path = SCHEMAS_DIR) -> tuple[StreamSchema, ...]:
    """The schema of each stream of the query's FROM, in its order: the one the lake was ingested with, else the
    project's `schemas/`, else, for a run that reads the stream's events file, inferred from it. A run keeps them
    in the lake for its later steps once its query fits them (`bind_streams`)."""
    if plan.upstream_source is not None:
        return (_matches_stream(lake, plan, request),)
    found = []
    for source in plan.sources:
        known = declared_schema(source.stream, lake.root, schemas_dir)
        path = request.events_of(plan, source.stream)
        if known is None and path is None:
            raise PielakeError(f"stream {source.stream} has not been ingested into {lake.root}, and the run reads "
                               "no file of it: give its events (--events), or declare the stream in "
                               f"{where_to_declare(source.stream)}")
        if known is not None:
            _check_given(known, request, lake.root, schemas_dir)
        found.append(known or _infer_stream(lake, source.stream, plan.keys, path, request))
    return tuple(found)


def _check_given(known: StreamSchema, request: RunRequest, lake_root: Path, schemas_dir: Path) -> None:
    """A run's `--time-column`, `--time-unit`, `--skip-lines`, `--time-zone` and `--time-format` type an unknown
    stream; a known one reads its files as its schema says. One given that differs from the schema is refused,
    naming the schema's file, not ignored: the run's rows would be read otherwise than the user said (times in
    milliseconds read as seconds), and a setting changed under events already read would read later files
    against them otherwise. A unit given for a stream whose times are TIMESTAMPs is moot, as for an unknown one
    (`--time-unit`'s help)."""
    lines, seconds = request.skip_lines, TIME_UNIT_SECONDS  # a unit by any of its names (`s`, `seconds`)
    settings = (  # (option, its schema field, the value given, whether the schema agrees, what the schema does)
        ("--time-column", "time.column" if known.end_column is None else "time.start", request.time_column,
         (request.time_column or "").lower() == known.time_column.lower(),
         f"reads its times from column {known.time_column}"),
        ("--time-unit", "time.unit", request.time_unit,
         known.time_unit == TIMESTAMP_UNIT or seconds.get(request.time_unit or "") == seconds[known.time_unit],
         f"reads its times as whole numbers of unit {known.time_unit}"),
        ("--skip-lines", "skip_lines", ",".join(map(str, lines)), lines == known.skip_lines,
         f"skips line(s) {', '.join(map(str, known.skip_lines))} of its files" if known.skip_lines else
         "skips no line of its files"),
        ("--time-zone", "time.zone", request.time_zone, request.time_zone == (known.time_zone or "UTC"),
         f"reads its times as the wall clock of {known.time_zone}" if known.time_zone else
         "reads its times as UTC where they carry no zone"),
        ("--time-format", "time.format", request.time_format, request.time_format == known.time_format,
         f"reads its times written {known.time_format}" if known.time_format else
         "reads its times as ISO-8601 or as its files' types hold them"),
    )
    for option, field, given, agrees, said in settings:
        if given and not agrees:
            where = declared_file(known.name, lake_root, schemas_dir)
            raise PielakeError(f"stream {known.name}'s schema ({where}) {said}, not {option} '{given}': leave "
                               f"{option} out, or, before the stream holds events, set {field} in that schema")


def bind_streams(lake: Lake, plan: QueryPlan, streams: tuple[StreamSchema, ...],
                 schemas_dir: Path = SCHEMAS_DIR) -> QueryPlan:
    """The query bound to its streams' schemas (`bind`), which the lake keeps once ingest has read the files with
    them (`keep_streams`).

    A query that does not fit a schema inferred from its file says where the types came from: a column that
    reads as text because one of its values is not a number, compared with a number, is otherwise a puzzle the
    query alone does not explain."""
    try:
        bound = bind(plan, streams)
    except QueryError as wrong:
        guessed = [s for s in streams if not s.of_matches and declared_schema(s.name, lake.root, schemas_dir) is None]
        if not guessed:
            raise
        raise wrong.noted("\n".join(_inferred_note(s) for s in guessed)) from None
    return bound


def keep_streams(lake: Lake, streams: tuple[StreamSchema, ...]) -> None:
    """Keep the streams' schemas in the lake, for the run's later steps and the runs after it, where they outrank
    `schemas/`: once a run's files have been read with them. A run refused before (a query that does not fit a
    schema inferred from its file, a file whose columns are not its stream's) keeps none, so the schema the user
    then declares or mends in `schemas/` is the one the next run takes."""
    for stream in streams:
        if not stream.of_matches:
            save_schema(stream, lake_streams(lake.root))


def _typed_note(stream: StreamSchema, lake_root: Path, given_time: str | None) -> str:
    """What a run says of a stream it typed from its file: where the schema is kept, which column times its events
    where the run found it (`_one_time_column`; `given_time` is the one the run named), and how it reads the times
    where it found how the file writes them, which the user should see (day first or month first)."""
    found = given_time is None and stream.time_column.lower() != DEFAULT_TIME_COLUMN
    where = " (the file's one column of times; --time-column names another)" if found else ""
    made = f" from {' and '.join(stream.time_from)}" if stream.time_from else ""
    written = "" if stream.time_format is None else f"{made} written {stream.time_format}"
    time = f", time {stream.time_column}{where}{written}" if where or written else ""
    return f"typed from its file{time}, kept in {schema_file(lake_streams(lake_root), stream.name)}"


def _inferred_note(stream: StreamSchema) -> str:
    return (f"Stream {stream.name} has no schema: its columns were typed from its file, as {stream.ddl}; a column "
            f"holding one value that is not a number reads as text. Declare its types in "
            f"{where_to_declare(stream.name)} (docs/operations.md, \"Streams\"): rows that do not fit them are then "
            f"quarantined with their reason.")


def _matches_stream(lake: Lake, plan: QueryPlan, request: RunRequest) -> StreamSchema:
    """The stream of a query over another query's matches, as the upstream's last publish described it
    (`pielake.pipeline.upstream`). Its rows come from the lake, never from a file."""
    source = plan.sources[0]
    if request.events_path is not None:
        plan.refuse(source, f"query {plan.name} reads the matches query {source.upstream} publishes, not a file",
                    "Run it without --events (Airflow: without `events` in its registration).")
    known = load_schema(source.stream, lake_streams(lake.root))
    if known is None or not known.of_matches or not lake.exists(results_table(source.upstream)):
        plan.refuse(source, f"query {source.upstream} has published no matches in {lake.root}",
                    f"Run query {source.upstream} first (or check the name after `matches_`).")
    if request.mode == "backfill":
        plan.refuse(source, f"the pipeline does not backfill query {plan.name}, which reads the matches of query "
                    f"{source.upstream}", rebuild_hint(plan))
    return known


def _infer_stream(lake: Lake, name: str, keys: tuple[str, ...], path: str, request: RunRequest) -> StreamSchema:
    """An unknown stream's schema, from its events file's columns and types."""
    fmt = request.format_of(path)
    # Ingest reads CSV as text, to see every cast failure; lines skipped around a header leave all of it text.
    sample = read_raw(lake.spark, path, fmt, typed=True, skip_lines=request.skip_lines)
    if fmt == "csv":
        _check_utf_8(name, path)
    return _typed_stream(lake, name, keys, path, request, sample=sample)


def _typed_stream(lake: Lake, name: str, keys: tuple[str, ...], path: str, request: RunRequest, *,
                  sample: DataFrame) -> StreamSchema:
    """The stream's schema from `sample`, its file as Spark types it (one pass over the file, which Spark's
    inference makes when the file is read), with the time column and unit `request` gives."""
    fmt, time, unit = request.format_of(path), request.unknown_time_column, request.unknown_time_unit
    columns, unfit = [], []
    for column in file_columns(sample):  # malformed lines are quarantined, not a column
        try:
            columns.append(schema_column(column, _as_declared(sample.schema[column].dataType.simpleString())))
        except SchemaError as error:
            unfit.append(str(error))
    if unfit:  # every such column at once: a file written by another system often has several
        those, them = ("those columns", "them") if len(unfit) > 1 else ("that column", "it")
        raise PielakeError(f"stream {name} has no schema, and its file {path} cannot give it one: {'; '.join(unfit)}; "
                           f"a stream's columns hold one value each (a number, text, a boolean, a time): write {those} "
                           f"as text, or drop {them} from the file")
    if not sample.columns:  # an empty file: Spark sees neither rows nor a header
        raise _nothing_to_type(name, path)
    columns, decimal_mark = _typed_text_columns(sample, tuple(columns), keys, untyped=bool(request.skip_lines),
                                                time=time)
    columns, days_apart = _times_of_day_as_text(lake.spark, path, fmt, request.skip_lines, columns)
    if fmt == "csv" and not request.skip_lines:
        columns = _keys_as_text(path, keys, columns)
    draft = StreamSchema(name, keys, time, TIMESTAMP_UNIT, columns, time_zone=request.time_zone,
                         decimal_mark=decimal_mark, skip_lines=request.skip_lines)
    if request.time_format is not None:
        _check_time_reading(lake.spark, replace(draft, time_format=request.time_format),
                            ("--time-format", "--time-zone"))
    made = _time_written(lake.spark, draft, path, fmt, days_apart=days_apart, given=request.time_format)
    columns = made.columns
    names = {n.lower() for n, _ in columns}
    picked = _one_time_column(lake.spark, made, request, path, sample=sample, days_apart=days_apart)
    if picked is not None:
        return _typed_stream(lake, name, keys, path, replace(request, time_column=picked), sample=sample)
    for needed in [*keys, time]:
        if needed.lower() not in names:
            hint = _unfound_hint(lake.spark, draft, needed, path, fmt, sample=sample, days_apart=days_apart)
            raise PielakeError(f"stream {name} has no schema, and its file {path}, read as {fmt}, has no column "
                               f"'{needed}' (it has {', '.join(sample.columns) or 'none'}); {hint}")
    if time.lower() in {n.lower() for n in days_apart}:
        raise PielakeError(f"stream {name} has no schema, and its file {path}, read as {fmt}: "
                           f"{_days_apart_fix(days_apart)}")
    # A time column the file holds as TIMESTAMPs (or dates) is of unit timestamp: `--time-unit` is a numeric time's.
    time_kind = {n.lower(): t.upper() for n, t in columns}.get(time.lower(), "")
    if time_kind == "DATE":  # daily data: a day's event is at its midnight, UTC, as a time its date casts to
        columns = _as_time_column(columns, time)
        time_kind = "TIMESTAMP"
    timestamps, written = time_kind == "TIMESTAMP", made.time_format
    if fractional(time_kind) and TIME_UNIT_SECONDS.get(unit.lower()) == 1:
        columns, written = _unix_times(StreamSchema(name, keys, time, "s", columns), sample, path)
        timestamps = True
    if request.time_zone is not None and (not timestamps or written == UNIX_TIME):
        held = "Unix time (seconds since 1970)" if timestamps else f"whole numbers of unit {unit}"
        raise PielakeError(f"stream {name} has no schema, and its file {path} holds its times ({time}) as {held}, "
                           f"instants of no zone: --time-zone '{request.time_zone}' is the zone of times written as "
                           "a wall clock (2026-03-02 14:00:00); leave it out")
    inferred = replace(made, time_unit=TIMESTAMP_UNIT if timestamps else unit, columns=columns, time_format=written)
    try:
        check_time_columns(inferred, f"{path}, read as {fmt}")
    except SchemaError as unfit:  # a file of a header alone types every column as text: say what it lacks
        if sample.isEmpty():
            raise _nothing_to_type(name, path) from None
        raise SchemaError(f"{unfit}{_times_as_text(inferred, sample)}\n{_inferred_note(inferred)}") from None
    if not timestamps:
        _check_time_scale(inferred, sample, path)
    return inferred


# What a text column of an inferred stream may hold instead, tried in this order (as Spark's inference tries
# them), with the test a present value passes: a number casts, a boolean is written `true` or `false`, a time
# casts to a TIMESTAMP. Spark's cast of text to a number throws and catches an exception for each value it does not
# take, so text is first asked whether it may be written as one, which every value the cast takes is: a whole
# number (`_WHOLE`), or, for a double, text with a digit or that spells NaN or infinity (`_DOUBLE_LIKE`: hex and
# `1d` hold digits). Most text is then never cast.
_WHOLE = r"^\s*[+-]?[0-9]+\s*$"
_DOUBLE_LIKE = r"[0-9]|(?i:nan|inf)"
_PAST_MISSING: tuple[tuple[str, Callable[[Column], Column]], ...] = (
    ("INT", lambda v: v.rlike(_WHOLE) & v.try_cast("INT").isNotNull()),
    ("BIGINT", lambda v: v.rlike(_WHOLE) & v.try_cast("BIGINT").isNotNull()),
    ("DOUBLE", lambda v: v.rlike(_DOUBLE_LIKE) & v.try_cast("DOUBLE").isNotNull()),
    ("BOOLEAN", lambda v: F.lower(v).isin("true", "false")),
    ("TIMESTAMP", lambda v: _as_timestamp(v).isNotNull()),
)
_COMMA_NUMBER = r"^[+-]?[0-9]+(,[0-9]+)?$"
_LEADING_ZERO = re.compile(r"\s*[+-]?0[0-9]")  # a whole number written with a zero before its first other digit
# A comma before other than three digits is no thousands separator: a decimal comma beyond doubt.
_NOT_THOUSANDS = r",([0-9]{1,2}|[0-9]{4,})$"


def _typed_text_columns(sample: DataFrame, columns: tuple[tuple[str, str], ...], keys: tuple[str, ...], *,
                        untyped: bool = False, time: str = "") -> tuple[tuple[tuple[str, str], ...], str]:
    """The columns, and the stream's decimal mark, where Spark types as text a column of values of one type:
    numbers, booleans and times that write missing values as tokens (`NA`, `NULL`, ...), which then read as NULL
    (docs/semantics.md §1), and numbers written with a decimal comma (`21,5`), which make the stream's files
    write a decimal comma. A sample Spark did not type (`untyped`: a file read past lines its stream skips) has
    each column typed so, missing values or not, and so has the `time` column of any file: a Parquet or JSON
    file may hold its times as text (`2026-01-02T13:45:00Z`), whose type is its writer's, not Spark's guess. A key
    stays text. One Spark job, only where there are text columns to look at."""
    keyed = {k.lower() for k in keys}
    texts = [n for n, kind in columns if kind == "STRING" and n.lower() not in keyed]
    if not texts:
        return columns, "."
    seen = sample.agg(*(look for i, name in enumerate(texts) for look in _text_looks(F.col(name), i))).first()
    typed, mark = {}, "."
    for i, name in enumerate(texts):
        if not seen[f"present{i}"]:
            continue
        if seen[f"comma{i}"] and seen[f"decimal{i}"]:
            typed[name], mark = "DOUBLE", DECIMAL_COMMA
        elif seen[f"missing{i}"] or untyped or name.lower() == time.lower():
            typed[name] = next((kind for kind, _ in _PAST_MISSING if seen[f"{kind}{i}"]), "STRING")
    return tuple((n, typed.get(n, kind)) for n, kind in columns), mark


def _times_of_day_as_text(spark: SparkSession, path: str, fmt: str, skip_lines: tuple[int, ...],
                          columns: tuple[tuple[str, str], ...]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The columns, with those of a CSV or JSON file that Spark types as TIMESTAMPs from times of day alone
    (`TIME_OF_DAY`) as text, and those columns. Their text is read again from the file's first rows (one small
    Spark job, only where Spark typed a column as a time): typed, a time of day is already a time of the day it
    was read on."""
    stamped = [n for n, kind in columns if kind == "TIMESTAMP"]
    if fmt not in ("csv", "json") or not stamped:
        return columns, ()
    text = _first_rows(spark, path, fmt, skip_lines)
    seen = text.agg(*(F.bool_or(_is_time_of_day(F.col(n))).alias(n) for n in stamped)).first()
    days_apart = tuple(n for n in stamped if seen[n])
    return tuple((n, "STRING" if n in days_apart else kind) for n, kind in columns), days_apart


def _keys_as_text(path: str, keys: tuple[str, ...],
                  columns: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The columns, with each key that Spark types as numbers from CSV files as text where as numbers it could make
    one key of two the files write apart: a key of decimals (`3.1` and `3.10`, as sensor and version numbers are;
    integers beyond 64 bits are decimals too), and one of whole numbers written with a leading zero (`007` and
    `7`, as order numbers, postal codes and vehicle ids are). Of whole numbers, each file's first rows tell, read
    in Python (no Spark job), found by their header as Spark finds them (`_read_csv_files`); a URL's files are not
    looked into. Files that skip lines are typed as text already."""
    keyed = {k.lower() for k in keys}
    fractions = {n.lower() for n, kind in columns if fractional(kind)} & keyed
    numbered = {n.lower() for n, kind in columns if kind in INTEGER_TYPES} & keyed
    padded: set[str] = set()
    for group in header_groups(path) if numbered else ():
        separator = _line_separator(group.shared.header, UTF_8)
        at = {i: name.lower() for i, field in enumerate(_fields(group.shared.header, separator, UTF_8))
              if (name := column_name(field)).lower() in numbered}
        for file in group.files:
            padded |= {at[i] for record in first_records(file, separator, SCALE_SAMPLE_ROWS)
                       for i in at if i < len(record) and _LEADING_ZERO.match(record[i])}
    return tuple((n, "STRING" if n.lower() in padded | fractions else kind) for n, kind in columns)


def _text_looks(column: Column, i: int) -> list[Column]:
    """What `_typed_text_columns` asks of the text column `i`'s values, each a boolean aggregate."""
    value = F.trim(column)
    missing = _missing_value(column)
    present = value.isNotNull() & ~missing
    return [F.bool_or(missing).alias(f"missing{i}"), F.bool_or(present).alias(f"present{i}"),
            F.bool_and(~present | value.rlike(_COMMA_NUMBER)).alias(f"comma{i}"),
            F.bool_or(present & value.rlike(_NOT_THOUSANDS)).alias(f"decimal{i}"),
            *(F.bool_and(~present | holds(value)).alias(f"{kind}{i}") for kind, holds in _PAST_MISSING)]


def _check_utf_8(stream: str, path: str) -> None:
    """A stream typed from its file reads it as UTF-8: a file that is not is refused before its types are kept,
    naming the line and the bytes, since a writer of another encoding (Excel on Windows writes windows-1252)
    would have every line of an accented word quarantined, and the stream's kept schema could not be told
    otherwise afterwards. A stream that declares its encoding, UTF-8 too, quarantines a line that does not decode
    (docs/semantics.md §1)."""
    found = first_undecoded(path, UTF_8)
    if found is None:
        return
    raise SchemaError(f"stream {stream} has no schema, and its file {found.file} is not UTF-8: line {found.line} "
                      f"holds the byte(s) {found.undecoded.hex(' ').upper()} after {found.text!r}; declare the "
                      f"encoding its writer used in {where_to_declare(stream)} (encoding: windows-1252, as Excel on "
                      "Windows writes CSV in Western Europe), or declare the stream without one to quarantine the "
                      "lines that are not UTF-8")


def _unix_times(stream: StreamSchema, sample: DataFrame, path: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """A stream's columns and time format where its file's times are seconds with a fraction (Unix time, as
    Python's `time.time()` and many loggers write it): TIMESTAMPs read to the microsecond, as a whole number of
    seconds cannot hold them. Milliseconds with a fraction, which as seconds lie past the year 5000, are refused
    as whole milliseconds read as seconds are (`_check_time_scale`)."""
    _check_time_scale(stream, sample, path)
    return _as_time_column(stream.columns, stream.time_column), UNIX_TIME


def _as_time_column(columns: tuple[tuple[str, str], ...], time: str) -> tuple[tuple[str, str], ...]:
    """The columns with `time` a TIMESTAMP: the type a stream's time takes where a file writes it otherwise (a
    date, seconds with a fraction, text in a pattern)."""
    return tuple((n, "TIMESTAMP" if n.lower() == time.lower() else t) for n, t in columns)


def _times_as_text(stream: StreamSchema, sample: DataFrame) -> str:
    """For a time column typed as text: one of its values (the first that reads as neither form, which made the
    column text, where one does not), and the forms of a time a file's column is typed from. Text that is not an
    ISO-8601 time (`01/02/2026 13:45`, as spreadsheets write one) does not cast to a TIMESTAMP either, so declaring
    the column one would quarantine every such row. A column empty in every row (Spark types it as text) holds no
    time to type at all: most likely another column holds the times."""
    column = stream.time_column
    if stream.type_of(column) != "STRING":
        return ""
    value = F.col(column)
    unread = value.isNotNull() & _as_timestamp(value).isNull() & ~value.rlike(_WHOLE)
    found = sample.select(column).where(unread).first() or sample.select(column).where(value.isNotNull()).first()
    if found is None:
        return (f"; it is empty in every row, so no event has a time: name the file's column of times with "
                f"--time-column, or write each event's time in {column}")
    return (f"; it holds text such as '{found[0]}': a column of times reads as TIMESTAMPs where every value is an "
            "ISO-8601 time (2026-01-02T13:45:00Z, or with its zone), as whole numbers where every value is one (of "
            "the unit --time-unit names); for times written otherwise, declare the stream with their pattern (time: "
            "{column: ts, unit: timestamp, format: dd/MM/yyyy HH:mm})")


def _nothing_to_type(stream: str, path: str) -> SchemaError:
    """The refusal of a file that holds no rows to type an unknown stream's columns from."""
    return SchemaError(f"stream {stream} has no schema, and its file {path} holds no events to type its columns "
                       f"from: run it first with a file of events, or declare the stream in "
                       f"{where_to_declare(stream)} (docs/operations.md, \"Streams\")")


FAR_FUTURE_SECONDS = 95_000_000_000  # about the year 5000, counted from 1970
FINER_UNITS = ("ms", "us")
SCALE_SAMPLE_ROWS = 1000


def _check_time_scale(stream: StreamSchema, sample: DataFrame, path: str) -> None:
    """Refuse numeric times that, in the unit the stream is typed with, lie past the year 5000: they are times of a
    finer unit (milliseconds since 1970, as JavaScript's `Date.now()` and pandas' `to_json` write them), and read
    in seconds every window and duration of the query would be a thousandth of what it says, with no error. The
    fix names the unit in which they are dates. The file's first rows tell (one small Spark job)."""
    column = F.abs(F.col(stream.time_column).cast("decimal(20,0)"))
    found = sample.limit(SCALE_SAMPLE_ROWS).agg(F.max(column)).first()[0]
    largest = 0 if found is None else int(found)
    if largest * stream.unit_seconds < FAR_FUTURE_SECONDS:
        return
    fits = next((u for u in FINER_UNITS if largest * TIME_UNIT_SECONDS[u] < FAR_FUTURE_SECONDS
                 and TIME_UNIT_SECONDS[u] < stream.unit_seconds), None)
    fix = f"pass --time-unit {fits}" if fits else "give the times in microseconds (--time-unit us) or as TIMESTAMPs"
    raise SchemaError(f"stream {stream.name} has no schema, and the times of its file {path} are numbers such as "
                      f"{largest}, which in {stream.time_unit} (the stream's unit) lie past the year 5000: {fix}, "
                      f"or declare the stream in {where_to_declare(stream.name)}")


def _as_declared(kind: str) -> str:
    """An inferred type as a schema declares it: a time without a zone (Parquet's from pandas, Spark's
    `timestamp_ntz`) is a TIMESTAMP, read in the sessions' zone, UTC, as the same wall-clock time in UTC."""
    return "timestamp" if kind == "timestamp_ntz" else kind


def _unfound_hint(spark: SparkSession, draft: StreamSchema, needed: str, path: str, fmt: str, *,
                  sample: DataFrame, days_apart: tuple[str, ...]) -> str:
    """What to do about a column the query needs that a file without a schema lacks: where the file reads
    otherwise than as a table of rows under a header (`_misread_hint`), how to read it; else the query or its time
    column names the column otherwise than the file: a time column is likeliest one of the file's columns of times
    (`_columns_of_times`), and where it has none but columns of times of day alone, a date must join them; a key
    is likeliest the file's column of the closest name."""
    stream = draft.name
    misread = _misread_hint(draft, sample, path, fmt)
    if misread is not None:
        return misread
    if needed == draft.time_column:
        times = _columns_of_times(spark, draft, path, fmt, days_apart)
        if days_apart and not times:
            return _days_apart_fix(days_apart)
        return f"{_time_column_fix(times)}, or declare the stream in {where_to_declare(stream)}{_as_intervals(times)}"
    close = closest_column(needed, sample.columns)
    guess = f" (is it {close}?)" if close else ""
    return f"name the key in PARTITION BY as the file does{guess}, or declare the stream in {where_to_declare(stream)}"


def _misread_hint(draft: StreamSchema, sample: DataFrame, path: str, fmt: str) -> str | None:
    """How to read a file that does not read as a table of rows under a header, if it does not: a file of another
    format reads as one column of unparsed lines (Spark's `_corrupt_record`); a JSON file may hold its events as a
    list in one field (`_listed_records`); a CSV file whose first line is a title (`_title_fields`) has its header
    below it, unless lines are skipped already."""
    if sample.columns == [CORRUPT_RECORD]:
        return f"no line of it reads as {fmt}: pass --format if the file is not {fmt}"
    listed = _listed_records(sample) if fmt == "json" else None
    if listed is not None:
        return _listed_hint(listed, path)
    title = _title_fields(path) if fmt == "csv" and not draft.skip_lines else None
    if title is not None:
        named = ", ".join(map(column_name, title[1]))
        return (f"its first line has {title[0]} field(s) and its second {len(title[1])} ({named}), as data "
                "loggers write a title before the header: pass --skip-lines 1 (or --skip-lines 1,3,4 where two "
                "lines of units follow the header, as in Campbell Scientific's TOA5 files), or declare the stream "
                f"in {where_to_declare(draft.name)} with skip_lines")
    return None


def _one_time_column(spark: SparkSession, draft: StreamSchema, request: RunRequest, path: str, *,
                     sample: DataFrame, days_apart: tuple[str, ...]) -> str | None:
    """The time column of a file typed as `draft` for a run that names none, where the file has no column of the
    default name and holds one column of times, which no other column could be mistaken for: the run reads its
    times there, as a reader of the file would. None where the run names its time column, the file has the
    default one, reads otherwise than as a table (`_misread_hint`), or holds no column of times or several (a
    row's start and end, an event's time beside its record's): the run is then refused, told which to name."""
    fmt = request.format_of(path)
    if request.time_column is not None or draft.time_column.lower() in {n.lower() for n, _ in draft.columns}:
        return None
    if _misread_hint(draft, sample, path, fmt) is not None:
        return None
    times = _columns_of_times(spark, draft, path, fmt, days_apart)
    return times[0] if len(times) == 1 else None


def _days_apart_fix(days_apart: tuple[str, ...]) -> str:
    """What to do with a file whose times of day stand apart from their dates (`_times_of_day_as_text`) where no
    one column of dates makes its time with them (`_time_written`)."""
    return (f"its column(s) {', '.join(days_apart)} hold a time of day alone, which names no instant: write each "
            "row's date and time of day in one column (2026-01-10T08:05:00) and pass --time-column with its name; "
            "beside one column of dates, a time of day makes the time with it where --time-column names no "
            "column of the file (ts, the default)")


def _columns_of_times(spark: SparkSession, draft: StreamSchema, path: str, fmt: str,
                      days_apart: tuple[str, ...]) -> tuple[str, ...]:
    """The file's columns that hold times: typed TIMESTAMP or DATE, else text that reads as times in one of
    `TIME_PATTERNS`. A date whose time of day stands in a column of its own (`days_apart`) is no event's time."""
    kinds = ("TIMESTAMP",) if days_apart else ("TIMESTAMP", "DATE")
    typed = tuple(n for n, t in draft.columns if t.upper() in kinds)
    if typed or days_apart:
        return typed
    texts = [n for n, t in draft.columns if t == "STRING" and n not in draft.keys]
    found = _time_formats(spark, draft, path, fmt, {n: (n,) for n in texts}) if texts else {}
    return tuple(n for n in texts if found[n])


# How files write a time as text that is not ISO-8601, tried where a stream typed from its file has such times: a
# date, day first with dots (as German loggers write it), in either order with slashes, or year first, then a
# time of day if any (`H:mm`, its seconds and their fraction if any).
DATE_PATTERNS = ("d.M.yyyy", "d/M/yyyy", "M/d/yyyy", "yyyy/M/d", "d-M-yyyy")
TIME_PATTERNS = tuple(f"{date}[ H:mm[:ss][.SSS]]" for date in DATE_PATTERNS)


def _time_written(spark: SparkSession, draft: StreamSchema, path: str, fmt: str, *, days_apart: tuple[str, ...],
                  given: str | None) -> StreamSchema:
    """The stream typed from its file, with how the file writes its time where Spark found no time: a column of
    text in one of `TIME_PATTERNS`, or, where the file has no time column of the name asked for, one column of
    dates beside its one column of times of day (`time.from`). The pattern is the one that reads every one of the
    file's first rows that writes a time; where two do (`d/M` and `M/d`, no day past the 12th), the run is refused
    with both, for the user to choose: a guess would move some events by months. A pattern the run gives
    (`--time-format`, `given`) is the only one tried, on whatever type Spark found, and must read one of those
    rows' times: a row it does not read is then quarantined (`cast_failed`), as under a declared schema."""
    kinds, time = {n.lower(): t for n, t in draft.columns}, draft.time_column
    tried, every = ((None, *TIME_PATTERNS), True) if given is None else ((given,), False)
    if time.lower() not in kinds and len(days_apart) == 1:
        [clock] = days_apart
        dates = [n for n, t in draft.columns if t in ("STRING", "DATE") and n != clock and n not in draft.keys]
        found = _time_formats(spark, draft, path, fmt, {d: (d, clock) for d in dates}, formats=tried,
                               every=every) if dates else {}
        pairs = [(date, formats) for date, formats in found.items() if formats]
        if len(pairs) != 1:
            if given is not None and len(dates) == 1:
                raise _not_read_as_given(spark, draft, (dates[0], clock), given=given, path=path, fmt=fmt)
            return draft
        [(date, formats)] = pairs
        made = replace(draft, columns=(*draft.columns, (time, "TIMESTAMP")), time_from=(date, clock))
        return _one_format(spark, made, formats, path, fmt)
    if kinds.get(time.lower()) != "STRING" and (given is None or time.lower() not in kinds):
        return draft
    formats = _time_formats(spark, draft, path, fmt, {time: (time,)}, formats=tried, every=every)[time]
    if given is not None and not formats:
        raise _not_read_as_given(spark, draft, (time,), given=given, path=path, fmt=fmt)
    typed = replace(draft, columns=_as_time_column(draft.columns, time))
    return _one_format(spark, typed, formats, path, fmt) if formats else draft


def _not_read_as_given(spark: SparkSession, draft: StreamSchema, parts: tuple[str, ...], *, given: str, path: str,
                       fmt: str) -> PielakeError:
    """The refusal of a `--time-format` that reads none of the file's first rows' times, with the first of them
    (one small Spark job, on the way to the error only)."""
    value = _time_text(parts)
    text = _first_rows(spark, path, fmt, draft.skip_lines)
    first = text.where(value.isNotNull()).select(value).first()
    which = "they write none" if first is None else f"the first is '{first[0]}'"
    joined = " (joined by a space)" if len(parts) > 1 else ""
    return PielakeError(f"stream {draft.name} has no schema, and --time-format '{given}' reads none of the times its "
                        f"file {path}, read as {fmt}, writes in {' and '.join(parts)}{joined} in its first "
                        f"{SCALE_SAMPLE_ROWS:,} rows: {which}; give the pattern they are written in (Spark's datetime "
                        "patterns: dd/MM/yyyy HH:mm:ss, d.M.yyyy H:mm), or leave --time-format out for ISO-8601 or "
                        "the day-first or month-first pattern that reads them")


def _one_format(spark: SparkSession, stream: StreamSchema, formats: tuple[str | None, ...], path: str,
                fmt: str) -> StreamSchema:
    """`stream` with its time read in the one of `formats` that reads it; ISO-8601 (None) where it does. Where
    several read the file's first rows (`d/M` and `M/d`, no day past the 12th in them), the one that reads the
    most of the whole file's rows: a later day past the 12th tells them apart. Two that read as many are refused
    with the schema of each, in one line a schema file takes as it is."""
    if None in formats or len(formats) == 1:
        return replace(stream, time_format=formats[0] if None not in formats else None)
    parts = stream.time_from or (stream.time_column,)
    text = read_raw(spark, path, fmt, skip_lines=stream.skip_lines)
    value = _time_text(parts)
    read = text.agg(*(F.count(_read(value, w)).alias(str(i)) for i, w in enumerate(formats)))
    counts = read.first()
    most = max(counts)
    formats = tuple(w for i, w in enumerate(formats) if counts[str(i)] == most)
    if len(formats) == 1:
        return replace(stream, time_format=formats[0])
    written_in = " and ".join(parts)
    first, other = formats[:2]
    flow = yaml.safe_dump(to_mapping(replace(stream, time_format=first)), default_flow_style=True, sort_keys=False,
                          width=math.inf).strip()
    raise PielakeError(f"stream {stream.name} has no schema, and its file {path}, read as {fmt}, writes its times "
                       f"({written_in}) so that they read both as {first} and as {other}: no day past the 12th tells "
                       f"day and month apart. Declare the stream in {where_to_declare(stream.name)} as {flow}, or with "
                       f"format: {other} if its dates are written month first (docs/operations.md, \"Streams\"); or "
                       f"give the run the pattern: --time-format '{first}' (a registration's time_format)")


def _time_formats(spark: SparkSession, draft: StreamSchema, path: str, fmt: str,
                  candidates: dict[str, tuple[str, ...]], *, formats: tuple[str | None, ...] = (None, *TIME_PATTERNS),
                  every: bool = True) -> dict[str, tuple[str | None, ...]]:
    """For each candidate time (a name, and the file's columns whose text, joined by a space, writes it), the
    `formats` (None: ISO-8601) in which every one of the file's first rows that writes it reads as a time (or,
    not `every`, one of them), where one does: one small Spark job over those rows' text."""
    text = _first_rows(spark, path, fmt, draft.skip_lines)
    values = [_time_text(parts) for parts in candidates.values()]
    reads = _reads_all if every else _reads_one
    seen = text.agg(*(reads(value, written).alias(f"{i}_{j}") for i, value in enumerate(values)
                      for j, written in enumerate(formats))).first()
    return {name: tuple(w for j, w in enumerate(formats) if seen[f"{i}_{j}"]) for i, name in enumerate(candidates)}


def _first_rows(spark: SparkSession, path: str, fmt: str, skip_lines: tuple[int, ...]) -> DataFrame:
    """The text of the file's first rows, which typing a stream looks at where Spark's inference cannot tell."""
    return read_raw(spark, path, fmt, skip_lines=skip_lines).limit(SCALE_SAMPLE_ROWS)


def _time_text(parts: tuple[str, ...]) -> Column:
    """The text of a time the file's text columns `parts` write, as ingest reads it (`_field`, `_joined_time`)."""
    return _joined_time({c: _field(F.col(c), True, "TIMESTAMP") for c in parts}, parts)


def _read(value: Column, written: str | None) -> Column:
    """`value` read as a time written as `written` (None: ISO-8601); NULL where it does not read so."""
    return _as_timestamp(value) if written is None else F.try_to_timestamp(value, F.lit(written))


def _reads_one(value: Column, written: str | None) -> Column:
    """Whether a `value` of a sample reads as a time written as `written`."""
    return F.coalesce(F.bool_or(_read(value, written).isNotNull()), F.lit(False))


def _reads_all(value: Column, written: str | None) -> Column:
    """Whether every present `value` of a sample reads as a time written as `written` (None: ISO-8601), and one
    does."""
    time = _read(value, written)
    return F.coalesce(F.bool_and(value.isNull() | time.isNotNull()) & F.bool_or(value.isNotNull()), F.lit(False))


def _time_column_fix(times: tuple[str, ...]) -> str:
    """The option that names a file's time column: with its one column of times, where it has one (by the plain
    name a stream gives it, which a shell takes as it is); the file's columns of times to choose from, where it has
    several."""
    if len(times) == 1:
        return f"pass --time-column {times[0]}, its column of times"
    if times:
        return f"pass --time-column with the one of its columns of times ({', '.join(times)}) that times its events"
    return "pass --time-column to name the file's time column"


def _as_intervals(times: tuple[str, ...]) -> str:
    """A file with two columns of times may hold a row from one until the other (a machine state, a call): the
    schema of such an interval stream, which is declared, never inferred (docs/operations.md, "Streams")."""
    if len(times) != 2:
        return ""
    return (f" (as an interval stream, `time: {{start: {times[0]}, end: {times[1]}, unit: timestamp}}`, where each "
            f"row holds from its {times[0]} until its {times[1]})")


LISTED_RECORDS = re.compile(r"\s*\[\s*\{")  # the JSON text of a list whose first item is a record


def _listed_hint(listed: str, path: str) -> str:
    """What to do with a file whose field `listed` holds its events (`_listed_records`)."""
    # a name without '_' is a field at the top of the record: a nested one is named by its path, '_' between
    shown = f"`jq -c '.{listed}[]' {path}`" if "_" not in listed else f"`jq -c '.<its path>[]' {path}`"
    return (f"its field {listed} holds a list of records, as a web API's answer wraps its items: pielake reads one "
            f"event a record, so write the list's records one a line (JSON Lines), as {shown} does, or as one JSON "
            "array")


def _listed_records(sample: DataFrame) -> str | None:
    """The column of a JSON file read without a schema whose first value is a list of records (`[{…}, …]`, its
    JSON text: `_flattened`), or None. One small Spark job, on the way to an error only."""
    text = [f.name for f in sample.schema.fields if isinstance(f.dataType, T.StringType) and f.name != CORRUPT_RECORD]
    first = sample.select(*text).first() if text else None
    if first is None:
        return None
    return next((c for c in text if isinstance(first[c], str) and LISTED_RECORDS.match(first[c])), None)


def _title_fields(path: str) -> tuple[int, list[str]] | None:
    """How many fields the first line of the first local file of `path` holds and the fields of its second, where
    they differ in number and the second holds several: a title line (a logger's name, its station) before the
    header. None otherwise."""
    files = local_files(path)
    if not files:
        return None
    head = csv_head(files[0], (1,))
    if not head.skipped:
        return None
    lines = (head.skipped[0], head.header)
    # The file's separator is its header's. A first line that reads with commas as one name holding `;`, a tab or
    # `|` is that header (no title is written with a separator other than its file's), and the second line a row,
    # whose decimal commas (`23,1` in a file of `;`) would read as fields with commas.
    separator = next((s for s in (_line_separator(line, UTF_8) for line in lines) if s != ","), ",")
    first, second = (_fields(line, separator, UTF_8) for line in lines)
    return (len(first), second) if len(second) > 1 and len(first) != len(second) else None


def ingest(ctx: StepContext) -> StageResult:
    """The ingest stage: each stream's events file (and, for a backfill, the quarantined late events in its range),
    or of a query over matches the upstream's final matches, into staging, the bad rows into each stream's
    quarantine. Over several streams the stage's rows add up every stream's, and its details say each one's."""
    job = ctx.job
    details: dict[str, object] = {}
    check_definition(ctx)
    zones = [zone for zone in (*(s.time_zone for s in job.streams), ctx.request.time_zone) if zone is not None]
    if drifts := check_zones(job.lake.spark, job.plan, zones):
        details["time zones"] = " ".join(drifts)

    def work() -> dict[str, int]:
        reports = {stream.name: _ingest_stream(ctx, stream, details) for stream in job.streams}
        typed = [s for s in job.streams if not s.of_matches and declared_file(s.name, job.lake.root) is None]
        keep_streams(job.lake, job.streams)
        details.update({f"schema {stream.name}": _typed_note(stream, job.lake.root, ctx.request.time_column)
                        for stream in typed})
        if len(reports) > 1:
            details.update({name: report.text() for name, report in reports.items()})
        return IngestReport.sum(reports.values()).rows()

    return timed("ingest", work, details)


def _ingest_stream(ctx: StepContext, stream: StreamSchema, details: dict[str, object]) -> IngestReport:
    job, request = ctx.job, ctx.request
    marks = None
    if stream.of_matches:
        matches, marks, rebuilds = read_upstream(ctx)
        if rebuilds:
            details["mode"] = (f"batch: query {job.plan.sources[0].upstream} has published a batch run or a "
                               "backfill since this query last read its matches")
        raws = [matches]
    else:
        path = request.events_of(job.plan, stream.name)
        raws = [read_raw(job.lake.spark, path, request.format_of(path), encoding=stream.encoding,
                         skip_lines=stream.skip_lines)] if path else []
    if ctx.backfill_range is not None:
        raws.append(replay_quarantined(job.lake, stream, job.declared_query(stream).kernel_time,
                                       *ctx.backfill_range))
    report = ingest_rows(job.lake, raws, stream, job.run_id, staged_as=job.staged_events(stream),
                         admission=_admission(ctx, stream), marks=marks, replaces=mirrors(stream, ctx.mode))
    if report.reasons:
        details["quarantine" if len(job.streams) == 1 else f"quarantine {stream.name}"] = report.reasons
    return report


def _admission(ctx: StepContext, stream: StreamSchema) -> Admission | None:
    """A micro-batch: an event at or before its key's processed time is late. A backfill: it must lie in the
    range."""
    job, q = ctx.job, ctx.job.declared_query(stream)
    if ctx.backfill_range is not None:
        low, high = ctx.backfill_range
        return Admission("outside_backfill_range", lambda rows: rows.withColumn(
            ADMITTED, q.event_time().between(low, high)))
    processed = job.processed(stream) if ctx.mode == "incremental" else None
    if processed is None:
        return None
    return Admission("late", lambda rows: mark_unprocessed(q.keyed(rows), processed, q, time=q.event_time(),
                                                           mark=ADMITTED))


def admit_events(ctx: StepContext) -> int:
    """The events the events gate audited become the stream's: appended to `events_<stream>`, once (the stage
    after the gate starts so); a backfill also clears the late rows it re-admitted from the quarantine. Returns
    how many of them another run had appended meanwhile (`publish_events`)."""
    job, already = ctx.job, 0
    for stream in job.streams:
        staged = job.staged_events(stream)
        if job.staging.exists(staged):  # a run in one process frees them once admitted: nothing left to do
            already += publish_events(job.lake, stream, staged, job.writer, replace=mirrors(stream, ctx.mode))
            job.staging.done_with(staged)
        if ctx.backfill_range is not None:
            forget_replayed(job.lake, stream, job.declared_query(stream).kernel_time, *ctx.backfill_range)
    return already
