"""SQL's LIKE patterns as the reference reads them (`pielake.query.like`); Spark's and Arrow's readings are
compared with it in tests/spark/test_arrow_predicates.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pielake.query.like import like_example, like_regex, pattern_fault, with_backslash

pytestmark = pytest.mark.unit

PARTS = ["a", "B", ".", "*", "(", "$", "\n", " ", "%", "_", "\\%", "\\_", "\\\\", "é"]


@pytest.mark.parametrize(("pattern", "held", "not_held"), [
    ("E-4__: %", ["E-412: fan", "E-4xy: "], ["E-41: fan", "e-412: fan", "E-4123: fan"]),
    ("%cleared%", ["cleared", "alarm cleared at 8", "a\ncleared\n"], ["Cleared", "clear"]),
    ("100\\%", ["100%"], ["1000", "100"]),
    ("a\\_b", ["a_b"], ["axb"]),
    ("a\\\\b", ["a\\b"], ["ab", "a\\\\b"]),
    ("a.b*", ["a.b*"], ["axb*", "a.bbb"]),
    ("", [""], [" "]),
    ("_", ["é", "\n"], ["", "ab"]),
])
def test_a_pattern_holds_the_whole_text_and_only_as_written(pattern: str, held: list[str],
                                                            not_held: list[str]) -> None:
    assert pattern_fault(pattern) is None
    assert [like_regex(pattern).fullmatch(text) is not None for text in held + not_held] == \
        [True] * len(held) + [False] * len(not_held)


@given(st.lists(st.sampled_from(PARTS), max_size=8).map("".join))
def test_a_pattern_holds_its_own_example(pattern: str) -> None:
    """A sample stream draws a text each LIKE of a query holds (`like_example`), so that its predicate turns true."""
    assert like_regex(pattern).fullmatch(like_example(pattern)) is not None


@pytest.mark.parametrize(("pattern", "said"), [
    ("O\\d%", "'\\d': \\ makes only %, _ or \\ after it stand for itself, and LIKE has no classes of characters"),
    ("100\\", "the pattern ends with \\, which makes the character after it stand for itself: write \\\\ for \\"),
    ("_\U0001F600_", "'\U0001F600' is a character beyond U+FFFF"),
])
def test_what_spark_refuses_or_cannot_match_is_named(pattern: str, said: str) -> None:
    fault = pattern_fault(pattern)
    assert fault is not None and fault.startswith(said)


@pytest.mark.parametrize(("pattern", "escape", "written"), [
    ("100!%", "!", "100\\%"), ("a!_b", "!", "a\\_b"), ("a!!b", "!", "a!b"), ("C:\\dir%", "!", "C:\\\\dir%"),
    ("50%%", "%", "50\\%"), ("a\\%", "\\", "a\\%"), ("a__%", "_", "a\\_%")])
def test_a_pattern_with_an_escape_of_its_own_is_written_with_the_backslash(pattern: str, escape: str,
                                                                        written: str) -> None:
    assert with_backslash(pattern, escape) == (written, None)


@pytest.mark.parametrize(("pattern", "fault"), [
    ("a!", "the escape '!' stands at the end of the pattern"), ("a!b", "the escape '!' stands before 'b'")])
def test_an_escape_before_anything_but_percent_underscore_or_itself_is_refused(pattern: str, fault: str) -> None:
    assert fault in with_backslash(pattern, "!")[1]

