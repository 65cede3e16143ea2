"""Warnings: programs that are valid but probably not what the author meant."""

from __future__ import annotations

from gsrlang.lang.check.context import Context
from gsrlang.lang.check.cycles import edges_of
from gsrlang.lang.check.ports import resolve_alias


def check_lints(ctx: Context, reach: set[str]) -> None:
    constant = _constant_nodes(ctx)
    for node_id in ctx.order:
        node = ctx.nodes[node_id]
        if node_id not in reach or node.kind not in ("reduce", "gate") or node.type is None:
            continue
        if node.kind == "reduce" and "on_abstain" in node.params:
            sources = [ctx.nodes.get(resolve_alias(ctx, s)) for _, _, s, _ in node.inputs]
            if all(src is not None and src.type is not None and not src.type.optional for src in sources):
                expr, span = node.params["on_abstain"]
                ctx.warn("GSR701", "`on_abstain` has no effect: no item of this reducer can abstain", span,
                         "unused parameter", path=node.path, help="remove it, or declare the criteria that may abstain as `T?`")
        weights = node.param_values.get("weights")
        if node.kind == "reduce" and isinstance(weights, list) and weights:
            span = node.params["weights"][1]
            if sum(weights) == 0 and any(w > 0 for w in weights):
                ctx.warn("GSR703", "the weights sum to zero: positive and negative weights cancel", span,
                         "sums to 0", path=node.path, help="check the signs; penalties usually weigh less than the main criteria")
            elif all(w == 0 for w in weights):
                ctx.warn("GSR703", "every weight is zero, so every item is ignored", span, "all zero", path=node.path,
                         help="give the items that count a positive weight")
        if node.kind == "gate":
            for port, slot, source, span in node.inputs:
                source = resolve_alias(ctx, source)
                if port == "trigger" and source in constant:
                    trigger = ctx.nodes[source]
                    value = trigger.value if trigger.kind == "const" else None
                    ctx.warn("GSR702", f"the trigger of `{node.op}` is a constant, so the gate "
                             f"{'always' if value else 'never'} fires" if value is not None else
                             f"the trigger of `{node.op}` does not depend on any criterion", span,
                             "constant trigger", path=node.path,
                             help="a gate's trigger should depend on a judgment of the response")


def _constant_nodes(ctx: Context) -> set[str]:
    """Nodes whose value does not depend on any criterion."""
    constant = set()
    for node_id in ctx.order:
        node = ctx.nodes[node_id]
        if node.kind == "const" or node.kind != "criterion" and node.inputs and \
                all(src in constant for src, _ in edges_of(ctx, node_id)):
            constant.add(node_id)
    return constant
