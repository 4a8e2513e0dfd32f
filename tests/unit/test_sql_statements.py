"""What `pielake sql` takes: one statement that reads, with comments and quoted text as SQL has them; refused
before Spark starts otherwise."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import Row
from pyspark.sql.types import BinaryType, BooleanType, DoubleType, StringType, StructField, StructType

from pielake import vocabulary as V
from pielake.cli import main
from pielake.exitcodes import EXIT_USAGE
from pielake.lake.delta import Lake, LakeError
from pielake.lake.sql import render, shaper
from pielake.lake.statements import SqlError, as_of_time, check_read_only


@pytest.mark.parametrize(("given", "statement"), [
    ("SELECT 1;", "SELECT 1"),
    ("-- how many\nSELECT count(*) FROM runs;\n", "SELECT count(*) FROM runs"),
    ("/* one; two */ SELECT ';' AS a ;", "SELECT ';' AS a"),
    ("SELECT 'it''s; ok', 'a\\'; b' FROM t -- the end; really", "SELECT 'it''s; ok', 'a\\'; b' FROM t"),
    ("SELECT `odd;name` FROM t", "SELECT `odd;name` FROM t"),
], ids=["a final semicolon", "a comment first", "a block comment", "semicolons in literals", "a quoted name"])
def test_a_statement_is_read_as_sql_reads_it(given: str, statement: str) -> None:
    assert check_read_only(given) == statement


@pytest.mark.parametrize(("given", "said"), [
    ("SELECT 1; DROP TABLE runs", "one statement at a time"),
    ("SELECT 1 -- a comment\n; DROP TABLE runs", "one statement at a time"),
    ("/* SELECT 1 */ DROP TABLE runs", "only reads, and this statement starts with DROP at line 1, column 16: start "
                                       "with SELECT"),
    ("\n  SELEC * FROM runs", "starts with SELEC at line 2, column 3: start with SELECT, .*; did you mean SELECT\\?"),
    ("", "only reads, and was given no statement"),
    ("(INSERT INTO runs SELECT * FROM runs)", "starts with INSERT at line 1, column 2"),
    ("((WITH a AS (SELECT 1) DELETE FROM t))", "this statement writes, with DELETE at line 1, column 24"),
])
def test_anything_but_one_statement_that_reads_is_refused(given: str, said: str) -> None:
    with pytest.raises(SqlError, match=said):
        check_read_only(given)


@pytest.mark.parametrize(("given", "writes"), [
    ("WITH q AS (SELECT 1) INSERT INTO delta.`/lake/results_q` SELECT * FROM q", "INSERT at line 1, column 22"),
    ("with a as (select 1), b (x) as (select 2)\nmerge into t using b on t.x = b.x", "merge at line 2, column 1"),
    ("WITH a AS (SELECT ')' AS x) DELETE FROM t", "DELETE at line 1, column 29"),
    ("FROM runs INSERT INTO t SELECT *", "INSERT at line 1, column 11"),
    ("WITH a AS (SELECT 1) /* /* */ SELECT */ UPDATE t SET x = 1", "UPDATE at line 1, column 41"),
    ("WITH a AS (SELECT r'\\') INSERT INTO t SELECT 1", "INSERT at line 1, column 25"),
], ids=["an insert after a named query", "a merge after two", "a parenthesis in a literal", "a multi-insert",
        "a nested comment", "a raw literal"])
def test_a_statement_of_reading_words_that_writes_is_refused_where_it_writes(given: str, writes: str) -> None:
    """A named query (WITH) may precede an INSERT, DELETE, UPDATE or MERGE, and a FROM an INSERT: the statement
    starts with a reading word and writes. It is read as Spark's lexer reads it: comments nest, and a raw
    literal (r'...') has no escapes."""
    with pytest.raises(SqlError, match=f"only reads: this statement writes, with {writes};"):
        check_read_only(given)


@pytest.mark.parametrize("given", [
    "WITH a AS (SELECT 1), b AS (SELECT 2) SELECT * FROM a, b", "WITH a (x) AS (SELECT 1) (SELECT x FROM a)",
    "FROM runs SELECT query", "VALUES (1), (2)", "TABLE runs", "SELECT 'INSERT' AS `insert`, x FROM t",
    "WITH a AS (SELECT 1 AS update) SELECT update FROM a", "(SELECT 1) UNION (SELECT 2)",
    "((WITH a AS (SELECT 1) SELECT * FROM a))"])
def test_queries_read_however_they_start(given: str) -> None:
    assert check_read_only(given) == given


@pytest.mark.parametrize("words", [
    ["--lake", "{lake}", "-"], ["--lake", "{lake}", "-- cleanup\nDELETE FROM runs"],
    ["-- cleanup\nDELETE FROM runs", "--lake", "{lake}", "--format=csv"],
    ["--lake", "{lake}", "--remote", "--cleanup\nDELETE FROM runs"]])
def test_a_statement_is_checked_before_spark_starts_however_it_is_given(words: list[str], tmp_path: Path) -> None:
    """From standard input (`-`), or as the argument even where it starts with a comment, which Click alone reads
    as an unknown option, before or after the options."""
    given = [word.format(lake=tmp_path) for word in words]
    result = CliRunner().invoke(main, ["sql", *given], input="-- cleanup\nDELETE FROM runs\n")
    assert result.exit_code == EXIT_USAGE and "pielake sql only reads" in result.output, result.output
    assert not (tmp_path / "_logs").exists()  # no Spark session was started for it


def test_a_table_shows_each_row_on_one_line_and_csv_keeps_values_as_they_are() -> None:
    """A key or a note may hold a line break or a tab (a CSV field in quotes): a table's row stays one line."""
    rows = [("line\nbreak\tand tab", 1), ("plain", None)]
    assert render(["dev", "n"], rows, "table").splitlines() == [
        "dev                  | n   ", "---------------------+-----", "line\\nbreak\\tand tab | 1   ",
        "plain                | NULL", "(2 rows)"]
    assert render(["dev", "n"], rows, "csv") == 'dev,n\n"line\nbreak\tand tab",1\nplain,\n'


def test_a_table_counts_its_rows_as_words_count_them() -> None:
    """`(1 row)`, as psql says it, not `(1 rows)`; the same counting titles a plot (`1 match`, `2 matches`)."""
    assert render(["n"], [(1,)], "table").splitlines()[-1] == "(1 row)"
    assert render(["n"], [], "table").splitlines()[-1] == "(0 rows)"
    assert render(["n"], [(i,) for i in range(1200)], "table").splitlines()[-1] == "(1,200 rows)"
    assert [V.counted(n, "match") for n in (0, 1, 2)] == ["0 matches", "1 match", "2 matches"]


def test_nested_values_binary_data_and_non_finite_numbers_are_written_as_json_holds_them() -> None:
    """As Spark collects them: a struct a Row, a map a dict. A struct keeps its fields' names in every format (the
    runs table's steps are structs), and a JSON line holds no NaN, which is no JSON number (CSV writes `nan`)."""
    schema = StructType([StructField(name, kind) for name, kind in (
        ("s", StructType()), ("b", BinaryType()), ("n", DoubleType()), ("i", DoubleType()), ("f", BooleanType()),
        ("t", StringType()))])
    row = (Row(step="ingest", rows={"rows in": 5}, failed=[], passed=True), bytearray(b"abc"), math.nan, -math.inf,
           False, "true")
    columns = [field.name for field in schema.fields]
    nested = '{"step": "ingest", "rows": {"rows in": 5}, "failed": [], "passed": true}'
    assert json.loads(render(columns, [shaper(schema, "json")(row)], "json")) == {
        "s": {"step": "ingest", "rows": {"rows in": 5}, "failed": [], "passed": True}, "b": "YWJj", "n": "NaN",
        "i": "-Infinity", "f": False, "t": "true"}
    assert render(columns, [shaper(schema, "csv")(row)], "csv").splitlines()[1] == \
        '"' + nested.replace('"', '""') + '",YWJj,nan,-inf,false,true'
    assert render(columns, [shaper(schema, "table")(row)], "table").splitlines()[2].split(" | ") == [
        nested, "YWJj", "nan", "-inf", "false", "true"]


def test_a_table_gives_a_wide_character_two_columns_as_a_terminal_does() -> None:
    assert render(["site", "n"], [("東京", 1), ("Oslo", 22)], "table").splitlines()[:4] == [
        "site | n ", "-----+---", "東京 | 1 ", "Oslo | 22"]


def test_a_time_to_read_the_lake_as_of_is_iso_8601_and_utc_unless_it_says_its_zone(tmp_path: Path) -> None:
    """Refused before Spark starts, with how to write it."""
    assert as_of_time("2026-11-30 12:00") == datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert as_of_time("2026-11-30T14:00:00+02:00") == datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert as_of_time(" 2026-11-30T12:00:00.250Z") == datetime(2026, 11, 30, 12, 0, 0, 250_000, tzinfo=UTC)
    result = CliRunner().invoke(main, ["sql", "--lake", str(tmp_path), "--as-of", "yesterday", "SELECT 1"])
    assert result.exit_code == EXIT_USAGE and "Traceback" not in result.output
    assert result.output.strip() == ("error: --as-of 'yesterday' is not a time: write it in ISO-8601 "
                                     "(2026-11-30T12:00:00Z, or 2026-11-30 12:00, which is UTC), as DESCRIBE HISTORY "
                                     "<table> shows its versions' times")


def commit(log: Path, version: int, at: datetime) -> None:
    log.mkdir(parents=True, exist_ok=True)
    info = {"commitInfo": {"timestamp": int(at.timestamp() * 1000), "operation": "WRITE"}}
    (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")


def test_the_version_as_of_a_time_is_the_newest_committed_by_then_and_a_time_the_log_forgot_is_refused(
        tmp_path: Path) -> None:
    """A table's version at a time is known from its log: before its first commit it did not exist; before the
    oldest commit its log still keeps, when that is not its first, which version was the newest is unknown."""
    lake = Lake(None, tmp_path)  # a version's time is read from the log's files, with no Spark job
    noon = datetime(2026, 11, 30, 12, tzinfo=UTC)
    for version in range(3):
        commit(tmp_path / "runs" / "_delta_log", version, noon + timedelta(hours=version))
    assert lake.version_at("runs", noon - timedelta(seconds=1)) is None
    assert lake.version_at("runs", noon) == 0
    assert lake.version_at("runs", noon + timedelta(minutes=90)) == 1
    assert lake.version_at("runs", noon + timedelta(days=9)) == 2
    for version in (7, 8):  # versions 0-6 of the log expired
        commit(tmp_path / "results_q" / "_delta_log", version, noon + timedelta(hours=version))
    assert lake.version_at("matches_q", noon + timedelta(hours=7)) == 7  # a kind's versions are its table's
    with pytest.raises(LakeError, match=r"^table 'results_q' keeps its history from version 7, committed at "
                                        r"2026-11-30 19:00:00 UTC: read a time after it \(`pielake maintain "
                                        r"--keep-days`"):
        lake.version_at("matches_q", noon)
