"""What the engine makes of the body of an order (`pielake.engine.server.read_order`): an order of its kind, or a
refusal its client shows in one line, naming what is wrong, since a client of another pielake may send any."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from pielake.engine.client import PlotOrder, RunOrder, SqlOrder
from pielake.engine.server import UnreadableOrderError, read_order

RUN = RunOrder(query="FROM S PARTITION BY k DEFINE A AS S.x > 1 PATTERN A before A", name="q", lake="/lake",
               run_id="r1", request={"events": "new.csv"}, step="pairs")


def test_an_order_of_its_kind_is_read_with_its_defaults() -> None:
    assert read_order(RunOrder, json.dumps(asdict(RUN)).encode()) == RUN
    assert read_order(SqlOrder, b'{"statement": "SELECT 1", "lake": "/lake", "fmt": "csv"}') == SqlOrder(
        "SELECT 1", "/lake", "csv")
    assert read_order(PlotOrder, b'{"query": "Q", "name": "q", "lake": "/lake"}').key == ()


@pytest.mark.parametrize(("body", "said"), [
    ({**asdict(RUN), "priority": 1, "after": "r0"}, "this engine knows no field after, priority. A client of another "
                                                    "pielake sends other fields"),
    ({"query": "Q", "name": "q"}, "it lacks lake, run_id, request. A client"),
    ({"query": "Q", "name": "q", "lake": "/lake", "run_id": "r1", "ask": 2},
     "this engine knows no field ask; it lacks request. A client"),
])
def test_an_order_with_other_fields_is_refused_with_them_and_the_remedy(body: dict, said: str) -> None:
    with pytest.raises(UnreadableOrderError) as refused:
        read_order(RunOrder, json.dumps(body).encode())
    assert str(refused.value).startswith(said), refused.value
    assert str(refused.value).endswith("restart the engine with the client's (`pielake engine stop`, then `start`)")


@pytest.mark.parametrize(("body", "said"), [
    (b"SELECT 1", "it is not JSON (Expecting value: line 1 column 1 (char 0))"),
    (b"\xff\xfe", "it is not JSON ("),
    (b'["SELECT 1"]', "it is JSON's list, not an object of SqlOrder's fields"),
])
def test_a_body_that_is_no_json_object_is_refused_with_what_it_is(body: bytes, said: str) -> None:
    with pytest.raises(UnreadableOrderError) as refused:
        read_order(SqlOrder, body)
    assert str(refused.value).startswith(said), refused.value
