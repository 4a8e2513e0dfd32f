"""The driver's heap: `PIELAKE_DRIVER_MEMORY`, else 2.5 GB or what a smaller machine or container leaves, for
sessions built here and for spark-submit, which starts the driver's JVM before the job runs (the Airflow DAG test
checks the JVM of a real step); and the JVM options and the table defaults that go with it."""

from __future__ import annotations

import re

import pytest

from pielake.engine.memory import BESIDE_HEAP_MB
from pielake.engine.session import ui_address
from pielake.engine.settings import (
    CODEGEN_CACHE_ENTRIES,
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_HEAP_MB,
    JAVA_OPTIONS,
    LOG_RETENTION_DEFAULT,
    SparkUi,
    default_heap,
    driver_heap,
    java_options,
    master_settings,
    submit_arguments,
    ui_settings,
)
from pielake.errors import PielakeError


def heap_argument(arguments: list[str]) -> str:
    return arguments[arguments.index("--driver-memory") + 1]


def test_spark_submit_gets_the_default_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIELAKE_DRIVER_MEMORY", raising=False)
    monkeypatch.setattr("pielake.engine.settings.allowed_mb", lambda: 24_105)
    assert driver_heap() == DEFAULT_DRIVER_MEMORY == "2500m"
    assert heap_argument(submit_arguments()) == "2500m"


@pytest.mark.parametrize(("allowed_mb", "heap"), [
    (None, "2500m"), (24_105, "2500m"), (DEFAULT_HEAP_MB + BESIDE_HEAP_MB, "2500m"),
    (DEFAULT_HEAP_MB + BESIDE_HEAP_MB - 1, "2499m"), (2_048, "1280m"), (1_536, "768m"), (1_280, "512m"),
    (1_000, "512m")])
def test_the_default_heap_leaves_a_small_container_what_runs_beside_the_heap(
        allowed_mb: int | None, heap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A heap the container cannot hold got the JVM killed in the middle of the run, however small its input."""
    monkeypatch.delenv("PIELAKE_DRIVER_MEMORY", raising=False)
    monkeypatch.setattr("pielake.engine.settings.allowed_mb", lambda: allowed_mb)
    assert default_heap(allowed_mb) == driver_heap() == heap_argument(submit_arguments()) == heap


def test_a_heap_set_in_the_environment_is_kept_in_a_small_container(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIELAKE_DRIVER_MEMORY", "3g")
    monkeypatch.setattr("pielake.engine.settings.allowed_mb", lambda: 1_280)
    assert driver_heap() == "3g"


def test_the_environment_sets_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIELAKE_DRIVER_MEMORY", "7g")
    assert heap_argument(submit_arguments("local[2]")) == "7g"


@pytest.mark.parametrize("size", ["2.5g", "2500 MB", "lots", "-1g", "0", "400m", "500000k"])
def test_a_heap_the_driver_s_jvm_would_not_start_with_is_refused_before_it_starts(
        size: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-Xmx` takes whole numbers of bytes, k, m, g or t, and Spark wants at least 450 MB of what the JVM holds:
    anything else stopped the run, or the Airflow DAG file, with a Java traceback."""
    monkeypatch.setenv("PIELAKE_DRIVER_MEMORY", size)
    with pytest.raises(PielakeError, match=rf"PIELAKE_DRIVER_MEMORY='{re.escape(size)}' is not a heap the driver's "
                                           r"JVM starts Spark with: write a whole number of m or g, at least 512m"):
        submit_arguments()


@pytest.mark.parametrize("size", ["512m", "524288k", "8G", "1t", " 3g "])
def test_heaps_of_the_jvm_s_forms_are_taken(size: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIELAKE_DRIVER_MEMORY", size)
    assert driver_heap() == size.strip()


def test_spark_submit_gets_pielake_s_java_options_as_defaults_that_a_user_s_own_add_to() -> None:
    arguments = submit_arguments()
    assert f"spark.driver.defaultJavaOptions={java_options()['spark.driver.defaultJavaOptions']}" in arguments
    assert java_options()["spark.driver.defaultJavaOptions"].startswith(JAVA_OPTIONS)  # and the class archive
    assert f"spark.executor.defaultJavaOptions={JAVA_OPTIONS}" in arguments
    assert not any("extraJavaOptions" in a for a in arguments)


def test_spark_submit_keeps_the_code_of_a_few_queries_compiled() -> None:
    """A static setting: only the start of the driver's JVM can set it (tests/spark/test_session_jvm.py says why)."""
    assert f"spark.sql.codegen.cache.maxEntries={CODEGEN_CACHE_ENTRIES}" in submit_arguments()


def test_tables_a_spark_submit_step_creates_keep_the_log_of_pielake_keep_days(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIELAKE_KEEP_DAYS", "2")
    assert f"{LOG_RETENTION_DEFAULT}=interval 48 hours" in submit_arguments()


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local-cluster[2,1,1024]"])
def test_a_local_session_does_not_compress_its_shuffles_and_binds_its_driver_to_loopback(master: str) -> None:
    assert master_settings(master) == {"spark.shuffle.compress": "false", "spark.shuffle.spill.compress": "false",
                                       "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}


@pytest.mark.parametrize("master", ["spark://host:7077", "yarn", "k8s://https://host:6443"])
def test_a_cluster_session_keeps_spark_s_shuffle_compression_and_binding(master: str) -> None:
    assert master_settings(master) == {}


def test_spark_s_ui_is_off_unless_asked_for_and_binds_where_the_engine_listens_on_a_local_master() -> None:
    """Spark binds its UI to `SPARK_LOCAL_IP`, else to every interface; on a cluster master that variable is also
    the address executors connect back to, which a loopback address would break."""
    ui = SparkUi("127.0.0.1", 4040)
    assert ui_settings(None) == {"spark.ui.enabled": "false"}
    assert ui_settings(ui) == {"spark.ui.enabled": "true", "spark.ui.port": "4040", "spark.ui.killEnabled": "false"}
    assert ui_address(ui, "local[2]") == {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert ui_address(ui, "spark://host:7077") == ui_address(None, "local[2]") == {}


def test_spark_submit_gets_the_settings_of_its_master() -> None:
    assert "spark.shuffle.compress=false" in submit_arguments("local[2]")
    assert not any("shuffle" in a for a in submit_arguments("spark://host:7077"))
