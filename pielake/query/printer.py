"""AST -> canonical query text. Parsing the printed text gives back an equal AST (tested on fixtures).

One `<node>_text` function per node type, dispatched by name as sqlglot's generator does; an unknown node
raises rather than printing something wrong.
"""

from __future__ import annotations

from decimal import Decimal

from pielake.errors import CompileError
from pielake.query import ast
from pielake.query.parser import SPACED_UNITS

_ATOMS = (ast.Column, ast.Literal, ast.Call)


def expr_text(expr: ast.Expr) -> str:
    printer = globals().get(f"_{type(expr).__name__.lower()}_text")
    if printer is None:
        raise CompileError(f"no printer for {type(expr).__name__}")
    return printer(expr)


def _operand(expr: ast.Expr) -> str:
    text = expr_text(expr)
    return text if isinstance(expr, _ATOMS) else f"({text})"


def _column_text(e: ast.Column) -> str:
    return f"{e.qualifier}.{e.name}" if e.qualifier else e.name


def _number(value: Decimal) -> str:
    return format(value, "f")


def _literal_text(e: ast.Literal) -> str:
    if e.value is None:
        return "NULL"
    if isinstance(e.value, bool):
        return "TRUE" if e.value else "FALSE"
    if isinstance(e.value, str):
        return "'" + e.value.replace("'", "''") + "'"
    if e.unit is None:
        return _number(e.value)
    spaced = e.unit.lower() in SPACED_UNITS
    return _number(e.value) + (" " if spaced else "") + e.unit


def _unary_text(e: ast.Unary) -> str:
    return f"NOT {_operand(e.operand)}" if e.op == "NOT" else f"-{_operand(e.operand)}"


def _binary_text(e: ast.Binary) -> str:
    return f"{_operand(e.left)} {e.op} {_operand(e.right)}"


def _between_text(e: ast.Between) -> str:
    neg = "NOT " if e.negated else ""
    return f"{_operand(e.operand)} {neg}BETWEEN {_operand(e.low)} AND {_operand(e.high)}"


def _inlist_text(e: ast.InList) -> str:
    neg = "NOT " if e.negated else ""
    return f"{_operand(e.operand)} {neg}IN ({', '.join(expr_text(i) for i in e.items)})"


def _like_text(e: ast.Like) -> str:
    return f"{_operand(e.operand)} {'NOT ' if e.negated else ''}LIKE {expr_text(e.pattern)}"


def _isnull_text(e: ast.IsNull) -> str:
    return f"{_operand(e.operand)} IS {'NOT ' if e.negated else ''}NULL"


def _call_text(e: ast.Call) -> str:
    return f"{e.name}({', '.join(expr_text(a) for a in e.args)})"


def duration_text(d: ast.Duration) -> str:
    return f"{_number(d.amount)} {d.unit}"


def bound_text(b: ast.DurationConstraint) -> str:
    if b.low and b.high:
        return f"BETWEEN {duration_text(b.low)} AND {duration_text(b.high)}"
    if b.low:
        return f"AT LEAST {duration_text(b.low)}"
    assert b.high is not None
    return f"AT MOST {duration_text(b.high)}"


def _alternative_text(a: ast.Alternative) -> str:
    return f"{a.left.text} {'; '.join(r.text for r in a.relations)} {a.right.text}"


def return_text(item: ast.ReturnItem) -> str:
    text = expr_text(item.expr)
    return text if item.alias is None else f"{text} AS {item.alias.text}"


def streams_text(streams: tuple[ast.StreamRef, ...]) -> str:
    """FROM's list as the query writes it: each stream with its alias, which its columns may be qualified by."""
    return ", ".join(s.name.text + (f" {s.alias.text}" if s.alias else "") for s in streams)


def query_text(q: ast.Query) -> str:
    """The whole query, one clause per line."""
    streams = streams_text(q.streams)
    lines = [f"FROM {streams}" + (f" PARTITION BY {', '.join(map(_column_text, q.partition_by))}"
                                 if q.partition_by else "")]
    defines = [f"{d.symbol.text} AS {expr_text(d.predicate)}" + (f" {bound_text(d.duration)}" if d.duration else "")
               for d in q.defines]
    lines.append("DEFINE " + ",\n       ".join(defines))
    constraints = ["(" + " OR ".join(_alternative_text(a) for a in c.alternatives) + ")" for c in q.pattern]
    lines.append("PATTERN " + "\n    AND ".join(constraints))
    lines.append(f"WITHIN {duration_text(q.window)}")
    if q.returns:
        lines.append("RETURN " + ",\n       ".join(return_text(r) for r in q.returns))
    return "\n".join(lines) + "\n"
