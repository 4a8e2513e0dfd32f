"""The engine's thin client (`pielake.engine.client`) behind a proxy the environment names: an engine on loopback
is reached directly, by its runs' HTTP client and by Spark Connect's gRPC channels, one elsewhere through the
proxy, and a failure there names the proxy and how to pass it by. `tests/integration/test_engine.py` sends a run
and a Spark Connect query to a real engine behind such a proxy."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

from pielake.engine.client import (
    NO_GRPC_PROXY,
    EngineAddress,
    EngineError,
    engine_status,
    free_port,
    grpc_direct_to_loopback,
)

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY")


class Status(BaseHTTPRequestHandler):
    """What an engine's runs port answers to `/status`: one JSON line."""

    def do_POST(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps({"lake": "here"}).encode() + b"\n")

    def log_message(self, *_: object) -> None:
        """Quiet: the test reads the answer, not the server's log."""


@pytest.fixture
def runs_port() -> Iterator[int]:
    """A server on loopback answering as an engine's runs port does; its Spark Connect port is the one before."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    """A proxy, named as a shell behind one names it, at a port where nothing listens."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(NO_GRPC_PROXY, "")  # empty; the client under test sets it: undone after each test
    proxy = f"http://127.0.0.1:{free_port()}"
    for name in PROXY_VARIABLES[:4]:
        monkeypatch.setenv(name, proxy)
    return proxy


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_an_engine_on_loopback_is_reached_past_the_proxy(host: str, runs_port: int, closed_proxy: str) -> None:
    assert engine_status(EngineAddress(host, runs_port - 1)) == {"lake": "here"}


def test_an_engine_elsewhere_is_reached_through_the_proxy_whose_failure_is_named(closed_proxy: str) -> None:
    elsewhere = EngineAddress("192.0.2.10", 15002)  # a documentation address: only the proxy is ever dialled
    with pytest.raises(EngineError) as failed:
        engine_status(elsewhere, timeout=5)
    assert f"through the proxy {closed_proxy} that http_proxy names: list the engine's host in no_proxy to reach it " \
           "directly" in str(failed.value)


def test_an_engine_no_proxy_lists_is_reached_directly(closed_proxy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("no_proxy", "192.0.2.10")
    with pytest.raises(EngineError) as failed:
        engine_status(EngineAddress("192.0.2.10", 15002), timeout=0.5)  # dialled directly: no answer in time
    assert "proxy" not in str(failed.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.0.0.2"])
def test_spark_connect_reaches_an_engine_on_loopback_past_the_proxy(host: str, closed_proxy: str) -> None:
    """A gRPC server where an engine's Spark Connect would listen, on any loopback address; a channel to the host
    Spark Connect's client dials is ready only if it goes there directly, not to the closed proxy."""
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    address = EngineAddress(host, server.add_insecure_port(f"{'127.0.0.1' if host == 'localhost' else host}:0"))
    server.start()
    try:
        grpc_direct_to_loopback(address)
        with grpc.insecure_channel(f"{address.client_host}:{address.port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=10)
    finally:
        server.stop(grace=None)
