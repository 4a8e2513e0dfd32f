"""Which CSV files a run's input path names, and which of them share a header line."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pielake.lake.inputs import header_groups, schema_groups


def test_files_are_grouped_by_header_line_without_its_byte_order_mark_or_line_end(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"unit,ts\nu1,1\n")
    (tmp_path / "b.csv").write_bytes(b"ts,unit\n2,u1\n")
    (tmp_path / "c.csv").write_bytes(b"\xef\xbb\xbfunit,ts\r\nu1,3\r\n")
    (tmp_path / "d.csv").write_bytes(b"")
    (tmp_path / ".e.csv.part").write_bytes(b"x,y\n")
    (tmp_path / "_f.csv").write_bytes(b"x,y\n")
    named = [[str(tmp_path / "a.csv"), str(tmp_path / "c.csv")], [str(tmp_path / "b.csv")]]
    assert header_groups(str(tmp_path)) == named
    assert header_groups(str(tmp_path / "*.csv")) == named
    assert header_groups(str(tmp_path / "b.csv")) == [[str(tmp_path / "b.csv")]]


def test_parquet_files_are_grouped_by_their_columns_and_types_in_any_order(tmp_path: Path) -> None:
    pq.write_table(pa.table({"unit": ["u1"], "ts": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"ts": [2], "unit": ["u1"]}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"unit": ["u1"], "ts": ["3"]}), tmp_path / "c.parquet")
    (tmp_path / "d.parquet").write_bytes(b"not parquet")
    assert schema_groups(str(tmp_path / "*.parquet")) == [[str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")],
                                                         [str(tmp_path / "c.parquet")]]


def test_a_url_or_a_path_naming_nothing_is_left_to_spark(tmp_path: Path) -> None:
    assert header_groups("s3a://bucket/landing/*.csv") == []
    assert header_groups(str(tmp_path / "none" / "*.csv")) == []
