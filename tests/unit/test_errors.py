"""A disk that is full is said as such whatever raised it (`pielake.errors.no_space`): Python's OSError of a write
(a lock, a log), or an error raised while handling one, as Python shows the chain. A JVM the system killed is said
with the memory this process may use (`pielake.errors.jvm_lost`).
`tests/integration/test_machine_limits.py` fills a real file system under a run, where it is the JVM that meets it."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from pielake.engine.session import Py4jOnTheRoot
from pielake.errors import (
    A_RUN,
    JvmLostError,
    NoSpaceError,
    PielakeError,
    a_read,
    for_the_user,
    jvm_lost,
    no_space,
)
from pielake.exitcodes import EXIT_JVM_LOST, EXIT_NO_SPACE


def write_to_a_full_disk() -> None:
    """A write the system refuses as it refuses one to a full disk: `/dev/full` is always full."""
    with open("/dev/full", "w", encoding="utf-8") as full:
        full.write("x")


def test_a_write_to_a_full_disk_is_said_as_such_with_what_to_do() -> None:
    with pytest.raises(OSError) as raised:
        write_to_a_full_disk()
    said = no_space(raised.value)
    assert isinstance(said, NoSpaceError) and said.exit_code == EXIT_NO_SPACE
    assert str(said).startswith("a disk this run writes to is full: free space there, then run the query again")


def test_a_command_that_only_reads_is_told_to_run_again_not_that_a_run_redoes_what_it_left(
        killed_jvm: None) -> None:
    """`pielake sql` and `pielake plot` write only Spark's spill: the whole command is what there is to redo."""
    with pytest.raises(OSError) as raised:
        write_to_a_full_disk()
    assert str(no_space(raised.value, a_read("statement", "run"))) == (
        "a disk this statement writes to is full: free space there, then run the statement again: it only reads, so "
        "nothing of it is left to redo")
    said = str(for_the_user(EOFError(), a_read("plot", "draw")))
    assert said.startswith("Spark's JVM ended in the middle of the plot: it was killed (SIGKILL)"), said
    assert said.endswith(", then draw the plot again: it only reads, so nothing of it is left to redo"), said
    assert "Give the plot " in said and "query" not in said


def test_an_error_raised_while_handling_a_full_disk_is_said_as_the_full_disk() -> None:
    with pytest.raises(RuntimeError) as raised:
        try:
            write_to_a_full_disk()
        except OSError:
            raise RuntimeError("could not record the run") from None
    assert no_space(raised.value) is None  # `from None`: what it was raised from is not said
    with pytest.raises(RuntimeError) as raised:
        try:
            write_to_a_full_disk()
        except OSError:
            raise RuntimeError("could not record the run")  # noqa: B904 (the chain is what is tested)
    assert isinstance(no_space(raised.value), NoSpaceError)


def test_other_errors_are_not_a_full_disk() -> None:
    assert no_space(PermissionError(13, "Permission denied", "/lake")) is None
    assert no_space(PielakeError("no query file at q.tpq")) is None


@pytest.mark.parametrize(("allowed_mb", "java_options", "said"), [
    (1_024, "", "short of memory (this process may use 1,024 MB). Give the run at least 1,280 MB, then run the "
                "query again"),
    (24_105, "", "short of memory (this process may use 24,105 MB). Give the run more memory, or Spark a smaller "
                 "heap (PIELAKE_DRIVER_MEMORY) where the input is small, then run the query again"),
    (24_105, "-Duser.language=en -Xmx8g -Xmx30g", "Give the run more memory, or Spark a smaller heap (the -Xmx30g of "
     "_JAVA_OPTIONS, which wins over PIELAKE_DRIVER_MEMORY) where the input is small"),
    (None, "", "short of memory. Give the run more memory"),
], ids=["a container too small for any run", "a machine with room", "a heap of the environment's Java options",
        "a system that says no memory"])
def test_a_jvm_the_system_killed_is_said_with_the_memory_this_process_may_use(
        allowed_mb: int | None, java_options: str, said: str, killed_jvm: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where less than a run's least is allowed, a smaller heap cannot help: the heap is at Spark's least already.
    An `-Xmx` of `_JAVA_OPTIONS` is the heap to make smaller, as Java takes it over pielake's."""
    from py4j.protocol import Py4JNetworkError  # noqa: PLC0415 (what py4j raises when the JVM is gone)

    monkeypatch.setattr("pielake.errors.allowed_mb", lambda: allowed_mb)
    monkeypatch.setenv("_JAVA_OPTIONS", java_options)
    lost = jvm_lost(Py4JNetworkError("Answer from Java side is empty"))
    assert isinstance(lost, JvmLostError) and lost.exit_code == EXIT_JVM_LOST
    assert said in str(lost), str(lost)


@contextmanager
def jvm_of_this_process(command: list[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process of `command` in the place of this process's JVM, as py4j's gateway holds it; killed at the end."""
    from pyspark import SparkContext  # noqa: PLC0415

    with subprocess.Popen(command) as process:
        monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=process))
        try:
            yield
        finally:
            process.kill()


@pytest.fixture
def killed_jvm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A JVM that the system kills as Python meets its closed socket: it ends only after the error is raised, as
    a killed process closes its files before it is marked ended."""
    with jvm_of_this_process(["sh", "-c", "sleep 0.3; kill -KILL $$"], monkeypatch):
        yield


def failed_call_then_cleanup() -> None:
    """What a run meets when its JVM is killed while Python builds a plan: py4j's call fails with no error from
    Java (`Py4JError`), and the `finally` that releases the run's checkpoints finds the connection refused."""
    from py4j.protocol import Py4JError  # noqa: PLC0415 (what py4j raises when the JVM is gone)

    try:
        raise Py4JError("An error occurred while calling o500.and")
    finally:
        raise ConnectionRefusedError(111, "Connection refused")


def test_any_form_in_which_py4j_meets_a_killed_jvm_is_said_as_the_killed_jvm(killed_jvm: None) -> None:
    with pytest.raises(ConnectionRefusedError) as raised:
        failed_call_then_cleanup()
    assert isinstance(jvm_lost(raised.value), JvmLostError)
    assert isinstance(jvm_lost(EOFError()), JvmLostError)  # the rows of a `pielake sql` cut short, as PySpark says
    assert jvm_lost(ValueError("a bug of pielake's")) is None


def test_the_engine_s_watch_of_its_jvm_takes_a_refused_connection_as_the_jvm_gone() -> None:
    """The engine asks its JVM, every few seconds, whether its Spark serves. Where the system has just killed the
    JVM, py4j's new connection to it is refused, and py4j raises that refusal as it is: the watch gives the JVM
    the time a killed process takes to end and says how it ended, where the refusal would stop the engine without
    a word of why."""
    from pielake.engine.server import _how_jvm_ended  # noqa: PLC0415 (the engine's, which imports Spark's types)

    def refused() -> bool:
        raise ConnectionRefusedError(111, "Connection refused")

    with subprocess.Popen(["sh", "-c", "sleep 0.3; kill -KILL $$"]) as process:
        context = SimpleNamespace(_gateway=SimpleNamespace(proc=process),
                                  _jsc=SimpleNamespace(sc=lambda: SimpleNamespace(isStopped=refused)))
        said = _how_jvm_ended(SimpleNamespace(sparkContext=context), "<lake>/_engine/engine.log")
    assert said is not None and said.startswith("was killed (SIGKILL), as the system kills the largest process")


def test_a_run_on_the_engine_whose_jvm_the_system_killed_tells_its_client_to_start_the_engine_again(
        killed_jvm: None) -> None:
    """The engine stops with its JVM, so its client is told to start it again (on the engine's own lake, which
    the run's need not be), not to give the run more memory or a smaller heap, as a run in a process of its own."""
    from py4j.protocol import Py4JNetworkError  # noqa: PLC0415 (what py4j raises when the JVM is gone)

    from pielake.engine.server import WorkInEngine, _said  # noqa: PLC0415 (the engine's: Spark's types)

    lost = Py4JNetworkError("Answer from Java side is empty")
    said = _said(lost, WorkInEngine("run q r1 run", A_RUN), Path("/data/engine-lake"))
    assert said["exit_code"] == EXIT_JVM_LOST
    assert said["error"].startswith("the engine's Spark JVM was killed (SIGKILL), as the system kills"), said
    assert said["error"].endswith("the engine stops. Start it again (`pielake engine start --lake "
                                  "/data/engine-lake`); then run the query again: each table keeps its last whole "
                                  "commit, and the next run redoes what this one left undone"), said
    assert "PIELAKE_DRIVER_MEMORY" not in said["error"]
    reading = WorkInEngine("SQL statement 1 on /data/lake", a_read("statement", "run"))
    read = _said(lost, reading, Path("/data/engine-lake"))
    assert read["exit_code"] == EXIT_JVM_LOST
    assert read["error"].endswith("(`pielake engine start --lake /data/engine-lake`); then run the statement again: "
                                  "it only reads, so nothing of it is left to redo"), read


def test_py4j_meeting_a_jvm_that_still_runs_or_a_refused_engine_client_is_not_a_killed_jvm(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pielake.errors.JVM_END_GRACE_S", 0.2)
    with jvm_of_this_process(["sleep", "30"], monkeypatch):
        with pytest.raises(ConnectionRefusedError) as raised:
            failed_call_then_cleanup()
        assert jvm_lost(raised.value) is None
        assert jvm_lost(EOFError()) is None
    monkeypatch.delitem(sys.modules, "pyspark")  # a client of an engine, which imports no Spark
    assert jvm_lost(ConnectionRefusedError(111, "Connection refused")) is None


def test_what_py4j_logs_on_the_root_logger_is_dropped_and_nothing_else() -> None:
    """py4j logs a failed call's traceback with `logging.exception`, on the root logger, ahead of the error the
    call raises, which is what pielake tells."""
    import py4j.java_gateway  # noqa: PLC0415

    def record(pathname: str) -> logging.LogRecord:
        return logging.LogRecord("root", logging.ERROR, pathname, 1060, "Exception while sending command.", None,
                                 None)

    assert not Py4jOnTheRoot().filter(record(py4j.java_gateway.__file__))
    assert Py4jOnTheRoot().filter(record(__file__))
