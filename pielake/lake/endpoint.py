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

import os
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pielake.errors import PielakeError
from pielake.lake.catalog import DATABASE, Metastore, register_tables
from pielake.lake.delta import Lake
from pielake.spark.session import build_session, delta_package, resolve_jars


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
    classpath = resolve_jars([delta_package(), *packages])
    spark = build_session(master, app_name="pielake-sql-endpoint", packages=packages, conf={
        **(metastore or Metastore()).spark_conf(root),
        "spark.driver.extraClassPath": os.pathsep.join(classpath),
        "spark.hadoop.hive.server2.thrift.bind.host": endpoint.host,
        "spark.hadoop.hive.server2.thrift.port": str(endpoint.port),
    })
    stop = stop or threading.Event()
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
