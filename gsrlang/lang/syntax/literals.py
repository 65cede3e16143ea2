"""Literal values of the language (numbers, strings, booleans, bare names, lists, maps) as Python values.

They sit in the syntax layer so that both the formatter and the catalogue (which reads
parameter defaults from the stdlib) can use them without importing each other.
"""

from __future__ import annotations

from gsrlang.lang import records
from gsrlang.lang.syntax import ast

__all__ = ["Symbol", "format_literal", "literal_value"]


@records.frozen
class Symbol:
    """A bare name used as a value in a parameter: an enum member such as `skip` or `round`."""

    name: str

    def __str__(self) -> str:
        return self.name


def literal_value(expr) -> object:
    """The Python value of a literal expression (Symbol for a bare name); raises ValueError otherwise."""
    if isinstance(expr, (ast.Number, ast.String, ast.BoolLit)):
        return expr.value
    if isinstance(expr, ast.Ref):
        return Symbol(expr.name.name)
    if isinstance(expr, ast.Range):
        return (expr.lo.value, expr.hi.value)
    if isinstance(expr, ast.ListExpr):
        return [literal_value(i) for i in expr.items]
    if isinstance(expr, ast.MapExpr):
        return {e.key_text: literal_value(e.value) for e in expr.entries}
    raise ValueError("not a literal")


def format_literal(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Symbol):
        return value.name
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_literal(v)}" for k, v in value.items()) + "}"
    return str(value)
