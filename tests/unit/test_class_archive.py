"""The class archive's options (`pielake.engine.class_archive`): a driver JVM maps the archive that fits this
Java and these jars when setup has built it, and starts without one otherwise; the archive a JVM is started with is
checked in tests/spark/test_session_jvm.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pielake.engine import class_archive
from pielake.engine.class_archive import QUIET, archive_options, archive_path
from pielake.engine.settings import JAVA_OPTIONS, java_options


def here() -> Path:
    """The archive that fits this machine's Java (the tests run where Spark does)."""
    path = archive_path()
    assert path is not None
    return path


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path)
    monkeypatch.delenv("PIELAKE_CLASS_ARCHIVE", raising=False)
    return tmp_path


def test_a_driver_maps_the_archive_once_it_is_built(archive_dir: Path) -> None:
    assert archive_options() == ""
    assert java_options()["spark.driver.defaultJavaOptions"] == JAVA_OPTIONS
    here().write_bytes(b"")
    assert here().parent == archive_dir
    assert archive_options() == f"-XX:SharedArchiveFile={here()} {QUIET}"
    assert java_options() == {"spark.driver.defaultJavaOptions": f"{JAVA_OPTIONS} {archive_options()}",
                              "spark.executor.defaultJavaOptions": JAVA_OPTIONS}


def test_the_environment_turns_the_archive_off(archive_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here().write_bytes(b"")
    monkeypatch.setenv("PIELAKE_CLASS_ARCHIVE", "0")
    assert archive_options() == ""


def test_another_java_gets_an_archive_of_its_own(archive_dir: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An archive fits one Java runtime: another `JAVA_HOME` names another file, which setup then builds."""
    ours = here()
    other = tmp_path / "jdk" / "bin" / "java"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert here() != ours and here().parent == ours.parent


def test_a_machine_without_java_starts_no_jvm_with_it(archive_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's scheduler builds spark-submit's arguments where no Java may be installed: no archive, no error."""
    here().write_bytes(b"")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert archive_path() is None
    assert archive_options() == ""
    assert java_options()["spark.driver.defaultJavaOptions"] == JAVA_OPTIONS
