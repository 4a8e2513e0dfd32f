"""The `pielake` command line. User errors are caught at one boundary and printed without a traceback."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click

from pielake.errors import PielakeError, QueryError
from pielake.exitcodes import EXIT_USAGE
from pielake.explain import explain
from pielake.query.analyzer import QueryPlan, analyze
from pielake.query.join_order import join_order
from pielake.query.parser import parse
from pielake.query.printer import expr_text, query_text
from pielake.query.tokens import tokenize

QUERY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Print a PielakeError as its message alone and exit with EXIT_USAGE."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except PielakeError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(EXIT_USAGE)

    return wrapper


def read_query_file(path: str) -> tuple[str, str]:
    """The query text and its name: the file's stem, which names its tables, so it must be a plain identifier."""
    if path == "-":
        return sys.stdin.read(), "stdin"
    file = Path(path)
    if not file.is_file():
        raise PielakeError(f"no query file at {path}")
    name = file.stem
    if not QUERY_NAME.match(name):
        raise PielakeError(f"query file name '{file.name}' must be a plain identifier (letters, digits, '_'), "
                           "because it names the result table matches_<name>")
    return file.read_text(encoding="utf-8"), name


def load_plan(path: str) -> QueryPlan:
    source, name = read_query_file(path)
    return analyze(parse(source), name)


@click.group(epilog="Examples:\n\n  pielake explain examples/queries/aggressive_driving.tpq\n\n"
                    "  cat q.tpq | pielake explain -")
@click.version_option(package_name="pielake")
def main() -> None:
    """pielake: interval temporal patterns (PieStream / TPStream) over event streams in Delta Lake."""


@main.command("explain")
@click.argument("query_file")
@click.option("--show", type=click.Choice(["plan", "tokens", "ast", "query"]), default="plan",
              help="plan: the explain report; tokens/ast: the parser's stages; query: canonical text.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@user_errors
def explain_command(query_file: str, show: str, fmt: str) -> None:
    """Explain QUERY_FILE: symbols, mPiePairs, decision times, join order and PiePair automata ('-' = stdin)."""
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
    plan = analyze(parsed, name)
    if fmt == "json":
        click.echo(json.dumps(plan_json(plan), indent=2))
    else:
        click.echo(explain(plan), nl=False)


@main.command("check")
@click.argument("query_files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def check_command(query_files: tuple[str, ...], fmt: str) -> None:
    """Check query files; every error is printed with line, column and a caret. Exit 2 if any is invalid."""
    failed = False
    report = []
    for path in query_files:
        try:
            plan = load_plan(path)
            report.append({"file": path, "ok": True, "warnings": [w.render() for w in plan.warnings]})
            if fmt == "text":
                click.echo(f"{path}: ok" + "".join(f"\n  {w.render()}" for w in plan.warnings))
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


def plan_json(plan: QueryPlan) -> dict[str, Any]:
    return {
        "name": plan.name, "stream": plan.stream, "alias": plan.alias, "keys": list(plan.keys),
        "window_seconds": float(plan.window_seconds),
        "symbols": [{"name": s.name, "predicate": expr_text(s.predicate),
                     "min_seconds": None if s.min_seconds is None else float(s.min_seconds),
                     "max_seconds": None if s.max_seconds is None else float(s.max_seconds)} for s in plan.symbols],
        "constraints": [{"id": c.id, "left": c.left, "right": c.right, "relations": list(c.ordered_relations())}
                        for c in plan.constraints],
        "join_order": [c.id for c in join_order(plan.constraints)],
        "returns": [{"name": r.name, "expr": expr_text(r.expr)} for r in plan.returns],
        "warnings": [w.render() for w in plan.warnings],
    }
