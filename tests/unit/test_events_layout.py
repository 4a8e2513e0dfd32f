"""How many files an append of events is written as: one for a micro-batch (under 100,000 events a core), else a
whole number per core."""

from __future__ import annotations

import pytest

from pielake.pipeline.ingest import MIN_ROWS_PER_CORE, ROWS_PER_EVENTS_FILE, events_files


@pytest.mark.parametrize(("rows", "cores", "files"), [
    (0, 2, 1), (150, 2, 1), (2 * MIN_ROWS_PER_CORE - 1, 2, 1), (2 * MIN_ROWS_PER_CORE, 2, 2),
    (MIN_ROWS_PER_CORE, 1, 1), (ROWS_PER_EVENTS_FILE, 2, 2), (ROWS_PER_EVENTS_FILE + 1, 2, 2),
    (10 * ROWS_PER_EVENTS_FILE, 2, 10), (10 * ROWS_PER_EVENTS_FILE + 1, 2, 12),
    (10 * ROWS_PER_EVENTS_FILE, 4, 12), (3 * ROWS_PER_EVENTS_FILE, 1, 3),
])
def test_events_files_are_one_or_a_multiple_of_the_cores_of_at_most_a_million_rows(rows: int, cores: int,
                                                                                    files: int) -> None:
    assert events_files(rows, cores) == files
    assert files == 1 or (files % cores == 0 and rows / files <= ROWS_PER_EVENTS_FILE)
