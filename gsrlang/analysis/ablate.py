"""Composition ablation: variants of a checked program, generated from its graph (`gsr ablate`).

- **bypass G**: each gate G passes its base through (its trigger is ignored);
- **mean at R**: each Score reducer R (weighted_mean, min, max, median, product)
  becomes a plain `mean` of the same items, with the same `on_abstain`;
- **drop C**: each criterion C is removed with everything that depends only on
  it: its slots leave every list port (with their weights), a gate it triggers
  is bypassed, a node left with nothing on a port is removed in turn;
- **flat**: the whole graph is replaced by the equal-weight mean of every
  criterion mapped to [0, 1] (`scale` for a Score, `normalize` for an Ordinal
  or a Bool; a Nominal has no order and is left out), abstentions skipped: the
  "weighted aggregation" baseline.

A variant keeps only the nodes that still reach the sink, so it can be replayed
over the same recorded judgments even where it leaves criteria and nodes unused.
"""

from __future__ import annotations

import attrs

from gsrlang.lang.catalog import Symbol
from gsrlang.lang.program import CheckedProgram, Input, Node
from gsrlang.lang.types import SCORE

__all__ = ["Variant", "variants"]

SCORE_REDUCERS = ("weighted_mean", "min", "max", "median", "product")


@attrs.frozen
class Variant:
    name: str
    program: CheckedProgram


def _rebuild(program: CheckedProgram, edit) -> CheckedProgram | None:
    """Apply `edit(node, alias) -> Node | str | None` in topological order.

    `edit` sees each node with its inputs already redirected through `alias`, and returns
    the node (possibly changed), the id of a node to stand for it (an alias: a bypass), or
    None to remove it. List-port slots from removed nodes are dropped (with their weights).
    Returns None when the sink is removed."""
    alias: dict[str, str] = {}
    removed: set[str] = set()
    out: list[Node] = []
    for node in program.nodes:
        inputs = []
        dropped_slots: dict[str, list[int]] = {}
        lost = False
        for inp in node.inputs:
            source = alias.get(inp.source, inp.source)
            if source in removed:
                if inp.slot is not None:
                    dropped_slots.setdefault(inp.port, []).append(inp.slot)
                elif not (node.kind == "gate" and inp.port == "trigger"):  # a gate without trigger is bypassed
                    lost = True
                continue
            inputs.append(attrs.evolve(inp, source=source))
        changed = attrs.evolve(node, inputs=tuple(inputs))
        if dropped_slots and not lost:
            changed = _drop_slots(changed, dropped_slots)
        if lost or changed is None:
            removed.add(node.id)
            continue
        result = edit(changed)
        if result is None:
            removed.add(node.id)
        elif isinstance(result, str):
            alias[node.id] = alias.get(result, result)
        else:
            out.append(result)
    sink = alias.get(program.sink, program.sink)
    if sink in removed or not any(n.id == sink for n in out):
        return None
    return _reachable(attrs.evolve(program, nodes=tuple(out), sink=sink))


def _drop_slots(node: Node, dropped: dict[str, list[int]]) -> Node | None:
    """The node without the given slots of its list ports (renumbered), or None when a list port is left empty."""
    params = dict(node.params)
    inputs = [i for i in node.inputs if i.port not in dropped]
    for port in dropped:
        kept = sorted((i for i in node.inputs if i.port == port), key=lambda i: i.slot)
        if not kept:
            return None
        inputs += [Input(port, i.source, k) for k, i in enumerate(kept)]
        if isinstance(params.get("weights"), list):
            params["weights"] = [params["weights"][i.slot] for i in kept]
    return attrs.evolve(node, inputs=tuple(inputs), params=params, tune={})


def _reachable(program: CheckedProgram) -> CheckedProgram:
    need = {program.sink}
    for node in reversed(program.nodes):
        if node.id in need:
            need.update(i.source for i in node.inputs)
    return attrs.evolve(program, nodes=tuple(n for n in program.nodes if n.id in need))


def _bypass(gate_id: str):
    def edit(node):
        return node.port_inputs("base")[0].source if node.id == gate_id else node
    return edit


def _mean_at(reducer_id: str):
    def edit(node):
        if node.id != reducer_id:
            return node
        return attrs.evolve(node, op="mean", params={"on_abstain": node.params.get("on_abstain", Symbol("fail"))},
                            tune={})
    return edit


def _gates_without_trigger(node):
    """After a drop, a gate whose trigger went is bypassed (it passes its base through)."""
    return node.port_inputs("base")[0].source if node.kind == "gate" and not node.port_inputs("trigger") else node


def flat(program: CheckedProgram) -> CheckedProgram | None:
    """The equal-weight mean of every orderable criterion, mapped to [0, 1]."""
    nodes = list(program.criteria)
    items = []
    for c in program.criteria:
        t = c.type
        if t.kind == "nominal":
            continue
        op = "scale" if t.kind == "score" else "normalize"
        nid = f"flat.items[{len(items)}]"
        nodes.append(Node(nid, "transform", SCORE.maybe(t.optional), op, {}, (Input("x", c.id),), named=False))
        items.append(nid)
    if not items:
        return None
    nodes.append(Node("flat", "reduce", SCORE, "mean", {"on_abstain": Symbol("skip")},
                      tuple(Input("items", s, k) for k, s in enumerate(items))))
    return attrs.evolve(program, name=program.name + "_flat", nodes=tuple(nodes), sink="flat")


def variants(program: CheckedProgram) -> list[Variant]:
    """Every ablation of the program that still has a sink (see the module docstring)."""
    out = []
    for node in program.nodes:
        if node.kind == "gate":
            v = _rebuild(program, _bypass(node.id))
            if v is not None:
                out.append(Variant(f"bypass {node.id} ({node.op})", v))
    for node in program.nodes:
        if node.kind == "reduce" and node.op in SCORE_REDUCERS and node.op != "mean":
            out.append(Variant(f"mean at {node.id} ({node.op})", _rebuild(program, _mean_at(node.id))))
    for node in program.criteria:
        def edit(n, cid=node.id):  # the criterion goes; a gate it alone triggered passes its base through
            return None if n.id == cid else _gates_without_trigger(n)
        v = _rebuild(program, edit)
        if v is not None:
            out.append(Variant(f"drop {node.id}", v))
    f = flat(program)
    if f is not None:
        out.append(Variant("flat mean of all criteria", f))
    return out
