"""A thin client of the engine (`pielake.engine.server`): the engine's address, and a run, a statement or a plot sent
to it.

A client imports nothing but the standard library: a scheduled micro-batch is seconds of work on a warm engine,
and a client that imported Spark, pandas or Great Expectations would spend longer starting than the engine spends
on the run. So the client sends the query's text and the run's request, a statement of `pielake sql`, or the key
and the range `pielake plot` draws; the engine parses, runs and reports, and the client prints or draws.

An engine listens on two ports of one host: Spark Connect on `port` (notebooks, `pielake maintain --remote`) and
pielake's runs, statements and plots (`pielake run|backfill|sql|plot --remote`, Airflow's tasks) on `port + 1`,
both behind the same token.

A client reaches an engine on this machine's loopback directly, whatever proxy the environment names
(`http_proxy`, `https_proxy`, `grpc_proxy`): Python's HTTP client and gRPC both send a loopback address through
such a proxy unless `no_proxy` lists it, where it reaches the proxy's own machine, and the token with it. An engine
elsewhere is reached as the environment says, through its proxy where it names one.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pielake import vocabulary as V
from pielake.errors import PielakeError, stopped_answering
from pielake.exitcodes import EXIT_UNAVAILABLE, EXIT_USAGE

DEFAULT_PORT = 15002  # Spark Connect's own default port
MAX_PORT = 65534  # an engine serves its runs on the port after Spark Connect's
FIRST_CHOSEN_PORT = 20000  # `free_ports` draws from here up, above the ports services usually take
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
NO_GRPC_PROXY = "no_grpc_proxy"  # the hosts gRPC reaches directly, whatever proxy the environment names
ENGINE_FILE = "engine.json"  # `<lake>/_engine/engine.json`: the address of the lake's running engine
ENGINE_LOG = "engine.log"  # `<lake>/_engine/engine.log`: what an engine that `engine start` started says
ENGINE_LOCK = "engine.lock"  # `<lake>/_engine/engine.lock`: held by the lake's engine for its life, naming its pid
# PySpark's own default for where a session runs: a session that names no master connects to the Spark Connect
# address `SPARK_REMOTE` names, and a process that has a Connect session is marked `SPARK_CONNECT_MODE_ENABLED`.
SPARK_REMOTE = "SPARK_REMOTE"
CONNECT_MARKS = (SPARK_REMOTE, "SPARK_CONNECT_MODE_ENABLED")


class EngineError(PielakeError):
    """A run the engine refused or could not finish; `exit_code` is the one the run would exit with."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class EngineAddress:
    """Where an engine listens, and the token it asks of every client (None: none)."""

    host: str
    port: int = DEFAULT_PORT
    token: str | None = None

    @property
    def client_host(self) -> str:
        """The host as Spark Connect clients name it. With a token, Spark's client sends it over TLS unless the
        host is `localhost`, so a loopback engine is named so."""
        return "localhost" if self.host in ("127.0.0.1", "localhost") else self.host

    @property
    def on_loopback(self) -> bool:
        """Whether the engine is on this machine's loopback, which no proxy reaches."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def shown_url(self) -> str:
        """The Spark Connect URL without the token, as a command or a log prints it."""
        return f"sc://{self.client_host}:{self.port}/"

    @property
    def connect_url(self) -> str:
        """The Spark Connect URL (`SparkSession.builder.remote`)."""
        return self.shown_url + (f";token={self.token}" if self.token else "")

    @property
    def runs_url(self) -> str:
        return f"http://{self.host}:{self.port + 1}"

    def airflow_connection(self) -> str:
        """The engine as an Airflow connection of Spark Connect's type, in the JSON form `AIRFLOW_CONN_<ID>`
        takes: the token is the connection's password, which Airflow keeps in its secrets backend."""
        return json.dumps({"conn_type": "spark_connect", "host": self.client_host, "port": self.port,
                           "password": self.token})

    @classmethod
    def parse(cls, url: str) -> EngineAddress:
        """`sc://host:port/;token=...` (the form Spark Connect and Airflow's `spark_connect` connections use)."""
        address, _, settings = url.partition(";")  # Spark Connect's parameters: `;name=value` after the path
        parsed = urlparse(address)
        if parsed.scheme != "sc" or not parsed.hostname:
            raise PielakeError(f"'{url}' is not an engine address; write sc://HOST:PORT (e.g. sc://localhost:15002)")
        if ":" in parsed.hostname:  # Spark's client reads the host as what comes before the address's one `:`
            raise PielakeError(f"'{url}' names an IPv6 address, which Spark Connect's client cannot reach: name the "
                               "engine's host by its name or its IPv4 address (e.g. sc://localhost:15002)")
        params = dict(part.split("=", 1) for part in settings.split(";") if "=" in part)
        token = unquote(params["token"]) if "token" in params else None
        return cls(parsed.hostname, _port(url, parsed.netloc.rpartition(":")[2] if ":" in parsed.netloc else ""),
                   token)


def classic_spark() -> None:
    """Make the Spark this process starts the classic Spark it asks for, whatever PySpark's Connect defaults its
    environment holds (`CONNECT_MARKS`): with `SPARK_REMOTE` set, PySpark's builder and Spark's launcher both refuse
    a master (a shell or an Airflow worker that names an engine for its notebooks and tasks starts an engine, runs
    with `--master`, or submits a step), and while `SPARK_CONNECT_MODE_ENABLED` is set PySpark's functions build
    Spark Connect's columns, which a classic session cannot run. The JVM and the processes it starts inherit the
    environment without them."""
    for mark in CONNECT_MARKS:
        os.environ.pop(mark, None)


def _port(url: str, given: str) -> int:
    """An address's port: Spark Connect's on it, and the engine's runs on the next one, so at most 65534; Spark
    Connect's own default where none is given."""
    if not given:
        return DEFAULT_PORT
    if not (given.isascii() and given.isdigit() and 1 <= int(given) <= MAX_PORT):
        raise PielakeError(f"'{url}' names the port '{given}': an engine's port is a whole number from 1 to "
                           f"{MAX_PORT} (its runs are served on the next one); e.g. sc://localhost:{DEFAULT_PORT}")
    return int(given)


def engine_file(lake_dir: str | Path) -> Path:
    return Path(lake_dir).resolve() / V.ENGINE_DIR / ENGINE_FILE


def lake_engine(lake_dir: str | Path) -> EngineAddress:
    """The address of the engine running on the lake, from the file it keeps there while it runs."""
    found = engine_file(lake_dir)
    try:
        held = json.loads(found.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PielakeError(f"no engine runs on {Path(lake_dir).resolve()}; start one with `pielake engine start "
                           f"--lake {lake_dir}`") from None
    return EngineAddress.parse(held["connect_url"])


LAKES_ENGINE = "lake"
"""`--remote` given alone: the engine running on the lake, as `engine_for` finds it."""


def engine_for(remote: str, lake_dir: str | Path) -> EngineAddress:
    """`--remote`'s engine: the address given, or (`--remote` alone) the one running on the lake."""
    if remote not in ("", LAKES_ENGINE):
        return EngineAddress.parse(remote)
    try:
        return lake_engine(lake_dir)
    except PielakeError as none:
        raise PielakeError(f"{none}, or leave out --remote to run in this process") from None


@dataclass(frozen=True)
class RunOrder:
    """A run (or one step of it, `step`) as the engine is asked for it. The query travels as its text: the engine
    parses it, as a run in this process would."""

    query: str
    name: str
    lake: str
    run_id: str
    request: dict[str, Any]
    step: str | None = None


def _post(address: EngineAddress, path: str, body: dict[str, Any], timeout: float | None) -> Iterator[dict]:
    """The engine's answer, one JSON object a line, as it comes."""
    request = urllib.request.Request(f"{address.runs_url}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {address.token}"} if address.token
                                                 else {})})
    proxy = _proxy(address)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy} if proxy else {}))
    try:
        answer = opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as refused:
        raise EngineError(f"the engine at {address.runs_url} refused: {refused.read().decode().strip()}") from None
    except (TimeoutError, urllib.error.URLError, ConnectionError) as lost:
        reason = getattr(lost, "reason", lost)
        through = (f", through the proxy {proxy} that http_proxy names: list the engine's host in no_proxy to reach "
                   "it directly" if proxy else "")
        raise EngineError(f"no answer from the engine at sc://{address.host}:{address.port} (its runs at "
                          f"{address.runs_url}: {reason}{through}); is it running? `pielake engine status --lake "
                          "LAKE`", EXIT_UNAVAILABLE) from None
    with answer:
        try:
            for line in answer:
                if line.strip():
                    yield json.loads(line)
        except OSError as lost:  # the connection reset, or silent past `timeout`, once the engine had answered
            raise EngineError(stopped_answering(f"{address.runs_url}: {lost}"), EXIT_UNAVAILABLE) from None


def _proxy(address: EngineAddress) -> str | None:
    """The proxy the environment sends the engine's runs through: none for an engine on loopback, else the one
    `http_proxy` names unless `no_proxy` lists the engine's host."""
    if address.on_loopback or urllib.request.proxy_bypass(address.host):
        return None
    return urllib.request.getproxies().get("http")


def grpc_direct_to_loopback(address: EngineAddress) -> None:
    """Let this process's gRPC channels (Spark Connect's) reach an engine on loopback past the proxy the
    environment names, as `_proxy` lets the runs' HTTP client: gRPC sends even a loopback address through
    `grpc_proxy`, `https_proxy` or `http_proxy` unless `no_grpc_proxy`, else `no_proxy`, lists the host it dials
    (`client_host`). The hosts either lists already stay listed; an engine elsewhere is left to them."""
    if not address.on_loopback:
        return
    listed = os.environ.get(NO_GRPC_PROXY) or os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    hosts = listed.split(",") if listed else []
    os.environ[NO_GRPC_PROXY] = ",".join(hosts + [address.client_host] * (address.client_host not in hosts))


def unanswered(address: EngineAddress, timeout: float) -> OSError | None:
    """Why a connection to the engine's Spark Connect port failed, or None where the port took it."""
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout):
            return None
    except OSError as error:
        return error


def run_on_engine(address: EngineAddress, order: RunOrder, say: Callable[[str], None],
                  timeout: float | None = None) -> dict[str, Any]:
    """Send `order` to the engine; its progress lines go to `say` as they come. Returns the engine's result, or
    raises `EngineError` with the run's message and exit code. A connection lost mid-run (the engine stopped)
    is an error: the run is redone, as any stopped run, by running it again."""
    return _result(address, "/run", asdict(order), say, timeout)


@dataclass(frozen=True)
class SqlOrder:
    """A read-only statement over a lake's tables (`pielake sql`), as the engine is asked for it: the client has
    checked it, and the engine checks it again, as `pielake sql` in a process of its own does. `as_of` is the
    time as the user wrote it."""

    statement: str
    lake: str
    fmt: str
    as_of: str | None = None


def sql_on_engine(address: EngineAddress, order: SqlOrder, say: Callable[[str], None]) -> Iterator[str]:
    """The statement's result, formatted, in the pieces the engine sends as Spark gives it rows; what it notes
    (the tables' versions `as_of` reads) goes to `say`. The client imports no Spark: a statement on a warm engine
    takes a fraction of a second, and Spark Connect's Python client (pandas, pyarrow, gRPC) seconds to import."""
    for message in _served(address, "/sql", asdict(order), say, None):
        if "rows" in message:
            yield message["rows"]


@dataclass(frozen=True)
class PlotOrder:
    """One key's timeline as `pielake plot` asks the engine for it (`pielake.lake.plotted.timeline`): the query
    travels as its text, the key as the words of `--key` (none: the busiest key), the range as the user wrote it."""

    query: str
    name: str
    lake: str
    key: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None


def timeline_on_engine(address: EngineAddress, order: PlotOrder, say: Callable[[str], None]) -> dict[str, Any]:
    """The timeline the engine reads from the lake for `order`, as JSON (`pielake.plot.Timeline.from_json`): the
    client draws it, and imports no Spark."""
    return _result(address, "/plot", asdict(order), say, None)


def _result(address: EngineAddress, path: str, body: dict[str, Any], say: Callable[[str], None],
            timeout: float | None) -> dict[str, Any]:
    """The engine's result for a request whose answer is that result alone, after its progress lines."""
    *_, last = _served(address, path, body, say, timeout)
    return last["result"]


def _served(address: EngineAddress, path: str, body: dict[str, Any], say: Callable[[str], None],
            timeout: float | None) -> Iterator[dict[str, Any]]:
    """The engine's messages for a request but its progress lines, which go to `say`, up to its `result`; an
    error the engine sends is raised, as is an answer that ends before its result (the engine stopped)."""
    for message in _post(address, path, body, timeout):
        if "progress" in message:
            say(message["progress"])
        elif "error" in message:
            raise EngineError(message["error"], int(message.get("exit_code", EXIT_USAGE)))
        else:
            yield message
            if "result" in message:
                return
    raise EngineError(stopped_answering(f"its answer at {address.runs_url} ended before its result"),
                      EXIT_UNAVAILABLE)


def _ephemeral_floor() -> int:
    """The lowest port the system hands out to a socket that asks for any; 32768 where it does not say (Linux's
    default; BSD and macOS start higher)."""
    try:
        return int(EPHEMERAL_RANGE.read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def engine_status(address: EngineAddress, timeout: float = 5.0) -> dict[str, Any]:
    """What the engine says of itself (its lake, process, ports, runs in progress)."""
    return next(_post(address, "/status", {}, timeout))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, for a server to listen on (`free_ports`)."""
    return free_ports(1)


def free_ports(count: int) -> int:
    """The first of `count` consecutive TCP ports on 127.0.0.1 that nothing listens on (an engine takes two:
    Spark Connect and its runs).

    They are drawn below the range the system hands out to sockets that ask for any port (Linux's
    `ip_local_port_range`): every outgoing connection and every server on port 0 (Spark's driver and block
    manager, in the engine's own JVM among them) takes one from there, so a port of that range that is free now
    may be taken before the server binds it."""
    for _ in range(100):
        first = random.randrange(FIRST_CHOSEN_PORT, _ephemeral_floor() - count)
        probes = [socket.socket() for _ in range(count)]
        try:
            for offset, probe in enumerate(probes):
                probe.bind(("127.0.0.1", first + offset))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return first
    raise PielakeError(f"found no {count} free ports in a row on 127.0.0.1")
