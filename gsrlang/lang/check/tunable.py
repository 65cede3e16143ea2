"""Tunable numbers: `0.35 in 0.1..0.6` marks a number that `gsr tune` may move within the range.

A number may be marked only where tuning keeps the program's structure and its
meaning is a real number: an operator's numeric parameter (a gate's or
`threshold`'s `at`, a reducer's `weights`, a `map`'s scores), a cut point of
`quantize = thresholds(...)`, and an ordinal level's value (`level ok "..." =
0.5 in 0.2..0.8`: the score `normalize` gives the level). Its range must be
non-empty, hold the number, and lie within the parameter's own bounds ([0, 1]
for a Score parameter, a cut point or a level value; any reals for a weight).
Anywhere else a range after a number is an error.

`tune_key(name, index_or_label)` is how a tunable entry is named in the checked
program (`Node.tune`, the JSON form, `gsr tune`'s report): `at`, `weights[0]`,
`to[good]`, and on a criterion node `values[ok]`.
"""

from __future__ import annotations

import math

import attrs

from gsrlang.lang.check.context import Context
from gsrlang.lang.syntax import ast
from gsrlang.lang.types import fmt_number

OPERATOR_KINDS = ("transform", "reduce", "gate")


def tune_key(name: str, sub=None) -> str:
    return name if sub is None else f"{name}[{sub}]"


def _numbers(expr, name: str, pattern) -> list[tuple[str, ast.Number, object]]:
    """(key, number, its pattern) for each numeric literal of one parameter's value: the value itself for a
    number parameter, each item or entry for a list or a mapping."""
    kind = pattern.kind if pattern is not None else None
    if isinstance(expr, ast.Number) and kind in ("real", "score"):
        return [(tune_key(name), expr, pattern)]
    if isinstance(expr, ast.ListExpr) and kind == "list":
        return [(tune_key(name, i), x, pattern.element) for i, x in enumerate(expr.items) if isinstance(x, ast.Number)]
    if isinstance(expr, ast.MapExpr) and kind == "map":
        return [(tune_key(name, e.key_text), e.value, pattern.element) for e in expr.entries
                if isinstance(e.value, ast.Number)]
    return []


def _bounds(pattern) -> tuple[float, float]:
    return (pattern.lo, pattern.hi) if pattern.kind == "score" else (-math.inf, math.inf)


def _signature(ctx: Context, g):
    return ctx.catalog.operator(g.op) if g.kind in OPERATOR_KINDS and g.op else None


def _param_numbers(ctx: Context, g):
    """(key, number, its pattern) for each numeric literal of an operator node's parameters."""
    sig = _signature(ctx, g)
    for name, (expr, _) in g.params.items() if sig is not None else ():
        p = sig.param(name)
        yield from _numbers(expr, name, p.pattern if p else None)


def _range(number: ast.Number) -> tuple[float, float]:
    return float(number.tune.lo.value), float(number.tune.hi.value)


def _node_numbers(ctx: Context, g) -> list[tuple[str, ast.Number, bool]]:
    """(key, number, whether a range may be given to it) for each numeric literal of a node as written: an operator
    node's parameters, a criterion's explicit level values (`values[LEVEL]`)."""
    if g.kind == "criterion":
        return [(tune_key("values", key), v, True) for key, v in _level_values(ctx, g.id)]
    return [(key, number, p.kind in ("real", "score")) for key, number, p in _param_numbers(ctx, g)]


def node_tunables(ctx: Context, g) -> dict[str, tuple[float, float]]:
    """{key: (lo, hi)} of a node's tunable numbers, as written."""
    return {key: _range(number) for key, number, may in _node_numbers(ctx, g) if may and number.tune is not None}


def number_spans(ctx: Context, g) -> dict:
    """{key: span of the number as written} for every numeric literal of a node's parameters or level values.

    What `gsr tune` rewrites (only in the main file: `g.path` is None)."""
    return {key: number.span for key, number, _ in _node_numbers(ctx, g)} if g.path is None else {}


def _level_values(ctx: Context, name: str):
    """(level key, its value's Number) for each explicit level value of an ordinal criterion."""
    decl = ctx.decls.get(name)
    t = ctx.criterion_types.get(name)
    if decl is None or not isinstance(decl.item, ast.CriterionDecl) or t is None or t.kind != "ordinal":
        return []
    return [(b.key_text, b.value) for b in decl.item.body or () if isinstance(b, ast.Level) and b.value is not None
            and b.key_text in t.labels]


def threshold_tunables(call: ast.Call) -> tuple:
    """Per cut point of `thresholds(...)`: its (lo, hi) range, or None when it is fixed."""
    return tuple(_range(a.value) if isinstance(a.value, ast.Number) and a.value.tune is not None else None
                 for a in call.args)


def check_tunables(ctx: Context, modules: list[tuple[ast.Module, str | None]]) -> None:
    """Report every misplaced tunable number and every bad range."""
    placed: set[int] = set()
    for g in ctx.nodes.values():
        for key, number, p in _param_numbers(ctx, g):
            if number.tune is not None and p.kind in ("real", "score"):
                placed.add(id(number))
                _check_range(ctx, number, f"`{key}`", _bounds(p), g.path)
    for name, decl in ctx.decls.items():
        for key, number in _level_values(ctx, name):
            if number.tune is not None:
                placed.add(id(number))
                _check_range(ctx, number, f"the value of level `{key}`", (0.0, 1.0), decl.path)
        if isinstance(decl.item, ast.CriterionDecl):  # a value where no level takes one: GSR306 / GSR309 say so
            placed.update(id(b.value) for b in decl.item.body or () if isinstance(b, ast.Level) and b.value)
    for task in ctx.tasks.values():
        for s in task.settings:
            if s.key.name == "quantize" and isinstance(s.value, ast.Call) and s.value.op.name == "thresholds":
                for a in s.value.args:
                    if isinstance(a.value, ast.Number) and a.value.tune is not None:
                        placed.add(id(a.value))
                        _check_range(ctx, a.value, "the cut point", (0.0, 1.0), None)
    for module, path in modules:
        for number in _tunable_numbers(module):
            if id(number) not in placed:
                ctx.error("GSR320", "only an operator's numeric parameter, a `thresholds` cut point or an ordinal "
                                    "level's value can be tuned",
                          number.tune.span, "not tunable here", path=path,
                          help=f"write the number alone: `{fmt_number(number.value)}`")


def _check_range(ctx: Context, number: ast.Number, what: str, bounds: tuple[float, float], path) -> None:
    lo, hi = number.tune.lo.value, number.tune.hi.value
    span, written = number.tune.span, f"{fmt_number(lo)}..{fmt_number(hi)}"
    if not lo < hi:
        ctx.error("GSR305", f"the tuning range of {what} is empty: {written}", span, "empty range",
                  path=path, help="write the lower bound first, e.g. `0.35 in 0.1..0.6`")
    elif not lo <= number.value <= hi:
        ctx.error("GSR305", f"{what} is {fmt_number(number.value)}, outside its tuning range {written}",
                  number.span, "outside its range", path=path, help="the range must hold the starting value")
    elif lo < bounds[0] or hi > bounds[1]:
        allowed = f"[{fmt_number(bounds[0])}, {fmt_number(bounds[1])}]"
        ctx.error("GSR305", f"the tuning range of {what} leaves {allowed}", span,
                  "out of range", path=path, help=f"keep it within {allowed}")


def _tunable_numbers(root) -> list[ast.Number]:
    """Every Number with a tuning range in an AST subtree, in source order (one walk over the whole module, so
    it is a plain loop with each node class's child fields looked up once)."""
    found, stack = [], [root]
    while stack:
        obj = stack.pop()
        cls = obj.__class__
        if cls is ast.Number:
            if obj.tune is not None:
                found.append(obj)
        elif cls is tuple or cls is list:
            stack.extend(reversed(obj))
        else:
            names = _CHILD_FIELDS.get(cls)
            if names is None:
                names = _CHILD_FIELDS[cls] = tuple(reversed(
                    [f.name for f in attrs.fields(cls) if f.name != "span" and f.type not in _SCALARS])) \
                    if attrs.has(cls) else ()
            stack.extend(getattr(obj, name) for name in names)
    return found


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}  # per AST class, the fields that may hold nodes, last first
_SCALARS = frozenset({"str", "bool", "int", "float", "Union[int, float]"})  # annotations of fields that never do
