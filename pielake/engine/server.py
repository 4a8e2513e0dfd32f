"""The engine: one long-lived Spark application per lake, on which every step of every run runs warm.

Every Spark process pays fixed costs before it does any work: a JVM and its jars, Python modules (PySpark,
pandas, Great Expectations), and Spark planning and compiling each plan's code for the first time. A scheduled
micro-batch of a few hundred events is about a second of work behind a minute of those. The engine pays them
once, and before it serves it runs a small query of its own until the JIT has compiled the code every run takes
(`pielake.engine.warm_up`): one process, one Spark application with Delta and the lake's catalog, serving

- Spark Connect, for notebooks and `pielake maintain --remote` (`spark.plugins`: Spark's own server);
- the Thrift/JDBC endpoint, for BI tools: the lake's tables are registered in its catalog (`pielake.lake.catalog`)
  before it serves, and new ones every `refresh` seconds;
- pielake's runs, for `pielake run --remote` and Airflow's tasks: a client (`pielake.engine.client`) sends the
  query's text and the run's request; the engine runs it, or one step of it, in a Spark session of its own
  (its own settings and views, the application's warm JVM and workers), and streams its progress back;
  `pielake sql --remote`'s statements, whose formatted rows it streams back as the client takes them; and
  `pielake plot --remote`'s timelines, which it reads and sends as JSON for the client to draw.

A run on the engine is the same code as a run in a process of its own (`pielake.pipeline.runner`), and keeps its
stage outputs in the engine's memory: a whole run until it ends, an Airflow run's steps from one task to the next
(`pielake.engine.held`). A step the engine was killed in is redone by running it again, as any stopped step; if
the engine was restarted, the step first runs again the run's earlier steps, whose outputs it lost.

One engine per lake: it holds `<lake>/_engine/engine.lock` while it runs (the kernel releases it when the process
ends, however it ends), and a second is refused with the first one's address. The engine listens on loopback
unless told otherwise, and asks every client for its token (Spark Connect's `spark.connect.authenticate.token`,
and the same bearer token for runs): SECURITY.md says what that exposes.

Hive opens each Thrift client session with a class loader of its own that sees only the JVM's system class path,
not the jars Spark loads from `spark.jars.packages`; a session that cannot load Delta's catalog fails at connect
(delta-io/delta#1332). So Delta's jars are resolved first and put on the driver's system class path as well, after
Spark's own jars, where they leave the class archive (`pielake.engine.class_archive`) usable.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import itertools
import json
import logging
import os
import queue
import secrets
import select
import socket
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, fields
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any, ClassVar, TextIO

from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.engine.client import ENGINE_FILE, ENGINE_LOCK, ENGINE_LOG, EngineAddress, PlotOrder, RunOrder, SqlOrder
from pielake.engine.held import HeldRuns, RunKey
from pielake.engine.session import build_session, resolve_jars
from pielake.engine.settings import WARM_UP_RUNS, SparkUi, delta_package
from pielake.engine.warm_up import warm_up
from pielake.errors import (
    A_RUN,
    JVM_END_GRACE_S,
    JvmLostError,
    PielakeError,
    Then,
    a_read,
    for_the_user,
    how_it_ended,
    lost_by_py4j,
    spark_said,
)
from pielake.exitcodes import EXIT_INTERNAL, EXIT_INTERRUPTED
from pielake.lake.catalog import DATABASE, CatalogRegistration, Metastore, use_statements_database
from pielake.lake.delta import Lake
from pielake.lake.plotted import timeline
from pielake.lake.sql import query_lake
from pielake.lake.statements import as_of_time
from pielake.pipeline.gates import import_gx_meanwhile
from pielake.pipeline.job import RunRequest, StageResult
from pielake.pipeline.runner import Run, RunStopped, run_query
from pielake.query.analyzer import load_runnable

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
M_ARENA_MAX = -8  # glibc's mallopt() parameter for the most arenas (malloc.h)
ENGINE_ARENAS = 2
log = logging.getLogger("pielake.engine")
PIELAKE_VERSION = version("pielake")
# Seconds between two looks at whether a run's client still listens, while the run says nothing new.
LISTEN_SECONDS = 0.5
# Seconds between two looks at whether the engine's JVM still serves (`_check_jvm`).
JVM_WATCH_SECONDS = 1.0
# Seconds between two cancellations of a stopped run's Spark jobs: a job it starts after one is cancelled at the
# next, so that a run between two jobs when stopped stops at its next.
CANCEL_EVERY_SECONDS = 0.1


@dataclass(frozen=True)
class EnginePorts:
    """Where an engine listens: `host`, Spark Connect on `port`, runs on `port + 1`, JDBC on `jdbc_port`, Spark's
    UI on `ui_port` if given; and how often it looks for new lake tables to register."""

    host: str = "127.0.0.1"
    port: int = 15002
    jdbc_port: int = 10000
    refresh: float = 30.0
    ui_port: int | None = None

    @property
    def ui(self) -> SparkUi | None:
        return None if self.ui_port is None else SparkUi(self.host, self.ui_port)

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:hive2://{self.host}:{self.jdbc_port}/{DATABASE}"

    def check_free(self) -> None:
        """Fail with one line if a port is taken, by another process or by another of the engine's servers: the
        servers would fail later, deep in their logs."""
        own = {self.port: "Spark Connect's (--port)", self.port + 1: "pielake's runs' (--port + 1)"}
        chosen = {"--jdbc-port": (self.jdbc_port, "the JDBC endpoint's (--jdbc-port)"),
                  "--ui-port": (self.ui_port, "Spark UI's (--ui-port)")}
        for option, (port, whose) in chosen.items():
            if port in own:
                raise PielakeError(f"{option} {port} is {own[port]} port; pass another {option}")
            if port is not None:
                own[port] = whose
        for port, whose in own.items():
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((self.host, port))
                except OSError as error:
                    raise PielakeError(f"cannot listen on {self.host}:{port}, {whose} port ({error.strerror}); "
                                       "pass another, or stop what uses it") from None


@contextmanager
def engine_lock(root: Path) -> Iterator[Path]:
    """Hold the lake's engine lock for this process, or say which engine holds it. Yields the engine folder."""
    folder = root / V.ENGINE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ENGINE_LOCK).open("a+", encoding="utf-8") as handle:
        if not _take(handle):
            handle.seek(0)
            raise PielakeError(f"an engine already runs on {root} ({handle.read().strip() or 'starting'}): use it "
                               "(--remote), or stop it first (pielake engine stop)")
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield folder
        finally:
            (folder / ENGINE_FILE).unlink(missing_ok=True)
            handle.truncate(0)  # an engine that has ended names no process


def _take(handle: TextIO, wait: float = 1.0) -> bool:
    """Hold the lock `handle` exclusively, waiting up to `wait` s: a command that looks for the engine
    (`pielake.engine.control`) holds it shared for an instant, where an engine holds it for its life."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def _publish_address(folder: Path, address: EngineAddress, ports: EnginePorts, root: Path) -> None:
    """Where clients find the engine (`pielake.engine.client.lake_engine`): readable by the lake's owner only, as
    it holds the token."""
    held = {"lake": str(root), "pid": os.getpid(), "connect_url": address.connect_url, "runs_url": address.runs_url,
            "jdbc_url": ports.jdbc_url, "started_at": datetime.now(UTC).isoformat()}
    draft = folder / f".{ENGINE_FILE}.tmp"
    draft.touch(mode=0o600)
    draft.write_text(json.dumps(held, indent=2), encoding="utf-8")
    os.replace(draft, folder / ENGINE_FILE)


def serve(lake_dir: str | Path, ports: EnginePorts, *, token: str | None = None, metastore: Metastore | None = None,
          master: str | None = None, packages: Sequence[str] = (), warm_up_runs: int = WARM_UP_RUNS,
          stop: threading.Event | None = None, say: Callable[[str], None] = print) -> None:
    """Run the engine on the lake until `stop` is set (or the process is interrupted).

    Args:
        lake_dir: the lake whose catalog the engine serves (runs may name any lake its file system reaches).
        ports: host, ports and the refresh interval of the table registration.
        token: what every client must present; None: a new random one, kept in `<lake>/_engine/engine.json`.
        metastore: the catalog; None: embedded Derby under `<lake>/_catalog/`.
        master: the Spark master the engine runs on (`local[*]` by default, or a cluster's URL).
        packages: Maven coordinates to load besides Delta's, e.g. the metastore's JDBC driver.
        warm_up_runs: micro-batches of the warm-up (`pielake.engine.warm_up`) run before the engine serves, after
            its batch run; 0: no warm-up, the first runs sent to the engine compile its code paths.
        stop: set it to shut the engine down (the CLI sets it on SIGTERM).
        say: where the `ready:` line and the registrations are reported.
    """
    root = Path(lake_dir).resolve()
    ports.check_free()
    _cap_malloc_arenas()
    address = EngineAddress(ports.host, ports.port, token or secrets.token_urlsafe(24))
    with engine_lock(root) as folder:
        import_gx_meanwhile()  # the first gate a client asks for finds Great Expectations imported
        spark = _engine_session(root, ports, address, metastore=metastore or Metastore(), master=master,
                                packages=packages)
        try:
            if warm_up_runs > 0:
                say(f"warmed up in {warm_up(spark, root, warm_up_runs, say):.1f} s")
            _serve(spark, root, ports, address, folder=folder, stop=stop or threading.Event(), say=say)
        finally:
            if _jvm(spark).poll() is None:
                spark.stop()


def _cap_malloc_arenas(arenas: int = ENGINE_ARENAS) -> None:
    """Let the engine's threads share `arenas` of glibc's malloc arenas. By default each thread that allocates may
    get an arena of its own (up to eight a core), and an arena hands memory back to the system only from its top:
    an engine that runs every run in threads of its own then grows by a fraction of a megabyte a run, with no
    Python object left behind (docs/performance.md, "An engine that has run for a while"). `MALLOC_ARENA_MAX`,
    which glibc reads as the process starts, wins when set. Other C libraries have no such arenas."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).mallopt(M_ARENA_MAX, arenas)
    except (OSError, AttributeError, TypeError):  # no C library by that name, or one without mallopt
        return


def _engine_session(root: Path, ports: EnginePorts, address: EngineAddress, *, metastore: Metastore,
                    master: str | None, packages: Sequence[str]) -> SparkSession:
    return build_session(master, app_name="pielake-engine", packages=packages, ui=ports.ui,
                         system_jars=resolve_jars([delta_package(), *packages]), conf={
        **metastore.spark_conf(root),
        "spark.hadoop.hive.server2.thrift.bind.host": ports.host,
        "spark.hadoop.hive.server2.thrift.port": str(ports.jdbc_port),
        "spark.plugins": CONNECT_PLUGIN,
        "spark.connect.grpc.binding.address": ports.host,
        "spark.connect.grpc.binding.port": str(ports.port),
        "spark.connect.authenticate.token": address.token or "",
    })


def _serve(spark: SparkSession, root: Path, ports: EnginePorts, address: EngineAddress, *, folder: Path,
           stop: threading.Event, say: Callable[[str], None]) -> None:
    lake = Lake(spark, root)
    registration = CatalogRegistration(lake)
    registered = registration.refresh()
    thrift = spark._jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext())
    runs = RunService(spark, address, root)
    try:
        runs.start()
        _publish_address(folder, address, ports, root)
        ui = f", {spark.sparkContext.uiWebUrl} (Spark UI)" if ports.ui else ""
        say(f"ready: {address.shown_url} (Spark Connect), {address.runs_url} (runs), "
            f"{ports.jdbc_url} (JDBC){ui}; {len(registration.listed or ())} tables of {root} ({len(registered)} "
            "newly registered)")
        refreshed = time.monotonic()
        while not stop.wait(JVM_WATCH_SECONDS):
            _check_jvm(spark, root)
            if time.monotonic() - refreshed >= ports.refresh:
                refreshed = time.monotonic()
                try:
                    for name in registration.refresh():
                        say(f"registered {name}")
                except Exception:
                    _check_jvm(spark, root)  # a JVM that ended as it registered says how
                    raise
    finally:
        runs.stop()
        if _jvm(spark).poll() is None:
            thrift.stop()


def _jvm(spark: SparkSession) -> subprocess.Popen:
    """The engine's JVM, which PySpark started as this process's child."""
    return spark.sparkContext._gateway.proc


def _check_jvm(spark: SparkSession, root: Path) -> None:
    """Stop the engine, with a JvmLostError that says how, where its JVM has ended, or has stopped its Spark and
    lets no client in (a shutdown begun inside it: a statement a client sent that calls `System.exit`), which is
    then killed. Such an engine would go on answering nothing while it held the lake's lock and its ports (the
    system kills the largest process where memory runs short, and that is the JVM), so that no new engine could
    start; stopped, it frees them, and a supervisor that restarts it on failure (systemd) brings the lake's
    engine back."""
    how = _how_jvm_ended(spark, _engine_log(root))
    if how is not None:
        raise _engine_jvm_lost(how, root, "a run it was serving failed, and runs again from where it stopped")


def _engine_log(root: Path) -> str:
    """The engine's log, where a JVM that exited with a code of its own said why."""
    return str(root / V.ENGINE_DIR / ENGINE_LOG)


def _engine_jvm_lost(how: str, root: Path, then: str) -> JvmLostError:
    """The engine's JVM ended `how` (`how_it_ended`): the engine stops, and only a new one on its lake `root`
    serves again, which is what its log and the clients of the runs it served are told, and `then` what follows."""
    return JvmLostError(f"the engine's Spark JVM {how}: the engine stops. Start it again (`pielake engine start "
                        f"--lake {root}`); {then}")


def _how_jvm_ended(spark: SparkSession, log: str) -> str | None:
    """How the engine's JVM ended (`how_it_ended`), None while it serves. A JVM that py4j no longer reaches, or
    whose Spark has stopped, is given the time a killed process takes to be reaped, and is killed if it has not
    ended by then."""
    process = _jvm(spark)
    if process.poll() is None:
        try:
            if not spark.sparkContext._jsc.sc().isStopped():
                return None
        except Exception as error:
            if not lost_by_py4j(error):
                raise  # Java answered, with an error: it serves
            # its side of the gateway is gone, or going
        try:
            process.wait(timeout=JVM_END_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return "stopped its Spark and answered no more, and was ended"
    return how_it_ended(process.returncode, log)


class RunService:
    """pielake's runs over HTTP on the engine's `port + 1`: `POST /run` runs an order (`RunOrder`), answering one
    JSON object a line (`progress`, then `result` or `error`); `POST /sql` answers a statement (`SqlOrder`) so,
    its formatted rows in `rows` before its `result`; `POST /plot` answers a key's timeline (`PlotOrder`) as its
    `result`; `POST /status` says what the engine is doing, and which pielake it runs. An order whose body is not
    one of those (`read_order`) is refused, 400, with why."""

    def __init__(self, spark: SparkSession, address: EngineAddress, root: Path):
        self.spark = spark
        self.address = address
        self.root = root  # the engine's own lake, which a run order's lake need not be
        self.started = datetime.now(UTC)
        self.running: dict[int, str] = {}  # what each run, statement or plot in progress does, by its `id`
        self.held = HeldRuns(spark)
        self.reads = itertools.count(1)  # numbers the statements and plots it answers, in its status
        self.server = ThreadingHTTPServer((address.host, address.port + 1), self._handler())
        self.server.daemon_threads = True

    def start(self) -> None:
        threading.Thread(target=self.server.serve_forever, name="engine-runs", daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def status(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "started_at": self.started.isoformat(), "pielake": PIELAKE_VERSION,
                "spark": self.spark.version,
                "master": self.spark.sparkContext.master, "ui": self.spark.sparkContext.uiWebUrl,
                "running": sorted(self.running.values()),
                "held": sorted(f"{k.query} {k.run_id}" for k in self.held.held())}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the answer streams until the connection closes

            def log_message(self, format: str, *args: Any) -> None:
                log.debug(format, *args)

            def do_POST(self) -> None:
                given = self.headers.get("Authorization")
                if service.address.token and given != f"Bearer {service.address.token}":
                    self._refuse(HTTPStatus.UNAUTHORIZED, _token_refusal(given is not None))
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/status":
                    self._answer(service.status())
                elif self.path in ORDERS:
                    self._answer_order(*ORDERS[self.path], body)
                else:
                    self._refuse(HTTPStatus.NOT_FOUND, f"no {self.path}: POST /run, /sql, /plot or /status")

            def _answer_order(self, kind: type, serve: Callable[[RunService, Any], WorkInEngine], body: bytes) -> None:
                """Serve the order `body` holds, or refuse it, saying why, where it is not one of `kind`."""
                try:
                    order = read_order(kind, body)
                except UnreadableOrderError as refused:
                    log.warning("refused an order to %s from %s: %s", self.path, self.client_address[0], refused)
                    self._refuse(HTTPStatus.BAD_REQUEST, f"this engine (pielake {PIELAKE_VERSION}) cannot read the "
                                 f"order to {self.path}: {refused}")
                    return
                self._follow(serve(service, order))

            def _refuse(self, status: HTTPStatus, message: str) -> None:
                self.send_response(status)
                self.end_headers()
                self.wfile.write(message.encode())

            def _answer(self, message: dict[str, Any]) -> None:
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                self._write(message)

            def _write(self, message: dict[str, Any]) -> None:
                self.wfile.write(json.dumps(message, default=str).encode() + b"\n")
                self.wfile.flush()

            def _follow(self, run: WorkInEngine) -> None:
                """Stream the work's messages to its client while it listens; once it has gone (Ctrl-C, an
                Airflow task killed or timed out), stop the work, and take its messages until it ends, as its
                short queue would hold the work up."""
                listening = self._heard(None, opening=True)
                while (message := run.next_message(LISTEN_SECONDS)) is not WorkInEngine.ENDED:
                    listening = listening and self._heard(message)
                    if not listening:  # at once, and again to no effect while the work winds down
                        run.stop(f"its client at {self.client_address[0]} went away")

            def _heard(self, message: dict[str, Any] | None, *, opening: bool = False) -> bool:
                """Whether the client still listens: the answer's head (`opening`) or `message` written to it,
                or, without one, its end not closed."""
                try:
                    if opening:
                        self.send_response(HTTPStatus.OK)
                        self.send_header("Content-Type", "application/x-ndjson")
                        self.end_headers()
                    if message is not None:
                        self._write(message)
                        return True
                    return not _closed(self.connection)
                except OSError:  # the connection broken, reset, or closed under it
                    return False

        return Handler

    def execute(self, order: RunOrder) -> WorkInEngine:
        """Run the order: its progress lines as they come and then its result; a run's own errors (a bad query, a
        failed gate, a busy lock) are its answer, not the engine's."""
        return self._start(f"run {order.name} {order.run_id} {order.step or 'run'}", A_RUN,
                           lambda run: run.put({"result": run_order(self.spark, self.held, order, run)}))

    def read(self, order: SqlOrder) -> WorkInEngine:
        """Answer the statement: its rows, formatted, a piece at a time, and then an empty result; a statement
        that writes, or that Spark rejects, is its answer's error."""
        return self._start(f"SQL statement {next(self.reads)} on {order.lake}", a_read("statement", "run"),
                           lambda reading: answer_sql(self.spark, order, reading))

    def plot(self, order: PlotOrder) -> WorkInEngine:
        """Answer a plot's timeline, read as `pielake plot` reads it in a process of its own; a key or a range the
        lake has not, or a query not run yet, is its answer's error."""
        return self._start(f"plot {next(self.reads)} of {order.name} on {order.lake}",
                           a_read("plot", "draw"), lambda drawing: answer_plot(self.spark, order, drawing))

    def _start(self, doing: str, then: Then, work: Callable[[WorkInEngine], None]) -> WorkInEngine:
        """Do `work` in a thread of its own, named `doing` in the engine's status and log (`then`: what the
        machine's failures call it, and what its client does after them); the work says in
        which Spark session it runs (`WorkInEngine.session`), for its stop, and what it raises is its last message
        (`_said`)."""
        served = WorkInEngine(doing, then)

        def in_thread() -> None:
            self.running[id(served)] = doing
            try:
                work(served)
            except Exception as error:
                served.put(_said(error, served, self.root))
            finally:
                self.running.pop(id(served), None)
                served.end()

        served.worker = threading.Thread(target=in_thread, name=doing, daemon=True)
        served.worker.start()
        return served


ORDERS: dict[str, tuple[type, Callable[[RunService, Any], WorkInEngine]]] = {
    "/run": (RunOrder, RunService.execute), "/sql": (SqlOrder, RunService.read), "/plot": (PlotOrder, RunService.plot)}
"""What each path takes, and the service's answer to it."""


class UnreadableOrderError(ValueError):
    """An order whose body is not the JSON object of its kind's fields."""


def read_order(kind: type, body: bytes) -> Any:
    """The order `body` holds, of `kind` (`RunOrder`, `SqlOrder`, `PlotOrder`). An order is refused, in words its
    client shows, when it is not such an object: a client of another pielake sends fields this engine does not
    know, or leaves out ones it needs, and the remedy is one pielake on both sides."""
    try:
        given = json.loads(body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableOrderError(f"it is not JSON ({error})") from None
    if not isinstance(given, dict):
        raise UnreadableOrderError(f"it is JSON's {type(given).__name__}, not an object of {kind.__name__}'s fields")
    known = {field.name: field for field in fields(kind)}
    unknown = sorted(set(given) - set(known))
    missing = [name for name, field in known.items()
               if name not in given and field.default is MISSING and field.default_factory is MISSING]
    if unknown or missing:
        said = "; ".join([f"this engine knows no field {', '.join(unknown)}"] * bool(unknown)
                         + [f"it lacks {', '.join(missing)}"] * bool(missing))
        raise UnreadableOrderError(f"{said}. A client of another pielake sends other fields: use the engine's "
                                   "pielake, or restart the engine with the client's (`pielake engine stop`, then "
                                   "`start`)")
    return kind(**given)


def _token_refusal(given: bool) -> str:
    """Why a request for runs is refused, and how to give the token: a client on the engine's machine reads it
    where the engine keeps it, from the lake's engine file. The answer names no lake, as its asker is unknown."""
    said = ("the token given is not this engine's (each start makes a new one unless PIELAKE_ENGINE_TOKEN sets it)"
            if given else "a token is needed")
    return (f"{said}: on the engine's machine pass --remote alone, which reads it from the lake's "
            f"{V.ENGINE_DIR}/{ENGINE_FILE}; elsewhere --remote sc://HOST:PORT/;token=<that file's token>")


def _said(error: Exception, work: WorkInEngine, root: Path) -> dict[str, Any]:
    """What the client of a run, a statement or a plot that raised `error` hears: that it was stopped, as asked
    (whatever its cancelled Spark jobs raised), its own error (a bad query, a failed gate, a busy lock, a full
    disk), the engine's JVM ended (the engine on lake `root` stops, so it is the engine to start again, not the
    work to give memory), or, the engine going on, what broke in it, whose trace the log keeps."""
    doing = work.doing
    if work.stopped():
        log.warning("%s stopped, as %s: %s", doing, work.why, spark_said(error))
        return {"error": f"{doing} stopped, as {work.why}", "exit_code": EXIT_INTERRUPTED}
    said = for_the_user(error, work.then)
    if isinstance(said, JvmLostError) and said.ended is not None:
        said = _engine_jvm_lost(how_it_ended(said.ended, _engine_log(root)), root, work.then.again)
    if said is not None:
        return {"error": str(said), "exit_code": said.exit_code}
    log.error("%s failed:\n%s", doing, traceback.format_exc())
    return {"error": f"internal error in the engine: {type(error).__name__}: {error}", "exit_code": EXIT_INTERNAL}


def _closed(connection: socket.socket) -> bool:
    """Whether the client has closed its end: it sends nothing after its order, so the socket reads, at its
    end, empty."""
    readable, _, _ = select.select([connection], [], [], 0)
    try:
        return bool(readable) and not connection.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


class WorkInEngine:
    """A run order, a statement or a plot the engine serves in a thread of its own: the messages it says, and its
    stop.

    Work whose client has gone is stopped, as a run's process ends when Airflow kills its task or the user
    presses Ctrl-C: left to run, a run would publish for no one, and an Airflow task's retry of the step would
    wait for it; a statement would read rows for no one. Its Spark jobs are cancelled, those it starts later too,
    in the session it runs in (a whole run's or a statement's own; a step's, while it has its run's turn, as the
    run's other steps wait meanwhile), so that a step fails where it is, as a step whose process died does
    (`RunStopped`).

    Its messages wait in a short queue: a statement's rows are read from Spark as its client takes them, not
    held whole in the engine's memory."""

    ENDED: ClassVar[dict[str, Any]] = {}  # the last message: the work has ended
    WAITING = 4  # messages said and not yet sent to the client, at most

    def __init__(self, doing: str, then: Then):
        self.doing = doing
        self.then = then
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue(self.WAITING)
        self.asked = threading.Event()
        self.why = ""
        self.session: SparkSession | None = None  # where its Spark work runs, while it runs there
        self.worker: threading.Thread | None = None

    def __call__(self, line: str) -> None:
        """A progress line of the work's."""
        self.put({"progress": line})

    def put(self, message: dict[str, Any]) -> None:
        self.messages.put(message)

    def end(self) -> None:
        self.messages.put(self.ENDED)

    def next_message(self, timeout: float) -> dict[str, Any] | None:
        """The work's next message, or None if it says none within `timeout` seconds."""
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    def stopped(self) -> bool:
        return self.asked.is_set()

    def stop(self, why: str) -> None:
        """Stop the work: cancel its Spark jobs until it has ended, from a thread of their own."""
        if self.asked.is_set():
            return
        self.why = why
        self.asked.set()
        threading.Thread(target=self._cancel, name=f"stop {self.doing}", daemon=True).start()

    def _cancel(self) -> None:
        while self.worker is not None and self.worker.is_alive():
            if self.session is not None:
                self.session.interruptAll()
            self.worker.join(CANCEL_EVERY_SECONDS)


def run_order(spark: SparkSession, held: HeldRuns, order: RunOrder, running: WorkInEngine) -> dict[str, Any]:
    """Run an order as `pielake run` or an Airflow task runs it in a process of its own: a whole run in a session
    of `spark`'s; a step in its run's session, its stage outputs held in memory for the run's next step
    (`pielake.engine.held`). It says its progress to `running`, and stops where it is when `running` is
    stopped."""
    plan = load_runnable(order.query, order.name)
    request = RunRequest(**order.request)
    if order.step is None:
        running.session = spark.newSession()
        summary = run_query(Lake(running.session, order.lake), plan, order.run_id, request, progress=running,
                            stopped=running.stopped)
        return {"summary": summary.render(), "matches": summary.matches}
    key, run = RunKey.of(order.lake, order.name, order.run_id), None
    try:
        with held.turn(key) as kept:
            if running.stopped():  # before its turn came
                raise RunStopped(f"run {order.run_id} of query {order.name} stopped before {order.step}, as asked")
            running.session = kept.session
            try:
                run = Run(Lake(kept.session, order.lake).staged_in(kept.staging), plan, order.run_id, request,
                          progress=running, stopped=running.stopped)
                outcome = run.resume(order.step, kept.done)
            finally:
                running.session = None  # the run's next step has the turn, and the session, next
    finally:
        if run is not None and run.over:  # after its turn: freeing a run waits for the step that has the turn
            held.release(key)
    held.release_others(key)
    if isinstance(outcome, StageResult):
        return {"step": order.step, "rows": outcome.rows, "seconds": round(outcome.seconds, 3),
                "parts": {name: round(seconds, 3) for name, seconds in outcome.parts.items()}}
    return {"step": order.step, "gate": outcome.text() if outcome else "skipped"}


def answer_sql(spark: SparkSession, order: SqlOrder, reading: WorkInEngine) -> None:
    """Answer a statement as `pielake sql` in a process of its own does, in a session of `spark`'s (the views of
    the lake's tables it registers are its own, and its current database holds no table,
    `use_statements_database`): its formatted pieces as Spark gives rows, then an empty result. A statement whose
    client has gone reads no further."""
    reading.session = spark.newSession()
    use_statements_database(reading.session)
    as_of = None if order.as_of is None else as_of_time(order.as_of)
    for piece in query_lake(Lake(reading.session, order.lake), order.statement, order.fmt, as_of, reading):
        if reading.stopped():
            return
        reading.put({"rows": piece})
    reading.put({"result": {}})


def answer_plot(spark: SparkSession, order: PlotOrder, drawing: WorkInEngine) -> None:
    """Answer a plot's timeline as `pielake plot` in a process of its own reads it, in a session of `spark`'s: the
    timeline as JSON, which its client draws."""
    drawing.session = spark.newSession()
    picture = timeline(Lake(drawing.session, order.lake), load_runnable(order.query, order.name),
                       tuple(order.key) or None, order.since, order.until)
    drawing.put({"result": picture.to_json()})
