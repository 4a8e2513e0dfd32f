"""The engine's warm-up (`pielake.engine.warm_up`) runs its batch and micro-batches through the whole pipeline on
a scratch lake and leaves nothing behind, not even what an engine killed while warming up had left."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pielake.engine.warm_up import warm_up


def test_a_warm_up_runs_every_run_and_leaves_no_scratch_lake(spark: SparkSession, tmp_path: Path) -> None:
    left = tmp_path / "_engine" / "warm-up" / "lake" / "results_warm_up"
    left.mkdir(parents=True)  # a killed warm-up's half-written table: the next one starts from nothing
    (left / "part-0.parquet").write_bytes(b"not parquet")
    said: list[str] = []
    seconds = warm_up(spark, tmp_path, 1, said.append)
    assert [line.split(" done")[0] for line in said] == ["warm-up: batch run 1 of 2", "warm-up: incremental run 2 of 2"]
    assert seconds > 0
    assert list((tmp_path / "_engine").iterdir()) == []
