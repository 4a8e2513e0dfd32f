"""Dispatch on expression node types, shared by the Python evaluator and the Spark compiler."""

from __future__ import annotations

from typing import Any, ClassVar

from pielake.errors import CompileError
from pielake.query import ast


class ExprVisitor:
    """Calls `<prefix>_<node>` for a node (`compile_binary` for `Binary`); a node with no rule raises."""

    prefix: ClassVar[str]

    def __call__(self, expr: ast.Expr) -> Any:
        method = getattr(self, f"{self.prefix}_{type(expr).__name__.lower()}", None)
        if method is None:
            raise CompileError(f"{type(self).__name__} has no rule for {type(expr).__name__}")
        return method(expr)
