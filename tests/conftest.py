"""Test configuration shared by every folder: markers follow the folder a test lives in, long files run first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.engine.session import build_session

FIXTURES = Path(__file__).parent / "fixtures"
MARKERS = {"unit": pytest.mark.unit, "spark": pytest.mark.spark, "dags": pytest.mark.dags,
           "integration": pytest.mark.integration}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers follow the folder; the longest test files come first.

    `make test` hands whole files to two workers in collection order (pytest-xdist `--dist loadfile
    --no-loadscope-reorder`). A long file handed out last runs alone while the other worker idles, and xdist's
    own reordering (most tests first) puts our longest files, which hold one test each, exactly there. So files
    go longest first, by their `heavy(seconds=…)` mark; the rest keep their order (the sort is stable).
    """
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])
    items.sort(key=lambda item: -expected_seconds(item))


def expected_seconds(item: pytest.Item) -> float:
    heavy = item.get_closest_marker("heavy")
    return float(heavy.kwargs["seconds"]) if heavy else 0.0


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One SparkSession for the whole run (only started if a test asks): local[2], UTC, UI off, Delta on."""
    session = build_session("local[2]", app_name="pielake-tests", shuffle_partitions=2, driver_memory="4g")
    yield session
    session.stop()
