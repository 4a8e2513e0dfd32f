"""Two runs of one query started at once: one runs, the other stops at once with exit code 3 and one
clear line, and the tables are exactly what one run gives."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.integration.cli_runs import ONE_CORE, assert_one_clean_run, run_command

pytestmark = pytest.mark.heavy(seconds=110)  # about this long in CI: scheduled first


def test_two_runs_at_once_one_stops_cleanly_and_tables_stay_whole(tmp_path: Path, spark: SparkSession) -> None:
    commands = [run_command(tmp_path, run_id) for run_id in ("r1", "r2")]
    runs = [subprocess.Popen(command, env=ONE_CORE, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _, command in commands]
    outputs = [run.communicate(timeout=900) for run in runs]
    codes = [run.returncode for run in runs]
    assert sorted(codes) == [0, 3], outputs
    refused = outputs[codes.index(3)][1].strip().splitlines()[-1]
    assert refused.startswith("error: query mid is being run by run r") and "try again" in refused
    assert_one_clean_run(spark, commands[0][0])
