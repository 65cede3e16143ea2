"""Writing traces: the header (a program's static part, once) and the version 2 item records.

The writer takes what it writes as plain inputs: an item's run (anything with an
ItemRun's fields: id, line, mode, candidates, status, values, judgments, readout,
reason, label, label_error) and a plan (anything with `program` and
`inputs_by_port`), so the trace layer imports nothing from the runtime.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict

from gsrlang.lang.program import json_value
from gsrlang.semantics.values import Unsettled
from gsrlang.trace.jsonio import dumps_line
from gsrlang.trace.schema import HEADER, TRACE_VERSION, jsonable, judgment_json, judgment_v2, result_line, unknown_flags

__all__ = ["NotRun", "Static", "TraceWriter", "header_line", "item_record", "node_static", "outputs_v2", "record_v2",
           "trace_record"]


class Static:
    """The per-node parts of a trace record that do not depend on the item (computed once per program).

    `index` (per-item programs): the index file, recorded in the header, and the
    result lines name their program (`source`).
    """

    def __init__(self, plan, path: str | None, index: str | None = None):
        program = plan.program
        self.program = program
        self.header = {"name": program.name, "hash": program.content_hash, "path": path, "sink": program.sink}
        if path is not None and index is None:  # so that `gsr replay` finds the program from any directory
            self.header["abs_path"] = os.path.abspath(path)
        self.source = None
        if index is not None:
            self.header["index"] = index
            self.source = {"name": program.name, "hash": program.content_hash, "path": path}
        self.nodes = []
        for n in program.nodes:
            d: dict = {"id": n.id, "kind": n.kind, "type": str(n.type)}
            if n.kind == "criterion":
                d["procedure"] = n.criterion.procedure.describe()
            elif n.kind == "const":
                d["value"] = n.value
            else:
                d["op"] = n.op
                d["params"] = json_value(n.params)
                d["inputs"] = plan.inputs_by_port(n)
            self.nodes.append(d)


class NotRun:
    """The trace header of an item that ran under no program (per-item programs only).

    `name` and `digest` are the program's when it was loaded but could not run the
    item (another mode or scale, judges that cannot serve it); None when it could not
    be loaded at all.
    """

    program = None  # the result line has no scale: the item was not scored on any
    nodes: list = []

    def __init__(self, path: str | None, index: str | None, name: str | None = None, digest: str | None = None):
        self.header = {"name": name, "hash": digest, "path": path, "sink": None, "index": index}
        self.source = {"name": name, "hash": digest, "path": path}


def node_static(plan) -> list[dict]:
    """The item-independent part of each node's trace entry, in program order."""
    return Static(plan, None).nodes


def trace_record(run, plan, path: str | None = None, static: Static | None = None) -> dict:
    """The logical (version 1 shaped) trace record of one item: what `read_trace` yields."""
    static = static or Static(plan, path)
    nodes = []
    if run.values is not None and static.nodes:
        for i, base in enumerate(static.nodes):
            d = dict(base)
            v = run.values[i]
            d["output"] = None if v is None else [jsonable(x) for x in v]
            unknown = unknown_flags(v)
            if unknown:
                d["unknown"] = unknown
            if base["kind"] == "criterion" and base["id"] in run.judgments:
                d["judgments"] = [judgment_json(j) for j in run.judgments[base["id"]]]
            nodes.append(d)
    return {"trace_version": TRACE_VERSION, "program": static.header, "mode": run.mode,
            "item": {"id": run.id, "line": run.line, "candidates": list(run.candidates)}, "status": run.status,
            "nodes": nodes, "readout": run.readout.to_json() if run.readout is not None else None,
            "result": result_line(run, static.program, static.source)}


def item_record(run, static, key: int, result: dict | None = None) -> dict:
    """The version 2 item record of one run (see the module docstring); `key` is its header's."""
    out = unknown = judgments = None
    if run.values is not None and static.nodes:
        out, unknown = outputs_v2(run.values)
        judgments = {cid: [judgment_v2(j) for j in row] for cid, row in run.judgments.items()}
    return record_v2(key, run.mode, run.id, run.line, run.candidates, run.status,
                     result if result is not None else result_line(run, static.program, static.source),
                     out, unknown, judgments)


def outputs_v2(values) -> tuple[list, dict | None]:
    """(`out`, `u`) of a version 2 record from an item's node values (per node a tuple of its candidates'
    values, or None): each value as JSON (`jsonable`), and the `u` flags of the nodes with an open value."""
    out: list = []
    unknown = None
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        row = []
        for x in v:
            t = type(x)
            if t is float or t is bool or t is str:  # the common case, written as it is
                if t is float and not math.isfinite(x):
                    x = repr(x)
                row.append(x)
            else:
                row.append(jsonable(x))
                if t is Unsettled:
                    unknown = unknown or {}
                    unknown[str(i)] = unknown_flags(v)
        out.append(row)
    return out, unknown


def record_v2(key, mode: str, item_id, line: int, candidates, status: str, result: dict, out: list | None = None,
              unknown: dict | None = None, judgments: dict | None = None) -> dict:
    """The version 2 item record from its plain fields (the one place that lays one out): `out` the outputs
    per node in header order (JSON values; None: the item has no node values, and no `out`, `u` or `j`),
    `unknown` the `u` flags, `judgments` per criterion (`judgment_v2` dicts). `key` is the header's (None:
    `TraceWriter.write_record` fills it in)."""
    rec: dict = {"p": key, "mode": mode, "item": {"id": item_id, "line": line, "candidates": list(candidates)},
                 "status": status}
    if out is not None:
        rec["out"] = out
        if unknown:
            rec["u"] = unknown
        rec["j"] = judgments
    rec["result"] = result
    return rec


def header_line(static, key: int) -> str:
    """The header record of a program (`static`) as one line of text (no newline)."""
    return dumps_line({"trace_version": TRACE_VERSION, "kind": HEADER, "key": key, "program": static.header,
                       "nodes": static.nodes})


class TraceWriter:
    """Writes a version 2 trace to an open text file: for one program, or each item's own (`static`).

    Each program's header is written before its first item; the writer remembers the
    last 256 programs it announced (a program seen again after that gets a new header).
    """

    def __init__(self, handle, plan=None, path: str | None = None):
        self.handle = handle
        self.plan = plan
        self.static = Static(plan, path) if plan is not None else None
        self._keys: OrderedDict = OrderedDict()  # static -> header key
        self._next = 0

    def key(self, static) -> int:
        """The header key of a program (`static`), its header written first if it has none yet."""
        key = self._keys.get(static)
        if key is not None:
            self._keys.move_to_end(static)
            return key
        key, self._next = self._next, self._next + 1
        self.handle.write(header_line(static, key) + "\n")
        self._keys[static] = key
        if len(self._keys) > 256:
            self._keys.popitem(last=False)
        return key

    def write(self, run, static: Static | NotRun | None = None, result: dict | None = None) -> None:
        """Write one item's record (`result`: its result line, when the caller has it already)."""
        static = static or self.static
        self.handle.write(dumps_line(item_record(run, static, self.key(static), result)) + "\n")

    def write_record(self, record: dict, static) -> None:
        """Write an item record made elsewhere (`item_record`'s form, its `p` left to fill in here)."""
        record["p"] = self.key(static)
        self.handle.write(dumps_line(record) + "\n")

    def write_summary(self, record: dict) -> None:
        self.handle.write(dumps_line(record) + "\n")
