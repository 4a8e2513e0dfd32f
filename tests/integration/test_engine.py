"""The engine: runs sent to it (`pielake run --remote`) publish exactly the tables a run in process publishes (the
brute-force reference decides), a batch and then a micro-batch; statements and plots sent to it read them as they
would in process; a second engine on a lake is refused in one line, a client without the token too; a step after
the one its run ended at is skipped, through Airflow's task on the engine as through spark-submit's, and takes no
lock; and an engine killed (SIGKILL) in the middle of a step fails that step cleanly, and after a restart the step
run again publishes what a clean run does."""

from __future__ import annotations

import csv
import io
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import urlsplit
from urllib.request import Request, urlopen

import psutil
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.cli import main
from pielake.engine.client import (
    ENGINE_LOCK,
    ENGINE_LOG,
    EngineAddress,
    EngineError,
    PlotOrder,
    RunOrder,
    free_port,
    run_on_engine,
    timeline_on_engine,
)
from pielake.engine.jvm import spark_jvm
from pielake.exitcodes import EXIT_INTERRUPTED, EXIT_JVM_LOST, EXIT_UNAVAILABLE
from pielake.lake.delta import Lake
from pielake.lake.lock import RunLock
from pielake.lake.plotted import timeline
from pielake.pipeline.ingest import IngestReport
from pielake.pipeline.jobs import main as job_main
from pielake.pipeline.registry import STAGES
from pielake.pipeline.runner import AGAIN
from pielake.pipeline.stages import ADMISSION
from pielake.plot import Timeline
from pielake.query.analyzer import load_query
from pielake.semantics.reference import derive_situations, find_matches
from pielake.streams import save_schema
from tests.conftest import EngineForTests, start_engine
from tests.helpers import maps_the_class_archive, process_env
from tests.integration.test_gates_and_backfill import EVENTS, QUERY, STREAM, write
from tests.integration.test_paper_queries import GOLDEN, assert_golden_run_equals_the_reference
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=280)  # about this long in CI: scheduled first


def cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output + repr(result.exception)
    return result.output


def new_lake(root: Path) -> Path:
    save_schema(STREAM, root / "_streams")
    (root / "mid.tpq").write_text(QUERY)
    return root


def assert_tables_equal_the_reference(spark: SparkSession, root: Path, events: list[dict]) -> None:
    lake, plan = Lake(spark, root), load_query(QUERY, "mid")
    assert spark_rows(lake.read("matches_mid"), plan) == reference_rows(find_matches(events, plan), plan)
    assert sorted((r.m, r.symbol, r.ts, r.te) for r in lake.read("situations_mid").collect()) == sorted(
        (s.key[0], s.symbol, s.ts, s.te) for s in derive_situations(events, plan))


def test_runs_sent_to_the_engine_publish_the_reference_tables(engine: EngineForTests, tmp_path: Path,
                                                              spark: SparkSession) -> None:
    root = new_lake(tmp_path / "lake")
    remote = engine.address.connect_url
    first, rest = EVENTS[:20], EVENTS[20:]
    said = cli("run", str(root / "mid.tpq"), "--events", write(tmp_path / "1.json", first), "--lake", str(root),
               "--remote", remote, "--run-id", "b1")
    assert "gate matches: 5 expectations passed" in said and "\nrun b1\n" in said
    write(tmp_path / "2.json", rest)
    stop_a_run_on_the_engine_as_it_starts(engine, root, tmp_path / "2.json", "m0")
    cli("run", str(root / "mid.tpq"), "--events", str(tmp_path / "2.json"), "--lake", str(root), "--remote", remote,
        "--incremental", "--run-id", "m1")
    assert_tables_equal_the_reference(spark, root, EVENTS)
    assert {r.run_id: r.status for r in Lake(spark, root).read("runs").collect()} == {"b1": "published",
                                                                                      "m1": "published"}
    # A process whose shell names the engine as PySpark's clients are told of one (SPARK_REMOTE), for every command.
    read = subprocess.run([str(Path(sys.executable).parent / "pielake"), "sql", "--lake", str(root), "--format",
                           "csv", "SELECT status, count(*) AS n FROM matches_mid GROUP BY status"],
                          env={**os.environ, "SPARK_REMOTE": remote}, capture_output=True, text=True, timeout=300,
                          check=False)
    assert read.returncode == 0, read.stderr[-2000:]
    assert f"on the engine at sc://localhost:{engine.address.port}, which SPARK_REMOTE names" in read.stderr
    rows = list(csv.DictReader(io.StringIO(read.stdout)))
    expected = {}
    for match in find_matches(EVENTS, load_query(QUERY, "mid")):
        expected[match.status] = expected.get(match.status, 0) + 1
    assert {r["status"]: int(r["n"]) for r in rows} == expected
    # A plot sent to the engine draws the timeline a plot in this process reads: the busiest key's, and a range.
    here = timeline(Lake(spark, root), load_query(QUERY, "mid"))
    picture = tmp_path / "mid.png"
    drawn = cli("plot", str(root / "mid.tpq"), "--lake", str(root), "--remote", remote, "--out", str(picture))
    assert drawn == (f"wrote {picture}: {here.key}, {V.counted(len(here.bars), 'situation')}, "
                     f"{V.counted(len(here.brackets), 'match')}\n") and here.brackets and picture.stat().st_size
    refused = cli("plot", str(root / "mid.tpq"), "--lake", str(root), "--remote", remote, "--out",
                  str(tmp_path / "mid.bmpx"), code=2)  # checked while the engine reads, refused all the same
    assert refused.startswith(f"error: --out {tmp_path / 'mid.bmpx'}: its suffix .bmpx is no image format"), refused
    sent = timeline_on_engine(engine.address, PlotOrder(QUERY, "mid", str(root), ("m2",), "8", "15"), print)
    assert Timeline.from_json(sent) == timeline(Lake(spark, root), load_query(QUERY, "mid"), ("m2",), "8", "15")


def test_a_query_that_matches_text_against_patterns_publishes_the_reference_on_the_engine(
        engine: EngineForTests, tmp_path: Path, spark: SparkSession) -> None:
    """LIKE compiles to Spark Connect's `like` on the engine, in DEFINE and in RETURN, as to the classic one."""
    assert_golden_run_equals_the_reference(GOLDEN / "text_patterns.tpq", tmp_path, spark, "--remote",
                                           engine.address.connect_url)


def test_a_client_whose_environment_names_a_proxy_reaches_the_engine_on_loopback_directly(
        engine: EngineForTests, tmp_path: Path) -> None:
    """Behind a proxy the environment names for every address, as a shell or an Airflow worker on a company
    network is (here one at a port where nothing listens): a run, a statement and a plot sent to the engine, and
    maintenance through Spark Connect, reach it, as Python's HTTP client and gRPC would otherwise send them, with
    the token, to the proxy."""
    root = new_lake(tmp_path / "lake")
    proxy = f"http://127.0.0.1:{free_port()}"
    env = {**{k: v for k, v in process_env().items() if k.lower() != "no_proxy"},
           **dict.fromkeys(("http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY"), proxy)}
    pielake, remote = str(Path(sys.executable).parent / "pielake"), engine.address.connect_url
    run = subprocess.run([pielake, "run", str(root / "mid.tpq"), "--events", write(tmp_path / "e.json", EVENTS),
                          "--lake", str(root), "--remote", remote], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    read = subprocess.run([pielake, "sql", "--lake", str(root), "--remote", remote, "--format", "csv",
                           "SELECT count(*) AS n FROM matches_mid"], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert read.returncode == 0, read.stderr[-2000:]
    [found] = csv.DictReader(io.StringIO(read.stdout))
    assert int(found["n"]) == len(find_matches(EVENTS, load_query(QUERY, "mid"))) > 0
    for command in (["plot", str(root / "mid.tpq"), "--out", str(tmp_path / "mid.svg")],
                    ["maintain", str(root / "mid.tpq")]):
        done = subprocess.run([pielake, *command, "--lake", str(root), "--remote", remote], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "mid.svg").stat().st_size


def test_a_statement_on_the_engine_reads_the_lake_it_names_as_it_was_never_the_engines_catalog(
        engine: EngineForTests, tmp_path: Path) -> None:
    """The engine's catalog holds its own lake's tables for JDBC's clients. A statement reads the views of the lake
    it names, as of its --as-of, as in a process of its own: a table that lake has not, or had not yet, is not
    found, though the catalog holds one of that name."""
    before = datetime.now(UTC)
    time.sleep(1)  # a commit's time is after `before`, on a clock Delta reads to the millisecond
    name = f"on_the_engine_{os.getpid()}"
    (engine.lake / f"{name}.tpq").write_text(QUERY)
    save_schema(STREAM, engine.lake / "_streams")
    remote = engine.address.connect_url
    cli("run", str(engine.lake / f"{name}.tpq"), "--events", write(tmp_path / "1.json", EVENTS), "--lake",
        str(engine.lake), "--remote", remote)
    log, deadline = engine.lake / V.ENGINE_DIR / ENGINE_LOG, time.monotonic() + 60
    while f"registered matches_{name}" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    statement = f"SELECT count(*) AS n FROM matches_{name}"
    assert cli("sql", "--lake", str(engine.lake), "--remote", remote, "--format", "csv", statement) == (
        f"n\n{len(find_matches(EVENTS, load_query(QUERY, name)))}\n")
    for lake, as_of in ((engine.lake, ("--as-of", before.isoformat())), (tmp_path / "another", ())):
        lake.mkdir(exist_ok=True)
        said = cli("sql", "--lake", str(lake), "--remote", remote, *as_of, statement, code=2)
        assert f"The table or view `matches_{name}` cannot be found" in said, said


def test_a_statement_whose_client_has_gone_reads_no_further_on_the_engine(engine: EngineForTests,
                                                                          tmp_path: Path) -> None:
    """`pielake sql --remote` is a thin client: the engine reads the rows and sends them as its client takes them.
    A client that goes away (its terminal closed, Ctrl-C) stops the statement, which would read rows without end
    for no one."""
    reading = streaming_rows(engine, tmp_path / "rows.csv")
    reading.terminate()
    reading.wait(timeout=30)
    deadline = time.monotonic() + 60
    while "running: nothing" not in (said := engine.cli("status").stdout) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "running: nothing" in said, said


def stop_a_run_on_the_engine_as_it_starts(engine: EngineForTests, root: Path, events: Path, run_id: str) -> None:
    """Ctrl-C on `pielake run --remote` as the run's first line comes: the engine stops the run (its Spark jobs
    cancelled), which publishes nothing and releases the query's lock, as a run stopped in its own process."""
    client = subprocess.Popen([str(Path(sys.executable).parent / "pielake"), "run", str(root / "mid.tpq"), "--events",
                               str(events), "--lake", str(root), "--remote", engine.address.connect_url,
                               "--incremental", "--run-id", run_id], stderr=subprocess.PIPE, text=True)
    assert client.stderr is not None
    while (line := client.stderr.readline()) and line != "ingest ...\n":
        pass
    client.send_signal(signal.SIGINT)
    assert client.wait(timeout=60) == EXIT_INTERRUPTED, client.stderr.read()
    deadline = time.monotonic() + 120
    while "running: nothing" not in engine.cli("status").stdout and time.monotonic() < deadline:
        time.sleep(0.5)
    log = (engine.lake / "_engine" / "engine.log").read_text(encoding="utf-8")
    assert f"run mid {run_id} run stopped, as its client at 127.0.0.1 went away" in log, log[-3000:]
    assert RunLock(root, "mid").holder() is None


def test_the_engine_warms_up_before_it_serves_and_leaves_nothing_of_its_warm_up(engine: EngineForTests) -> None:
    """The tests' engine was started with a warm-up (`tests.conftest.engine`): its batch run and micro-batch ran
    before the engine said it was ready, and their scratch lake is gone, so the lake holds no table of theirs."""
    log = (engine.lake / "_engine" / "engine.log").read_text(encoding="utf-8")
    assert "warm-up: batch run 1 of 2 done" in log and "warm-up: incremental run 2 of 2 done" in log, log
    assert log.index("warmed up in") < log.index("ready: ")
    assert not (engine.lake / "_engine" / "warm-up").exists()
    assert not [p for p in engine.lake.iterdir() if "warm_up" in p.name]


def engine_pid(engine: EngineForTests) -> int:
    """The engine's process, as its lock file names it (the JVM is its child)."""
    return int((engine.lake / V.ENGINE_DIR / ENGINE_LOCK).read_text().split()[1])


def test_the_engines_jvm_maps_the_class_archive_though_it_has_delta_on_its_class_path(
        engine: EngineForTests) -> None:
    """The engine's JVM needs Delta's jars on its class path for the JDBC endpoint; put after Spark's own, they
    leave it the class archive every other driver JVM maps."""
    assert maps_the_class_archive(engine_jvm(engine).pid)


def engine_jvm(engine: EngineForTests) -> psutil.Process:
    jvm = spark_jvm(psutil.Process(engine_pid(engine)))
    assert jvm is not None, "the engine has no JVM"
    return jvm


def spark_ui(engine: EngineForTests) -> str:
    """The address of the engine's Spark UI, as `pielake engine status` says it."""
    said = engine.cli("status")
    assert said.returncode == 0, said.stderr
    [url] = re.findall(r"(http://\S+) \(Spark UI\)", said.stdout)
    return url


def test_the_engine_listens_on_its_host_alone(engine: EngineForTests) -> None:
    """Its clients' ports and Spark's UI on the address it was given (`--host`, here 127.0.0.1), and Spark's own
    (RPC, the block manager), which ask no one for a secret, on loopback: Spark bound those to the machine's
    network address, and binds its UI to every one unless told. Spark's Python workers are its children too."""
    server = psutil.Process(engine_pid(engine))
    ports = [address for p in (server, *server.children(recursive=True)) for address in listening(p)]
    ui = urlsplit(spark_ui(engine)).port
    assert {engine.address.port, engine.address.port + 1, ui} <= {port for _, port in ports}, ports  # Connect, runs, UI
    assert all(ipaddress.ip_address(host.removeprefix("::ffff:")).is_loopback for host, _ in ports), ports


def listening(process: psutil.Process) -> list[tuple[str, int]]:
    """The addresses (host, port) `process` listens on: none once it has ended (a Python worker's task done)."""
    try:
        return [(c.laddr.ip, c.laddr.port) for c in process.net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN]
    except psutil.NoSuchProcess:
        return []


def test_the_engines_spark_ui_shows_its_jobs_and_hides_its_token_and_kill_buttons(engine: EngineForTests) -> None:
    """`--ui-port`: Spark's UI of the engine's application, whose jobs are the runs' (its warm-up's at least); its
    settings shown with the clients' token redacted, and its buttons that kill jobs and stages off, as it asks no
    one who they are."""
    application = f"{spark_ui(engine)}/api/v1/applications"
    [app] = json.loads(urlopen(application, timeout=30).read())
    assert app["name"] == "pielake-engine"
    assert json.loads(urlopen(f"{application}/{app['id']}/jobs", timeout=30).read())
    environment = urlopen(f"{application}/{app['id']}/environment", timeout=30).read().decode()
    assert engine.address.token and engine.address.token not in environment
    settings = dict(json.loads(environment)["sparkProperties"])
    assert settings["spark.ui.killEnabled"] == "false"
    assert settings["spark.connect.authenticate.token"].endswith("(redacted)")


def test_a_second_engine_on_the_lake_and_a_client_without_the_token_are_refused(engine: EngineForTests,
                                                                               tmp_path: Path) -> None:
    again = engine.cli("start", "--port", "1", "--jdbc-port", "2")
    assert again.returncode == 2 and again.stderr.startswith("error: an engine already runs on"), again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    root = new_lake(tmp_path / "lake")
    events = write(tmp_path / "1.json", EVENTS)
    for token, refused in [(None, "a token is needed"), ("guessed", "the token given is not this engine's")]:
        address = EngineAddress(engine.address.host, engine.address.port, token).connect_url
        said = cli("run", str(root / "mid.tpq"), "--events", events, "--lake", str(root), "--remote", address, code=2)
        assert said.startswith("error: the engine at ") and f" refused: {refused}" in said, said
        assert "pass --remote alone, which reads it from the lake's _engine/engine.json" in said, said
        assert len(said.strip().splitlines()) == 1 and engine.address.token not in said


def test_an_order_of_another_pielake_is_refused_in_one_line_and_the_engine_says_its_own(engine: EngineForTests,
                                                                                      tmp_path: Path) -> None:
    """A client of another pielake sends an order with fields this engine does not know: the engine answers why,
    with its own version, and serves on; `engine status` says that version too."""
    order = asdict(RunOrder(query=QUERY, name="mid", lake=str(new_lake(tmp_path / "lake")), run_id="r1",
                            request={}))
    request = Request(f"{engine.address.runs_url}/run", data=json.dumps({**order, "priority": 1}).encode(),
                      headers={"Authorization": f"Bearer {engine.address.token}"}, method="POST")
    with pytest.raises(HTTPError) as refused:
        urlopen(request, timeout=30)
    said = refused.value.read().decode()
    assert refused.value.code == 400 and len(said.splitlines()) == 1, said
    assert said.startswith(f"this engine (pielake {version('pielake')}) cannot read the order to /run: this "
                           "engine knows no field priority. A client of another pielake sends other fields"), said
    status = engine.cli("status")
    assert f"pid {engine_pid(engine)}, pielake {version('pielake')}, Spark " in status.stdout, status


TASK = """
import json
from pathlib import Path
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from pielake.orchestration.airflow import build_dags

dag = build_dags(Path({queries!r}))["pielake_mid"]
ended = []
for step in {steps!r}:
    task, context = dag.get_task(step), {{"run_id": "lost"}}
    task.render_template_fields(context)
    try:
        task.execute(context)
        ended.append([step, "success", ""])
    except (AirflowFailException, AirflowSkipException) as error:
        ended.append([step, type(error).__name__, str(error)])
print(json.dumps(ended))
"""


def test_a_step_of_a_run_that_has_ended_is_skipped_and_takes_no_lock(engine: EngineForTests, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A step may come after its run has ended: a task cleared and run again by hand, or a `pairs` task beside the
    one that failed the run (here ingest ends it, its file never landed, and situations comes after). It is
    skipped: it would otherwise take the query's lock for a run that no longer releases it. Cleared from its first
    step, the run runs again. Airflow's tasks, as the DAG file makes them, in a process of their own as a worker
    runs them: on the engine, and as spark-submit's where no engine runs."""
    root = new_lake(tmp_path / "lake")
    never = tmp_path / "never-landed.json"
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "mid.tpq").write_text(QUERY)

    def tasks(runner: str, *steps: str) -> list[list[str]]:
        (queries / "mid.yaml").write_text(f"events: {never}\nrunner: {runner}\n")
        script = TASK.format(queries=str(queries), steps=steps)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              check=False, env=process_env(
                                  AIRFLOW_HOME=str(tmp_path / "airflow"), PIELAKE_LAKE=str(root),
                                  AIRFLOW_CONN_PIELAKE_ENGINE=engine.address.airflow_connection(),
                                  AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[1]"}),
                                  PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                                  PYSPARK_PYTHON=sys.executable))
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    [ingest, situations] = tasks("engine", "ingest", "situations")
    assert ingest[:2] == ["ingest", "AirflowFailException"] and "never-landed.json" in ingest[2]
    assert situations[:2] == ["situations", "AirflowSkipException"]
    assert "run lost of mid has ended (failed at ingest), so its step situations has nothing to do" in situations[2]
    assert RunLock(root, "mid").holder() is None
    # spark-submit's tasks: situations is skipped before a JVM starts; ingest runs in one, fails on the same
    # missing file, and fails its task for good, as the run's folder says it ended the run again.
    [situations, ingest] = tasks("spark-submit", "situations", "ingest")
    assert situations[:2] == ["situations", "AirflowSkipException"] and "(failed at ingest)" in situations[2]
    assert ingest[:2] == ["ingest", "AirflowFailException"]
    assert ingest[2].startswith("step ingest ended run lost of mid (failed): ") and "never-landed.json" in ingest[2]
    assert RunLock(root, "mid").holder() is None
    # spark-submit's entry point, run by hand, says so before it starts Spark
    argv = ["--step", "pairs_c1", "--query", str(root / "mid.tpq"), "--lake", str(root), "--run-id", "lost",
            "--mode", "incremental", "--events", str(never)]
    assert job_main(argv) == 0
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert said["step"] == "pairs_c1" and "has ended (failed at ingest)" in said["skipped"]
    assert RunLock(root, "mid").holder() is None
    # The run cleared from its first step runs again, once its file has landed.
    write(never, EVENTS[:10])
    assert [outcome[:2] for outcome in tasks("engine", "ingest", "situations")] == [["ingest", "success"],
                                                                                    ["situations", "success"]]


def kill(engine: EngineForTests, written: Path | None = None) -> None:
    """SIGKILL the engine's whole process (its JVM too): once a data file of the table at `written` is on disk,
    or now."""
    deadline = time.monotonic() + 600
    while written is not None and time.monotonic() < deadline and not (written.is_dir() and
                                                                        any(written.rglob("*.parquet"))):
        time.sleep(0.005)
    os.killpg(engine_pid(engine), signal.SIGKILL)


def streaming_rows(engine: EngineForTests, out: Path) -> subprocess.Popen[str]:
    """`pielake sql --remote` of rows without end into `out` as CSV, once the engine has sent the first of them."""
    command = [str(Path(sys.executable).parent / "pielake"), "sql", "--lake", str(engine.lake), "--remote",
               "--format", "csv", "SELECT id FROM range(0, 100000000000, 1, 100000)"]
    with out.open("w", encoding="utf-8") as sink:
        reading = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE, text=True,
                                   env=process_env(PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + 120
    while not out.stat().st_size and reading.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert out.stat().st_size, reading.communicate(timeout=1)[1] if reading.poll() is not None else "no rows in 120 s"
    return reading


def assert_said_the_engine_stopped(reading: subprocess.Popen[str], *, jvm_killed: bool = False) -> None:
    """The `pielake sql` of `streaming_rows` ended within seconds of its engine's end, saying so: that the engine
    stopped answering, or, where its JVM was killed and the engine told its client before it stopped, that."""
    try:
        _, told = reading.communicate(timeout=30)  # not for ever
    finally:
        reading.kill()
    said = {EXIT_UNAVAILABLE: "the engine stopped answering in the middle",
            **({EXIT_JVM_LOST: "the engine's Spark JVM was killed (SIGKILL)"} if jvm_killed else {})}
    assert reading.returncode in said and said[reading.returncode] in told, told


def test_an_engine_killed_mid_step_fails_the_step_and_the_step_run_again_publishes_a_clean_run(
        tmp_path: Path, spark: SparkSession) -> None:
    """The steps as Airflow's tasks send them, one order each, their outputs held in the engine between them. The
    engine is killed as the situations step appends the events: the order fails with the engine unavailable;
    after a restart the same step runs ingest and its gate again first, whose staged events died with the
    engine. Between the situations gate and the pairs its JVM alone is killed, as the system kills the largest
    process for memory: the engine sees it and stops, saying why, and frees the lake for the next, and a `pielake
    sql` reading rows from it then ends at once, saying the engine stopped; the next step runs situations and its
    gate again, but not ingest, as the events are the stream's by then. The run publishes the reference's tables,
    and its ingest counts every event once; a `pielake sql` reading from the engine as it is stopped ends so too."""
    engine = start_engine(tmp_path / "engine")
    root = new_lake(tmp_path / "lake")
    events = write(tmp_path / "events.json", EVENTS)
    plan = load_query(QUERY, "mid")

    def order(step: str) -> RunOrder:
        return RunOrder(QUERY, "mid", str(root), "scheduled", {"mode": "incremental", "events_path": events}, step)

    answers: dict[str, dict] = {}

    def said_by(step: str) -> list[str]:
        lines: list[str] = []
        answers[step] = run_on_engine(engine.address, order(step), lines.append)
        return lines

    try:
        steps = [s.name for s in STAGES.steps(plan)]
        for step in steps[:steps.index("situations")]:
            said_by(step)
        with ThreadPoolExecutor(1) as pool:
            killed = pool.submit(kill, engine, root / "events_line")
            with pytest.raises(EngineError) as stopped:
                run_on_engine(engine.address, order("situations"), print)
            killed.result()
        assert stopped.value.exit_code == EXIT_UNAVAILABLE
        engine = start_engine(engine.lake)
        assert {f"ingest {AGAIN}", f"check_events {AGAIN}"} <= set(said_by("situations"))
        said_by("check_situations")
        served = psutil.Process(engine_pid(engine))
        reading = streaming_rows(engine, tmp_path / "rows.csv")
        engine_jvm(engine).kill()
        served.wait(timeout=30)
        assert_said_the_engine_stopped(reading, jvm_killed=True)
        log = (engine.lake / V.ENGINE_DIR / ENGINE_LOG).read_text(encoding="utf-8")
        assert "error: the engine's Spark JVM was killed (SIGKILL), as the system kills the largest process" in log
        engine = start_engine(engine.lake)
        again = set(said_by(steps[steps.index("check_situations") + 1]))
        assert f"situations {AGAIN}" in again and f"ingest {AGAIN}" not in again
        for step in steps[steps.index("check_situations") + 2:]:
            said_by(step)
        reading = streaming_rows(engine, tmp_path / "more-rows.csv")
    finally:
        engine.cli("stop")
    assert_said_the_engine_stopped(reading)
    assert_tables_equal_the_reference(spark, root, EVENTS)
    assert answers["situations"]["parts"][ADMISSION] > 0  # a step's answer tells its loading apart
    [run] = Lake(spark, root).read("runs").collect()
    assert run.status == "published" and sorted(s.step for s in run.steps) == sorted(steps)
    [ingested] = [IngestReport.of(s.rows) for s in run.steps if s.step == "ingest"]
    assert (ingested.events, ingested.duplicates_dropped) == (len(EVENTS), 0), ingested
