"""The engine's held runs: a run no step of which comes for the idle limit is freed, its staged rows with it, and
its next step finds it afresh (and resumes it); a step that runs long is never idle."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pielake.engine.held import HeldRuns, RunKey
from tests.helpers import held_rdds


def test_a_run_idle_past_the_limit_is_freed_and_found_afresh(spark: SparkSession, tmp_path: Path) -> None:
    # arrange: two held runs on a clock the test moves; one with a staged table
    now = [0.0]
    runs = HeldRuns(spark, idle_seconds=60, clock=lambda: now[0])
    key, other = RunKey.of(tmp_path, "q", "r1"), RunKey.of(tmp_path, "q2", "r1")
    before = held_rdds(spark)
    with runs.turn(key) as held:
        held.staging.overwrite(spark.range(10).toDF("n"), "situations_q")
        held.done.add("situations")
        now[0] = 1000.0
        assert runs.held() == [key]  # a step running longer than the limit is not idle
    with runs.turn(other):
        pass
    assert held_rdds(spark) == before + 1

    # act and assert: idle for the limit, kept; past it, freed with its rows
    now[0] = 1060.0
    assert sorted(runs.held(), key=str) == sorted([key, other], key=str)
    now[0] = 1061.0
    assert runs.held() == []
    assert held_rdds(spark) == before
    with runs.turn(key) as again:
        assert again.done == set() and not again.staging.exists("situations_q")
