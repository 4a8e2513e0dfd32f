"""Checked predicates -> Arrow arrays, for the runs kernel when it reads the events' Parquet files itself.

A batch run's kernel reads each events file as a task of its own (`pielake.spark.runs`). Read by Spark, every
event then crosses from the JVM to the kernel's Python worker through Spark's row-by-row Arrow writer, which is
most of the JVM's work in that stage. Read by pyarrow in the worker, the same
file costs a vectorised Parquet read, and the predicates are evaluated here, on its columns.

This is a second backend beside `pielake.spark.compile`, so it takes only what it computes exactly as Spark
does, and declines the rest (`ArrowDeclinedError`: the run then reads through Spark, as before):

- columns of integer, floating, boolean and string types; literals that are numbers, strings or booleans;
- `+ - *` on numbers (NULL where a whole-number result is beyond 64 bits, as Spark's `try_` arithmetic gives),
  `/` as `try_divide` (a double; NULL for a zero divisor), comparisons within numbers, strings or booleans,
  Kleene `AND`/`OR`/`NOT`, `BETWEEN`, `IN`, `LIKE` on strings (Arrow's `match_like` reads `%`, `_` and `\\` as
  Spark does), `IS NULL`, and `abs`, `sqrt`, `least`, `greatest` over numbers, `coalesce`, `length` of strings.

NULL propagates as in SQL and a NULL predicate counts as false (docs/semantics.md §1). Events hold no NaN (ingest
quarantines them, `not_finite`), but an infinity's arithmetic gives one (`1e308 * 10 - 1e308 * 10`), as does the
square root of a number below zero, and there Spark's ordering departs from IEEE's, which Arrow's comparisons
follow: Spark's NaN equals itself and is above every number, so comparisons and `greatest` over arithmetic on
doubles and square roots are mended where a side is NaN (`_compared`); over columns and literals alone, which hold
none, they stay Arrow's own.
Declined: `%`, `lower`/`upper` (Java's and utf8proc's case mappings differ past ASCII), NULL literals, mixed
types, and a time's fields, whose TIMESTAMP and DATE columns are read by Spark.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pielake.errors import CompileError
from pielake.query import ast
from pielake.query.analyzer import walk
from pielake.query.evaluate import in_bigint, number_value
from pielake.query.typecheck import ARITHMETIC
from pielake.query.visitor import ExprVisitor
from pielake.spark import columns as C

Value = pa.Array | pa.ChunkedArray | pa.Scalar

_ARITH: dict[str, tuple[Callable[[Value, Value], Value], Callable[[int, int], int]]] = {
    "+": (pc.add_checked, operator.add), "-": (pc.subtract_checked, operator.sub),
    "*": (pc.multiply_checked, operator.mul)}
_COMPARE: dict[str, Callable[[Value, Value], Value]] = {
    "=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
    ">=": pc.greater_equal}
# Where one side of a comparison is NaN (`left`, `right`: whether each is), its value as Spark orders NaN.
_NAN_ORDER: dict[str, Callable[[Value, Value], Value]] = {
    "=": pc.and_, "!=": lambda left, right: pc.invert(pc.and_(left, right)),
    "<": lambda left, right: pc.and_not(right, left), "<=": lambda left, right: right,
    ">": pc.and_not, ">=": lambda left, right: left}
_NUMERIC_CALLS: dict[str, Callable[..., Value]] = {
    "abs": lambda v: _or_null_beyond_64_bits(pc.abs_checked, abs, v),
    # A double's square root, NaN below zero, as Java's `Math.sqrt`; whole numbers cast to doubles as Spark casts
    # them (to the nearest double, beyond 2^53 too).
    "sqrt": lambda v: pc.sqrt(pc.cast(v, pa.float64(), safe=False)),
    # Arrow's minimum passes over NaN, as Spark's `least` does (NaN is above every number); its maximum too,
    # where Spark's `greatest` gives the NaN (`_nan_if_any`).
    "least": lambda *v: pc.min_element_wise(*v, skip_nulls=True),
    "greatest": lambda *v: pc.max_element_wise(*v, skip_nulls=True)}
# The stored column types whose Parquet columns pyarrow reads as the very Arrow types Spark hands the kernel.
READABLE_TYPES = frozenset({"BIGINT", "LONG", "INT", "INTEGER", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "REAL",
                            "BOOLEAN", "STRING"})


class ArrowDeclinedError(CompileError):
    """An expression this backend does not compute exactly as Spark does: the run reads through Spark."""


def _or_null_beyond_64_bits(checked: Callable[..., Value], exact: Callable[..., int], *values: Value) -> Value:
    """`checked(*values)`, Arrow's arithmetic that fails on an integer overflow; where it does, the values again
    as Python integers, each result beyond 64 bits NULL, as Spark's `try_` arithmetic gives (overflows are rare,
    so only a file that holds one pays for the slow path)."""
    try:
        return checked(*values)
    except pa.ArrowInvalid:
        rows = max((len(v) for v in values if not isinstance(v, pa.Scalar)), default=1)
        columns = [[v.as_py()] * rows if isinstance(v, pa.Scalar) else v.to_pylist() for v in values]
        results = [None if None in row else in_bigint(exact(*row)) for row in zip(*columns, strict=True)]
        return pa.array(results, pa.int64())


def _may_be_nan(expr: ast.Expr) -> bool:
    """Whether a value of `expr` may be NaN: events hold none, so only arithmetic (of infinities) and the square
    root of a number below zero make one."""
    return any((isinstance(node, ast.Binary) and node.op in ARITHMETIC) or
               (isinstance(node, ast.Call) and node.name == "sqrt") for node in walk(expr))


def _nan(value: Value) -> Value:
    """Whether each value is NaN (NULL stays NULL); never, for a value that is no double."""
    return pc.is_nan(value) if pa.types.is_floating(value.type) else pa.scalar(False)


def _compared(op: str, left: Value, right: Value) -> Value:
    """`left op right` as Spark compares, NaN above every number and equal to itself."""
    ieee = _COMPARE[op](left, right)
    if not (pa.types.is_floating(left.type) or pa.types.is_floating(right.type)):
        return ieee
    left_nan, right_nan = _nan(left), _nan(right)
    return pc.if_else(pc.or_(left_nan, right_nan), _NAN_ORDER[op](left_nan, right_nan), ieee)


def _ieee(op: str, left: Value, right: Value) -> Value:
    return _COMPARE[op](left, right)


def _comparison(expr: ast.Expr) -> Callable[[str, Value, Value], Value]:
    """How `expr` compares: as Spark orders NaN where a side may be one, else as Arrow does, which is the same."""
    return _compared if _may_be_nan(expr) else _ieee


def _nan_if_any(result: Value, *values: Value) -> Value:
    """`result`, or NaN where any of `values` is."""
    floating = [pc.fill_null(_nan(v), False) for v in values if pa.types.is_floating(v.type)]
    if not floating:
        return result
    return pc.if_else(reduce(pc.or_, floating), pa.scalar(float("nan"), result.type), result)


def _family(value: Value) -> str:
    kind = value.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return "number"
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    raise ArrowDeclinedError(f"values of type {kind}")


def _same_family(*values: Value) -> str:
    families = {_family(v) for v in values}
    if len(families) != 1:
        raise ArrowDeclinedError(f"{' and '.join(sorted(families))} mixed")
    return families.pop()


def _numbers(*values: Value) -> list[Value]:
    """The values as one numeric type (float64 if any is floating), as Spark widens them."""
    if _same_family(*values) != "number":
        raise ArrowDeclinedError("a numeric function of non-numbers")
    if any(pa.types.is_floating(v.type) for v in values):
        return [pc.cast(v, pa.float64()) for v in values]
    return [pc.cast(v, pa.int64()) for v in values]


class ArrowEvaluator(ExprVisitor):
    """Evaluates one expression over a table's columns; `names` maps a lower-case column name to the stored one."""

    prefix = "arrow"

    def __init__(self, table: pa.Table, names: Mapping[str, str]):
        self.table = table
        self.names = names

    def arrow_column(self, expr: ast.Column) -> Value:
        column = self.table.column(self.names[expr.name.lower()])
        _family(column)
        return column

    def arrow_literal(self, expr: ast.Literal) -> Value:
        value = expr.value
        if value is None:
            raise ArrowDeclinedError("a NULL literal")
        return pa.scalar(number_value(value) if isinstance(value, Decimal) else value)

    def arrow_unary(self, expr: ast.Unary) -> Value:
        operand = self(expr.operand)
        if expr.op == "NOT":
            return pc.invert(self._boolean(operand))
        return _or_null_beyond_64_bits(pc.negate_checked, operator.neg, _numbers(operand)[0])

    def arrow_binary(self, expr: ast.Binary) -> Value:
        left, right = self(expr.left), self(expr.right)
        if expr.op in ("AND", "OR"):
            kleene = pc.and_kleene if expr.op == "AND" else pc.or_kleene
            return kleene(self._boolean(left), self._boolean(right))
        if expr.op in _COMPARE:
            _same_family(left, right)
            return _comparison(expr)(expr.op, left, right)
        if expr.op in _ARITH:
            return _or_null_beyond_64_bits(*_ARITH[expr.op], *_numbers(left, right))
        if expr.op == "/":  # try_divide: a double, NULL where the divisor is zero
            dividend, divisor = (pc.cast(v, pa.float64()) for v in _numbers(left, right))
            return pc.if_else(pc.equal(divisor, 0.0), pa.scalar(None, pa.float64()), pc.divide(dividend, divisor))
        raise ArrowDeclinedError(f"the operator {expr.op}")

    def arrow_between(self, expr: ast.Between) -> Value:
        value, low, high = self(expr.operand), self(expr.low), self(expr.high)
        _same_family(value, low, high)
        compare = _comparison(expr)
        inside = pc.and_kleene(compare(">=", value, low), compare("<=", value, high))
        return pc.invert(inside) if expr.negated else inside

    def arrow_inlist(self, expr: ast.InList) -> Value:
        value = self(expr.operand)
        items = [self(item) for item in expr.items]
        _same_family(value, *items)
        compare = _comparison(expr)
        found = reduce(pc.or_kleene, (compare("=", value, item) for item in items))
        return pc.invert(found) if expr.negated else found

    def arrow_like(self, expr: ast.Like) -> Value:
        value = self(expr.operand)
        if _family(value) != "string":
            raise ArrowDeclinedError(f"LIKE on {value.type}")
        held = pc.match_like(value, str(expr.pattern.value))
        return pc.invert(held) if expr.negated else held

    def arrow_isnull(self, expr: ast.IsNull) -> Value:
        operand = self(expr.operand)
        return pc.is_valid(operand) if expr.negated else pc.is_null(operand)

    def arrow_call(self, expr: ast.Call) -> Value:
        if expr.name == "coalesce":
            args = [self(a) for a in expr.args]
            return pc.coalesce(*(_numbers(*args) if _same_family(*args) == "number" else args))
        if expr.name == "length":  # characters (code points), as Spark counts them; in 64 bits, as Spark's is cast
            text = self(expr.args[0])
            if _family(text) != "string":
                raise ArrowDeclinedError(f"length of {text.type}")
            return pc.cast(pc.utf8_length(text), pa.int64())
        rule = _NUMERIC_CALLS.get(expr.name)
        if rule is None:
            raise ArrowDeclinedError(f"the function {expr.name}")
        values = _numbers(*(self(a) for a in expr.args))
        result = rule(*values)
        return _nan_if_any(result, *values) if expr.name == "greatest" and _may_be_nan(expr) else result

    @staticmethod
    def _boolean(value: Value) -> Value:
        if _family(value) != "boolean":
            raise ArrowDeclinedError(f"a logical operator on {value.type}")
        return value


def holds(predicate: ast.Expr, table: pa.Table, names: Mapping[str, str]) -> pa.Array:
    """Per row, whether the predicate holds (a NULL counts as false), as a boolean array without NULLs."""
    value = ArrowEvaluator(table, names)(predicate)
    if _family(value) != "boolean":
        raise ArrowDeclinedError(f"a predicate of type {value.type}")
    if isinstance(value, pa.Scalar):
        value = pa.array([value.as_py()] * table.num_rows, pa.bool_())
    return pc.fill_null(value, False)


@dataclass(frozen=True)
class ArrowInput:
    """How a task turns an events file into the runs kernel's input, as `SparkQuery.prepare` does in Spark:
    keys, `time` as BIGINT (`time_name`), the predicates as bits of BIGINT words, the aggregates' inputs.

    `words` lists, per flags word, its symbols' (bit, predicate); `names` maps the lower-case names predicates
    use to stored ones; `types`, the Spark type of every stored column."""

    keys: tuple[str, ...]
    time: str
    time_name: str
    words: tuple[tuple[str, tuple[tuple[int, ast.Expr], ...]], ...]
    sources: tuple[str, ...]
    names: tuple[tuple[str, str], ...]
    types: tuple[tuple[str, str], ...]

    @property
    def columns(self) -> list[str]:
        """The stored columns a task reads: the global key (`C.GLOBAL_KEY`) is no stored column but a constant."""
        stored = (k for k in self.keys if k != C.GLOBAL_KEY)
        return list(dict.fromkeys((*stored, self.time, *self.sources, *(n for _, n in self.names))))

    def read(self, path: str) -> pa.Table:
        """The kernel's input from one Parquet file. A column the file predates (added to the table later) is
        NULL in each of its rows, as Spark reads it."""
        file = pq.ParquetFile(path)
        present = set(file.schema_arrow.names)
        table = file.read(columns=[name for name in self.columns if name in present])
        types = dict(self.types)
        for name in self.columns:
            if name not in present:
                table = table.append_column(name, pa.nulls(table.num_rows, C.arrow_type(types[name])))
        return self.prepare(table)

    def prepare(self, table: pa.Table) -> pa.Table:
        names = dict(self.names)
        out: dict[str, Value] = {key: table.column(key) if key != C.GLOBAL_KEY else pa.array(
            np.zeros(table.num_rows, dtype=np.int32)) for key in self.keys}
        out[self.time_name] = pc.cast(table.column(self.time), pa.int64(), safe=False)  # Spark's cast truncates
        for word, bits in self.words:
            flags = np.zeros(table.num_rows, dtype=np.int64)
            for bit, predicate in bits:
                flags |= holds(predicate, table, names).to_numpy(zero_copy_only=False).astype(np.int64) << bit
            out[word] = pa.array(flags)
        out.update({source: table.column(source) for source in self.sources})
        return pa.table(out)

    def check(self) -> None:
        """Raise `ArrowDeclinedError` unless every column read has a readable type and every predicate computes:
        evaluated over an empty table of the stored types, a construct this backend declines raises here."""
        types = dict(self.types)
        unreadable = [name for name in self.columns if types[name].upper() not in READABLE_TYPES]
        if types[self.time].upper() in ("BOOLEAN", "STRING"):
            unreadable.append(self.time)
        if unreadable:
            raise ArrowDeclinedError(f"columns of types Spark and pyarrow read differently: {', '.join(unreadable)}")
        empty = pa.table({name: pa.array([], C.arrow_type(types[name])) for name in self.columns})
        try:
            self.prepare(empty)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as error:
            raise ArrowDeclinedError(str(error)) from error
