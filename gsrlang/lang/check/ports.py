"""Build the graph: every call becomes an operator node, its arguments bound to named ports and parameters.

Reports unknown operators and names, unknown, missing and repeated ports and
parameters, and arity violations (an empty list port, a list where one value goes,
a `per` parameter whose length differs from its port's slots).
"""

from __future__ import annotations

from gsrlang.lang.catalog import OperatorSig
from gsrlang.lang.check.context import Context, Decl, GNode, declared_here, did_you_mean, names_in
from gsrlang.lang.diagnostics import Fix
from gsrlang.lang.syntax import ast

SINK_ID = "sink"


def build_graph(ctx: Context) -> None:
    for name, decl in ctx.decls.items():
        if isinstance(decl.item, ast.CriterionDecl):
            ctx.nodes[name] = GNode(name, "criterion", decl.item.name.span, decl.path, True)
    for name, decl in ctx.decls.items():
        if isinstance(decl.item, ast.NodeDecl):
            value = decl.item.value
            if isinstance(value, ast.Ref):
                ctx.aliases[name] = value.name.name  # `node x = y` names y's value again
                if value.name.name not in ctx.decls:
                    _unknown_name(ctx, value, decl.path)
                continue
            _expr_node(ctx, value, name, decl.path, named=True)
    for extra in ctx.sinks[1:]:
        ctx.mentioned.update(names_in(extra.value))  # reported as a second sink, not as unused names
    for sink in ctx.sinks[:1]:
        if isinstance(sink.value, ast.Ref):
            target = sink.value.name.name
            if target not in ctx.decls:
                _unknown_name(ctx, sink.value, None)
            else:
                ctx.sink_id = resolve_alias(ctx, target)
        else:
            sid = SINK_ID if SINK_ID not in ctx.decls else "(sink)"
            if _expr_node(ctx, sink.value, sid, None, named=False):
                ctx.sink_id = sid


def resolve_alias(ctx: Context, name: str) -> str:
    """The node an alias names, through chains of aliases (memoized: a chain is walked once, not once per use)."""
    roots = ctx.alias_roots
    if name not in ctx.aliases or name in roots:
        return roots.get(name, name)
    walked, seen, cur = [], set(), name
    while cur in ctx.aliases and cur not in seen:
        if cur in roots:
            cur = roots[cur]
            break
        seen.add(cur)
        walked.append(cur)
        cur = ctx.aliases[cur]
    if cur not in seen:  # on an alias cycle there is no root to remember (the cycle is reported)
        roots.update(dict.fromkeys(walked, cur))
    return cur


def _unknown_name(ctx: Context, ref: ast.Ref, path) -> None:
    if ctx.import_failed:
        return  # the name may come from the import that failed; that error is the one to fix
    name = ref.name.name
    help_, fixes = _rename(name, ctx.decls, ref.name.span)
    if not help_ and name in ctx.catalog.operators:
        help_ = f"`{name}` is an operator: call it, e.g. `{name}(...)`"
    ctx.error("GSR101", f"unknown name `{name}`", ref.name.span, "not declared", path=path, help=help_,
              fixes=fixes)


def _rename(name: str, candidates, span) -> tuple[str | None, tuple]:
    """"did you mean `x`?" and the fix renaming `name` to x, the closest candidate; (None, ()) when none is close."""
    close = did_you_mean(name, candidates)
    return (f"did you mean `{close}`?", (Fix(f"rename to `{close}`", span, close),)) if close else (None, ())


def _expr_node(ctx: Context, expr, node_id: str, path, named: bool) -> bool:
    """Create the node for a declaration's or argument's expression. False if it could not be built."""
    if isinstance(expr, ast.Call):
        return _call_node(ctx, expr, node_id, path, named)
    if isinstance(expr, (ast.Number, ast.BoolLit)):
        ctx.nodes[node_id] = GNode(node_id, "const", expr.span, path, named, value=expr.value)
        return True
    ctx.error("GSR301", "this value cannot be a judgment", expr.span, "not a node", path=path,
              help="a node is an operator call, e.g. `mean(items: [a, b])`; a judgment is a criterion")
    return False


def _call_node(ctx: Context, call: ast.Call, node_id: str, path, named: bool) -> bool:
    sig = ctx.catalog.operator(call.op.name)
    node = ctx.nodes[node_id] = GNode(node_id, "transform", call.span, path, named, op=call.op.name, call=call)
    if sig is None:
        _unknown_operator(ctx, call, path)
        ctx.mentioned.update(names_in(call))  # its arguments are used; the operator is what is wrong
        node.kind = "unknown"
        return False
    node.kind = sig.kind
    given: dict[str, ast.Arg] = {}
    ports = list(sig.ports)
    ok, seen_keyword, position = True, False, 0
    misplaced = False  # a misplaced positional argument: then "missing" reports would only be noise
    for arg in call.args:
        if arg.name is None:
            if seen_keyword:
                free = [p.name for p in ports if p.name not in given]
                snippet = ctx.text_of(arg.value.span, path, max_len=40)
                hint = f"name it: `{free[0]}: {snippet}`" if free and snippet else "name it: `port: value`"
                ctx.mentioned.update(names_in(arg.value))
                ctx.error("GSR206", "a positional argument follows a named one", arg.span, "positional", path=path,
                          help=hint)
                ok, misplaced = False, True
                continue
            level = sig.params[0] if sig.params and sig.params[0].pattern.kind == "level" else None
            if position == len(ports) and level is not None:  # `at_most(q1, 2)`: the level after the port
                key = level.name
                position += 1
            elif position >= len(ports):
                ctx.mentioned.update(names_in(arg.value))  # used, just misplaced: no GSR402 cascade
                ctx.error("GSR206", f"`{sig.name}` takes {len(ports)} port{'s' if len(ports) != 1 else ''}; "
                          f"this is argument {position + 1}", arg.span, "one too many", path=path,
                          help=f"name parameters explicitly: {sig.signature()}")
                ok, misplaced = False, True
                position += 1
                continue
            else:
                key = ports[position].name
                position += 1
        else:
            seen_keyword = True
            key = arg.name.name
            if sig.port(key) is None and sig.param(key) is None:
                names = [p.name for p in sig.ports] + [p.name for p in sig.params]
                ctx.mentioned.update(names_in(arg.value))  # used under a misspelt port: no GSR402 cascade
                help_, fixes = _rename(key, names, arg.name.span)
                ctx.error("GSR201", f"`{sig.name}` has no port or parameter `{key}`", arg.name.span, "unknown",
                          path=path, help=help_ or f"signature: {sig.signature()}", fixes=fixes)
                ok, misplaced = False, True
                continue
        if key in given:
            ctx.error("GSR203", f"`{key}` is given twice", (arg.name or arg.value).span, "given again", path=path,
                      secondary=[declared_here(given[key].span, path, "first given here")],
                      help="give each port and parameter once")
            ok = False
            continue
        given[key] = arg
    for port in sig.ports:
        arg = given.get(port.name)
        if arg is not None:
            ok &= _bind_port(ctx, node, sig, port, arg, path)
        elif not misplaced:
            ctx.error("GSR202", f"`{sig.name}` is missing its `{port.name}` port", call.op.span,
                      f"needs `{port.name}: {port.pattern}`", path=path, help=f"signature: {sig.signature()}")
            ok = False
    for param in sig.params:
        arg = given.get(param.name)
        if arg is None:
            if param.required and not misplaced:
                ctx.error("GSR202", f"`{sig.name}` is missing its `{param.name}` parameter", call.op.span,
                          f"needs `{param.name}: {param.pattern}`", path=path, help=f"signature: {sig.signature()}")
                ok = False
            continue
        node.params[param.name] = (arg.value, arg.span)
        if param.per and isinstance(arg.value, ast.ListExpr):
            port_arg = given.get(param.per)
            if port_arg is not None and isinstance(port_arg.value, ast.ListExpr):
                n_slots, n_values = len(port_arg.value.items), len(arg.value.items)
                if n_slots != n_values:
                    ctx.error("GSR205", f"`{param.name}` has {n_values} entr{'y' if n_values == 1 else 'ies'} but "
                              f"`{param.per}` has {n_slots} slot{'s' if n_slots != 1 else ''}", arg.value.span,
                              f"{n_values} here", path=path,
                              secondary=[declared_here(port_arg.value.span, path, f"{n_slots} slots here")],
                              help=f"give one `{param.name}` entry per slot of `{param.per}`, in the same order")
                    ok = False
    return ok


def _bind_port(ctx: Context, node: GNode, sig: OperatorSig, port, arg: ast.Arg, path) -> bool:
    value = arg.value
    if port.is_list:
        if not isinstance(value, ast.ListExpr):
            ctx.error("GSR207", f"port `{port.name}` takes a list of slots", value.span, "one value",
                      path=path, help=f"write `{port.name}: [...]`")
            return False
        if not value.items:
            ctx.error("GSR204", f"port `{port.name}` of `{sig.name}` has no slots", value.span, "empty list",
                      path=path, help="give it at least one input")
            return False
        ok = True
        for slot, item in enumerate(value.items):
            ok &= _input(ctx, node, port.name, slot, item, f"{node.id}.{port.name}[{slot}]", path)
        return ok
    if isinstance(value, ast.ListExpr):
        ctx.error("GSR207", f"port `{port.name}` takes one value, not a list", value.span, "a list",
                  path=path, help="combine the values with a reducer first, e.g. `mean(items: [...])`")
        return False
    return _input(ctx, node, port.name, None, value, f"{node.id}.{port.name}", path)


def _input(ctx: Context, node: GNode, port: str, slot, value, child_id: str, path) -> bool:
    if isinstance(value, ast.Ref):
        name = value.name.name
        if name not in ctx.decls:
            if name in ctx.catalog.operators:
                ctx.error("GSR101", f"`{name}` is an operator, not a value", value.span, "not called", path=path,
                          help=f"call it: `{name}(...)`")
            else:
                _unknown_name(ctx, value, path)
            return False
        node.inputs.append((port, slot, name, value.span))
        return True
    if isinstance(value, ast.Call):
        ok = _call_node(ctx, value, child_id, path, named=False)
        node.inputs.append((port, slot, child_id, value.span))  # an input even when its call did not check
        return ok
    if isinstance(value, (ast.Number, ast.BoolLit)):
        ctx.nodes[child_id] = GNode(child_id, "const", value.span, path, False, value=value.value)
        node.inputs.append((port, slot, child_id, value.span))
        return True
    ctx.error("GSR301", f"port `{port}` takes a judgment, not a {type(value).__name__.lower().replace('expr', '')}",
              value.span, "not a judgment", path=path,
              help="ports take criteria, nodes or operator calls; literal settings are parameters")
    return False


def _unknown_operator(ctx: Context, call: ast.Call, path) -> None:
    name = call.op.name
    help_, fixes = _rename(name, ctx.catalog.operators, call.op.span)
    if help_ is None and name in ctx.catalog.rules:
        help_ = f"rules are criterion procedures: `criterion NAME: Bool = rule.{name}(...)`"
    elif help_ is None and name in ctx.decls:
        help_ = f"`{name}` is declared in this program; refer to it by name, without `(...)`"
    ctx.error("GSR102", f"unknown operator `{name}`", call.op.span, "not in the catalogue", path=path,
              help=help_ or "operators: " + ", ".join(sorted(ctx.catalog.operators)), fixes=fixes)


__all__ = ["build_graph", "resolve_alias", "Decl", "SINK_ID"]
