"""The zones a run reads clocks on, as Spark's Java reads them.

Spark reads a named zone (`hour(ts, 'America/Vancouver')`, a stream's `time.zone`) with the time-zone data its Java
carries, which a JDK release fixes when it is built; the IANA database that data comes from changes several times a
year, as countries change their clocks. So a run asks Spark, once for each named zone before it reads an event,
whether its Java knows the zone (a query naming one it does not is refused, as Spark would stop the run at the
first time it read there) and how it reads the zone's clock on each day from 1970 to two years from now, and
compares that with the newest data pielake carries (the `tzdata` package): where they differ, the run says from
when and by how much, and goes on by Java's rules (docs/semantics.md §1), which its results follow throughout.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from importlib import resources
from zoneinfo import ZoneInfo

import pyspark.sql.functions as F
import tzdata
from pyspark.errors import PySparkException
from pyspark.sql import Column, SparkSession

from pielake.errors import ErrorDetail, QuerySemanticError
from pielake.query import ast
from pielake.query.analyzer import QueryPlan, walk
from pielake.query.time_fields import TIME_FIELDS, offset_text, zone_of
from pielake.query.tokens import detail_at
from pielake.streams import zone_info

FIRST_DAY = date(1970, 1, 1)
YEARS_AHEAD = 2  # how far past today the clocks are compared: a change is published months before it applies
NOON_S = 12 * 3600  # each day is compared at its noon in UTC, away from the night hours clocks change at
NOON = datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=UTC) + timedelta(seconds=NOON_S)


@dataclass(frozen=True)
class Drift:
    """Days on which Spark's Java reads a zone's clock otherwise than pielake's zone data: the first span of them
    (`last` None where it lasts to the last day compared), its offsets by each, and how many spans follow."""

    zone: str
    first: date
    last: date | None
    java: timedelta
    newest: timedelta
    more: int

    def text(self) -> str:
        """The drift as the run says it."""
        span = f"from {self.first} on" if self.last is None else f"from {self.first} to {self.last}"
        others = f" (and in {self.more} later span{'s' * (self.more > 1)})" if self.more else ""
        return (f"Spark's Java reads the clock of '{self.zone}' by older rules than the IANA time-zone data pielake "
                f"carries ({tzdata.IANA_VERSION}): {span}{others} it reads {offset_text(self.java)} where that data "
                f"says {offset_text(self.newest)}, and the run follows Java. A Java whose time-zone data is "
                f"{tzdata.IANA_VERSION} or later (a newer JDK, or Oracle's TZUpdater) reads it as that data does.")


def check_zones(spark: SparkSession, plan: QueryPlan, stream_zones: list[str]) -> list[str]:
    """Refuse, before a run reads an event, a zone that a time field names and `spark` cannot read; say where
    Spark reads a named zone of the query's or of its streams' (`stream_zones`) otherwise than pielake's zone data.
    A stream's zone Spark cannot read is refused where ingest reads its times (`_check_time_reading`)."""
    calls: dict[str, ast.Call] = {}
    for call in _zone_calls(plan):
        calls.setdefault(zone_of(call), call)
    named = [zone for zone in stream_zones if _named(zone)]
    read = {zone: _java_offsets(spark, zone) for zone in dict.fromkeys([*calls, *named])}
    unknown = [calls[zone] for zone, offsets in read.items() if offsets is None and zone in calls]
    if unknown:
        raise QuerySemanticError([_unknown_zone(call, plan.source) for call in unknown])
    drifts = [drift(zone, offsets) for zone, offsets in read.items() if offsets is not None]
    return [found.text() for found in drifts if found is not None]


def _named(zone: str) -> bool:
    """Whether `zone` is given by a name whose rules Java's zone data holds; an offset, or UTC, reads the same on
    every Java."""
    return zone[0] not in "+-" and zone not in ("UTC", "Z")


def _zone_calls(plan: QueryPlan) -> Iterator[ast.Call]:
    """Each time field of the plan whose call names a zone by name (`_named`)."""
    for expr in plan.expressions:
        for node in walk(expr):
            if isinstance(node, ast.Call) and node.name in TIME_FIELDS and len(node.args) == 2 and \
                    _named(zone_of(node)):
                yield node


def days_compared(today: date) -> int:
    """How many days from `FIRST_DAY` the clocks are compared on."""
    return (today - FIRST_DAY).days + 366 * YEARS_AHEAD


def _java_offsets(spark: SparkSession, zone: str) -> list[int] | None:
    """The offset from UTC, in seconds, of `zone`'s clock as Spark reads it at noon UTC of each day compared; None
    where Spark's Java does not know the zone. One small Spark job of one task (two tasks of so little work cost
    more than they share), which sends back only the days whose offset differs from the day's before: a zone's
    clock changes a few times a year."""
    days = days_compared(datetime.now(UTC).date())
    day = F.col("id")
    changes = (day == 0) | (_offset(day, zone) != _offset(day - 1, zone))
    try:
        rows = spark.range(0, days, 1, 1).where(changes).select(day, _offset(day, zone).alias("s")).collect()
    except PySparkException as error:
        if error.getCondition() == "INVALID_TIMEZONE":
            return None
        raise
    changed = [(row.id, row.s) for row in rows]  # one task's rows, in the order `range` counts them
    ends = [first for first, _ in changed[1:]] + [days]
    offsets: list[int] = []
    for (first, seconds), end in zip(changed, ends, strict=True):
        offsets.extend([seconds] * (end - first))
    return offsets


def _offset(day: Column, zone: str) -> Column:
    """The offset from UTC, in seconds, of `zone`'s clock at noon UTC of `day` (days since `FIRST_DAY`)."""
    moment = day * 86_400 + NOON_S
    return F.unix_seconds(F.from_utc_timestamp(F.timestamp_seconds(moment), zone)) - moment  # a UTC session's


def newest_zone(zone: str) -> tzinfo | None:
    """`zone` as pielake's zone data (the `tzdata` package) reads it, not the system's, which may be older; None
    where that data does not name it."""
    found = resources.files("tzdata.zoneinfo").joinpath(*zone.split("/"))
    if not found.is_file():
        return None
    with found.open("rb") as data:
        return ZoneInfo.from_file(data, key=zone)


def drift(zone: str, java: list[int]) -> Drift | None:
    """Where Java's offsets of `zone` (`_java_offsets`) differ from pielake's zone data's, day by day."""
    newest = newest_zone(zone)
    if newest is None:
        return None
    ours = [_seconds((NOON + timedelta(days=day)).astimezone(newest).utcoffset()) for day in range(len(java))]
    if ours == java:
        return None
    spans = _spans([day for day, (theirs, mine) in enumerate(zip(java, ours, strict=True)) if theirs != mine])
    first, last = spans[0]
    return Drift(zone, FIRST_DAY + timedelta(days=first), None if last == len(java) - 1 else
                 FIRST_DAY + timedelta(days=last), timedelta(seconds=java[first]), timedelta(seconds=ours[first]),
                 len(spans) - 1)


def _seconds(offset: timedelta | None) -> int:
    """An offset in whole seconds, as Spark gives Java's (a zone's offset is whole seconds)."""
    return 0 if offset is None else offset.days * 86_400 + offset.seconds


def _spans(days: list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive days, as (first, last)."""
    spans: list[tuple[int, int]] = []
    for day in days:
        if spans and spans[-1][1] == day - 1:
            spans[-1] = (spans[-1][0], day)
        else:
            spans.append((day, day))
    return spans


def _unknown_zone(call: ast.Call, source: str) -> ErrorDetail:
    zone = zone_of(call)
    now = offset_text(zone_info(zone).utcoffset(datetime.now(UTC)) or timedelta(0))
    return detail_at(source, call.args[1].span, f"Spark's Java does not know the time zone '{zone}'",
                     f"Its time-zone data is older than Python's, which names it: give the zone's offset instead "
                     f"('{now}' now), or run on a Java whose time-zone data has it.")
