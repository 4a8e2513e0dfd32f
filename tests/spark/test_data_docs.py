"""The lake's Great Expectations project keeps a bounded number of each gate's results: the Data Docs index that
every update rebuilds lists them all, so an unbounded store makes a query run every minute slower each day; and a
run updates the Data Docs once, with all of its gates' results. Both hold whichever engine each gate checked on,
Spark or pandas on the driver. And a process that serves runs for days keeps nothing of GX's YAML loads."""

from __future__ import annotations

import gc
from pathlib import Path

from pyspark.sql import SparkSession
from ruamel.yaml import YAML

from pielake.pipeline import gx_project

EXPECTATIONS = [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}}]


def test_a_gate_keeps_the_newest_results_of_its_suite_and_their_pages_only(spark: SparkSession,
                                                                            tmp_path: Path) -> None:
    frame = spark.createDataFrame([(1,), (2,)], "id BIGINT")
    with gx_project.project(tmp_path) as context:
        pages = []
        for run, engine in (("r1", "spark"), ("r2", "pandas"), ("r3", "spark")):  # a gate may switch engines
            gx_project.keep_newest(context, tmp_path, "q.events", 1)  # what a gate does before its checkpoint
            checkpoint = gx_project.checkpoint(context, "q.events", EXPECTATIONS, "BOOLEAN_ONLY", engine=engine)
            data = frame if engine == "spark" else frame.toPandas()
            outcome = checkpoint.run(batch_parameters={"dataframe": data}, run_id=gx_project.run_identifier(run))
            [key] = outcome.run_results
            gx_project.update_docs(context, run)
            pages.append(gx_project.result_page(tmp_path, key))
        held = [k.run_id.run_name for k in context.validation_results_store.list_keys()]
    assert sorted(held) == ["r2", "r3"]
    assert [page.exists() for page in pages] == [False, True, True]
    index = gx_project.docs_index(tmp_path).read_text(encoding="utf-8")
    assert "r3" in index and "r2" in index and "'r1'" not in index


def test_a_run_s_results_get_their_pages_and_index_rows_in_one_update(spark: SparkSession, tmp_path: Path) -> None:
    frame = spark.createDataFrame([(1,), (2,)], "id BIGINT")
    with gx_project.project(tmp_path) as context:
        pages = []
        for gate, data, engine in (("events", frame, "spark"), ("situations", frame.toPandas(), "pandas")):
            checkpoint = gx_project.checkpoint(context, f"q.{gate}", EXPECTATIONS, "BOOLEAN_ONLY", engine=engine)
            outcome = checkpoint.run(batch_parameters={"dataframe": data}, run_id=gx_project.run_identifier("r1"))
            [key] = outcome.run_results
            pages.append(gx_project.result_page(tmp_path, key))
        assert not any(page.exists() for page in pages)  # a checkpoint alone renders nothing
        gx_project.update_docs(context, "r1")
    assert all(page.exists() for page in pages)
    index = gx_project.docs_index(tmp_path).read_text(encoding="utf-8")
    assert "q.events" in index and "q.situations" in index


def documents_on_record() -> int:
    """Documents every ruamel.yaml loader in this process keeps a record of, wherever it is held. An object's
    type is read with `type`: `isinstance` asks the object its `__class__`, which a lazy proxy another library
    holds (Airflow's, of an optional module) answers by importing what it stands for."""
    gc.collect()
    return sum(len(getattr(o, "doc_infos", ())) for o in gc.get_objects() if issubclass(type(o), YAML))


def test_no_loader_keeps_a_record_of_the_yaml_gx_loaded_once_a_project_is_done(spark: SparkSession,
                                                                               tmp_path: Path) -> None:
    frame = spark.createDataFrame([(1,), (2,)], "id BIGINT").toPandas()
    with gx_project.project(tmp_path) as context:
        checkpoint = gx_project.checkpoint(context, "q.events", EXPECTATIONS, "BOOLEAN_ONLY", engine="pandas")
        checkpoint.run(batch_parameters={"dataframe": frame}, run_id=gx_project.run_identifier("r1"))
        gx_project.update_docs(context, "r1")
        assert documents_on_record() > 0  # what a gate's use of GX leaves behind
    assert documents_on_record() == 0
