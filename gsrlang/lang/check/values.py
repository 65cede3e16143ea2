"""Parameter values: literals checked against the parameter's declared type and range."""

from __future__ import annotations

from gsrlang.lang.catalog import ParamSig, Symbol, literal_value
from gsrlang.lang.check.context import Context, names_in, suggestion
from gsrlang.lang.syntax import ast
from gsrlang.lang.types import JType, Pattern

INVALID = object()


def literal_fits(t: JType, expr) -> bool:
    """Can this literal stand for a value of judgment type `t`? (`default`'s value, an example's verdict)."""
    if t.kind == "bool":
        return isinstance(expr, ast.BoolLit)
    if t.kind == "score":
        return isinstance(expr, ast.Number) and t.lo <= expr.value <= t.hi
    if t.kind in ("ordinal", "nominal"):
        return not isinstance(expr, ast.BoolLit) and _key(expr) in t.labels
    return False


def _key(expr) -> str | None:
    """The level or label a literal names (`2`, `good`, `"good"`; `true` / `false`), or None."""
    if isinstance(expr, ast.Number) and expr.is_int:
        return str(expr.value)
    if isinstance(expr, ast.Ref):
        return expr.name.name
    if isinstance(expr, ast.String):
        return expr.value
    if isinstance(expr, ast.BoolLit):
        return "true" if expr.value else "false"
    return None


def check_param_value(ctx: Context, sig: ParamSig, expr, path, bindings: dict | None, first_port=None):
    """The parameter's Python value, or INVALID after reporting why.

    first_port: the judgment type at the operator's first port, which a `Level` parameter names a level of
    (None when it did not check: then the level is not checked either)."""
    if isinstance(expr, ast.Call) or (isinstance(expr, ast.ListExpr) and any(isinstance(i, ast.Call) for i in expr.items)):
        ctx.mentioned.update(names_in(expr))
        ctx.error("GSR304", f"parameter `{sig.name}` takes a literal, not a node", expr.span, "a graph value",
                  path=path, help="parameters are fixed when the program is written; graph inputs go to ports")
        return INVALID
    p = sig.pattern
    if p.kind == "level":
        return _level(ctx, expr, path, first_port)
    if p.kind == "var":
        bound = (bindings or {}).get(p.name)
        if bound is None:
            try:
                return literal_value(expr)
            except ValueError:
                return INVALID
        if not literal_fits(bound, expr):
            ctx.error("GSR304", f"`{sig.name}` must be a value of type `{bound}`", expr.span,
                      f"not a `{bound}`", path=path, help="write " + values_of(bound))
            return INVALID
        v = literal_value(expr)
        return v.name if isinstance(v, Symbol) else (str(v) if bound.kind in ("ordinal", "nominal") else v)
    return _check(ctx, sig.name, p, expr, path)


def _level(ctx: Context, expr, path, t: JType | None):
    """A comparison's level: a level or label of `t` (`2`, `good`, `"good"`), or true / false for a Bool."""
    if t is None:
        return INVALID
    t = t.required()
    key = _key(expr)
    levels = ["true", "false"] if t.kind == "bool" else list(t.labels)
    if key not in levels:
        what = "level" if t.kind == "ordinal" else "value" if t.kind == "bool" else "label"
        close = suggestion(key, levels) if key is not None else None
        shown = f"`{key}`" if key is not None else "this"
        ctx.error("GSR312", f"{shown} is not a {what} of `{t}`", expr.span, f"no such {what}", path=path,
                  help=close or f"the {what}s are {', '.join(levels)}")
        return INVALID
    return expr.value if t.kind == "bool" else key


def values_of(t: JType) -> str:
    """What a literal of type `t` may be, in words: "`true` or `false`", "a number in [0, 1]", "one of a, b"."""
    if t.kind == "bool":
        return "`true` or `false`"
    if t.kind == "score":
        return f"a number in [{t.lo:g}, {t.hi:g}]"
    return "one of " + ", ".join(t.labels)


_FORMS = {"real": (ast.Number,), "int": (ast.Number,), "score": (ast.Number,), "string": (ast.String,),
          "bool": (ast.BoolLit,), "enum": (ast.Ref,), "list": (ast.ListExpr,), "map": (ast.MapExpr,)}
_EXAMPLE = {"real": "a number such as `0`", "int": "a whole number such as `0`", "score": "a number such as `0.5`",
            "string": 'a string such as `"N/A"`', "bool": "`true` or `false`"}


def _check(ctx: Context, name: str, p: Pattern, expr, path):
    def bad(msg, label="", help=None, code="GSR304"):
        ctx.error(code, msg, expr.span, label, path=path, help=help)
        return INVALID

    if p.kind == "union":  # the alternative the literal's form belongs to
        option = next((o for o in p.options if isinstance(expr, _FORMS.get(o.kind, ()))), None)
        if option is None:
            words = " or ".join(str(o) for o in p.options)
            return bad(f"`{name}` takes {words}", f"not {words}",
                       "write " + " or ".join(_EXAMPLE.get(o.kind, str(o)) for o in p.options))
        return _check(ctx, name, option, expr, path)
    if p.kind == "list":
        if not isinstance(expr, ast.ListExpr):
            return bad(f"`{name}` takes a list `[...]` of {p.element}", "not a list", f"write `{name}: [...]`")
        out = []
        for item in expr.items:
            v = _check(ctx, name, p.element, item, path)
            if v is INVALID:
                return INVALID
            out.append(v)
        return out
    if p.kind == "map":
        if not isinstance(expr, ast.MapExpr):
            return bad(f"`{name}` takes a mapping `{{label: value, ...}}`", "not a mapping")
        out = {}
        for e in expr.entries:
            v = _check(ctx, name, p.element, e.value, path)
            if v is INVALID:
                return INVALID
            if e.key_text in out:
                ctx.error("GSR203", f"`{e.key_text}` is mapped twice", e.key.span, path=path)
                return INVALID
            out[e.key_text] = v
        return out
    if p.kind == "enum":
        members = ctx.catalog.enums[p.name].members
        if not isinstance(expr, ast.Ref):
            return bad(f"`{name}` takes one of {', '.join(members)}", "not a policy name")
        if expr.name.name not in members:
            return bad(f"`{expr.name.name}` is not a valid `{name}`", "unknown value", code="GSR105",
                       help=suggestion(expr.name.name, members) or f"choose one of {', '.join(members)}")
        return Symbol(expr.name.name)
    if p.kind == "string":
        return expr.value if isinstance(expr, ast.String) else \
            bad(f"`{name}` takes a string", "not a string", 'write it in double quotes: "..."')
    if p.kind == "bool":
        return expr.value if isinstance(expr, ast.BoolLit) else \
            bad(f"`{name}` takes `true` or `false`", "not a Bool", "write `true` or `false`")
    if p.kind in ("real", "int", "score"):
        if not isinstance(expr, ast.Number):
            return bad(f"`{name}` takes a number", "not a number",
                       f"write a number in [{p.lo:g}, {p.hi:g}], e.g. `{name}: 0.5`" if p.kind == "score"
                       else f"write a number, e.g. `{name}: 1`")
        if p.kind == "int" and not expr.is_int:
            return bad(f"`{name}` takes a whole number", "not an integer", f"e.g. `{name}: {int(expr.value)}`")
        if p.kind == "score" and not (p.lo <= expr.value <= p.hi):
            return bad(f"`{name}` is {expr.value}, outside the score interval [{p.lo:g}, {p.hi:g}]", "out of range",
                       code="GSR305", help=f"a Score parameter lies in [{p.lo:g}, {p.hi:g}], the sink's interval")
        return expr.value
    return bad(f"`{name}` cannot take this value", "unsupported")  # pragma: no cover
