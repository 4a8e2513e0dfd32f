"""`explain` output for the bundled example query, kept as a golden file."""

from __future__ import annotations

import os
from pathlib import Path

from pielake.explain import explain
from pielake.query.analyzer import load_query
from tests.conftest import FIXTURES

EXAMPLE = Path(__file__).parents[2] / "examples" / "queries" / "aggressive_driving.tpq"


def test_explain_of_the_aggressive_driving_query_matches_its_golden_file() -> None:
    actual = explain(load_query(EXAMPLE.read_text(encoding="utf-8"), "aggressive_driving"))
    golden = FIXTURES / "explain" / "aggressive_driving.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")


def test_explain_names_before_as_a_range_join_and_the_prefix_group_decision() -> None:
    text = explain(load_query("FROM S DEFINE A AS a, B AS b, C AS c "
                              "PATTERN A before B AND B starts; equals; started-by C WITHIN 1 h"))
    assert "A before B:  range join on A.te < B.ts, bounded by the window; decided at B.ts" in text
    assert "if B starts C: decided at B.ts = C.ts" in text
    assert "if B started-by C: decided at B.ts = C.ts" in text
