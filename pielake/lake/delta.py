"""Every read and write of the lake goes through this module.

A lake is a folder; each table is a Delta table in a sub-folder named after it. Table names are validated
(lower-case identifiers), so no name can reach outside the lake or carry SQL. Writes are safe to re-run: a stage
replaces exactly what it owns (the whole table, a `replaceWhere` partition, or with `replace_rows` a set of rows
named by their natural key), so running a stage twice gives the same table. A run's commits to the tables
users read (`once`) go further: Delta records each under the run's id and skips a repeat, so a retried step
can never apply a run twice.

Stages write to `<lake>/_staging/`, a lake of its own that `tables()` and SQL never show (or, for a run in one
process, to the Spark session: `pielake.lake.staging`): a run's rows are published into the lake only after the
data-quality gates passed (write-audit-publish).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from itertools import takewhile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urljoin, urlparse

import pyspark.sql.functions as F
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession

from pielake import vocabulary as V
from pielake.engine.session import settings_within
from pielake.errors import PielakeError
from pielake.lake import results

if TYPE_CHECKING:
    from pielake.lake.staging import Staging

COMMIT_FILE = re.compile(r"\d{20}\.json")
DELETE = "__delete"
LOG_RETENTION = "delta.logRetentionDuration"
RUN_COMMITS_KEPT = "interval 30 days"  # how long a table remembers which runs committed to it (`Lake.once`)
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
NEW_TABLES = "spark.databricks.delta.properties.defaults."  # + a property: what a table a write creates takes


def quoted_identifier(name: str) -> str:
    """A path or column name as a Spark SQL identifier: in backticks, each backtick in it doubled."""
    return "`" + name.replace("`", "``") + "`"


class LakeError(PielakeError):
    """A lake or table that cannot be used as asked."""


def _commits(folder: Path) -> list[Path]:
    log = folder / "_delta_log"
    return [p for p in log.iterdir() if COMMIT_FILE.fullmatch(p.name)] if log.is_dir() else []


def _actions(commit: Path) -> list[dict]:
    """The actions of one commit file of a Delta log, one JSON object a line."""
    return [json.loads(line) for line in commit.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Commit:
    """One commit of a Delta table: its version, its `commitInfo` (operation, timestamp, `userMetadata`), the
    application ids of the transactions it records (`Lake.once`), and the statistics of each file it adds (Delta's
    JSON text, None for a file written without them)."""

    version: int
    info: dict
    writers: frozenset[str]
    added: tuple[str | None, ...] = ()

    @property
    def note(self) -> str | None:
        """The `commit_note` the write was given, if any."""
        return self.info.get("userMetadata")

    def minima(self, column: str) -> list[object] | None:
        """The least value of `column` in each file the commit adds, as Delta's statistics record it (a timestamp
        to the millisecond below, as ISO-8601 text), or None where a file records none: what the rows it adds
        start from, read from the log with no Spark job."""
        minima = [_minimum(stats, column) for stats in self.added]
        return None if not minima or any(value is None for value in minima) else minima


def _minimum(stats: str | None, column: str) -> object | None:
    """`column`'s least value in one added file's statistics (named in any case, as Spark names columns)."""
    found = json.loads(stats).get("minValues", {}) if stats else {}
    return next((value for name, value in found.items() if name.lower() == column.lower()), None)


def committed(folder: Path) -> bool:
    """A Delta table with at least one commit, read from its log alone (no Spark). A first write killed before its
    commit leaves data files and an empty `_delta_log/`: that is no table yet, and the next write creates it."""
    return bool(_commits(folder))


class Lake:
    """A folder of Delta tables.

    `statistics`: whether writes record Delta's per-file column statistics. Published tables need them (a
    micro-batch's MERGE and a user's filters skip files by them); staged tables are read whole or by partition,
    so computing them there would only cost time (a large share of writing a staged table).
    `staging`: where stage outputs wait for their gates; by default the lake `_staging/` inside this one.
    `results`: whether the names of the published kinds (`matches_<query>`, ...) read their rows of the query's
    one results table (`pielake.lake.results`); `_staging/` stages each kind as a table of its own.
    """

    def __init__(self, spark: SparkSession, root: str | Path, *, statistics: bool = True,
                 staging: Staging | None = None, results: bool = True):
        self.spark = spark
        self.root = Path(root).resolve()
        self.statistics = statistics
        self._staging = staging
        self.results = results

    @property
    def staging(self) -> Staging:
        """Where a run's outputs wait for their gates: a lake inside this one, invisible to `tables()`, unless
        this lake was given another place (`staged_in`)."""
        return self._staging or Lake(self.spark, self.root / V.STAGING_DIR, statistics=False, results=False)

    def staged_in(self, staging: Staging) -> Lake:
        """This lake, with its stage outputs waiting in `staging` instead of `_staging/`."""
        return Lake(self.spark, self.root, statistics=self.statistics, staging=staging, results=self.results)

    def _holder(self, table: str) -> tuple[str, str | None]:
        """The table that holds `table`'s rows, and the kind they are there (None: the table itself)."""
        found = results.kind_table(table) if self.results else None
        return found if found is not None else (table, None)

    def holder(self, name: str) -> str:
        """The table that holds the rows read by `name`: itself, or the results table of a kind
        (`matches_<query>`: `results_<query>`)."""
        return self._holder(name)[0]

    def path(self, table: str) -> str:
        """The folder of a table. A kind's rows have none of their own: they are written to, and maintained as,
        their results table."""
        if not V.TABLE_NAME.fullmatch(table):
            raise LakeError(f"'{table}' is not a valid table name")
        holder, kind = self._holder(table)
        if kind is not None:
            raise LakeError(f"'{table}' is the {kind} of table '{holder}': write or maintain '{holder}'")
        return str(self.root / table)

    def exists(self, table: str) -> bool:
        return committed(self.root / self._holder(table)[0])

    def tables(self) -> list[str]:
        """The lake's Delta tables. A folder under a kind's name (`matches_<query>`, a table of its own before
        the kinds shared `results_<query>`) is none of them: nothing reads it."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if V.TABLE_NAME.fullmatch(p.name) and committed(p)
                      and self._holder(p.name)[1] is None)

    def read(self, table: str, version: int | None = None) -> DataFrame:
        """The table, or its snapshot at `version` (what a run read stays what it reads in every step). A kind's
        rows (`matches_<query>`) are read from the query's results table, at its `version`."""
        if not self.exists(table):
            raise LakeError(f"no table '{table}' in the lake at {self.root}")
        holder, kind = self._holder(table)
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        rows = reader.load(self.path(holder))
        return rows if kind is None else results.unpack(rows, kind)

    def file_stats(self, table: str, version: int) -> tuple[int, int]:
        """How many data files the table's snapshot at `version` has, and their total size in bytes."""
        checksum = self._checksum(table, version)
        if checksum is not None:
            return int(checksum["numFiles"]), int(checksum["tableSizeBytes"])
        detail = self._detail(table)
        return int(detail["numFiles"]), int(detail["sizeInBytes"])

    def plain_files(self, table: str, version: int) -> tuple[str, ...]:
        """The local Parquet files of the table's snapshot at `version`, if a reader of those files alone gets
        exactly the table's rows, else none.

        None where a file may hold rows the log deleted (deletion vectors), columns under other names (column
        mapping) or of older types (type widening), which all need a reader version above 1, where part of a row
        lies in a file's path (partition columns), or where a file is not on this machine's file system.
        """
        checksum = self._checksum(table, version)
        if checksum is not None and checksum.get("allFiles") is not None:
            protocol, metadata = checksum["protocol"], checksum["metadata"]
            reader, partitioned = protocol["minReaderVersion"], bool(metadata["partitionColumns"])
            uris = [urljoin(Path(self.path(table)).as_uri() + "/", f["path"]) for f in checksum["allFiles"]]
        else:
            detail = self._detail(table)
            reader, partitioned = detail["minReaderVersion"], bool(detail["partitionColumns"])
            uris = self.read(table, version).inputFiles() if reader <= 1 and not partitioned else []
        files = [urlparse(uri) for uri in uris]
        if reader > 1 or partitioned or any(f.scheme != "file" for f in files):
            return ()
        return tuple(unquote(f.path) for f in files)

    def _checksum(self, table: str, version: int) -> dict | None:
        """The version checksum Delta writes beside a commit (`<version>.crc`), if there is one: the snapshot's
        file count and size, protocol and metadata, and (for a table of few files) every file it holds.

        Read as a file, it costs nothing; asked of Delta, the same facts cost a snapshot's state reconstruction,
        a Spark job in every run, however warm the session.
        """
        path = Path(self.path(table)) / "_delta_log" / f"{version:020d}.crc"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _detail(self, table: str) -> Row:
        """Delta's detail of the table's newest snapshot (files, size, protocol, partitioning, properties): what the
        readers of a version's checksum fall back on where the log has none. A Spark job, however warm the
        session."""
        return DeltaTable.forPath(self.spark, self.path(table)).detail().first()

    def _properties(self, table: str, version: int) -> dict[str, str]:
        """The table's properties at `version`: from its checksum where there is one (`_checksum` says why), else
        from Delta's detail of the table."""
        checksum = self._checksum(table, version)
        if checksum is not None:
            return dict(checksum["metadata"].get("configuration", {}))
        return self._detail(table)["properties"]

    def last_commit(self, table: str) -> dict:
        """The newest commit's `commitInfo` (operation, metrics) and `version`, read from its log file (`history`):
        every write asks for its row counts here."""
        newest = self._newest(table)
        return {**newest.info, "operationMetrics": newest.info.get("operationMetrics", {}), "version": newest.version}

    def history(self, table: str) -> Iterator[Commit]:
        """The table's commits (for a kind, its results table's), newest first, read from its log files one at a
        time: a caller that stops after the few it asks about reads only those. `DeltaTable.history()` would cost
        a snapshot and a Spark job, however warm the session."""
        for commit in sorted(_commits(Path(self.path(self._holder(table)[0]))), key=lambda p: int(p.stem),
                             reverse=True):
            actions = _actions(commit)
            yield Commit(int(commit.stem), next((a["commitInfo"] for a in actions if "commitInfo" in a), {}),
                         frozenset(a["txn"]["appId"] for a in actions if "txn" in a),
                         tuple(a["add"].get("stats") for a in actions if "add" in a))

    def commits_after(self, table: str, version: int) -> Iterator[Commit]:
        """The table's commits after `version`, newest first (`history`), reading its log no further back."""
        return takewhile(lambda commit: commit.version > version, self.history(table))

    def _newest(self, table: str) -> Commit:
        newest = next(self.history(table), None)
        if newest is None:
            raise LakeError(f"no table '{table}' in the lake at {self.root}")
        return newest

    def committed_by(self, table: str, writer: str, since: datetime) -> bool:
        """Whether `writer` (`once`) has committed to the table at or after `since`: its commits are those that
        record a transaction of its application id. Read down to the first commit older than `since`, so a
        question about a run costs the few commits made while it ran."""
        floor = since.timestamp() * 1000
        for commit in self.history(table):
            if writer in commit.writers:
                return True
            if commit.info.get("timestamp", 0) < floor:
                return False
        return False

    def commit_note(self, table: str) -> str | None:
        """The `commit_note` the table's last write was given (its `userMetadata`), if any."""
        return self._newest(table).note

    def done_with(self, table: str) -> None:
        """Nothing to free: a staged Delta table stays until the next run replaces it, for a retried step."""

    def version(self, table: str) -> int:
        return int(self.last_commit(table)["version"])

    def overwrite(self, df: DataFrame, table: str, *, partition_by: tuple[str, ...] = (),
                  replace_where: str | None = None, rows_per_file: int | None = None,
                  commit_note: str | None = None) -> int:
        """Replace the table (or the part `replace_where` selects) with `df`, in one Delta transaction, in
        files of at most `rows_per_file` rows if given; `commit_note` is kept as the commit's `userMetadata`.

        Returns the rows written, from the commit's own metrics rather than by reading the table again.
        """
        writer = df.write.format("delta").mode("overwrite")
        if replace_where is not None and self.exists(table):
            writer = writer.option("replaceWhere", replace_where)
        else:
            writer = writer.option("overwriteSchema", "true")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        if commit_note is not None:
            writer = writer.option("userMetadata", commit_note)
        with self.writing(rows_per_file):
            writer.save(self.path(table))
        return self.rows_written(table, replace_where)

    @contextmanager
    def writing(self, rows_per_file: int | None = None, *, plain: tuple[str, ...] = (),
                note: str | None = None) -> Iterator[None]:
        """Session settings for the writes within, restored after: files of at most `rows_per_file` rows
        (Spark's `maxRecordsPerFile`, which MERGE takes only from the session: a table written in time order
        keeps each stretch of time in files of its own), and no statistics in a lake that keeps none.

        The columns named `plain` are written without Parquet's dictionary encoding: meant for times, nearly
        all distinct in a file, whose dictionary costs a hash lookup per value and ends up no smaller than the
        values. Parquet reads per-column settings from the write's Hadoop configuration, which Spark builds from
        the session's.

        `note` is every commit's `userMetadata` (`commit_note`), as Delta takes it for a MERGE: from the session.
        """
        settings = {f"parquet.enable.dictionary#{column}": "false" for column in plain}
        if note is not None:
            settings[USER_METADATA] = note
        if rows_per_file is not None:
            settings["spark.sql.files.maxRecordsPerFile"] = str(rows_per_file)
        if not self.statistics:
            settings["spark.databricks.delta.stats.collect"] = "false"
        with settings_within(self.spark, settings):
            yield

    @contextmanager
    def once(self, writer: str) -> Iterator[None]:
        """Every Delta commit within is `writer`'s (a run of a query), made at most once per table: Delta's
        idempotent writes, with `writer` as the transaction's application id and 0 as its version, skip a write (an
        append, an overwrite, a MERGE) to a table that already holds a commit of `writer`. A retried task then
        changes nothing its first attempt committed, whatever it recomputed. Settings of the session, so the
        writes of the threads within share them; tables created within remember a writer's commits for
        `RUN_COMMITS_KEPT`, the longest a retry is expected to wait (a repeat after that applies again).
        """
        with settings_within(self.spark, {TXN_APP_ID: writer, TXN_VERSION: "0",
                                          f"{NEW_TABLES}setTransactionRetentionDuration": RUN_COMMITS_KEPT}):
            yield

    def optimize(self, table: str, *, order: tuple[str, ...] = (), file_bytes: int | None = None) -> tuple[int, int]:
        """Delta's `OPTIMIZE`: the table's files smaller than `file_bytes` rewritten into files of about that size,
        and with `order`, every file rewritten in Z-order on those columns. Returns (files removed, files added).

        Built from the lake's own path and the query's column names only, each quoted as an identifier."""
        statement = f"OPTIMIZE delta.{quoted_identifier(self.path(table))}"
        if order:
            statement += f" ZORDER BY ({', '.join(quoted_identifier(c) for c in order)})"
        settings = {} if file_bytes is None else {f"spark.databricks.delta.optimize.{bound}FileSize": str(file_bytes)
                                                  for bound in ("min", "max")}
        with settings_within(self.spark, settings):
            metrics = self.spark.sql(statement).first()["metrics"]
        return int(metrics["numFilesRemoved"]), int(metrics["numFilesAdded"])

    def vacuum(self, table: str, *, keep_hours: int) -> int:
        """Delta's `VACUUM`: delete the files no snapshot of the last `keep_hours` hours reads. Returns how many,
        from the `VACUUM END` commit Delta logs.

        Delta refuses to keep less than a week unless its check is off: asking for less is the caller's decision,
        so the check is off for this statement alone. Delta lists the table's folders in a Spark job of Spark's
        partition-discovery parallelism, 10,000 tasks by default, for a table of a few folders: here as many as
        the session's shuffles have."""
        settings = {"spark.databricks.delta.retentionDurationCheck.enabled": "false",
                    "spark.databricks.delta.vacuum.logging.enabled": "true",
                    "spark.sql.sources.parallelPartitionDiscovery.parallelism":
                        self.spark.conf.get("spark.sql.shuffle.partitions")}
        with settings_within(self.spark, settings):
            path = quoted_identifier(self.path(table))
            self.spark.sql(f"VACUUM delta.{path} RETAIN {int(keep_hours)} HOURS").collect()
        return int(self.last_commit(table)["operationMetrics"].get("numDeletedFiles", 0))

    def keep_log(self, table: str, retention: str) -> bool:
        """Give the table the log retention `retention` (`delta.logRetentionDuration`) if it has another; returns
        whether it changed. A change is a commit of the table's metadata, which fails a write committed at the
        same moment (Delta's concurrency control): made once per table, not at every call."""
        path = f"delta.{quoted_identifier(self.path(table))}"
        rows = self.spark.sql(f"SHOW TBLPROPERTIES {path} ('{LOG_RETENTION}')").collect()
        if rows and rows[0]["value"] == retention:
            return False
        self.spark.sql(f"ALTER TABLE {path} SET TBLPROPERTIES ('{LOG_RETENTION}' = '{retention}')").collect()
        return True

    def rows_written(self, table: str, where: str | None = None) -> int:
        """Rows the table's last commit wrote (`where`: the part it replaced), from its metrics.

        A commit that wrote no file has no row count. Neither has (Delta 4.0) a `replaceWhere` write without
        statistics, as staged tables are written: those rows are counted in the table.
        """
        metrics = self.last_commit(table)["operationMetrics"]
        if "numOutputRows" in metrics or int(metrics.get("numFiles", 0)) == 0:
            return int(metrics.get("numOutputRows", 0))
        written = self.read(table)
        return (written if where is None else written.filter(F.expr(where))).count()

    def replace_rows(self, rows: DataFrame, table: str, *, natural_key: tuple[str, ...], stale: DataFrame,
                     ignore: tuple[str, ...] = (), target_only: Column | None = None,
                     rows_per_file: int | None = None) -> dict[str, int]:
        """In one MERGE: insert `rows`, update the ones whose natural key exists, delete the rows in `stale`.

        `natural_key` names columns or struct fields (`matches.a_ts`), compared NULL-safe; `stale` holds the
        table's columns that carry them. A row that is already there unchanged (columns in `ignore`, like the run
        id, aside) is left alone, so re-running a run rewrites nothing. `target_only`, a condition on the table's
        columns (alias `t`) that every row the source names satisfies, lets Delta skip the files that cannot hold
        one; rewritten files hold at most `rows_per_file` rows. Returns the commit's inserted/updated/deleted
        counts.
        """
        if not self.exists(table):
            return {"inserted": self.overwrite(rows, table), "updated": 0, "deleted": 0}
        source = (rows.withColumn(DELETE, F.lit(False))
                  .unionByName(stale.withColumn(DELETE, F.lit(True)), allowMissingColumns=True))
        same_key = reduce(Column.__and__, (F.col(f"t.{c}").eqNullSafe(F.col(f"s.{c}")) for c in natural_key),
                          F.lit(True) if target_only is None else target_only)
        compared = [c for c in rows.columns if c not in natural_key and c not in ignore]
        changed = reduce(lambda a, b: a | b, (~F.col(f"t.{c}").eqNullSafe(F.col(f"s.{c}")) for c in compared),
                         F.lit(False))
        values = {c: F.col(f"s.{c}") for c in rows.columns}
        keep = ~F.col(f"s.{DELETE}")
        merge = (DeltaTable.forPath(self.spark, self.path(table)).alias("t").merge(source.alias("s"), same_key)
                 .whenMatchedDelete(condition=F.col(f"s.{DELETE}"))
                 .whenMatchedUpdate(condition=keep & changed, set=values)
                 .whenNotMatchedInsert(condition=keep, values=values))
        with self.writing(rows_per_file):
            merge.execute()
        metrics = self.last_commit(table)["operationMetrics"]
        return {k: int(metrics.get(f"numTargetRows{k.capitalize()}", 0)) for k in ("inserted", "updated", "deleted")}

    def append(self, df: DataFrame, table: str, *, change_feed: bool = False, writer: str | None = None,
               replace: bool = False) -> None:
        """Append `df` (with `replace`, write it in place of the table's rows and columns); with a `writer`, the
        write is made `once`. A table this write creates with `change_feed` records its inserts for
        `inserted_since` from its first commit, and remembers its writers' commits as long as `once` says: the
        write takes those properties from the session (`NEW_TABLES`), so the table is created by the commit of its
        first rows, not by a commit of its own before them: a stream's first run makes one commit fewer
        (docs/performance.md)."""
        created = {} if not change_feed or self.exists(table) else {
            f"{NEW_TABLES}enableChangeDataFeed": "true",
            f"{NEW_TABLES}setTransactionRetentionDuration": RUN_COMMITS_KEPT}
        write = df.write.format("delta")
        write = write.mode("overwrite").option("overwriteSchema", "true") if replace else write.mode("append")
        with self.writing(), settings_within(self.spark, created), \
                self.once(writer) if writer is not None else nullcontext():
            write.save(self.path(table))

    def inserted_since(self, table: str, version: int) -> DataFrame | None:
        """Rows inserted after `version` (from the Change Data Feed: only the newer files are read), or None if
        the table does not record its changes, or its log no longer reaches back to `version` (Delta deletes
        commits older than the table's `delta.logRetentionDuration`)."""
        held = [int(p.stem) for p in _commits(Path(self.path(table)))]  # one listing of the log for both bounds
        newest = max(held)
        if self._properties(table, newest).get("delta.enableChangeDataFeed") != "true":
            return None
        if newest <= version:
            return self.read(table).limit(0)
        if min(held) > version + 1:
            return None
        changes = (self.spark.read.format("delta").option("readChangeFeed", "true")
                   .option("startingVersion", version + 1).load(self.path(table)))
        return changes.filter(F.col("_change_type") == "insert").drop("_change_type", "_commit_version",
                                                                       "_commit_timestamp")

    def readable(self) -> list[str]:
        """Every name the lake's rows are read by: its tables, and each results table's kinds."""
        names = self.tables()
        return sorted({*names, *(kind for name in names for kind in results.kind_names(name))})

    def register_views(self, as_of: datetime | None = None) -> dict[str, int | None]:
        """Make every table of the lake, and every kind of a results table, queryable by name in Spark SQL, as it
        is or as it was at `as_of` (`version_at`; a table created after it is left out, and so is a view of it
        an earlier statement of the session registered); returns each name's version read (None: the newest)."""
        names = self.readable()
        holders = {self.holder(name) for name in names}  # a results table once for all of its kinds
        held = {} if as_of is None else {table: self.version_at(table, as_of) for table in holders}
        versions = {name: held.get(self.holder(name)) for name in names}  # a kind's is its results table's
        read = {name: version for name, version in versions.items() if as_of is None or version is not None}
        for name in versions:
            if name in read:
                self.read(name, read[name]).createOrReplaceTempView(name)
            else:
                self.spark.catalog.dropTempView(name)
        return read

    def version_at(self, table: str, moment: datetime) -> int | None:
        """The table's newest version committed at or before `moment`, by its commit's time (the one `DESCRIBE
        HISTORY` shows, at most a few milliseconds before the one Delta's `TIMESTAMP AS OF` goes by), or None if
        the table had none yet. A moment before the oldest commit the log still keeps, where that is not the
        table's first (Delta drops log entries older than `delta.logRetentionDuration`), is refused: which version
        was then the newest is no longer known."""
        floor, oldest = moment.timestamp() * 1000, None
        for commit in self.history(table):
            if commit.info.get("timestamp", 0) <= floor:
                return commit.version
            oldest = commit
        if oldest is not None and oldest.version > 0:
            kept = datetime.fromtimestamp(oldest.info.get("timestamp", 0) / 1000, UTC)
            raise LakeError(f"table '{self.holder(table)}' keeps its history from version {oldest.version}, "
                            f"committed at {kept:%Y-%m-%d %H:%M:%S} UTC: read a time after it (`pielake maintain "
                            "--keep-days` is how long a lake keeps its tables' past)")
        return None
