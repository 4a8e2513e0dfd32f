"""A time a user gives a command (`--from`, `--to` of backfill and plot) is read one way, as the stream writes its
times (`pielake.spark.query.typed_time`): a whole number of its unit in ASCII digits within BIGINT, or an
ISO-8601 time for a TIMESTAMP stream; anything else is refused saying what to give."""

from __future__ import annotations

import pytest

from pielake.errors import PielakeError
from pielake.spark.query import typed_range, typed_time
from pielake.streams import TIMESTAMP_UNIT, StreamSchema

SECONDS = StreamSchema("Plant", ("unit",), "ts", "s", (("unit", "STRING"), ("ts", "BIGINT")))
CLOCK = StreamSchema("Clock", ("unit",), "at", TIMESTAMP_UNIT, (("unit", "STRING"), ("at", "TIMESTAMP")))


@pytest.mark.parametrize(("text", "kernel"), [("12", 12), (" +3 ", 3), ("-4", -4), ("007", 7),
                                              ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -2**63)])
def test_a_whole_number_of_the_stream_s_unit_is_its_time(text: str, kernel: int) -> None:
    assert typed_time("--from", text, SECONDS) == kernel


@pytest.mark.parametrize("text", ["1_000", "\u0663", "1.5", "1e3", "noon", "", "9223372036854775808", "0x10"])
def test_anything_else_is_refused_naming_the_option_the_stream_and_what_to_give(text: str) -> None:
    """Python's `int` reads `1_000` and other scripts' digits, and Spark casts `1.5` and `1e3` to whole numbers;
    no stream's file writes a time that way, so neither does a user."""
    with pytest.raises(PielakeError) as refused:
        typed_time("--to", text, SECONDS)
    assert str(refused.value) == f"--to '{text}' is not a time of stream Plant: give a whole number of its unit (s)"


def test_an_iso_time_for_a_stream_of_numbers_is_offered_as_unix_time_not_taken() -> None:
    with pytest.raises(PielakeError, match=r"give a whole number of its unit \(s\); if its times count from 1970 "
                                           r"\(Unix time\), 2026-01-01 is 1767225600$"):
        typed_time("--from", "2026-01-01", SECONDS)


def test_a_timestamp_stream_takes_iso_times_in_utc_unless_they_say_their_zone() -> None:
    assert typed_time("--from", "1970-01-01T00:00:01", CLOCK) == 1_000_000
    assert typed_time("--from", " 1970-01-01T02:00:01+02:00 ", CLOCK) == 1_000_000
    with pytest.raises(PielakeError, match=r"^--from '12' is not a time of stream Clock: give an ISO-8601 time"):
        typed_time("--from", "12", CLOCK)


def test_a_range_that_ends_before_it_starts_is_refused_and_either_end_may_be_open() -> None:
    assert typed_range("3", None, SECONDS) == (3, None)
    assert typed_range(None, None, SECONDS) == (None, None)
    assert typed_range("3", "3", SECONDS) == (3, 3)
    with pytest.raises(PielakeError, match=r"^--from 9 is after --to 3$"):
        typed_range("9", "3", SECONDS)
