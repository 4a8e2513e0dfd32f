"""Benchmarks write their current figures into a documentation page, between markers the page holds
(`<!-- NAME:start -->` ... `<!-- NAME:end -->`), so the page's own text, which says what the figures mean,
stays as it is written and the figures are always the last measured."""

from __future__ import annotations

from pathlib import Path

from pielake.errors import PielakeError


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def write_block(page: Path, name: str, block: str) -> Path:
    """Replace what stands between `page`'s `name` markers with `block`."""
    start, end = markers(name)
    text = page.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise PielakeError(f"{page} has no {start} ... {end} block to write the figures into")
    head, rest = text.split(start, 1)
    page.write_text(f"{head}{start}\n{block.strip()}\n{end}{rest.split(end, 1)[1]}", encoding="utf-8")
    return page
