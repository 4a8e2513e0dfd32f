"""Test configuration shared by every folder: markers follow the folder a test lives in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.spark.session import build_session

FIXTURES = Path(__file__).parent / "fixtures"
MARKERS = {"unit": pytest.mark.unit, "spark": pytest.mark.spark, "dags": pytest.mark.dags,
           "integration": pytest.mark.integration}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One SparkSession for the whole run (only started if a test asks): local[2], UTC, UI off, Delta on."""
    session = build_session("local[2]", app_name="pielake-tests", shuffle_partitions=2, driver_memory="4g")
    yield session
    session.stop()
