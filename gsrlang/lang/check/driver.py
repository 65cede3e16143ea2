"""The checker's driver: `analyze(text)` runs the parser and every pass in a fixed order.

One entry point for the CLI, the LLM compiler's repair loop and the language server:
it returns the checked `Program` (None when there are errors) and every diagnostic,
sorted by position. It never raises on a user's mistake.
"""

from __future__ import annotations

import re
from pathlib import Path

from gsrlang.lang import records
from gsrlang.lang.catalog import Catalog, default_catalog
from gsrlang.lang.check import criteria, cycles, declarations, imports, lints, ports, sink, tunable, typecheck
from gsrlang.lang.check.context import Context
from gsrlang.lang.check.ports import resolve_alias
from gsrlang.lang.diagnostics import Diagnostic, has_errors
from gsrlang.lang.diagnostics.core import sort_key
from gsrlang.lang.program import CheckedProgram, Input, Node
from gsrlang.lang.span import Span
from gsrlang.lang.syntax import ast
from gsrlang.lang.syntax.parser import decode_source, gc_paused, lossy_text, parse

_CASCADES_OF_SYNTAX_ERRORS = frozenset({"GSR101", "GSR402", "GSR501", "GSR504", "GSR701", "GSR702", "GSR703", "GSR704"})


@records.frozen
class Analysis:
    program: CheckedProgram | None
    diagnostics: tuple[Diagnostic, ...]
    module: ast.Module | None = None
    text: str | None = None

    @property
    def ok(self) -> bool:
        return self.program is not None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)


def analyze(text: str, path: str | Path | None = None, catalog: Catalog | None = None) -> Analysis:
    """Parse and check a program's text. `path` resolves imports and names the program."""
    with gc_paused():
        return _analyze(text, path, catalog)


def _analyze(text: str, path, catalog: Catalog | None) -> Analysis:
    path = str(path) if path is not None else None
    parsed = parse(text)
    ctx = Context(catalog or default_catalog(), source_text=text, file_end=len(text.rstrip()))
    if parsed.diagnostics:
        # Check what did parse, so a half-typed line does not hide the rest of the file's problems; leave out
        # what the broken declarations may cause (their names, their uses, a sink or task inside them).
        check_module(ctx, parsed.module, path)
        semantic = [d for d in ctx.diagnostics if d.code not in _CASCADES_OF_SYNTAX_ERRORS]
        return Analysis(None, tuple(sorted([*parsed.diagnostics, *semantic], key=sort_key)), parsed.module, text)
    program = check_module(ctx, parsed.module, path)
    _bidi_warnings(ctx, text)
    diagnostics = tuple(sorted(ctx.diagnostics, key=sort_key))
    return Analysis(program if not has_errors(diagnostics) else None, diagnostics, parsed.module, text)


def analyze_file(path: str | Path, catalog: Catalog | None = None) -> Analysis:
    """Read a file (bytes: invalid UTF-8 and binary content become diagnostics) and analyze it.

    Raises OSError when the file cannot be read: that is the caller's to report.
    """
    data = Path(path).read_bytes()
    text, problem = decode_source(data)
    if problem:
        shown = None if b"\x00" in data[:8192] else lossy_text(data)  # no snippet of a binary file
        return Analysis(None, (problem,), None, shown)
    return analyze(text, path, catalog)


def check_module(ctx: Context, module: ast.Module, path: str | None) -> CheckedProgram | None:
    imported = imports.resolve_imports(ctx, module, path)
    declarations.collect(ctx, [(module, None), *imported])
    is_fragment = ctx.header is not None and ctx.header.kind == "fragment"
    if not is_fragment:
        sink.check_sink_count(ctx)
    criteria.check_criteria(ctx)
    ports.build_graph(ctx)
    acyclic = cycles.check_cycles(ctx)
    typecheck.infer_types(ctx)  # nodes on a cycle get no type, and nothing downstream of them is reported
    tunable.check_tunables(ctx, [(module, None), *imported])
    if is_fragment:
        lints.check_lints(ctx, set(ctx.nodes))
        return None
    sink.check_sink_type(ctx)
    readout = sink.check_readout(ctx)
    reach = sink.check_reachability(ctx, ctx.on_cycle)
    lints.check_lints(ctx, reach)
    if not acyclic or has_errors(ctx.diagnostics) or ctx.sink_id is None:
        return None
    nodes = tuple(_program_node(ctx, nid) for nid in ctx.order if nid in reach)
    header = ctx.header
    name = header.name.name if header else (re.sub(r"\W", "_", Path(path).stem) if path else "rubric")
    if name and name[0].isdigit():
        name = "_" + name
    description = header.description.value if header and header.description else ""
    return CheckedProgram(name, description, nodes, ctx.sink_id, readout, path=path)


def _program_node(ctx: Context, node_id: str) -> Node:
    g = ctx.nodes[node_id]
    inputs = tuple(Input(port, resolve_alias(ctx, source), slot) for port, slot, source, _ in g.inputs)
    params = {}
    if g.kind in ("transform", "reduce", "gate"):  # every parameter, defaults filled in, in signature order
        params = {p.name: g.param_values.get(p.name, p.default) for p in ctx.catalog.operator(g.op).params}
    value = g.value if g.kind == "const" else None
    return Node(node_id, g.kind, g.type, g.op, params, inputs, g.criterion, value, g.named, g.span, g.path,
                tune=tunable.node_tunables(ctx, g), number_spans=tunable.number_spans(ctx, g))


def _bidi_warnings(ctx: Context, text: str) -> None:
    """GSR705 for each line holding a bidirectional control (Trojan Source; rustc warns alike): they can
    only be in strings and comments (anywhere else the lexer refuses them)."""
    if text.isascii():
        return
    from gsrlang.files.printable import BIDI_CONTROLS, printable

    lines: dict[int, list[int]] = {}  # line start -> offsets of the controls on it
    for m in re.finditer("[" + "".join(sorted(BIDI_CONTROLS)) + "]", text):
        lines.setdefault(text.rfind("\n", 0, m.start()) + 1, []).append(m.start())
    for offsets in lines.values():
        names = ", ".join(dict.fromkeys(printable(text[i]) for i in offsets))
        n = len(offsets)
        ctx.warn("GSR705", f"this line holds {n} bidirectional control character{'s' if n != 1 else ''} ({names}): "
                 "it may be displayed otherwise than it reads", Span(offsets[0], offsets[0] + 1),
                 "reorders how the line is shown",
                 help="remove it (Trojan Source: what an editor shows is not what the file says)")
