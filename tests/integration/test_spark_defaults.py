"""A run in a shell whose `SPARK_CONF_DIR` holds a team's `spark-defaults.conf`, which sets every SQL setting a
run's results depend on otherwise (`tests/fixtures/team-spark-conf`): Spark reads it beneath the run's session, and
the run still gives the tables one clean run gives, as pielake sets those settings itself
(`pielake.engine.settings.SQL_SEMANTICS`). With `partitionOverwriteMode dynamic` alone, every run failed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from tests.conftest import FIXTURES
from tests.integration.cli_runs import ONE_CORE, assert_one_clean_run, run_command

pytestmark = pytest.mark.heavy(seconds=40)  # about this long in CI: scheduled first


def test_a_run_under_a_team_s_settings_file_gives_the_clean_tables_which_take_updates(
        tmp_path: Path, spark: SparkSession) -> None:
    root, command = run_command(tmp_path, "team")
    done = subprocess.run(command, env={**ONE_CORE, "SPARK_CONF_DIR": str(FIXTURES / "team-spark-conf")},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_one_clean_run(spark, root)
    lake = Lake(spark, root)
    for table in ("events_line", "results_mid"):
        [detail] = DeltaTable.forPath(spark, lake.path(table)).detail().collect()
        assert detail["properties"].get("delta.appendOnly", "false") == "false", (table, detail["properties"])
