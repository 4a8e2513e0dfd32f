"""`pielake bench --docs` writes its figures into a page between the page's bench markers, and leaves the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from pielake.bench.shapes import BENCH_END, BENCH_START, Measurement, write_docs
from pielake.errors import PielakeError


def measured(repeat: int, seconds: float) -> Measurement:
    return Measurement("chain", 4, 1000, repeat, 1.0, 0.4, 0.1, 0.1, 0.2, seconds, 0.1, 0.2, 1000 / seconds,
                       round(seconds / 0.1, 2), 1.5, 2.0, 7)


def test_the_figures_replace_the_old_ones_between_the_markers(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(f"# Performance\n\nwhat they mean\n\n{BENCH_START}\nold figures\n{BENCH_END}\n\nthe rest\n")
    write_docs([measured(1, 3.0), measured(2, 1.0), measured(3, 2.0)], page, "pielake bench --events 1000")
    text = page.read_text()
    assert text.startswith("# Performance\n\nwhat they mean\n\n") and text.endswith(f"{BENCH_END}\n\nthe rest\n")
    assert "old figures" not in text and "`pielake bench --events 1000`" in text
    assert "| chain | 4 | 1,000 | 2.00 |" in text  # the median repeat
    assert "![end to end against events and symbols, and where the time goes](bench.png)" in text
    assert (tmp_path / "bench.png").stat().st_size > 0


def test_a_page_without_markers_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# no markers\n")
    with pytest.raises(PielakeError, match="no <!-- bench:start -->"):
        write_docs([measured(1, 1.0)], page, "pielake bench")
    assert page.read_text() == "# no markers\n"
