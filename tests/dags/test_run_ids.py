"""A DAG run's id is the pielake run id of its steps: every id Airflow makes, and every id its trigger form takes
by default, runs, unless it could name a folder other than the run's own."""

from __future__ import annotations

import importlib.util
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from airflow.models.dagrun import DagRun
from airflow.utils.types import DagRunType
from hypothesis import given
from hypothesis import strategies as st

from pielake.errors import PielakeError
from pielake.vocabulary import check_run_id

AIRFLOW_ID_LENGTH = 250  # DagRun.run_id is a StringID column


def default_run_id_pattern() -> str:
    """`[scheduler] allowed_run_id_pattern` as Airflow ships it, read from its own configuration template."""
    [package] = importlib.util.find_spec("airflow").submodule_search_locations
    config = yaml.safe_load((Path(package) / "config_templates" / "config.yml").read_text(encoding="utf-8"))
    return config["scheduler"]["options"]["allowed_run_id_pattern"]["default"]


@pytest.mark.parametrize("run_type", list(DagRunType))
@pytest.mark.parametrize("logical", [True, False])
def test_every_run_id_airflow_makes_is_a_run_id(run_type: DagRunType, logical: bool) -> None:
    when = datetime(2026, 12, 2, 6, 43, 13, 123456, tzinfo=UTC)
    run_id = DagRun.generate_run_id(run_type=run_type, logical_date=when if logical else None, run_after=when)
    assert check_run_id(run_id) == run_id


@given(st.from_regex(default_run_id_pattern(), fullmatch=True))
def test_a_run_id_the_trigger_form_takes_runs_or_is_refused_for_its_first_character(run_id: str) -> None:
    if len(run_id) <= AIRFLOW_ID_LENGTH and run_id[0].isascii() and run_id[0].isalnum():
        assert check_run_id(run_id) == run_id
    else:
        with pytest.raises(PielakeError, match=re.escape("first a letter or a digit (at most 250 characters)")):
            check_run_id(run_id)
