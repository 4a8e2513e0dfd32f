"""A number a deployment sets in the environment is read strictly (`pielake.environment.number`): a value that is
no number, or below 0, is refused naming the variable and how to set it, wherever it is read first (a DAG file,
the engine, a run)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pielake.engine.settings import docs_runs, keep_days, lock_wait
from pielake.environment import number
from pielake.errors import PielakeError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("raw", "read"), [("7", 7.0), ("0.5", 0.5), (" 2 ", 2.0), ("", 1.0)])
def test_a_number_given_is_read_and_an_empty_one_is_the_default(raw: str, read: float,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIELAKE_KEEP_DAYS", raw)
    assert keep_days() == read


@pytest.mark.parametrize("raw", ["1d", "-1", "nan", "inf", "one week"])
def test_a_value_that_is_no_number_of_its_kind_names_the_variable_and_how_to_set_it(
        raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIELAKE_KEEP_DAYS", raw)
    with pytest.raises(PielakeError, match=f"^PIELAKE_KEEP_DAYS='{raw}' is not a number of days \\(from 0 to 36,500, "
                                           "a hundred years\\); set it as PIELAKE_KEEP_DAYS=1, or unset it for 1$"):
        keep_days()


@pytest.mark.parametrize(("variable", "read", "raw", "longest"), [
    ("PIELAKE_KEEP_DAYS", keep_days, "36500.5", "36,500"),
    ("PIELAKE_LOCK_WAIT", lock_wait, "1e300", "3,153,600,000"),
])
def test_a_span_of_time_is_at_most_a_hundred_years(variable: str, read: Callable[[], float], raw: str, longest: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Every clock a span reaches holds a hundred years (Python's timers, Delta's intervals), not a longer one."""
    monkeypatch.setenv(variable, raw)
    with pytest.raises(PielakeError, match=f"^{variable}='{raw}' is not a number of \\w+ \\(from 0 to {longest}, a "
                                           "hundred years\\)"):
        read()
    monkeypatch.setenv(variable, longest.replace(",", ""))
    assert read() == float(longest.replace(",", ""))


def test_a_count_is_a_whole_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIELAKE_DOCS_RUNS", "2.5")
    with pytest.raises(PielakeError, match=r"PIELAKE_DOCS_RUNS='2\.5' is not a whole number of runs"):
        docs_runs()
    monkeypatch.setenv("PIELAKE_DOCS_RUNS", "50")
    assert docs_runs() == 50
    assert number("PIELAKE_NOT_SET_ANYWHERE", 3, "seconds") == 3
