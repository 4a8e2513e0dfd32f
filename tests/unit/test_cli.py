"""The `pielake` command line: exit codes, error output without tracebacks, machine-readable output."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pielake import vocabulary as V
from pielake.cli import main
from pielake.engine.client import ENGINE_FILE, free_port, free_ports
from pielake.exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE
from pielake.streams import SCHEMAS_DIR, StreamSchema, lake_streams, save_schema, where_to_declare
from tests.helpers import held_lock

EXAMPLE = str(Path(__file__).parents[2] / "examples" / "queries" / "aggressive_driving.tpq")


def invoke(args: list[str], code: int, contains: str = "", stdin: str | None = None) -> Result:
    result = CliRunner().invoke(main, args, input=stdin)
    assert result.exit_code == code, result.output
    assert contains in result.output
    assert "Traceback" not in result.output
    return result


def test_explain_prints_the_plan() -> None:
    invoke(["explain", EXAMPLE], EXIT_OK, "c1: A {meets, overlaps, starts, during} B")


@pytest.mark.parametrize("show", ["tokens", "ast", "query"])
def test_explain_refuses_a_format_its_stage_is_not_written_in(show: str) -> None:
    """Only the plan is written as JSON or dot; the parser's stages given --format json were text, silently."""
    invoke(["explain", EXAMPLE, "--show", show, "--format", "json"], EXIT_USAGE,
           f"--format json is a form of the plan; --show {show} is written as text alone")


def test_explain_reads_stdin() -> None:
    invoke(["explain", "-"], EXIT_OK, "c1: A {overlaps} B",
           stdin="FROM S DEFINE A AS a, B AS b PATTERN A overlaps B WITHIN 5 s")


def test_explain_json_lists_constraints_and_join_order() -> None:
    result = invoke(["explain", EXAMPLE, "--format", "json"], EXIT_OK)
    plan = json.loads(result.output)
    assert plan["join_order"] == ["c1", "c2", "c3"]
    assert plan["constraints"][2] == {"id": "c3", "left": "A", "right": "C", "relations": ["before"],
                                      "found_by": {"before": "range join"}}
    assert plan["constraints"][0]["found_by"]["meets"] == "automaton"
    assert plan["streams"] == [{"stream": "CarSensors", "alias": "CS"}]


@pytest.mark.parametrize("show", ["tokens", "ast", "query"])
def test_explain_shows_each_parser_stage(show: str) -> None:
    invoke(["explain", EXAMPLE, "--show", show], EXIT_OK, "car_id")


def test_a_bad_query_prints_one_clear_error_and_exits_2() -> None:
    result = invoke(["explain", "-"], EXIT_USAGE, "unknown relation 'overlap'. Line 1, Col 40. "
                    "Did you mean 'overlaps'?", stdin="FROM S DEFINE A AS x, B AS y PATTERN A overlap B WITHIN 5 s")
    assert "^^^^^^^" in result.output


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    invoke(["explain", "no/such/query.tpq"], EXIT_USAGE, "no query file at no/such/query.tpq")
    invoke(["explain", str(tmp_path)], EXIT_USAGE, f"{tmp_path} is a folder, not a query file: name a .tpq file")


def test_a_query_file_name_must_be_an_identifier(tmp_path: Path) -> None:
    bad = tmp_path / "drop table;.tpq"
    bad.write_text("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s")
    invoke(["explain", str(bad)], EXIT_USAGE, "must be a plain identifier")


def test_check_reports_every_file_as_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tpq"
    bad.write_text("FROM S DEFINE A AS a PATTERN A meets B WITHIN 5 s")
    result = invoke(["check", EXAMPLE, str(bad), "--format", "json"], EXIT_USAGE)
    report = json.loads(result.output)
    assert [r["ok"] for r in report] == [True, False]
    assert report[1]["errors"][0]["line"] == 1


def test_check_says_a_pattern_can_never_match_and_passes_it(tmp_path: Path) -> None:
    never = tmp_path / "never.tpq"
    never.write_text("FROM S DEFINE A AS a, B AS b, C AS c PATTERN A during B AND B during C AND A contains C "
                     "WITHIN 5 s")
    invoke(["check", str(never)], EXIT_OK, "ok\n  warning: the pattern can never match: A during B and B during C "
                                           "leave only A during C, which its constraint A contains C excludes")


def test_a_user_working_outside_the_project_is_told_the_whole_path_of_the_schemas_a_run_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `schemas/` beside a user's own files is never read: from such a folder, the message names the project's
    folder whole, where the file declaring the stream must go (and names it short from the project itself)."""
    mine = tmp_path / "mine.tpq"
    mine.write_text("FROM Mine M PARTITION BY M.unit DEFINE A AS M.load > 1, B AS M.load > 2 PATTERN A meets B "
                    "WITHIN 5 s")
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "Mine.yaml").write_text("stream: Mine\nkeys: [unit]\ntime: {column: ts, unit: s}\n"
                                                    "columns: unit STRING, ts BIGINT, load DOUBLE\n")
    monkeypatch.chdir(tmp_path)
    invoke(["check", str(mine)], EXIT_OK, f"it has no schema in {SCHEMAS_DIR}/ (give --lake")
    assert where_to_declare("Mine") == str(SCHEMAS_DIR / "Mine.yaml")
    monkeypatch.chdir(SCHEMAS_DIR.parent)
    assert where_to_declare("Mine") == "schemas/Mine.yaml"


def test_check_refuses_a_misspelt_column_of_a_declared_stream_without_starting_spark(tmp_path: Path) -> None:
    """Against `schemas/` (CarSensors is declared there), and with --lake against the streams a lake keeps; a
    stream known to neither is said to be unchecked."""
    typo = tmp_path / "typo.tpq"
    typo.write_text(Path(EXAMPLE).read_text().replace("CS.speed > 70", "CS.sped > 70"))
    invoke(["check", str(typo)], EXIT_USAGE, "unknown column 'sped'. Line 5, Col 13. Did you mean 'speed'?")
    mine = tmp_path / "mine.tpq"
    mine.write_text("FROM Mine M PARTITION BY M.unit DEFINE A AS M.sped > 1, B AS M.load > 1 PATTERN A meets B "
                    "WITHIN 5 s")
    invoke(["check", str(mine)], EXIT_OK, "the columns of stream Mine are not checked: it has no schema in "
                                          "schemas/ (give --lake to look in a lake too)")
    save_schema(StreamSchema("Mine", ("unit",), "ts", "s", (("unit", "STRING"), ("ts", "BIGINT"),
                                                            ("speed", "DOUBLE"), ("load", "DOUBLE"))),
                lake_streams(tmp_path / "lake"))
    result = invoke(["check", str(mine), "--lake", str(tmp_path / "lake"), "--format", "json"], EXIT_USAGE)
    assert json.loads(result.output)[0]["errors"][0]["description"] == "unknown column 'sped'"
    invoke(["explain", str(mine), "--lake", str(tmp_path / "lake")], EXIT_USAGE, "Did you mean 'speed'?")


def test_check_finds_the_query_whose_matches_a_query_reads_beside_it_and_refuses_a_cycle(tmp_path: Path) -> None:
    down = tmp_path / "down.tpq"
    down.write_text("FROM matches_up M DEFINE X AS M.a_ts > 0, Y AS M.a_ts < 0 PATTERN X before Y WITHIN 1 h")
    invoke(["check", str(down)], EXIT_USAGE, f"no query up (up.tpq) is in {tmp_path}, whose matches query down reads. "
           "Line 1, Col 6")
    (tmp_path / "up.tpq").write_text("FROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s")
    invoke(["check", str(down)], EXIT_OK, f"{down}: ok")
    (tmp_path / "up.tpq").write_text("FROM matches_down D DEFINE A AS D.x_ts > 0, B AS D.x_ts < 0 "
                                     "PATTERN A meets B WITHIN 5 s")
    invoke(["check", str(down)], EXIT_USAGE, "queries read each other's matches in a cycle: down -> up -> down")


def test_a_query_file_saved_with_a_byte_order_mark_reads_as_its_text(tmp_path: Path) -> None:
    """Some editors write the mark first; it is not a character of the query."""
    (tmp_path / "q.tpq").write_bytes(b"\xef\xbb\xbfFROM S DEFINE A AS a, B AS b\r\nPATTERN A meets B WITHIN 5 s\r\n")
    invoke(["check", str(tmp_path / "q.tpq")], EXIT_OK, "q.tpq: ok")
    invoke(["check", "-"], EXIT_OK, "-: ok", stdin="\ufeffFROM S DEFINE A AS a, B AS b PATTERN A meets B WITHIN 5 s")


def test_landed_files_a_refused_run_took_are_taken_again_by_the_next_run(tmp_path: Path) -> None:
    """Refused before it starts (here, a file whose name tells no format), a run has admitted nothing it took:
    without being taken again, its files would be read by no run."""
    (tmp_path / "landing").mkdir()
    (tmp_path / "landing" / "a.txt").write_text("id,ts\n1,1\n")
    command = ["run", EXAMPLE, "--landing", f"{tmp_path}/landing/", "--lake", str(tmp_path / "lake")]
    refused = "cannot tell the format of"
    first = invoke([*command, "--run-id", "first"], EXIT_USAGE, refused)
    assert "first' (its files end in .txt); pass --format" in first.output
    invoke([*command, "--run-id", "second"], EXIT_USAGE, "second' (its files end in .txt)")
    ledger = tmp_path / "lake" / "_landed" / "aggressive_driving" / "CarSensors"
    assert [p.relative_to(ledger).as_posix() for p in ledger.rglob("*")] == ["second", "second/a.txt"]


@pytest.mark.parametrize("run_id", ["a" * 251, "../up", "a b", "r1\n", ".", "-x"])
def test_a_run_id_that_is_no_plain_token_is_refused_before_a_file_is_named_after_it(tmp_path: Path,
                                                                                    run_id: str) -> None:
    """A run's log is named after its id: 300 characters were an OSError (a file name is at most 255 bytes)."""
    invoke(["run", EXAMPLE, "--events", EXAMPLE, "--lake", str(tmp_path), "--run-id", run_id], 2,
           f"Invalid value for '--run-id': run id '{run_id}' must be letters, digits and _ . ~ : + -, first a letter")
    assert not list(tmp_path.iterdir())


def test_a_master_and_an_engine_together_are_refused_as_one_would_be_ignored(tmp_path: Path) -> None:
    """An engine runs on the master it was started with; a --master beside --remote would be dropped unsaid."""
    for command in (["sql", "SELECT 1"], ["run", EXAMPLE, "--events", EXAMPLE]):
        invoke([*command, "--lake", str(tmp_path), "--master", "local[1]", "--remote"], 2,
               "--master is where Spark runs in this process, and --remote sends the work to an engine")


@pytest.mark.parametrize("command", [["sql", "--lake", "{lake}", "--remote", "SELECT 1"],
                                     ["run", "--remote", EXAMPLE, "--events", EXAMPLE, "--lake", "{lake}"],
                                     ["plot", "--lake", "{lake}", "--remote", EXAMPLE, "--out", "x.png"]],
                         ids=["sql", "run", "plot"])
def test_remote_before_the_arguments_stands_alone(tmp_path: Path, command: list[str]) -> None:
    """Click would give `--remote`, whose address is optional, the next word (the statement, the query file): a
    word that is no address stays the command's argument, and `--remote` looks for the lake's engine."""
    invoke([word.format(lake=tmp_path) for word in command], EXIT_USAGE,
           f"error: no engine runs on {tmp_path.resolve()}; start one with `pielake engine start")


def test_an_events_file_given_as_an_argument_is_told_how_events_are_given(tmp_path: Path) -> None:
    invoke(["run", EXAMPLE, "cars.csv", "--lake", str(tmp_path)], EXIT_USAGE,
           "Got unexpected extra argument (cars.csv); give events with --events: --events cars.csv")
    invoke(["backfill", EXAMPLE, "a.csv", "b.csv", "--lake", str(tmp_path), "--from", "1", "--to", "2"], EXIT_USAGE,
           "Got unexpected extra arguments (a.csv b.csv); give events with --events: --events a.csv")
    said = invoke(["sql", "--lake", str(tmp_path), "SELECT 1", "more"], EXIT_USAGE,
                  "Got unexpected extra argument (more)").output
    assert "--events" not in said


def test_a_run_given_no_events_is_refused_before_spark_starts_where_the_lake_holds_none(tmp_path: Path) -> None:
    """A batch run without --events runs over the events the lake holds; where it holds none of the stream, the
    run would find nothing, so it is refused, as a micro-batch without its events is."""
    invoke(["run", EXAMPLE, "--lake", str(tmp_path)], 2,
           f"error: query aggressive_driving is given no events file, and {tmp_path.resolve()} holds no events of "
           "stream CarSensors to run it over: give them (--events FILE)")
    invoke(["run", EXAMPLE, "--lake", str(tmp_path), "--incremental"], EXIT_USAGE,
           "Missing option '--events': a micro-batch is the events it adds.")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("word", ["localhost:15002", "http://localhost:15002"])
def test_a_word_after_remote_meant_as_an_address_is_refused_saying_how_one_is_written(tmp_path: Path,
                                                                                      word: str) -> None:
    invoke(["sql", "--lake", str(tmp_path), "--remote", word, "SELECT 1"], EXIT_USAGE,
           f"'{word}' is not an engine address: write sc://HOST:PORT (e.g. sc://localhost:15002), or --remote alone")


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["plot", EXAMPLE, "--out", "x.png"], ["maintain", EXAMPLE]],
                         ids=["sql", "plot", "maintain"])
def test_a_command_that_reads_a_lake_refuses_a_folder_that_is_not_there(tmp_path: Path, command: list[str]) -> None:
    """A mistyped --lake would start Spark, create the folder for its log and answer as from an empty lake."""
    invoke([*command, "--lake", str(tmp_path / "lkae")], EXIT_USAGE,
           f"error: no lake at {tmp_path / 'lkae'}: there is no such folder")
    invoke(["unlock", EXAMPLE, "--lake", str(tmp_path / "lkae")], 2, "does not exist")  # not 'no run holds its lock'
    assert not list(tmp_path.iterdir())


def test_a_range_that_is_no_range_of_the_stream_s_times_is_refused_before_spark_starts(
        tmp_path: Path) -> None:
    """The stream's time type is known from its schema (schemas/, or the lake's own) before any file is read."""
    invoke(["backfill", EXAMPLE, "--lake", str(tmp_path), "--from", "1.5", "--to", "9"], EXIT_USAGE,
           "error: --from '1.5' is not a time of stream CarSensors: give a whole number of its unit (s)")
    invoke(["backfill", EXAMPLE, "--lake", str(tmp_path), "--from", "9", "--to", "3"], EXIT_USAGE,
           "error: --from 9 is after --to 3")
    invoke(["plot", EXAMPLE, "--lake", str(tmp_path), "--from", "noon", "--out", "x.png"], EXIT_USAGE,
           "error: --from 'noon' is not a time of stream CarSensors")
    assert not (tmp_path / "_logs").exists()  # no Spark session was started for them


@pytest.mark.parametrize(("address", "said"), [
    ("sc://localhost:99999", "names the port '99999': an engine's port is a whole number from 1 to 65534"),
    ("sc://localhost:65535", "names the port '65535'"), ("sc://localhost:0", "names the port '0'"),
    ("sc://localhost:http", "names the port 'http'"),
    ("sc://[::1]:15002", "names an IPv6 address, which Spark Connect's client cannot reach")])
def test_an_engine_address_no_client_can_reach_is_refused_saying_why(tmp_path: Path, address: str, said: str) -> None:
    """Spark Connect serves on the port and the engine's runs on the next; its client splits the host at `:`."""
    invoke(["sql", "--lake", str(tmp_path), "SELECT 1", "--remote", address], EXIT_USAGE, f"'{address}' {said}")


def test_an_engine_address_nothing_listens_at_is_refused_at_once(tmp_path: Path) -> None:
    """Spark Connect's client (maintenance's) would retry it for minutes, saying nothing."""
    (tmp_path / "q.tpq").write_text("FROM S DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s")
    address = f"sc://localhost:{free_port()}"
    invoke(["maintain", str(tmp_path / "q.tpq"), "--lake", str(tmp_path), "--remote", address], EXIT_USAGE,
           f"no engine answers at {address} (Connection refused)")
    port = free_ports(2)  # runs, statements and plots go over HTTP to the next port: the error names the one given
    for command in (["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "q.tpq")], ["sql", "SELECT 1"],
                    ["plot", str(tmp_path / "q.tpq"), "--out", "p.png"]):
        invoke([*command, "--lake", str(tmp_path), "--remote", f"sc://localhost:{port}"], EXIT_UNAVAILABLE,
               f"no answer from the engine at sc://localhost:{port} (its runs at http://localhost:{port + 1}: ")


def test_a_query_read_from_standard_input_is_read_once_by_every_command_that_sends_it(tmp_path: Path) -> None:
    """`-` reads the query from standard input, which gives its text once: a command that checks the query and then
    sends it (a run, a backfill, a plot on an engine) sends the query it checked, here to an engine that does not
    answer, not an empty one."""
    port = free_ports(2)
    query = Path(EXAMPLE).read_text()
    for command in (["run", "-", "--events", EXAMPLE], ["backfill", "-", "--from", "1", "--to", "9"],
                    ["plot", "-", "--out", "p.png"]):
        invoke([*command, "--lake", str(tmp_path), "--remote", f"sc://localhost:{port}"], EXIT_UNAVAILABLE,
               f"no answer from the engine at sc://localhost:{port}", stdin=query)


def test_the_engine_spark_remote_names_is_where_a_command_runs_unless_master_says_this_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark's own default: a shell set up for an engine's notebooks (`SPARK_REMOTE`) sends pielake's work there
    too, says so without the token, and `--master` still runs in this process; an address of another kind (PySpark's
    `local`, which starts a Connect server of its own) is refused, saying how to run instead."""
    (tmp_path / "q.tpq").write_text("FROM S DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s")
    port = free_ports(2)
    monkeypatch.setenv("SPARK_REMOTE", f"sc://localhost:{port}/;token=secret")
    run = ["run", str(tmp_path / "q.tpq"), "--events", str(tmp_path / "q.tpq"), "--lake", str(tmp_path)]
    said = invoke(run, EXIT_UNAVAILABLE, f"on the engine at sc://localhost:{port}, which SPARK_REMOTE names "
                                         "(--master runs in this process)").output
    assert f"no answer from the engine at sc://localhost:{port}" in said and "secret" not in said
    invoke(["sql", "--lake", str(tmp_path / "nowhere"), "SELECT 1", "--master", "local[1]"], EXIT_USAGE,
           f"no lake at {tmp_path / 'nowhere'}: there is no such folder")  # in process: its check before Spark
    monkeypatch.setenv("SPARK_REMOTE", "local")
    invoke(run, EXIT_USAGE, "SPARK_REMOTE: 'local' is not an engine address; write sc://HOST:PORT (e.g. "
                            "sc://localhost:15002); or unset it, or pass --master, to run in this process")


def test_ctrl_c_while_a_run_on_the_engine_goes_on_says_how_it_stops(tmp_path: Path) -> None:
    """The engine stops a run whose client has gone (`tests/integration/test_engine.py`): the user is told where it
    stops, and what to do."""
    port, started, done = free_ports(2), threading.Event(), threading.Event()

    class Engine(BaseHTTPRequestHandler):  # answers a run's first progress line, then runs on
        protocol_version = "HTTP/1.0"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"progress": "ingest ..."}\n')
            self.wfile.flush()
            started.set()
            done.wait(60)

    engine = ThreadingHTTPServer(("127.0.0.1", port + 1), Engine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    (tmp_path / "q.tpq").write_text("FROM S DEFINE A AS x, B AS y PATTERN A meets B WITHIN 5 s")
    (tmp_path / "e.csv").write_text("x,y,ts\n")
    client = subprocess.Popen([sys.executable, "-c", "from pielake.cli import main; main()", "run",
                               str(tmp_path / "q.tpq"), "--events", str(tmp_path / "e.csv"), "--lake", str(tmp_path),
                               "--run-id", "r1", "--remote", f"sc://localhost:{port}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert started.wait(60) and client.stdout is not None
        shown = [client.stdout.readline()]
        while shown[-1] not in ("ingest ...\n", ""):  # Ctrl+C once the progress line is shown
            shown.append(client.stdout.readline())
        client.send_signal(signal.SIGINT)
        said = "".join(shown) + client.communicate(timeout=60)[0]
    finally:
        done.set()
        engine.shutdown()
    assert client.returncode == EXIT_INTERRUPTED, said
    assert said.splitlines()[-2:] == [
        "ingest ...", "error: stopped run r1 of query q: the engine stops it where it is, as a run that fails there "
        "(one that had published stays published); run the query again for what it left undone"]


def test_a_master_spark_does_not_take_is_refused_before_its_jvm_starts(tmp_path: Path) -> None:
    """Spark's JVM would refuse it as it starts, and PySpark say only that its gateway exited; the engine, which
    starts in a process of its own, says the same line."""
    said = "'foo' is not a Spark master: give local[*], local[N], spark://HOST:PORT, yarn or k8s://HOST:PORT"
    (tmp_path / "e.csv").write_text("id,ts\n")
    invoke(["run", EXAMPLE, "--events", str(tmp_path / "e.csv"), "--lake", str(tmp_path), "--master", "foo"],
           EXIT_USAGE, said)
    result = invoke(["engine", "start", "--lake", str(tmp_path), "--master", "foo", "--port", str(free_ports(2)),
                     "--jdbc-port", str(free_port())], EXIT_USAGE, f"the engine stopped while starting: {said}")
    assert "error: " not in result.output.removeprefix("error: ")


@pytest.mark.parametrize(("option", "value", "most"), [("--keep-days", "1e12", "36500"),
                                                     ("--lock-wait", "1e300", "3153600000")])
def test_a_span_of_time_longer_than_a_hundred_years_is_refused_before_spark_starts(option: str, value: str, most: str,
                                                                                    tmp_path: Path) -> None:
    """Delta's intervals and Python's timers hold a hundred years, not a longer span (`pielake.environment`)."""
    invoke(["maintain", EXAMPLE, "--lake", str(tmp_path), option, value], EXIT_USAGE,
           f"Invalid value for '{option}': {float(value)!r} is not in the range 0<=x<={most}")


@pytest.mark.parametrize("command", [["maintain", EXAMPLE, "--keep-days"], ["maintain", EXAMPLE, "--lock-wait"],
                                     ["engine", "start", "--refresh"]])
def test_a_span_of_time_that_is_not_a_number_is_refused_before_spark_starts(command: list[str],
                                                                           tmp_path: Path) -> None:
    """NaN passes every range check (no comparison with it holds): `maintain --keep-days nan` was a traceback."""
    invoke([*command, "nan", "--lake", str(tmp_path)], EXIT_USAGE, f"Invalid value for '{command[-1]}': nan is not "
           "a number")
    assert not list(tmp_path.iterdir())


def test_no_engine_on_the_lake_is_said_with_what_the_command_can_do_instead(tmp_path: Path) -> None:
    status = invoke(["engine", "status", "--lake", str(tmp_path)], EXIT_USAGE, f"no engine runs on {tmp_path}; "
                    f"start one with `pielake engine start --lake {tmp_path}`")
    assert "--remote" not in status.output
    invoke(["sql", "--lake", str(tmp_path), "SELECT 1", "--remote"], EXIT_USAGE,
           f"start one with `pielake engine start --lake {tmp_path}`, or leave out --remote to run in this process")


def test_two_benchmarks_at_once_are_refused_in_one_line(tmp_path: Path) -> None:
    invoke(["bench", "--engine", "--freshness", "--workdir", str(tmp_path / "bench")], EXIT_USAGE,
           "--freshness and --engine are different benchmarks; run one at a time")
    assert not (tmp_path / "bench").exists()


def test_an_engine_on_a_taken_port_says_so_in_one_line_before_starting_spark(tmp_path: Path) -> None:
    handler = signal.getsignal(signal.SIGTERM)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for option, whose in (("--jdbc-port", "the JDBC endpoint's"), ("--ui-port", "Spark UI's")):
            others = {"--jdbc-port": str(free_port())} | {option: str(port)}
            invoke(["engine", "serve", "--lake", str(tmp_path), "--port", str(free_ports(2)),
                    *(part for pair in others.items() for part in pair)],
                   EXIT_USAGE, f"cannot listen on 127.0.0.1:{port}, {whose} ({option}) port")
    assert signal.getsignal(signal.SIGTERM) is handler  # the engine's TERM handler went with it


@pytest.mark.parametrize(("option", "offset", "named"), [
    ("--jdbc-port", 0, "Spark Connect's (--port)"),
    ("--jdbc-port", 1, "pielake's runs' (--port + 1)"),
    ("--ui-port", 1, "pielake's runs' (--port + 1)"),
    ("--ui-port", 2, "the JDBC endpoint's (--jdbc-port)"),
])
def test_an_engine_port_that_is_one_of_its_other_ports_says_so_in_one_line(option: str, offset: int, named: str,
                                                                           tmp_path: Path) -> None:
    port = free_ports(3)
    ports = {"--port": port, "--jdbc-port": port + 2} | {option: port + offset}
    invoke(["engine", "serve", "--lake", str(tmp_path), *(part for o, p in ports.items() for part in (o, str(p)))],
           EXIT_USAGE, f"{option} {port + offset} is {named} port; pass another {option}")


def test_an_engine_on_a_lake_another_engine_serves_names_it_in_one_line_before_starting_spark(tmp_path: Path) -> None:
    with held_lock(tmp_path, "pid 4242"):
        invoke(["engine", "serve", "--lake", str(tmp_path), "--port", str(free_ports(2)), "--jdbc-port",
                str(free_port())], EXIT_USAGE, f"an engine already runs on {tmp_path.resolve()} (pid 4242)")


def test_an_engine_starting_on_the_lake_is_said_starting_and_a_second_one_is_refused_in_one_line(
        tmp_path: Path) -> None:
    """The first holds the lake's engine lock from its start, and writes its address only once Spark is up."""
    with held_lock(tmp_path, "pid 4242"):
        starting = f"the engine of {tmp_path.resolve()} (pid 4242) is starting: it answers once Spark is up"
        invoke(["engine", "status", "--lake", str(tmp_path)], EXIT_USAGE, starting)
        invoke(["engine", "start", "--lake", str(tmp_path)], EXIT_USAGE,
               f"an engine already runs on {tmp_path.resolve()}: {starting}")


def test_a_command_about_to_start_spark_on_a_lake_an_engine_serves_says_the_engine_would_run_it_warm(
        tmp_path: Path) -> None:
    """Said on stderr before the command's own work (here a refusal before Spark starts), naming the engine
    without its token; not where --master asks for Spark here, nor where an engine killed whole left its
    address behind but holds the lake's lock no more."""
    plot = ["plot", EXAMPLE, "--lake", str(tmp_path), "--out", str(tmp_path / "p.txt")]
    note = "an engine serves this lake (sc://localhost:15002/): --remote runs this command on it, warm"
    with held_lock(tmp_path, "pid 4242"):
        (tmp_path / V.ENGINE_DIR / ENGINE_FILE).write_text(json.dumps({"connect_url": "sc://localhost:15002/;token=t"}))
        said = invoke(plot, EXIT_USAGE, note)
        assert note in said.stderr and "token" not in said.output
        assert said.output.index(note) < said.output.index("its suffix .txt is no image format")
        assert note not in invoke([*plot, "--master", "local[1]"], EXIT_USAGE).output
    assert note not in invoke(plot, EXIT_USAGE).output


def test_the_command_line_imports_no_spark_until_a_command_runs_one() -> None:
    """A run sent to an engine (`--remote`) is a thin client: importing Spark, pandas or Great Expectations would
    cost it more time than the engine spends on a small micro-batch. Asked in a fresh interpreter, since this
    one has imported them all."""
    heavy = ("pyspark", "py4j", "pandas", "pyarrow", "great_expectations")
    probe = f"import sys, pielake.cli; print([m for m in {heavy!r} if m in sys.modules])"
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]"


def test_a_run_whose_jvm_cannot_start_ends_in_one_line_after_spark_s_own_reason(tmp_path: Path) -> None:
    """No Java where JAVA_HOME says: Spark's output, which names the missing `java`, then one line saying what
    Spark needs, not PySpark's traceback."""
    query, events = tmp_path / "q.tpq", tmp_path / "events.csv"
    query.write_text("FROM S PARTITION BY k DEFINE A AS v > 1, B AS v < 1 PATTERN A meets B WITHIN 5 s\n")
    events.write_text("k,ts,v\na,1,2\n")
    done = subprocess.run([str(Path(sys.executable).parent / "pielake"), "run", str(query), "--events", str(events),
                           "--lake", str(tmp_path / "lake")], env={**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk")},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert f"{tmp_path / 'no-jdk' / 'bin' / 'java'}: No such file or directory" in done.stderr
    assert done.stderr.splitlines()[-1] == ("error: Spark's JVM stopped as it started; its output says why (Spark "
                                            "needs Java 17 or later, on PATH or in JAVA_HOME)")
    assert "Traceback" not in done.stderr


def test_a_spark_whose_settings_file_keeps_it_from_starting_says_why_in_one_line(tmp_path: Path) -> None:
    """Spark reads the `spark-defaults.conf` of SPARK_CONF_DIR besides pielake's settings, as for any application:
    one its context cannot start with (an event log folder that does not exist) ends in one line naming Java's
    reason and the file, and the options every JVM of the environment takes (`_JAVA_OPTIONS`, where an `-Xmx`
    wins over the heap pielake gives), not PySpark's traceback."""
    conf, lake = tmp_path / "conf", tmp_path / "lake"
    conf.mkdir()
    lake.mkdir()
    (conf / "spark-defaults.conf").write_text(f"spark.eventLog.enabled true\nspark.eventLog.dir file://{tmp_path}/none\n")
    done = subprocess.run([str(Path(sys.executable).parent / "pielake"), "sql", "--lake", str(lake), "SELECT 1"],
                          env={**os.environ, "SPARK_CONF_DIR": str(conf), "_JAVA_OPTIONS": "-Duser.language=en"},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: Spark did not start: java.io.FileNotFoundException: File file:{tmp_path}/none does not exist (Spark "
        f"also read {conf / 'spark-defaults.conf'}; Java also read _JAVA_OPTIONS=-Duser.language=en: a setting there "
        "may be the cause)"), done.stderr
    assert "Traceback" not in done.stderr


def test_a_first_spark_start_that_reaches_no_maven_repository_says_so_in_one_line(tmp_path: Path) -> None:
    """A machine whose first Spark start cannot fetch Delta's jars (offline, or behind a proxy Java is not told
    of; here a proxy at a closed port, with an Ivy cache of its own under HOME): the addresses Spark could not
    reach, then what it needs, not Java's trace alone and a guess at Java's version."""
    (tmp_path / "lake").mkdir()
    unreachable = " ".join(f"-D{scheme}.proxy{part}" for scheme in ("http", "https")
                           for part in ("Host=127.0.0.1", f"Port={free_port()}"))
    done = subprocess.run([str(Path(sys.executable).parent / "pielake"), "sql", "--lake", str(tmp_path / "lake"),
                           "SELECT 1"], env={**os.environ, "HOME": str(tmp_path), "JAVA_TOOL_OPTIONS": unreachable},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "Server access error at url https://repo1.maven.org/maven2/io/delta/" in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"error: Spark could not fetch the jars of its packages (Delta's) into {tmp_path / '.ivy2.5.2'}: its output "
        "names the addresses it could not reach. Its first start needs Maven Central"), done.stderr
