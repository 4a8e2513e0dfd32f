"""The runs kernel's Arrow backend computes the predicates as Spark and the reference do, or declines them."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark.sql.functions as F
import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from pielake.lake.delta import Lake
from pielake.query.analyzer import load_query
from pielake.query.evaluate import holds, row_evaluator
from pielake.query.time_fields import TIME_FIELDS
from pielake.spark import columns as C
from pielake.spark.compile import Compiler, predicate
from pielake.spark.query import SparkQuery
from pielake.streams import TIMESTAMP_UNIT, StreamSchema

STREAM = StreamSchema("S", ("key",), "ts", "s", (("key", "STRING"), ("ts", "BIGINT"), ("x", "BIGINT"),
                                                  ("y", "DOUBLE"), ("s", "STRING"), ("b", "BOOLEAN"), ("i", "INT")))
XS = [None, -3, -1, 0, 1, 2, 3, 5, 10**6]
IS = [None, -7, 0, 3, 2**31 - 1]
YS = [None, -2.5, 0.0, 0.5, 1.0, 2.0, 3.25]
SS = [None, "a", "b", "c", "ab", "a_b", "a%b", "a\nb", "A", "ab\n", "", "é€"]
BS = [None, True, False]
ROWS = [{"key": "k", "ts": t, "x": XS[t % len(XS)], "y": YS[(t // 2) % len(YS)], "s": SS[(t // 3) % len(SS)],
         "b": BS[(t // 5) % len(BS)], "i": IS[(t // 7) % len(IS)]} for t in range(1, 400)]
COMPUTED = [
    "x > 1", "y <= 2.5", "x > 1.5", "x / y > 1", "x / 0 IS NULL", "x + y * 2 >= 3", "-x < 0", "x * x > 4",
    "NOT b", "b AND x > 0", "b OR y > 1", "x BETWEEN 0 AND 2", "y NOT BETWEEN 1 AND 2", "x IN (1, 3, 5)",
    "s IN ('a', 'b')", "s NOT IN ('a')", "s = 'c'", "s < 'b'", "x IS NULL", "y IS NOT NULL", "abs(x) = 3",
    "least(x, y) < 1", "greatest(x, y, 2) > 2", "coalesce(x, y, 0) > 1", "coalesce(b, false)", "b = true",
    "b != false OR x = 2", "true", "x - 1 = y", "NOT (b AND x > 0)", "NOT (s = 'a' AND b)",
    "sqrt(x * x + y * y) > 2", "sqrt(i) > 100", "sqrt(y) <= 1 OR sqrt(x) = 3",
    # A text's length in characters (code points: `é€` is 2 of them in 5 bytes), a whole number in 64 bits.
    "length(s) = 2", "length(s) * 4611686018427387904 > 0", "length(s) < x OR length(s) IS NULL",
    # Whole-number results beyond 64 bits are NULL; a narrower integer column computes in 64 bits.
    "x * 4611686018427387904 > 0", "x + 9223372036854775807 > 0", "NOT (x - 9223372036854775807 < 0)",
    "-(x - 9223372036854775807 - 1) > 0", "abs(x - 9223372036854775807 - 1) > 0", "i * 1000000000 > 2000000000",
    "i + i > 0", "x < 100000000000000000000",
    # SQL's LIKE, across line breaks; \ makes %, _ and itself stand for themselves.
    "s LIKE 'a%'", "s NOT LIKE '%b'", "s LIKE 'a_b'", "s LIKE 'a\\_b'", "s LIKE '%\\%%'", "s LIKE '_'",
    "s LIKE ''", "s LIKE 'a%b'", "s LIKE '%\n'", "NOT s LIKE 'A' AND s NOT LIKE 'a'",
    "s LIKE 'a!_b' ESCAPE '!'", "s LIKE '%#%%' ESCAPE '#'", "s NOT LIKE 'a__' ESCAPE '_'",
]
# Doubles beyond a double's range are infinities, whose arithmetic gives NaN: Spark's NaN equals itself and is above
# every number, where IEEE's, which Arrow follows, equals nothing and is ordered nowhere.
OF_INFINITIES = [
    "y * 1e308 * 10 IS NULL", "y * 1e308 * 10 - y * 1e308 * 10 > 0", "least(y * 1e308 * 10, 1) = 1",
    "coalesce(y * 1e308 * 10, 0) > 1e308", "x / 1e-308 / 1e-10 > 1e308", "-(y * 1e308 * 10) < -1e308",
    "y * 1e308 * 10 - y * 1e308 * 10 = y * 1e308 * 10 - y * 1e308 * 10", "y * 0 * 1e308 * 10 != y",
    "greatest(y * 1e308 * 10 - y * 1e308 * 10, 1) > 1", "least(y * 1e308 * 10 - y * 1e308 * 10, 1) = 1",
    "greatest(y * 1e308 * 10 - y * 1e308 * 10, x) IS NULL", "greatest(1, y * 1e308 * 10 - y * 1e308 * 10) > 1",
    "y * 1e308 * 10 - y * 1e308 * 10 BETWEEN 0 AND 1e308", "y * 1e308 * 10 - y * 1e308 * 10 IN (1, y)",
    "x * 1e308 * 10 - x * 1e308 * 10 <= y", "y >= x * 1e308 * 10 - x * 1e308 * 10",
    # The square root of a number below zero is NaN too.
    "sqrt(x) > 1e308", "sqrt(y - 1) = sqrt(y - 1)", "greatest(sqrt(x), 1) > 2", "least(sqrt(y), 2) = 2",
    "sqrt(x) IN (2, 3)", "sqrt(x) BETWEEN 1 AND 1e308",
]
DECLINED = ["x % 2 = 1", "lower(s) = 'a'", "upper(s) = 'A'", "x = NULL", "s > 1",
            "b > 1", "x", "x AND b"]


def test_a_pattern_with_an_escape_of_its_own_matches_as_spark_s_like_with_that_escape(spark: SparkSession) -> None:
    """The parser keeps a pattern written with `ESCAPE 'c'` in the \\ form; Spark's own LIKE with that escape
    character decides what it means."""
    cases = [("a!_b", "!"), ("%#%%", "#"), ("a__", "_"), ("!!%", "!"), ("a\\%", "!"), ("%%", "%"), ("a%%b", "%")]
    texts = [text for text in SS if text is not None] + ["a!b", "!x", "a\\b", "%", "a%"]
    plan = load_query(chain([f"s LIKE '{pattern}' ESCAPE '{escape}'" for pattern, escape in cases]))
    frame = spark.createDataFrame([(text,) for text in texts], "s STRING")
    ours = [predicate(symbol.predicate) for symbol in plan.symbols]
    spark_s = [F.like(F.col("s"), F.lit(pattern), F.lit(escape)) for pattern, escape in cases]
    got = frame.select(F.array(*ours).alias("ours"), F.array(*spark_s).alias("spark")).collect()
    assert [row.ours for row in got] == [row.spark for row in got]
    assert any(any(row.ours) for row in got) and not all(all(row.ours) for row in got)


def chain(predicates: list[str]) -> str:
    defines = ", ".join(f"P{i} AS {p}" for i, p in enumerate(predicates))
    pattern = " AND ".join(f"P{i} meets P{i + 1}" for i in range(len(predicates) - 1))
    return f"FROM S PARTITION BY key DEFINE {defines} PATTERN {pattern} WITHIN 1 h"


def bits(words: list[int], count: int) -> list[list[bool]]:
    return [[bool(word >> i & 1) for i in range(count)] for word in words]


@pytest.mark.parametrize("predicates", [COMPUTED, OF_INFINITIES], ids=["computed", "of infinities"])
def test_the_arrow_backend_flags_every_event_as_spark_and_the_reference_do(predicates: list[str],
                                                                          spark: SparkSession) -> None:
    assert len(predicates) <= 64, "the flags of one word"
    plan = load_query(chain(predicates))
    q = SparkQuery(plan, STREAM, dict(STREAM.columns))
    assert q.arrow_input is not None
    events = spark.createDataFrame(ROWS, STREAM.ddl)
    word = C.flags_word(0)
    by_spark = [r[word] for r in q.prepare(events).orderBy(C.T).collect()]
    by_arrow = q.arrow_input.prepare(pa.Table.from_pylist(ROWS, events.toArrow().schema)).column(word).to_pylist()
    reference = [[holds(s.predicate, row) for s in plan.symbols] for row in ROWS]
    assert bits(by_arrow, len(predicates)) == reference
    assert bits(by_spark, len(predicates)) == reference


def test_predicates_as_deep_as_the_language_reads_are_computed_as_the_reference_does(spark: SparkSession) -> None:
    """A chain of 99 operators is a tree of 100 levels, the most a predicate may have: Spark's analyzer widened
    `y + 0 + 1 + …` (a DOUBLE plus whole numbers) one level a pass and stopped at its default of 100 passes."""
    deep = ["y + " + " + ".join(str(i % 3) for i in range(99)) + " > 100",
            " OR ".join(f"x = {i}" for i in range(100)),
            "(" + " AND ".join(f"x <> {i}" for i in range(49)) + ") AND "
            + " AND ".join(f"i <> {i}" for i in range(49))]
    plan = load_query(chain(deep))
    q = SparkQuery(plan, STREAM, dict(STREAM.columns))
    events = spark.createDataFrame(ROWS, STREAM.ddl)
    word = C.flags_word(0)
    by_spark = [r[word] for r in q.prepare(events).orderBy(C.T).collect()]
    reference = [[holds(s.predicate, row) for s in plan.symbols] for row in ROWS]
    assert bits(by_spark, len(deep)) == reference
    assert q.arrow_input is not None
    by_arrow = q.arrow_input.prepare(pa.Table.from_pylist(ROWS, events.toArrow().schema)).column(word).to_pylist()
    assert bits(by_arrow, len(deep)) == reference


@pytest.mark.parametrize("predicate", DECLINED)
def test_what_the_arrow_backend_cannot_compute_exactly_is_left_to_spark(predicate: str) -> None:
    plan = load_query(chain(["x > 1", predicate]))
    assert SparkQuery(plan, STREAM, dict(STREAM.columns)).arrow_input is None


def test_a_timestamp_stream_is_read_by_spark() -> None:
    columns = (("key", "STRING"), ("ts", "TIMESTAMP"), ("x", "BIGINT"))
    stream = StreamSchema("S", ("key",), "ts", TIMESTAMP_UNIT, columns)
    plan = load_query(chain(["x > 1", "x < 0"]))
    assert SparkQuery(plan, stream, dict(stream.columns)).arrow_input is None


@pytest.mark.parametrize("checksums", [True, False], ids=["from the version checksums", "from Delta's snapshot"])
def test_only_files_that_hold_exactly_the_tables_rows_are_read_as_plain_parquet(spark: SparkSession, tmp_path: Path,
                                                                                checksums: bool) -> None:
    """Deletion vectors (a reader version above 1) and partition columns put rows or values outside the files.
    Where Delta wrote a version checksum listing every file, the files are read from it without a Spark job;
    without one, from Delta's snapshot. Either way, of the version asked for (an overwrite removed the first
    version's files), and under a folder whose name the log's URIs escape."""
    lake = Lake(spark, tmp_path / "a lake")
    rows = spark.range(100).withColumn("part", F.col("id") % 2)
    rows.write.format("delta").save(lake.path("plain"))
    rows.filter(F.col("id") < 40).write.format("delta").mode("overwrite").save(lake.path("plain"))
    rows.write.format("delta").partitionBy("part").save(lake.path("parted"))
    rows.write.format("delta").option("delta.enableDeletionVectors", "true").save(lake.path("deleting"))
    DeltaTable.forPath(spark, lake.path("deleting")).delete("id < 10")
    if not checksums:
        for checksum in lake.root.glob("*/_delta_log/[0-9]*.crc"):
            checksum.unlink()
    group = f"plain-files-{checksums}"
    spark.sparkContext.setJobGroup(group, "reading the files of a snapshot")
    try:
        files = lake.plain_files("plain", 1)
        counted = lake.file_stats("plain", 1)
        assert lake.plain_files("parted", 0) == ()
        assert lake.plain_files("deleting", lake.version("deleting")) == ()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert bool(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) is not checksums
    assert files and all(Path(f).is_file() for f in files)
    assert sum(pq.read_table(f).num_rows for f in files) == 40
    assert counted == (len(files), sum(Path(f).stat().st_size for f in files))


def test_a_column_an_events_file_predates_reads_as_null(tmp_path: Path) -> None:
    """A column added to the table after a file was written is NULL in that file's rows, as Spark reads it."""
    plan = load_query(chain(["x > 1", "x IS NULL"]))
    reading = SparkQuery(plan, STREAM, dict(STREAM.columns)).arrow_input
    assert reading is not None
    path = tmp_path / "old.parquet"
    pq.write_table(pa.table({"key": ["k", "k"], "ts": [1, 2]}), path)
    read = reading.read(str(path))
    assert read.column(C.T).to_pylist() == [1, 2]
    assert read.column(C.flags_word(0)).to_pylist() == [0b10, 0b10]


# Instants where clocks disagree on the field: each side of a midnight, of a year's end, of Berlin's and New York's
# changes to and from daylight saving time, of Lord Howe's half-hour change, before 1970 and far after it.
INSTANTS = [None, *(datetime(*parts, tzinfo=UTC) for parts in [
    (2026, 3, 29, 0, 59, 59, 999999), (2026, 3, 29, 1, 0), (2026, 10, 25, 0, 59), (2026, 10, 25, 1, 0),
    (2026, 3, 8, 6, 59), (2026, 3, 8, 7, 0), (2026, 11, 1, 5, 30), (2026, 11, 1, 6, 0), (2026, 4, 4, 14, 59),
    (2026, 4, 4, 15, 0), (2026, 12, 31, 23, 30), (2027, 1, 1, 0, 15), (2028, 2, 29, 18, 45),
    (1969, 12, 31, 23, 59, 59, 999999), (1900, 1, 1, 0, 0), (2999, 6, 30, 12, 0)])]
# A stream of TIMESTAMPs `ts`, and the date of each, `d`.
TIMED = StreamSchema("S", ("key",), "ts", TIMESTAMP_UNIT, (("key", "STRING"), ("ts", "TIMESTAMP"), ("d", "DATE")))
TIMED_ROWS = [{"key": "k", "ts": t, "d": None if t is None else t.date()} for t in INSTANTS]
ZONES = [None, "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "+05:45",
         "-0530", "UTC+2", "Z"]


def test_a_time_s_fields_on_a_zone_s_clock_are_those_of_the_reference_and_spark_reads_them(
        spark: SparkSession) -> None:
    """`hour`, `minute`, `dayofweek` and `month` of TIMESTAMPs and DATEs, on UTC's clock and on zones' and
    offsets' (pielake/query/time_fields.py), computed by Spark as the reference computes them; the Arrow backend
    leaves a stream of TIMESTAMPs to Spark."""
    calls = [f"{name}({column}{'' if zone is None else f', {zone!r}'})" for name in TIME_FIELDS
             for column in ("ts", "d") for zone in ZONES]
    plan = load_query(chain([f"{call} >= 0" for call in calls]), "q", TIMED)
    fields = [symbol.predicate.left for symbol in plan.symbols]
    by_spark = spark.createDataFrame(TIMED_ROWS, TIMED.ddl).select(*(Compiler()(f) for f in fields)).collect()
    reference = [[row_evaluator(row)(f) for f in fields] for row in TIMED_ROWS]
    assert [list(row) for row in by_spark] == reference
    assert len({tuple(column) for column in zip(*reference, strict=True)}) > len(ZONES)  # the clocks disagree
    assert SparkQuery(plan, TIMED, dict(TIMED.columns)).arrow_input is None


def test_times_compare_with_dates_and_with_times_written_in_the_query_as_the_reference_compares_them(
        spark: SparkSession) -> None:
    """A TIMESTAMP with text written as a time is its instant (UTC unless the text names an offset); a DATE with
    such text, the date the text writes; a DATE with a TIMESTAMP, its midnight in UTC (pielake/query/time_fields.py):
    as Spark casts them, so both agree on every instant above."""
    compared = [
        "ts > '2026-03-29 01:00'", "ts >= '2026-03-29T02:30:00+01:30'", "ts = '2026-03-29 00:59:59.999999'",
        "ts < '2026-03-29'", "ts <= '1969-12-31T23:59:59.999999Z'", "ts != '2026-10-25T02:00:00-01:00'",
        "ts BETWEEN '2026-03-01' AND '2026-10-25 00:59:00Z'", "ts IN ('2026-03-29 01:00', '2027-01-01T01:15:00+01:00')",
        "ts NOT IN ('2026-03-29 01:00')", "'2026-06-01' < ts", "d = '2026-03-29T23:30:00-05:00'",
        "d > '2026-03-28 23:00'", "d BETWEEN '2026-01-01' AND '2026-12-31T23:59:59'",
        "d IN ('2026-03-29', '1900-01-01 12:00')", "d < ts", "d = ts", "ts >= d", "coalesce(ts, ts) > '2026-01-01'"]
    plan = load_query(chain(compared), "q", TIMED)
    rows = [*TIMED_ROWS, {"key": "k", "ts": datetime(2026, 3, 29, tzinfo=UTC), "d": date(2026, 3, 29)}]
    predicates = [predicate(symbol.predicate) for symbol in plan.symbols]
    by_spark = spark.createDataFrame(rows, TIMED.ddl).select(*predicates).collect()
    reference = [[holds(symbol.predicate, row) for symbol in plan.symbols] for row in rows]
    assert [list(row) for row in by_spark] == reference
    assert all(any(column) and not all(column) for column in zip(*reference, strict=True))  # each one tells apart


def test_a_decimal_attribute_is_computed_with_as_a_double_as_the_reference_reads_it(spark: SparkSession) -> None:
    """Spark would multiply a DECIMAL(10,2) exactly (1.10 * 3 = 3.30, equal to 3.3) where the reference's doubles
    give 3.3000000000000003; so a predicate reads a DECIMAL as a DOUBLE (docs/semantics.md §1), as the reference
    does, and both agree. The Arrow backend leaves DECIMAL columns to Spark."""
    columns = (("key", "STRING"), ("ts", "BIGINT"), ("x", "DECIMAL(10,2)"), ("w", "DECIMAL(30,0)"))
    stream = StreamSchema("S", ("key",), "ts", "s", columns)
    computed = ["x * 3 = 3.3", "x % 1 = 0.1", "x * x > 1.21", "x / 3 > 0.3666", "x = 1.1", "x + x = 2.2",
                "w * 4611686018427387904 > 0", "w + 1 = 10000000000000000000001", "abs(x) = 2.35",
                "greatest(x, w) > 1", "x IN (1.1, 2)"]
    plan = load_query(chain(computed), "q", stream)
    rows = [{"key": "k", "ts": t, "x": x, "w": w} for t, (x, w) in enumerate([
        (Decimal("1.10"), Decimal(5)), (Decimal("-2.35"), Decimal(10**22)), (None, Decimal(-(2**63))),
        (Decimal("12345678.99"), None)])]
    q = SparkQuery(plan, stream, dict(stream.columns))
    predicates = [predicate(symbol.predicate, q.column) for symbol in plan.symbols]
    collected = spark.createDataFrame(rows, stream.ddl).select(*predicates).collect()
    reference = [[holds(symbol.predicate, row) for symbol in plan.symbols] for row in rows]
    assert [list(row) for row in collected] == reference
    assert reference[0][:3] == [False, False, True]  # as doubles compute, not as decimals would
    assert q.arrow_input is None
