"""A gate's suite (`expectations/<gate>.json`, and `expectations/<gate>/<stream or query>.json` where one stream or
query has its own) that GX cannot run as written is refused where it is read, naming its file, the expectation and
what to change (`pielake.pipeline.gates.load_suite`); the suites the project ships load. A suite is a file users
extend, so its mistakes are theirs to fix, not a traceback from inside a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pielake.pipeline.gates import SuiteError, load_suite
from tests.helpers import extend_suite

EVENTS_FILL = {"each_key": ["m"], "time": "ts", "natural_key": ["m", "ts"], "each_column": ["m", "ts", "v"],
               "type": {"m": "StringType", "ts": "LongType", "v": "DoubleType"}, "each_end": []}
COLUMNS = ["m", "ts", "v"]  # the staged events' columns


def test_the_shipped_events_suite_loads_with_one_expectation_per_column_and_key() -> None:
    expectations = load_suite("events", EVENTS_FILL, "Line", COLUMNS)["expectations"]
    types = [e["kwargs"] for e in expectations if e["type"] == "expect_column_values_to_be_of_type"]
    assert types == [{"column": c, "type_": t} for c, t in EVENTS_FILL["type"].items()]
    assert {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "m"}} in expectations


@pytest.mark.parametrize(("added", "said"), [
    ({"type": "expect_column_values_to_be_betwen", "kwargs": {"column": "v", "min_value": 0}},
     "expectations/events.json, expectation 6 (expect_column_values_to_be_betwen): Great Expectations has no "
     "expectation 'expect_column_values_to_be_betwen'; did you mean expect_column_values_to_be_between"),
    ({"type": "expect_column_values_to_be_between", "kwargs": {"column": "v", "min_valu": 0, "max_value": 9}},
     "expectation 6 (expect_column_values_to_be_between): expect_column_values_to_be_between does not take these "
     "arguments: min_valu: extra fields not permitted"),
    ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "$each_kye"}},
     "expectation 6 (expect_column_values_to_not_be_null): the events gate fills in no each_kye; it fills in "
     "each_key, time, natural_key, each_column, type, each_end"),
    ({"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "m", "value_set": {"$PARAMETER": "keys"}}},
     "the events gate fills in no keys"),
    ({"type": "expect_column_values_to_not_be_null"}, 'expectations/events.json, expectation 6: write it as '
                                                       '{"type": "expect_…", "kwargs": {…}}, as GX does'),
], ids=["a misspelt type", "an argument GX does not take", "a misspelt placeholder", "an unknown parameter",
        "no kwargs"])
def test_an_expectation_gx_cannot_build_is_refused_naming_it(suites: Path, added: dict[str, Any],
                                                             said: str) -> None:
    extend_suite(suites, "events", added)
    with pytest.raises(SuiteError) as refused:
        load_suite("events", EVENTS_FILL, "Line", COLUMNS)
    assert said in str(refused.value)


def test_a_suite_that_is_not_json_is_refused_at_its_line_and_column(suites: Path) -> None:
    path = suites / "events.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"kwargs"', "kwargs", 1), encoding="utf-8")
    with pytest.raises(SuiteError, match=r"expectations/events\.json is not JSON: Expecting property name enclosed "
                                         r"in double quotes\. Line 8, Col \d+\."):
        load_suite("events", EVENTS_FILL, "Line", COLUMNS)
    path.write_text('{"name": "events", "expectations": {}}', encoding="utf-8")
    with pytest.raises(SuiteError, match=r'expectations/events\.json holds no list "expectations"'):
        load_suite("events", EVENTS_FILL, "Line", COLUMNS)


def test_a_stream_s_own_suite_follows_the_shared_one_for_that_stream_alone(suites: Path) -> None:
    added = {"type": "expect_column_values_to_be_between", "kwargs": {"column": "v", "min_value": 0}}
    extend_suite(suites, "events/LINE", added)
    shared = load_suite("events", EVENTS_FILL, "Gauge", COLUMNS)
    own = load_suite("events", EVENTS_FILL, "Line", COLUMNS)
    assert own["expectations"] == [*shared["expectations"], added]
    assert (shared["files"], own["files"]) == (["expectations/events.json"],
                                               ["expectations/events.json", "expectations/events/LINE.json"])


def test_a_mistake_in_a_stream_s_own_suite_is_refused_naming_that_file(suites: Path) -> None:
    extend_suite(suites, "events/Line", {"type": "expect_column_values_to_be_betwen", "kwargs": {"column": "v"}})
    with pytest.raises(SuiteError, match=r"^expectations/events/Line\.json, expectation 1 "
                                         r"\(expect_column_values_to_be_betwen\): .*did you mean"):
        load_suite("events", EVENTS_FILL, "line", COLUMNS)


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"column": "V", "min_value": 0},
     "the events gate's rows have no column 'V'; did you mean 'v' (they have m, ts, v)"),
    ({"column": "vv", "min_value": 0}, "no column 'vv'; did you mean 'v'"),
    ({"column": "speed", "min_value": 0}, "no column 'speed' (they have m, ts, v)"),
], ids=["another case", "a misspelling", "another stream's"])
def test_a_column_the_gate_s_rows_do_not_have_is_the_suite_s_mistake_named_before_gx_checks(
        suites: Path, kwargs: dict[str, Any], said: str) -> None:
    """GX reported it as the expectation failing on the data: a run that stopped as if its events were bad."""
    extend_suite(suites, "events/Line", {"type": "expect_column_values_to_be_between", "kwargs": kwargs})
    with pytest.raises(SuiteError, match=r"^expectations/events/Line\.json, expectation 1 "
                                         r"\(expect_column_values_to_be_between\): ") as refused:
        load_suite("events", EVENTS_FILL, "Line", COLUMNS)
    assert said in str(refused.value)


def test_columns_a_pair_or_a_compound_expectation_reads_are_checked_and_a_table_s_expected_columns_are_not(
        suites: Path) -> None:
    extend_suite(suites, "events/Line", {"type": "expect_column_pair_values_a_to_be_greater_than_b",
                                         "kwargs": {"column_A": "v", "column_B": "t"}})
    with pytest.raises(SuiteError, match="no column 't'; did you mean 'ts'"):
        load_suite("events", EVENTS_FILL, "Line", COLUMNS)
    extend_suite(suites, "events/Gauge", {"type": "expect_compound_columns_to_be_unique",
                                          "kwargs": {"column_list": ["m", "when"]}})
    with pytest.raises(SuiteError, match="no column 'when'"):
        load_suite("events", EVENTS_FILL, "Gauge", COLUMNS)
    shape = {"type": "expect_table_columns_to_match_set", "kwargs": {"column_set": ["m", "ts", "v", "unit"]}}
    extend_suite(suites, "events/Meter", shape)
    assert load_suite("events", EVENTS_FILL, "Meter", COLUMNS)["expectations"][-1] == shape
