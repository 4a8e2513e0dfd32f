"""The plain-Python evaluator follows SQL three-valued logic as Spark does."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from pielake.query.evaluate import holds, row_evaluator
from pielake.query.parser import parse


def value(expr: str, **row: Any) -> Any:
    return row_evaluator(row)(parse(f"FROM S DEFINE A AS {expr} PATTERN A meets B WITHIN 1 s").query
                              .defines[0].predicate)


@pytest.mark.parametrize(("expr", "row", "expected"), [
    ("x > 1", {"x": 2}, True),
    ("x > 1", {"x": None}, None),
    ("x > 1 AND y", {"x": 0, "y": None}, False),
    ("x > 1 AND y", {"x": 2, "y": None}, None),
    ("x > 1 OR y", {"x": 2, "y": None}, True),
    ("x > 1 OR y", {"x": 0, "y": None}, None),
    ("NOT y", {"y": None}, None),
    ("!y && z || w", {"y": False, "z": True, "w": False}, True),
    ("x / 0", {"x": 5}, None),
    ("x % 0", {"x": 5}, None),
    ("x % 3", {"x": -7}, -1),
    ("x % 10", {"x": 2**62 + 7}, 1),  # exact: as a double the dividend would be 2**62, whose remainder is 4
    ("x * 2", {"x": 2**62}, None),  # beyond 64 bits: NULL, as Spark's try_multiply
    ("x + 1", {"x": 2**63 - 1}, None),
    ("x - 1", {"x": -2**63}, None),
    ("-x", {"x": -2**63}, None),
    ("abs(x)", {"x": -2**63}, None),
    ("x * 2", {"x": 2**61}, 2**62),
    ("x * 2.0", {"x": 2**62}, 2.0**63),  # a number written with a point is a double, which does not overflow
    ("x * 1e1", {"x": 2**62}, None),  # a whole number, though written with an exponent
    ("x < 100000000000000000000", {"x": 2**62}, True),  # a whole number beyond 64 bits is a double
    ("x / 2", {"x": 5}, 2.5),
    ("x BETWEEN 1 AND 3", {"x": 3}, True),
    ("x NOT BETWEEN 1 AND 3", {"x": None}, None),
    ("x IN (1, 2)", {"x": 2}, True),
    ("x IN (1, NULL)", {"x": 2}, None),
    ("x NOT IN (1, 2)", {"x": 3}, True),
    ("x IS NULL", {"x": None}, True),
    ("x IS NOT NULL", {"x": None}, False),
    ("least(x, y, 3)", {"x": None, "y": 5}, 3),
    ("greatest(x, y)", {"x": None, "y": None}, None),
    ("coalesce(x, y, 7)", {"x": None, "y": None}, 7),
    ("abs(x)", {"x": -2.5}, 2.5),
    # A square root is a double, as Java's Math.sqrt gives it: NaN below zero.
    ("sqrt(x * x + y * y)", {"x": 3, "y": 4}, 5.0),
    ("sqrt(x)", {"x": None}, None),
    ("sqrt(x) > 1e308", {"x": -1}, True),
    ("sqrt(x) = sqrt(x)", {"x": -4.0}, True),
    ("sqrt(x) = 0", {"x": -0.0}, True),
    ("sqrt(x)", {"x": 2**62}, 2.0**31),
    ("upper(s) = 'AB'", {"s": "ab"}, True),
    ("lower(s)", {"s": None}, None),
    ("length(s)", {"s": "é€\n"}, 3),
    ("length(s)", {"s": None}, None),
    ("-x * 2 + 1", {"x": 3}, -5),
    # An infinity's arithmetic gives NaN, which Spark orders above every number and equal to itself.
    ("x * 1e308 * 10 - x * 1e308 * 10 > 1e308", {"x": 2}, True),
    ("x * 1e308 * 10 - x * 1e308 * 10 = x * 1e308 * 10 - x * 1e308 * 10", {"x": 2}, True),
    ("least(x * 1e308 * 10 - x * 1e308 * 10, 5)", {"x": 2}, 5),
    ("(x * 1e308 * 10 % 3) > 1e308", {"x": 2}, True),  # Java's % of an infinity is NaN
    ("3.5 % (x * 1e308 * 10)", {"x": 2}, 3.5),
    ("X > 1", {"x": 2}, True),
    # A time's fields on UTC's clock, or the zone's: a naive time is UTC, as Spark hands one back; an aware one
    # keeps its instant; a DATE is its midnight in UTC; an int is a TIMESTAMP stream's own time in microseconds.
    ("hour(t)", {"t": datetime(2026, 3, 29, 0, 59)}, 0),
    ("hour(t, 'Europe/Berlin')", {"t": datetime(2026, 3, 29, 0, 59)}, 1),  # an hour before summer time
    ("hour(t, 'Europe/Berlin')", {"t": datetime(2026, 3, 29, 1, 0)}, 3),  # its first minute: 02:00 is skipped
    ("hour(t)", {"t": datetime(2026, 3, 29, 3, 0, tzinfo=timezone(timedelta(hours=2)))}, 1),
    ("minute(t, '-0530')", {"t": datetime(2026, 1, 1, 0, 10)}, 40),
    ("dayofweek(t)", {"t": datetime(2026, 12, 6, 23, 59)}, 1),  # a Sunday: 1, as Spark SQL counts
    ("dayofweek(t, '+01:00')", {"t": datetime(2026, 12, 6, 23, 59)}, 2),
    ("month(t, 'America/New_York')", {"t": date(2026, 1, 1)}, 12),  # midnight UTC is New Year's Eve there
    ("hour(t) * 3600", {"t": 1_000_000 * 3600 * 5}, 18000),  # 05:00 on 1 January 1970
    ("hour(t, 'Europe/Berlin')", {"t": None}, None),
    # A time compared with a time the query writes is its instant, a DATE with it the date the text writes, and
    # a DATE with a TIMESTAMP its midnight in UTC.
    ("t > '2026-03-02 12:00'", {"t": datetime(2026, 3, 2, 12, 0, 1)}, True),
    ("t = '2026-03-02T13:00:00+01:00'", {"t": 1_772_452_800_000_000}, True),  # a stream's own time, kernel time
    ("t IN ('2026-03-02', '2026-03-02 12:00')", {"t": datetime(2026, 3, 2, 12, 0)}, True),
    ("t BETWEEN '2026-03-02' AND '2026-03-02 11:59:59.999999'", {"t": datetime(2026, 3, 2, 12, 0)}, False),
    ("d = '2026-03-02T23:30:00-05:00'", {"d": date(2026, 3, 2)}, True),
    ("d < t", {"d": date(2026, 3, 2), "t": datetime(2026, 3, 2, 0, 0, 1)}, True),
    ("d = t", {"d": date(2026, 3, 2), "t": datetime(2026, 3, 2, 1, 0, tzinfo=timezone(timedelta(hours=1)))}, True),
])
def test_expressions_evaluate_like_spark_sql(expr: str, row: dict, expected: Any) -> None:
    assert value(expr, **row) == expected


def test_a_null_predicate_does_not_hold() -> None:
    predicate = parse("FROM S DEFINE A AS x > 1 PATTERN A meets B WITHIN 1 s").query.defines[0].predicate
    assert holds(predicate, {"x": None}) is False
