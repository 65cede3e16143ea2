"""Draw a checked program, and optionally one traced item, as a Graphviz graph.

The picture is built from `Program` alone (the checker's typed graph), so what is
drawn is what runs: one box per node, showing its name, kind, type and
parameters; operator nodes have one cell per named port and every edge enters the
cell of the port it feeds (labelled with its slot on a list port); the sink and
each readout are drawn below. A list port has one cell per slot, so each of its
edges enters a cell of its own; criteria keep their declaration order (left to
right) and slots their slot order. With a trace overlay every node also shows its
value per candidate, gates that fired are marked (those that fired without changing
their base value as "fired, no change"), abstentions are marked, and the decision
path (the inputs that actually determined the sink's value) is drawn thick.

All user text goes through `_esc` before it enters an HTML-like label: names are
identifiers, but asks, descriptions, string parameters and trace values are not.

The `graphviz` package is imported only here, and only when a graph is built, so
the rest of `gsr` starts without it. Producing DOT needs no Graphviz binary; other
formats need `dot` on PATH (`GraphvizMissing` says how to install it otherwise).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import textwrap
from pathlib import Path
from typing import Iterable

import attrs

from gsrlang.files.safeio import write_atomic
from gsrlang.lang.program import CheckedProgram, Node
from gsrlang.trace import TraceView
from gsrlang.trace.schema import TraceError

FORMATS = ("svg", "png", "pdf", "dot")

# Colours from one qualitative palette: fill, border, and the kind's glyph in the legend.
KIND_STYLE = {
    "criterion": {"fill": "#dbeafe", "border": "#1d4ed8", "rounded": True,
                  "about": "criterion: a judgment (llm, rule, human, verifier)"},
    "transform": {"fill": "#dcfce7", "border": "#15803d", "rounded": False,
                  "about": "transform: one judgment in, one out"},
    "reduce": {"fill": "#fef3c7", "border": "#b45309", "rounded": False,
               "about": "reduce: a slot-ordered list in, one out"},
    "gate": {"fill": "#fee2e2", "border": "#b91c1c", "rounded": False,
             "about": "gate: a judgment limited by a Bool trigger"},
    "sink": {"fill": "#ede9fe", "border": "#6d28d9", "rounded": True,
             "about": "sink: the program's Score, read by the readout"},
    "const": {"fill": "#f3f4f6", "border": "#6b7280", "rounded": True, "about": "constant"},
}
PATH_COLOR = "#dc2626"  # the decision path, in overlays
FIRED_COLOR = "#b91c1c"
NO_CHANGE_COLOR = "#d97706"  # a gate whose trigger held but whose value is its base's
ABSTAIN_COLOR = "#6b7280"
FONT = "Helvetica"

INSTALL_HINT = ("Graphviz's `dot` program is not installed (or not on PATH): install Graphviz "
                "(Debian/Ubuntu: `sudo apt-get install graphviz`, macOS: `brew install graphviz`, "
                "Windows: `winget install graphviz`), or write DOT with `-o graph.dot`, which needs no Graphviz")


class GraphvizMissing(Exception):
    """`dot` is needed for this output format and is not installed."""

    def __init__(self, fmt: str):
        super().__init__(f"cannot render `{fmt}`: {INSTALL_HINT}")


# ---- the trace of one item ---------------------------------------------------------------------------
ABSTAINED = object()  # a candidate's value when the node abstained


@attrs.frozen
class TraceItem:
    """What a trace recorded for one item, reduced to what the overlay draws."""

    item_id: str
    candidates: tuple[str, ...]
    mode: str | None
    program_hash: str | None
    outputs: dict  # node id -> tuple of values, one per candidate (ABSTAINED for an abstention), or None
    readout: dict  # what the readout gave: score and raw, or winner; status and reason when not ok
    status: str | None = None
    label: object = None  # the gold label, when the data had one


def read_trace_item(path: str | Path, item_id: str) -> TraceItem:
    """Find item `item_id` in a JSONL trace (one record per item) and keep what the overlay needs.

    This function is the only place that knows the record's layout (see gsrlang/trace/schema.py):
    `{"trace_version", "program": {"name", "hash"}, "mode", "item": {"id", "candidates"}, "status",
    "nodes": [{"id", "output": [value per candidate] | null, ...}], "readout": {...}, "result": {...}}`.
    """
    from gsrlang.trace.read import read_trace

    path = Path(path)
    if not path.is_file():
        raise TraceError(f"no such trace file: `{path}`")
    seen = []
    for _, record in read_trace(path):
        item = record.get("item") if isinstance(record, dict) else None
        if not isinstance(item, dict):
            continue
        rid = str(item.get("id"))
        seen.append(rid)
        if rid == str(item_id):
            return trace_item_from_record(record)
    sample = ", ".join(seen[:5]) + (", ..." if len(seen) > 5 else "")
    raise TraceError(f"item `{item_id}` is not in trace `{path}`" + (f" (items: {sample})" if seen else
                                                                       " (it records no items)"))


def trace_item_from_record(record: dict) -> TraceItem:
    """What the overlay needs from one item record of a trace."""
    item = record.get("item") if isinstance(record.get("item"), dict) else {}
    candidates = tuple(str(c) for c in item.get("candidates") or ("A",))
    outputs = {}
    for n in record.get("nodes") or ():
        if isinstance(n, dict) and "id" in n:
            out = n.get("output")
            outputs[str(n["id"])] = None if out is None else tuple(
                _trace_value(v) for v in (out if isinstance(out, list) else [out]))
    program = record.get("program") if isinstance(record.get("program"), dict) else {}
    readout = record.get("readout") if isinstance(record.get("readout"), dict) else {}
    result = record.get("result") if isinstance(record.get("result"), dict) else {}
    return TraceItem(str(item.get("id")), candidates, record.get("mode"), program.get("hash"), outputs, readout,
                     record.get("status"), result.get("label"))


def _trace_value(v):
    if v is None or isinstance(v, dict) and (v.get("abstained") or v.get("abstain")):
        return ABSTAINED
    if isinstance(v, dict) and "value" in v:
        return _trace_value(v["value"])
    return v


# ---- building the graph --------------------------------------------------------------------------------
@attrs.frozen
class RenderOptions:
    legend: bool = True
    direction: str = "TB"  # TB (criteria on top) or LR
    wrap: int = 38  # characters per line of long text
    max_lines: int = 3


def edge_id(edge) -> str:
    """An edge's element id in the drawn graph (the report's script finds decision-path edges by it)."""
    source, target, port, slot = edge
    return f"edge:{source}->{target}:{port}" + (f"[{slot}]" if slot is not None else "")


def build_graph(program: CheckedProgram, trace: TraceItem | None = None, options: RenderOptions = RenderOptions()):
    """The program as a `graphviz.Digraph` (with the trace's overlay when given)."""
    import graphviz

    g = graphviz.Digraph(name=program.name, node_attr={"shape": "plain", "fontname": FONT, "fontsize": "11"},
                         edge_attr={"fontname": FONT, "fontsize": "9", "color": "#374151", "arrowsize": "0.7"})
    # ordering=in: a node's incoming edges keep the order they are written in (slot order)
    g.attr(rankdir=options.direction, fontname=FONT, nodesep="0.35", ranksep="0.45", labelloc="t", ordering="in",
           label=_graph_title(program, trace), tooltip=_tip(program.description or program.name))
    overlay = _Overlay(program, trace) if trace is not None else None
    # ports sit on top of each box: with TB, edges leave a box's bottom and enter a port's top
    tail, head = (":s", ":n") if options.direction == "TB" else ("", "")
    for node in program.nodes:
        g.node(node.id, _node_label(node, overlay, options), id=f"node:{node.id}",
               tooltip=_tip(_node_tooltip(node)))
    _keep_declaration_order(g, program)
    for node in program.nodes:
        for inp in sorted(node.inputs, key=_port_order(node)):
            attrs_ = {"id": edge_id((inp.source, node.id, inp.port, inp.slot))}
            if inp.slot is not None:
                attrs_["label"] = _slot_label(node, inp.port, inp.slot)
            if overlay and (inp.source, node.id, inp.port, inp.slot) in overlay.path_edges:
                attrs_.update(color=PATH_COLOR, penwidth="2.6")
            g.edge(f"{inp.source}:o{tail}", f"{node.id}:{_port_cell(inp.port, inp.slot)}{head}", **attrs_)
    _draw_sink_and_readouts(g, program, overlay, options)
    if options.legend:
        g.node("@legend", _legend_label(overlay is not None), id="legend")
    return g


def _keep_declaration_order(g, program: CheckedProgram) -> None:
    """Criteria side by side in declaration order: one rank, chained by invisible edges."""
    criteria = [n.id for n in program.nodes if n.kind == "criterion"]
    if len(criteria) < 2:
        return
    with g.subgraph(name="criteria") as s:
        s.attr(rank="same")
        for a, b in zip(criteria, criteria[1:]):
            s.edge(f"{a}:o", f"{b}:o", style="invis", id=f"order:{a}->{b}")


def _ports(node: Node) -> list[str]:
    """The node's port names in signature order (else in the order its inputs name them)."""
    sig = _signature(node)
    return [p.name for p in sig.ports] if sig is not None and sig.ports else list(dict.fromkeys(
        i.port for i in node.inputs))


def _port_order(node: Node):
    rank = {name: k for k, name in enumerate(_ports(node))}
    return lambda inp: (rank.get(inp.port, len(rank)), inp.slot if inp.slot is not None else -1)


def _port_cell(port: str, slot: int | None) -> str:
    """The PORT name of the cell an edge enters: the port's, or its slot's for a list port."""
    return f"in_{port}" if slot is None else f"in_{port}_{slot}"


def _signature(node: Node):
    if not node.op:
        return None
    from gsrlang.lang.catalog import default_catalog

    return default_catalog().operator(node.op)


def _slot_label(node: Node, port: str, slot: int) -> str:
    """`[i]`, with the slot's entry of any `per PORT` parameter (a weight) beside it."""
    label = f"[{slot}]"
    sig = _signature(node)
    for p in sig.params if sig is not None else ():
        values = node.params.get(p.name)
        if p.per == port and isinstance(values, (list, tuple)) and slot < len(values):
            label += f" {p.name}={_fmt_value(values[slot])}"
    return label


def to_dot(program: CheckedProgram, trace: TraceItem | None = None, options: RenderOptions = RenderOptions()) -> str:
    return build_graph(program, trace, options).source


def render(program: CheckedProgram, output: str | Path, fmt: str | None = None, trace: TraceItem | None = None,
           options: RenderOptions = RenderOptions()) -> Path:
    """Write the picture to `output`; the format is `fmt` or the file's extension."""
    output = Path(output)
    fmt = (fmt or output.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise ValueError(f"unknown format `{fmt}`: use one of {', '.join(FORMATS)}")
    g = build_graph(program, trace, options)
    if fmt == "dot":
        write_atomic(output, g.source)
        return output
    if shutil.which("dot") is None:
        raise GraphvizMissing(fmt)
    import graphviz

    try:
        data = g.pipe(format=fmt)
    except graphviz.ExecutableNotFound as exc:
        raise GraphvizMissing(fmt) from exc
    write_atomic(output, data)
    return output


# ---- labels --------------------------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _esc(text) -> str:
    """Text for an HTML-like label: markup characters escaped, control characters dropped.

    Graphviz reads a label's `\\` as one backslash (even inside `<...>`), so backslashes are doubled.
    """
    text = _CONTROL.sub("", str(text))
    return (text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def _tip(text: str) -> str:
    """Text for a plain (escString) attribute such as a tooltip: backslashes kept literal."""
    import graphviz

    return graphviz.escape(_CONTROL.sub("", text).replace("\n", " "))


def _wrapped(text: str, width: int, max_lines: int) -> str:
    """Escaped text wrapped onto left-aligned lines, shortened with an ellipsis beyond `max_lines`."""
    lines = textwrap.wrap(" ".join(str(text).split()), width) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: max(0, width - 1)].rstrip() + "\u2026"
    return '<BR ALIGN="LEFT"/>'.join(_esc(line) for line in lines) + '<BR ALIGN="LEFT"/>'


def _fmt_value(v) -> str:
    from gsrlang.lang.catalog import format_literal

    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    return format_literal(v)


def _graph_title(program: CheckedProgram, trace: TraceItem | None) -> str:
    title = f"<B>{_esc(program.name)}</B>"
    if program.description:
        title += f'<BR/><FONT POINT-SIZE="10">{_esc(program.description)}</FONT>'
    if trace is not None:
        who = ", ".join(trace.candidates)
        title += f'<BR/><FONT POINT-SIZE="10" COLOR="{PATH_COLOR}">trace of item {_esc(trace.item_id)}' \
                 f' (candidates {_esc(who)})' + (f", status {_esc(trace.status)}" if trace.status not in (None, "ok")
                                                 else "") + "</FONT>"
    return f"<{title}>"


def _node_tooltip(node: Node) -> str:
    if node.criterion is not None:
        return f"{node.id}: {node.type} = {node.criterion.procedure.describe()}. {node.criterion.ask}".strip()
    if node.op:
        return f"{node.id}: {node.kind} {node.op} -> {node.type}"
    return f"{node.id}: {node.value}"


def _table(kind: str, rows: list[str], border: str | None = None, width: int = 1, dashed: bool = False) -> str:
    style = KIND_STYLE[kind]
    table_style = [name for name, on in (("rounded", style["rounded"]), ("dashed", dashed)) if on]
    st = f' STYLE="{",".join(table_style)}"' if table_style else ""
    return (f'<<TABLE BORDER="{width}" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" BGCOLOR="{style["fill"]}"'
            f' COLOR="{border or style["border"]}"{st} PORT="o">{"".join(rows)}</TABLE>>')


def _row(content: str, colspan: int, align: str = "CENTER", extra: str = "") -> str:
    return f'<TR><TD COLSPAN="{colspan}" ALIGN="{align}"{extra}>{content}</TD></TR>'


def _node_label(node: Node, overlay: "_Overlay | None", options: RenderOptions) -> str:
    if node.kind == "const":
        rows = [_row(f"<I>const</I> {_esc(_fmt_value(node.value))}", 1)]
        rows += overlay.value_rows(node, 1) if overlay else []
        return _table("const", rows)
    sig = _signature(node)
    port_names = _ports(node)
    slots = {name: sorted(i.slot for i in node.inputs if i.port == name and i.slot is not None)
             for name in port_names}
    span = max(1, sum(max(1, len(slots[name])) for name in port_names))
    rows = _port_rows(node, sig, port_names, slots) if port_names else []
    # anonymous nodes (nested calls) are named after the port they feed, in grey
    name_html = f"<B>{_esc(node.id)}</B>" if node.named else f'<FONT COLOR="#4b5563">{_esc(node.id)}</FONT>'
    rows.append(_row(name_html, span))
    if node.kind == "criterion":
        rows.append(_row(f"<I>criterion</I> : {_esc(node.type)}", span))
        c = node.criterion
        if c is not None:
            proc = _esc(c.procedure.describe())
            if c.ensemble is not None:
                proc += f" \u00d7{len(c.ensemble.judges)}, {_esc(c.ensemble.aggregate)}"
            rows.append(_row(f'<FONT POINT-SIZE="10">{proc}</FONT>', span))
            if c.ask:
                rows.append(_row(f'<FONT POINT-SIZE="9">{_wrapped(c.ask, options.wrap, options.max_lines)}</FONT>',
                                 span, "LEFT"))
    else:
        rows.append(_row(f"<I>{_esc(node.kind)}</I> {_esc(node.op or '')} \u2192 {_esc(node.type)}", span))
        if node.params:
            text = '<BR ALIGN="LEFT"/>'.join(f"{_esc(k)} = {_esc(_fmt_value(v))}" for k, v in node.params.items())
            rows.append(_row(f'<FONT POINT-SIZE="9">{text}<BR ALIGN="LEFT"/></FONT>', span, "LEFT"))
    border, width, dashed = None, 1, False
    if overlay is not None:
        rows += overlay.value_rows(node, span)
        if node.id in overlay.changed:
            border, width = FIRED_COLOR, 3
        elif node.id in overlay.fired:
            border, width = NO_CHANGE_COLOR, 2
        elif node.id in overlay.path_nodes:
            border, width = PATH_COLOR, 2
        dashed = overlay.all_abstained(node.id)
    return _table(node.kind if node.kind in KIND_STYLE else "transform", rows, border, width, dashed)


def _port_rows(node: Node, sig, port_names: list[str], slots: dict) -> list[str]:
    """The port cells on top of an operator's box: one per port, and under a list port one per slot."""
    border = KIND_STYLE[node.kind]["border"]
    two = any(slots[name] for name in port_names)
    head, under = [], []
    for name in port_names:
        p = sig.port(name) if sig is not None else None
        shown = f"{_esc(name)}: {_esc(p.pattern)}" if p is not None else _esc(name)
        font = f'<FONT POINT-SIZE="9">{shown}</FONT>'
        if slots[name]:
            head.append(f'<TD COLSPAN="{len(slots[name])}" BGCOLOR="#ffffff">{font}</TD>')
            under += [f'<TD PORT="{_port_cell(name, k)}" BORDER="1" SIDES="B" COLOR="{border}" BGCOLOR="#ffffff">'
                      f'<FONT POINT-SIZE="8">[{k}]</FONT></TD>' for k in slots[name]]
        else:
            rowspan = ' ROWSPAN="2"' if two else ""
            head.append(f'<TD PORT="{_port_cell(name, None)}"{rowspan} BORDER="1" SIDES="B" COLOR="{border}"'
                        f' BGCOLOR="#ffffff">{font}</TD>')
    return ["<TR>" + "".join(head) + "</TR>"] + (["<TR>" + "".join(under) + "</TR>"] if under else [])


def _draw_sink_and_readouts(g, program: CheckedProgram, overlay: "_Overlay | None", options: RenderOptions) -> None:
    sink_node = program.node(program.sink)
    rows = [_row("<B>sink</B>", 1), _row(f"<I>sink</I> : {_esc(sink_node.type)}", 1)]
    if overlay is not None:
        rows += overlay.value_rows(sink_node, 1, gates=False)
    g.node("@sink", _table("sink", rows, PATH_COLOR if overlay else None, 2 if overlay else 1), id="sink")
    edge = {"id": f"edge:{program.sink}->@sink", "penwidth": "1.6"}
    if overlay is not None:
        edge.update(color=PATH_COLOR, penwidth="2.6")
    tail, head = (":s", ":n") if options.direction == "TB" else ("", "")
    g.edge(f"{program.sink}:o{tail}", f"@sink:o{head}", **edge)
    readouts = []
    if program.readout.pointwise is not None:
        p = program.readout.pointwise
        settings = [f"scale = {_fmt_value(p.lo)}..{_fmt_value(p.hi)}", f"quantize = {p.quantize}"]
        if p.thresholds:
            settings.append("thresholds = " + ", ".join(_fmt_value(t) for t in p.thresholds))
        readouts.append(("pointwise", settings))
    if program.readout.pairwise is not None:
        p = program.readout.pairwise
        readouts.append(("pairwise", [f"epsilon = {_fmt_value(p.epsilon)}", f"on_tie = {p.on_tie}"]))
    for mode, settings in readouts:
        active = overlay is not None and overlay.mode_matches(mode)
        rows = [_row(f"<B>readout</B> <I>{mode}</I>", 1),
                _row('<FONT POINT-SIZE="9">' + '<BR ALIGN="LEFT"/>'.join(_esc(s) for s in settings)
                     + '<BR ALIGN="LEFT"/></FONT>', 1, "LEFT")]
        if active:
            rows += overlay.result_rows()
        g.node(f"@readout.{mode}", _table("sink", rows, PATH_COLOR if active else None, 2 if active else 1),
               id=f"readout:{mode}")
        e = {"id": f"edge:@sink->readout:{mode}", "style": "dashed"}
        if active:
            e.update(color=PATH_COLOR, penwidth="2.6", style="solid")
        g.edge(f"@sink:o{tail}", f"@readout.{mode}:o{head}", **e)


def _legend_label(with_overlay: bool) -> str:
    rows = ['<TR><TD COLSPAN="2"><B>legend</B></TD></TR>']
    for kind in ("criterion", "transform", "reduce", "gate", "sink"):
        s = KIND_STYLE[kind]
        rows.append(f'<TR><TD BGCOLOR="{s["fill"]}" BORDER="1" COLOR="{s["border"]}"'
                    f'{" STYLE=" + chr(34) + "rounded" + chr(34) if s["rounded"] else ""}>'
                    f'<FONT POINT-SIZE="9">{kind}</FONT></TD>'
                    f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{_esc(s["about"].split(": ", 1)[1])}</FONT></TD></TR>')
    rows.append('<TR><TD><FONT POINT-SIZE="9">[i]</FONT></TD><TD ALIGN="LEFT"><FONT POINT-SIZE="9">'
                'the slot an edge fills in a list port</FONT></TD></TR>')
    if with_overlay:
        for border, color, name, about in (
                (2, PATH_COLOR, "path", "the decision path to the readout"),
                (3, FIRED_COLOR, "fired", "a gate whose trigger held and changed its value"),
                (2, NO_CHANGE_COLOR, "no change", "a gate that fired, its value its base's")):
            rows.append(f'<TR><TD BORDER="{border}" COLOR="{color}"><FONT POINT-SIZE="9">{name}</FONT></TD>'
                        f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{about}</FONT></TD></TR>')
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="{ABSTAIN_COLOR}">abstained</FONT></TD>'
                    '<TD ALIGN="LEFT"><FONT POINT-SIZE="9">cannot assess (dashed: every candidate)</FONT></TD></TR>')
    return ('<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2" COLOR="#9ca3af" BGCOLOR="#ffffff">'
            + "".join(rows) + "</TABLE>>")


# ---- the overlay ----------------------------------------------------------------------------------------
class _Overlay:
    """Values, fired gates, abstentions and the decision path of one traced item."""

    def __init__(self, program: CheckedProgram, trace: TraceItem):
        self.program = program
        self.trace = trace
        self.view = TraceView(trace.outputs, {n.id: _inputs_by_port(n) for n in program.nodes},
                              {n.id: n.kind for n in program.nodes}, same=_same)
        self.fired: set[str] = set(self.view.fired_gates())  # gates whose trigger held for some candidate
        self.changed: set[str] = set(self.view.score_changes())  # ... and that changed their base's value
        self.path_nodes, self.path_edges = self._decision_path()

    def values(self, node_id: str) -> tuple | None:
        return self.trace.outputs.get(node_id)

    def all_abstained(self, node_id: str) -> bool:
        vals = self.values(node_id)
        return bool(vals) and all(v is ABSTAINED for v in vals)

    def mode_matches(self, mode: str) -> bool:
        return self.trace.mode == mode if self.trace.mode else (mode == "pairwise") == (len(self.trace.candidates) == 2)

    def value_rows(self, node: Node, span: int, gates: bool = True) -> list[str]:
        if node.id not in self.trace.outputs:
            return [_row(f'<FONT POINT-SIZE="9" COLOR="{ABSTAIN_COLOR}">not in trace</FONT>', span)]
        vals = self.values(node.id)
        if vals is None:
            return [_row(f'<FONT POINT-SIZE="9" COLOR="{ABSTAIN_COLOR}">not computed</FONT>', span)]
        parts = [f'<FONT COLOR="{ABSTAIN_COLOR}"><I>{_esc(cand)}: abstained</I></FONT>' if v is ABSTAINED
                 else f"<B>{_esc(cand)}</B>: {_esc(_fmt_value(v))}" for cand, v in zip(self.trace.candidates, vals)]
        if gates and node.id in self.fired:
            who = [c for c, t in zip(self.trace.candidates, self.view.trigger(node.id)) if t is True]
            color, what = (FIRED_COLOR, "fired") if node.id in self.changed else (NO_CHANGE_COLOR, "fired, no change")
            parts.append(f'<FONT COLOR="{color}"><B>{what}</B> ({_esc(", ".join(who))})</FONT>')
        joined = " \u00b7 ".join(parts)
        return [_row(f'<FONT POINT-SIZE="10">{joined}</FONT>', span, extra=' BGCOLOR="#ffffff"')]

    def result_rows(self) -> list[str]:
        r = self.trace.readout
        shown = [(key, r[key]) for key in ("score", "raw", "winner") if r.get(key) is not None]
        if r.get("status") not in (None, "ok"):
            shown.append(("status", r["status"]))
        if r.get("reason"):
            shown.append(("reason", r["reason"]))
        if self.trace.label is not None:
            shown.append(("gold label", self.trace.label))
        if not shown:
            return []
        text = '<BR ALIGN="LEFT"/>'.join(f"<B>{_esc(k)}</B> = {_esc(_short_json(v))}" for k, v in shown)
        return [_row(f'<FONT POINT-SIZE="10" COLOR="{PATH_COLOR}">{text}<BR ALIGN="LEFT"/></FONT>', 1, "LEFT",
                     extra=' BGCOLOR="#ffffff"')]

    # which gates fired, and which inputs decided each node's value
    def _deciding_inputs(self, node: Node) -> Iterable:
        """The inputs that determined `node`'s value, for at least one candidate."""
        if node.kind == "gate":
            trig = node.port_inputs("trigger")
            base = node.port_inputs("base")
            if node.id not in self.changed:  # not fired, or fired without changing anything: the base decided
                return base
            # a fired gate decides through its trigger; the base still counts where it passed unchanged
            out, base_vals = self.values(node.id) or (), self.values(base[0].source) if base else ()
            kept = any(_same(o, b) for o, b in zip(out, base_vals or ()))
            return [*trig, *(base if kept and node.op != "mask" else [])]
        if node.kind == "reduce" and node.op in ("min", "max"):
            out = self.values(node.id) or ()
            chosen = [i for i in node.inputs
                      if any(_same(o, v) for o, v in zip(out, self.values(i.source) or ()))]
            return chosen or node.inputs
        return node.inputs

    def _decision_path(self):
        nodes, edges = {self.program.sink}, set()
        todo = [self.program.sink]
        while todo:
            nid = todo.pop()
            node = self.program.node(nid)
            for i in self._deciding_inputs(node):
                edges.add((i.source, nid, i.port, i.slot))
                if i.source not in nodes and i.source in self.program:
                    nodes.add(i.source)
                    todo.append(i.source)
        return nodes, edges


@attrs.frozen
class DecisionPath:
    """One traced item's decision path: the nodes and edges that decided the sink, the gates that fired and
    changed their value, and those that fired without changing it (`fired - changed`)."""

    nodes: frozenset
    edges: frozenset  # (source, target, port, slot)
    fired: frozenset
    changed: frozenset


def decision_path(program: CheckedProgram, trace: TraceItem) -> DecisionPath:
    """The decision path the overlay draws, for other views of a trace (the HTML report)."""
    o = _Overlay(program, trace)
    return DecisionPath(frozenset(o.path_nodes), frozenset(o.path_edges), frozenset(o.fired), frozenset(o.changed))


def _inputs_by_port(node: Node) -> dict[str, list[str]]:
    """{port: [source ids in slot order]} of a program node, as a trace record lists them."""
    out: dict[str, list] = {}
    for inp in sorted(node.inputs, key=lambda i: -1 if i.slot is None else i.slot):
        out.setdefault(inp.port, []).append(inp.source)
    return out


def _same(a, b) -> bool:
    if a is ABSTAINED or b is ABSTAINED:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def _short_json(v) -> str:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return _fmt_value(v) if not isinstance(v, str) else v
    text = json.dumps(v, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["FORMATS", "GraphvizMissing", "RenderOptions", "TraceItem", "build_graph",
           "DecisionPath", "decision_path", "edge_id", "read_trace_item", "render", "to_dot", "trace_item_from_record"]
