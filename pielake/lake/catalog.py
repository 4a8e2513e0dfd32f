"""The lake's tables in a persistent catalog (a Hive metastore), so SQL clients find them by name.

`pielake sql` reads the lake through temporary views that live as long as its session. The SQL endpoint
(`pielake.lake.endpoint`) serves many sessions over JDBC, and each Thrift session is a new Spark session, so the
tables must be in a catalog every session shares: Spark's Hive metastore. By default it is an embedded Derby
database under `<lake>/_catalog/`, so the lake folder still holds a whole deployment; any JDBC database Hive
supports (PostgreSQL, MySQL) replaces it by configuration.

Each lake table is registered as an external Delta table at its folder: the catalog keeps only the name and the
location, and every read sees the table's newest version, so publishing a run needs no catalog update. Only a
table that did not exist yet (the first run of a new query) has to be registered, which `register_tables` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pielake import vocabulary as V
from pielake.engine.jvm import file_option

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pielake.lake.delta import Lake

DATABASE = "default"
STATEMENTS = "pielake_statements"
"""A database that holds no table, the current one of each `pielake sql` statement the engine reads: a name the
statement gives is then one of the views of the lake it names, as of its `--as-of`, as in a process of its own,
and never a table of the engine's own lake that its catalog holds in `DATABASE` for JDBC's clients (one the
statement's lake has not, or had not yet)."""
PASSWORD_VARIABLE = "PIELAKE_METASTORE_PASSWORD"  # never an argument: arguments show in `ps`


@dataclass(frozen=True)
class Metastore:
    """Where the catalog lives: `url` None is the embedded Derby database under `<lake>/_catalog/`.

    An embedded Derby database takes one process at a time: the endpoint holds it while it runs.
    """

    url: str | None = None  # a JDBC URL, e.g. jdbc:postgresql://db:5432/metastore
    driver: str | None = None  # its JDBC driver class, e.g. org.postgresql.Driver
    user: str | None = None

    @property
    def embedded(self) -> bool:
        """The lake's own Derby database, which one process at a time may open."""
        return self.url is None

    def spark_conf(self, lake_root: Path) -> dict[str, str]:
        """The Spark settings of a session whose catalog is this metastore."""
        folder = lake_root / V.CATALOG_DIR
        derby = f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
        conf = {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(folder / "warehouse"),
            "spark.hadoop.javax.jdo.option.ConnectionURL": derby if self.embedded else str(self.url),
            # a new metastore database gets Hive's schema on first use instead of a separate schematool run
            "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
            "spark.hadoop.hive.metastore.schema.verification": "false",
            "spark.driver.extraJavaOptions": file_option("-Dderby.system.home=", folder),  # derby.log beside it
        }
        for key, value in (("ConnectionDriverName", self.driver), ("ConnectionUserName", self.user),
                           ("ConnectionPassword", os.environ.get(PASSWORD_VARIABLE))):
            if value:
                conf[f"spark.hadoop.javax.jdo.option.{key}"] = value
        return conf


def register_tables(lake: Lake, listed: list[str]) -> list[str]:
    """Register every table of the lake (`listed`, as `Lake.tables` just listed them) the catalog does not know
    yet, and each kind of a results table as a view; returns their names. The catalog gets `STATEMENTS` too.

    The lake's session must use the metastore (`Metastore.spark_conf`). A table is registered through Spark's
    Catalog API with its validated name and folder. A kind's view has no such API: its statement is built from
    the lake's validated table names, the results table's own column names, each quoted as an identifier, and
    the kind's name, one of pielake's own words (`kind_view`). No query text reaches it.
    """
    from pielake.lake import results  # noqa: PLC0415 (Spark's: the CLI imports this module, and a client no Spark)

    spark = lake.spark
    _make_statements_database(spark)
    known = {table.name for table in spark.catalog.listTables(DATABASE)}
    tables = [name for name in listed if name not in known]
    for name in tables:
        spark.catalog.createTable(f"{DATABASE}.{name}", path=lake.path(name), source="delta")
    views = [(kind, table) for table in listed for kind in results.kind_names(table) if kind not in known]
    for name, table in views:
        spark.sql(kind_view(name, table, lake.read(table).columns)).collect()
    return [*tables, *(name for name, _ in views)]


def use_statements_database(session: SparkSession) -> None:
    """Make `STATEMENTS` the session's current database, creating it first where a SQL client has dropped it: only
    then, so a statement pays no catalog call of its own."""
    from pyspark.errors import AnalysisException  # noqa: PLC0415 (Spark's: the CLI imports this module)

    try:
        session.catalog.setCurrentDatabase(STATEMENTS)
    except AnalysisException:
        _make_statements_database(session)
        session.catalog.setCurrentDatabase(STATEMENTS)


def _make_statements_database(spark: SparkSession) -> None:
    """Create `STATEMENTS` where the catalog has it not: at the engine's start, and again with the tables, should a
    SQL client drop it (a metastore shared by several engines has it once)."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {STATEMENTS} COMMENT 'holds no table: the current database of the "
              "statements pielake sql sends to an engine, which read the lake they name through views of their "
              "own'").collect()


@dataclass
class CatalogRegistration:
    """The lake's tables registered as they appear: what the engine does every `refresh` seconds.

    Asking the catalog is a metastore call that costs about a tenth of a CPU-second even for an empty lake; a
    listing of the lake's folder costs next to nothing. So a look asks the catalog only when the lake lists other
    tables than at the previous look, and an engine that looks every second idles at under 1% of a core instead of
    12% (docs/performance.md). A table a SQL client drops from the catalog is registered again at the next change
    of the lake's tables, or at the engine's next start.
    """

    lake: Lake
    listed: list[str] | None = field(default=None, init=False)

    def refresh(self) -> list[str]:
        """Register what the lake holds and the catalog does not know, if the lake's tables changed; their names."""
        listed = self.lake.tables()
        if listed == self.listed:
            return []
        registered = register_tables(self.lake, listed)
        self.listed = listed
        return registered


def kind_view(name: str, table: str, columns: list[str]) -> str:
    """The statement of the view `name` (`matches_<query>`) over the results table `table`: the rows
    `results.unpack` reads. Made `WITH SCHEMA EVOLUTION`, Spark's mode for a view whose table may change its
    columns (a query given other RETURN columns and run again)."""
    from pielake.lake import results  # noqa: PLC0415 (as in `register_tables`)
    from pielake.lake.delta import quoted_identifier  # noqa: PLC0415

    kind = results.kind_table(name)[1]
    keys = [f"{quoted_identifier(c)}, " for c in results.key_columns(columns)]
    run = f", {V.RUN_ID}" if kind == V.MATCHES else ""
    return (f"CREATE OR REPLACE VIEW {DATABASE}.{name} WITH SCHEMA EVOLUTION AS SELECT {''.join(keys)}{kind}.*{run} "
            f"FROM {DATABASE}.{table} WHERE {results.KIND} = '{kind}'")

