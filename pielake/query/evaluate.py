"""Plain-Python evaluation of predicate and RETURN expressions, for the brute-force reference.

It follows SQL three-valued logic as Spark does, so that the reference and the Spark kernels agree: NULL
propagates through arithmetic and comparisons, `AND`/`OR` use Kleene logic, division or modulo by zero is NULL
and so is a whole-number result beyond 64 bits (the kernels compile the operators to Spark's `try_` functions),
`/` divides as doubles, `%` keeps the dividend's sign, `least`/`greatest` skip NULLs, and a NaN (of an
infinity's arithmetic) is above every number and equal to itself. A time compares with a time written as text,
and a DATE with a TIMESTAMP, as Spark casts them (`time_fields.comparable`). A number literal is a 64-bit integer
where it is written without a point and one holds it, else a double (`number_value`). A predicate whose value is
NULL counts as false (`holds`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from pielake.errors import CompileError
from pielake.query import ast
from pielake.query.like import like_regex
from pielake.query.time_fields import TIME_FIELDS, comparable, time_field, zone_of
from pielake.query.visitor import ExprVisitor

ColumnResolver = Callable[[ast.Column], Any]
CallResolver = Callable[[ast.Call], Any]


BIGINT_RANGE = range(-2**63, 2**63)


def number_value(value: Decimal) -> int | float:
    """A number literal's value: a 64-bit integer where it is written without a point (`70`, `1e3`) and one holds
    it, else a double (`70.0`, `0.5`, `1e20`)."""
    whole = int(value.as_tuple().exponent) >= 0 and int(value) in BIGINT_RANGE
    return int(value) if whole else float(value)


def _number(value: Any) -> Any:
    return number_value(value) if isinstance(value, Decimal) else value


def in_bigint(value: Any) -> Any:
    """A whole-number result beyond 64 bits is NULL, as Spark's `try_add`, `try_subtract`, `try_multiply` give."""
    return None if isinstance(value, int) and value not in BIGINT_RANGE else value


def _arith(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if op == "+":
        return in_bigint(a + b)
    if op == "-":
        return in_bigint(a - b)
    if op == "*":
        return in_bigint(a * b)
    if b == 0:
        return None
    if op == "/":
        return float(a) / float(b)
    if isinstance(a, float) or isinstance(b, float):
        return math.nan if math.isinf(a) or math.isnan(a) or math.isnan(b) else math.fmod(a, b)  # as Java's %
    remainder = abs(a) % abs(b)  # exact for integers of any size, with the dividend's sign
    return remainder if a >= 0 else -remainder


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def spark_order(value: Any) -> Any:
    """A value as Spark orders it: NaN, which an infinity's arithmetic gives, above every number and equal to
    itself, where IEEE (Python's floats) orders it nowhere and equal to nothing."""
    return (1, 0.0) if isinstance(value, float) and math.isnan(value) else (0, value)


def ordered(a: Any, b: Any) -> tuple[Any, Any]:
    """Two values as a comparison takes them: times as `time_fields.comparable` reads them, NaN as Spark orders
    it."""
    a, b = comparable(a, b)
    if spark_order(a)[0] or spark_order(b)[0]:
        return spark_order(a), spark_order(b)
    return a, b


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _sqrt(value: float) -> float:
    """A double's square root as Java's `Math.sqrt` gives it: NaN below zero (and of NaN), where Python raises."""
    return math.sqrt(value) if value >= 0 else math.nan


def _not_null(values: list[Any]) -> list[Any]:
    return [v for v in values if v is not None]


_SCALAR: dict[str, Callable[[list[Any]], Any]] = {
    "abs": lambda v: None if v[0] is None else in_bigint(abs(v[0])),
    "sqrt": lambda v: None if v[0] is None else _sqrt(float(v[0])),
    "least": lambda v: min(_not_null(v), default=None, key=spark_order),
    "greatest": lambda v: max(_not_null(v), default=None, key=spark_order),
    "coalesce": lambda v: next((x for x in v if x is not None), None),
    "lower": lambda v: None if v[0] is None else str(v[0]).lower(),
    "upper": lambda v: None if v[0] is None else str(v[0]).upper(),
    "length": lambda v: None if v[0] is None else len(str(v[0])),  # characters (code points), as Spark counts
}


class Evaluator(ExprVisitor):
    """Evaluates one expression tree; columns and situation calls are resolved by the caller's hooks."""

    prefix = "eval"

    def __init__(self, column: ColumnResolver, call: CallResolver | None = None):
        self.column = column
        self.call = call

    def eval_column(self, expr: ast.Column) -> Any:
        value = self.column(expr)
        return float(value) if isinstance(value, Decimal) else value  # a DECIMAL attribute is read as a double

    def eval_literal(self, expr: ast.Literal) -> Any:
        return _number(expr.value)

    def eval_unary(self, expr: ast.Unary) -> Any:
        value = self(expr.operand)
        if value is None:
            return None
        return (not value) if expr.op == "NOT" else in_bigint(-value)

    def eval_binary(self, expr: ast.Binary) -> Any:
        left, right = self(expr.left), self(expr.right)
        if expr.op == "AND":
            return _and(left, right)
        if expr.op == "OR":
            return _or(left, right)
        if expr.op in COMPARE:
            return None if left is None or right is None else COMPARE[expr.op](*ordered(left, right))
        return _arith(expr.op, left, right)

    def eval_between(self, expr: ast.Between) -> Any:
        value, low, high = self(expr.operand), self(expr.low), self(expr.high)
        lower = None if value is None or low is None else COMPARE[">="](*ordered(value, low))
        upper = None if value is None or high is None else COMPARE["<="](*ordered(value, high))
        inside = _and(lower, upper)
        return (None if inside is None else not inside) if expr.negated else inside

    def eval_inlist(self, expr: ast.InList) -> Any:
        value = self(expr.operand)
        if value is None:
            return None
        items = [self(item) for item in expr.items]
        if any(COMPARE["="](*ordered(value, item)) for item in _not_null(items)):
            found: Any = True
        else:
            found = None if None in items else False
        return (None if found is None else not found) if expr.negated else found

    def eval_like(self, expr: ast.Like) -> Any:
        value = self(expr.operand)
        if value is None:
            return None
        held = like_regex(str(expr.pattern.value)).fullmatch(value) is not None
        return held != expr.negated

    def eval_isnull(self, expr: ast.IsNull) -> Any:
        return (self(expr.operand) is not None) if expr.negated else (self(expr.operand) is None)

    def eval_call(self, expr: ast.Call) -> Any:
        if expr.name in TIME_FIELDS:
            return time_field(expr.name, self(expr.args[0]), zone_of(expr))
        if expr.name in _SCALAR:
            return _SCALAR[expr.name]([self(a) for a in expr.args])
        if self.call is None:
            raise CompileError(f"function '{expr.name}' cannot be evaluated here")
        return _number(self.call(expr))


def row_evaluator(row: Mapping[str, Any]) -> Evaluator:
    """An evaluator over one event; column names resolve case-insensitively like Spark's."""
    lowered = {k.lower(): v for k, v in row.items()}
    return Evaluator(lambda column: lowered.get(column.name.lower()))


def holds(predicate: ast.Expr, row: Mapping[str, Any]) -> bool:
    """Whether an event satisfies a predicate; NULL counts as false (docs/semantics.md §1)."""
    return row_evaluator(row)(predicate) is True
