"""Semantic analysis: an AST becomes a `QueryPlan` every later stage can trust.

Checks follow docs/semantics.md §2-§4: every symbol defined once and used in a constraint, relation names real,
no constraint between a symbol and itself, constraints normalised to one orientation (definition order) and
intersected when they name the same pair, functions on the allow-list, columns known when a schema is given.
All problems are collected and reported together, sorted by position.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from pathlib import Path
from typing import NoReturn, get_args

from pielake import vocabulary as V
from pielake.errors import ErrorDetail, PielakeError, QuerySemanticError
from pielake.query import ast
from pielake.query.parser import ParseResult, QueryWarning, parse
from pielake.query.printer import expr_text, streams_text
from pielake.query.time_fields import TIME_FIELDS, zone_problem
from pielake.query.tokens import PLAIN_NAME, Span, detail_at, plain_name
from pielake.query.typecheck import TIME, check_predicate, check_return, family
from pielake.semantics import relations as rel
from pielake.streams import TIMESTAMP_UNIT, StreamSchema, closest_column, declared_schema, where_to_declare

# Pure, deterministic functions a predicate or RETURN may call, with their arity (min, max; None = any).
SCALAR_FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "abs": (1, 1), "sqrt": (1, 1), "least": (2, None), "greatest": (2, None), "coalesce": (1, None),
    "lower": (1, 1), "upper": (1, 1), "length": (1, 1), **dict.fromkeys(TIME_FIELDS, (1, 2)),
}
LONGEST_QUERY_NAME = 64
AGGREGATES = frozenset({"first", "last", "min", "max", "avg", "sum", "count"})
# The longest window or duration: event times are 64-bit integers of their unit, microseconds at the finest, and a
# time plus or minus a duration must stay one; half the range (about 146,000 years) leaves the times the other half.
LONGEST_DURATION_SECONDS = Fraction(2**62, 1_000_000)
MATCHES_PREFIX = f"{V.MATCHES}_"  # a stream named `matches_<query>` is that query's matches
# A match's own columns, and `started_at`, its start as a row of its matches stream (docs/semantics.md §1): no
# RETURN column may take their names.
MATCH_COLUMNS = frozenset({V.DETECTED_AT, V.COMPLETED_AT, V.STATUS, V.RUN_ID, V.STARTED_AT})


@dataclass(frozen=True)
class Source:
    """One stream a query reads (an entry of FROM), and the alias its columns may be qualified by."""

    stream: str
    alias: str | None = None
    span: Span = field(default=ast.NOWHERE, compare=False)

    @property
    def label(self) -> str:
        """How the query names the stream: its alias, or its own name."""
        return self.alias or self.stream

    @property
    def reads_matches(self) -> bool:
        """`FROM matches_<query>` reads that query's matches as an interval stream (docs/semantics.md §1)."""
        return self.stream.lower().startswith(MATCHES_PREFIX)

    @property
    def upstream(self) -> str:
        """The query whose matches a `matches_<query>` stream is."""
        return self.stream[len(MATCHES_PREFIX):]


@dataclass(frozen=True)
class SymbolDef:
    """One DEFINE: the predicate of a situation stream and its duration bounds in seconds (inclusive).
    `source` is the label (`Source.label`) of the stream the predicate reads: the symbol's situations come from
    that stream's events alone (docs/semantics.md §2)."""

    name: str
    predicate: ast.Expr
    min_seconds: Fraction | None = None
    max_seconds: Fraction | None = None
    span: Span = field(default=ast.NOWHERE, compare=False)
    source: str = ""

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
    sources: tuple[Source, ...]
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

    @property
    def expressions(self) -> tuple[ast.Expr, ...]:
        """Every expression the query computes: its symbols' predicates, then its RETURN columns'."""
        return (*(s.predicate for s in self.symbols), *(out.expr for out in self.returns))

    def crosses_streams(self, constraint: PairConstraint) -> bool:
        """Whether a constraint relates symbols of two streams: it is then decided from its situations'
        endpoints, with both streams' knowledge (docs/semantics.md §5), not by a PiePair automaton, which reads
        one stream's events."""
        return self.symbol(constraint.left).source != self.symbol(constraint.right).source

    def one_stream(self, doing: str) -> Source:
        """The stream of a query over one stream (of events, or of another query's matches), for what pielake
        is `doing` only over one: a query over several streams is refused here, naming its second stream."""
        if len(self.sources) > 1:
            self.refuse(self.sources[1], f"pielake {doing} a query over one stream; this one reads "
                        f"{len(self.sources)} ({', '.join(s.stream for s in self.sources)})",
                        "Batch runs, micro-batches and backfills (`pielake run`, `pielake backfill`) read several "
                        "streams (docs/semantics.md §1, several streams).")
        return self.sources[0]

    def source_named(self, stream: str) -> Source:
        """The stream of FROM called `stream` (case-insensitive), for input given by the stream's name."""
        found = next((s for s in self.sources if s.stream.lower() == stream.lower()), None)
        if found is None:
            raise PielakeError(f"events given for {stream}, which query {self.name} does not read; it reads "
                               f"{', '.join(s.stream for s in self.sources)}")
        return found

    @property
    def upstream_source(self) -> Source | None:
        """The other query's matches this query reads, if it does (`Source.reads_matches`): only ever its one
        stream, since the pipeline reads matches alone (`runnable`)."""
        return self.sources[0] if len(self.sources) == 1 and self.sources[0].reads_matches else None

    def refuse(self, source: Source, message: str, hint: str) -> NoReturn:
        """A query that cannot run as it is, with the position of the stream that makes it so."""
        raise QuerySemanticError([detail_at(self.source, source.span, message, hint)])


class _Analyzer:
    def __init__(self, parsed: ParseResult, name: str, schemas: dict[str, StreamSchema]):
        self.parsed = parsed
        self.query = parsed.query
        self.name = name
        self.entries = self.query.streams
        self.sources = tuple(Source(e.name.text, e.alias.text if e.alias else None, e.span) for e in self.entries)
        # Per FROM entry: its schema and its columns by lower-case name, where the schema is known.
        self.schemas = [schemas.get(e.name.text.lower()) for e in self.entries]
        self.columns = [{c.lower(): c for c in schema.column_names} if schema is not None else None
                        for schema in self.schemas]
        self.errors: list[ErrorDetail] = []
        self.symbols: dict[str, str] = {}  # lower-case -> as defined
        self.symbol_entry: dict[str, int] = {}  # lower-case symbol -> the FROM entry its predicate reads
        self.mentioned: set[str] = set()  # symbols named in PATTERN, even in a constraint with errors
        self.qualifiers: dict[str, int] = {}  # lower-case stream name or alias -> its FROM entry

    def error(self, message: str, span: Span, suggestion: str | None = None) -> None:
        self.errors.append(detail_at(self.parsed.source, span, message, suggestion))

    def run(self) -> QueryPlan:
        self.check_sources()
        keys = self.key_columns()
        self.covers_stream_keys(keys)
        symbols = self.symbol_defs()
        if not self.errors:  # a stream seems unread where a predicate's column did not resolve
            self.unread_streams()
        constraints = self.constraints()
        self.unused_symbols(symbols)
        window = self.query.window.seconds
        if window <= 0:
            self.error("the window must be longer than zero", self.query.window.span,
                       "Give the longest time a match may span, e.g. WITHIN 5 minutes.")
        self.check_not_too_long(window, "window", self.query.window.span)
        returns = self.returns(keys)
        if not self.errors:
            self.check_streams_agree(keys)
        if not self.errors:
            self.check_types(symbols, returns)
        if self.errors:
            self.errors.sort(key=lambda e: (e.line, e.col))
            raise QuerySemanticError(self.errors)
        warnings = (*self.parsed.warnings, *self.never_matching(constraints))
        return QueryPlan(self.name, self.sources, keys, symbols, constraints, window, returns, warnings,
                         self.parsed.source)

    # ------------------------------------------------------------ FROM / PARTITION BY

    def check_sources(self) -> None:
        """Each stream of FROM appears once, and no name or alias names two entries (docs/semantics.md §1): a
        column qualified by it would be ambiguous."""
        for index, entry in enumerate(self.entries):
            if len(entry.name.text) > V.LONGEST_STREAM_NAME:
                self.error(f"stream name '{entry.name.text}' is longer than {V.LONGEST_STREAM_NAME} characters",
                           entry.name.span, f"A stream's name is part of its tables' names "
                           f"({V.QUARANTINE}_<stream>, at most {V.LONGEST_TABLE_NAME} characters): give it a "
                           "shorter one.")
            for name in (entry.name, entry.alias):
                if name is None:
                    continue
                taken = self.qualifiers.setdefault(name.text.lower(), index)
                if taken == index:
                    continue
                if name is entry.name and self.entries[taken].name.text.lower() == name.text.lower():
                    self.error(f"stream {name.text} appears twice in FROM", name.span,
                               "Its symbols relate to each other already: define them all over one entry.")
                else:
                    self.error(f"'{name.text}' names two streams of FROM", name.span,
                               "Give each stream an alias of its own.")
        for source in self.sources:
            if source.reads_matches and source.upstream.lower() == self.name.lower():
                self.error(f"query {self.name} reads its own matches", source.span,
                           "A query reads the matches of another query; its own would depend on themselves.")

    def label(self, index: int) -> str:
        return self.sources[index].label

    def key_columns(self) -> tuple[str, ...]:
        """The PARTITION BY columns, each once: a key named twice is an error at the second (a result table would
        hold two columns of one name)."""
        keys: list[str] = []
        for column in self.query.partition_by:
            name = self.key_column(column)
            if name.lower() in (k.lower() for k in keys):
                self.error(f"PARTITION BY names the key '{column.name}' twice", column.span,
                           "Name each key once." if len(self.entries) == 1 else
                           f"Name each key once: a key is the column of that name in every stream of FROM "
                           f"(PARTITION BY {column.name}), not a join of one stream's column with another's.")
            else:
                keys.append(name)
        return tuple(keys)

    def key_column(self, column: ast.Column) -> str:
        """A PARTITION BY column: a column of every stream, whose name no column of the result tables has (each
        of them holds the key columns beside its own). A qualifier names no stream in particular: the key is the
        column of that name in each."""
        if column.qualifier and column.qualifier.lower() not in self.qualifiers:
            self.error(f"unknown stream alias '{column.qualifier}'", column.span, self._qualifier_hint(column))
        if len(self.entries) == 1:
            name = self.known_column(column.name, column.span, 0)
        else:
            name = next((cols[column.name.lower()] for cols in self.columns
                         if cols is not None and column.name.lower() in cols), column.name)
            for index, cols in enumerate(self.columns):
                if cols is not None and column.name.lower() not in cols:
                    stream = self.entries[index].name
                    self.error(f"stream {stream.text} has no column '{column.name}', which PARTITION BY names",
                               stream.span, f"Every stream of the query has each key column; {stream.text} has: "
                               f"{', '.join(sorted(cols.values()))}.")
        if name.lower() in V.TAKEN_BY_RESULTS:
            self.error(f"key column '{name}' has the name of a column of the result tables", column.span,
                       f"Give the stream's column another name (e.g. '{name}_key') in its schema and its files.")
        return name

    def covers_stream_keys(self, keys: tuple[str, ...]) -> None:
        """Events are unique per key of their stream and time (docs/semantics.md §1): a query over a keyed stream
        partitions by every key column of it (and may by more), or two events of one time would meet in a key.
        A query over matches partitions by its upstream's key alone: how far a key's rows are known (its horizon,
        docs/semantics.md §1) is known per upstream key."""
        for entry, schema in zip(self.entries, self.schemas, strict=True):
            if schema is None:
                continue
            missing = [k for k in schema.keys if k.lower() not in {q.lower() for q in keys}]
            if missing:
                stream = entry.name
                partition = ", ".join([*keys, *missing])
                streams = streams_text(self.entries)
                self.error(f"stream {stream.text} is keyed by {', '.join(schema.keys)}, which the query does not "
                           f"partition by", stream.span, f"Write FROM {streams} PARTITION BY {partition}: its "
                           f"events are in time order within each {', '.join(schema.keys)}, and two of them may "
                           "share a time, so a situation is a run of one key's events.")
            extra = [k for k in keys if k.lower() not in {s.lower() for s in schema.keys}]
            if schema.of_matches and extra and not missing:
                stream = entry.name
                self.error(f"a query over matches partitions by its upstream's key ({', '.join(schema.keys) or 'none'}"
                           f"), not by {', '.join(extra)}: a key's horizon is the upstream's", stream.span,
                           "Partition by the upstream query's PARTITION BY columns alone.")

    def check_streams_agree(self, keys: tuple[str, ...]) -> None:
        """Several streams meet on their keys and their times (docs/semantics.md §1): each key column, and the
        time, is of one kind in all of them, so values of two streams compare."""
        known = [(entry, schema) for entry, schema in zip(self.entries, self.schemas, strict=True) if schema]
        if len(known) < 2:
            return
        (first, first_schema), rest = known[0], known[1:]
        for entry, schema in rest:
            for key in keys:
                kinds = family(first_schema.type_of(key)), family(schema.type_of(key))
                if kinds[0] != kinds[1]:
                    self.error(f"key column '{key}' is {kinds[1]} in {entry.name.text} and {kinds[0]} in "
                               f"{first.name.text}", entry.name.span,
                               "Key values of the streams are compared: give the column one type in every schema.")
            if time_kind(schema) != time_kind(first_schema):
                self.error(f"stream {entry.name.text}'s times are {time_kind(schema)}, {first.name.text}'s "
                           f"{time_kind(first_schema)}", entry.name.span,
                           "The streams' times are compared with each other: give every stream of the query "
                           f"times of one kind (docs/semantics.md §1).{_unix_hint(schema, first_schema)}")

    def known_column(self, name: str, span: Span, entry: int) -> str:
        columns = self.columns[entry]
        if columns is None:
            return name
        if name.lower() in columns:
            return columns[name.lower()]
        close = closest_column(name, columns.values())
        hint = f"Did you mean '{close}'?" if close else f"The stream has: {', '.join(sorted(columns.values()))}."
        self.error(f"unknown column '{name}'", span, hint)
        return name

    def _qualifier_hint(self, column: ast.Column) -> str:
        """How to qualify a column; where `column` is `record.field` of a stream with the column `record_field`,
        that column: a nested record's field is read as the column named by its path."""
        path = f"{column.qualifier}_{column.name}".lower()
        for index, cols in enumerate(self.columns):
            if cols is not None and path in cols:
                return (f"A nested record's field is the column named by its path: write {self.label(index)}."
                        f"{cols[path]}.")
        if len(self.entries) == 1:
            return f"Qualify columns with '{self.label(0)}.' or leave them bare."
        labels = ", ".join(f"'{self.label(i)}.'" for i in range(len(self.entries)))
        return f"Qualify columns with one of {labels}."

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
            entry = self.predicate_stream(define)
            self.symbol_entry[name.text.lower()] = entry
            low, high = self.duration_bounds(define.duration)
            out.append(SymbolDef(name.text, define.predicate, low, high, name.span, self.label(entry)))
        return tuple(out)

    def predicate_stream(self, define: ast.Define) -> int:
        """The FROM entry a predicate reads: a symbol's situations come from one stream (docs/semantics.md §1)."""
        read = self.check_predicate(define.predicate)
        if len(self.entries) == 1:
            return 0
        if len(read) == 1:
            return read.pop()
        labels = ", ".join(self.label(i) for i in sorted(read) or range(len(self.entries)))
        if read:
            self.error(f"the predicate of {define.symbol.text} reads several streams ({labels})",
                       define.predicate.span, "A symbol's situations come from one stream: define one symbol per "
                       "stream and relate them in PATTERN.")
        elif not any(isinstance(node, ast.Column) for node in walk(define.predicate)):
            self.error(f"the predicate of {define.symbol.text} reads no stream's column", define.predicate.span,
                       f"Say which stream its situations come from: use a column of one of {labels}.")
        return 0

    def unread_streams(self) -> None:
        """Every stream of FROM has a symbol: one that has none would only hold back the others' decisions
        (docs/semantics.md §5)."""
        read = set(self.symbol_entry.values())
        for index, entry in enumerate(self.entries):
            if index not in read and self.symbols:
                self.error(f"no symbol reads stream {entry.name.text}", entry.name.span,
                           "Define a symbol over it, or remove it from FROM.")

    def duration_bounds(self, bound: ast.DurationConstraint | None) -> tuple[Fraction | None, Fraction | None]:
        if bound is None:
            return None, None
        low = bound.low.seconds if bound.low else None
        high = bound.high.seconds if bound.high else None
        if low is not None and high is not None and low > high:
            self.error("the duration's lower bound is above its upper bound", bound.span,
                       "Write BETWEEN <shorter> AND <longer>.")
        if high is not None and high <= 0:
            self.error("a situation lasts longer than zero, so AT MOST needs a positive duration", bound.span,
                       "Write the longest a situation may last, e.g. AT MOST 10 s, or leave AT MOST out.")
        for limit in (low, high):
            self.check_not_too_long(limit, "duration", bound.span)
        return low, high

    def check_not_too_long(self, seconds: Fraction | None, what: str, span: Span) -> None:
        """A window or duration beyond `LONGEST_DURATION_SECONDS` holds no time an event time can reach."""
        if seconds is not None and seconds > LONGEST_DURATION_SECONDS:
            years = float(LONGEST_DURATION_SECONDS) / (365.25 * 86400)
            self.error(f"the {what} is longer than event times can span (about {years:,.0f} years)", span,
                       f"Give a shorter {what}; one longer than the events' whole history already bounds nothing.")

    def check_predicate(self, expr: ast.Expr) -> set[int]:
        """Check a predicate; returns the FROM entries its columns are of."""
        read: set[int] = set()
        for node in walk(expr):
            if isinstance(node, ast.Column):
                entry = self.predicate_column(node)
                if entry is not None:
                    read.add(entry)
            elif isinstance(node, ast.Call):
                if node.name in AGGREGATES or node.name == "duration":
                    self.error(f"{node.name}() reads a situation and belongs in RETURN, not in a predicate",
                               node.span, "A predicate looks at one event's own columns.")
                else:
                    self.scalar_call(node)
        return read

    def predicate_column(self, column: ast.Column) -> int | None:
        """Check a predicate's column; returns the FROM entry it is of (None where that is an error)."""
        qualifier = column.qualifier
        if qualifier is not None and qualifier.lower() not in self.qualifiers:
            if qualifier.lower() in self.symbols:
                self.error(f"a predicate cannot refer to symbol '{qualifier}'", column.span,
                           "Predicates test a single event; compare its columns directly (docs/semantics.md §2).")
            else:
                self.error(f"unknown stream alias '{qualifier}'", column.span, self._qualifier_hint(column))
            return None
        if qualifier is not None:
            entry = self.qualifiers[qualifier.lower()]
        elif len(self.entries) == 1:
            entry = 0
        else:
            return self.bare_column(column)
        self.known_column(column.name, column.span, entry)
        return entry

    def bare_column(self, column: ast.Column) -> int | None:
        """The one stream of several that has a bare column's name; a column two streams may have is
        ambiguous (a stream whose schema is not known may have any)."""
        name = column.name.lower()
        having = [i for i, cols in enumerate(self.columns) if cols is None or name in cols]
        if len(having) == 1:
            return having[0]
        if having:
            self.error(f"column '{column.name}' may be of {' or '.join(self.label(i) for i in having)}",
                       column.span, f"Qualify it: {self.label(having[0])}.{column.name}.")
        else:
            self.error(f"unknown column '{column.name}'", column.span, "No stream of FROM has it.")
        return None

    def scalar_call(self, call: ast.Call) -> None:
        if call.name not in SCALAR_FUNCTIONS:
            close = difflib.get_close_matches(call.name, list(SCALAR_FUNCTIONS), n=1)
            hint = f"Did you mean '{close[0]}'?" if close else \
                f"Allowed functions: {', '.join(sorted(SCALAR_FUNCTIONS))}; in RETURN, the aggregates " \
                f"{', '.join(sorted(AGGREGATES))} of a symbol's events."
            self.error(f"function '{call.name}' is not allowed", call.span, hint)
            return
        low, high = SCALAR_FUNCTIONS[call.name]
        if len(call.args) < low or (high is not None and len(call.args) > high):
            wanted = f"{low}" if low == high else f"at least {low}" if high is None else f"{low} or {high}"
            self.error(f"{call.name}() takes {wanted} argument(s), got {len(call.args)}", call.span,
                       f"Give {call.name}() {wanted} argument(s), separated by commas.")
        elif call.name in TIME_FIELDS and (problem := zone_problem(call)) is not None:
            self.error(problem[0], call.args[1].span, problem[1])

    # ------------------------------------------------------------ PATTERN

    def resolve_symbol(self, name: ast.Name) -> str | None:
        found = self.symbols.get(name.text.lower())
        if found is None:
            close = difflib.get_close_matches(name.text.lower(), list(self.symbols), n=1)
            defined = ", ".join(self.symbols.values())
            hint = f"Did you mean '{self.symbols[close[0]]}'?" if close else \
                f"Define it in DEFINE first{f' (DEFINE defines {defined})' if defined else ''}."
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

    def never_matching(self, constraints: tuple[PairConstraint, ...]) -> list[QueryWarning]:
        """A warning where the pattern's constraints cannot hold together (`rel.contradiction`): `A before B AND
        B before C AND C before A` runs and finds nothing, so it is said, where the constraint the others exclude
        is written (or, where the pair they leave no relation is not constrained itself, at the last constraint).
        A warning, not an error: the query is well formed, and runs."""
        found = rel.contradiction(list(self.symbols.values()), {(c.left, c.right): c.relations for c in constraints})
        if found is None:
            return []
        excluded = next((c for c in constraints if {c.left, c.right} == {found.left, found.right}), None)
        if excluded is not None and excluded.left != found.left:  # said in the orientation the constraint has
            found = found.mirrored()
        by = "its constraint" if excluded is not None else "the rest of the pattern's"
        place = (excluded or constraints[-1]).span
        return [QueryWarning(
            f"the pattern can never match: {found.left} {_either(found.to_via)} {found.via} and {found.via} "
            f"{_either(found.from_via)} {found.right} leave only {found.left} {_either(found.implied)} {found.right}, "
            f"which {by} {found.left} {_either(found.allowed)} {found.right} excludes", place.line, place.col)]

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
        taken = {k.lower(): f"the key column {k}" for k in keys} | {c: f"the match column {c}" for c in MATCH_COLUMNS}
        taken |= {f"{lower}_{end}": f"{symbol}.{end}" for lower, symbol in self.symbols.items()
                  for end in rel.ENDPOINTS}
        out: list[OutputColumn] = []
        for item in self.query.returns:
            expr = self.bare_keys(item.expr, keys)
            self.check_return_expr(expr, keys)
            if item.alias is not None:
                name = item.alias.text
                if name.lower() in taken:
                    self.error(f"output column '{name}' is already taken, by {taken[name.lower()]}", item.alias.span,
                               "Pick a name that no key, <symbol>_ts/_te, match column or other RETURN column has.")
            else:
                name = output_name(item.expr)
                if self.is_match_column(expr, keys):
                    continue
                if name.lower() in taken:
                    self.error(f"RETURN {expr_text(item.expr)} is named '{name}', which is already taken, by "
                               f"{taken[name.lower()]}", item.expr.span,
                               f"Name it yourself: {expr_text(item.expr)} AS <name>.")
            taken[name.lower()] = f"RETURN {expr_text(item.expr)}"
            out.append(OutputColumn(name, expr))
        return tuple(out)

    def bare_keys(self, expr: ast.Expr, keys: tuple[str, ...]) -> ast.Expr:
        """`expr` with a key column qualified by a stream of FROM (`CS.car_id`) written bare: as in PARTITION BY,
        such a qualifier names no stream in particular, and a match has one value of each key."""
        named = {k.lower() for k in keys}

        def bare(node: ast.Expr) -> ast.Expr:
            if isinstance(node, ast.Column) and node.qualifier and node.name.lower() in named \
                    and node.qualifier.lower() in self.qualifiers and node.qualifier.lower() not in self.symbols:
                return replace(node, qualifier=None)
            return node

        return rebuilt(expr, bare)

    # ------------------------------------------------------------ types

    def check_types(self, symbols: tuple[SymbolDef, ...], returns: tuple[OutputColumn, ...]) -> None:
        """Every predicate a condition, every operator given the family it takes (`pielake.query.typecheck`),
        where the schemas are known: a column is typed by its symbol's stream, a key column by any stream's."""
        types = [{n.lower(): t for n, t in schema.columns} if schema else None for schema in self.schemas]
        if all(t is None for t in types):
            return
        keyed = next(t for t in types if t is not None)
        time = next(time_family(schema) for schema in self.schemas if schema is not None)
        for symbol in symbols:
            own = types[self.symbol_entry[symbol.name.lower()]]
            if own is not None:
                check_predicate(symbol.predicate, own, self.error)

        def column_type(column: ast.Column) -> str:
            own = keyed if column.qualifier is None else types[self.symbol_entry[column.qualifier.lower()]]
            return "?" if own is None else own.get(column.name.lower(), "?")

        for out in returns:
            check_return(out.expr, column_type, time, self.symbols, self.error)

    def is_match_column(self, expr: ast.Expr, keys: tuple[str, ...]) -> bool:
        """A key column or a situation endpoint: a column of every match."""
        if not isinstance(expr, ast.Column):
            return False
        if expr.qualifier is None:
            return expr.name.lower() in {k.lower() for k in keys}
        return expr.qualifier.lower() in self.symbols and expr.name.lower() in rel.ENDPOINTS

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
                self.error("duration() takes one symbol", call.span, "Write duration(B), B a symbol of DEFINE.")
            return
        if not (isinstance(arg, ast.Column) and arg.qualifier is not None):
            self.error(f"{call.name}() takes one symbol's column", call.span,
                       f"Write {call.name}(B.speed), B a symbol of DEFINE and speed a column of its stream.")
            return
        if arg.qualifier.lower() in self.qualifiers and arg.qualifier.lower() not in self.symbols:
            self.stream_aggregated(call, arg)
            return
        if arg.qualifier.lower() not in self.symbols:
            self.resolve_symbol(ast.Name(arg.qualifier, arg.span))
            return
        self.known_column(arg.name, arg.span, self.symbol_entry[arg.qualifier.lower()])

    def stream_aggregated(self, call: ast.Call, arg: ast.Column) -> None:
        """`avg(CS.speed)`, CS a stream of FROM, as SQL aggregates a table's rows: a match is of situations, so
        an aggregate reads the events of one symbol's situation; the fix names the symbols over that stream."""
        entry = self.qualifiers[arg.qualifier.lower()]
        over = [name for low, name in self.symbols.items() if self.symbol_entry.get(low) == entry]
        fix = " or ".join(f"{call.name}({symbol}.{arg.name})" for symbol in over[:3]) or \
            f"{call.name}(B.{arg.name}), B a symbol of DEFINE"
        self.error(f"{call.name}() reads one symbol's events, and '{arg.qualifier}' is a stream of FROM", arg.span,
                   f"Write {fix}: the {arg.name} of the events of that symbol's situation in each match.")

    def return_column(self, column: ast.Column, keys: tuple[str, ...]) -> None:
        if column.qualifier and column.qualifier.lower() in self.symbols:
            if column.name.lower() not in rel.ENDPOINTS:
                said = f"{column.qualifier}.{column.name}"
                fix = f"first({said}), avg(...), max(...), ..."
                hint = f"A situation's start is {column.qualifier}.ts and its end {column.qualifier}.te; a column " \
                    f"of its events takes an aggregate: {fix}" if column.name.lower() in ENDPOINT_WORDS else \
                    f"Write {fix}"
                self.error(f"'{said}' needs an aggregate", column.span, hint)
            return
        if column.qualifier is None and column.name.lower() in {k.lower() for k in keys}:
            return
        if column.qualifier and column.qualifier.lower() in self.qualifiers:
            self.error(f"'{column.qualifier}.{column.name}' is a column of the stream's events, not of a match",
                       column.span, f"RETURN reads situations: name a symbol and an aggregate, as in "
                       f"first({next(iter(self.symbols.values()), 'S')}.{column.name}).")
            return
        self.error(f"'{column.name}' is neither a key column nor a situation's value", column.span,
                   "RETURN reads situations: use S.ts, S.te, duration(S) or an aggregate such as first(S.col).")


# What a user may call a situation's start or end, which are S.ts and S.te.
ENDPOINT_WORDS = frozenset({"start", "begin", "started", "start_time", "end", "stop", "finish", "ended", "end_time"})

EXPRESSIONS = get_args(ast.Expr)


def children(expr: ast.Expr) -> tuple[ast.Expr, ...]:
    """The direct sub-expressions of a node, in the order its fields are written (an operand, then what it is
    compared with; a call's arguments): a node's shape is its dataclass's fields, read here and in `rebuilt`."""
    out: list[ast.Expr] = []
    for value in (getattr(expr, f.name) for f in fields(expr)):
        out.extend(v for v in (value if isinstance(value, tuple) else (value,)) if isinstance(v, EXPRESSIONS))
    return tuple(out)


def rebuilt(expr: ast.Expr, change: Callable[[ast.Expr], ast.Expr]) -> ast.Expr:
    """`expr` with `change` applied to each of its nodes, the sub-expressions first."""
    def each(value: object) -> object:
        if isinstance(value, tuple):
            return tuple(each(v) for v in value)
        return rebuilt(value, change) if isinstance(value, EXPRESSIONS) else value

    return change(replace(expr, **{f.name: each(getattr(expr, f.name)) for f in fields(expr) if f.name != "span"}))


def output_name(expr: ast.Expr) -> str:
    """The name of an unnamed RETURN column: its expression as pielake prints it, lower-case, every run of other
    characters than letters and digits one `_`, none at either end (`A1.ts` -> `a1_ts`, `avg(B.speed)` ->
    `avg_b_speed`); `_` goes before a name that would not start with a letter."""
    return plain_name(expr_text(expr).lower())


def walk(expr: ast.Expr) -> Iterator[ast.Expr]:
    yield expr
    for child in children(expr):
        yield from walk(child)


def time_kind(schema: StreamSchema) -> str:
    """What a stream's times are, for comparing two streams': TIMESTAMP, or integers of a unit."""
    return "TIMESTAMP" if schema.time_unit == TIMESTAMP_UNIT else f"integers of unit '{schema.time_unit}'"


def _unix_hint(one: StreamSchema, other: StreamSchema) -> str:
    """Where one stream's times are TIMESTAMPs and the other's whole seconds, the seconds are most often Unix time
    (as loggers write it), which a stream declares as times: the way to say so."""
    units = {one.time_unit: one, other.time_unit: other}
    seconds = units.get("s")
    if TIMESTAMP_UNIT not in units or seconds is None:
        return ""
    column = seconds.time_column
    return (f" If {seconds.name}'s times are seconds since 1970, declare them as times in "
            f"{where_to_declare(seconds.name)}: "
            f"time: {{column: {column}, unit: timestamp, format: unix}}, and {column} TIMESTAMP in its columns.")


def time_family(schema: StreamSchema) -> str:
    """The type family of a stream's times, which `S.ts` and `S.te` have."""
    return TIME if schema.time_unit == TIMESTAMP_UNIT else family(schema.type_of(schema.time_column))


def analyze(parsed: ParseResult, name: str = "query",
            schemas: StreamSchema | Iterable[StreamSchema] | None = None) -> QueryPlan:
    """Check a parsed query and build its plan.

    Args:
        parsed: the parser's result (AST, warnings, source text).
        name: the query's name, used for table names (`matches_<name>`).
        schemas: the schemas of the streams it reads, where known (one, or several): a column a stream lacks is
            then an error, the query must partition by each of its keys, and every expression must have a type
            its operators take (`typecheck`).

    Raises:
        QuerySemanticError: listing every problem found, sorted by position.
    """
    given = [schemas] if isinstance(schemas, StreamSchema) else list(schemas or ())
    return _Analyzer(parsed, name, {s.name.lower(): s for s in given}).run()


def load_query(source: str, name: str = "query",
               schemas: StreamSchema | Iterable[StreamSchema] | None = None) -> QueryPlan:
    """Parse and analyze query text in one call."""
    return analyze(parse(source), name, schemas)


def bind(plan: QueryPlan, schemas: StreamSchema | Iterable[StreamSchema]) -> QueryPlan:
    """The plan checked against its streams' schemas (`analyze`), column names then spelled as the streams
    spell them."""
    return load_query(plan.source, plan.name, schemas)


def bind_declared(plan: QueryPlan, lake: Path | None) -> tuple[QueryPlan, list[StreamSchema]]:
    """The plan bound to the schemas its streams have before a run reads a file (the lake's, else `schemas/`),
    and those schemas: a misspelt column is then refused where the query is checked or registered as a run would
    refuse it, not after Spark starts. A stream with neither is typed from its first file by the run that reads
    it."""
    schemas = [schema for source in plan.sources if (schema := declared_schema(source.stream, lake)) is not None]
    return (bind(plan, schemas) if schemas else plan), schemas


def read_query_file(path: str) -> tuple[str, str]:
    """The query text and its name: the file's stem, which names its tables, so it must be a plain identifier.
    `-` reads standard input (named `stdin`). A byte-order mark, which some editors write first, is not text."""
    if path == "-":
        return sys.stdin.read().removeprefix("\ufeff"), "stdin"
    file = Path(path)
    if file.is_dir():
        raise PielakeError(f"{path} is a folder, not a query file: name a .tpq file")
    if not file.is_file():
        raise PielakeError(f"no query file at {path}")
    name = file.stem
    if not (PLAIN_NAME.fullmatch(name) and len(name) <= LONGEST_QUERY_NAME):  # part of its tables' names
        raise PielakeError(f"query file name '{file.name}' must be a plain identifier (letters, digits and '_', not "
                           f"first a digit, at most {LONGEST_QUERY_NAME} characters), because it names the result "
                           f"table matches_<name>: rename it, e.g. to {plain_name(name)[:LONGEST_QUERY_NAME]}.tpq")
    try:
        return file.read_text(encoding="utf-8-sig"), name
    except UnicodeDecodeError as error:
        raise PielakeError(f"query file {path} is not UTF-8 text (byte {error.start}); save it as UTF-8") from None


def runnable(plan: QueryPlan) -> QueryPlan:
    """The plan, if the pipeline runs it: refused before a run starts Spark or writes to a lake. A query over
    several streams reads streams of events: another query's matches, whose rows carry horizon marks of their own
    (`pielake.pipeline.upstream`), are read alone."""
    if len(plan.sources) > 1:
        for source in plan.sources:
            if source.reads_matches:
                plan.refuse(source, f"the pipeline reads the matches of query {source.upstream} alone, not beside "
                            "other streams", f"Read {source.stream} in a query of its own.")
    return plan


def load_runnable(source: str, name: str) -> QueryPlan:
    """The checked plan of query text, as the pipeline runs it (`runnable`): what a query file holds, a run or a
    plot the engine is sent, and the engine's warm-up query."""
    return runnable(load_query(source, name))


def load_query_file(path: str | Path) -> QueryPlan:
    """The checked plan of a query file, as the pipeline runs it: what the CLI, the spark-submit jobs and the DAG
    factory all load."""
    return load_runnable(*read_query_file(str(path)))


def _either(relations: frozenset[str]) -> str:
    """Relations as a message lists them, in their canonical order: `before`, `meets or overlaps`."""
    named = [name for name in rel.ALLEN_RELATIONS if name in relations]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]
