"""A JVM pielake starts names files as Python does (`pielake.engine.jvm`): an option that names a file reaches it
as one argument wherever the file is (the option strings pielake gives a driver are split into arguments by
Spark's own launcher, which PySpark and spark-submit run, and each file keeps its whole name, spaces and quotes
included), and it starts in a UTF-8 locale. A JVM started in the C locale with a lake in a folder beyond ASCII
is tests/integration/test_concurrency.py's (`cli_runs.ONE_CORE`). It keeps its jars where Python looks for them,
and it is the Spark pielake runs on, not another that SPARK_HOME names or another pyspark ahead of pielake's on
Python's path, started on pielake's own arguments, not those of a notebook's PYSPARK_SUBMIT_ARGS, whose local
Python workers run an interpreter that has pielake."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from click.testing import CliRunner

from pielake.cli import main
from pielake.engine import class_archive
from pielake.engine.class_archive import QUIET, archive_path
from pielake.engine.jvm import (
    GATEWAY_PORT,
    SUBMIT_ARGS,
    UTF8_LOCALE,
    check_spark_home,
    check_submit_args,
    check_workers_python,
    file_option,
    utf8_locale,
)
from pielake.engine.settings import IVY_CACHE, JAVA_OPTIONS, java_options
from pielake.exitcodes import EXIT_USAGE
from pielake.lake.catalog import Metastore
from pielake.vocabulary import CATALOG_DIR

EXAMPLE_QUERY = Path(__file__).parents[2] / "examples" / "queries" / "aggressive_driving.tpq"
ODD_FOLDER = "My Lakes/it's #1 ü%20"  # a space, a quote, a hash, a percent sign


def driver_arguments(conf: dict[str, str]) -> list[str]:
    """The arguments of the driver JVM Spark's launcher builds for a PySpark session with `conf`."""
    home = Path(pyspark.__file__).parent
    launcher = next((home / "jars").glob("spark-launcher_*.jar"))
    scala = launcher.name.removeprefix("spark-launcher_").split("-")[0]  # the launcher asks which build it is
    command = ["java", "-cp", str(home / "jars" / "*"), "org.apache.spark.launcher.Main",
               "org.apache.spark.deploy.SparkSubmit",
               *(part for key, value in conf.items() for part in ("--conf", f"{key}={value}")), "pyspark-shell"]
    built = subprocess.run(command, env={**os.environ, "SPARK_HOME": str(home), "SPARK_SCALA_VERSION": scala},
                           capture_output=True, check=True, timeout=60)
    return built.stdout.decode().split("\0")  # the launcher writes the command's arguments apart by NUL


def test_a_lake_whose_folder_holds_a_space_gives_its_engine_one_catalog_folder(tmp_path: Path) -> None:
    """The engine's embedded metastore keeps Derby's files in the lake: a lake in `My Lakes/` started no engine
    (the JVM took `Lakes/…` for its main class)."""
    lake = tmp_path / ODD_FOLDER
    arguments = driver_arguments(Metastore().spark_conf(lake))
    assert f"-Dderby.system.home={lake / CATALOG_DIR}" in arguments


def test_a_checkout_whose_folder_holds_a_space_maps_its_class_archive(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The archive lives in the environment, inside the checkout: in `Data Projects/` every JVM pielake started
    stopped at once, `make setup`'s first."""
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path / ODD_FOLDER)
    monkeypatch.delenv("PIELAKE_CLASS_ARCHIVE", raising=False)
    archive = archive_path()
    assert archive is not None
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    arguments = driver_arguments(java_options())
    assert [*JAVA_OPTIONS.split(), f"-XX:SharedArchiveFile={archive}", QUIET] == \
        [a for a in arguments if a in {*JAVA_OPTIONS.split(), QUIET} or a.startswith("-XX:SharedArchiveFile")]
    built = tmp_path / ODD_FOLDER / "archive.partial"
    assert f"-XX:ArchiveClassesAtExit={built}" in driver_arguments(
        {"spark.driver.extraJavaOptions": file_option("-XX:ArchiveClassesAtExit=", built)})


@pytest.mark.parametrize(("environ", "given"), [
    ({"LC_ALL": "C"}, {"LC_ALL": UTF8_LOCALE}),
    ({"LANG": "de_DE.ISO-8859-1"}, {"LC_ALL": UTF8_LOCALE}),
    ({}, {"LC_ALL": UTF8_LOCALE}),
    ({"LC_ALL": "POSIX", "LANG": "en_US.UTF-8"}, {"LC_ALL": UTF8_LOCALE}),  # LC_ALL rules over LANG
    ({"LANG": "en_US.UTF-8"}, {}),
    ({"LC_ALL": "", "LC_CTYPE": "C.utf8", "LANG": "C"}, {}),  # Python's own under C (PEP 538)
], ids=["C", "Latin-1", "none", "POSIX over UTF-8", "UTF-8", "C.utf8"])
def test_a_jvm_starts_in_a_utf8_locale_and_in_the_user_s_own_where_that_is_one(environ: dict[str, str],
                                                                               given: dict[str, str]) -> None:
    assert utf8_locale(environ) == given


def test_spark_keeps_the_jars_it_resolves_in_the_home_python_sees(tmp_path: Path) -> None:
    """Java takes its home from the system's list of accounts, Python from $HOME, and the two differ where a
    container or a service sets HOME (or runs as an account the list lacks): Spark resolves Delta's jars into the
    Ivy cache pielake's own files are kept beside (`IVY_CACHE`), under $HOME, which the account may write."""
    home = tmp_path / "home"
    if (IVY_CACHE / "cache").is_dir():  # what setup resolved: Maven Central is then asked for nothing new
        shutil.copytree(IVY_CACHE / "cache", home / IVY_CACHE.name / "cache")
    resolved = subprocess.run(
        [sys.executable, "-c", "from pielake.engine.session import resolve_jars\n"
                               "from pielake.engine.settings import delta_package\n"
                               "print('\\n'.join(resolve_jars([delta_package()])))"],
        env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=300, check=False)
    assert resolved.returncode == 0, resolved.stderr
    jars = resolved.stdout.split()
    assert jars and all(jar.startswith(f"{home / IVY_CACHE.name}/jars/") for jar in jars), jars


def spark_home(folder: Path, core_jar: str | None) -> Path:
    """A Spark installation as far as its version shows: `jars/` holding its core jar (`core_jar`), if any."""
    (folder / "jars").mkdir(parents=True)
    if core_jar is not None:
        (folder / "jars" / core_jar).write_bytes(b"")
    return folder


@pytest.mark.parametrize(("core_jar", "said"), [
    ("spark-core_2.12-3.5.1.jar", "is Spark 3.5.1, and pielake runs on Spark"),
    (None, "is no Spark (it has no jars/spark-core_*.jar)"),
], ids=["another version", "no Spark"])
def test_a_spark_home_of_another_spark_is_refused_before_a_jvm_starts(core_jar: str | None, said: str,
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark starts the Spark SPARK_HOME names: a machine's own Spark 3.5 would fail with no word of why."""
    monkeypatch.setenv("SPARK_HOME", str(spark_home(tmp_path / "spark", core_jar)))
    (tmp_path / "lake").mkdir()
    result = CliRunner().invoke(main, ["sql", "--lake", str(tmp_path / "lake"), "SELECT 1"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert said in result.output and "unset it for pielake (`env -u SPARK_HOME pielake …`)" in result.output


def test_a_spark_home_of_pielake_s_own_spark_is_taken(tmp_path: Path) -> None:
    same = spark_home(tmp_path / "spark", f"spark-core_2.13-{pyspark.__version__}.jar")
    major, minor, _ = pyspark.__version__.split(".", 2)
    patch = spark_home(tmp_path / "patch", f"spark-core_2.13-{major}.{minor}.99.jar")  # a cluster's, say
    for home in (None, str(Path(pyspark.__file__).parent), str(same), str(patch)):
        check_spark_home({} if home is None else {"SPARK_HOME": home})


def test_spark_submit_arguments_of_the_environment_are_refused_before_a_jvm_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook's `PYSPARK_SUBMIT_ARGS` reaches Spark's launcher after pielake's settings: its --master would
    win over the run's (here a YARN that is not there, on which the JVM stops with Java's usage text)."""
    monkeypatch.setenv(SUBMIT_ARGS, "--master yarn --driver-memory 2g pyspark-shell")
    (tmp_path / "lake").mkdir()
    result = CliRunner().invoke(main, ["sql", "--lake", str(tmp_path / "lake"), "SELECT 1"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert f"unset it for pielake (`env -u {SUBMIT_ARGS} pielake …`)" in result.output
    assert "'--master yarn --driver-memory 2g pyspark-shell'" in result.output


def test_spark_submit_arguments_that_change_nothing_or_reach_no_jvm_are_taken() -> None:
    """PySpark's own default, and a process spark-submit started, whose JVM runs already (an Airflow step)."""
    for environ in ({}, {SUBMIT_ARGS: "pyspark-shell"}, {SUBMIT_ARGS: " "},
                    {SUBMIT_ARGS: "--master yarn pyspark-shell", GATEWAY_PORT: "40123"}):
        check_submit_args(environ)


def pielake_with(python_path: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`pielake …` in a process whose PYTHONPATH is `python_path`."""
    return subprocess.run([str(Path(sys.executable).parent / "pielake"), *arguments], text=True,
                          env={**os.environ, "PYTHONPATH": python_path}, capture_output=True, timeout=60, check=False)


def other_pyspark(folder: Path, declared: str) -> Path:
    """A Spark's `python/` folder as far as its pyspark's version shows: `pyspark/version.py` declaring it."""
    (folder / "pyspark").mkdir(parents=True)
    (folder / "pyspark" / "__init__.py").write_text("from pyspark.version import __version__\n")
    (folder / "pyspark" / "version.py").write_text(f"__version__: str = '{declared}'\n")
    return folder


def test_another_pyspark_first_on_python_s_path_is_refused_before_it_is_imported(tmp_path: Path) -> None:
    """A Hadoop distribution's `PYTHONPATH=$SPARK_HOME/python`: pielake would import that pyspark and start its
    Spark, and failed in its imports' traceback. A run, a statement or a plot sent to an engine imports no pyspark,
    and is not refused; maintenance on an engine is Spark Connect's client, which is pyspark."""
    other = other_pyspark(tmp_path / "spark" / "python", "3.5.1")
    (tmp_path / "lake").mkdir()
    lake = str(tmp_path / "lake")
    maintain_on_engine = ["maintain", "--lake", lake, "--remote", "sc://localhost:1", str(EXAMPLE_QUERY)]
    for command in (["sql", "--lake", lake, "SELECT 1"], maintain_on_engine, ["engine", "start", "--lake", lake]):
        refused = pielake_with(str(other), *command)
        assert refused.returncode == EXIT_USAGE, refused.stderr
        assert refused.stderr.startswith(f"error: Python imports pyspark 3.5.1 from {other}, not pielake's own "
                                         f"pyspark {pyspark.__version__}"), refused.stderr
        assert "unset it for pielake (`env -u PYTHONPATH pielake …`)" in refused.stderr
    for command in (["run", "--events", str(tmp_path / "none.csv"), str(EXAMPLE_QUERY)], ["sql", "SELECT 1"],
                    ["plot", "--out", "p.png", str(EXAMPLE_QUERY)]):
        sent = pielake_with(str(other), *command, "--lake", lake, "--remote", "sc://localhost:1")
        assert sent.stderr.startswith("error: no answer from the engine at sc://localhost:1"), sent.stderr


def test_a_pyspark_of_pielake_s_release_first_on_python_s_path_is_taken(tmp_path: Path) -> None:
    """spark-submit puts `python/lib/pyspark.zip` of pyspark's own folder first on its driver's path; a cluster's
    own Spark of the same feature release (another patch) starts a Spark Delta's jars fit."""
    major, minor, _ = pyspark.__version__.split(".", 2)
    for path in (Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip",
                 other_pyspark(tmp_path / "cluster" / "python", f"{major}.{minor}.99")):
        checked = subprocess.run([sys.executable, "-c", "import os; from pielake.engine.jvm import check_own_pyspark;"
                                  " check_own_pyspark(os.environ); import pyspark; print(pyspark.__file__)"],
                                 env={**os.environ, "PYTHONPATH": str(path)}, text=True, capture_output=True,
                                 timeout=60, check=False)
        assert checked.returncode == 0 and str(path) in checked.stdout, checked.stderr


def interpreter(folder: Path, *options: str) -> Path:
    """An executable that runs this Python with `options` (`-S`: without its site-packages, as a system Python
    runs that has neither pielake nor pyspark)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python3"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" {" ".join(options)} "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(("python", "said"), [
    ("bare", "does not import pielake and pyspark"),
    ("/no/such/python3", "does not run (No such file or directory)"),
], ids=["a Python without pielake", "no Python there"])
def test_a_workers_python_without_pielake_is_refused_before_a_jvm_starts(python: str, said: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell's `PYSPARK_PYTHON=python3` ran the workers of a local session with the system's Python: the run
    stopped at its first Python stage, in 200 lines of Spark's traceback."""
    named = str(interpreter(tmp_path / "bin", "-S")) if python == "bare" else python
    monkeypatch.setenv("PYSPARK_PYTHON", named)
    (tmp_path / "lake").mkdir()
    result = CliRunner().invoke(main, ["sql", "--lake", str(tmp_path / "lake"), "SELECT 1"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.output.startswith(f"error: PYSPARK_PYTHON={named}, which Spark's Python workers run, {said}")
    assert f"or name the Python of pielake's environment ({sys.executable})" in result.output


def test_a_workers_python_that_has_pielake_is_taken(tmp_path: Path) -> None:
    for python in (sys.executable, str(interpreter(tmp_path / "bin"))):
        check_workers_python(python)
