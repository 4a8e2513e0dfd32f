"""The files a run's input path names, grouped by how Spark must read them.

Spark reads the files of one path as the first of them describes itself. A later CSV file's columns are taken by
position under the first file's header, so a file that orders the same columns otherwise would have its values
put under the wrong names, with no error when their types agree; a later Parquet file's column of another type
than the first file's stops the read; a JSON file of one value over many lines reads as no record unless read
whole. A run reads each group of files that share a header line (CSV), a schema (Parquet) or a layout (JSON) on
its own and joins the groups by column name (`pielake.pipeline.ingest.read_raw`). A CSV or JSON file compressed
with gzip or bzip2 is looked into as Spark reads it, decompressed.

A path is a file, a folder (its files, and its partition folders') or a pattern (`/landing/cars/*.csv`), as Spark
takes them. A name that starts with `.` or `_` is not read, as Spark does not read it. A URL (`s3a://…`, `hdfs://…`) is
listed by Spark alone: its files are read as one group.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import difflib
import glob
import gzip
import io
import itertools
import json
import os
import re
import zlib
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from pielake.errors import PielakeError

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
HADOOP_PATTERN = re.compile(r"([\\*?\[\]{}])")  # the characters Hadoop's paths read as a pattern's
HIDDEN = (".", "_")  # names Spark does not read: a writer's file before it is complete, `_SUCCESS`, `_delta_log`
# Spark's CSV and JSON readers decompress a file its last suffix names a codec of (in any case). pielake looks
# into a local file before Spark reads it (its header, a record spanning lines, its layout), through Python's
# own gzip and bzip2; a file of another codec, an archive or a spreadsheet is refused with its fix (`NOT_READ`).
OPENERS: dict[str, Callable[[str, str], BinaryIO]] = {".gz": gzip.open, ".bz2": bz2.open}
COMPRESSED_HINT = "land CSV and JSON files as they are, or compressed as .gz or .bz2"
SPREADSHEET_HINT = "save its sheet as CSV (a spreadsheet's own format is not read)"
NOT_READ = {**dict.fromkeys((".zip", ".tar", ".tgz", ".7z", ".xz", ".zst", ".lz4", ".snappy", ".deflate", ".br"),
                            COMPRESSED_HINT),
            **dict.fromkeys((".xlsx", ".xls", ".xlsm", ".ods"), SPREADSHEET_HINT)}


Shared = TypeVar("Shared", bound=Hashable)


@dataclass(frozen=True)
class FileGroup(Generic[Shared]):
    """Files one read of Spark's takes alike, and what they share: a header line, a schema or a layout, read from
    the files once, so that their reader need not look into them again."""

    files: tuple[str, ...]
    shared: Shared
    base: str | None = None  # the folder they were found in: its `name=value` subfolders are partition columns

    @property
    def paths(self) -> list[str]:
        """The files as Spark's reader takes them. Hadoop reads every path it is given as a pattern of names
        (`[1]`, `{a,b}`, `?`, `*`), so a local file's name, which is literal, has those characters escaped: a
        file named `cars[1].csv` would otherwise name no file. A URL's pattern is Spark's to list, as given.
        Hadoop cannot expand a pattern whose path holds a `:`, so a file named with both is refused, saying so."""
        return [file if URL.match(file) else _literal(file) for file in self.files]


def _literal(file: str) -> str:
    if not HADOOP_PATTERN.search(file):
        return file
    if ":" in file:
        raise PielakeError(f"cannot read '{file}': Spark reads no file whose path holds both ':' and one of "
                           "[ ] { } ? * \\; rename it without one of them (a ':' may be a '-')")
    return HADOOP_PATTERN.sub(r"\\\1", file)


@dataclass(frozen=True)
class CsvHead:
    """What a CSV file holds before its rows, as its reader must know it: its header line, and the lines its stream
    skips (`StreamSchema.skip_lines`) that are not blank, each without its line end."""

    header: bytes
    skipped: tuple[bytes, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.header)


def header_groups(path: str, skip_lines: tuple[int, ...] = ()) -> list[FileGroup[CsvHead]]:
    """The CSV files `path` names, grouped by their head (`csv_head`, `grouped`)."""
    return grouped(path, lambda file: csv_head(file, skip_lines))


def schema_groups(path: str) -> list[FileGroup[frozenset[tuple[str, str]]]]:
    """The Parquet files `path` names, grouped by schema, their columns' names and types in any order (`grouped`)."""
    return grouped(path, _parquet_schema)


def json_groups(path: str) -> list[FileGroup[str]]:
    """The JSON files `path` names, grouped by layout (`JSON_LINES` or `JSON_DOCUMENT`, `grouped`)."""
    return grouped(path, _json_layout)


def grouped(path: str, describe: Callable[[str], Shared]) -> list[FileGroup[Shared]]:
    """The local files `path` names, in name order, grouped by what `describe` says of each, in the order each
    description is first seen; a file it finds nothing in (an empty one, or one of blank lines) is left out, as
    Spark reads no row of it. Empty for a URL or a path naming nothing."""
    groups: dict[Shared, list[str]] = {}
    for file in local_files(path):
        description = describe(file)
        if description:
            groups.setdefault(description, []).append(file)
    base = path if os.path.isdir(path) else None
    return [FileGroup(tuple(files), shared, base) for shared, files in groups.items()]


JSON_LINES, JSON_DOCUMENT = "lines", "document"
FIRST_LINE_BYTES = 1 << 20  # a first line longer than this is a JSON value of its own, as JSON Lines' are


def _json_layout(file: str) -> str:
    """`JSON_DOCUMENT` where the file's first line that is not blank is `[` or `{` alone or an array it does not
    close, as `json.dump(rows, indent=2)` and many exports write an array of records (a reader of lines reads no
    record of such a file), else `JSON_LINES`: a record cut short on the first line of JSON Lines is that line's
    own fault (it is quarantined, the others read), not a sign of one value over the whole file. Empty for a file
    of blanks."""
    with opened(file, to_end=True) as stream:
        for line in iter(lambda: stream.readline(FIRST_LINE_BYTES), b""):
            first = line.removeprefix(codecs.BOM_UTF8).strip()
            if first:
                if first == b"{" or (first.startswith(b"[") and len(line) < FIRST_LINE_BYTES and not _whole(first)):
                    return JSON_DOCUMENT
                return JSON_LINES
    return ""


def _whole(text: bytes) -> bool:
    """`text` is one JSON value, opened and closed."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def why_no_file(path: str) -> str | None:
    """Why reading `path` can only fail, where it is local and names no file, and the fix. A folder whose files lie
    in subfolders that are no partition folders (`2026-12-01/`) is told the pattern that names them. None where
    `path` names a file, and for a URL, whose files are Spark's to list."""
    if URL.match(path) or local_files(path):
        return None
    fix = "give an events file, a folder of them or a pattern of their names (/landing/cars/*.csv)"
    if not os.path.isdir(path):
        return f"the events path '{path}' names no file{_close_name(path)}; {fix}"
    unread = sorted(name for name in os.listdir(path) if os.path.isdir(os.path.join(path, name))
                    and not name.startswith(HIDDEN) and not PARTITION_FOLDER.fullmatch(name))
    if not unread:
        return f"the events folder '{path}' holds no file; {fix}"
    shown = ", ".join(f"{name}/" for name in unread[:3]) + (", ..." if len(unread) > 3 else "")
    return (f"the events folder '{path}' holds no file of its own, and of its subfolders ({shown}) a run reads "
            f"only partition folders (day=2026-12-01/); name their files with a pattern: "
            f"'{os.path.join(path, '*', '*')}'")


def _close_name(path: str) -> str:
    """` (gen/pumps.csv is there)` where a file beside where `path` points has a name close to its name, in any
    case (a file system that tells case apart finds `Pumps.csv` no more than `pumsp.csv`); else nothing."""
    folder, name = os.path.split(path)
    if any(c in name for c in "*?[") or not os.path.isdir(folder or "."):  # a pattern names no one file
        return ""
    names = {n.lower(): n for n in os.listdir(folder or ".") if not n.startswith(HIDDEN)
             and os.path.isfile(os.path.join(folder, n))}
    close = difflib.get_close_matches(name.lower(), names, n=1, cutoff=0.8)
    return f" ({os.path.join(folder, names[close[0]])} is there)" if close else ""


PARTITION_FOLDER = re.compile(r"[^.=_][^=]*=[^=]*")  # `day=2026-01-01`: a column's name, `=`, its value


def local_files(path: str) -> list[str]:
    """The files Spark reads for `path` where it is local, in name order; none for a URL. Of a folder, those of
    `folder_files`."""
    if URL.match(path):
        return []
    if os.path.isdir(path):
        return folder_files(path)
    named = [path] if os.path.isfile(path) else glob.glob(path)  # a file's own name, else a pattern of names
    return sorted(f for f in named if os.path.isfile(f) and not os.path.basename(f).startswith(HIDDEN))


def folder_files(folder: str) -> list[str]:
    """A folder's files as Spark reads a folder, in name order: its own and those in its partition folders: a
    table written by Spark, Hive or pyarrow keeps its files in a folder per partition (`day=2026-01-01/`), whose
    value is a column of its rows (`FileGroup.base`). Another subfolder (an `archive/` of files already read) is
    not the folder's data, and is not read."""
    found = []
    for parent, subfolders, names in os.walk(folder):
        subfolders[:] = [name for name in subfolders if PARTITION_FOLDER.fullmatch(name)]
        found.extend(os.path.join(parent, name) for name in names if not name.startswith(HIDDEN))
    return sorted(found)


def spans_lines(path: str) -> bool:
    """Whether a record of a local CSV file `path` names spans lines: a line break inside quotes (RFC 4180: a
    quoted field may hold one; a doubled quote inside it turns quoting off and on again). Only a reader of the whole
    file can read such a record. A URL's files are not looked into."""
    import numpy as np  # noqa: PLC0415 (the CLI checks paths before it needs numpy)

    quote, line_break = ord('"'), ord("\n")
    for file in local_files(path):
        inside = False  # within quotes where the chunk before ended
        with opened(file) as stream:
            while chunk := stream.read(1 << 22):
                if not inside and b'"' not in chunk:
                    continue
                data = np.frombuffer(chunk, np.uint8)
                quoted = np.logical_xor.accumulate(data == quote) ^ inside  # after each byte: within quotes
                if (quoted & (data == line_break)).any():
                    return True
                inside = bool(quoted[-1])
    return False


# Byte-order marks of encodings that write ASCII in more than one byte, by their names.
WIDE_MARKS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
              (codecs.BOM_UTF16_BE, "UTF-16"))


def csv_head(file: str, skip_lines: tuple[int, ...] = ()) -> CsvHead:
    """The file's head: its header, the first line that is neither blank nor skipped, as Spark's CSV reader takes
    its column names (without a byte-order mark or line end), and the lines `skip_lines` numbers (1 the first). An
    empty header for a file of blank lines. A file whose mark says it is UTF-16 or UTF-32 (Excel's "Unicode Text")
    is refused: a reader of lines splits its text between the bytes of a character."""
    header, skipped, last = b"", [], max(skip_lines, default=0)
    with opened(file) as stream:
        for number, line in enumerate(_lines(stream), 1):
            if number == 1:
                _refuse_wide(file, line)
            text = line.removeprefix(codecs.BOM_UTF8) if number == 1 else line
            if number in skip_lines:
                skipped.append(text)
            elif not header:
                header = text
            if header and number >= last:
                break
    return CsvHead(header, tuple(text for text in skipped if text))


def first_records(file: str, separator: str, count: int) -> Iterator[list[str]]:
    """The fields of the first `count` records after the header of a CSV file that skips no line, read by Python's
    csv module as pielake reads a header (`_fields` in `pielake.pipeline.ingest`): quoted as RFC 4180 writes them,
    blank lines left out, text that is not UTF-8 replaced."""
    with opened(file) as stream:
        text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace", newline="")
        try:
            records = (fields for fields in csv.reader(text, delimiter=separator) if fields)
            yield from itertools.islice(records, 1, count + 1)
        finally:
            text.detach()  # the stream stays open: its opener closes it


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's lines, each without its end, as Spark's readers of text split them: at `\n`, `\r\n`, or `\r`
    alone, as classic Mac OS and some exports end lines. Read as Latin-1, one character a byte, so each line's
    bytes come back as they were, in any encoding that writes ASCII as ASCII."""
    text = io.TextIOWrapper(stream, encoding="latin-1", newline=None)
    try:
        for line in text:
            yield line.removesuffix("\n").encode("latin-1")
    finally:
        text.detach()  # the stream stays open: its opener closes it


def _refuse_wide(file: str, first_line: bytes) -> None:
    """A file in an encoding that writes ASCII in more than one byte, as its byte-order mark says, is refused."""
    wide = next((name for mark, name in WIDE_MARKS if first_line.startswith(mark)), None)
    if wide:
        raise PielakeError(f"{file} is {wide} (its byte-order mark says so), which pielake does not read as "
                           f"CSV: convert it to UTF-8 (iconv -f {wide} -t UTF-8), or save it as CSV UTF-8")


@dataclass(frozen=True)
class Undecoded:
    """Where a file's text first does not decode: its line (from 1), the bytes that do not, and the line as far
    as it decodes, to show them in."""

    file: str
    line: int
    undecoded: bytes
    text: str


def first_undecoded(path: str, encoding: str) -> Undecoded | None:
    """Where the first local file `path` names whose text does not decode in `encoding` first does not; None where
    every one does. Read in chunks through an incremental decoder, at the speed of reading the file."""
    for file in local_files(path):
        decoder, lines = codecs.getincrementaldecoder(encoding)(), 1
        with opened(file) as stream:
            while chunk := stream.read(1 << 22):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as error:
                    data = bytes(error.object)
                    start = data.rfind(b"\n", 0, error.start) + 1
                    return Undecoded(file, lines + data.count(b"\n", 0, error.start),
                                     data[error.start:error.end], data[start:error.start].decode(encoding)[-40:])
                lines += chunk.count(b"\n")
    return None


@dataclass(frozen=True)
class RepeatedKey:
    """A JSON key Spark reads as a column twice: the file, the record's line and the column of the key's second
    time (from 1; 0 where the file is one value over many lines), the key as written then, the line's start, and,
    where an earlier record spells the key in another case, where that is (else empty)."""

    file: str
    line: int
    column: int
    key: str
    text: str = ""
    earlier: str = ""


def first_repeated_key(path: str) -> RepeatedKey | None:
    """The first record of the local files `path` names that names a key twice (`{"v": 2, "v": 5}`), or in another
    case than an earlier record (`{"v": 2}`, then `{"V": 5}`), as Spark tells columns apart without their case (a
    nested key by its path); None where none does. Spark refuses the whole read of such files without saying
    where, so this is looked for only then, a record at a time."""
    spelled: dict[str, tuple[str, str]] = {}  # a key's path in lower case: its first spelling, and where
    for file in local_files(path):
        with opened(file) as stream:
            document = _json_layout(file) == JSON_DOCUMENT
            for number, line in [(0, stream.read())] if document else enumerate(stream, start=1):
                value, twice = _keys_of(line)
                if twice is not None:
                    return _repeated(file, number, line, twice)
                here = f"line {number} of {file}" if number else file
                for key in _paths(value):
                    first, where = spelled.setdefault(key.lower(), (key, here))
                    if first != key:
                        return _repeated(file, number, line, key, f"{where} names it '{first}'")
    return None


def _repeated(file: str, number: int, line: bytes, key: str, earlier: str = "") -> RepeatedKey:
    """Where a record names `key` (a path) twice, or, `earlier` said, once in another case than before: the column of
    its second time in the record, or of its one time."""
    name = key.rsplit(".", 1)[-1]
    if not number:
        return RepeatedKey(file, 0, 0, name, "", earlier)
    found = [m.start() + 1 for m in re.finditer(rb'"' + re.escape(name.encode()) + rb'"\s*:', line,
                                                0 if earlier else re.IGNORECASE)]
    column = (found[0] if earlier else found[-1]) if found and (earlier or len(found) > 1) else 0
    return RepeatedKey(file, number, column, name, line.decode(errors="replace").strip()[:80], earlier)


def _keys_of(text: bytes) -> tuple[object, str | None]:
    """A JSON value, and the first key one of its objects names twice (case aside); (None, None) where it is no
    JSON."""
    found: list[str] = []

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        seen: set[str] = set()
        for key, _ in items:
            if key.lower() in seen and not found:
                found.append(key)
            seen.add(key.lower())
        return dict(items)

    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except ValueError:
        return None, None
    return value, found[0] if found else None


def _paths(value: object, prefix: str = "") -> Iterator[str]:
    """The columns Spark reads a JSON record (or a list of them) as: each key's path (a list is one column)."""
    for record in value if isinstance(value, list) and not prefix else [value]:
        if isinstance(record, dict):
            for key, inner in record.items():
                yield f"{prefix}{key}"
                yield from _paths(inner, f"{prefix}{key}.") if isinstance(inner, dict) else ()


def text_format(path: str) -> str:
    """`path` without the suffix of the codec it is compressed with (`events.csv.gz`: `events.csv`), whose own
    suffix then names the format of its text."""
    return path[:-len(Path(path).suffix)] if Path(path).suffix.lower() in OPENERS else path


def refuse_unread(file: str) -> None:
    """Refuse a file of a codec pielake cannot look into, an archive or a spreadsheet, naming it and the fix."""
    suffix = Path(file).suffix.lower()
    if suffix in NOT_READ:
        raise PielakeError(f"{file}: a {suffix} file is not read; {NOT_READ[suffix]}")


@contextmanager
def opened(file: str, *, to_end: bool = False) -> Iterator[BinaryIO]:
    """The local file `file` as Spark's readers of text read it: decompressed where its suffix names gzip or
    bzip2. A compressed file that does not decompress (cut short, or not of its codec) is refused, naming it, as
    is a file of a codec pielake cannot look into; `to_end`: a compressed file is read to its end before it is
    closed, though the caller reads only its start, so that one cut short is refused here, not in Spark's task."""
    refuse_unread(file)
    suffix = Path(file).suffix.lower()
    try:
        with OPENERS.get(suffix, open)(file, "rb") as stream:
            yield stream
            while to_end and suffix in OPENERS and stream.read(1 << 22):
                pass
    except (EOFError, OSError, zlib.error) as error:  # gzip's BadGzipFile and bzip2's bad data are OSErrors
        if suffix not in OPENERS:
            raise
        raise PielakeError(f"{file} does not decompress as its suffix {suffix} says ({error}); land it again, "
                           "whole") from error


def nanosecond_columns(schema: frozenset[tuple[str, str]]) -> frozenset[str]:
    """The columns (in lower case) a Parquet schema (`schema_groups`) holds as times in nanoseconds, Parquet's
    TIMESTAMP(NANOS), as pandas writes a time unless told otherwise."""
    return frozenset(name for name, kind in schema if kind.startswith(NANOSECOND_TIME))


NANOSECOND_TIME = "timestamp[ns"  # pyarrow's name of the type, with or without a zone: `timestamp[ns, tz=UTC]`


def _parquet_schema(file: str) -> frozenset[tuple[str, str]]:
    """The file's columns and their types, read from its footer alone; empty for an empty file, which Spark reads
    no row of. A file that is not Parquet (cut short as it was written or copied, or of another format) is refused,
    naming it: Spark would stop the run at it, or, read with other groups, never see it."""
    import pyarrow.parquet as pq  # noqa: PLC0415 (0.3 s to import; the CLI reads paths before any Parquet)

    if not os.path.getsize(file):
        return frozenset()
    try:
        # A time of INT96 (as Hive, Impala and older Spark write one) is read by Spark as a time; pyarrow would
        # call it nanoseconds unless told its unit, and `nanosecond_columns` would read it as a number.
        with pq.ParquetFile(file, coerce_int96_timestamp_unit="us") as parquet:
            schema = parquet.schema_arrow
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise PielakeError(f"{file} is not a Parquet file ({error}); land it again, whole, or pass the --format "
                           "it is in") from error
    return frozenset((field.name.lower(), str(field.type)) for field in schema)
