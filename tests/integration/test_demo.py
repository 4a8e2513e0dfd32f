"""The README's quick start: `pielake demo` runs the whole pipeline and prints matches through SQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake.cli import main

pytestmark = pytest.mark.heavy(seconds=80)  # about this long in CI: scheduled first


def test_the_demo_writes_matches_and_shows_them(tmp_path: Path, spark: SparkSession) -> None:
    result = CliRunner().invoke(main, ["demo", "--lake", str(tmp_path / "lake")])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "21600 rows in = 21600 events + 0 quarantined + 0 exact duplicates dropped" in result.output
    assert "matches by status: complete:" in result.output
    header = next(line for line in result.output.splitlines() if line.startswith("car_id"))
    assert [column.strip() for column in header.split("|")][:4] == ["car_id", "a_ts", "b_ts", "c_ts"]
    assert "(10 rows)" in result.output
    assert (tmp_path / "lake" / "results_aggressive_driving" / "_delta_log").is_dir()  # the matches' table
    picture = tmp_path / "lake" / "_plots" / "aggressive_driving.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"to {picture}" in result.output
