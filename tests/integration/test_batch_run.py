"""`pielake run` end to end on real Delta tables: dirty input, quarantine, matches, idempotent re-runs, and the
lake it leaves read back through `pielake sql`, `pielake plot` and the lake's engine (`infra/engine.sh` ->
`pielake engine start`), whose JDBC endpoint (the Spark Thrift Server) the JDBC client pyspark ships, beeline,
reads."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark.sql.functions as F
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.cli import main
from pielake.engine.client import free_port, free_ports
from pielake.lake.delta import Lake
from pielake.lake.plotted import timeline
from pielake.pipeline.registry import STAGES
from pielake.plot import Bar, Bracket
from pielake.query.analyzer import load_query
from pielake.semantics.reference import Match, derive_situations, find_matches
from pielake.streams import StreamSchema, lake_streams, load_schema, save_schema
from tests.helpers import process_env

pytestmark = pytest.mark.heavy(seconds=130)  # about this long in CI: scheduled first

QUERY = """FROM TestSensors T PARTITION BY T.unit
DEFINE Hot AS T.temp > 50, Busy AS T.load >= 0.8 AT LEAST 2 s
PATTERN Hot overlaps; starts; during; contains Busy
WITHIN 30 s
RETURN max(Hot.temp) AS peak, duration(Busy) AS busy_for
"""
SCHEMA = StreamSchema("TestSensors", ("unit",), "ts", "s",
                      (("unit", "STRING"), ("ts", "BIGINT"), ("temp", "DOUBLE"), ("load", "DOUBLE")))
GOOD = [("u1", t, temp, load) for t, temp, load in [
    (1, 40, 0.1), (2, 55, 0.2), (3, 60, 0.9), (4, 61, 0.9), (5, 62, 0.95), (6, 45, 0.85), (7, 40, 0.1),
    (8, 58, 0.85), (9, 59, 0.9), (10, 45, 0.85), (11, 30, 0.2)]] + [("u2", t, temp, load) for t, temp, load in [
    (1, 70, 0.9), (2, 71, 0.9), (3, 72, 0.95), (4, 20, 0.1), (6, 52, 0.1), (7, 53, 0.8), (8, 54, 0.8)]]
BAD = [
    ("", "12", "50", "0.1", "null_key: unit"),
    ("u1", "", "50", "0.1", "null_time"),
    ("u1", "soon", "50", "0.1", "cast_failed: ts=soon"),
    ("u1", "13", "hot", "0.1", "cast_failed: temp=hot"),
    ("u3", "1", "10", "0.1", "conflicting_duplicate"),
    ("u3", "1", "11", "0.1", "conflicting_duplicate"),
]
DUPLICATE = ("u2", 8, 54, 0.8)
ENGINE = Path(__file__).parents[2] / "infra" / "engine.sh"
PROMPT = re.compile(r"^\d+: jdbc:hive2://\S+> ")  # beeline echoes its prompt before the output when not on a tty

# A run id as long as Airflow's run ids may be, with a character of Airflow's default `allowed_run_id_pattern`
# beyond the letters: it names the run's folder, its log and its Data Docs, and its rows in Delta conditions.
FIRST = "nightly~" + "0123456789" * 24 + "xy"


def write_csv(path: Path) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["unit", "ts", "temp", "load"])
        writer.writerows([*GOOD, DUPLICATE, *(row[:4] for row in BAD)])


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    root = tmp_path_factory.mktemp("lake")
    save_schema(SCHEMA, root / "_streams")
    (root / "hot_busy.tpq").write_text(QUERY)
    write_csv(root / "events.csv")
    result = run(["run", str(root / "hot_busy.tpq"), "--events", str(root / "events.csv"), "--lake", str(root),
                  "--run-id", FIRST])
    assert "25 rows in = 18 events + 6 quarantined + 1 exact duplicates dropped" in result.output
    return root


def run(args: list[str], code: int = 0) -> object:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output + repr(result.exception)
    return result


def sql(lake: Path, statement: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(run(["sql", "--lake", str(lake), "--format", "csv", statement]).output)))


def test_every_bad_row_is_quarantined_with_its_reason(lake: Path) -> None:
    rows = sql(lake, "SELECT reason FROM quarantine_testsensors ORDER BY reason")
    assert sorted(r["reason"] for r in rows) == sorted(b[4] for b in BAD)


def test_quarantine_keeps_the_raw_row_with_every_column(lake: Path) -> None:
    """A column the file left empty is in the raw row too: the row shows what is missing from it."""
    rows = sql(lake, "SELECT reason, raw FROM quarantine_testsensors WHERE reason RLIKE '^(cast_failed: temp|null_)' "
                     "ORDER BY reason")
    assert [r["raw"] for r in rows] == ['{"unit":"u1","ts":"13","temp":"hot","load":"0.1"}',
                                        '{"unit":null,"ts":"12","temp":"50","load":"0.1"}',
                                        '{"unit":"u1","ts":null,"temp":"50","load":"0.1"}']


def test_matches_equal_the_reference_on_the_good_rows(lake: Path) -> None:
    plan = load_query(QUERY, "hot_busy")
    events = [{"unit": u, "ts": t, "temp": float(temp), "load": float(load)} for u, t, temp, load in GOOD]
    expected = sorted((m.key[0], m.situation("Hot").ts, m.situation("Busy").ts, m.detected_at, m.status,
                       dict(m.values)["peak"], dict(m.values)["busy_for"]) for m in find_matches(events, plan))
    got = sorted((r["unit"], int(r["hot_ts"]), int(r["busy_ts"]), int(r["detected_at"]), r["status"],
                  float(r["peak"]), int(r["busy_for"]))
                 for r in sql(lake, "SELECT * FROM matches_hot_busy"))
    assert got == expected
    assert [m[:3] for m in expected] == [("u1", 2, 3), ("u1", 8, 8)]  # Hot overlaps Busy, Hot starts Busy


def test_result_tables_write_their_times_without_a_dictionary(lake: Path) -> None:
    """Times are nearly all distinct in a file: they are written plain; other columns keep Parquet's default."""
    encodings = {}
    for data in (lake / "results_hot_busy").rglob("*.parquet"):
        meta = pq.ParquetFile(data).metadata
        for group in range(meta.num_row_groups):
            for i in range(meta.num_columns):
                column = meta.row_group(group).column(i)
                encodings.setdefault(column.path_in_schema, set()).update(column.encodings)
    dictionary = {name for name, used in encodings.items() if any("DICTIONARY" in e for e in used)}
    times = {"anchor", "situations.ts", "situations.te", "pairs.decided_at", "matches.hot_ts", "matches.busy_te",
             "matches.detected_at"}
    assert times <= set(encodings) and not times & dictionary
    assert {"situations.symbol", "matches.status"} <= dictionary


def test_sql_csv_output_starts_with_a_header(lake: Path) -> None:
    output = run(["sql", "--lake", str(lake), "--format", "csv", "SELECT unit, ts FROM events_testsensors "
                  "ORDER BY unit, ts LIMIT 2"]).output
    assert output.splitlines() == ["unit,ts", "u1,1", "u1,2"]


def test_sql_on_a_master_runs_in_this_process_from_a_shell_that_names_an_engine(
        lake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell set up for an engine's notebooks (`SPARK_REMOTE`, PySpark's default): `--master` runs in this process
    all the same, where PySpark's builder and Spark's launcher would refuse a master beside that address."""
    monkeypatch.setenv("SPARK_REMOTE", f"sc://localhost:{free_port()}")
    output = run(["sql", "--lake", str(lake), "--format", "csv", "--master", "local[2]",
                  "SELECT count(*) AS n FROM events_testsensors"]).output
    assert output.splitlines() == ["n", "18"]


def test_sql_of_a_table_the_lake_does_not_have_lists_the_tables_it_has(lake: Path) -> None:
    """And names the one a misspelt name, or a table's kind alone (`matches`), may stand for."""
    result = run(["sql", "--lake", str(lake), "SELECT * FROM matches_hotbusy"], code=2)
    assert "[TABLE_OR_VIEW_NOT_FOUND]" in result.output
    assert re.search(r" Did you mean matches_hot_busy\? The lake's tables: .*events_testsensors, .*matches_hot_busy, "
                     r".*runs", result.output)
    assert " Did you mean situations_hot_busy? " in run(["sql", "--lake", str(lake), "SELECT * FROM situations"],
                                                         code=2).output
    assert "Did you mean" not in run(["sql", "--lake", str(lake), "SELECT * FROM alarms"], code=2).output


def test_sql_shows_a_table_s_delta_history_detail_and_properties_by_the_name_it_is_read_by(lake: Path) -> None:
    """Delta answers them for a table, not a view: a kind's are its results table's, whose commits note the query
    that published them (docs/operations.md). An older version is the engine's JDBC endpoint's to read, and the
    refusal says so, as it says how to read the whole lake as it was; a CREATE statement, which Delta writes of no
    table, is refused saying how to register the table elsewhere."""
    [published] = sql(lake, "describe history matches_hot_busy limit 1")
    assert published["operation"] == "WRITE" and '"query"' in published["userMetadata"]
    assert sql(lake, "DESCRIBE HISTORY `events_testsensors`")[-1]["operation"] == "WRITE"  # its first events
    [detail] = sql(lake, "DESC DETAIL runs")
    assert detail["format"] == "delta" and detail["location"].endswith("/runs")
    properties = {row["key"] for row in sql(lake, "SHOW TBLPROPERTIES matches_hot_busy")}
    assert {"delta.minReaderVersion", "delta.minWriterVersion"} <= properties  # its results table's: a view has none
    assert [row["key"] for row in sql(lake, "show tblproperties `runs` ('delta.minWriterVersion')")] == \
        ["delta.minWriterVersion"]
    for table in ("matches_hot_busy", f"delta.`{lake / 'runs'}`"):  # a view; the table itself, which Delta refuses
        result = run(["sql", "--lake", str(lake), f"SHOW CREATE TABLE {table}"], code=2)
        assert "Delta writes no CREATE statement of a table: DESCRIBE TABLE <table> lists its columns, and " \
               "DESCRIBE DETAIL <table> its folder (location), which CREATE TABLE <name> USING delta LOCATION " \
               "'<location>' registers in a metastore, columns and all." in " ".join(result.output.split())
    result = run(["sql", "--lake", str(lake), "SELECT count(*) FROM events_testsensors VERSION AS OF 0"], code=2)
    assert "--as-of TIME reads every table as it was at TIME (DESCRIBE HISTORY <table> lists its versions and " \
           "their times), and a SQL client of the engine's JDBC endpoint reads one version of a table (VERSION AS " \
           "OF n)" in result.output


def test_sql_reads_the_lake_as_it_was_at_a_time_each_table_at_its_version_then(tmp_path: Path) -> None:
    """`--as-of` reads every table at its newest version committed by then, and says which; the matches are those
    the run before it published, the reference's over the events until then. A time before the first commit finds
    no table; a version whose files maintenance has removed since is refused, saying so."""
    root = tmp_path / "lake"
    save_schema(SCHEMA, root / "_streams")
    (tmp_path / "hot_busy.tpq").write_text(QUERY)
    first = GOOD[:9]

    def batch(name: str, rows: list[tuple], *mode: str) -> None:
        with (tmp_path / f"{name}.csv").open("w", newline="") as out:
            csv.writer(out).writerows([("unit", "ts", "temp", "load"), *rows])
        run(["run", str(tmp_path / "hot_busy.tpq"), "--events", str(tmp_path / f"{name}.csv"), "--lake", str(root),
             "--run-id", name, *mode])

    batch("first", first)
    moment = dt.datetime.now(dt.UTC)
    batch("second", GOOD[9:], "--incremental")

    def as_of(when: str, statement: str, code: int = 0) -> object:
        return run(["sql", "--lake", str(root), "--format", "csv", "--as-of", when, statement], code)

    then = moment.isoformat()
    read = as_of(then, "SELECT run_id, (SELECT count(*) FROM events_testsensors) AS events FROM runs")
    assert list(csv.DictReader(io.StringIO(read.stdout))) == [{"run_id": "first", "events": str(len(first))}]
    assert re.fullmatch(r"as of .* UTC: events_testsensors version \d+, quarantine_testsensors version \d+, "
                        r"results_hot_busy version \d+, runs version \d+", read.stderr.strip())
    plan = load_query(QUERY, "hot_busy")
    events = [{"unit": u, "ts": t, "temp": float(temp), "load": float(load)} for u, t, temp, load in first]
    matches = as_of(then, "SELECT unit, hot_ts, busy_ts, status FROM matches_hot_busy").stdout
    assert sorted(tuple(r.values()) for r in csv.DictReader(io.StringIO(matches))) == sorted(
        (m.key[0], str(m.situation("Hot").ts), str(m.situation("Busy").ts), m.status)
        for m in find_matches(events, plan))
    assert [r["run_id"] for r in sql(root, "SELECT run_id FROM runs ORDER BY run_id")] == ["first", "second"]
    before = as_of("2020-01-01", "SELECT * FROM runs", code=2)
    assert "created after it: events_testsensors, quarantine_testsensors, results_hot_busy, runs" in before.stderr
    assert before.stderr.strip().endswith("The lake had no tables then.")
    run(["maintain", str(tmp_path / "hot_busy.tpq"), "--lake", str(root), "--keep-days", "0"])
    gone = as_of(then, "SELECT * FROM matches_hot_busy", code=2)
    assert gone.stderr.strip().endswith("files maintenance has removed since (VACUUM; `pielake maintain --keep-days` "
                                        "is how long a lake keeps its tables' past): read a later time.")


def test_sql_refuses_to_write(lake: Path) -> None:
    result = run(["sql", "--lake", str(lake), "DROP TABLE matches_hot_busy"], code=2)
    assert "pielake sql only reads" in result.output


def test_a_second_run_of_the_same_file_changes_nothing(lake: Path) -> None:
    before = sql(lake, "SELECT * FROM matches_hot_busy ORDER BY unit, hot_ts, busy_ts")
    result = run(["run", str(lake / "hot_busy.tpq"), "--events", str(lake / "events.csv"), "--lake", str(lake),
                  "--run-id", FIRST, "--no-checks"])
    assert "25 rows in = 0 events + 6 quarantined + 19 exact duplicates dropped" in result.output
    assert sql(lake, "SELECT * FROM matches_hot_busy ORDER BY unit, hot_ts, busy_ts") == before
    assert sql(lake, "SELECT count(*) AS n FROM events_testsensors") == [{"n": "18"}]
    assert sql(lake, "SELECT count(*) AS n FROM quarantine_testsensors") == [{"n": "6"}]


def test_each_run_is_one_row_of_the_runs_table(lake: Path) -> None:
    plan = load_query(QUERY, "hot_busy")
    [row] = sql(lake, "SELECT run_id, status, mode, matches['complete'] AS complete, size(matches) AS statuses "
                      "FROM runs WHERE query = 'hot_busy'")
    assert row == {"run_id": FIRST, "status": "published", "mode": "batch", "complete": "2", "statuses": "1"}
    steps = sql(lake, "SELECT s.step, s.rows['rows in'] AS rows_in, s.rows['quarantined'] AS quarantined, s.seconds "
                      "FROM runs LATERAL VIEW posexplode(steps) t AS i, s WHERE run_id LIKE 'nightly~%' ORDER BY i")
    # every step once, in the order they started: in one process a gate may start after the next stage
    assert sorted(s["step"] for s in steps) == sorted(s.name for s in STAGES.steps(plan, parallel=False))
    assert (steps[0]["rows_in"], steps[0]["quarantined"]) == ("25", "6")
    assert all(float(s["seconds"]) >= 0 for s in steps) and float(steps[0]["seconds"]) > 0


def last_end(match: Match) -> int | None:
    ends = [s.te for _, s in match.bindings]
    return None if None in ends else max(ends)


def test_the_timeline_of_a_key_shows_its_reference_situations_and_matches(lake: Path, spark: SparkSession) -> None:
    plan = load_query(QUERY, "hot_busy")
    events = [{"unit": u, "ts": t, "temp": float(temp), "load": float(load)} for u, t, temp, load in GOOD]
    picture = timeline(Lake(spark, lake), plan, ("u1",))
    assert picture.lanes == ("Hot", "Busy")
    assert picture.bars == tuple(sorted((Bar(picture.lanes.index(s.symbol), s.ts, s.te) for s in
                                         derive_situations(events, plan) if s.key == ("u1",)),
                                        key=lambda b: (b.lane, b.start)))
    matches = [m for m in find_matches(events, plan) if m.key == ("u1",)]
    brackets = [Bracket(min(s.ts for _, s in m.bindings), last_end(m), m.detected_at, m.status) for m in matches]
    assert picture.brackets == tuple(sorted(brackets, key=lambda b: (b.start, b.detected_at)))
    later = timeline(Lake(spark, lake), plan, ("u1",), since="9")
    assert later.brackets == tuple(b for b in picture.brackets if b.end is None or b.end >= 9) != picture.brackets
    assert later.bars == tuple(b for b in picture.bars if b.end is None or b.end >= 9) != picture.bars


def test_plot_writes_an_image_and_says_what_it_drew(lake: Path, tmp_path: Path) -> None:
    out = tmp_path / "u1.png"
    result = run(["plot", str(lake / "hot_busy.tpq"), "--lake", str(lake), "--key", "u1", "--out", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "situations, 2 matches" in result.output
    refused = run(["plot", str(lake / "hot_busy.tpq"), "--lake", str(lake), "--key", "u1", "--from", "noon", "--out",
                   str(out)], code=2).output
    assert "error: --from 'noon' is not a time of stream TestSensors: give a whole number of its unit (s)" in refused
    assert "error: --from 9 is after --to 3" in run(["plot", str(lake / "hot_busy.tpq"), "--lake", str(lake), "--key",
                                                     "u1", "--from", "9", "--to", "3", "--out", str(out)],
                                                    code=2).output
    for image, said in (("u1.txt", "its suffix .txt is no image format"), ("u1", "it has no suffix to say its format")):
        assert f"error: --out {tmp_path / image}: {said}; name a .png, .svg or .pdf file" in run(
            ["plot", str(lake / "hot_busy.tpq"), "--lake", str(lake), "--out", str(tmp_path / image)], code=2).output
    assert "one --key per column" in run(["plot", str(lake / "hot_busy.tpq"), "--lake", str(lake), "--key", "u1",
                                          "--key", "u2", "--out", str(out)], code=2).output
    assert "has no situations of unit = u9 (a --key that names no key of the stream, or one no symbol ever held " \
           "for); the key with the most matches is unit = " in run(["plot", str(lake / "hot_busy.tpq"), "--lake",
                                                                    str(lake), "--key", "u9", "--out", str(out)],
                                                                   code=2).output


def test_plot_of_a_query_without_matches_draws_the_key_with_the_most_situations(lake: Path, tmp_path: Path) -> None:
    """Its situations show why nothing matched. Only u2 is ever this hot, and u1 comes first in key order."""
    query = lake / "hot_then_frozen.tpq"
    query.write_text("FROM TestSensors T PARTITION BY T.unit\nDEFINE Hot AS T.temp > 65, Frozen AS T.temp < 0\n"
                     "PATTERN Hot before Frozen\nWITHIN 30 s\n")
    run(["run", str(query), "--events", str(lake / "events.csv"), "--lake", str(lake)])
    out = tmp_path / "p.png"
    plot = ["plot", str(query), "--lake", str(lake), "--out", str(out)]
    assert run(plot).output.strip() == f"wrote {out}: unit = u2, 1 situation, 0 matches"
    assert out.stat().st_size > 0
    refused = run([*plot, "--key", "u1"], code=2).output
    assert "has no situations of unit = u1" in refused
    assert "the key with the most situations is unit = u2" in refused
    query.write_text(query.read_text().replace("> 65", "> 500"))
    run(["run", str(query), "--events", str(lake / "events.csv"), "--lake", str(lake)])
    assert "query hot_then_frozen has no situations yet" in run(plot, code=2).output


@pytest.fixture(scope="module")
def served(lake: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The batch run's lake served by its engine, started as the infra script starts it, without the warm-up (the
    option infra/engine.sh documents; the tests' shared engine shows the warm-up); stopped afterwards."""
    env = process_env(PIELAKE_ENGINE_PORT=str(free_ports(2)), PIELAKE_JDBC_PORT=str(free_port()),
                      PIELAKE_ENGINE_REFRESH="1", PIELAKE_SPARK_MASTER="local[1]",
                      PIELAKE_ENGINE_ARGS="--warm-up 0")
    started = subprocess.run(["bash", str(ENGINE), "start", str(lake)], env=env, capture_output=True, text=True,
                             timeout=300, check=False)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"jdbc:hive2://127.0.0.1:{env['PIELAKE_JDBC_PORT']}/default (JDBC)" in started.stdout
        yield lake, env
    finally:
        subprocess.run(["bash", str(ENGINE), "stop", str(lake)], env=env, check=False, timeout=120)


def beeline(served: tuple[Path, dict[str, str]], statement: str) -> list[list[str]]:
    """The statement's rows over JDBC, as beeline prints them in CSV (header first). With quoting off, its
    default, beeline encloses a field that holds a comma in NUL characters instead of double quotes."""
    root, env = served
    done = subprocess.run(["bash", str(ENGINE), "beeline", str(root), "--silent=true", "--outputformat=csv2",
                           "-e", statement], env=env, capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return list(csv.reader(PROMPT.sub("", done.stdout).splitlines(), quotechar="\x00"))


def test_a_jdbc_client_reads_the_matches_table_as_the_lake_holds_it(served: tuple[Path, dict[str, str]],
                                                                    spark: SparkSession) -> None:
    # arrange
    matches = Lake(spark, served[0]).read("matches_hot_busy").select(F.to_json(F.struct("*")))
    # act: Spark renders every row as JSON on both sides, so values print alike whatever their type
    header, *rows = beeline(served, "SELECT to_json(struct(*)) AS row FROM matches_hot_busy")
    # assert
    assert header == ["row"]
    assert sorted(r[0] for r in rows) == sorted(r[0] for r in matches.collect())
    assert len(rows) == 2


def test_every_lake_table_is_registered_in_the_lake_s_own_catalog(served: tuple[Path, dict[str, str]],
                                                                  spark: SparkSession) -> None:
    header, *rows = beeline(served, "SHOW TABLES")
    assert {r[header.index("tableName")] for r in rows} >= set(Lake(spark, served[0]).tables()) > set()
    assert (served[0] / V.CATALOG_DIR / "metastore_db").is_dir()  # persistent: Derby under the lake folder


def test_a_table_written_after_the_start_is_served_without_a_restart(served: tuple[Path, dict[str, str]],
                                                                     spark: SparkSession) -> None:
    # arrange: a new table, as the first run of another query would leave it
    Lake(spark, served[0]).overwrite(spark.createDataFrame([(1, "a"), (2, "b")], "n INT, s STRING"), "late_arrival")
    # act: the engine looks for new tables every second
    deadline = time.monotonic() + 60
    while "late_arrival" not in {r[1] for r in beeline(served, "SHOW TABLES")[1:]} and time.monotonic() < deadline:
        time.sleep(2)
    # assert
    assert beeline(served, "SELECT n, s FROM late_arrival ORDER BY n") == [["n", "s"], ["1", "a"], ["2", "b"]]


NAIVE_QUERY = """FROM Naive N PARTITION BY N.unit
DEFINE Fast AS N.speed > 10, Slow AS N.speed < 5
PATTERN Fast meets Slow
WITHIN 60 s
"""


def naive_parquet(path: Path, seconds: list[int], speeds: list[int]) -> str:
    """Times without a zone, as pandas and pyarrow write them (Spark reads them as `timestamp_ntz`)."""
    pq.write_table(pa.table({"unit": ["u1"] * len(seconds), "speed": speeds,
                             "ts": [dt.datetime(2026, 1, 1, 0, 0, s) for s in seconds]}), path)
    return str(path)


def test_a_parquet_file_of_times_without_a_zone_is_a_timestamp_stream_read_in_utc(tmp_path: Path,
                                                                                 spark: SparkSession) -> None:
    """Its schema, inferred and kept in the lake, loads again at the next run, which appends to the stream."""
    (tmp_path / "naive.tpq").write_text(NAIVE_QUERY)
    root = tmp_path / "lake"
    for events, mode in ((naive_parquet(tmp_path / "a.parquet", [1, 2, 3, 4], [20, 20, 1, 1]), ()),
                         (naive_parquet(tmp_path / "b.parquet", [5], [20]), ("--incremental",))):
        result = CliRunner().invoke(main, ["run", str(tmp_path / "naive.tpq"), "--events", events, "--lake",
                                           str(root), "--time-unit", "timestamp", "--no-checks", *mode])
        assert result.exit_code == 0, result.output + repr(result.exception)
    lake = Lake(spark, root)
    assert load_schema("Naive", lake_streams(lake.root)).type_of("ts") == "TIMESTAMP"
    epochs = [r[0] for r in lake.read("events_naive").select(F.unix_timestamp("ts")).orderBy(1).collect()]
    assert epochs == [int(dt.datetime(2026, 1, 1, 0, 0, s, tzinfo=dt.UTC).timestamp()) for s in range(1, 6)]
    [match] = lake.read("matches_naive").select(F.unix_timestamp("fast_ts"), F.unix_timestamp("slow_ts")).collect()
    assert tuple(match) == (epochs[0], epochs[2])
