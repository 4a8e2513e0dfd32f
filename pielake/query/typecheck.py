"""Type families of query expressions, checked against the stream's column types before anything runs.

Spark compares, adds and calls functions on values of one kind; given two kinds it casts one of them, or with
ANSI SQL (Spark 4's default) fails the job at the first value that does not cast, deep inside a stage. So a query
over a stream whose types are known is checked here first, and a mix is an error naming its place:

- families: number (integers, floating, DECIMAL), string, boolean, time (TIMESTAMP), date (DATE); NULL fits any;
- a comparison, BETWEEN and IN take one family, a time and a date compare with each other, and either with a time
  written in the query as text (`pielake.query.time_fields`); text read from a column is never cast to a time,
  since one value Spark cannot cast would stop the run;
- `least`, `greatest` and `coalesce` take one family;
- arithmetic, `abs` and `sqrt` take numbers, `lower`, `upper`, `length` and LIKE text, AND, OR and NOT conditions;
- `hour`, `minute`, `dayofweek` and `month` take a time or a date (and a zone's name, text) and give a number;
- a predicate is a condition; in RETURN, `avg` and `sum` take numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal

from pielake.query import ast
from pielake.query.printer import expr_text
from pielake.query.time_fields import TIME_FIELDS, TIME_TEXT_FORMS, written_time
from pielake.query.tokens import Span
from pielake.query.visitor import ExprVisitor
from pielake.semantics.relations import ENDPOINTS

NUMBER, STRING, BOOLEAN, TIME, DATE, NULL = "number", "string", "boolean", "time", "date", "NULL"
_TIMES = frozenset({TIME, DATE})
UNKNOWN = "unknown"  # a column the stream does not have: reported on its own, not again as a mix
_NUMBER_TYPES = ("BIGINT", "LONG", "INT", "INTEGER", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "REAL", "DECIMAL")
ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})  # the operators that compute a number
_LOGIC = frozenset({"AND", "OR"})
_ONE_FAMILY = frozenset({"least", "greatest", "coalesce"})

Report = Callable[[str, Span, str], None]  # message, place, suggestion
# A time is an instant, compared as it is; what is computed from two of them is a situation's length.
TIME_ARITHMETIC_HINT = ("A time is compared as it is; a situation S's length is duration(S) in RETURN (S.te - S.ts, "
                        "in the stream's time unit).")


def family(spark_type: str) -> str:
    """The family of a Spark SQL type name."""
    base = spark_type.upper().split("(", 1)[0]
    if base in _NUMBER_TYPES:
        return NUMBER
    if base == "TIMESTAMP":
        return TIME
    if base == "DATE":
        return DATE
    return {"STRING": STRING, "BOOLEAN": BOOLEAN}.get(base, UNKNOWN)


def _known(families: list[str]) -> set[str]:
    return {f for f in families if f not in (NULL, UNKNOWN)}


class TypeChecker(ExprVisitor):
    """The family of an expression; every mix it meets goes to `report`. `column` gives a column's family
    (UNKNOWN where it has none) and `call` that of a situation call in RETURN."""

    prefix = "family_of"

    def __init__(self, column: Callable[[ast.Column], str], report: Report,
                 call: Callable[[ast.Call], str] | None = None):
        self.column = column
        self.report = report
        self.call = call

    def expect(self, expr: ast.Expr, wanted: str, role: str) -> None:
        found = self(expr)
        if found not in (wanted, NULL, UNKNOWN) and not (wanted == TIME and found == DATE):
            fix = TIME_ARITHMETIC_HINT if found in _TIMES and wanted == NUMBER else \
                f"Give it a {wanted}, or declare the column's type in the stream's schema."
            self.report(f"{role} takes a {wanted}, and {expr_text(expr)} is a {found}", expr.span, fix)

    def same(self, exprs: tuple[ast.Expr, ...], node: ast.Expr, role: str) -> str:
        """The one family of `exprs`, as `least`, `greatest` and `coalesce` take them."""
        return self.one_family(exprs, [self(e) for e in exprs], node, role)

    def one_family(self, exprs: tuple[ast.Expr, ...], families: list[str], node: ast.Expr, role: str) -> str:
        if len(_known(families)) > 1:
            shown = " and ".join(f"{expr_text(e)} ({f})" for e, f in zip(exprs, families, strict=True)
                                 if f not in (NULL, UNKNOWN))
            self.report(f"{role} mixes {shown}", node.span,
                        "Compare values of one kind: a number with numbers, text with text ('x').")
            return UNKNOWN
        return next((f for f in families if f not in (NULL, UNKNOWN)), NULL)

    def compared(self, exprs: tuple[ast.Expr, ...], node: ast.Expr, role: str) -> None:
        """Values a comparison, BETWEEN or IN compares: of one family, or times and dates with each other and
        with times written in the query."""
        families = [self(e) for e in exprs]
        known = _known(families)
        if not known & _TIMES or not known <= {*_TIMES, STRING}:
            self.one_family(exprs, families, node, role)
            return
        for expr, found in zip(exprs, families, strict=True):
            if found == STRING:
                self.check_written_time(expr)

    def check_written_time(self, expr: ast.Expr) -> None:
        """Text compared with a time: a literal in one of the forms Spark and the reference read alike."""
        if not (isinstance(expr, ast.Literal) and isinstance(expr.value, str)):
            self.report(f"{expr_text(expr)} is text, and a time is compared with times", expr.span,
                        f"Write the time in the query, as {TIME_TEXT_FORMS}; or declare the column a TIMESTAMP in "
                        "the stream's schema, so that its text is read as times when events are ingested.")
        elif written_time(expr.value) is None:
            self.report(f"{expr_text(expr)} is not a time as a query writes one", expr.span,
                        f"Write {TIME_TEXT_FORMS}.")

    def family_of_column(self, expr: ast.Column) -> str:
        return self.column(expr)

    def family_of_literal(self, expr: ast.Literal) -> str:
        value = expr.value
        if value is None:
            return NULL
        if isinstance(value, bool):
            return BOOLEAN
        return NUMBER if isinstance(value, Decimal) else STRING

    def family_of_unary(self, expr: ast.Unary) -> str:
        if expr.op == "NOT":
            self.expect(expr.operand, BOOLEAN, "NOT")
            return BOOLEAN
        self.expect(expr.operand, NUMBER, "'-'")
        return NUMBER

    def family_of_binary(self, expr: ast.Binary) -> str:
        if expr.op in _LOGIC:
            self.expect(expr.left, BOOLEAN, expr.op)
            self.expect(expr.right, BOOLEAN, expr.op)
            return BOOLEAN
        if expr.op in ARITHMETIC:
            self.expect(expr.left, NUMBER, f"'{expr.op}'")
            self.expect(expr.right, NUMBER, f"'{expr.op}'")
            return NUMBER
        self.compared((expr.left, expr.right), expr, "the comparison")
        return BOOLEAN

    def family_of_between(self, expr: ast.Between) -> str:
        self.compared((expr.operand, expr.low, expr.high), expr, "BETWEEN")
        return BOOLEAN

    def family_of_inlist(self, expr: ast.InList) -> str:
        self.compared((expr.operand, *expr.items), expr, "IN")
        return BOOLEAN

    def family_of_like(self, expr: ast.Like) -> str:
        self.expect(expr.operand, STRING, "LIKE")
        return BOOLEAN

    def family_of_isnull(self, expr: ast.IsNull) -> str:
        self(expr.operand)
        return BOOLEAN

    def family_of_call(self, expr: ast.Call) -> str:
        if expr.name in ("abs", "sqrt"):
            self.expect(expr.args[0], NUMBER, f"{expr.name}()")
            return NUMBER
        if expr.name in ("lower", "upper"):
            self.expect(expr.args[0], STRING, f"{expr.name}()")
            return STRING
        if expr.name == "length":
            self.expect(expr.args[0], STRING, "length()")
            return NUMBER
        if expr.name in TIME_FIELDS:
            self.expect(expr.args[0], TIME, f"{expr.name}()")
            return NUMBER
        if expr.name in _ONE_FAMILY:
            return self.same(expr.args, expr, f"{expr.name}()")
        return self.call(expr) if self.call is not None else UNKNOWN


def check_predicate(predicate: ast.Expr, columns: Mapping[str, str], report: Report) -> None:
    """A predicate over columns of the given Spark types (lower-case names) is a condition of one family each."""
    checker = TypeChecker(lambda c: family(columns.get(c.name.lower(), "?")), report)
    checker.expect(predicate, BOOLEAN, "a predicate")


def check_return(expr: ast.Expr, column_type: Callable[[ast.Column], str], time: str, symbols: Mapping[str, str],
                 report: Report) -> None:
    """A RETURN expression: `S.ts`, `S.te` are times of the streams' family `time`; `first`, `last`, `min` and
    `max` have their column's family, `avg` and `sum` take numbers, `count` and `duration` are numbers.
    `column_type` gives the Spark type of a column RETURN reads (`S.col` of S's stream, a bare key column),
    "?" where unknown; `symbols`: the lower-case symbol names."""
    def column(ref: ast.Column) -> str:
        endpoint = ref.qualifier is not None and ref.qualifier.lower() in symbols and ref.name.lower() in ENDPOINTS
        return time if endpoint else family(column_type(ref))

    def call(ref: ast.Call) -> str:
        if ref.name in ("count", "duration"):
            return NUMBER
        if ref.name in ("avg", "sum"):
            checker.expect(ref.args[0], NUMBER, f"{ref.name}()")
            return NUMBER
        return checker(ref.args[0])

    checker = TypeChecker(column, report, call)
    checker(expr)
