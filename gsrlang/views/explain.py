"""An item's decision path, read from its trace record: each node's value and which gates fired.

`decision_tree(record)` returns a `rich.tree.Tree` rooted at the sink: every node
shows its operator, parameters and output for the chosen candidate, criteria show
their judgment and reason, and gates say whether their trigger fired and what it
changed. A node reached twice is shown once and then referred to.
"""

from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from gsrlang.semantics.values import format_value
from gsrlang.trace import TraceView

__all__ = ["decision_tree"]

_SKIP_PARAMS = {"on_abstain": "fail"}


def _value(v) -> str:
    return "abstained" if v is None else format_value(v)


def _params(params: dict) -> str:
    parts = []
    for k, v in (params or {}).items():
        if isinstance(v, dict) and "enum" in v:
            v = v["enum"]
            if _SKIP_PARAMS.get(k) == v:
                continue
        elif isinstance(v, list):
            v = "[" + ", ".join(format_value(float(x)) if isinstance(x, (int, float)) and not isinstance(x, bool)
                                else str(x) for x in v) + "]"
        elif isinstance(v, dict):
            v = "{" + ", ".join(f"{a}: {format_value(float(b)) if isinstance(b, (int, float)) else b}"
                                for a, b in v.items()) + "}"
        elif isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (int, float)):
            v = format_value(float(v))
        parts.append(f"{k}: {v}")
    return ", ".join(parts)


def decision_tree(record: dict, candidate: int = 0) -> Tree:
    """The decision path of one trace record for candidate number `candidate` (0 = A)."""
    view = TraceView.of_record(record)
    nodes = view.nodes
    cands = (record.get("item") or {}).get("candidates") or ["A"]
    cid = cands[candidate] if candidate < len(cands) else "?"
    result = record.get("result") or {}
    head = Text()
    head.append(f"item {(record.get('item') or {}).get('id')}", style="bold")
    if len(cands) > 1:
        head.append(f", candidate {cid}")
    if result.get("mode") == "pointwise":
        head.append(f": score {result.get('score')}", style="bold green" if result.get("status") == "ok" else "red")
        if result.get("raw") is not None:
            head.append(f" (raw {format_value(float(result['raw']))}")
            if result.get("label") is not None:
                head.append(f", human {format_value(float(result['label']))}")
            head.append(")")
    else:
        head.append(f": winner {result.get('winner')}", style="bold green" if result.get("status") == "ok" else "red")
        if result.get("label") is not None:
            head.append(f" (human: {result['label']})")
    if result.get("status") != "ok":
        head.append(f"  [{result.get('status')}: {result.get('reason')}]", style="red")
    tree = Tree(head)
    sink = (record.get("program") or {}).get("sink")
    if sink not in nodes and nodes:
        sink = list(nodes)[-1]
    if sink in nodes:
        _add(tree, view, sink, candidate, set())
    return tree


def _out(node: dict, c: int):
    out = node.get("output")
    if out is None:
        return "not computed"
    return out[c] if c < len(out) else None


def _label(node: dict, c: int, view: TraceView) -> Text:
    kind = node.get("kind")
    v = _out(node, c)
    shown = v if isinstance(v, str) and v == "not computed" else _value(v)
    t = Text()
    if kind == "criterion":
        t.append(node["id"], style="bold cyan")
        t.append(f": {node.get('type')} = ")
        judgments = node.get("judgments") or []
        j = judgments[c] if c < len(judgments) else {}
        if j.get("status") == "invalid":
            t.append("invalid", style="bold red")
        else:
            t.append(shown, style="bold")
        t.append(f"   {node.get('procedure', '')}", style="dim")
        if j.get("reason"):
            t.append(f"  — {j['reason']}", style="italic")
        return t
    if kind == "const":
        t.append(f"constant {_value(node.get('value'))}")
        return t
    name = node["id"]
    anonymous = "." in name or "[" in name
    params = _params(node.get("params"))
    if not anonymous:
        t.append(name, style="bold")
        t.append(" = ")
    t.append(node.get("op", "?"), style="magenta")
    t.append(f"({params})" if params else "()")
    t.append(" = ")
    t.append(shown, style="bold")
    if kind == "gate":
        trig = view.trigger(name)
        if view.changed(name, c):
            t.append(f"   FIRED: {_value(view.value(view.source(name, 'base'), c))} → {_value(v)}",
                     style="bold yellow")
        elif view.fired(name, c):
            t.append("   fired, no change", style="yellow")
        elif c < len(trig) and trig[c] is False:
            t.append("   not fired", style="dim")
    return t


def _add(parent: Tree, view: TraceView, node_id: str, c: int, seen: set) -> None:
    nodes = view.nodes
    node = nodes[node_id]
    if node_id in seen and node.get("kind") != "criterion":
        parent.add(Text(f"{node_id} (shown above) = {_value(_out(node, c))}", style="dim"))
        return
    seen.add(node_id)
    branch = parent.add(_label(node, c, view))
    for port, sources in (node.get("inputs") or {}).items():
        for src in sources:
            if src in nodes:
                _add(branch, view, src, c, seen)
