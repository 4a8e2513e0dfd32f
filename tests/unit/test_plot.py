"""The timeline picture: a closed situation reads as solid however short it is, an open one runs to the right edge
and looks different by more than its shade; times read as the stream holds them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from pielake.plot import (
    MIN_WIDTH,
    SITUATION_COLOUR,
    UTC,
    Bar,
    Bracket,
    Timeline,
    bar_extent,
    draw,
    drawn,
    pyplot,
)


def test_a_short_bar_is_widened_to_the_minimum_and_an_open_one_runs_to_the_right_edge() -> None:
    assert bar_extent(Bar(0, 10, 12), 0, 1000) == (10, 1000 * MIN_WIDTH)
    assert bar_extent(Bar(0, 10, 500), 0, 1000) == (10, 490)
    assert bar_extent(Bar(0, 900, None), 0, 1000) == (900, 100)
    assert bar_extent(Bar(0, 5, 5), 5, 5) == (5, 1)  # one instant shown: a unit wide
    noon = datetime(2026, 1, 1, 12)
    start, width = bar_extent(Bar(0, noon, noon + timedelta(seconds=1)), noon, noon + timedelta(hours=1))
    assert start == noon and width == timedelta(hours=1) * MIN_WIDTH


def _solid_pixels(picture: Timeline, out: Path) -> int:
    """Pixels of the PNG in exactly the closed situations' colour."""
    image = np.asarray(imread(draw(picture, out)))[..., :3]
    return int(np.all(np.abs(image - np.array(to_rgb(SITUATION_COLOUR))) < 0.01, axis=-1).sum())


def test_a_one_second_situation_among_a_thousand_seconds_is_drawn_solid(tmp_path: Path) -> None:
    far = Bracket(0, 1000, 1000, "complete")
    with_bar = _solid_pixels(Timeline("t", ("A",), (Bar(0, 500, 501),), (far,)), tmp_path / "bar.png")
    without = _solid_pixels(Timeline("t", ("A",), (), (far,)), tmp_path / "none.png")  # the legend's own swatch
    # solid: a block of pixels in the colour itself, not an anti-aliased sliver of a paler shade
    assert with_bar - without >= 3 * 20


def test_timestamps_draw_too(tmp_path: Path) -> None:
    noon = datetime(2026, 1, 1, 12)
    picture = Timeline("t", ("A", "B"), (Bar(0, noon, noon + timedelta(seconds=2)), Bar(1, noon, None)),
                       (Bracket(noon, None, noon + timedelta(minutes=5), "provisional"),))
    assert draw(picture, tmp_path / "t.png").stat().st_size > 0


def test_one_timeline_is_one_file_byte_for_byte_in_every_format_offered(tmp_path: Path) -> None:
    """No date written and no id drawn at random: a picture kept beside code changes only where the timeline
    does."""
    picture = Timeline("t", ("A", "B"), (Bar(0, 0, 40), Bar(1, 10, None)), (Bracket(0, None, 50, "provisional"),))
    for suffix in ("png", "svg", "pdf"):
        first, second = (draw(picture, tmp_path / f"{name}.{suffix}").read_bytes() for name in ("a", "b"))
        assert first == second, suffix
    assert b"CreationDate" not in (tmp_path / "a.pdf").read_bytes()
    assert b"<dc:date>" not in (tmp_path / "a.svg").read_bytes()


def test_numeric_times_read_as_the_stream_holds_them_in_its_unit_with_a_margin_on_both_sides() -> None:
    """Not as offsets from a power of ten (1.5, 2.0 and `1e6` in a corner), and a match from the first to the last
    time drawn keeps both of its edges inside the picture."""
    first, last = 1_500_000, 2_000_000
    figure = drawn(Timeline("t", ("A",), (Bar(0, first, last),), (Bracket(first, last, 1_800_000, "complete"),), "us"))
    figure.canvas.draw()
    [axes] = figure.axes
    assert axes.get_xlabel() == "time (us), triangles: detected_at"
    assert axes.xaxis.get_offset_text().get_text() == ""
    assert "1500000" in [label.get_text() for label in axes.get_xticklabels()]
    low, high = axes.get_xlim()
    assert low < first and high > last
    pyplot().close(figure)


def test_a_range_asked_for_is_the_picture_s_edges_and_a_match_reaching_past_them_runs_off() -> None:
    """Bars and brackets are those meeting the range (--from, --to); a bracket reaching past it would otherwise
    stretch the picture to where its other situations, outside the range, are not drawn."""
    picture = Timeline("t", ("A",), (Bar(0, 120, 150),), (Bracket(110, 900, 900, "complete"),), "s", (100, 200))
    figure = drawn(picture)
    [axes] = figure.axes
    low, high = axes.get_xlim()
    assert 95 <= low < 100 and 200 < high <= 205
    pyplot().close(figure)


def test_every_status_a_match_can_have_is_in_the_legend_and_many_matches_keep_the_picture_s_height() -> None:
    """A retracted match is drawn too (grey), so the legend names it; brackets take four staggered rows, so a
    hundred matches draw in a picture as tall as one does."""
    sizes, legends = [], []
    for count in (1, 100):
        figure = drawn(Timeline("t", ("A", "B"), (Bar(0, 0, 10),),
                                tuple(Bracket(i, i + 5, i + 5, "retracted") for i in range(count))))
        sizes.append(tuple(figure.get_size_inches()))
        legends.append([text.get_text() for legend in figure.legends for text in legend.get_texts()])
        pyplot().close(figure)
    assert sizes[0] == sizes[1]
    assert legends[0] == ["situation", "open situation", "complete match", "provisional match", "retracted match"]


def test_a_timeline_sent_as_json_arrives_as_it_was_with_its_times_of_their_types() -> None:
    """The engine sends a plot's timeline as JSON (`pielake plot --remote`): a TIMESTAMP comes back as the same
    wall-clock time, a numeric time as the same whole number, an open end and an edge not asked for as none."""
    noon = datetime(2026, 1, 1, 12)
    timed = Timeline("q: car = 3  (1 match)", ("A", "B"), (Bar(0, noon, noon + timedelta(microseconds=1)),
                                                         Bar(1, noon, None)),
                     (Bracket(noon, None, noon + timedelta(minutes=5), "provisional"),), UTC, (noon, None), "car = 3")
    counted_in_ms = Timeline("q: all events  (1 match)", ("A",), (Bar(0, 1_500_000_000_123, 1_500_000_000_124),),
                             (Bracket(1_500_000_000_123, 1_500_000_000_124, 1_500_000_000_200, "complete"),), "ms",
                             (None, 1_500_000_000_999), "all events")
    for picture in (timed, counted_in_ms):
        sent = json.loads(json.dumps(picture.to_json()))
        assert Timeline.from_json(sent) == picture
    assert json.dumps(timed.to_json()["bars"][0]) == '[0, "2026-01-01T12:00:00", "2026-01-01T12:00:00.000001"]'
