"""Checked query expressions -> Spark Columns. User text never reaches Spark SQL as text.

One `compile_<node>` per AST node type; an unknown node raises `CompileError`. Semantics match
`pielake.query.evaluate` (the reference's evaluator): the arithmetic operators compile to Spark's `try_`
functions, so a division by zero or a whole-number result beyond 64 bits is NULL rather than a failed job (one
event's value would otherwise fail every run that reads it), and a predicate that is NULL counts as false.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pyspark.sql.functions as F
from pyspark.sql import Column

from pielake.errors import CompileError
from pielake.query import ast
from pielake.query.evaluate import number_value
from pielake.query.time_fields import TIME_FIELDS, zone_of
from pielake.query.visitor import ExprVisitor

ColumnResolver = Callable[[ast.Column], Column]
CallResolver = Callable[[ast.Call], Column]

_ARITH: dict[str, Callable[[Column, Column], Column]] = {
    "+": F.try_add, "-": F.try_subtract, "*": F.try_multiply, "/": F.try_divide, "%": F.try_mod,
}
_COMPARE: dict[str, Callable[[Column, Column], Column]] = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "AND": lambda a, b: a & b, "OR": lambda a, b: a | b,
}
_SCALAR: dict[str, Callable[..., Column]] = {
    "abs": lambda v: F.when(v < 0, _negated(v)).otherwise(v), "sqrt": F.sqrt,
    "least": F.least, "greatest": F.greatest, "coalesce": F.coalesce, "lower": F.lower, "upper": F.upper,
    "length": lambda v: F.length(v).cast("bigint"),  # a whole number in 64 bits, as the reference computes with it
}

# Each field of a time moved to a clock (`from_utc_timestamp` in a UTC session), a whole number in 64 bits as the
# reference computes with it (`pielake.query.time_fields`).
_TIME_FIELDS: dict[str, Callable[[Column], Column]] = {
    "hour": F.hour, "minute": F.minute, "dayofweek": F.dayofweek, "month": F.month,
}


def literal(value: Decimal | str | bool | None) -> Column:
    """A number is a BIGINT or a DOUBLE as the reference reads it (`number_value`: `70` and `1e3`, but `70.0`,
    `0.5` and `1e20` are doubles). A BIGINT, not the INT Spark gives a small one: `ts * 1000` over an INT column is
    then computed in 64 bits, as the reference computes it."""
    if isinstance(value, Decimal):
        number = number_value(value)
        return F.lit(number).cast("bigint") if isinstance(number, int) else F.lit(number)
    return F.lit(value)


def _negated(value: Column) -> Column:
    """`-value`, NULL where it is beyond 64 bits (the least BIGINT), where Spark's own negation fails."""
    return F.try_multiply(value, F.lit(-1).cast("bigint"))


class Compiler(ExprVisitor):
    """Compiles one expression tree; columns and situation calls are resolved by the caller's hooks."""

    prefix = "compile"

    def __init__(self, column: ColumnResolver | None = None, call: CallResolver | None = None):
        self.column = column or (lambda c: F.col(c.name))
        self.call = call

    def compile_column(self, expr: ast.Column) -> Column:
        return self.column(expr)

    def compile_literal(self, expr: ast.Literal) -> Column:
        return literal(expr.value)

    def compile_unary(self, expr: ast.Unary) -> Column:
        operand = self(expr.operand)
        return ~operand if expr.op == "NOT" else _negated(operand)

    def compile_binary(self, expr: ast.Binary) -> Column:
        left, right = self(expr.left), self(expr.right)
        rule = _ARITH.get(expr.op) or _COMPARE.get(expr.op)
        if rule is None:
            raise CompileError(f"no Spark rule for operator {expr.op}")
        return rule(left, right)

    def compile_between(self, expr: ast.Between) -> Column:
        inside = self(expr.operand).between(self(expr.low), self(expr.high))
        return ~inside if expr.negated else inside

    def compile_inlist(self, expr: ast.InList) -> Column:
        found = self(expr.operand).isin(*(self(item) for item in expr.items))
        return ~found if expr.negated else found

    def compile_like(self, expr: ast.Like) -> Column:
        held = self(expr.operand).like(str(expr.pattern.value))
        return ~held if expr.negated else held

    def compile_isnull(self, expr: ast.IsNull) -> Column:
        operand = self(expr.operand)
        return operand.isNotNull() if expr.negated else operand.isNull()

    def compile_call(self, expr: ast.Call) -> Column:
        if expr.name in TIME_FIELDS:
            return _TIME_FIELDS[expr.name](F.from_utc_timestamp(self(expr.args[0]), zone_of(expr))).cast("bigint")
        if expr.name in _SCALAR:
            return _SCALAR[expr.name](*(self(a) for a in expr.args))
        if self.call is None:
            raise CompileError(f"function '{expr.name}' cannot be compiled here")
        return self.call(expr)


def predicate(expr: ast.Expr, column: ColumnResolver | None = None) -> Column:
    """A boolean Column that is never NULL: a NULL predicate counts as false (docs/semantics.md §1)."""
    return F.coalesce(Compiler(column)(expr), F.lit(False))

