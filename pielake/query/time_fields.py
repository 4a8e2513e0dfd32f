"""A time's fields as a clock shows them: `hour(t)`, `minute(t)`, `dayofweek(t)`, `month(t)`.

A time in the lake is an instant, and which hour it falls in depends on whose clock reads it. These functions read
it on UTC's, the clock `pielake sql` shows every time on, unless the call names another as its second argument
(`hour(ts, 'Europe/Berlin')`, daylight saving time included, or an offset, `hour(ts, '+05:30')`): a predicate then
says "at night" on the clock of the place it means, whatever the zone the stream's files were written in. A DATE
is its day's midnight in UTC, as Spark reads a DATE where it wants a time. `dayofweek` counts as Spark SQL does, 1
for Sunday to 7 for Saturday.

The reference (`pielake.query.evaluate`) computes the fields here in Python, the Spark kernels with Spark's own
functions on the instant moved to that clock (`pielake.spark.compile`); both read the zone from `zone_of`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from pielake.query import ast
from pielake.streams import ZONE_KINDS, zone_info

TIME_FIELDS = ("hour", "minute", "dayofweek", "month")
LAKE_ZONE = "UTC"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # kernel time 0 of a TIMESTAMP stream
# The widest offset Java's ZoneOffset, and so Spark, takes.
WIDEST_OFFSET = timedelta(hours=18)


def zone_name(written: str) -> str:
    """The zone a call's text names, as both Python and Spark read it: an IANA name as written, an offset as
    `+HH:MM`. Raises ValueError naming what it takes."""
    zone = zone_info(written)
    if isinstance(zone, timezone):
        offset = zone.utcoffset(None)
        if abs(offset) > WIDEST_OFFSET:
            raise ValueError(f"the offset {written!r} is beyond ±18:00")
        sign, minutes = ("-" if offset < timedelta(0) else "+"), abs(offset) // timedelta(minutes=1)
        return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    return written


def zone_of(call: ast.Call) -> str:
    """The zone a time field is read in: the call's second argument, a text literal the analyzer has checked,
    else the lake's."""
    if len(call.args) < 2:
        return LAKE_ZONE
    written = call.args[1]
    assert isinstance(written, ast.Literal) and isinstance(written.value, str), "checked by the analyzer"
    return zone_name(written.value)


def zone_problem(call: ast.Call) -> tuple[str, str] | None:
    """What is wrong with a time field's zone argument, and the fix; None where it names a zone."""
    if len(call.args) < 2:
        return None
    written = call.args[1]
    example = f"{call.name}(ts, 'Europe/Berlin')"
    if not (isinstance(written, ast.Literal) and isinstance(written.value, str)):
        return (f"{call.name}()'s zone is a text written in the query",
                f"Give the zone in quotes, as {ZONE_KINDS}: {example}.")
    try:
        zone_name(written.value)
    except ValueError as error:
        return str(error), f"Give the zone as {ZONE_KINDS}: {example}."
    return None


def instant(value: date | int) -> datetime:
    """The instant a time value stands for, as the reference holds one: a datetime (naive ones are UTC, as Spark
    hands them back in a UTC session), a DATE (its midnight in UTC), or a TIMESTAMP stream's own time in kernel
    time (whole microseconds since 1970, `pielake.spark.query`)."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    return EPOCH + timedelta(microseconds=value)


def time_field(name: str, value: Any, zone: str) -> int | None:
    """Field `name` of time `value` on the clock of `zone`; NULL stays NULL."""
    if value is None:
        return None
    local = instant(value).astimezone(zone_info(zone))
    if name == "dayofweek":
        return local.isoweekday() % 7 + 1  # Sunday 1 … Saturday 7
    return int(getattr(local, name))
