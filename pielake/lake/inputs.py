"""The files a run's input path names, grouped by how Spark must read them.

Spark reads the files of one path as the first of them describes itself. A later CSV file's columns are taken by
position under the first file's header, so a file that orders the same columns otherwise would have its values
put under the wrong names, with no error when their types agree; a later Parquet file's column of another type
than the first file's stops the read. A run reads each group of files that share a header line (CSV) or a schema
(Parquet) on its own and joins the groups by column name (`pielake.pipeline.ingest.read_raw`).

A path is a file, a folder (its files) or a pattern (`/landing/cars/*.csv`), as Spark takes them. A name that
starts with `.` or `_` is not read, as Spark does not read it. A URL (`s3a://…`, `hdfs://…`) is listed by Spark
alone: its files are read as one group.
"""

from __future__ import annotations

import codecs
import glob
import json
import os
import re
from collections.abc import Callable, Hashable

from pielake.lake.landed import HIDDEN

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def header_groups(path: str) -> list[list[str]]:
    """The CSV files `path` names, grouped by header line (`grouped`)."""
    return grouped(path, _header_line)


def schema_groups(path: str) -> list[list[str]]:
    """The Parquet files `path` names, grouped by schema, their columns' names and types in any order (`grouped`)."""
    return grouped(path, _parquet_schema)


def grouped(path: str, describe: Callable[[str], Hashable]) -> list[list[str]]:
    """The local files `path` names, in name order, grouped by what `describe` says of each, in the order each
    description is first seen; a file it cannot describe (an empty one) is left out, for Spark to read or refuse.
    Empty for a URL or a path naming nothing."""
    groups: dict[Hashable, list[str]] = {}
    for file in local_files(path):
        description = describe(file)
        if description:
            groups.setdefault(description, []).append(file)
    return list(groups.values())


def json_groups(path: str) -> list[list[str]]:
    """The JSON files `path` names, grouped by layout: JSON Lines, or one JSON value over many lines (`grouped`)."""
    return grouped(path, _json_layout)


def json_documents(paths: list[str]) -> bool:
    """Whether the local JSON files of `paths` are each one JSON value over many lines, as `json.dump(rows,
    indent=2)` and many exports write an array of records: a reader of lines reads no record of such a file."""
    return any(_json_layout(file) == JSON_DOCUMENT for path in paths for file in local_files(path))


JSON_LINES, JSON_DOCUMENT = "lines", "document"
FIRST_LINE_BYTES = 1 << 20  # a first line longer than this is a JSON value of its own, as JSON Lines' are


def _json_layout(file: str) -> str:
    """`JSON_DOCUMENT` where the file's first line that is not blank is `[` or `{` alone or an array it does not
    close, else `JSON_LINES`: a record cut short on the first line of JSON Lines is that line's own fault (it is
    quarantined, the others read), not a sign of one value over the whole file. Empty for a file of blanks."""
    with open(file, "rb") as stream:
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


def names_no_file(path: str) -> bool:
    """`path` is local and names no file, so reading it can only fail; a URL's files are Spark's to list."""
    return not URL.match(path) and not local_files(path)


def local_files(path: str) -> list[str]:
    """The files Spark reads for `path` where it is local, in name order; none for a URL."""
    if URL.match(path):
        return []
    named = [os.path.join(path, name) for name in os.listdir(path)] if os.path.isdir(path) else glob.glob(path)
    return sorted(f for f in named if os.path.isfile(f) and not os.path.basename(f).startswith(HIDDEN))


def spans_lines(path: str) -> bool:
    """Whether a record of a local CSV file `path` names spans lines: a line break inside quotes (RFC 4180: a
    quoted field may hold one; a doubled quote inside it turns quoting off and on again). Only a reader of the whole
    file can read such a record. A URL's files are not looked into."""
    import numpy as np  # noqa: PLC0415 (the CLI checks paths before it needs numpy)

    quote, line_break = ord('"'), ord("\n")
    for file in local_files(path):
        inside = False  # within quotes where the chunk before ended
        with open(file, "rb") as stream:
            while chunk := stream.read(1 << 22):
                if not inside and b'"' not in chunk:
                    continue
                data = np.frombuffer(chunk, np.uint8)
                quoted = np.logical_xor.accumulate(data == quote) ^ inside  # after each byte: within quotes
                if (quoted & (data == line_break)).any():
                    return True
                inside = bool(quoted[-1])
    return False


def _header_line(file: str) -> bytes:
    """The file's first line as a CSV reader sees its column names: without a byte-order mark or line end."""
    with open(file, "rb") as stream:
        line = stream.readline()
    return line.removeprefix(codecs.BOM_UTF8).rstrip(b"\r\n")


def nanosecond_columns(paths: list[str]) -> frozenset[str]:
    """The columns (in lower case) that a local Parquet file of `paths` holds as times in nanoseconds, Parquet's
    TIMESTAMP(NANOS), as pandas writes a time unless told otherwise."""
    return frozenset(name for path in paths for file in local_files(path)
                     for name, kind in _parquet_schema(file) if kind.startswith(NANOSECOND_TIME))


NANOSECOND_TIME = "timestamp[ns"  # pyarrow's name of the type, with or without a zone: `timestamp[ns, tz=UTC]`


def _parquet_schema(file: str) -> frozenset[tuple[str, str]]:
    """The file's columns and their types, read from its footer alone; empty for a file that is not Parquet."""
    import pyarrow.parquet as pq  # noqa: PLC0415 (0.3 s to import; the CLI reads paths before any Parquet)

    try:
        schema = pq.read_schema(file)
    except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
        return frozenset()
    return frozenset((field.name.lower(), str(field.type)) for field in schema)
