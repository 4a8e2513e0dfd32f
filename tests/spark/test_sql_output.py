"""What `pielake sql` writes of a result: every row, or, in a table at a terminal, the first rows and a line saying
that there are more. A row left out without a word would read as a smaller answer."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.lake.sql import MAX_ROWS, PIECE_ROWS, SqlError, query_lake

ROWS = MAX_ROWS + PIECE_ROWS // 2 + 3  # more than a table shows, and in more than one piece of CSV or JSON
STATEMENT = f"SELECT id, id % 7 AS r FROM range({ROWS})"


def test_csv_and_json_give_every_row_of_a_result_longer_than_a_table_shows(spark: SparkSession,
                                                                            tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path)
    pieces = list(query_lake(lake, STATEMENT, "csv"))
    assert len(pieces) > 1  # streamed, not held whole
    rows = list(csv.reader(io.StringIO("".join(pieces))))
    assert rows[0] == ["id", "r"] and [int(r[0]) for r in rows[1:]] == list(range(ROWS))
    assert [json.loads(line)["id"] for line in "".join(query_lake(lake, STATEMENT, "json")).splitlines()] == \
        list(range(ROWS))


def test_a_table_shows_its_first_rows_and_says_there_are_more(spark: SparkSession, tmp_path: Path) -> None:
    *shown, said = "".join(query_lake(Lake(spark, tmp_path), STATEMENT, "table")).splitlines()
    assert len(shown) == 2 + MAX_ROWS  # the header and its rule, then the rows
    assert said == ("(the first 10,000 rows; there are more: narrow the query, or --format csv or json for every "
                    "row)")
    assert "".join(query_lake(Lake(spark, tmp_path), f"SELECT id FROM range({MAX_ROWS})", "table")).endswith(
        f"\n({MAX_ROWS} rows)\n")


def test_an_empty_result_in_csv_is_its_header(spark: SparkSession, tmp_path: Path) -> None:
    assert "".join(query_lake(Lake(spark, tmp_path), "SELECT id AS n FROM range(0)", "csv")) == "n\n"


def test_an_error_spark_meets_while_the_rows_stream_is_said_as_the_query_s(spark: SparkSession,
                                                                           tmp_path: Path) -> None:
    """ANSI SQL fails a bad cast when the row is computed, after the statement was accepted."""
    with pytest.raises(SqlError, match=r"Spark rejected the query: .*\[CAST_INVALID_INPUT\] The value 'x0'"):
        "".join(query_lake(Lake(spark, tmp_path), "SELECT CAST(concat('x', id) AS INT) FROM range(3)", "csv"))
