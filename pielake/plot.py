"""`pielake plot`: one key's situations and matches as a timeline, like PieStream's Figure 1.

One lane per symbol with its situations as bars: a closed situation solid, however short (a bar is never narrower
than `MIN_WIDTH` of the picture, or a second-long situation would anti-alias to a faint line), an open one hatched
and running to the right edge, where an arrow says it still holds. Every match is a
bracket across the lanes from its first start to its last end, coloured by status, with a triangle at its
`detected_at`. Reading the picture is quicker than reading the twenty timestamps of the same rows.

The rows come from the published tables: `pielake.lake.plotted` turns them into a `Timeline` of plain lanes, bars
and brackets (what the tests check), in this process or on an engine, which sends it as JSON (`Timeline.to_json`).
`draw` only renders a timeline with matplotlib. This module imports no Spark: a plot drawn from an engine's
timeline is a thin client of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pielake import vocabulary as V
from pielake.errors import PielakeError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STATUS_COLOURS = {V.COMPLETE: "tab:green", V.PROVISIONAL: "tab:orange", V.RETRACTED: "tab:gray"}
SITUATION_COLOUR = "tab:blue"
MIN_WIDTH = 0.004  # of the time span shown: about six pixels of the 12-inch figure
MARGIN = 0.02  # of the time span drawn, left of its first time and right of its last
OPEN_HATCH = "///"
UTC = "UTC"  # a timeline's unit where its times are TIMESTAMPs, drawn as UTC's wall clock reads them


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
    unit: str = ""  # of a numeric time (s, ms, us, ...), or `UTC` for TIMESTAMPs, which read as dates in UTC
    shown: tuple[Any | None, Any | None] = (None, None)  # the times asked for (--from, --to): the picture's edges
    key: str = ""  # the key drawn, as its columns' values (`machine_id = press-3`)

    def to_json(self) -> dict[str, Any]:
        """The timeline as JSON holds it, for a client of the engine (`from_json`): numeric times as the numbers
        they are, a TIMESTAMP as the ISO-8601 text of its UTC wall clock."""
        return {"title": self.title, "lanes": list(self.lanes), "unit": self.unit, "key": self.key,
                "bars": [[b.lane, _sent(b.start), _sent(b.end)] for b in self.bars],
                "brackets": [[_sent(m.start), _sent(m.end), _sent(m.detected_at), m.status] for m in self.brackets],
                "shown": [_sent(t) for t in self.shown]}

    @classmethod
    def from_json(cls, sent: dict[str, Any]) -> Timeline:
        """The timeline `to_json` sent, its times of the types they were."""
        def time(value: Any) -> Any:
            return datetime.fromisoformat(value) if value is not None and sent["unit"] == UTC else value

        return cls(sent["title"], tuple(sent["lanes"]),
                   tuple(Bar(lane, time(start), time(end)) for lane, start, end in sent["bars"]),
                   tuple(Bracket(time(start), time(end), time(detected), status)
                         for start, end, detected, status in sent["brackets"]),
                   sent["unit"], (time(sent["shown"][0]), time(sent["shown"][1])), sent["key"])


def _sent(time: Any) -> Any:
    """A time as JSON holds it (`Timeline.to_json`)."""
    return time.isoformat() if isinstance(time, datetime) else time


def _edges(picture: Timeline) -> tuple[Any, Any]:
    """The first and last time drawn: those asked for, else the first and last of the picture's bars and
    brackets. A bar or bracket reaching past an edge asked for runs off the picture, as its other situations,
    outside the range, are not drawn."""
    times = [t for b in picture.bars for t in (b.start, b.end) if t is not None]
    times += [t for m in picture.brackets for t in (m.start, m.end, m.detected_at) if t is not None]
    since, until = picture.shown
    return (min(times, default=0) if since is None else since,
            max(times, default=1) if until is None else until)


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
    another format only once the picture is drawn, and a name without a suffix it writes as `<name>.png`. It
    imports pyplot, which `draw` then finds loaded, so that a plot that waits for its timeline imports meanwhile."""
    pyplot()
    from matplotlib.backend_bases import FigureCanvasBase  # noqa: PLC0415 (pyplot)

    path = Path(out)
    written = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in written:
        said = f"its suffix {path.suffix} is no image format" if path.suffix else "it has no suffix to say its format"
        raise PielakeError(f"--out {out}: {said}; name a .png, .svg or .pdf file (matplotlib also writes "
                           f"{', '.join(f'.{kind}' for kind in sorted(set(written) - {'png', 'svg', 'pdf'}))})")
    return path


# An SVG and a PDF carry the time they were written, and an SVG its clip-path ids drawn at random: without them,
# one timeline is one file, byte for byte, as a PNG is, which a picture kept beside code or compared needs.
TIMELESS = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}
SVG_IDS = {"svg.hashsalt": "pielake"}


def draw(picture: Timeline, out: Path) -> Path:
    """Render the timeline in the format `out`'s suffix names (`image_file`), the same bytes for the same timeline
    (`TIMELESS`)."""
    plt = pyplot()
    figure = drawn(picture)
    out.parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(SVG_IDS):
        figure.savefig(out, dpi=120, metadata=TIMELESS.get(out.suffix.lower().lstrip(".")))
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
