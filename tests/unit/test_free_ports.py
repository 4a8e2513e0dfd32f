"""`free_ports`: ports a test's or a bench's engine listens on, chosen where no other socket is handed one."""

from __future__ import annotations

import socket

import pytest

from pielake.engine.client import _ephemeral_floor, free_ports

pytestmark = pytest.mark.unit


def test_free_ports_are_consecutive_bindable_and_below_the_range_the_system_hands_out() -> None:
    """A port of the system's own range may go to any socket that asks for port 0 (Spark's driver in the engine's
    JVM among them) between the choice and the engine's bind."""
    for _ in range(20):
        first = free_ports(2)
        assert first + 1 < _ephemeral_floor()
        with socket.socket() as one, socket.socket() as two:
            one.bind(("127.0.0.1", first))
            two.bind(("127.0.0.1", first + 1))

