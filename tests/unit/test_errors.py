"""A disk that is full is said as such whatever raised it (`pielake.errors.no_space`): Python's OSError of a write
(a lock, a log), or an error raised while handling one, as Python shows the chain.
`tests/integration/test_machine_limits.py` fills a real file system under a run, where it is the JVM that meets it."""

from __future__ import annotations

import pytest

from pielake.errors import NoSpaceError, PielakeError, no_space
from pielake.exitcodes import EXIT_NO_SPACE


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
