"""Times in predicates: a time's fields as a clock shows them (`hour(t)`, `minute(t)`, `dayofweek(t)`, `month(t)`),
and a time compared with a time written in the query (`ts > '2026-03-02 12:00'`).

A time in the lake is an instant, and which hour it falls in depends on whose clock reads it. These functions read
it on UTC's, the clock `pielake sql` shows every time on, unless the call names another as its second argument
(`hour(ts, 'Europe/Berlin')`, daylight saving time included, or an offset, `hour(ts, '+05:30')`): a predicate then
says "at night" on the clock of the place it means, whatever the zone the stream's files were written in. A DATE
is its day's midnight in UTC, as Spark reads a DATE where it wants a time. `dayofweek` counts as Spark SQL does, 1
for Sunday to 7 for Saturday.

The reference (`pielake.query.evaluate`) computes the fields here in Python, the Spark kernels with Spark's own
functions on the instant moved to that clock (`pielake.spark.compile`); both read the zone from `zone_of`.

A time written in the query takes one of the forms Spark and Python read as the same instant (`TIME_TEXT`): a date,
or a date and a time of day to the microsecond, UTC unless `Z` or an offset follows; anything else is refused when
the query is read, since Spark would stop the run on it or read a time of day alone as one of the day it runs.
Compared with a TIMESTAMP it is its instant; with a DATE, the date it writes, as Spark casts it. A DATE compared with
a TIMESTAMP is its midnight in UTC. `comparable` applies these rules for the reference; Spark applies its own casts.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from pielake.query import ast
from pielake.streams import ZONE_KINDS, zone_info

TIME_FIELDS = ("hour", "minute", "dayofweek", "month")
LAKE_ZONE = "UTC"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # kernel time 0 of a TIMESTAMP stream
# Spark takes `Z` or an offset only after the seconds.
TIME_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})?)?)?")
TIME_TEXT_FORMS = ("a date, '2026-03-02', or a date and a time, '2026-03-02 12:00:00', UTC unless it names an "
                   "offset: '2026-03-02T12:00:00+01:00'")
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
        return offset_text(offset)
    return written


def offset_text(offset: timedelta) -> str:
    """An offset from UTC as Spark and ISO-8601 write it, `+HH:MM`."""
    sign, minutes = ("-" if offset < timedelta(0) else "+"), abs(offset) // timedelta(minutes=1)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


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


def written_time(text: str) -> datetime | None:
    """The instant a time written in the query stands for (`TIME_TEXT`), None where it is written otherwise."""
    if TIME_TEXT.fullmatch(text) is None:
        return None
    try:
        return instant(datetime.fromisoformat(text))
    except ValueError:  # a month 13, a 30 February, an offset of 25 hours
        return None


def _is_time(value: Any) -> bool:
    return isinstance(value, date) or (isinstance(value, int) and not isinstance(value, bool))


def comparable(a: Any, b: Any) -> tuple[Any, Any]:
    """Two values as the reference compares them: a time with a time written as text, a DATE with a TIMESTAMP, a
    TIMESTAMP attribute with a stream's own time in kernel time; anything else as it is."""
    if isinstance(a, str) and _is_time(b):
        return tuple(reversed(comparable(b, a)))
    if isinstance(b, str) and _is_time(a):
        written = written_time(b)
        if written is None:
            return a, b
        if isinstance(a, date) and not isinstance(a, datetime):  # the date the text writes, as Spark casts it
            return a, date.fromisoformat(b[:10])
        return instant(a), written
    plain_dates = all(isinstance(v, date) and not isinstance(v, datetime) for v in (a, b))
    if _is_time(a) and _is_time(b) and (isinstance(a, date) or isinstance(b, date)) and not plain_dates:
        return instant(a), instant(b)
    return a, b
