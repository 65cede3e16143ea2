"""Cycles: the graph must be acyclic. Each cycle is shown once, edge by edge; then a topological order."""

from __future__ import annotations

from itertools import groupby

from gsrlang.lang.check.context import Context
from gsrlang.lang.check.ports import resolve_alias
from gsrlang.lang.diagnostics import Label


def edges_of(ctx: Context, node_id: str):
    """(source id, argument span) for each input of a node, aliases resolved."""
    for port, slot, source, span in ctx.nodes[node_id].inputs:
        yield resolve_alias(ctx, source), span


def check_cycles(ctx: Context) -> bool:
    """Report cycles (GSR401) and set ctx.order to a topological order. False when there is a cycle."""
    nodes = ctx.nodes
    looped = _alias_cycle_members(ctx.aliases)
    for name in ctx.aliases:  # report the cycle through the first alias declared on one
        if name in looped:
            chain, cur = [name], ctx.aliases[name]
            while cur != name:
                chain.append(cur)
                cur = ctx.aliases[cur]
            decl = ctx.decls[name]
            ctx.error("GSR401", "cycle: " + " -> ".join([*chain, name]), decl.item.value.span,
                      f"`{name}` is defined by itself", path=decl.path)
            return False
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    found = False
    order: list[str] = []
    for root in nodes:
        if root in state:
            continue
        stack = [(root, iter(list(edges_of(ctx, root))))]
        path_ids = [root]
        state[root] = 1
        while stack:
            nid, it = stack[-1]
            for source, span in it:
                if source not in nodes:
                    continue
                if state.get(source) == 1:
                    _report_cycle(ctx, path_ids[path_ids.index(source):] + [source])
                    found = True
                    continue
                if source not in state:
                    state[source] = 1
                    stack.append((source, iter(list(edges_of(ctx, source)))))
                    path_ids.append(source)
                    break
            else:  # every input done: the node is
                stack.pop()
                path_ids.pop()
                state[nid] = 2
                order.append(nid)
    ctx.order = order  # inputs before the nodes that use them (a post-order of the input edges)
    return not found


def _alias_cycle_members(aliases: dict[str, str]) -> set[str]:
    """The aliases that lie on a cycle of aliases (`node a = b`, `node b = a`), in time linear in their number:
    each alias has one target, so every walk stops at a name already walked (its cycle, or an earlier walk)."""
    done: set[str] = set()
    looped: set[str] = set()
    for start in aliases:
        walk: dict[str, int] = {}  # name -> position in this walk
        cur = start
        while cur in aliases and cur not in done and cur not in walk:
            walk[cur] = len(walk)
            cur = aliases[cur]
        if cur in walk:  # this walk closed on itself: the names from `cur` on form a cycle
            looped.update(name for name, at in walk.items() if at >= walk[cur])
        done.update(walk)
    return looped


def _named(node_id: str) -> str:
    """The declared name a node belongs to (anonymous nodes live inside a named one)."""
    return node_id.split(".", 1)[0]


def _report_cycle(ctx: Context, cycle: list[str]) -> None:
    # cycle: consumer chain c0 <- c1 <- ... (c_{i+1} is an input of c_i); show it in data-flow order
    names = [name for name, _ in groupby(_named(n) for n in reversed(cycle))]  # a run of one name's nodes: once
    if names[0] != names[-1]:
        names.append(names[0])
    labels = []
    for consumer, source in zip(cycle, cycle[1:]):
        for port, slot, src, span in ctx.nodes[consumer].inputs:
            if resolve_alias(ctx, src) == source:
                labels.append(Label(span, f"`{_named(consumer)}` uses `{_named(source)}` here",
                                    ctx.nodes[consumer].path))
                break
    ctx.on_cycle.update(_named(n) for n in cycle)
    primary, *rest = labels or [Label(ctx.nodes[cycle[0]].span, "")]
    ctx.error("GSR401", "cycle: " + " -> ".join(names), primary.span, primary.message, path=primary.path,
              secondary=rest, help="an evaluation graph is acyclic: break the cycle by removing one of these uses")
