"""Parser golden tests, round trips and the invalid-query catalogue (tests/fixtures/queries)."""

from __future__ import annotations

import os
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pielake.errors import QueryError, QuerySyntaxError
from pielake.query.analyzer import analyze, load_query
from pielake.query.parser import parse
from pielake.query.printer import query_text
from pielake.query.tokens import plain_name
from pielake.query.typecheck import TIME_ARITHMETIC_HINT
from pielake.semantics.relations import RELATIONS
from pielake.streams import StreamSchema
from tests.conftest import FIXTURES

VALID = sorted((FIXTURES / "queries" / "valid").glob("*.tpq"))
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def plan_summary(source: str) -> str:
    plan = analyze(parse(source))
    lines = [f"keys: {', '.join(plan.keys) or '-'}", f"window_seconds: {plan.window_seconds}"]
    lines += [f"symbol {s.name}: min={s.min_seconds} max={s.max_seconds}" for s in plan.symbols]
    lines += [f"{c.id}: {c.left} {{{', '.join(c.ordered_relations())}}} {c.right}" for c in plan.constraints]
    lines += [f"return {r.name}" for r in plan.returns]
    lines += [w.render() for w in plan.warnings]
    return "\n".join(lines) + "\n"


def golden(path: Path) -> str:
    source = path.read_text(encoding="utf-8")
    return query_text(parse(source).query) + "-- plan\n" + plan_summary(source)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_query_matches_its_golden_file(path: Path) -> None:
    expected_file = path.with_suffix(".expected")
    actual = golden(path)
    if UPDATE:
        expected_file.write_text(actual, encoding="utf-8")
    assert actual == expected_file.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_printed_query_parses_back_to_the_same_tree(path: Path) -> None:
    first = parse(path.read_text(encoding="utf-8")).query
    assert parse(query_text(first)).query == first


def load_invalid_cases() -> list[tuple[str, int, int, str, str]]:
    text = (FIXTURES / "queries" / "invalid.tpq").read_text(encoding="utf-8")
    cases = []
    for block in re.split(r"^-- case: ", text, flags=re.MULTILINE)[1:]:
        name, expect, *query = block.split("\n")
        position, _, message = expect.removeprefix("-- expect: ").partition(" ")
        line, col = map(int, position.split(":"))
        cases.append((name, line, col, message, "\n".join(query)))
    return cases


INVALID = load_invalid_cases()


def test_the_catalogue_holds_at_least_thirty_invalid_queries() -> None:
    assert len(INVALID) >= 30


@pytest.mark.parametrize(("name", "line", "col", "message", "query"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_query_error_names_its_position(name: str, line: int, col: int, message: str, query: str) -> None:
    with pytest.raises(QueryError) as caught:
        load_query(query)
    first = caught.value.first
    assert (first.line, first.col) == (line, col)
    assert message in first.description
    assert "^" in first.context  # a caret under the offending text
    assert first.suggestion, "every error suggests its fix"


def test_error_carries_the_offending_text_and_a_suggestion() -> None:
    with pytest.raises(QueryError) as caught:
        load_query("FROM S DEFINE A AS x, B AS y\nPATTERN A overlap B WITHIN 5 s")
    detail = caught.value.first.as_dict()
    assert detail["highlight"] == "overlap"
    assert detail["suggestion"] == "Did you mean 'overlaps'?"
    assert detail["context"] == "  PATTERN A overlap B WITHIN 5 s\n            ^^^^^^^"


def test_an_unknown_symbol_is_told_the_symbols_defined_or_the_one_it_may_misspell() -> None:
    with pytest.raises(QueryError) as caught:
        load_query("FROM S DEFINE A AS x, B AS y PATTERN A overlaps C WITHIN 5 s")
    [unknown] = [e for e in caught.value.errors if e.description == "unknown symbol 'C'"]
    assert unknown.suggestion == "Define it in DEFINE first (DEFINE defines A, B)."
    with pytest.raises(QueryError) as caught:
        load_query("FROM S DEFINE Fast AS x, Slow AS y PATTERN Fast overlaps Sloww WITHIN 5 s")
    [unknown] = [e for e in caught.value.errors if e.description == "unknown symbol 'Sloww'"]
    assert unknown.suggestion == "Did you mean 'Slow'?"


def test_a_situation_s_start_or_end_by_another_name_is_told_s_ts_and_s_te() -> None:
    with pytest.raises(QueryError) as caught:
        load_query("FROM S DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s RETURN A.start, B.speed")
    assert [e.suggestion for e in caught.value.errors] == [
        "A situation's start is A.ts and its end A.te; a column of its events takes an aggregate: first(A.start), "
        "avg(...), max(...), ...", "Write first(B.speed), avg(...), max(...), ..."]


def test_an_accented_column_name_is_refused_with_the_ascii_name_a_file_s_header_gives_it() -> None:
    """Identifiers are ASCII, and a header's `température` is read as `temperature` (`plain_name`): the error
    names the spelling that works; a look-alike keyword is told its ASCII form the same way."""
    with pytest.raises(QueryError) as caught:
        load_query("FROM Readings R DEFINE Hot AS R.température > 30, C AS R.t < 5 PATTERN Hot meets C WITHIN 1 h")
    assert (caught.value.first.line, caught.value.first.col) == (1, 37)
    assert caught.value.first.suggestion.endswith(
        "Did you mean 'temperature'? A file's column 'température' is read under that name.")
    assert plain_name("température") == "temperature"
    assert [plain_name(h) for h in ("Température (°C)", "Straße", "Øre", "温度")] == [
        "Temperature_C", "Strasse", "Ore", "_"]
    with pytest.raises(QueryError) as caught:
        load_query("FROM S DEFINE A AS 温度 > 1 PATTERN A WITHIN 5 s")
    assert caught.value.first.suggestion == "Queries use ASCII letters, digits and operators outside string literals."


@pytest.mark.parametrize(("query", "at", "highlight", "suggestion"), [
    ("FROM Trips T PARTITION BY T.`Vehicle ID` DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s", (1, 29),
     "`Vehicle ID`", "A file's column `Vehicle ID` is read as Vehicle_ID: write that name; a text value takes single "
                     "quotes ('Vehicle ID')."),
    ("FROM S DEFINE A AS x = \"it's\", B AS y PATTERN A meets B WITHIN 5 s", (1, 24), "\"it's\"",
     "A file's column \"it's\" is read as it_s: write that name; a text value takes single quotes ('it''s')."),
    ("FROM S DEFINE A AS `speed` > 1, B AS y PATTERN A meets B WITHIN 5 s", (1, 20), "`speed`",
     "A file's column `speed` is read as speed: write that name; a text value takes single quotes ('speed')."),
    ("FROM S DEFINE A AS `x\n` > 1, B AS y PATTERN A meets B WITHIN 5 s", (1, 20), "`",
     "Use a plain name of letters, digits and '_'; string literals take single quotes."),
    ("FROM S DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s RETURN max(A.v) AS \"Top Speed\"", (1, 78),
     "\"Top Speed\"", "Name the column without quotes: AS Top_Speed.")],
    ids=["spaces", "text", "plain", "unclosed", "output name"])
def test_a_quoted_identifier_is_refused_with_the_name_ingest_reads_the_column_under(
        query: str, at: tuple[int, int], highlight: str, suggestion: str) -> None:
    """Headers such as `Vehicle ID` are read under plain names, which is what a query writes; SQL's habit of
    quoting such a name, or a text value in double quotes, is told both, and a quoted output name after RETURN's
    `AS` the plain name to give it."""
    with pytest.raises(QueryError) as caught:
        parse(query)
    first = caught.value.first
    assert ((first.line, first.col), first.highlight, first.suggestion) == (at, highlight, suggestion)


@pytest.mark.parametrize(("written", "amount", "unit"), [
    ("1 hour 30 minutes", "90", "minutes"), ("1.5 h 10 min 250ms", "6000250", "ms"), ("0.5 s 0.25 s", "0.75", "s"),
    ("30s 1 min", "90", "s"), ("5 s", "5", "s")])
def test_a_duration_is_a_sum_of_parts_kept_in_its_finest_unit(written: str, amount: str, unit: str) -> None:
    """People say `1 hour 30 minutes`; the sum is exact, as every unit is a whole number of each finer one."""
    query = parse(f"FROM S DEFINE A AS x > 1 BETWEEN {written} AND {written}, B AS y AT LEAST {written} "
                  f"PATTERN A meets B WITHIN {written}").query
    durations = (query.window, query.defines[0].duration.low, query.defines[0].duration.high,
                 query.defines[1].duration.low)
    assert {(str(d.amount), d.unit) for d in durations} == {(amount, unit)}
    assert f"WITHIN {amount} {unit}" in query_text(query)


@pytest.mark.parametrize(("pattern", "hint"), [
    ("SEQ(A, B)", "SEQ(A, B) is a sequence in SASE and CORE; here a pattern relates situations: A before B"),
    ("A -> B", "A -> B is a sequence in other event languages; here a pattern relates situations: A before B"),
    ("A - B", "Relate two symbols by Allen's relations"), ("A (meets) B", "Relate two symbols by Allen's relations")])
def test_another_language_s_sequence_is_told_in_relations(pattern: str, hint: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse(f"FROM S DEFINE A AS x > 1, B AS y PATTERN {pattern} WITHIN 5 s")
    assert caught.value.first.suggestion.startswith(hint)


@pytest.mark.parametrize(("predicate", "at", "highlight", "message"), [
    ("CAST(x AS INT) > 3", (1, 20), "CAST", "CAST(...) is not in the language: a query has no cast"),
    ("try_cast(x AS DOUBLE) > 3", (1, 20), "try_cast", "TRY_CAST(...) is not in the language: a query has no cast"),
    ("x::int > 3", (1, 21), "::", "'::' casts in PostgreSQL; a query has no cast")], ids=["CAST", "TRY_CAST", "::"])
def test_a_cast_is_told_that_columns_are_read_in_their_stream_s_types(predicate: str, at: tuple[int, int],
                                                                     highlight: str, message: str) -> None:
    """A query compares a column in the type its stream gives it, numbers of every type with each other: what
    SQL casts for is declared once, in the stream's schema."""
    with pytest.raises(QueryError) as caught:
        parse(f"FROM S DEFINE A AS {predicate}, B AS y PATTERN A meets B WITHIN 5 s")
    first = caught.value.first
    assert ((first.line, first.col), first.highlight, first.description) == (at, highlight, message)
    assert first.suggestion.startswith("Compare the column as it is (numbers of every type compare with each other")


@pytest.mark.parametrize(("predicate", "highlight", "hint"), [
    ("x IS DISTINCT FROM 'v'", "DISTINCT", "IS DISTINCT FROM counts NULL as a value: write x <> 'v' OR x IS NULL."),
    ("x IS NOT DISTINCT FROM 'v'", "DISTINCT",
     "IS NOT DISTINCT FROM counts NULL as a value: write x = 'v', or x IS NULL where the value is NULL."),
    ("x <=> 'v'", "<=>", "A predicate's NULL is false: write x = 'v', or x IS NULL where the value is NULL."),
    ("x IS TRUE", "TRUE", "x IS TRUE is written x."),
    ("x IS NOT FALSE", "FALSE", "x IS NOT FALSE is written x OR x IS NULL."),
    ("x IS UNKNOWN", "UNKNOWN", "x IS UNKNOWN is written x IS NULL."),
    ("x IS 3", "3", "Write IS NULL or IS NOT NULL.")])
def test_sql_s_tests_that_count_null_as_a_value_are_told_how_they_are_written(predicate: str, highlight: str,
                                                                              hint: str) -> None:
    """A predicate's NULL is false, so SQL's null-safe tests are written with IS NULL where NULL must count."""
    with pytest.raises(QueryError) as caught:
        parse(f"FROM S DEFINE A AS {predicate}, B AS y PATTERN A meets B WITHIN 5 s")
    assert (caught.value.first.highlight, caught.value.first.suggestion) == (highlight, hint)


@pytest.mark.parametrize(("returns", "highlight", "message", "hint"), [
    ("*", "*", "RETURN names its columns one by one", "Every match has its keys and each symbol's ts and te"),
    ("A.*", "*", "RETURN names its columns one by one", "Every match has its keys and each symbol's ts and te"),
    ("DISTINCT A.x", "DISTINCT", "RETURN has no DISTINCT: each match is a row of its own",
     "Name its columns; distinct values are SQL's over its tables (pielake sql"),
    ("count(DISTINCT A.x)", "DISTINCT", "count(DISTINCT ...) is SQL's",
     "An aggregate here reads all of a symbol's events (count(B.x))")],
    ids=["*", "A.*", "DISTINCT", "count(DISTINCT)"])
def test_sql_s_select_habits_in_return_are_told_what_a_match_holds(returns: str, highlight: str, message: str,
                                                                  hint: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse(f"FROM S DEFINE A AS x > 1, B AS y PATTERN A meets B WITHIN 5 s RETURN {returns}")
    first = caught.value.first
    assert (first.highlight, first.description) == (highlight, message)
    assert first.suggestion.startswith(hint)


@pytest.mark.parametrize(("endpoints", "relations"), [
    ("A.ts < B.ts < A.te < B.te", "A overlaps B"),
    ("A.ts < B.ts AND B.ts < A.te AND A.te < B.te", "A overlaps B"),
    ("A.ts < B.ts < A.te", "A overlaps; finished-by; contains B"),
    ("A.te = B.ts OR A.te < B.ts", "A meets; before B"),
    ("(B.ts > A.ts OR A equals B) AND B.te <= A.te", "A contains; finished-by; equals B"),
    ("A.ts != B.ts AND A.te = B.te", "B finishes; finished-by A")])
def test_iseq_s_endpoint_comparisons_are_the_relations_they_allow(endpoints: str, relations: str) -> None:
    """ISEQ writes a pattern as comparisons of endpoints; each is the set of Allen relations under which it holds,
    and comparisons joined by AND (or chained) are intersected as constraints on one pair are."""
    def constraints(pattern: str) -> tuple[object, ...]:
        return load_query(f"FROM S DEFINE A AS x > 1, B AS y PATTERN {pattern} WITHIN 5 s").constraints

    assert constraints(endpoints) == constraints(relations)


@pytest.mark.parametrize("tail", ["ORDER BY 1", "LIMIT 5", "x WHERE y > 1"])
def test_sql_s_clauses_after_return_are_told_where_sql_runs(tail: str) -> None:
    """A name right after a RETURN expression names its column, but not SQL's next clause."""
    with pytest.raises(QueryError) as caught:
        parse(f"FROM S DEFINE A AS x > 1, B AS y PATTERN A meets B WITHIN 5 s RETURN first(A.x) {tail}")
    assert "is SQL's: a query ends with RETURN" in caught.value.first.suggestion


@pytest.mark.parametrize(("pattern", "hint"), [
    ("B.ts - A.te <= 5 min", "A pattern compares endpoints as they are, with no arithmetic: bound a whole match"),
    ("B.ts overlaps A", "Compare endpoints of two symbols, e.g. B.ts < A.ts, or relate the symbols: B overlaps A.")])
def test_an_endpoint_without_a_comparison_after_it_is_told_what_a_pattern_compares(pattern: str, hint: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse(f"FROM S DEFINE A AS x > 1, B AS y PATTERN {pattern} WITHIN 10 min")
    assert caught.value.first.suggestion.startswith(hint)


def test_a_paper_s_sign_is_told_how_a_query_writes_it() -> None:
    with pytest.raises(QueryError) as caught:
        parse("FROM S DEFINE A AS x, B AS y PATTERN A.ts < B.ts ∧ B.ts ≤ A.te WITHIN 5 s")
    assert caught.value.first.suggestion.endswith("Write AND for ∧.")


def test_a_return_column_is_named_with_or_without_as() -> None:
    """As in SQL's SELECT, a name right after the expression names its column; printed, it takes AS."""
    query = parse("FROM S DEFINE A AS x > 1, B AS y PATTERN A meets B WITHIN 5 s "
                  "RETURN first(A.x) s, max(B.y) AS top, count(A.x)").query
    assert [None if item.alias is None else item.alias.text for item in query.returns] == ["s", "top", None]
    assert "RETURN first(A.x) AS s,\n       max(B.y) AS top,\n       count(A.x)\n" in query_text(query)


def test_a_column_called_like_a_keyword_is_read_qualified_and_the_error_says_so() -> None:
    """A stream's column names are its data's (a `from`, a Kafka export's `partition`): qualified, any word is
    a column; unqualified, the error shows the qualified form with the query's own alias."""
    plan = load_query("FROM Calls C PARTITION BY C.partition DEFINE A AS C.from = 'x', B AS C.to = 'y' "
                      "PATTERN A meets B WITHIN 5 s RETURN first(A.from) AS origin")
    assert plan.keys == ("partition",)
    with pytest.raises(QueryError) as caught:
        load_query("FROM Calls C PARTITION BY key DEFINE A AS from = 'x', B AS b PATTERN A meets B WITHIN 5 s")
    suggestion = caught.value.first.as_dict()["suggestion"]
    assert suggestion == "If a column is called from, qualify it with its stream: C.from."


def test_a_key_named_from_each_stream_is_told_that_a_key_is_one_column_of_every_stream() -> None:
    """`PARTITION BY C.k, L.k` reads as SQL's join of two streams' columns; a key names the column of that name in
    every stream of FROM, so the error says to name it once."""
    with pytest.raises(QueryError) as caught:
        load_query("FROM Cars C, Lights L PARTITION BY C.k, L.k DEFINE A AS C.v > 3, B AS L.on PATTERN A overlaps B "
                   "WITHIN 1 h")
    assert (caught.value.first.line, caught.value.first.col) == (1, 41)
    assert caught.value.first.suggestion == ("Name each key once: a key is the column of that name in every stream of "
                                             "FROM (PARTITION BY k), not a join of one stream's column with another's.")


def test_semantic_errors_are_reported_together_with_a_count_of_the_rest() -> None:
    defines = ", ".join(f"S{i} AS x{i}" for i in range(8))
    with pytest.raises(QueryError) as caught:
        load_query(f"FROM S DEFINE {defines}, A AS a, B AS b PATTERN A meets B WITHIN 5 s")
    assert len(caught.value.errors) == 8
    assert str(caught.value).endswith("... and 3 more")


def test_a_pattern_whose_constraints_cannot_hold_together_is_run_with_a_warning_where_it_fails() -> None:
    """`C before A` after `A before B AND B before C`: a well-formed query that can never match is said so, at
    the constraint the others exclude; one that can is not."""
    plan = load_query("FROM S DEFINE A AS x, B AS y, C AS z\nPATTERN A before B AND B before C\n    AND C before A\n"
                      "WITHIN 5 s")
    assert [w.render() for w in plan.warnings] == [
        "warning: the pattern can never match: A before B and B before C leave only A before C, which its constraint "
        "A after C excludes (line 3, col 9)"]
    assert load_query("FROM S DEFINE A AS x, B AS y, C AS z PATTERN A before B AND B before C AND A before; meets C "
                      "WITHIN 5 s").warnings == ()


def test_a_contradiction_on_a_pair_no_constraint_names_is_said_at_the_last_constraint() -> None:
    """B-C has no constraint of its own: through A the others make it `after`, through D `before`."""
    plan = load_query("FROM S DEFINE A AS x, B AS y, C AS z, D AS w PATTERN A before B AND B before D\n"
                      "AND C before A AND D before C WITHIN 5 s")
    assert [w.render() for w in plan.warnings] == [
        "warning: the pattern can never match: B before D and D before C leave only B before C, which the rest of the "
        "pattern's B after C excludes (line 2, col 20)"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B", "C", "D"]), st.sampled_from(["A", "B", "C", "D"]),
                          st.lists(st.sampled_from(sorted(RELATIONS)), min_size=1, max_size=2, unique=True)),
                min_size=3, max_size=5))
def test_any_pattern_over_four_symbols_is_analysed_whether_or_not_it_can_match(
        constraints: list[tuple[str, str, list[str]]]) -> None:
    """Random constraints (cycles, repeats, both orientations): the analysis ends with a plan or a query error,
    and its only warning is one that the pattern can never match."""
    pattern = " AND ".join(f"{a} {';'.join(names)} {b}" for a, b, names in constraints)
    try:
        plan = load_query(f"FROM S DEFINE A AS a, B AS b, C AS c, D AS d PATTERN {pattern} WITHIN 5 s")
    except QueryError:
        return
    assert all(w.message.startswith("the pattern can never match: ") for w in plan.warnings)


def test_units_on_literals_are_ignored_with_a_warning() -> None:
    result = parse("FROM S DEFINE A AS speed > 70 mph, B AS accel > 8m/s2 PATTERN A meets B WITHIN 5 s")
    assert [w.message for w in result.warnings] == [
        "unit 'mph' after 70 is ignored; values are compared as plain numbers",
        "unit 'm/s2' after 8 is ignored; values are compared as plain numbers",
    ]


def test_a_spaced_ratio_after_a_number_is_its_unit_not_a_division() -> None:
    spaced = parse("FROM S DEFINE A AS speed > 70 km/h, B AS accel > 9.8 m/s^2 PATTERN A meets B WITHIN 5 s")
    glued = parse("FROM S DEFINE A AS speed > 70km/h, B AS accel > 9.8m/s^2 PATTERN A meets B WITHIN 5 s")
    assert [w.message for w in spaced.warnings] == [
        "unit 'km/h' after 70 is ignored; values are compared as plain numbers",
        "unit 'm/s^2' after 9.8 is ignored; values are compared as plain numbers",
    ]
    assert query_text(spaced.query) == query_text(glued.query)  # a literal with its unit, as glued
    assert not parse("FROM S DEFINE A AS speed / h > 70, B AS accel PATTERN A meets B WITHIN 5 s").warnings


def test_a_number_beyond_a_double_is_refused_where_it_is_written() -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse("FROM S DEFINE A AS x > 1e400, B AS y PATTERN A meets B WITHIN 5 s")
    assert (caught.value.first.description, caught.value.first.col) == (
        "the number 1e400 is beyond what a DOUBLE holds (about 1.8e308)", 24)


@pytest.mark.parametrize(("duration", "within", "what"), [
    ("", "99999999999999999999 d", "window"), ("", "54000000 d", "window"), ("AT LEAST 54000000 d", "5 s", "duration"),
])
def test_a_window_or_duration_longer_than_event_times_span_is_refused(duration: str, within: str, what: str) -> None:
    """2^62 microseconds (53.4 million days) is the longest: a time plus a duration then stays a 64-bit integer."""
    query = "FROM S DEFINE A AS x > 1 {}, B AS y PATTERN A meets B WITHIN {}"
    with pytest.raises(QueryError) as caught:
        load_query(query.format(duration, within))
    assert caught.value.first.description == f"the {what} is longer than event times can span (about 146,136 years)"
    assert load_query(query.format(duration.replace("54000000", "53000000"), within.replace("54000000", "53000000")
                                   .replace("99999999999999999999", "53000000")))


def test_comments_never_reach_the_tree() -> None:
    plain = parse("FROM S DEFINE A AS x > 1, B AS y PATTERN A meets B WITHIN 5 s").query
    commented = parse("FROM S /* c */ DEFINE A AS x -- note\n > /* one */ 1, B AS y\n"
                      "PATTERN A meets B -- tail\nWITHIN 5 s -- end").query
    assert commented == plain


@pytest.mark.parametrize(("written", "canonical"), [
    ("met-by", "met-by"), ("MET_BY", "met-by"), ("Finished_By", "finished-by"), ("equal", "equals"),
    ("follow", "follows"), ("followed_by", "followed-by"),
])
def test_relation_names_are_case_insensitive_and_dashes_equal_underscores(written: str, canonical: str) -> None:
    plan = load_query(f"FROM S DEFINE A AS x, B AS y PATTERN A {written} B WITHIN 5 s")
    assert plan.constraints[0].relations == {canonical}


@pytest.mark.parametrize(("pattern", "relations"), [
    ("A meets B; A overlaps B", {"meets", "overlaps"}),
    ("A meets; overlaps B", {"meets", "overlaps"}),
    ("(A meets B OR B during A)", {"meets", "contains"}),
    ("B during A; A starts B", {"contains", "starts"}),
    ("A before;meets B AND B met-by A", {"meets"}),
])
def test_constraints_are_normalised_to_definition_order_and_intersected(pattern: str, relations: set[str]) -> None:
    plan = load_query(f"FROM S DEFINE A AS x, B AS y PATTERN {pattern} WITHIN 5 s")
    assert [(c.left, c.right, c.relations) for c in plan.constraints] == [("A", "B", relations)]


def test_a_chain_of_relations_is_one_constraint_per_link() -> None:
    plan = load_query("FROM S DEFINE A AS x, B AS y, C AS z PATTERN A before B overlaps; meets C AND A before C "
                      "WITHIN 5 s")
    assert [(c.left, c.right, c.relations) for c in plan.constraints] == [
        ("A", "B", {"before"}), ("B", "C", {"overlaps", "meets"}), ("A", "C", {"before"})]


def test_durations_convert_units_to_seconds() -> None:
    plan = load_query("FROM S DEFINE A AS x AT LEAST 1.5 min, B AS y BETWEEN 500 ms AND 2 h "
                      "PATTERN A meets B WITHIN 1 day")
    assert (plan.symbols[0].min_seconds, plan.symbols[0].max_seconds) == (90, None)
    assert (plan.symbols[1].min_seconds, plan.symbols[1].max_seconds) == (0.5, 7200)
    assert plan.window_seconds == 86400


@pytest.mark.parametrize(("written", "seconds"), [("250 usec", Fraction(1, 4000)), ("500 msec", 0.5), ("2 hrs", 7200),
                                                  ("1 w", 604800), ("2 weeks", 1209600)])
def test_durations_take_the_unit_spellings_people_write(written: str, seconds: float) -> None:
    assert load_query(f"FROM S DEFINE A AS x, B AS y PATTERN A meets B WITHIN {written}").window_seconds == seconds


def stream(*columns: str, keys: tuple[str, ...] = ()) -> StreamSchema:
    """A stream with a BIGINT time `ts` and the given `name TYPE` columns."""
    return StreamSchema("S", keys, "ts", "s", (("ts", "BIGINT"), *(tuple(c.split()) for c in columns)))


def test_unknown_columns_are_errors_when_the_schema_is_known() -> None:
    with pytest.raises(QueryError) as caught:
        load_query("FROM S DEFINE A AS sped > 1, B AS y PATTERN A meets B WITHIN 5 s",
                   schemas=stream("speed DOUBLE", "y BOOLEAN"))
    assert caught.value.first.description == "unknown column 'sped'"
    assert caught.value.first.suggestion == "Did you mean 'speed'?"


NESTED = StreamSchema("Iot", ("device_id",), "ts", "s", (("ts", "BIGINT"), ("device_id", "STRING"),
                      ("readings_rpm", "BIGINT"), ("readings_temp", "DOUBLE"), ("engine_temp", "DOUBLE")))


@pytest.mark.parametrize(("predicate", "highlight", "suggestion"), [
    # a field's own name, where one column's path ends in it; two (`temp`) leave the stream's columns listed
    ("I.rpm > 2500", "I.rpm", "Did you mean 'readings_rpm'?"),
    ("I.temp > 85", "I.temp", "The stream has: device_id, engine_temp, readings_rpm, readings_temp, ts."),
    # the record's path as a JSON reader writes it, qualified or not
    ("I.readings.rpm > 2500", "I.readings.rpm", "A nested record's field is the column named by its path: write "
                                                 "I.readings_rpm (docs/operations.md, \"Streams\")."),
    ("readings.temp > 85", "readings.temp", "A nested record's field is the column named by its path: write "
                                            "I.readings_temp."),
])
def test_a_nested_record_s_field_is_told_the_column_its_path_names(predicate: str, highlight: str,
                                                                   suggestion: str) -> None:
    """Ingest reads a nested record's field as the column named by its path (`readings.rpm` is `readings_rpm`): a
    query that names the field as the record holds it is told that column."""
    with pytest.raises(QueryError) as caught:
        load_query(f"FROM Iot I PARTITION BY device_id DEFINE A AS {predicate}, B AS I.engine_temp > 1\n"
                   "PATTERN A meets B WITHIN 5 s", schemas=NESTED)
    assert (caught.value.first.highlight, caught.value.first.suggestion) == (highlight, suggestion)


def test_a_key_column_may_not_have_the_name_of_a_result_table_column() -> None:
    with pytest.raises(QueryError) as caught:
        load_query("FROM S PARTITION BY kind DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s",
                   schemas=stream("kind STRING", "x BOOLEAN", "y BOOLEAN", keys=("kind",)))
    assert caught.value.first.description == "key column 'kind' has the name of a column of the result tables"
    assert (caught.value.first.line, caught.value.first.col, caught.value.first.highlight) == (1, 21, "kind")
    assert "kind_key" in caught.value.first.suggestion


def test_query_over_one_megabyte_is_refused() -> None:
    with pytest.raises(QuerySyntaxError, match="more than the limit"):
        parse("FROM S DEFINE A AS x PATTERN A meets B WITHIN 5 s " + "-" * 1_000_001)


@pytest.mark.parametrize(("returned", "names"), [
    ("avg(B.speed), duration(A)", ["avg_b_speed", "duration_a"]),
    ("max(B.speed) - min(B.speed)", ["max_b_speed_min_b_speed"]),
    ("1 + 2", ["_1_2"]),
    ("A.ts, A.te, B.TS, k", []),  # the match's own a_ts, a_te, b_ts and key columns: nothing to add
    ("A.ts AS start, first(A.x)", ["start", "first_a_x"]),
])
def test_an_unnamed_return_column_is_named_after_its_expression(returned: str, names: list[str]) -> None:
    plan = load_query(f"FROM S PARTITION BY k DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s RETURN {returned}")
    assert [r.name for r in plan.returns] == names


def test_a_query_partitions_by_every_key_of_its_stream() -> None:
    query = "FROM S PARTITION BY unit DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s"
    columns = ("unit STRING", "site STRING", "x BOOLEAN", "y BOOLEAN")
    assert load_query(query, schemas=stream(*columns, keys=("unit",))).keys == ("unit",)
    with pytest.raises(QueryError) as caught:
        load_query(query, schemas=stream(*columns, keys=("site", "unit")))
    assert caught.value.first.description == "stream S is keyed by site, unit, which the query does not partition by"
    assert caught.value.first.suggestion == ("Write FROM S PARTITION BY unit, site: its events are in time order "
                                             "within each site, unit, and two of them may share a time, so a "
                                             "situation is a run of one key's events.")
    assert (caught.value.first.line, caught.value.first.col) == (1, 6)
    with pytest.raises(QueryError) as caught:  # the fix keeps the aliases its columns are qualified by
        load_query(query.replace("FROM S", "FROM S s1").replace("AS x", "AS s1.x"),
                   schemas=stream(*columns, keys=("site", "unit")))
    assert caught.value.first.suggestion.startswith("Write FROM S s1 PARTITION BY unit, site: ")


@pytest.mark.parametrize(("written", "message", "col"), [
    ("A AS label = 1", "the comparison mixes label (string) and 1 (number)", 20),
    ("A AS abs(label) > 2", "abs() takes a number, and label is a string", 24),
    ("A AS sqrt(label) > 2", "sqrt() takes a number, and label is a string", 25),
    ("A AS speed AND flag", "AND takes a boolean, and speed is a number", 20),
    ("A AS speed", "a predicate takes a boolean, and speed is a number", 20),
    ("A AS lower(speed) = 'x'", "lower() takes a string, and speed is a number", 26),
    ("A AS length(speed) > 2", "length() takes a string, and speed is a number", 27),
    ("A AS hour(speed) > 2", "hour() takes a time, and speed is a number", 25),
    ("A AS dayofweek(label, 'UTC') = 1", "dayofweek() takes a time, and label is a string", 30),
    ("A AS speed IN (1, 'two')", "IN mixes speed (number) and 1 (number) and 'two' (string)", 20),
    ("A AS coalesce(speed, label) > 1", "coalesce() mixes speed (number) and label (string)", 20),
    ("A AS speed NOT LIKE '1%'", "LIKE takes a string, and speed is a number", 20),
])
def test_an_expression_mixing_types_of_the_stream_is_an_error(written: str, message: str, col: int) -> None:
    with pytest.raises(QueryError) as caught:
        load_query(f"FROM S DEFINE {written}, B AS flag PATTERN A meets B WITHIN 5 s RETURN avg(A.speed)",
                   schemas=stream("speed DOUBLE", "label STRING", "flag BOOLEAN"))
    assert (caught.value.first.description, caught.value.first.col) == (message, col)


@pytest.mark.parametrize(("written", "message", "col"), [
    ("A AS seen > 'soon'", "'soon' is not a time as a query writes one", 27),
    ("A AS seen > '12:00'", "'12:00' is not a time as a query writes one", 27),  # of which day?
    ("A AS seen < '2026-02-30'", "'2026-02-30' is not a time as a query writes one", 27),
    ("A AS seen = '2026-03-02T12:00+01:00'", "'2026-03-02T12:00+01:00' is not a time as a query writes one", 27),
    ("A AS day IN ('2026-03-02', '2 March')", "'2 March' is not a time as a query writes one", 42),
    ("A AS seen > label", "label is text, and a time is compared with times", 27),
    ("A AS seen BETWEEN lower('2026-01-01') AND '2026-02-01'",
     "lower('2026-01-01') is text, and a time is compared with times", 33),
    ("A AS coalesce(seen, day) > '2026-01-01'", "coalesce() mixes seen (time) and day (date)", 20),
    ("A AS coalesce(seen, '2026-01-01') > '2026-01-01'", "coalesce() mixes seen (time) and '2026-01-01' (string)",
     20),
])
def test_a_time_is_compared_with_times_and_dates_and_with_a_time_the_query_writes(written: str, message: str,
                                                                                  col: int) -> None:
    with pytest.raises(QueryError) as caught:
        load_query(f"FROM S DEFINE {written}, B AS flag PATTERN A meets B WITHIN 5 s",
                   schemas=stream("seen TIMESTAMP", "day DATE", "label STRING", "flag BOOLEAN"))
    assert (caught.value.first.description, caught.value.first.col) == (message, col)
    assert "'2026-03-02 12:00:00'" in caught.value.first.suggestion or "mixes" in message


def test_well_typed_expressions_pass_the_check() -> None:
    columns = ("speed DOUBLE", "label STRING", "flag BOOLEAN", "seen TIMESTAMP", "day DATE")
    plan = load_query("FROM S DEFINE A AS speed BETWEEN 1 AND 2.5 AND lower(label) IN ('a', 'b') AND NOT flag "
                      "AND label NOT LIKE 'x\\_%', "
                      "B AS seen > '2026-01-01' OR label IS NULL OR greatest(speed, 3) % 2 = 1 "
                      "OR seen BETWEEN '2026-01-01 06:00' AND '2026-01-01T07:00:00.5+01:00' OR seen IN (day) "
                      "OR day <= '2026-01-01 12:00:00Z' OR hour(day) = 0 "
                      "PATTERN A meets B WITHIN 5 s RETURN avg(A.speed) + 1 AS s, upper(first(B.label)) AS l, "
                      "duration(A) * 2 AS d, B.ts - A.ts AS gap", schemas=stream(*columns))
    assert [r.name for r in plan.returns] == ["s", "l", "d", "gap"]


@pytest.mark.parametrize(("written", "returns"), [("seen + 1 > 2", "first(A.speed) AS s"),
                                                  ("flag", "A.te - A.ts AS d")], ids=["predicate", "RETURN"])
def test_arithmetic_on_a_time_is_told_that_a_time_is_compared_and_a_length_is_duration(written: str,
                                                                                       returns: str) -> None:
    timed = StreamSchema("S", (), "ts", "timestamp", (("ts", "TIMESTAMP"), ("seen", "TIMESTAMP"),
                                                       ("speed", "DOUBLE"), ("flag", "BOOLEAN")))
    with pytest.raises(QueryError) as caught:
        load_query(f"FROM S DEFINE A AS {written}, B AS flag PATTERN A meets B WITHIN 5 s RETURN {returns}",
                   schemas=timed)
    assert caught.value.first.description.endswith("is a time")
    assert caught.value.first.suggestion == TIME_ARITHMETIC_HINT


def test_return_sums_numbers_only() -> None:
    with pytest.raises(QueryError, match=r"sum\(\) takes a number, and A.label is a string"):
        load_query("FROM S DEFINE A AS flag, B AS flag PATTERN A meets B WITHIN 5 s RETURN sum(A.label) AS s",
                   schemas=stream("label STRING", "flag BOOLEAN"))


@pytest.mark.parametrize(("operator", "term"), [("OR", "v = {i}"), ("AND", "v <> {i}"), ("+", "{i}"), ("*", "{i}")])
def test_a_chain_of_operators_is_as_deep_as_its_tree_and_refused_past_the_limit_where_it_passes_it(
        operator: str, term: str) -> None:
    """`a OR b OR c …` is a tree one level deeper at each operator, which every walk of it (Spark's analyzer
    too) recurses through: a chain of 40,000 was Python's RecursionError, and a predicate as deep as two chains
    of 97 an error of Spark's analyzer. The tree as deep as the limit is read; one level more is refused at the
    operator that makes it so."""
    def chain(terms: int) -> str:
        return f" {operator} ".join(term.format(i=i) for i in range(terms))

    def query(chained: str) -> str:
        body = chained if operator in {"OR", "AND"} else f"v > {chained}"
        return f"FROM S DEFINE A AS {body}, B AS w > 1 PATTERN A meets B WITHIN 5 s"

    parse(query(chain(100)))  # 99 operators, one level for the predicate itself
    for chained in (chain(101), chain(40_000), f"({chain(60)}) {operator} {chain(42)}"):
        text = query(chained)
        with pytest.raises(QuerySyntaxError, match="nested deeper than 100 levels") as refused:
            parse(text)
        [detail] = refused.value.errors
        assert text[detail.col - 1:].startswith(f"{operator} ") and detail.highlight == operator


def test_a_stream_name_too_long_for_its_tables_names_is_refused_where_it_is_written() -> None:
    """`quarantine_<stream>` is a table's name, at most 128 characters: a longer one passed `pielake check` and
    failed the run's ingest, saying the table's name held other characters than it did."""
    def query(stream: str) -> str:
        return f"FROM {stream} PARTITION BY k DEFINE A AS x > 1, B AS y > 1 PATTERN A overlaps B WITHIN 10 s"

    assert load_query(query("S" * 117)).sources[0].stream == "S" * 117
    with pytest.raises(QueryError) as refused:
        load_query(query("S" * 118))
    assert refused.value.first.description == "stream name '" + "S" * 118 + "' is longer than 117 characters"
    assert (refused.value.first.line, refused.value.first.col) == (1, 6)
