"""The `pielake` command line. User errors are caught at one boundary and printed without a traceback.

Commands import Spark and the pipeline where they run them, not here: a run, a statement or a plot sent to an
engine (`--remote`) is a thin client, whose start-up is part of every scheduled micro-batch and of every look at
its matches, and `check`, `explain` or `engine status` need none of it either.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from functools import partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pielake import vocabulary as V
from pielake.bench.queries import TPSTREAM_QUERIES
from pielake.engine import control
from pielake.engine.client import (
    DEFAULT_PORT,
    LAKES_ENGINE,
    MAX_PORT,
    SPARK_REMOTE,
    EngineAddress,
    EngineError,
    PlotOrder,
    RunOrder,
    SqlOrder,
    engine_for,
    run_on_engine,
    sql_on_engine,
    timeline_on_engine,
)
from pielake.engine.jvm import check_own_pyspark, check_spark_environment
from pielake.engine.settings import WARM_UP_RUNS, keep_days, short_lived
from pielake.environment import longest
from pielake.errors import A_RUN, PielakeError, QueryError, Then, a_read, for_the_user
from pielake.exitcodes import EXIT_INTERRUPTED, EXIT_USAGE
from pielake.explain import explain, explain_dot, found_by, relation_pictures
from pielake.lake.access import check_writable, log_folder
from pielake.lake.catalog import PASSWORD_VARIABLE
from pielake.lake.landed import Landing, ledger_of, take_each
from pielake.lake.lock import RunLock
from pielake.lake.statements import as_of_time, check_read_only
from pielake.pipeline.registry import STAGES
from pielake.pipeline.run_folder import RunEnd, record_end, run_end, unadmitted_runs
from pielake.plot import Timeline, draw, image_file
from pielake.query.analyzer import QueryPlan, analyze, bind_declared, load_query_file, read_query_file
from pielake.query.hierarchy import check_upstreams
from pielake.query.join_order import join_order
from pielake.query.parser import parse
from pielake.query.printer import expr_text, query_text
from pielake.query.tokens import tokenize
from pielake.streams import (
    FORMATS,
    StreamSchema,
    as_given,
    events_files,
    files_by_stream,
    load_schema,
    named_file,
    where_to_declare,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "queries"


def user_errors(command: Callable[..., Any], *, then: Then = A_RUN) -> Callable[..., Any]:
    """Print a PielakeError as its message alone and exit with its exit code (EXIT_USAGE, or EXIT_FINDINGS for
    a failed data-quality gate); so too what the machine did to it, a full disk or a killed JVM (`for_the_user`),
    worded for what the command does (`then`: a run, unless it only reads)."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as raised:
            error = for_the_user(raised, then)
            if error is None:
                raise
            click.echo(f"error: {error}", err=True)
            sys.exit(error.exit_code)

    return wrapper


LAKE_SCHEMAS_HELP = "A lake whose streams' schemas the query's columns are checked against too (schemas/ always is)."


def _reads_as_address(word: str) -> bool:
    """Whether the word after `--remote` is meant as an engine's address: a URL, or a `HOST:PORT` its scheme is
    missing from (kept, so that the refusal says how an address is written)."""
    return re.fullmatch(r"[A-Za-z][\w+.-]*://\S*|[\w.-]+:\d+", word) is not None


def _remote_alone(words: list[str]) -> list[str]:
    """The words with every `--remote` that is followed by a word no address (a query file, a statement) given as
    the flag alone. Click gives an option whose value is optional the next word that does not start with `-`, so
    `pielake sql --lake L --remote "SELECT 1"` would take the statement for the engine's address: `--remote` is
    alone there, and the statement stays the command's argument. After `--` every word is an argument."""
    given = list(words)
    for at, word in enumerate(given[:-1]):
        if word == "--":
            break
        if word == "--remote" and not given[at + 1].startswith("-") and not _reads_as_address(given[at + 1]):
            given[at] = f"--remote={LAKES_ENGINE}"
    return given


def _reads_as_statement(word: str) -> bool:
    """Whether a word that starts with `-` is a statement, not an option: it has white space before any `=`, as
    a statement that starts with a comment (`-- the week's runs` and a line break) has, and no option has."""
    return re.match(r"-[^=\s]*\s", word) is not None


def _statement_last(words: list[str]) -> list[str]:
    """The words with a statement that starts with `-` moved after `--`, where Click reads every word as an
    argument: before it, Click reads the statement as an unknown option. Words that hold `--` are as given."""
    if "--" in words:
        return list(words)
    statements = [word for word in words if _reads_as_statement(word)]
    if not statements:
        return list(words)
    return [word for word in words if not _reads_as_statement(word)] + ["--", *statements]


class _Command(click.Command):
    """A command of pielake's: one that takes `--remote` reads its words as `_remote_alone` says, one that takes a
    statement reads it as `_statement_last` says, and one that takes `--events` tells words left over (`pielake
    run q.tpq cars.csv`) how an events file is given."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        names = {parameter.name for parameter in self.params}
        if "statement" in names:
            args = _statement_last(args)
        if "remote" in names:
            args = _remote_alone(args)
        ctx.allow_extra_args = True  # left over words are refused below, with the fix where there is one
        rest = super().parse_args(ctx, args)
        if rest:
            hint = f"; give events with --events: --events {rest[0]}" if "events_given" in names else ""
            ctx.fail(f"Got unexpected extra argument{'s' if len(rest) > 1 else ''} ({' '.join(rest)}){hint}")
        return rest


class _Commands(click.Group):
    """pielake's commands, and its groups of commands (`engine`), are `_Command`s."""

    command_class = _Command
    group_class = type


@click.group(cls=_Commands, epilog="Examples:\n\n  pielake explain examples/queries/aggressive_driving.tpq\n\n"
                    "  cat q.tpq | pielake explain -")
@click.version_option(package_name="pielake")
def main() -> None:
    """pielake: interval temporal patterns (PieStream / TPStream) over event streams in Delta Lake."""


@main.command("explain")
@click.argument("query_file")
@click.option("--show", type=click.Choice(["plan", "tokens", "ast", "query"]), default="plan",
              help="plan: the explain report; tokens/ast: the parser's stages; query: canonical text.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot"]), default="text",
              help="dot: the decomposition and the automata as a Graphviz digraph (pipe it to `dot -Tsvg`).")
@click.option("--automata/--no-automata", default=True, show_default=True,
              help="With --format dot: draw every PiePair automaton, or the decomposition alone.")
@click.option("--lake", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help=LAKE_SCHEMAS_HELP)
@user_errors
def explain_command(query_file: str, *, show: str, fmt: str, automata: bool, lake: Path | None) -> None:
    """Explain QUERY_FILE: symbols, mPiePairs, decision times, join order and PiePair automata ('-' = stdin)."""
    if show != "plan" and fmt != "text":  # the parser's stages and the canonical text are text alone
        raise click.BadParameter(f"--format {fmt} is a form of the plan; --show {show} is written as text alone: "
                                 f"leave out --format, or --show", param_hint="'--format'")
    source, name = read_query_file(query_file)
    if show == "tokens":
        for token in tokenize(source):
            click.echo(f"{token.span.line}:{token.span.col}\t{token.kind.name}\t{token.text}"
                       + (f"\tunit={token.unit}" if token.unit else ""))
        return
    parsed = parse(source)
    if show == "ast":
        click.echo(repr(parsed.query))
        return
    if show == "query":
        click.echo(query_text(parsed.query), nl=False)
        return
    plan, schemas = bind_declared(analyze(parsed, name), lake)
    if fmt == "json":
        click.echo(json.dumps(plan_json(plan), indent=2))
    elif fmt == "dot":
        click.echo(explain_dot(plan, automata=automata), nl=False)
    else:
        intervals = frozenset(schema.name for schema in schemas if schema.end_column is not None)
        click.echo(explain(plan, intervals=intervals), nl=False)


@main.command("relations")
def relations_command() -> None:
    """Draw every relation of the query language on an example, with its condition on the endpoints."""
    click.echo(relation_pictures(), nl=False)


@main.command("check")
@click.argument("query_files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--lake", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help=LAKE_SCHEMAS_HELP)
def check_command(query_files: tuple[str, ...], fmt: str, lake: Path | None) -> None:
    """Check query files; every error is printed with line, column and a caret. Exit 2 if any is invalid."""
    failed = False
    report = []
    for path in query_files:
        try:
            plan, schemas = bind_declared(load_query_file(path), lake)
            folder = Path(path).resolve().parent
            check_upstreams(plan, lambda name, folder=folder: _query_beside(folder, name), str(folder))
            notes = [w.render() for w in plan.warnings] + _unchecked(plan, schemas, lake)
            report.append({"file": path, "ok": True, "warnings": notes})
            if fmt == "text":
                click.echo(f"{path}: ok" + "".join(f"\n  {note}" for note in notes))
        except QueryError as error:
            failed = True
            report.append({"file": path, "ok": False, "errors": [e.as_dict() for e in error.errors]})
            if fmt == "text":
                click.echo(f"{path}: {error}", err=True)
        except PielakeError as error:
            failed = True
            report.append({"file": path, "ok": False, "errors": [{"description": str(error)}]})
            if fmt == "text":
                click.echo(f"{path}: {error}", err=True)
    if fmt == "json":
        click.echo(json.dumps(report, indent=2))
    if failed:
        sys.exit(EXIT_USAGE)


def _unchecked(plan: QueryPlan, schemas: list[StreamSchema], lake: Path | None) -> list[str]:
    """A line for each stream of events whose columns `check` could not check: it has no schema yet."""
    known = {schema.name.lower() for schema in schemas}
    folder = where_to_declare()
    where = f"{folder} or {lake}" if lake is not None else f"{folder} (give --lake to look in a lake too)"
    return [f"the columns of stream {source.stream} are not checked: it has no schema in {where}, so a run types "
            "it from its first file" for source in plan.sources
            if not source.reads_matches and source.stream.lower() not in known]


def _query_beside(folder: Path, name: str) -> QueryPlan | None:
    """The query `name` as a file in `folder` (`<name>.tpq`, any case), where a query over its matches finds it."""
    found = named_file(folder, name, ".tpq")
    if found is None:
        return None
    try:
        return load_query_file(found)
    except QueryError as error:
        raise PielakeError(f"query {name}, whose matches it reads, does not load: {found}: {error}") from None


def _run_id(_context: click.Context, _parameter: click.Parameter, value: str | None) -> str | None:
    """`--run-id`, checked before the run names a file after it (its log, its records)."""
    try:
        return V.check_run_id(value) if value else None
    except PielakeError as error:
        raise click.BadParameter(str(error)) from None


class Span(click.FloatRange):
    """A span of time an option gives, from `low` to the longest a setting gives (`longest(unit)`). Click's range
    lets NaN through, since no comparison with a bound holds for it; a span is a number."""

    def __init__(self, low: float, unit: str) -> None:
        super().__init__(low, longest(unit))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        span = super().convert(value, param, ctx)
        if math.isnan(span):
            self.fail(f"{value} is not a number", param, ctx)
        return span


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


VERBOSE = "pielake.verbose"


def _keep_verbose(context: click.Context, _parameter: click.Parameter, value: bool) -> None:
    context.meta[VERBOSE] = value


def spark_console(lake_dir: str, name: str) -> Path | None:
    """Where the JVM of an in-process session writes its own output: `<lake>/_logs/<name>.log` (`log_folder`), so
    that a run prints pielake's lines only; with `--verbose`, here."""
    context = click.get_current_context(silent=True)
    return None if context is not None and context.meta.get(VERBOSE) else log_folder(lake_dir) / f"{name}.log"


def _engine_address(_context: click.Context, _parameter: click.Parameter, value: str | None) -> str | None:
    """`--remote`'s value: an engine's address, or none (the flag alone)."""
    if value is None or value == LAKES_ENGINE or value.startswith("sc://"):
        return value
    raise click.BadParameter(f"'{value}' is not an engine address: write sc://HOST:PORT (e.g. "
                             f"sc://localhost:{DEFAULT_PORT}), or --remote alone for the lake's engine")


def spark_options(command: Callable[..., Any], *, thin_client: bool = False) -> Callable[..., Any]:
    """Where a command's Spark work runs: in this process (on `--master`), or on an engine (`--remote`), which
    runs on the master it was started with; both given is refused, as one of them would be ignored. An
    environment whose Spark is not pielake's is refused before the command imports Spark: in process, or on an
    engine through Spark Connect's client, which is pyspark too; a `thin_client` command sends a run on an
    engine without it."""

    @wraps(command)
    def one_place(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("master") is not None and kwargs.get("remote") is not None:
            raise click.UsageError("--master is where Spark runs in this process, and --remote sends the work to an "
                                   "engine, which runs on its own master (`pielake engine start --master`): give "
                                   "one of them")
        if kwargs.get("master") is None and kwargs.get("remote") is None:
            kwargs["remote"] = _remote_of_environment()
            if kwargs["remote"] is None:
                _note_the_lake_s_engine(kwargs.get("lake_dir"))
        if kwargs.get("remote") is None:
            check_spark_environment(os.environ)
        elif not thin_client:
            check_own_pyspark(os.environ)
        return command(*args, **kwargs)

    optioned = click.option("--verbose", is_flag=True, expose_value=False, callback=_keep_verbose,
                            help="Show Spark's own output here (by default in <lake>/_logs/).")(user_errors(one_place))
    optioned = click.option("--remote", default=None, metavar="[sc://HOST:PORT]", is_flag=False,
                            flag_value=LAKES_ENGINE,
                            callback=_engine_address,
                            help="Run on an engine: its address, or alone for the engine running on the lake. "
                                 f"Default: the engine {SPARK_REMOTE} names, if set and no --master is given."
                            )(optioned)
    return click.option("--master", default=None,
                        help="Spark master URL of an in-process run (default: local[*], or PIELAKE_SPARK_MASTER)."
                        )(optioned)


def _remote_of_environment() -> str | None:
    """The engine `SPARK_REMOTE` names, for a command given neither --master nor --remote: PySpark connects a
    session that names no master there, so a shell set up for an engine's notebooks sends pielake's work to it
    too. The command says so, as the environment chose it, not the command line."""
    named = os.environ.get(SPARK_REMOTE, "").strip()
    if not named:
        return None
    try:
        address = EngineAddress.parse(named)
    except PielakeError as wrong:
        raise click.UsageError(f"{SPARK_REMOTE}: {wrong}; or unset it, or pass --master, to run in this process"
                               ) from None
    _say(f"on the engine at sc://{address.host}:{address.port}, which {SPARK_REMOTE} names (--master runs in this "
         "process)")
    return named


def _note_the_lake_s_engine(lake_dir: str | None) -> None:
    """A command about to start Spark in this process on a lake an engine serves says so: on the engine it would
    run warm, in seconds rather than a JVM's start, and Spark here takes the cores and memory the engine uses."""
    address = None if lake_dir is None else control.serving(lake_dir)
    if address is not None:
        _say(f"an engine serves this lake ({address}): --remote runs this command on it, warm; without it, Spark "
             "starts in this process")


def session(master: str | None, remote: str | None, lake_dir: str) -> SparkSession:
    """The Spark session of a command that reads a lake: in this process, or a Spark Connect session of the
    engine. In process, a lake folder that does not exist (a mistyped path) is refused before Spark starts, which
    would create it for its log and answer as from an empty lake; an engine reads the path on its own machine."""
    from pielake.engine.session import build_session, connect_session  # noqa: PLC0415 (module docstring)

    if remote is not None:
        return connect_session(engine_for(remote, lake_dir))
    if not Path(lake_dir).is_dir():
        raise PielakeError(f"no lake at {lake_dir}: there is no such folder (a lake is the folder a run's --lake "
                           "names, which the run creates)")
    return build_session(master, console=spark_console(lake_dir, "spark"))


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `run` and `backfill` share."""
    for option in reversed([
        click.option("--lake", "lake_dir", required=True, type=click.Path(file_okay=False), help="The lake folder."),
        click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                     help="Input format (default: the one the file's suffix, or a folder's files' suffixes, tell)."),
        click.option("--time-column", default=None, metavar="COLUMN",
                     help="Event-time column of an unknown stream. Default: ts, else the file's one column of "
                          "times."),
        click.option("--time-unit", default=None, metavar="UNIT",
                     help="Unit of a numeric event time of an unknown stream (s, ms, us, ...); a time its file "
                          "holds as TIMESTAMPs is of unit timestamp. Default: s."),
        click.option("--skip-lines", default="", metavar="N|LINES",
                     help="Lines of an unknown stream's CSV files that hold neither rows nor the header: N (the "
                          "first N: a logger's title) or their numbers (1,3,4: a title, then two lines of units "
                          "after the header)."),
        click.option("--time-zone", default=None, metavar="ZONE",
                     help="Zone whose wall clock an unknown stream's files write times in where they carry no zone "
                          "(a logger's local time): an IANA name (Europe/Berlin) or an offset (+02:00). Default: "
                          "UTC."),
        click.option("--time-format", default=None, metavar="PATTERN",
                     help="Spark datetime pattern an unknown stream's files write text times in (dd/MM/yyyy "
                          "HH:mm:ss); with --time-column naming a column of dates beside one of times of day, the "
                          "two joined by a space. Default: ISO-8601, or the one day-first or month-first pattern "
                          "that reads the file."),
        click.option("--run-id", default=None, callback=_run_id,
                     help="Name of this run (default: a timestamp and a random suffix)."),
        click.option("--checks/--no-checks", default=True, show_default=True,
                     help="Run the data-quality gates (expectations/) before publishing."),
    ]):
        command = option(command)
    return spark_options(command, thin_client=True)


def _followed(order: RunOrder, address: EngineAddress) -> dict[str, Any]:
    """The engine's result of `order`, its progress said as it comes. Ctrl-C stops the run, as it stops a run in
    this process: the engine stops a run whose client has gone (`pielake.engine.server.WorkInEngine`)."""
    try:
        return run_on_engine(address, order, _say)
    except KeyboardInterrupt:
        raise EngineError(f"stopped run {order.run_id} of query {order.name}: the engine stops it where it is, as a "
                          "run that fails there (one that had published stays published); run the query again for "
                          "what it left undone", EXIT_INTERRUPTED) from None


def _say(line: str) -> None:
    click.echo(line, err=True)


def _absolute(events: dict[str, Any]) -> dict[str, Any]:
    """The events files as absolute paths, for an engine that does not share the terminal's folder."""
    path, pairs = events.get("events_path"), events.get("stream_events", [])
    return {"events_path": str(Path(path).resolve()) if path else None,
            "stream_events": [(name, str(Path(file).resolve())) for name, file in pairs]}


def _run(plan: QueryPlan, events: dict[str, Any], lake_dir: str, *, master: str | None, remote: str | None,
         run_id: str | None, **options: Any) -> None:
    """A whole run: on the engine (the query's text and the request travel, absolute events paths), or here;
    `events` are the request's events files (`events_files`)."""
    for warning in plan.warnings:  # said before the run, which a pattern that can never match runs in vain
        click.echo(warning.render())
    run_id = run_id or new_run_id()
    if remote is not None:
        request = {**_absolute(events), **options}
        order = RunOrder(plan.source, plan.name, str(Path(lake_dir).resolve()), run_id, request)
        click.echo(_followed(order, engine_for(remote, lake_dir))["summary"])
        return
    from pielake.engine.session import build_session  # noqa: PLC0415 (module docstring)
    from pielake.lake.delta import Lake  # noqa: PLC0415
    from pielake.pipeline.gates import import_gx_meanwhile  # noqa: PLC0415
    from pielake.pipeline.job import RunRequest  # noqa: PLC0415
    from pielake.pipeline.runner import run_query  # noqa: PLC0415

    request = RunRequest(**events, **options)
    check_writable(lake_dir)
    request.check_inputs(plan, Path(lake_dir))
    if options["checks"]:
        import_gx_meanwhile()
    console = spark_console(lake_dir, run_id)
    lake = Lake(build_session(master, console=console, short_lived=short_lived(options["mode"])), lake_dir)
    summary = run_query(lake, plan, run_id, request, progress=_say)
    click.echo(summary.render())
    if console is not None:
        click.echo(f"  Spark's own output: {console}")


@main.command("run")
@click.argument("query_file")
@click.option("--events", "events_given", multiple=True,
              help="CSV (with header), Parquet or JSON (JSON Lines, or an array of records) events, CSV and JSON "
                   "also as .gz or .bz2; over several streams, STREAM=FILE, once for each stream with new events "
                   "(over one, FILE or STREAM=FILE). "
                   "None: a batch run over the events the lake holds (a new query over streams it has ingested, "
                   "a query over another query's matches).")
@click.option("--landing", "landing_given", multiple=True,
              help="Instead of --events: the files that landed in this folder since the query's last run took "
                   "them (a folder and a pattern, /landing/cars/*.csv; over several streams, STREAM=GLOB), taken "
                   "as a query registered with `landing` takes them, as the next micro-batch.")
@click.option("--incremental", is_flag=True,
              help="Append the events as the next micro-batch and recompute only what they change.")
@run_options
@user_errors
def run_command(query_file: str, *, events_given: tuple[str, ...], landing_given: tuple[str, ...],
                incremental: bool, lake_dir: str, master: str | None, remote: str | None, run_id: str | None,
                **options: Any) -> None:
    """Run QUERY_FILE over the events: ingest, situations, pairs, matches, each gated, then publish."""
    plan = load_query_file(query_file)
    if events_given and landing_given:
        raise click.UsageError("--events and --landing each give the run's events: give one of them.")
    if landing_given:
        run_id = run_id or new_run_id()
        events_given = _take_landed(plan, landing_given, lake_dir, run_id)
        if not events_given:
            click.echo(f"no file has landed in {', '.join(landing_given)} since query {plan.name} last took "
                       "files: nothing to run")
            return
    if not events_given and incremental and plan.upstream_source is None:
        raise click.UsageError("Missing option '--events': a micro-batch is the events it adds.")
    with _retaken_if_refused(plan, lake_dir, run_id) if landing_given else nullcontext():
        _run(plan, events_files(plan, events_given), lake_dir, master=master, remote=remote, run_id=run_id,
             mode="incremental" if incremental or landing_given else "batch", **options)


@contextmanager
def _retaken_if_refused(plan: QueryPlan, lake_dir: str, run_id: str | None) -> Iterator[None]:
    """A run of landed files refused without having recorded how it ended (before it starts: a file of no format
    it can tell, another run holding the query) is recorded as failed at its first step, so that the query's next
    run takes its files again (`unadmitted_runs`)."""
    try:
        yield
    except PielakeError:
        root = Path(lake_dir).resolve()
        if run_id is not None and run_end(root, plan.name, run_id) is None:
            record_end(root, plan.name, run_id, RunEnd(V.FAILED, STAGES.steps(plan)[0].name))
        raise


def _take_landed(plan: QueryPlan, landing_given: tuple[str, ...], lake_dir: str, run_id: str) -> tuple[str, ...]:
    """The files that landed since the query's last run took them, taken for run `run_id` into the lake's ledger
    (`pielake.lake.landed`, the one Airflow's `take_landed` keeps), as `--events` gives them."""
    landings = {stream: Landing.parse(str(Path(glob).absolute()))
                for stream, glob in files_by_stream(plan, landing_given).items()}
    root = Path(lake_dir).resolve()
    retaken = unadmitted_runs(root, plan.name, STAGES.before_admission())
    return as_given(plan, take_each(landings, ledger_of(root, plan.name), run_id, retaken))


@main.command("backfill")
@click.argument("query_file")
@click.option("--from", "since", required=True, help="Start of the range (stream time: number or ISO timestamp).")
@click.option("--to", "until", required=True, help="End of the range, inclusive.")
@click.option("--events", "events_given", multiple=True,
              help="History to add in the range (events outside it are quarantined); optional. Over several "
                   "streams, STREAM=FILE, once for each stream with history to add.")
@run_options
@user_errors
def backfill_command(query_file: str, *, since: str, until: str, events_given: tuple[str, ...], lake_dir: str,
                     master: str | None, remote: str | None, run_id: str | None, **options: Any) -> None:
    """Recompute QUERY_FILE from before --from: re-admits the quarantined late events in the range and the
    --events files', and replaces every derived row from there on with what a batch run over all events gives."""
    plan = load_query_file(query_file)
    _run(plan, events_files(plan, events_given), lake_dir, master=master, remote=remote, run_id=run_id,
         mode="backfill", since=since, until=until, **options)


@main.command("sql")
@click.argument("statement")
@click.option("--lake", "lake_dir", required=True, type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="A table shows the first 10,000 rows (and says if there are more); csv and json give every row. "
                   "Nested values are JSON in every format.")
@click.option("--as-of", "as_of", default=None, metavar="TIME",
              help="Read every table as it was at TIME (ISO-8601, UTC unless it says its zone): each one's newest "
                   "version committed by then; a table created after it is not there.")
@partial(spark_options, thin_client=True)
@partial(user_errors, then=a_read("statement", "run"))
def sql_command(statement: str, *, lake_dir: str, fmt: str, as_of: str | None, master: str | None,
                remote: str | None) -> None:
    """Answer a read-only SQL query over every table of the lake, by name ('-': read it from standard input)."""
    text = check_read_only(sys.stdin.read() if statement == "-" else statement)  # before Spark starts, or is asked
    for piece in _answered(text, lake_dir, fmt, as_of, master=master, remote=remote):
        click.echo(piece, nl=False)


def _answered(statement: str, lake_dir: str, fmt: str, as_of: str | None = None, *, master: str | None,
              remote: str | None) -> Iterator[str]:
    """A checked statement's result, formatted, in pieces: the engine's, which reads it and sends the pieces (this
    process imports no Spark), or read here. `as_of` is checked first, before Spark starts or the engine is
    asked."""
    moment = None if as_of is None else as_of_time(as_of)
    if remote is not None:
        order = SqlOrder(statement, str(Path(lake_dir).resolve()), fmt, as_of)
        return sql_on_engine(engine_for(remote, lake_dir), order, _say)
    from pielake.lake.delta import Lake  # noqa: PLC0415 (module docstring)
    from pielake.lake.sql import query_lake  # noqa: PLC0415

    return query_lake(Lake(session(master, None, lake_dir), lake_dir), statement, fmt, moment, _say)


@main.group("engine")
def engine_group() -> None:
    """The lake's engine: one long-lived Spark application that serves Spark Connect, JDBC and pielake's runs."""


def engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `engine start` and `engine serve` share."""
    for option in reversed([
        click.option("--lake", "lake_dir", required=True, type=click.Path(file_okay=False)),
        click.option("--host", default="127.0.0.1", show_default=True,
                     help="Address to listen on (0.0.0.0: every one; see SECURITY.md first)."),
        click.option("--port", type=click.IntRange(1, MAX_PORT), default=DEFAULT_PORT, show_default=True,
                     help="Spark Connect's port; runs are served on the next one."),
        click.option("--jdbc-port", type=click.IntRange(1, 65535), default=10000, show_default=True,
                     help="The JDBC/ODBC (Thrift) endpoint's port."),
        click.option("--ui-port", type=click.IntRange(1, 65535), default=None,
                     help="Serve Spark's UI on this port, on --host (default: no UI; it asks no one for a token: "
                          "see SECURITY.md)."),
        click.option("--refresh", type=Span(0.5, "seconds"), default=30.0, show_default=True,
                     help="Seconds between looks for new lake tables to register."),
        click.option("--metastore-url", default=None,
                     help="JDBC URL of an external metastore (default: embedded Derby under LAKE/_catalog)."),
        click.option("--metastore-driver", default=None, help="Its JDBC driver class, e.g. org.postgresql.Driver."),
        click.option("--metastore-user", default=None, help=f"Its user; the password comes from {PASSWORD_VARIABLE}."),
        click.option("--packages", "packages", multiple=True,
                     help="Maven coordinates to load, e.g. the driver org.postgresql:postgresql:42.7.4 (repeatable)."),
        click.option("--master", default=None,
                     help="Spark master the engine runs on (default: local[*], or PIELAKE_SPARK_MASTER)."),
        click.option("--warm-up", type=click.IntRange(min=0), default=WARM_UP_RUNS, show_default=True,
                     help="Micro-batches of a query of the engine's own it runs on a scratch lake before it serves, "
                          "after a batch run, so that the first runs it is sent are warm (0: none)."),
    ]):
        command = option(command)
    return command


@engine_group.command("serve")
@engine_options
@user_errors
def engine_serve_command(**options: Any) -> None:
    """Run the engine in this process until stopped (TERM or Ctrl-C); `engine start` runs it in the background."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())  # TERM: close the servers and the catalog
    try:
        control.serve_here(stop=stop, say=click.echo, **options)
    finally:
        signal.signal(signal.SIGTERM, previous)
    click.echo("stopped")


@engine_group.command("start")
@engine_options
@user_errors
def engine_start_command(lake_dir: str, **options: Any) -> None:
    """Start the lake's engine in the background; prints its addresses once it serves."""
    check_writable(lake_dir)
    click.echo(control.start(lake_dir, options))


@engine_group.command("status")
@click.option("--lake", "lake_dir", required=True, type=click.Path(file_okay=False))
@user_errors
def engine_status_command(lake_dir: str) -> None:
    """Say whether an engine runs on the lake, where, and what it is running (exit 2 if none)."""
    click.echo(control.status(lake_dir))


@engine_group.command("stop")
@click.option("--lake", "lake_dir", required=True, type=click.Path(file_okay=False))
@user_errors
def engine_stop_command(lake_dir: str) -> None:
    """Stop the lake's engine: TERM (it closes its servers and catalog), then KILL after 30 s."""
    click.echo(control.stop(lake_dir))


@main.command("plot")
@click.argument("query_file")
@click.option("--lake", "lake_dir", required=True, type=click.Path(file_okay=False))
@click.option("--key", "key", multiple=True,
              help="The key to draw: one --key per PARTITION BY column, in order (default: the one with the most "
                   "matches, else with the most situations).")
@click.option("--from", "since", default=None, help="Draw from this time on (stream time).")
@click.option("--to", "until", default=None, help="Draw up to this time (inclusive).")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Image file, in the format its suffix names: .png, .svg, .pdf (or another matplotlib writes).")
@partial(spark_options, thin_client=True)
@partial(user_errors, then=a_read("plot", "draw"))
def plot_command(query_file: str, *, lake_dir: str, key: tuple[str, ...], since: str | None, until: str | None,
                 out: str, master: str | None, remote: str | None) -> None:
    """Draw one key's situations (a lane per symbol) and matches (brackets, detected_at marked) as a timeline."""
    with ThreadPoolExecutor(1) as beside:
        image = beside.submit(image_file, out)  # matplotlib's import, most of a plot the engine reads, beside it
        if remote is None:
            image.result()  # a bad --out is refused before Spark starts
        picture = _timeline(load_query_file(query_file), lake_dir, key, since, until, master=master, remote=remote)
        written = draw(picture, image.result())
    drawn = f"{V.counted(len(picture.bars), 'situation')}, {V.counted(len(picture.brackets), 'match')}"
    click.echo(f"wrote {written}: {picture.key}, {drawn}")


def _timeline(plan: QueryPlan, lake_dir: str, key: tuple[str, ...] = (), since: str | None = None,
              until: str | None = None, *, master: str | None, remote: str | None) -> Timeline:
    """One key's timeline (none given: the busiest key's): the engine's, which reads it and sends it as JSON
    (this process imports no Spark, and draws it), or read here, where a range the lake's schemas refuse is
    refused before Spark starts."""
    if remote is not None:
        order = PlotOrder(plan.source, plan.name, str(Path(lake_dir).resolve()), key, since, until)
        return Timeline.from_json(timeline_on_engine(engine_for(remote, lake_dir), order, _say))
    from pielake.lake.delta import Lake  # noqa: PLC0415 (module docstring)
    from pielake.lake.plotted import timeline  # noqa: PLC0415
    from pielake.spark.query import check_range_early  # noqa: PLC0415

    check_range_early(since, until, plan, Path(lake_dir))
    return timeline(Lake(session(master, None, lake_dir), lake_dir), plan, key or None, since, until)


@main.command("maintain")
@click.argument("query_file")
@click.option("--lake", "lake_dir", required=True, type=click.Path(file_okay=False))
@click.option("--keep-days", type=Span(0, "days"), default=keep_days,
              show_default="1, or PIELAKE_KEEP_DAYS",
              help="Days of time travel kept: the files VACUUM leaves and the tables' Delta log.")
@click.option("--lock-wait", type=Span(0, "seconds"), default=0, show_default=True,
              help="Seconds to wait for a run of the query to publish (else stop at once, exit code 3).")
@spark_options
@user_errors
def maintain_command(query_file: str, *, lake_dir: str, keep_days: float, lock_wait: float, master: str | None,
                     remote: str | None) -> None:
    """Compact the query's tables back into time order (OPTIMIZE ... ZORDER BY) and delete the files no snapshot
    of the last KEEP_DAYS needs (VACUUM), keeping as many days of each table's log. Holds the query's lock: no run
    of the query writes meanwhile."""
    from pielake.lake.delta import Lake  # noqa: PLC0415 (module docstring)
    from pielake.pipeline.maintenance import maintain  # noqa: PLC0415

    if remote is None:
        check_writable(lake_dir)
    lake = Lake(session(master, remote, lake_dir), lake_dir)
    cared = maintain(lake, load_query_file(query_file), keep_days=keep_days, lock_wait=lock_wait, say=_say)
    click.echo("\n".join(c.text() for c in cared))


@main.command("generate")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--events", type=click.IntRange(min=1), required=True, help="Events in all, over every key.")
@click.option("--query", "query_file", default=None,
              help="Write a sample stream for this query instead, as CSV (OUT/<stream>.csv): its stream's columns "
                   "(schemas/), else those the query reads.")
@click.option("--columns", type=click.IntRange(min=1), default=4, show_default=True, help="Boolean columns a_1..a_n.")
@click.option("--keys", type=click.IntRange(min=1), default=1, show_default=True,
              help="Keys 0..K-1, the events dealt evenly; consecutive keys share a file.")
@click.option("--seed", type=click.IntRange(min=0), default=42, show_default=True)
@click.option("--layout", type=click.Choice(["parquet", "csv", "tpstream-csv"]), default="parquet", show_default=True,
              help="tpstream-csv: the headerless id,a_1,...,a_n,t1,t2 files of the PieStream/TPStream engines.")
@user_errors
def generate_command(out: str, *, events: int, query_file: str | None, columns: int, keys: int, seed: int,
                     layout: str) -> None:
    """Write TPStream's synthetic law into OUT: per key one event per time unit, each a_i alternating gaps of
    10-50 and true runs of 10-100 events (starting with a gap); seeded, so the same options give the same files.
    With --query, a sample stream for that query instead, to try it before there is data."""
    from pielake.pipeline.synthetic import GENERATES, generate, write_query_events  # noqa: PLC0415 (module docstring)

    if keys > events:  # a key without events would be said to be written, and is not
        raise click.BadParameter(f"{keys:,} keys cannot share {V.counted(events, 'event')}: every key has at least "
                                 f"one; give --keys {events:,} or fewer, or more --events", param_hint="'--keys'")
    if query_file is not None:
        plan = load_query_file(query_file)
        stream = plan.one_stream(GENERATES).stream
        path = write_query_events(plan, Path(out), events, keys=keys, seed=seed, stream=load_schema(stream))
        click.echo(f"wrote {V.counted(events, 'event')} of stream {stream} to {path}; run it with: "
                   f"pielake run {query_file} --events {path} --lake LAKE")
        return
    files = generate(Path(out), events, columns=columns, keys=keys, seed=seed, layout=layout)
    click.echo(f"wrote {V.counted(events, 'event')} ({V.counted(keys, 'key')}, a_1..a_{columns}) to "
               f"{V.counted(len(files), f'{layout} file')} in {out}")


@main.command("bench")
@click.option("--shape", "shapes", multiple=True, default=["chain"], show_default=True,
              type=click.Choice(["chain", "star", *TPSTREAM_QUERIES]), help="Query shapes (repeat the option).")
@click.option("--symbols", multiple=True, type=click.IntRange(min=2), default=[4], show_default=True,
              help="Symbol counts n of chain and star (repeat the option).")
@click.option("--events", multiple=True, type=click.IntRange(min=1000), default=None,
              help="Event counts N (repeat the option; default 100,000); with --freshness, --scheduler or --soak, the "
                   "history (10^6).")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs per case, or rounds of --freshness (median).")
@click.option("--freshness", is_flag=True,
              help="Time landed-to-readable micro-batches and whole runs, as processes, on every route "
                   "(CLI and Airflow, in process and on the engine) instead.")
@click.option("--engine", "on_engine", is_flag=True,
              help="Run every case in process and on the lake's engine, alternated, and compare the two instead.")
@click.option("--scheduler", "scheduled", type=click.IntRange(min=1), default=None, metavar="RUNS",
              help="Time RUNS consecutive runs of Airflow's real scheduler (a run a minute, on the engine) instead: "
                   "each run's minute to its publish.")
@click.option("--on-landing", is_flag=True,
              help="With --scheduler: the query registered on a landing folder instead of a clock, and each file's "
                   "landing to its publish.")
@click.option("--soak", "soaked", type=click.IntRange(min=1), default=None, metavar="RUNS",
              help="Send RUNS micro-batches in a row to one engine instead, and read its memory as they go by.")
@click.option("--workdir", type=click.Path(file_okay=False), default="bench", show_default=True,
              help="Generated events (kept) and the lakes (replaced).")
@click.option("--docs", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Also write the figures into this page, between its markers (docs/performance.md).")
@click.option("--master", default=None, help="Spark master URL (default: local[*], or PIELAKE_SPARK_MASTER).")
@user_errors
def bench_command(*, shapes: tuple[str, ...], symbols: tuple[int, ...], events: tuple[int, ...], repeat: int,
                  freshness: bool, on_engine: bool, scheduled: int | None, on_landing: bool, soaked: int | None,
                  workdir: str, docs: str | None, master: str | None) -> None:
    """PieStream Figure 4 / TPStream shapes on the synthetic law: end-to-end and per-stage times, events/s,
    peak memory and two floors (a bare scan of the events, a bare write of the results), into WORKDIR/bench.csv
    and WORKDIR/bench.png (and, with --docs, a page's figures). With --freshness: the time from a file of new
    events landing to its matches in SQL, into WORKDIR/freshness.csv and .png; with --scheduler, that time for
    runs of Airflow's scheduler (--on-landing: of a query that runs when its files land); with --engine, each
    case in process and on the engine; with --soak, an engine's memory over many micro-batches, into
    WORKDIR/soak.csv and .png."""
    chosen = [flag for flag, given in (("--freshness", freshness), ("--engine", on_engine),
                                       ("--scheduler", scheduled is not None), ("--soak", soaked is not None))
              if given]
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} are different benchmarks; run one at a time")
    if on_landing and scheduled is None:
        raise click.UsageError("--on-landing times runs of Airflow's scheduler: give --scheduler RUNS too")
    folder = Path(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    if scheduled is not None:
        _bench_scheduler(folder, events[0] if events else 1_000_000, scheduled, docs, on_landing=on_landing)
    elif soaked is not None:
        _bench_soak(folder, events[0] if events else 1_000_000, soaked, docs)
    elif freshness:
        _bench_freshness(folder, events[0] if events else 1_000_000, repeat, docs)
    elif on_engine:
        _bench_engine(folder, shapes, symbols, events or (100_000,), repeat=repeat, docs=docs, master=master)
    else:
        _bench_shapes(folder, shapes, symbols, events or (100_000,), repeat=repeat, docs=docs, master=master)


def _bench_shapes(folder: Path, shapes: tuple[str, ...], symbols: tuple[int, ...], events: tuple[int, ...], *,
                  repeat: int, docs: str | None, master: str | None) -> None:
    from pielake.bench.shapes import plot, run_grid, summary, write_csv, write_docs  # noqa: PLC0415
    from pielake.engine.session import build_session  # noqa: PLC0415 (module docstring)

    started = time.perf_counter()
    spark = build_session(master, app_name="pielake-bench")
    spark.range(1).count()
    # The JVM's peak memory follows its heap (it collects lazily), so the heap is part of every memory figure.
    _say(f"Spark start-up {time.perf_counter() - started:.1f} s (not counted); driver heap "
         f"{spark.conf.get('spark.driver.memory')} (PIELAKE_DRIVER_MEMORY)")
    results = run_grid(spark, list(shapes), sorted(symbols), sorted(events), workdir=folder, repeats=repeat, say=_say)
    click.echo(summary(results))
    click.echo(f"wrote {write_csv(results, folder / 'bench.csv')} and {plot(results, folder / 'bench.png')}")
    if docs is not None:
        command = _grid_command("pielake bench", shapes, symbols, events, repeat)
        click.echo(f"wrote the figures into {write_docs(results, Path(docs), command)}")


def _grid_command(command: str, shapes: tuple[str, ...], symbols: tuple[int, ...], events: tuple[int, ...],
                  repeat: int) -> str:
    """The bench's command line as a page shows it above its figures."""
    return " ".join([command, *(f"--shape {x}" for x in shapes), *(f"--symbols {n}" for n in symbols),
                     *(f"--events {n}" for n in events), f"--repeat {repeat}"])


def _bench_engine(folder: Path, shapes: tuple[str, ...], symbols: tuple[int, ...], events: tuple[int, ...], *,
                  repeat: int, docs: str | None, master: str | None) -> None:
    from pielake.bench import engine  # noqa: PLC0415 (module docstring)
    from pielake.bench.shapes import grid  # noqa: PLC0415
    from pielake.engine.session import build_session  # noqa: PLC0415

    cases = [engine.Case(*case) for case in grid(list(shapes), sorted(symbols), sorted(events))]
    spark = build_session(master, app_name="pielake-bench")
    pairs = engine.run(spark, cases, workdir=folder, repeats=repeat, say=_say)
    click.echo(engine.summary(pairs))
    click.echo(f"wrote {engine.write_csv(pairs, folder / 'engine.csv')}")
    if docs is not None:
        command = _grid_command("pielake bench --engine", shapes, symbols, events, repeat)
        click.echo(f"wrote the figures into {engine.write_docs(pairs, Path(docs), command)}")


def _bench_scheduler(folder: Path, events: int, runs: int, docs: str | None, *, on_landing: bool) -> None:
    from pielake.bench import scheduler  # noqa: PLC0415 (module docstring)

    published = scheduler.run(folder, events=events, runs=runs, say=_say, on_landing=on_landing)
    click.echo((scheduler.landing_summary if on_landing else scheduler.summary)(published, runs))
    if docs is not None:
        command = f"pielake bench --scheduler {runs}{' --on-landing' if on_landing else ''} --events {events}"
        written = scheduler.write_docs(published, runs, Path(docs), command, on_landing=on_landing)
        click.echo(f"wrote the figures into {written}")


def _bench_soak(folder: Path, events: int, runs: int, docs: str | None) -> None:
    from pielake.bench import soak  # noqa: PLC0415 (module docstring)

    readings = soak.run(folder, events=events, runs=runs, say=_say)
    click.echo(soak.summary(readings))
    click.echo(f"wrote {soak.write_csv(readings, folder / 'soak.csv')} and {soak.plot(readings, folder / 'soak.png')}")
    if docs is not None:
        command = f"pielake bench --soak {runs} --events {events}"
        click.echo(f"wrote the figures into {soak.write_docs(readings, Path(docs), command)}")


def _bench_freshness(folder: Path, events: int, repeat: int, docs: str | None) -> None:
    from pielake.bench import freshness  # noqa: PLC0415 (module docstring)

    timings = freshness.run(folder, events=events, rounds=repeat, say=_say)
    click.echo(freshness.summary(timings, events))
    click.echo(f"wrote {freshness.write_csv(timings, folder / 'freshness.csv')} and "
               f"{freshness.plot(timings, folder / 'freshness.png')}")
    if docs is not None:
        command = f"pielake bench --freshness --events {events} --repeat {repeat}"
        click.echo(f"wrote the figures into {freshness.write_docs(timings, events, Path(docs), command)}")


@main.command("unlock")
@click.argument("query_file")
@click.option("--lake", "lake_dir", required=True, type=click.Path(exists=True, file_okay=False))
@user_errors
def unlock_command(query_file: str, *, lake_dir: str) -> None:
    """Release QUERY_FILE's run lock left by a run that died (the next run then redoes its work)."""
    check_writable(lake_dir)
    lock = RunLock(Path(lake_dir).resolve(), read_query_file(query_file)[1])
    held = lock.holder()
    if lock.release():
        click.echo(f"released the lock of run {held.get('run_id') if held else None} on {lock.query}")
    else:
        click.echo(f"no run holds the lock of {lock.query}")


@main.command("demo")
@click.option("--lake", "lake_dir", default="lake", show_default=True, type=click.Path(file_okay=False))
@partial(spark_options, thin_client=True)
@user_errors
def demo_command(*, lake_dir: str, master: str | None, remote: str | None) -> None:
    """Generate a sample car stream, run the aggressive-driving query on it and show the first matches."""
    from pielake.pipeline.sample import write_car_sensors  # noqa: PLC0415 (module docstring)

    root = Path(lake_dir)
    if remote is None:
        check_writable(lake_dir)
    events = root / V.INCOMING_DIR / "car_sensors.csv"
    rows = write_car_sensors(events)
    _say(f"wrote {rows} sample events of 6 cars to {events}")
    plan = load_query_file(EXAMPLES / "aggressive_driving.tpq")
    _run(plan, {"events_path": str(events)}, lake_dir, master=master, remote=remote, run_id=None, fmt="csv",
         mode="batch", checks=True)
    sql = ("SELECT car_id, a_ts, b_ts, c_ts, detected_at, status, round(avg_speed, 1) AS avg_speed "
           "FROM matches_aggressive_driving ORDER BY car_id, detected_at LIMIT 10")
    click.echo(f"\npielake sql --lake {lake_dir} \"{sql}\"")
    click.echo("".join(_answered(sql, lake_dir, "table", master=master, remote=remote)), nl=False)
    picture = _timeline(plan, lake_dir, master=master, remote=remote)
    written = draw(picture, root / V.PLOTS_DIR / "aggressive_driving.png")
    click.echo(f"\npielake plot drew {picture.title} to {written}")


def plan_json(plan: QueryPlan) -> dict[str, Any]:
    return {
        "name": plan.name, "streams": [{"stream": s.stream, "alias": s.alias} for s in plan.sources],
        "keys": list(plan.keys), "window_seconds": float(plan.window_seconds),
        "symbols": [{"name": s.name, "stream": s.source, "predicate": expr_text(s.predicate),
                     "min_seconds": None if s.min_seconds is None else float(s.min_seconds),
                     "max_seconds": None if s.max_seconds is None else float(s.max_seconds)} for s in plan.symbols],
        "constraints": [{"id": c.id, "left": c.left, "right": c.right, "relations": list(c.ordered_relations()),
                         "found_by": {r: found_by(r) for r in c.ordered_relations()}}
                        for c in plan.constraints],
        "join_order": [c.id for c in join_order(plan.constraints)],
        "returns": [{"name": r.name, "expr": expr_text(r.expr)} for r in plan.returns],
        "warnings": [w.render() for w in plan.warnings],
    }


if __name__ == "__main__":
    main()
