"""Semantic analysis: an AST becomes a `QueryPlan` every later stage can trust.

Checks follow docs/semantics.md §2-§4: every symbol defined once and used in a constraint, relation names real,
no constraint between a symbol and itself, constraints normalised to one orientation (definition order) and
intersected when they name the same pair, functions on the allow-list, columns known when a schema is given.
All problems are collected and reported together, sorted by position.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from pielake import vocabulary as V
from pielake.errors import ErrorDetail, PielakeError, QuerySemanticError, source_excerpt
from pielake.query import ast
from pielake.query.parser import ParseResult, QueryWarning, parse
from pielake.query.printer import expr_text
from pielake.query.tokens import Span
from pielake.query.typecheck import TIME, check_predicate, check_return, family
from pielake.semantics import relations as rel
from pielake.streams import TIMESTAMP_UNIT, StreamSchema

# Pure, deterministic functions a predicate or RETURN may call, with their arity (min, max; None = any).
SCALAR_FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "abs": (1, 1), "least": (2, None), "greatest": (2, None), "coalesce": (1, None), "lower": (1, 1),
    "upper": (1, 1),
}
QUERY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # a query's name is part of its tables' names
AGGREGATES = frozenset({"first", "last", "min", "max", "avg", "sum", "count"})
SITUATION_ENDPOINTS = frozenset({"ts", "te"})
MATCH_COLUMNS = frozenset({"detected_at", "completed_at", "status", "run_id"})


@dataclass(frozen=True)
class SymbolDef:
    """One DEFINE: the predicate of a situation stream and its duration bounds in seconds (inclusive)."""

    name: str
    predicate: ast.Expr
    min_seconds: Fraction | None = None
    max_seconds: Fraction | None = None
    span: Span = field(default=ast.NOWHERE, compare=False)

    @property
    def has_duration(self) -> bool:
        return self.min_seconds is not None or self.max_seconds is not None


@dataclass(frozen=True)
class PairConstraint:
    """One mPiePair: `left R right` for R in `relations`, left defined before right."""

    id: str
    left: str
    right: str
    relations: frozenset[str]
    span: Span = field(default=ast.NOWHERE, compare=False)

    def ordered_relations(self) -> tuple[str, ...]:
        return tuple(name for name in rel.RELATIONS if name in self.relations)


@dataclass(frozen=True)
class OutputColumn:
    name: str
    expr: ast.Expr


@dataclass(frozen=True)
class QueryPlan:
    """A checked query: what the reference, `explain` and the Spark kernels all consume."""

    name: str
    stream: str
    alias: str | None
    keys: tuple[str, ...]
    symbols: tuple[SymbolDef, ...]
    constraints: tuple[PairConstraint, ...]
    window_seconds: Fraction
    returns: tuple[OutputColumn, ...]
    warnings: tuple[QueryWarning, ...] = ()
    source: str = ""

    def symbol(self, name: str) -> SymbolDef:
        return next(s for s in self.symbols if s.name == name)

    @property
    def symbol_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.symbols)


class _Analyzer:
    def __init__(self, parsed: ParseResult, name: str, stream: StreamSchema | None):
        self.parsed = parsed
        self.query = parsed.query
        self.name = name
        self.stream = stream
        self.columns = {c.lower(): c for c in stream.column_names} if stream is not None else None
        self.errors: list[ErrorDetail] = []
        self.symbols: dict[str, str] = {}  # lower-case -> as defined
        self.mentioned: set[str] = set()  # symbols named in PATTERN, even in a constraint with errors
        self.qualifiers = {self.query.stream.name.text.lower()}
        if self.query.stream.alias:
            self.qualifiers.add(self.query.stream.alias.text.lower())

    def error(self, message: str, span: Span, suggestion: str | None = None) -> None:
        width = max(1, span.end - span.start)
        text = self.parsed.source[span.start:span.end]
        self.errors.append(ErrorDetail(message, span.line, span.col, text,
                                       source_excerpt(self.parsed.source, span.line, span.col, width), suggestion))

    def run(self) -> QueryPlan:
        keys = tuple(self.key_column(c) for c in self.query.partition_by)
        self.covers_stream_keys(keys)
        symbols = self.symbol_defs()
        constraints = self.constraints()
        self.unused_symbols(symbols)
        window = self.query.window.seconds
        if window <= 0:
            self.error("the window must be longer than zero", self.query.window.span)
        returns = self.returns(keys)
        if self.stream is not None and not self.errors:
            self.check_types(symbols, returns)
        if self.errors:
            self.errors.sort(key=lambda e: (e.line, e.col))
            raise QuerySemanticError(self.errors)
        alias = self.query.stream.alias.text if self.query.stream.alias else None
        return QueryPlan(self.name, self.query.stream.name.text, alias, keys, symbols, constraints, window,
                         returns, self.parsed.warnings, self.parsed.source)

    # ------------------------------------------------------------ FROM / PARTITION BY

    def key_column(self, column: ast.Column) -> str:
        """A PARTITION BY column: a column of the stream, whose name no column of the result tables has (each of
        them holds the key columns beside its own)."""
        if column.qualifier and column.qualifier.lower() not in self.qualifiers:
            self.error(f"unknown stream alias '{column.qualifier}'", column.span, self._qualifier_hint())
        name = self.known_column(column.name, column.span)
        if name.lower() in V.TAKEN_BY_RESULTS:
            self.error(f"key column '{name}' has the name of a column of the result tables", column.span,
                       f"Give the stream's column another name (e.g. '{name}_key') in its schema and its files.")
        return name

    def covers_stream_keys(self, keys: tuple[str, ...]) -> None:
        """Events are unique per key of their stream and time (docs/semantics.md §1): a query over a keyed stream
        partitions by every key column of it (and may by more), or two events of one time would meet in a key."""
        if self.stream is None:
            return
        missing = [k for k in self.stream.keys if k.lower() not in {q.lower() for q in keys}]
        if missing:
            stream = self.query.stream.name
            partition = ", ".join([*keys, *missing])
            self.error(f"stream {stream.text} is keyed by {', '.join(self.stream.keys)}, which the query does not "
                       f"partition by", stream.span, f"Write FROM {stream.text} PARTITION BY {partition}.")

    def known_column(self, name: str, span: Span) -> str:
        if self.columns is None:
            return name
        if name.lower() in self.columns:
            return self.columns[name.lower()]
        close = difflib.get_close_matches(name.lower(), list(self.columns), n=1)
        hint = f"Did you mean '{self.columns[close[0]]}'?" if close else \
            f"The stream has: {', '.join(sorted(self.columns.values()))}."
        self.error(f"unknown column '{name}'", span, hint)
        return name

    def _qualifier_hint(self) -> str:
        alias = self.query.stream.alias.text if self.query.stream.alias else self.query.stream.name.text
        return f"Qualify columns with '{alias}.' or leave them bare."

    # ------------------------------------------------------------ DEFINE

    def symbol_defs(self) -> tuple[SymbolDef, ...]:
        out: list[SymbolDef] = []
        for define in self.query.defines:
            name = define.symbol
            if name.text.lower() in self.symbols:
                self.error(f"symbol '{name.text}' is defined twice", name.span, "Give each symbol its own name.")
                continue
            if rel.canonical_name(name.text) is not None:
                self.error(f"'{name.text}' is a relation name and cannot be a symbol", name.span,
                           "Choose another symbol name.")
            self.symbols[name.text.lower()] = name.text
            self.check_predicate(define.predicate)
            low, high = self.duration_bounds(define.duration)
            out.append(SymbolDef(name.text, define.predicate, low, high, name.span))
        return tuple(out)

    def duration_bounds(self, bound: ast.DurationConstraint | None) -> tuple[Fraction | None, Fraction | None]:
        if bound is None:
            return None, None
        low = bound.low.seconds if bound.low else None
        high = bound.high.seconds if bound.high else None
        if low is not None and high is not None and low > high:
            self.error("the duration's lower bound is above its upper bound", bound.span,
                       "Write BETWEEN <shorter> AND <longer>.")
        if high is not None and high <= 0:
            self.error("a situation lasts longer than zero, so AT MOST needs a positive duration", bound.span)
        return low, high

    def check_predicate(self, expr: ast.Expr) -> None:
        for node in walk(expr):
            if isinstance(node, ast.Column):
                self.predicate_column(node)
            elif isinstance(node, ast.Call):
                if node.name in AGGREGATES or node.name == "duration":
                    self.error(f"{node.name}() reads a situation and belongs in RETURN, not in a predicate",
                               node.span, "A predicate looks at one event's own columns.")
                else:
                    self.scalar_call(node)

    def predicate_column(self, column: ast.Column) -> None:
        qualifier = column.qualifier
        if qualifier is not None and qualifier.lower() not in self.qualifiers:
            if qualifier.lower() in self.symbols:
                self.error(f"a predicate cannot refer to symbol '{qualifier}'", column.span,
                           "Predicates test a single event; compare its columns directly (docs/semantics.md §2).")
            else:
                self.error(f"unknown stream alias '{qualifier}'", column.span, self._qualifier_hint())
            return
        self.known_column(column.name, column.span)

    def scalar_call(self, call: ast.Call) -> None:
        if call.name not in SCALAR_FUNCTIONS:
            close = difflib.get_close_matches(call.name, list(SCALAR_FUNCTIONS), n=1)
            hint = f"Did you mean '{close[0]}'?" if close else \
                f"Allowed functions: {', '.join(sorted(SCALAR_FUNCTIONS))}."
            self.error(f"function '{call.name}' is not allowed", call.span, hint)
            return
        low, high = SCALAR_FUNCTIONS[call.name]
        if len(call.args) < low or (high is not None and len(call.args) > high):
            wanted = f"{low}" if low == high else f"at least {low}"
            self.error(f"{call.name}() takes {wanted} argument(s), got {len(call.args)}", call.span)

    # ------------------------------------------------------------ PATTERN

    def resolve_symbol(self, name: ast.Name) -> str | None:
        found = self.symbols.get(name.text.lower())
        if found is None:
            close = difflib.get_close_matches(name.text.lower(), list(self.symbols), n=1)
            hint = f"Did you mean '{self.symbols[close[0]]}'?" if close else "Define it in DEFINE first."
            self.error(f"unknown symbol '{name.text}'", name.span, hint)
        else:
            self.mentioned.add(found)
        return found

    def resolve_relation(self, ref: ast.RelationRef) -> str | None:
        name = rel.canonical_name(ref.text)
        if name is None:
            close = rel.suggest(ref.text)
            hint = f"Did you mean '{close}'?" if close else f"Relations: {', '.join(rel.RELATIONS)}."
            self.error(f"unknown relation '{ref.text}'", ref.span, hint)
        return name

    def constraints(self) -> tuple[PairConstraint, ...]:
        order = {s.lower(): i for i, s in enumerate(self.symbols)}
        merged: dict[tuple[str, str], PairConstraint] = {}
        for constraint in self.query.pattern:
            oriented = self.orient(constraint, order)
            if oriented is None:
                continue
            pair, relations = oriented
            if pair in merged:
                previous = merged[pair]
                common = previous.relations & relations
                if not common:
                    self.error(f"the constraints on {pair[0]} and {pair[1]} have no relation in common, "
                               "so the pattern can never match", constraint.span,
                               "Two constraints on one pair are intersected; check the relation lists.")
                merged[pair] = PairConstraint(previous.id, *pair, common, previous.span)
            else:
                merged[pair] = PairConstraint(f"c{len(merged) + 1}", *pair, relations, constraint.span)
        return tuple(merged.values())

    def orient(self, constraint: ast.Constraint,
               order: dict[str, int]) -> tuple[tuple[str, str], frozenset[str]] | None:
        """Normalise every alternative to one orientation; all must name the same unordered pair."""
        pair: tuple[str, str] | None = None
        relations: set[str] = set()
        for alt in constraint.alternatives:
            left, right = self.resolve_symbol(alt.left), self.resolve_symbol(alt.right)
            names = [n for n in (self.resolve_relation(r) for r in alt.relations) if n]
            if left is None or right is None:
                continue
            if left == right:
                self.error(f"a constraint between '{left}' and itself", alt.span,
                           "Define a second symbol with the same predicate for a self pair (docs/semantics.md §4).")
                continue
            flip = order[left.lower()] > order[right.lower()]
            this_pair = (right, left) if flip else (left, right)
            if pair is not None and this_pair != pair:
                self.error(f"alternatives of one constraint must name one pair of symbols: "
                           f"{pair[0]}/{pair[1]} and {this_pair[0]}/{this_pair[1]}", alt.span,
                           "Join constraints on different pairs with AND.")
                continue
            pair = this_pair
            relations.update(rel.inverse(n) if flip else n for n in names)
        if pair is None or not relations:
            return None
        return pair, frozenset(relations)

    def unused_symbols(self, symbols: tuple[SymbolDef, ...]) -> None:
        for symbol in symbols:
            if symbol.name not in self.mentioned:
                self.error(f"symbol '{symbol.name}' is defined but used in no constraint", symbol.span,
                           "Use it in PATTERN or remove its definition.")

    # ------------------------------------------------------------ RETURN

    def returns(self, keys: tuple[str, ...]) -> tuple[OutputColumn, ...]:
        """The output columns, each named by its alias or, without one, by `output_name`. An unnamed key column
        or situation endpoint (`car_id`, `B.ts`) names a column every match has already, with that very value:
        it adds none."""
        taken = {k.lower() for k in keys} | MATCH_COLUMNS
        taken |= {f"{s.lower()}_{end}" for s in self.symbols for end in SITUATION_ENDPOINTS}
        out: list[OutputColumn] = []
        for item in self.query.returns:
            self.check_return_expr(item.expr, keys)
            if item.alias is not None:
                name = item.alias.text
                if name.lower() in taken:
                    self.error(f"output column '{name}' is already taken", item.alias.span,
                               "Pick a name that is not a key, a <symbol>_ts/_te or a match column.")
            else:
                name = output_name(item.expr)
                if self.is_match_column(item.expr, keys):
                    continue
                if name.lower() in taken:
                    self.error(f"RETURN {expr_text(item.expr)} is named '{name}', which is already taken",
                               item.expr.span, f"Name it yourself: {expr_text(item.expr)} AS <name>.")
            taken.add(name.lower())
            out.append(OutputColumn(name, item.expr))
        return tuple(out)

    # ------------------------------------------------------------ types

    def check_types(self, symbols: tuple[SymbolDef, ...], returns: tuple[OutputColumn, ...]) -> None:
        """Every predicate a condition, every operator given the family it takes (`pielake.query.typecheck`)."""
        assert self.stream is not None
        types = {n.lower(): t for n, t in self.stream.columns}
        time = TIME if self.stream.time_unit == TIMESTAMP_UNIT else family(self.stream.type_of(self.stream.time_column))
        for symbol in symbols:
            check_predicate(symbol.predicate, types, self.error)
        for out in returns:
            check_return(out.expr, types, time, self.symbols, self.error)

    def is_match_column(self, expr: ast.Expr, keys: tuple[str, ...]) -> bool:
        """A key column or a situation endpoint: a column of every match."""
        if not isinstance(expr, ast.Column):
            return False
        if expr.qualifier is None:
            return expr.name.lower() in {k.lower() for k in keys}
        return expr.qualifier.lower() in self.symbols and expr.name.lower() in SITUATION_ENDPOINTS

    def check_return_expr(self, expr: ast.Expr, keys: tuple[str, ...]) -> None:
        if isinstance(expr, ast.Call) and (expr.name in AGGREGATES or expr.name == "duration"):
            self.situation_call(expr)
            return
        if isinstance(expr, ast.Column):
            self.return_column(expr, keys)
            return
        if isinstance(expr, ast.Call):
            self.scalar_call(expr)
        for child in children(expr):
            self.check_return_expr(child, keys)

    def situation_call(self, call: ast.Call) -> None:
        arg = call.args[0] if len(call.args) == 1 else None
        if call.name == "duration":
            if not (isinstance(arg, ast.Column) and arg.qualifier is None and arg.name.lower() in self.symbols):
                self.error("duration() takes one symbol, as in duration(B)", call.span)
            return
        if not (isinstance(arg, ast.Column) and arg.qualifier is not None):
            self.error(f"{call.name}() takes one symbol's column, as in {call.name}(B.speed)", call.span)
            return
        if arg.qualifier.lower() not in self.symbols:
            self.resolve_symbol(ast.Name(arg.qualifier, arg.span))
            return
        self.known_column(arg.name, arg.span)

    def return_column(self, column: ast.Column, keys: tuple[str, ...]) -> None:
        if column.qualifier and column.qualifier.lower() in self.symbols:
            if column.name.lower() not in SITUATION_ENDPOINTS:
                self.error(f"'{column.qualifier}.{column.name}' needs an aggregate", column.span,
                           f"Write first({column.qualifier}.{column.name}), avg(...), max(...), ...")
            return
        if column.qualifier is None and column.name.lower() in {k.lower() for k in keys}:
            return
        self.error(f"'{column.name}' is neither a key column nor a situation's value", column.span,
                   "RETURN reads situations: use S.ts, S.te, duration(S) or an aggregate such as first(S.col).")


def children(expr: ast.Expr) -> tuple[ast.Expr, ...]:
    """The direct sub-expressions of a node; the one place that knows each node's shape."""
    match expr:
        case ast.Unary(operand=operand) | ast.IsNull(operand=operand):
            return (operand,)
        case ast.Binary(left=left, right=right):
            return left, right
        case ast.Between(operand=operand, low=low, high=high):
            return operand, low, high
        case ast.InList(operand=operand, items=items):
            return (operand, *items)
        case ast.Call(args=args):
            return args
        case _:
            return ()


def output_name(expr: ast.Expr) -> str:
    """The name of an unnamed RETURN column: its expression as pielake prints it, lower-case, every run of other
    characters than letters and digits one `_`, none at either end (`A1.ts` -> `a1_ts`, `avg(B.speed)` ->
    `avg_b_speed`); `_` goes before a name that would not start with a letter."""
    name = re.sub(r"[^a-z0-9]+", "_", expr_text(expr).lower()).strip("_")
    return name if name[:1].isalpha() else f"_{name}"


def walk(expr: ast.Expr) -> Iterator[ast.Expr]:
    yield expr
    for child in children(expr):
        yield from walk(child)


def analyze(parsed: ParseResult, name: str = "query", stream: StreamSchema | None = None) -> QueryPlan:
    """Check a parsed query and build its plan.

    Args:
        parsed: the parser's result (AST, warnings, source text).
        name: the query's name, used for table names (`matches_<name>`).
        stream: the stream's schema when known: a column it lacks is then an error, the query must partition by
            each of its keys, and every expression must have a type its operators take (`typecheck`).

    Raises:
        QuerySemanticError: listing every problem found, sorted by position.
    """
    return _Analyzer(parsed, name, stream).run()


def load_query(source: str, name: str = "query", stream: StreamSchema | None = None) -> QueryPlan:
    """Parse and analyze query text in one call."""
    return analyze(parse(source), name, stream)


def bind(plan: QueryPlan, stream: StreamSchema) -> QueryPlan:
    """The plan checked against its stream's schema (`analyze`), column names then spelled as the stream spells
    them."""
    return load_query(plan.source, plan.name, stream)


def read_query_file(path: str) -> tuple[str, str]:
    """The query text and its name: the file's stem, which names its tables, so it must be a plain identifier.
    `-` reads standard input (named `stdin`)."""
    if path == "-":
        return sys.stdin.read(), "stdin"
    file = Path(path)
    if not file.is_file():
        raise PielakeError(f"no query file at {path}")
    name = file.stem
    if not QUERY_NAME.match(name):
        raise PielakeError(f"query file name '{file.name}' must be a plain identifier (letters, digits, '_'), "
                           "because it names the result table matches_<name>")
    try:
        return file.read_text(encoding="utf-8"), name
    except UnicodeDecodeError as error:
        raise PielakeError(f"query file {path} is not UTF-8 text (byte {error.start}); save it as UTF-8") from None


def load_query_file(path: str | Path) -> QueryPlan:
    """The checked plan of a query file: what the CLI, the spark-submit jobs and the DAG factory all load."""
    source, name = read_query_file(str(path))
    return load_query(source, name)
