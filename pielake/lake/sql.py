"""`pielake sql`: read-only SQL over the lake's tables, by name.

This is the one place where text reaches Spark SQL, and it is the user's own SQL over their own lake. It is
held to reading: one statement that reads (`pielake.lake.statements`), over temporary views of the lake's tables
(a view cannot be written through). Delta answers
`DESCRIBE HISTORY`, `DESCRIBE DETAIL` and `SHOW TBLPROPERTIES` of a table, not of a view: those run on the named
table's folder (a kind's, its results table's), named by the lake, not by the statement's text.
"""

from __future__ import annotations

import base64
import csv
import difflib
import io
import json
import math
import re
import struct
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import islice

from pyspark.errors import ParseException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    CalendarIntervalType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    YearMonthIntervalType,
)

from pielake import vocabulary as V
from pielake.errors import for_the_user, spark_said
from pielake.lake.delta import Lake
from pielake.lake.statements import SqlError, Token, check_read_only, lexed, place
from pielake.spark.query import utc_clock

# The statements Delta answers of a table and not of a view (a view has no history, and no properties but its own).
DELTA_DESCRIBE = re.compile(r"^DESC(?:RIBE)?\s+(?P<command>HISTORY|DETAIL)\s+`?(?P<table>[A-Za-z_][A-Za-z0-9_]*)`?"
                            r"(?:\s+LIMIT\s+(?P<limit>\d+))?$", re.IGNORECASE)
DELTA_PROPERTIES = re.compile(r"^SHOW\s+TBLPROPERTIES\s+`?(?P<table>[A-Za-z_][A-Za-z0-9_]*)`?"
                              r"(?:\s*\(\s*(?P<quote>['\"]?)(?P<key>[A-Za-z0-9_.]+)(?P=quote)\s*\))?$", re.IGNORECASE)
RESERVED_WORDS = "spark.sql.ansi.enforceReservedKeywords"
# Words that open a clause which a cut-short statement leaves empty, and Spark's default parser would then read as
# an alias (`... FROM t WHERE`).
CLAUSES = frozenset({"WHERE", "HAVING", "QUALIFY", "LIMIT", "OFFSET", "GROUP", "ORDER", "SORT", "CLUSTER",
                     "DISTRIBUTE", "WINDOW", "UNION", "EXCEPT", "INTERSECT", "MINUS", "JOIN", "ON", "USING"})
MAX_ROWS = 10_000  # a table's rows: what a person reads at a terminal
PIECE_ROWS = 10_000  # CSV and JSON rows written at a time



def query_lake(lake: Lake, statement: str, fmt: str = "table", as_of: datetime | None = None,
               note: Callable[[str], None] | None = None) -> Iterator[str]:
    """Run a read-only statement over the lake's tables, as they are or as they were at `as_of` (each table's
    version then is said to `note`); its result, formatted, in pieces. A table (for a person at a terminal) shows
    the first `MAX_ROWS` rows and says when there are more; CSV and JSON (for a file or another program) give
    every row, streamed from Spark a partition at a time, so no row is left out unsaid."""
    text = check_read_only(statement)
    versions = lake.register_views(as_of)
    tables = list(versions)
    if as_of is not None and note is not None:
        note(_as_of_note(lake, as_of, versions))
    with _rejected(tables, text, then=as_of is not None):
        frame, columns, shaped = _read(lake.spark, text, _on_delta(lake, text, tables) or text, fmt)
        if fmt == "json":
            _check_json_names(columns)
        if fmt == "table" and lexed(text)[0].word == "EXPLAIN":  # a plan reads as Spark writes it, line by line
            yield "".join(f"{r[0]}\n" for r in frame.collect())
            return
        if fmt == "table":
            rows = [shaped(tuple(r)) for r in frame.limit(MAX_ROWS + 1).collect()]
            yield render(columns, rows[:MAX_ROWS], fmt, more=len(rows) > MAX_ROWS)
            return
        every = frame.toLocalIterator()
        piece = [shaped(tuple(r)) for r in islice(every, PIECE_ROWS)]
        yield render(columns, piece, fmt)  # the header goes with the first piece, even of no rows
        while len(piece) == PIECE_ROWS:
            piece = [shaped(tuple(r)) for r in islice(every, PIECE_ROWS)]
            yield render(columns, piece, fmt, header=False)


def _read(spark: SparkSession, given: str, statement: str,
          fmt: str) -> tuple[DataFrame, list[str], Callable[[tuple], tuple]]:
    """The rows of `statement` (what Spark runs for the user's `given` one), parsed first with SQL's reserved words
    held to their meaning (`_reserved_words`). Where that parse fails, as Spark's default parser reads it, which
    takes some of those words as names (`GROUP BY ALL`, `any(x)`, a column named `time`), unless a clause of the
    user's statement is empty (`_empty_clause`): that parser would read the clause's word as an alias."""
    try:
        with _reserved_words(spark):
            return _analysed(spark, statement, fmt)
    except ParseException:
        empty = _empty_clause(lexed(given))
        if empty is not None:
            line, column = place(given, empty.start)
            raise SqlError(f"the clause {empty.text} at line {line}, column {column} has nothing in it: what follows "
                           f"{empty.text} is missing (if {empty.text} names a column or a table, write it in "
                           f"backquotes: `{empty.text}`)") from None
    return _analysed(spark, statement, fmt)


def _analysed(spark: SparkSession, statement: str, fmt: str) -> tuple[DataFrame, list[str], Callable[[tuple], tuple]]:
    """The statement's frame, its columns and their shaper for `fmt`: analysed, so parsed, here, in either kind of
    session (Spark Connect parses at the first question about a frame)."""
    frame = spark.sql(statement)
    _check_nested_names(frame.schema)
    frame = _collectable(frame)
    return frame, frame.columns, shaper(frame.schema, fmt)


def _empty_clause(tokens: list[Token]) -> Token | None:
    """The first word of `CLAUSES` that nothing follows, or only a `)` or another such word."""
    for token, after in zip(tokens, [*tokens[1:], None], strict=True):
        if token.word in CLAUSES and (after is None or after.text == ")" or after.word in CLAUSES):
            return token
    return None


@contextmanager
def _reserved_words(spark: SparkSession) -> Iterator[None]:
    """Parse with SQL's reserved words held to their meaning (`spark.sql.ansi.enforceReservedKeywords`). Spark
    otherwise reads a statement cut short after its clause's keyword, `SELECT * FROM matches_q WHERE`, as a table
    given the alias `WHERE`, and answers every row. Only while the statement is parsed: the session may be the one
    a run in this process uses."""
    before = spark.conf.get(RESERVED_WORDS, "false")
    spark.conf.set(RESERVED_WORDS, "true")
    try:
        yield
    finally:
        spark.conf.set(RESERVED_WORDS, before)


@contextmanager
def _rejected(tables: list[str], statement: str, *, then: bool = False) -> Iterator[None]:
    """Spark's AnalysisException, parse and runtime errors of the statement as a SqlError: their first line, and
    what to do where the statement alone does not explain it."""
    try:
        yield
    except SqlError:
        raise
    except Exception as error:
        if for_the_user(error) is not None:
            raise  # not the statement's doing (a full disk, a lost JVM or engine): the command's end words it
        first = spark_said(error)
        hint = _hint(first, tables, statement, then=then)
        ended = first if not hint or first.endswith((".", "?", "!")) else f"{first}."
        raise SqlError(f"Spark rejected the query: {ended}{hint}") from None


def _as_of_note(lake: Lake, as_of: datetime, versions: dict[str, int | None]) -> str:
    """Which version of each table a statement read `as_of` reads: a kind's is its results table's."""
    held = {lake.holder(name): version for name, version in versions.items()}
    absent = sorted(set(lake.tables()) - set(held))
    said = ", ".join(f"{table} version {version}" for table, version in sorted(held.items())) or "no table"
    later = f"; created after it: {', '.join(absent)}" if absent else ""
    return f"as of {as_of.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC: {said}{later}"


def _on_delta(lake: Lake, text: str, tables: list[str]) -> str | None:
    """`DESCRIBE HISTORY|DETAIL <table> [LIMIT n]` and `SHOW TBLPROPERTIES <table> [(key)]` as Delta takes them, on
    the folder of the table that holds the named rows, written from their parts; None for any other statement, or a
    name the lake does not read by (Spark then says so)."""
    described, properties = DELTA_DESCRIBE.match(text), DELTA_PROPERTIES.match(text)
    found = described or properties
    if found is None or found["table"].lower() not in {t.lower() for t in tables}:
        return None
    table = "delta.`" + lake.path(lake.holder(found["table"].lower())).replace("`", "``") + "`"
    if described is not None:
        return f"DESCRIBE {described['command'].upper()} {table}" + (
            f" LIMIT {int(described['limit'])}" if described["limit"] else "")
    return f"SHOW TBLPROPERTIES {table}" + (f" ('{found['key']}')" if found["key"] else "")


def _meant(error: str, tables: list[str]) -> str:
    """The lake's tables a name Spark did not find may stand for: a misspelling of one (`matches_aggresive_driving`),
    or a table's kind alone (`matches`), which names a table of each query."""
    missing = re.search(r"table or view `([^`]+)` cannot be found", error)
    if missing is None:
        return ""
    name = missing.group(1).lower()
    meant = sorted(t for t in tables if t.lower().startswith(f"{name}_")) or \
        difflib.get_close_matches(name, tables, n=1, cutoff=0.8)
    return f" Did you mean {' or '.join(meant)}?" if meant else ""


def _hint(error: str, tables: list[str], statement: str, *, then: bool = False) -> str:
    """What to do after an error of Spark's that the statement alone does not explain: a table the lake does not
    have (the likeliest slip is the name: its tables), a past version whose files are gone (`then`: read
    `--as-of`), a table's CREATE statement, which neither a view nor Delta gives, or an older version of one, which
    the views `pielake sql` reads by do not give."""
    if "TABLE_OR_VIEW_NOT_FOUND" in error:
        if not tables:
            return " The lake had no tables then." if then else " The lake has no tables yet."
        return f"{_meant(error, tables)} The lake's tables{' then' if then else ''}: {', '.join(sorted(tables))}."
    if then and ("FileNotFound" in error or "FILE_NOT_FOUND" in error):
        return (" The table's version then has files maintenance has removed since (VACUUM; `pielake maintain "
                "--keep-days` is how long a lake keeps its tables' past): read a later time.")
    if "PARSE_SYNTAX_ERROR" in error and (near := re.search(r"at or near '([A-Za-z_]+)'", error)):
        word = near.group(1)
        quoted = f"{word} names a column or a table, write it in backquotes (`{word}`)"
        if re.search(rf"\b{word}\s*$", statement, flags=re.IGNORECASE):
            return f" The statement ends with {word}: what follows it is missing (if {quoted})."
        return f" If {quoted}."
    if "SHOW CREATE TABLE" in error:
        return (" Delta writes no CREATE statement of a table: DESCRIBE TABLE <table> lists its columns, and DESCRIBE "
                "DETAIL <table> its folder (location), which CREATE TABLE <name> USING delta LOCATION '<location>' "
                "registers in a metastore, columns and all.")
    if "TIME_TRAVEL" in error:
        return (" pielake sql reads each table by a view: --as-of TIME reads every table as it was at TIME "
                "(DESCRIBE HISTORY <table> lists its versions and their times), and a SQL client of the engine's "
                "JDBC endpoint reads one version of a table (VERSION AS OF n).")
    return ""


INTERVALS = (DayTimeIntervalType, YearMonthIntervalType, CalendarIntervalType)
RESHAPED = (*INTERVALS, TimestampType)  # what `_collectable` changes before a value reaches Python


def _collectable(frame: DataFrame) -> DataFrame:
    """`frame` with each interval it holds as Spark writes it (`INTERVAL '0 00:05:00' DAY TO SECOND`), and each
    TIMESTAMP as the session's clock reads it (UTC), within a struct, an array or a map too, which keep their
    shape (a struct its fields' names); other columns as they are. PySpark collects no year-month or calendar
    interval (their `fromInternal` is not implemented), a day-time one as Python's `timedelta`, which reads
    `0:05:00`, and a TIMESTAMP as the wall clock of the zone the client process runs in, which would write an
    event at midnight UTC as `2025-12-31 19:00:00` in New York, saying no zone; a TIMESTAMP_NTZ it takes as it
    is."""
    fields = frame.schema.fields
    if not any(_holds_reshaped(field.dataType) for field in fields):
        return frame
    numbered = frame.toDF(*(f"c{i}" for i in range(len(fields))))  # the names may repeat: `a.id, b.id`
    return numbered.select(*(_reshaped(F.col(f"c{i}"), field.dataType).alias(field.name)
                             for i, field in enumerate(fields)))


def _reshaped(value: Column, kind: DataType) -> Column:
    """`value` of `kind` with every interval in it as text and every TIMESTAMP as UTC's wall clock (`utc_clock`),
    and nothing else changed."""
    if not _holds_reshaped(kind):
        return value
    if isinstance(kind, StructType):  # its fields' names are unique (`_check_nested_names`)
        return F.when(value.isNotNull(), F.struct(*(_reshaped(value[f.name], f.dataType).alias(f.name)
                                                    for f in kind.fields)))
    if isinstance(kind, ArrayType):
        return F.transform(value, lambda element: _reshaped(element, kind.elementType))
    if isinstance(kind, MapType):
        keys = F.transform(F.map_keys(value), lambda key: _reshaped(key, kind.keyType))
        return F.map_from_arrays(keys, F.transform(F.map_values(value),
                                                  lambda entry: _reshaped(entry, kind.valueType)))
    return utc_clock(value) if isinstance(kind, TimestampType) else value.cast(StringType())


def _holds_reshaped(kind: DataType) -> bool:
    return any(isinstance(within, RESHAPED) for within in _nested(kind))


def _nested(kind: DataType) -> Iterator[DataType]:
    """`kind` and every type within it (a struct's fields', an array's elements', a map's keys' and values'),
    outer first."""
    yield kind
    if isinstance(kind, StructType):
        inner = [field.dataType for field in kind.fields]
    elif isinstance(kind, ArrayType):
        inner = [kind.elementType]
    elif isinstance(kind, MapType):
        inner = [kind.keyType, kind.valueType]
    else:
        inner = []
    for each in inner:
        yield from _nested(each)


CONTROL = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})
NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
# The Spark types whose values every format writes as Python gives them (`str`, JSON's own or its `default=str`),
# and those CSV and a table write so too: JSON has no number for NaN and the infinities, CSV writes `nan`, `inf`.
# A FLOAT is neither: Python holds it as the double nearest it, 0.10000000149011612 for 0.1 (`_single`).
AS_THEY_ARE = (StringType, ByteType, ShortType, IntegerType, LongType, DecimalType, DateType, TimestampType,
               TimestampNTZType)
AS_TEXT_THEY_ARE = (*AS_THEY_ARE, DoubleType)


def _check_json_names(columns: list[str]) -> None:
    """A JSON line is an object of the row's columns by name, so a name given twice would keep one value of two."""
    twice = _twice(columns)
    if twice:
        raise SqlError(f"the result names {', '.join(twice)} more than once, and a JSON line keeps one value a name: "
                       "name each column once (SELECT a.id AS a_id, b.id AS b_id), or --format csv")


def _check_nested_names(schema: StructType) -> None:
    """Every format writes a nested value as JSON, an object of a struct's fields by name, so a struct that names
    a field twice (`struct(a.d, b.d)`) would keep one value of two."""
    for field in schema.fields:
        twice = _names_twice(field.dataType)
        if twice:
            raise SqlError(f"the column {field.name} holds a struct that names {', '.join(twice)} more than once, "
                           "and a nested value is written as JSON, which keeps one value a name: name each field "
                           "once (struct(a.d AS a_d, b.d AS b_d))")


def _names_twice(kind: DataType) -> list[str]:
    """The field names a struct within `kind` gives more than once (the first such struct's)."""
    structs = (within for within in _nested(kind) if isinstance(within, StructType))
    return next((twice for twice in (_twice([f.name for f in struct.fields]) for struct in structs) if twice), [])


def _twice(names: list[str]) -> list[str]:
    """The names given more than once, in order."""
    return sorted(name for name, count in Counter(names).items() if count > 1)


def shaper(schema: StructType, fmt: str) -> Callable[[tuple], tuple]:
    """A row of `schema` as `render` writes it in `fmt`: the values of the columns of other types than those it
    writes as they are made `plain` (JSON) or `_text` (CSV, a table), the others left as they are, so that a long
    result of such columns costs what writing it did, not a Python step a value more."""
    shape, kept = (plain, AS_THEY_ARE) if fmt == "json" else (_text, AS_TEXT_THEY_ARE)
    others = [(i, isinstance(field.dataType, FloatType)) for i, field in enumerate(schema.fields)
              if not isinstance(field.dataType, kept)]

    def shaped(row: tuple) -> tuple:
        if not others:
            return row
        values = list(row)
        for i, single in others:
            value = values[i]
            values[i] = None if value is None else shape(_single(value) if single else value)
        return tuple(values)

    return shaped


def _single(value: float) -> float:
    """A FLOAT's value as the fewest digits that read back as it (0.1, not the 0.10000000149011612 Python holds),
    as Spark shows it."""
    if not math.isfinite(value):
        return value
    for digits in range(1, 10):  # nine digits tell every FLOAT apart
        shortest = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", shortest))[0] == value:
            return shortest
    return value


def plain(value: object) -> object:
    """A value Spark gave, as JSON holds it: a struct an object of its fields by name, a map an object, an array a
    list, binary data base64 (as Spark's JSON writer writes it), NaN and the infinities text (JSON has no such
    numbers); times, dates and decimals their text, others as they are."""
    if isinstance(value, Row):  # a tuple too: first
        return {name: plain(field) for name, field in value.asDict().items()}
    if isinstance(value, dict):
        return {_text(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE.get(value, "NaN")
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _text(value: object) -> str:
    """A value as a CSV field or a table's cell holds it: nested values as JSON, true and false as SQL writes them."""
    value = plain(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _cell(value: object) -> str:
    """A value as a table's cell shows it: on one line, its line breaks and tabs written as `\\n`, `\\r`, `\\t`
    (CSV and JSON keep them as they are)."""
    return str(value).translate(CONTROL)


def _width(cell: str) -> int:
    """The columns a terminal gives `cell`: two for a wide character (most of Chinese, Japanese and Korean)."""
    return len(cell) + sum(unicodedata.east_asian_width(char) in "WF" for char in cell if ord(char) > 0x10FF)


def render(columns: list[str], rows: list[tuple], fmt: str, *, header: bool = True, more: bool = False) -> str:
    """Rows, as `shaper` shaped them, as `fmt` writes them: a table (its header, and a last line counting them,
    saying if there were `more` than it shows), CSV (its header line if `header`; NULL an empty field), or JSON
    lines."""
    if fmt == "json":
        return "".join(json.dumps(dict(zip(columns, r, strict=True)), ensure_ascii=False, default=str) + "\n"
                       for r in rows)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if header:
            writer.writerow(columns)
        writer.writerows(rows)
        return out.getvalue()
    cells = [[_cell(c) for c in columns], *[["NULL" if v is None else _cell(v) for v in r] for r in rows]]
    widths = [max(_width(row[i]) for row in cells) for i in range(len(columns))]
    lines = [" | ".join(v + " " * (w - _width(v)) for v, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    counted = (f"(the first {len(rows):,} rows; there are more: narrow the query, or --format csv or json for "
               "every row)") if more else f"({V.counted(len(rows), 'row')})"
    return "\n".join(lines) + f"\n{counted}\n"
