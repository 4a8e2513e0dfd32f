"""Test configuration shared by every folder: markers follow the folder a test lives in."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
MARKERS = {"unit": pytest.mark.unit, "spark": pytest.mark.spark, "dags": pytest.mark.dags,
           "integration": pytest.mark.integration}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])
