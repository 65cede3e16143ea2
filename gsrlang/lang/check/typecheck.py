"""Types: infer every node's judgment type in topological order and check each route into a port.

No silent coercions: a Bool or an Ordinal reaches a Score port only through
`normalize`, a Score[a..b] through `scale`, a Nominal through `map`. Abstention
(`T?`) passes through a TRANSFORM, is accepted by a REDUCE only when the call states
its `on_abstain` policy, and never by a GATE or the sink.
"""

from __future__ import annotations

from gsrlang.lang.check.context import Context, GNode
from gsrlang.lang.check.criteria import with_level_values
from gsrlang.lang.check.ports import resolve_alias
from gsrlang.lang.check.values import INVALID, check_param_value
from gsrlang.lang.diagnostics import Fix, Label
from gsrlang.lang.types import BOOL, SCORE, JType, Pattern, matches, substitute


def infer_types(ctx: Context) -> None:
    for node_id in ctx.order:
        node = ctx.nodes[node_id]
        if node.kind == "criterion":
            node.type = with_level_values(ctx.criterion_types.get(node_id), ctx.criterion_specs.get(node_id))
            node.criterion = ctx.criterion_specs.get(node_id)
        elif node.kind == "const":
            node.type = _const_type(ctx, node)
        elif node.kind in ("transform", "reduce", "gate"):
            node.type = _operator_type(ctx, node)


def _const_type(ctx: Context, node: GNode) -> JType | None:
    v = node.value
    if isinstance(v, bool):
        return BOOL
    if 0.0 <= v <= 1.0:
        node.value = float(v)
        return SCORE
    ctx.error("GSR305", f"constant {v} is outside the score interval [0, 1]", node.span, "out of range",
              path=node.path, help="a constant judgment is a Score in [0, 1] or a Bool")
    return None


def _operator_type(ctx: Context, node: GNode) -> JType | None:
    sig = ctx.catalog.operator(node.op)
    bindings: dict[str, JType] = {}
    ok, any_optional = True, False
    explicit_abstain = "on_abstain" in node.params
    port_types: dict[str, JType] = {}
    for port_name, slot, source, span in node.inputs:
        src = ctx.nodes.get(resolve_alias(ctx, source))
        if src is None or src.type is None:
            ok = False  # reported where it was born
            continue
        pattern = sig.port(port_name).item_pattern
        t = src.type
        port_types[port_name] = t
        if not matches(pattern, t, bindings):
            _mismatch(ctx, node, sig, port_name, pattern, t, span, bindings)
            ok = False
            continue
        if t.optional and not pattern.accepts_abstention:
            if sig.kind == "transform" or (sig.kind == "reduce" and explicit_abstain):
                any_optional = True
            else:
                _abstention(ctx, node, sig, port_name, t, span, src)
                ok = False
    # parameters (after the ports, so type variables are bound)
    values = {}
    for name, (expr, span) in node.params.items():
        value = check_param_value(ctx, sig.param(name), expr, node.path, bindings,
                                  port_types.get(sig.ports[0].name) if sig.ports else None)
        if value is INVALID:
            ok = False
        else:
            values[name] = value
    node.param_values = values
    if not ok or node.op == "map" and "to" in values and not _check_map(ctx, node, values):
        return None
    if node.op == "default" and not any(ctx.nodes[resolve_alias(ctx, s)].type.optional for _, _, s, _ in node.inputs
                                        if ctx.nodes[resolve_alias(ctx, s)].type):
        ctx.warn("GSR704", "`default` on a judgment that cannot abstain has no effect", node.span,
                 "input is never abstained", path=node.path, help="remove the `default(...)` call")
    result = substitute(sig.result, bindings)
    if result is None:  # pragma: no cover - a stdlib signature whose result is not determined by its ports
        return None
    return result.maybe(True) if sig.kind == "transform" and any_optional else result


def _check_map(ctx: Context, node: GNode, values: dict) -> bool:
    src_type = ctx.nodes[resolve_alias(ctx, node.inputs[-1][2])].type if node.inputs else None  # the last input's
    if src_type is None:
        return False
    mapping = values.get("to", {})
    expr, span = node.params["to"]
    missing = [lab for lab in src_type.labels if lab not in mapping]
    extra = [k for k in mapping if k not in src_type.labels]
    if extra:
        ctx.error("GSR308", f"`{extra[0]}` is not a label of `{src_type.required()}`", span, "unknown label",
                  path=node.path, help=f"the labels are {', '.join(src_type.labels)}")
        return False
    if missing:
        ctx.error("GSR308", f"`map` does not give a score for {', '.join(f'`{m}`' for m in missing)}", span,
                  "incomplete mapping", path=node.path, help="map every label to a score in [0, 1]")
        return False
    return True


def _mismatch(ctx: Context, node: GNode, sig, port: str, pattern: Pattern, t: JType, span, bindings) -> None:
    expected = str(bindings[pattern.name] if pattern.kind == "var" and pattern.name in bindings else pattern)
    help_, fixes = None, ()
    score_wanted = any(p.kind == "score" and not p.any_range for p in pattern.alternatives())
    text = ctx.text_of(span, node.path)
    if score_wanted and t.kind in ("bool", "ordinal"):
        help_ = "wrap it in `normalize(...)`: a level's value, true = 1, false = 0"
        fixes = (Fix("wrap in `normalize(...)`", span, f"normalize({text})", "safe"),) if text is not None else ()
    elif score_wanted and t.kind == "score":
        help_ = f"wrap it in `scale(...)` to map [{t.lo:g}, {t.hi:g}] onto [0, 1]"
        fixes = (Fix("wrap in `scale(...)`", span, f"scale({text})", "safe"),) if text is not None else ()
    elif score_wanted and t.kind == "nominal":
        help_ = "give each label a score with `map(x, to: {label: score, ...})`"
    elif pattern.kind == "ordinal" and t.kind in ("nominal", "bool"):
        help_ = f"`{sig.name}` compares ordered levels, and the labels of `{t.required()}` have no order: " \
                "test one label with `is(x, label)`"
    elif t.kind == "score" and sig.kind == "transform" and sig.result.kind == "score" and \
            any(p.kind == "ordinal" for p in pattern.alternatives()):  # normalize(Score[a..b]), map(...)
        call_text = ctx.text_of(node.span, node.path)
        if t.is_unit_score:
            help_ = f"`{t.required()}` is already a score in [0, 1]: use it without `{sig.name}(...)`"
            if text is not None and call_text is not None:
                fixes = (Fix(f"remove `{sig.name}(...)`", node.span, text, "safe"),)
        else:
            help_ = f"`{t.required()}` is a score: map [{t.lo:g}, {t.hi:g}] onto [0, 1] with `scale(...)`"
            if text is not None and call_text is not None:
                fixes = (Fix(f"use `scale(...)` instead of `{sig.name}(...)`", node.span, f"scale({text})", "safe"),)
    elif pattern.kind == "ordinal" and t.kind == "score":
        help_ = "compare a score with `threshold(x, at: ...)`" + (" after `scale(...)`" if not t.is_unit_score else "")
    elif any(p.kind == "bool" for p in pattern.alternatives()) and t.kind == "score":
        help_ = "turn a score into a Bool with `threshold(x, at: 0.5)`"
        fixes = (Fix("wrap in `threshold(...)`", span, f"threshold({text}, at: 0.5)"),) if text is not None else ()
    elif any(p.kind == "bool" for p in pattern.alternatives()) and t.kind in ("ordinal", "nominal"):
        help_ = "turn it into a Bool with `threshold(normalize(x), at: ...)`"
    ctx.error("GSR301", f"port `{port}` of `{sig.name}` expects `{expected}`, found `{t.required()}`", span,
              f"this is `{t}`", path=node.path, help=help_, fixes=fixes)


def _abstention(ctx: Context, node: GNode, sig, port: str, t: JType, span, src: GNode) -> None:
    text = ctx.text_of(span, node.path)
    secondary = []
    if src.named and src.kind == "criterion":
        secondary.append(Label(src.span, f"`{src.id}` is declared `{t}` here", src.path))
    if sig.kind == "reduce":
        ctx.error("GSR302", f"`{sig.name}` receives `{t}`, which may abstain, but states no `on_abstain` policy",
                  span, "may abstain", path=node.path, secondary=secondary,
                  help="add `on_abstain: skip` (or zero, partial, fail) to the call")
        return
    where = "the sink" if sig is None else f"port `{port}` of {sig.kind} `{sig.name}`"
    fixes = ()
    if text is not None and t.kind == "bool":
        fixes = (Fix("wrap in `default(..., value: false)`", span, f"default({text}, value: false)"),)
    ctx.error("GSR302", f"{where} accepts no abstention, but this is `{t}`", span, "may abstain",
              path=node.path, secondary=secondary,
              help="decide what an abstention means first: `default(x, value: ...)`", fixes=fixes)

