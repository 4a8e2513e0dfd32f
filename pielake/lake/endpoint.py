"""`pielake serve`: the Spark Thrift Server over the lake, so beeline, JDBC and ODBC clients (BI tools) query
`matches_<query>` and every other lake table by name.

The server runs inside this process's Spark session (`HiveThriftServer2.startWithContext`), and that session
also owns the catalog (`pielake.lake.catalog`): it registers the lake's tables before serving and again every
`refresh` seconds, so a table a later run creates is served without a restart. Both have to be one process
because the default catalog, an embedded Derby database, admits one process at a time.

Hive opens each client session with a class loader of its own that sees only the JVM's system class path, not
the jars Spark loads from `spark.jars.packages`; a session that cannot load Delta's catalog fails at connect
(delta-io/delta#1332). So Delta's jars are resolved first and put on the driver's class path as well.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from pielake import vocabulary as V
from pielake.engine.session import build_session, delta_package, resolve_jars
from pielake.errors import PielakeError
from pielake.lake.catalog import DATABASE, Metastore, register_tables
from pielake.lake.delta import Lake


@dataclass(frozen=True)
class Endpoint:
    """Where the Thrift server listens, and how often it looks for new lake tables."""

    host: str = "127.0.0.1"
    port: int = 10000
    refresh: float = 30.0

    @property
    def url(self) -> str:
        return f"jdbc:hive2://{self.host}:{self.port}/{DATABASE}"

    def check_free(self) -> None:
        """Fail with one line if the port is taken: the Thrift server itself would exit the JVM without a word."""
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((self.host, self.port))
            except OSError as error:
                raise PielakeError(f"cannot listen on {self.host}:{self.port} ({error.strerror}); "
                                   "pass another --port or stop what uses it") from None


@contextmanager
def sole_server(root: Path, endpoint: Endpoint) -> Iterator[None]:
    """Hold the lake's embedded catalog for this process, or say which endpoint holds it.

    Derby would refuse a second process only after Spark and Hive started, with thousands of lines of stack
    traces. An OS lock on `<lake>/_catalog/endpoint.lock` says it before anything starts, and the kernel releases
    it when the process ends, however it ends, so it never goes stale.
    """
    folder = root / V.CATALOG_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "endpoint.lock").open("a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise PielakeError(f"an endpoint already serves {root} ({handle.read().strip() or 'starting'}); its "
                               "embedded catalog admits one process: stop it first (infra/sql-endpoint.sh stop), "
                               "or give both an external metastore (--metastore-url)") from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}, {endpoint.url}")
        handle.flush()
        yield


def serve(lake_dir: str | Path, endpoint: Endpoint, *, metastore: Metastore | None = None,
          master: str | None = None, packages: Sequence[str] = (), stop: threading.Event | None = None,
          say: Callable[[str], None] = print) -> None:
    """Serve the lake over JDBC until `stop` is set (or the process is interrupted).

    Args:
        lake_dir: the lake folder; its tables are registered in `metastore` and served.
        endpoint: host, port and the refresh interval of the table registration.
        metastore: the catalog; None: embedded Derby under `<lake>/_catalog/`.
        master: the Spark master the queries run on (`local[*]` by default).
        packages: Maven coordinates to load besides Delta's, e.g. the metastore's JDBC driver.
        stop: set it to shut the server down (the CLI sets it on SIGTERM).
        say: where the `ready:` line and the registrations are reported.
    """
    endpoint.check_free()
    root = Path(lake_dir).resolve()
    metastore = metastore or Metastore()
    with sole_server(root, endpoint) if metastore.embedded else nullcontext():
        _serve(root, endpoint, metastore, master=master, packages=packages, stop=stop or threading.Event(), say=say)


def _serve(root: Path, endpoint: Endpoint, metastore: Metastore, *, master: str | None, packages: Sequence[str],
           stop: threading.Event, say: Callable[[str], None]) -> None:
    classpath = resolve_jars([delta_package(), *packages])
    spark = build_session(master, app_name="pielake-sql-endpoint", packages=packages, conf={
        **metastore.spark_conf(root),
        "spark.driver.extraClassPath": os.pathsep.join(classpath),
        "spark.hadoop.hive.server2.thrift.bind.host": endpoint.host,
        "spark.hadoop.hive.server2.thrift.port": str(endpoint.port),
    })
    try:
        lake = Lake(spark, root)
        tables = register_tables(lake)
        server = spark._jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
            spark._jsparkSession.sqlContext())
        say(f"ready: {endpoint.url} serves {len(lake.tables())} tables of {root} "
            f"({len(tables)} newly registered)")
        try:
            while not stop.wait(endpoint.refresh):
                for name in register_tables(lake):
                    say(f"registered {name}")
        finally:
            server.stop()
    finally:
        spark.stop()
