"""What `pielake sql` takes: one statement that reads, with comments and quoted text as SQL has them; refused
before Spark starts otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pielake.cli import main
from pielake.exitcodes import EXIT_USAGE
from pielake.lake.sql import SqlError, check_read_only, render


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
    ("/* SELECT 1 */ DROP TABLE runs", "only reads"),
    ("", "only reads"),
])
def test_anything_but_one_statement_that_reads_is_refused(given: str, said: str) -> None:
    with pytest.raises(SqlError, match=said):
        check_read_only(given)


def test_a_statement_from_standard_input_is_checked_before_spark_starts(tmp_path: Path) -> None:
    """A statement that starts with a comment cannot be an argument (it reads as an option): `-` reads it."""
    result = CliRunner().invoke(main, ["sql", "--lake", str(tmp_path), "-"], input="-- cleanup\nDELETE FROM runs\n")
    assert result.exit_code == EXIT_USAGE and "pielake sql only reads" in result.output
    assert not (tmp_path / "_logs").exists()  # no Spark session was started for it


def test_a_table_shows_each_row_on_one_line_and_csv_keeps_values_as_they_are() -> None:
    """A key or a note may hold a line break or a tab (a CSV field in quotes): a table's row stays one line."""
    rows = [("line\nbreak\tand tab", 1), ("plain", None)]
    assert render(["dev", "n"], rows, "table").splitlines() == [
        "dev                  | n   ", "---------------------+-----", "line\\nbreak\\tand tab | 1   ",
        "plain                | NULL", "(2 rows)"]
    assert render(["dev", "n"], rows, "csv") == 'dev,n\n"line\nbreak\tand tab",1\nplain,\n'
