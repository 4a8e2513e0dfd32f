"""Fuzzing the query language: whatever the text, parsing and analysis end in a tree or in our own
`QueryError` (with a position inside the text), never in another exception.

Three kinds of input: arbitrary unicode, sequences of the language's own tokens (which get much deeper into the
grammar than random characters), and the valid fixture queries with characters inserted, deleted or replaced.
An accepted query must print and parse back to the same tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pielake.cli import main
from pielake.errors import PielakeError, QueryError
from pielake.query.analyzer import analyze
from pielake.query.parser import parse
from pielake.query.printer import query_text
from pielake.semantics.relations import RELATIONS
from pielake.vocabulary import table_name
from tests.conftest import FIXTURES

VALID = [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / "queries" / "valid").glob("*.tpq"))]
WORDS = ["FROM", "PARTITION", "BY", "DEFINE", "AS", "PATTERN", "WITHIN", "RETURN", "AT", "LEAST", "MOST", "AND",
         "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "s", "min", "ms", "h", "A", "B", "C", "S",
         "S.x", "x", "y", "avg", "max", "duration", "first", "reflect", "java_method", "SELECT", "--", "/*", "*/",
         "'str'", "`x`", '"x"', "1", "0", "2.5", "5s", "8m/s2", "-", "(", ")", ",", ";", ".", "<", "<=", ">", "=",
         "<>", "+", "*", "/", "%", "\n", "\uff26ROM", *RELATIONS]
TOKENS = st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join)


def accepts_or_refuses(text: str) -> None:
    """Parse and analyze `text`: either a plan, or a QueryError pointing inside the text."""
    try:
        tree = parse(text)
        analyze(tree)
    except QueryError as error:
        assert error.errors, "a query error lists at least one problem"
        lines = max(1, text.count("\n") + 1)
        assert all(1 <= e.line <= lines + 1 and e.col >= 1 for e in error.errors), error
        return
    assert parse(query_text(tree.query)).query == tree.query


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_is_a_tree_or_our_error(text: str) -> None:
    accepts_or_refuses(text)


@settings(max_examples=400, deadline=None)
@given(TOKENS)
def test_token_soup_is_a_tree_or_our_error(text: str) -> None:
    accepts_or_refuses(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.sampled_from([*WORDS, *"(),;.'\"`-*/"]))
        if edit == "insert":
            text = text[:at] + piece + text[at:]
        elif edit == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 10)):]
        else:
            text = text[:at] + piece + text[at + len(piece):]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_valid_queries_are_a_tree_or_our_error(text: str) -> None:
    accepts_or_refuses(text)


@pytest.mark.parametrize("parts", [("events", "../x"), ("matches", "a;drop table b"), ("events", "a b"),
                                   ("x", "a/../../etc"), ("matches", "é"), ("events", "a" * 200),
                                   ("matches", "q`"), ("events", "a'--"), ("results", "q\n")])
def test_table_names_refuse_paths_and_sql(parts: tuple[str, str]) -> None:
    with pytest.raises(PielakeError, match="not a valid table name"):
        table_name(*parts)


@pytest.mark.parametrize(("name", "suggested"), [("a.b", "a_b"), ("a-b", "a_b"), ("a;b", "a_b"), ("a b", "a_b"),
                                               ("x'--", "x"), ("é", "e"), ("q\n", "q"), ("2fast", "_2fast"),
                                               ("x" * 65, "x" * 64)])
def test_query_file_names_must_be_identifiers(name: str, suggested: str, tmp_path: Path) -> None:
    """The file's stem names the query's tables (matches_<name>), so it must be a plain identifier: a name that
    ends in a line break is none (it made a folder `results_q<line break>` that no SQL names). The error says
    what a name may hold and suggests one that may."""
    path = tmp_path / f"{name}.tpq"
    path.write_text(VALID[0], encoding="utf-8")
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 2
    assert "must be a plain identifier (letters, digits and '_', not first a digit, at most 64 characters)" in \
        result.output
    assert result.output.rstrip().endswith(f"rename it, e.g. to {suggested}.tpq")
