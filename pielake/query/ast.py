"""The query's abstract syntax tree: frozen dataclasses with no behaviour.

Every node keeps its `span` (line, column, offsets) so that later stages can point at the offending text; the
span is left out of equality, so two parses of the same query in different layouts compare equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from pielake.query.tokens import Span

NOWHERE = Span(0, 0, 0, 0)


def _span() -> Span:
    return field(default=NOWHERE, compare=False, repr=False)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Column:
    """`speed` or `CS.speed`; in RETURN also `S.attr`, `S.ts`, `S.te` with a symbol as qualifier."""

    name: str
    qualifier: str | None = None
    span: Span = _span()


@dataclass(frozen=True)
class Literal:
    """A number, string, boolean or NULL. `unit` is a cosmetic unit such as `mph`, kept for printing only."""

    value: Decimal | str | bool | None
    unit: str | None = None
    span: Span = _span()


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "NOT"
    operand: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Binary:
    op: str  # canonical: + - * / % = != < <= > >= AND OR
    left: Expr
    right: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Between:
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    span: Span = _span()


@dataclass(frozen=True)
class InList:
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    span: Span = _span()


@dataclass(frozen=True)
class Like:
    """`x LIKE 'ab%'`: whether text is held whole by a pattern of SQL's LIKE, which a string literal writes
    (`pielake.query.like`)."""

    operand: Expr
    pattern: Literal
    negated: bool = False
    span: Span = _span()


@dataclass(frozen=True)
class IsNull:
    operand: Expr
    negated: bool = False
    span: Span = _span()


@dataclass(frozen=True)
class Call:
    """A function call; the analyzer decides whether the name is allowed where it stands."""

    name: str  # lower case
    args: tuple[Expr, ...]
    span: Span = _span()


Expr = Column | Literal | Unary | Binary | Between | InList | Like | IsNull | Call


# ---------------------------------------------------------------- clauses

_UNIT_SPELLINGS: dict[Fraction, tuple[str, ...]] = {
    Fraction(1, 1_000_000): ("us", "usec", "microsecond", "microseconds"),
    Fraction(1, 1000): ("ms", "msec", "millisecond", "milliseconds"),
    Fraction(1): ("s", "sec", "secs", "second", "seconds"),
    Fraction(60): ("min", "mins", "minute", "minutes"),
    Fraction(3600): ("h", "hr", "hrs", "hour", "hours"),
    Fraction(86400): ("d", "day", "days"),
    Fraction(604800): ("w", "week", "weeks"),
}
TIME_UNIT_SECONDS: dict[str, Fraction] = {name: seconds for seconds, names in _UNIT_SPELLINGS.items() for name in names}


@dataclass(frozen=True)
class Duration:
    """`5 s`, `30s`, `5 MINUTES`: an amount with a time unit (unit stored lower case)."""

    amount: Decimal
    unit: str
    span: Span = _span()

    @property
    def seconds(self) -> Fraction:
        return Fraction(self.amount) * TIME_UNIT_SECONDS[self.unit]


@dataclass(frozen=True)
class DurationConstraint:
    """`AT LEAST d`, `AT MOST d` or `BETWEEN d1 AND d2`; bounds inclusive (docs/semantics.md §2)."""

    low: Duration | None
    high: Duration | None
    span: Span = _span()


@dataclass(frozen=True)
class Name:
    """A user-chosen name (symbol, alias, stream, output column) with its position."""

    text: str
    span: Span = _span()


@dataclass(frozen=True)
class Define:
    symbol: Name
    predicate: Expr
    duration: DurationConstraint | None = None
    span: Span = _span()


@dataclass(frozen=True)
class RelationRef:
    """A relation name as written (`met-by`, `finished_by`, `equal`); the analyzer resolves it."""

    text: str
    span: Span = _span()


@dataclass(frozen=True)
class Alternative:
    """`A r1;r2 B`: one ordered pair of symbols with the relations listed between them."""

    left: Name
    relations: tuple[RelationRef, ...]
    right: Name
    span: Span = _span()


@dataclass(frozen=True)
class Constraint:
    """A disjunction of alternatives on one unordered pair; constraints are joined by AND."""

    alternatives: tuple[Alternative, ...]
    span: Span = _span()


@dataclass(frozen=True)
class StreamRef:
    """One entry of FROM: a stream and the alias its columns may be qualified by."""

    name: Name
    alias: Name | None = None
    span: Span = _span()


@dataclass(frozen=True)
class ReturnItem:
    """`<expr> [AS <alias>]`; without an alias the analyzer derives the output column's name."""

    expr: Expr
    alias: Name | None
    span: Span = _span()


@dataclass(frozen=True)
class Query:
    streams: tuple[StreamRef, ...]
    partition_by: tuple[Column, ...]
    defines: tuple[Define, ...]
    pattern: tuple[Constraint, ...]
    window: Duration
    returns: tuple[ReturnItem, ...]
    span: Span = _span()
