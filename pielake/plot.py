"""`pielake plot`: one key's situations and matches as a timeline, like PieStream's Figure 1.

One lane per symbol with its situations as bars: a closed situation solid, however short (a bar is never narrower
than `MIN_WIDTH` of the picture, or a second-long situation would anti-alias to a faint line), an open one hatched
and running to the right edge, where an arrow says it still holds. Every match is a
bracket across the lanes from its first start to its last end, coloured by status, with a triangle at its
`detected_at`. Reading the picture is quicker than reading the twenty timestamps of the same rows.

The rows come from the published tables; `timeline` turns them into plain lanes, bars and brackets (what the tests
check), and `draw` only renders that with matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake import vocabulary as V
from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.query.analyzer import QueryPlan
from pielake.query.time_fields import instant
from pielake.spark.query import time_literal, typed_range, utc_clock
from pielake.streams import TIMESTAMP_UNIT, StreamSchema, declared_schema

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STATUS_COLOURS = {V.COMPLETE: "tab:green", V.PROVISIONAL: "tab:orange", V.RETRACTED: "tab:gray"}
SITUATION_COLOUR = "tab:blue"
MIN_WIDTH = 0.004  # of the time span shown: about six pixels of the 12-inch figure
MARGIN = 0.02  # of the time span drawn, left of its first time and right of its last
OPEN_HATCH = "///"


@dataclass(frozen=True)
class Bar:
    lane: int
    start: Any
    end: Any | None  # None: the situation is still open


@dataclass(frozen=True)
class Bracket:
    start: Any
    end: Any | None  # None: one of its situations is still open
    detected_at: Any
    status: str


@dataclass(frozen=True)
class Timeline:
    title: str
    lanes: tuple[str, ...]
    bars: tuple[Bar, ...]
    brackets: tuple[Bracket, ...]
    unit: str = ""  # of a numeric time (s, ms, us, ...), or UTC for TIMESTAMPs, which read as dates in UTC
    shown: tuple[Any | None, Any | None] = (None, None)  # the times asked for (--from, --to): the picture's edges
    key: str = ""  # the key drawn, as its columns' values (`machine_id = press-3`)


def _for_key(frame: DataFrame, plan: QueryPlan, key: tuple[str, ...]) -> DataFrame:
    """The rows of `frame` of the key given as text (`--key`), each value read as its column's type: a value that
    is not one (text for a numeric key) names no key, as any other unknown key does."""
    if len(key) != len(plan.keys):
        names = ", ".join(plan.keys) or "none"
        raise PielakeError(f"query {plan.name} is partitioned by {names}: give one --key per column, in that order")
    kinds = {field.name.lower(): field.dataType for field in frame.schema.fields}
    return frame.filter(reduce(lambda a, b: a & b, (F.col(k) == F.lit(v).try_cast(kinds[k.lower()])
                                                    for k, v in zip(plan.keys, key, strict=True)), F.lit(True)))


def _in_range(start: Column, end: Column, since: Column | None, until: Column | None) -> Column:
    """Rows whose interval meets [since, until]; an open end reaches every later time."""
    keep = F.lit(True)
    if since is not None:
        keep &= end.isNull() | (end >= since)
    if until is not None:
        keep &= start <= until
    return keep


def busiest_key(plan: QueryPlan, matches: DataFrame, situations: DataFrame) -> tuple[tuple[str, ...], str] | None:
    """The key with the most matches, else the one with the most situations (the first such key in key order),
    as strings, and which of the two it has most of; None where no key has a situation. A key without matches is
    still worth drawing: its situations show why none matched. A query without keys has one key, `()`, which
    counts its rows as a whole (a count of none where it has none)."""
    for frame, most in ((matches, V.MATCHES), (situations, V.SITUATIONS)):
        top = frame.groupBy(*plan.keys).count().orderBy(F.desc("count"), *plan.keys).first()
        if top is not None and top["count"]:
            return tuple(str(top[k]) for k in plan.keys), most
    return None


def _key_to_try(plan: QueryPlan, matches: DataFrame, situations: DataFrame) -> str:
    """What a refused --key is told to try: `busiest_key`."""
    found = busiest_key(plan, matches, situations)
    if found is None:
        return "no key has situations yet"
    return f"the key with the most {found[1]} is {_shown(plan, found[0])}"


def timeline(lake: Lake, plan: QueryPlan, key: tuple[str, ...] | None = None, since: str | None = None,
             until: str | None = None) -> Timeline:
    """The lanes, bars and brackets of one key (default: `busiest_key`) between `since` and `until` (stream
    time, inclusive)."""
    name = plan.name
    for kind in (V.SITUATIONS, V.MATCHES):
        if not lake.exists(V.table_name(kind, name)):
            raise PielakeError(f"no {kind} of query {name} in {lake.root}; run the query first")
    stream = _stream(lake, plan)  # --from and --to read as every command reads a time
    low, high = typed_range(since, until, stream)
    every_match = lake.read(V.table_name(V.MATCHES, name))
    every_situation = lake.read(V.table_name(V.SITUATIONS, name))
    if key is None:
        found = busiest_key(plan, every_match, every_situation)
        if found is None:
            raise PielakeError(f"query {name} has no situations yet: no symbol's predicate has held on an event of "
                               "its stream")
        key = found[0]
    lanes = tuple(s.name for s in plan.symbols)
    situations = _for_key(every_situation, plan, key)
    if situations.isEmpty():
        raise PielakeError(f"query {name} has no situations of {_shown(plan, key)} (a --key that names no key of the "
                           f"stream, or one no symbol ever held for); "
                           f"{_key_to_try(plan, every_match, every_situation)}")
    timed = stream.time_unit == TIMESTAMP_UNIT
    clock = utc_clock if timed else (lambda time: time)  # drawn as UTC reads them, wherever the plot is drawn
    since_at, until_at = (None if t is None else time_literal(t, stream) for t in (low, high))
    bars = tuple(sorted((Bar(lanes.index(r[V.SYMBOL]), r[V.TS], r[V.TE]) for r in situations.filter(
        _in_range(F.col(V.TS), F.col(V.TE), since_at, until_at)).select(
            V.SYMBOL, *(clock(F.col(c)).alias(c) for c in (V.TS, V.TE))).collect()), key=lambda b: (b.lane, b.start)))
    matches = _for_key(every_match, plan, key)
    first = F.least(*(F.col(V.symbol_ts(s)) for s in lanes))
    ends = [F.col(V.symbol_te(s)) for s in lanes]
    last = F.when(reduce(lambda a, b: a | b, (e.isNull() for e in ends)), None).otherwise(F.greatest(*ends))
    rows = matches.select(first.alias("start"), last.alias("end"), V.DETECTED_AT, V.STATUS).filter(
        _in_range(F.col("start"), F.col("end"), since_at, until_at)).select(
            *(clock(F.col(c)).alias(c) for c in ("start", "end", V.DETECTED_AT)), V.STATUS).collect()
    brackets = tuple(sorted((Bracket(r["start"], r["end"], r[V.DETECTED_AT], r[V.STATUS]) for r in rows),
                            key=lambda b: (b.start, b.detected_at)))
    # of TIMESTAMPs, as `clock` hands them to Python: UTC's wall clock, naming no zone
    edges = (low, high) if not timed else tuple(None if t is None else instant(t).replace(tzinfo=None)
                                                for t in (low, high))
    drawn_key = _shown(plan, key)
    return Timeline(f"{name}: {drawn_key}  ({counted(len(brackets), 'match')})", lanes, bars, brackets,
                    "UTC" if timed else stream.time_unit, edges, drawn_key)


def _edges(picture: Timeline) -> tuple[Any, Any]:
    """The first and last time drawn: those asked for, else the first and last of the picture's bars and
    brackets. A bar or bracket reaching past an edge asked for runs off the picture, as its other situations,
    outside the range, are not drawn."""
    times = [t for b in picture.bars for t in (b.start, b.end) if t is not None]
    times += [t for m in picture.brackets for t in (m.start, m.end, m.detected_at) if t is not None]
    since, until = picture.shown
    return (min(times, default=0) if since is None else since,
            max(times, default=1) if until is None else until)


def counted(count: int, noun: str) -> str:
    """`1 match`, `2 matches`: a count with its noun (`-es` after a hissing end, else `-s`)."""
    plural = f"{noun}es" if noun.endswith(("s", "sh", "ch", "x")) else f"{noun}s"
    return f"{count:,} {noun if count == 1 else plural}"


def _stream(lake: Lake, plan: QueryPlan) -> StreamSchema:
    """The query's first stream as the lake keeps it, or schemas/ declares it (several streams share their time
    type), as a run reads it."""
    schema = declared_schema(plan.sources[0].stream, lake.root)
    if schema is None:
        raise PielakeError(f"stream {plan.sources[0].stream} has no schema in {lake.root}; run the query first")
    return schema


def _shown(plan: QueryPlan, key: tuple[str, ...]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in zip(plan.keys, key, strict=True)) or "all events"


def pyplot() -> ModuleType:
    """matplotlib's pyplot on the file-only Agg backend, imported on first use: the CLI starts faster without it,
    and runs on machines without a display."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def bar_extent(bar: Bar, left: Any, right: Any) -> tuple[Any, Any]:
    """Where a bar is drawn, as (start, width): from its start to its end, an open one to `right`, the picture's
    last time, and never narrower than `MIN_WIDTH` of the span from `left` to `right`."""
    end = bar.end if bar.end is not None else right
    span = right - left
    minimum = span * MIN_WIDTH if span else (timedelta(seconds=1) if isinstance(left, datetime) else 1)
    return bar.start, max(end - bar.start, minimum)


def image_file(out: str) -> Path:
    """`out`, if its suffix names a format matplotlib writes: checked before Spark starts, as matplotlib refuses
    another format only once the picture is drawn, and a name without a suffix it writes as `<name>.png`."""
    from matplotlib.backend_bases import FigureCanvasBase  # noqa: PLC0415 (pyplot)

    path = Path(out)
    written = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in written:
        said = f"its suffix {path.suffix} is no image format" if path.suffix else "it has no suffix to say its format"
        raise PielakeError(f"--out {out}: {said}; name a .png, .svg or .pdf file (matplotlib also writes "
                           f"{', '.join(f'.{kind}' for kind in sorted(set(written) - {'png', 'svg', 'pdf'}))})")
    return path


def draw(picture: Timeline, out: Path) -> Path:
    """Render the timeline in the format `out`'s suffix names (`image_file`)."""
    plt = pyplot()
    figure = drawn(picture)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


def drawn(picture: Timeline) -> Figure:
    """The timeline's figure: a lane per symbol, a bracket per match, times as the stream holds them."""
    plt = pyplot()
    from matplotlib.patches import Patch  # noqa: PLC0415

    left, right = _edges(picture)
    lanes = len(picture.lanes)
    # Constrained layout keeps room below the axes for the time label and, under it, the legend; the brackets take
    # four staggered rows above the lanes however many there are.
    figure, axes = plt.subplots(figsize=(12, 1.9 + 0.7 * lanes), layout="constrained")
    for bar in picture.bars:
        start, width = bar_extent(bar, left, right)
        if bar.end is None:
            axes.barh(bar.lane, width, left=start, height=0.4, color="white", edgecolor=SITUATION_COLOUR,
                      hatch=OPEN_HATCH, linewidth=1)
            axes.plot([right], [bar.lane], marker=">", color=SITUATION_COLOUR, markersize=8)
        else:
            axes.barh(bar.lane, width, left=start, height=0.4, color=SITUATION_COLOUR, linewidth=0)
    for index, match in enumerate(picture.brackets):
        colour = STATUS_COLOURS.get(match.status, "tab:gray")
        top = lanes - 0.55 + 0.08 * (index % 4)  # stagger brackets that share a time span
        end = match.end if match.end is not None else right  # a situation of it is still open
        axes.plot([match.start, match.start, end, end], [top, -0.45, -0.45, top], color=colour, linewidth=1.2)
        axes.plot([match.detected_at], [top + 0.1], marker="v", color=colour, markersize=7)
    from matplotlib.lines import Line2D  # noqa: PLC0415

    legend = [Patch(color=SITUATION_COLOUR, label="situation"),
              Patch(facecolor="white", edgecolor=SITUATION_COLOUR, hatch=OPEN_HATCH, label="open situation"),
              *(Line2D([], [], color=c, marker="v", label=f"{s} match") for s, c in STATUS_COLOURS.items())]
    figure.legend(handles=legend, loc="outside lower center", ncol=len(legend), fontsize=8, frameon=False)
    axes.set_yticks(range(lanes), picture.lanes)
    axes.set_ylim(-0.8, lanes + 0.1)
    axes.set_xlabel(f"time{f' ({picture.unit})' if picture.unit else ''}, triangles: detected_at")
    if not isinstance(left, datetime):  # times as the stream holds them, not as offsets from a power of ten
        axes.ticklabel_format(axis="x", style="plain", useOffset=False)
    margin = (right - left) * MARGIN or (timedelta(seconds=1) if isinstance(left, datetime) else 1)
    axes.set_xlim(left - margin, right + margin)  # a bracket at the first or last time keeps its edge in sight
    axes.set_title(picture.title)
    axes.grid(axis="x", alpha=0.3)
    return figure
