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
from pielake.lake.sql import MAX_ROWS, PIECE_ROWS, query_lake
from pielake.lake.statements import SqlError
from tests.helpers import local_zone

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
        f"\n({MAX_ROWS:,} rows)\n")


def test_an_empty_result_in_csv_is_its_header(spark: SparkSession, tmp_path: Path) -> None:
    assert "".join(query_lake(Lake(spark, tmp_path), "SELECT id AS n FROM range(0)", "csv")) == "n\n"


def test_an_error_spark_meets_while_the_rows_stream_is_said_as_the_query_s(spark: SparkSession,
                                                                           tmp_path: Path) -> None:
    """ANSI SQL fails a bad cast when the row is computed, after the statement was accepted."""
    with pytest.raises(SqlError, match=r"Spark rejected the query: .*\[CAST_INVALID_INPUT\] The value 'x0'"):
        "".join(query_lake(Lake(spark, tmp_path), "SELECT CAST(concat('x', id) AS INT) FROM range(3)", "csv"))


def test_json_lines_keep_a_struct_s_field_names_and_refuse_a_name_given_twice(spark: SparkSession,
                                                                              tmp_path: Path) -> None:
    """A JSON line is an object by column name: two columns of one name would keep one value of the two."""
    lake = Lake(spark, tmp_path)
    said = "".join(query_lake(lake, "SELECT named_struct('step', 'ingest', 'seconds', 0.5D) AS s, 1 AS n", "json"))
    assert json.loads(said) == {"s": {"step": "ingest", "seconds": 0.5}, "n": 1}
    with pytest.raises(SqlError) as refused:
        "".join(query_lake(lake, "SELECT 1 AS a, 2 AS a, 3 AS b", "json"))
    assert str(refused.value) == ("the result names a more than once, and a JSON line keeps one value a name: name "
                                  "each column once (SELECT a.id AS a_id, b.id AS b_id), or --format csv")
    assert "".join(query_lake(lake, "SELECT 1 AS a, 2 AS a", "csv")) == "a,a\n1,2\n"


def test_a_statement_cut_short_after_a_keyword_is_refused_not_read_as_an_alias(spark: SparkSession,
                                                                               tmp_path: Path) -> None:
    """Spark alone reads `... FROM t WHERE` as the table t named WHERE, and answers every row of it."""
    lake = Lake(spark, tmp_path)
    with pytest.raises(SqlError) as refused:
        "".join(query_lake(lake, "SELECT id FROM range(3) WHERE", "csv"))
    assert str(refused.value) == ("the clause WHERE at line 1, column 25 has nothing in it: what follows WHERE is "
                                  "missing (if WHERE names a column or a table, write it in backquotes: `WHERE`)")
    for cut in ("SELECT any(id > 1) FROM range(3)\n WHERE", "SELECT id FROM range(3)\n WHERE LIMIT 2",
                "SELECT id, count(*) FROM range(3)\n WHERE GROUP BY ALL"):  # a name SQL reserves, an empty clause
        with pytest.raises(SqlError, match=r"^the clause WHERE at line 2, column 2 has nothing in it"):
            "".join(query_lake(lake, cut, "csv"))
    assert "".join(query_lake(lake, "SELECT `from` FROM (SELECT 7 AS `from`)", "csv")) == "from\n7\n"
    assert spark.conf.get("spark.sql.ansi.enforceReservedKeywords") == "false"  # as the session had it


def test_what_spark_s_sql_takes_as_names_of_words_sql_reserves_is_answered(spark: SparkSession,
                                                                          tmp_path: Path) -> None:
    """GROUP BY ALL and ORDER BY ALL, the aggregates any() and some(), current_user(), and a stream's column named
    by such a word (`time`), as Spark's SQL reads them."""
    lake = Lake(spark, tmp_path)
    rows = "(VALUES (1, 'a'), (2, 'a'), (3, 'b')) AS t(time, k)"
    assert "".join(query_lake(lake, f"SELECT k, count(*) AS n FROM {rows} GROUP BY ALL ORDER BY ALL", "csv")) == \
        "k,n\na,2\nb,1\n"
    assert "".join(query_lake(lake, f"SELECT any(time > 2) AS a, some(time > 3) AS s FROM {rows}", "csv")) == \
        "a,s\ntrue,false\n"
    assert "".join(query_lake(lake, f"SELECT max(time) AS m FROM {rows} WHERE k = 'a'", "csv")) == "m\n2\n"
    assert "".join(query_lake(lake, "SELECT current_user() IS NOT NULL AS u", "csv")) == "u\ntrue\n"


def test_a_plan_in_a_table_is_written_as_spark_writes_it_line_by_line(spark: SparkSession, tmp_path: Path) -> None:
    """EXPLAIN answers one row, the plan, whose line breaks a table's cell would write as `\\n`."""
    said = "".join(query_lake(Lake(spark, tmp_path), "EXPLAIN SELECT id FROM range(3) WHERE id > 1", "table"))
    assert said.startswith("== Physical Plan ==\n") and "\n+- " in said and "\\n" not in said


def test_intervals_and_floats_are_written_as_spark_writes_them(spark: SparkSession, tmp_path: Path) -> None:
    """A duration of a stream of timestamps (`a_te - a_ts`) is a day-time interval; PySpark collects a year-month
    or calendar interval not at all, and a FLOAT as the double nearest it."""
    lake = Lake(spark, tmp_path)
    statement = ("SELECT TIMESTAMP'2026-01-01 10:05:00' - TIMESTAMP'2026-01-01 10:00:00' AS d, "
                 "INTERVAL '1-2' YEAR TO MONTH AS ym, make_interval(0, 0, 0, 3) AS c, CAST(70.2 AS FLOAT) AS f, "
                 "INTERVAL 3 DAYS AS d")
    assert "".join(query_lake(lake, statement, "csv")) == (
        "d,ym,c,f,d\nINTERVAL '0 00:05:00' DAY TO SECOND,INTERVAL '1-2' YEAR TO MONTH,3 days,70.2,INTERVAL '3' DAY\n")
    assert json.loads("".join(query_lake(lake, statement.removesuffix(", INTERVAL 3 DAYS AS d"), "json"))) == {
        "d": "INTERVAL '0 00:05:00' DAY TO SECOND", "ym": "INTERVAL '1-2' YEAR TO MONTH", "c": "3 days", "f": 70.2}


def test_an_interval_within_a_struct_an_array_or_a_map_keeps_the_value_s_shape(spark: SparkSession,
                                                                             tmp_path: Path) -> None:
    """A struct holding a duration is an object of its fields by name, as any other struct is; a NULL stays
    NULL."""
    lake = Lake(spark, tmp_path)
    statement = ("SELECT named_struct('a', INTERVAL 1 DAY, 'b', 'x', 'n', named_struct('y', INTERVAL '1-2' YEAR TO "
                 "MONTH)) AS t, array(INTERVAL 2 HOURS, NULL) AS u, map('k', make_interval(0, 0, 0, 3)) AS m, "
                 "CAST(NULL AS STRUCT<a: INTERVAL DAY>) AS z")
    assert json.loads("".join(query_lake(lake, statement, "json"))) == {
        "t": {"a": "INTERVAL '1' DAY", "b": "x", "n": {"y": "INTERVAL '1-2' YEAR TO MONTH"}},
        "u": ["INTERVAL '02' HOUR", None], "m": {"k": "3 days"}, "z": None}


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_a_struct_that_names_a_field_twice_is_refused_as_json_would_keep_one_of_them(spark: SparkSession,
                                                                                    tmp_path: Path,
                                                                                    fmt: str) -> None:
    statement = "SELECT array(struct(x.d, y.d)) AS s FROM (SELECT 1 AS d) x, (SELECT 2 AS d) y"
    with pytest.raises(SqlError, match=r"^the column s holds a struct that names d more than once, .* name each "
                                       r"field once \(struct\(a\.d AS a_d, b\.d AS b_d\)\)$"):
        "".join(query_lake(Lake(spark, tmp_path), statement, fmt))


def test_a_timestamp_reads_as_utc_s_clock_wherever_the_client_runs(spark: SparkSession, tmp_path: Path) -> None:
    """The lake's times are UTC: a client on a machine set to New York's zone reads them so, within a struct, an
    array or a map too, and the two instants of the hour its clock repeats (1 November 2026, 01:00-02:00) apart.
    PySpark alone would hand them over as New York's wall clock, naming no zone."""
    lake = Lake(spark, tmp_path)
    statement = ("SELECT timestamp'2026-01-01 00:00:00' AS t, named_struct('a', timestamp'2026-01-01 00:00:00', "
                 "'b', array(timestamp'2026-11-01 05:30:00', timestamp'2026-11-01 06:30:00')) AS s, "
                 "map(timestamp'2026-01-01 00:00:00', timestamp_ntz'2026-01-01 00:00:00') AS m")
    with local_zone("America/New_York"):
        said = json.loads("".join(query_lake(lake, statement, "json")))
        table = "".join(query_lake(lake, "SELECT timestamp'2026-01-01 00:00:00' AS t", "table"))
    assert said == {"t": "2026-01-01 00:00:00",
                    "s": {"a": "2026-01-01 00:00:00", "b": ["2026-11-01 05:30:00", "2026-11-01 06:30:00"]},
                    "m": {"2026-01-01 00:00:00": "2026-01-01 00:00:00"}}
    assert "2026-01-01 00:00:00" in table
