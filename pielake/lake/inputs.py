"""The CSV files a run's input path names, grouped by their header line.

Spark reads the CSV files of one path with the first file's header and takes every later file's columns by
position: a file whose header orders the same columns otherwise would have its values put under the wrong names,
with no error when their types agree. A run reads each group of files that share a header on its own and joins
the groups by column name (`pielake.pipeline.ingest.read_raw`), so every file is read by its own header.

A path is a file, a folder (its files) or a pattern (`/landing/cars/*.csv`), as Spark takes them. A name that
starts with `.` or `_` is not read, as Spark does not read it. A URL (`s3a://…`, `hdfs://…`) is listed by Spark
alone: its files are read as one group.
"""

from __future__ import annotations

import glob
import os
import re

from pielake.lake.landed import HIDDEN

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def header_groups(path: str) -> list[list[str]]:
    """The local files `path` names, in name order, grouped by header line in the order each header is first seen;
    files without a header line (empty) hold no rows and are left out. Empty for a URL or a path naming nothing."""
    groups: dict[bytes, list[str]] = {}
    for file in _local_files(path):
        header = _header_line(file)
        if header:
            groups.setdefault(header, []).append(file)
    return list(groups.values())


def _local_files(path: str) -> list[str]:
    if URL.match(path):
        return []
    named = [os.path.join(path, name) for name in os.listdir(path)] if os.path.isdir(path) else glob.glob(path)
    return sorted(f for f in named if os.path.isfile(f) and not os.path.basename(f).startswith(HIDDEN))


def _header_line(file: str) -> bytes:
    """The file's first line as a CSV reader sees its column names: without a byte-order mark or line end."""
    with open(file, "rb") as stream:
        line = stream.readline()
    return line.removeprefix(BYTE_ORDER_MARK).rstrip(b"\r\n")
