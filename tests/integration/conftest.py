"""One SparkSession for the whole test session: local[2], UTC, few shuffle partitions, UI off, Delta on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pielake.spark.session import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="pielake-tests", shuffle_partitions=2, driver_memory="2g")
    yield session
    session.stop()
