"""How many files an append of events is written as: one for a micro-batch (under 100,000 events a core), else a
whole number per core; and how many keys such a file holds."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from pielake.pipeline.ingest import MIN_ROWS_PER_CORE, ROWS_PER_EVENTS_FILE, events_files
from pielake.pipeline.stages import distinct_rows


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


@pytest.mark.parametrize("seed", range(5))
def test_the_keys_an_events_file_holds_are_counted_as_a_set_of_them_would_be(seed: int) -> None:
    """`distinct_rows`, which tells a batch run of many short keys (`pielake.pipeline.stages._short_keys`): every
    column's codes folded into one, however many distinct values each has."""
    rng = random.Random(seed)
    rows = [(rng.choice("abcdefgh") * rng.randint(1, 3), rng.randint(-5, 10**6 if seed % 2 else 5), rng.random() < 0.5)
            for _ in range(rng.randint(0, 3000))]
    table = pa.table({"fleet": pa.array([r[0] for r in rows], pa.string()), "unit": pa.array([r[1] for r in rows]),
                      "spare": pa.array([r[2] for r in rows], pa.bool_())})
    assert distinct_rows(table) == len(set(rows))
    assert distinct_rows(table.select(["fleet"])) == len({r[0] for r in rows})
