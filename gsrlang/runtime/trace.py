"""Results lines and trace records: what a run writes for every item.

**Result line** (one JSON object per item, `--out results.jsonl`; read by
`gsrlang.metrics.read_results` / `metrics_from_results`)::

    {"id": "tc-000", "line": 1, "status": "ok", "mode": "pointwise",
     "score": 4, "raw": 3.8125, "scale": [1.0, 5.0],          # pointwise
     "winner": "first",                                       # pairwise (instead of score/raw/scale)
     "sink": {"A": 0.703125},                                 # the sink Score per candidate, or null
     "label": 4.6666666667,                                   # the gold label (parsed), or null
     "label_error": "...",                                    # only when the row's label was unusable
     "reason": null}                                          # why the item is invalid / failed

A completed run ends its results file with `{"kind": "run_summary", "complete": true,
"mode", "items", "ok", "invalid", "failed"}` (`gsrlang.runtime.batch.results_end`);
a file without it is the prefix of a killed run. Result lines have no `kind`.

`status` is "ok", "invalid" (the item was evaluated but has no valid result: an
invalid judgment, a failed operator, a readout check) or "failed" (the data row
could not become an item). `score` is the quantized native score (an int, or the
raw float for `quantize = none`); `raw` is `lo + s * (hi - lo)` before quantizing.

**Trace file, version 2** (`--trace trace.jsonl`, compact JSON lines). The program's
structure is written once, in a header record, and each item record carries only
what differs from item to item::

    {"trace_version": 2, "kind": "header", "key": 0,
     "program": {"name": ..., "hash": "sha256:...", "path": "examples/x.gsr",
                 "abs_path": "/home/me/proj/examples/x.gsr", "sink": "final"},
     "nodes": [{"id": "coherent", "kind": "criterion", "type": "Score[1..3]", "procedure": "human(...)"},
               {"id": "body", "kind": "reduce", "type": "Score", "op": "weighted_mean",
                "params": {...}, "inputs": {"items": ["body.items[0]", "body.items[1]"]}}, ...]}
    {"p": 0, "mode": "pointwise", "item": {"id": "tc-000", "line": 1, "candidates": ["A"]}, "status": "ok",
     "out": [[2.3333333333], ..., [0.6666666666]],         # per node (header order): one value per candidate
     "j": {"coherent": [{"raw": "2.3333333333", "provenance": {...}}]},   # judgments, per criterion
     "result": {...the result line...}}

`p` names the header the record belongs to (per-item programs write one header per
program, before its first item). In `out`, null is an abstention, or a value that is
not settled (see `u`), and a node that was never computed is null as a whole; `u`
(only when needed) maps a node's position to one flag per candidate, true where its
value is not settled: an invalid judgment, a skipped one, or an operator output
that depends on them. A judgment lists only what is not the default: `status`
(default "ok"; also "abstained", "invalid", "skipped"), `value` (an `ok` judgment's
value is its node's output), `reason`, `raw`, `provenance`. The readout is not
stored: it follows from the result line. Floats are written as the shortest text
that reads back to the same double, so they round-trip exactly.

**Reading.** `read_trace(path)` reads version 1 and 2 files alike and yields every
item record in one logical form, the version 1 record::

    {"trace_version": 2, "program": {...the header's program...}, "mode": ..., "item": {...}, "status": ...,
     "nodes": [{...the header's node..., "output": [...], "judgments": [{"value", "status", "reason",
                "raw", "provenance"}], "unknown": [false]}, ...],
     "readout": {"mode", "status", "sink", "raw", "score" | "winner", "reason"} or null,
     "result": {...}}

(`unknown` only on nodes with an unsettled value.) Every reader of traces (replay,
`--show`, rendering overlays, reports) goes through it.

**Per-item programs** (`gsr run --programs index.jsonl`): every record names its own
program, and its header also holds `"index"` (the index file as given); the result
line gets `"program": {"name", "hash", "path"}`. An item that was not run under a
program (none compiled, it does not check, another mode or scale) has no nodes, its
result's `status` is "invalid", and its header has null `name` / `hash` when the
program could not be loaded.

**Run summary**: a run that completes ends its trace with one more record,
`{"trace_version": 2, "kind": "run_summary", "items", "ok", "invalid", "failed",
"label_problems", "labelled", "wall_s", "mode", "program" | "programs", "judges":
{"llm": {"calls", "http_requests", "cache_hits", "merged", "prompt_tokens",
"completion_tokens", ...}}, "short_circuit": {...}}`. `read_trace` yields only item
records unless asked for the summary too (`summaries=True`).
"""

from __future__ import annotations

import json
import math
import os
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

from gsrlang.data import DataError, recorded_label_problem
from gsrlang.judgment import Judgment
from gsrlang.program import Program, json_value
from gsrlang.runtime.compose import Plan
from gsrlang.runtime.executor import ItemRun
from gsrlang.runtime.fastjson import DecodeError, dumps_line, loads
from gsrlang.runtime.values import ABSTAIN, Unsettled

__all__ = ["READABLE_VERSIONS", "RUN_SUMMARY", "TRACE_VERSION", "TraceError", "dumps", "is_summary",
           "judgment_json", "read_trace", "result_line", "summary_record", "trace_record", "TraceWriter"]

TRACE_VERSION = 2
READABLE_VERSIONS = (1, 2)
RUN_SUMMARY = "run_summary"  # the `kind` of the record that ends a completed run's trace
HEADER = "header"  # the `kind` of a version 2 header record


class TraceError(DataError):
    """A trace file cannot be read (a line that is not a trace record)."""


MALFORMED = (AttributeError, TypeError, KeyError, IndexError)  # what reading a record of the wrong shape raises


def malformed(path, line: int, exc: Exception) -> TraceError:
    """The error for an item record whose parts have the wrong shape (`exc`: what reading it raised)."""
    return TraceError(f"{path}: line {line} is not a well-formed trace item record ({type(exc).__name__}: {exc})")


_RESULTS = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))  # made once: json.dumps makes one a call


def dumps(obj) -> str:
    """A results line: JSON, readable spacing (what `json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))`
    writes). The one encoder of result lines: `gsr run` and `gsr replay --out` write them with it."""
    return _RESULTS.encode(obj)


def _jsonable(value):
    if value is ABSTAIN or type(value) is Unsettled:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # invalid answers may be NaN; keep the file strict JSON
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def judgment_json(j: Judgment) -> dict:
    return {"value": _jsonable(j.value), "status": j.status, "reason": j.reason, "raw": j.raw,
            "provenance": j.provenance}


def _judgment_v2(j: Judgment) -> dict:
    """A judgment as a version 2 record holds it: only what differs from the defaults."""
    d = {}
    if j.status != "ok":
        d["status"] = j.status
        if j.value is not None and j.value is not ABSTAIN:
            d["value"] = _jsonable(j.value)  # an invalid answer's value (an ok one's is the node's output)
    if j.reason is not None:
        d["reason"] = j.reason
    if j.raw is not None:
        d["raw"] = j.raw
    if j.provenance:
        d["provenance"] = j.provenance
    return d


def _judgment_v1(d: dict, output) -> dict:
    """A version 2 judgment in the logical (version 1) form; `output` is the node's output for the candidate."""
    status = d.get("status", "ok")
    return {"value": output if status == "ok" else d.get("value"), "status": status, "reason": d.get("reason"),
            "raw": d.get("raw"), "provenance": d.get("provenance") or {}}


def result_line(run: ItemRun, program: Program | None, source: dict | None = None) -> dict:
    """The results-file line for one item (see the module docstring).

    `program` is the program the item ran under (None: it ran under none, so no
    scale); `source` (per-item programs only) is the `program` field: name, hash, path.
    Otherwise the line names its program by name and content hash, so that results
    files can tell several runs of one program from runs of different programs.
    """
    out: dict = {"id": run.id, "line": run.line, "status": run.status, "mode": run.mode}
    if source is not None:
        out["program"] = source
    elif program is not None:
        out["program"] = {"name": program.name, "hash": program.content_hash}
    r = run.readout
    ok = run.status == "ok" and r is not None
    if run.mode == "pointwise":
        out["score"] = r.score if ok else None
        out["raw"] = r.raw if ok else None
        p = program.readout.pointwise if program is not None else None
        if p is not None:
            out["scale"] = [p.lo, p.hi]
    else:
        out["winner"] = r.winner if ok else None
    out["sink"] = {c: _jsonable(v) for c, v in r.sink.items()} if r is not None else None
    out["label"] = run.label
    if run.label_error:
        out["label_error"] = run.label_error
    out["reason"] = run.reason
    return out


def ok_line(item_id, line: int, mode: str, source: dict, sink: dict, label, label_error, score=None, raw=None,
            scale=None, winner=None) -> dict:
    """The line `result_line` writes for an item with a valid result (status ok, no reason), from its parts: what
    the columnar paths write for the items the columns vouch for, with `result_line`'s keys in its order.
    `scale` is the pointwise readout's [lo, hi]."""
    out = {"id": item_id, "line": line, "status": "ok", "mode": mode, "program": source}
    if mode == "pointwise":
        out["score"] = score
        out["raw"] = raw
        if scale is not None:
            out["scale"] = scale
    else:
        out["winner"] = winner
    out["sink"] = sink
    out["label"] = label
    if label_error:
        out["label_error"] = label_error
    out["reason"] = None
    return out


def readout_of_result(result: dict) -> dict | None:
    """The readout record that a result line implies (version 2 stores only the result line).

    A readout was made exactly when the result has a sink; it is invalid when the
    result's reason is the readout's (`readout: ...`)."""
    if not isinstance(result, dict) or result.get("sink") is None:
        return None
    ok = result.get("status") == "ok"
    reason = result.get("reason")
    out = {"mode": result.get("mode"), "status": "ok" if ok else "invalid", "sink": result.get("sink")}
    if result.get("mode") == "pointwise":
        out.update(raw=result.get("raw"), score=result.get("score"))
    else:
        out["winner"] = result.get("winner")
    out["reason"] = None if ok else (reason[len("readout: "):] if isinstance(reason, str)
                                      and reason.startswith("readout: ") else reason)
    return out


class _Static:
    """The per-node parts of a trace record that do not depend on the item (computed once per program).

    `index` (per-item programs): the index file, recorded in the header, and the
    result lines name their program (`source`).
    """

    def __init__(self, plan: Plan, path: str | None, index: str | None = None):
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


def node_static(plan: Plan) -> list[dict]:
    """The item-independent part of each node's trace entry, in program order."""
    return _Static(plan, None).nodes


def _unknown_flags(v) -> list | None:
    """One flag per candidate, true where the value is not settled; None when every value is."""
    if v is None or not any(type(x) is Unsettled for x in v):
        return None
    return [type(x) is Unsettled for x in v]


def trace_record(run: ItemRun, plan: Plan | None, path: str | None = None, static: _Static | None = None) -> dict:
    """The logical (version 1 shaped) trace record of one item: what `read_trace` yields."""
    static = static or _Static(plan, path)
    nodes = []
    if run.values is not None and static.nodes:
        for i, base in enumerate(static.nodes):
            d = dict(base)
            v = run.values[i]
            d["output"] = None if v is None else [_jsonable(x) for x in v]
            unknown = _unknown_flags(v)
            if unknown:
                d["unknown"] = unknown
            if base["kind"] == "criterion" and base["id"] in run.judgments:
                d["judgments"] = [judgment_json(j) for j in run.judgments[base["id"]]]
            nodes.append(d)
    return {
        "trace_version": TRACE_VERSION,
        "program": static.header,
        "mode": run.mode,
        "item": {"id": run.id, "line": run.line, "candidates": list(run.candidates)},
        "status": run.status,
        "nodes": nodes,
        "readout": run.readout.to_json() if run.readout is not None else None,
        "result": result_line(run, static.program, static.source),
    }


def item_record(run: ItemRun, static, key: int, result: dict | None = None) -> dict:
    """The version 2 item record of one run (see the module docstring); `key` is its header's."""
    rec: dict = {"p": key, "mode": run.mode,
                 "item": {"id": run.id, "line": run.line, "candidates": list(run.candidates)},
                 "status": run.status}
    values = run.values
    if values is not None and static.nodes:
        out = []
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
                    row.append(_jsonable(x))
                    if t is Unsettled:
                        unknown = unknown or {}
                        unknown[str(i)] = _unknown_flags(v)
            out.append(row)
        rec["out"] = out
        if unknown:
            rec["u"] = unknown
        rec["j"] = {cid: [_judgment_v2(j) for j in row] for cid, row in run.judgments.items()}
    rec["result"] = result if result is not None else result_line(run, static.program, static.source)
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

    def __init__(self, handle, plan: Plan | None = None, path: str | None = None):
        self.handle = handle
        self.plan = plan
        self.static = _Static(plan, path) if plan is not None else None
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

    def write(self, run: ItemRun, static: _Static | NotRun | None = None, result: dict | None = None) -> None:
        """Write one item's record (`result`: its result line, when the caller has it already)."""
        static = static or self.static
        self.handle.write(dumps_line(item_record(run, static, self.key(static), result)) + "\n")

    def write_record(self, record: dict, static) -> None:
        """Write an item record made elsewhere (`item_record`'s form, its `p` left to fill in here)."""
        record["p"] = self.key(static)
        self.handle.write(dumps_line(record) + "\n")

    def write_summary(self, record: dict) -> None:
        self.handle.write(dumps_line(record) + "\n")


def summary_record(**fields) -> dict:
    """The run-summary record that ends a completed run's trace (see the module docstring)."""
    return {"trace_version": TRACE_VERSION, "kind": RUN_SUMMARY, **fields}


def is_summary(record: dict) -> bool:
    return record.get("kind") == RUN_SUMMARY


def logical_record(header: dict, rec: dict) -> dict:
    """A version 2 item record in the logical (version 1) form, given its header record."""
    nodes = []
    out = rec.get("out")
    if out is not None and header["nodes"]:
        judgments = rec.get("j") or {}
        unknown = rec.get("u") or {}
        for i, base in enumerate(header["nodes"]):
            d = dict(base)
            v = out[i] if i < len(out) else None
            d["output"] = v
            flags = unknown.get(str(i))
            if flags:
                d["unknown"] = flags
            js = judgments.get(base["id"])
            if js is not None:
                d["judgments"] = [_judgment_v1(j, v[c] if v is not None and c < len(v) else None)
                                  for c, j in enumerate(js)]
            nodes.append(d)
    result = rec.get("result")
    return {"trace_version": header["trace_version"], "program": header["program"], "mode": rec.get("mode"),
            "item": rec.get("item"), "status": rec.get("status"), "nodes": nodes,
            "readout": readout_of_result(result), "result": result}


def read_records(path: str | Path) -> Iterator[tuple[int, dict | None, dict]]:
    """(line number, header or None, record) for every record of a trace file, as stored.

    Version 1 records come with header None; version 2 item records with their
    header record; header records themselves are not yielded. Raises TraceError."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    headers: dict = {}
    with path.open("rb") as handle:
        for line, raw in enumerate(handle, start=1):
            try:
                record = loads(raw)
            except DecodeError as exc:
                if not raw.strip():  # a blank line (looked for only here: most lines are not)
                    continue
                raise TraceError(f"{path}: line {line} is not a JSON object: {exc}") from None
            if not isinstance(record, dict):
                raise TraceError(f"{path}: line {line} is not a trace record")
            if "p" in record and "trace_version" not in record:
                header = headers.get(record["p"]) if isinstance(record["p"], (int, str)) else None
                if header is None:
                    raise TraceError(f"{path}: line {line} names header {record['p']!r}, which no earlier line "
                                     "declares (is the file cut or reordered?)")
                _check_label(path, line, record)
                yield line, header, record
                continue
            version = record.get("trace_version")
            if version is None:
                raise TraceError(f"{path}: line {line} is not a trace record (no `trace_version`)")
            if version not in READABLE_VERSIONS:
                raise TraceError(f"{path}: line {line} is a version {version} trace record; this gsr reads "
                                 f"versions {', '.join(map(str, READABLE_VERSIONS))}")
            if record.get("kind") == HEADER:
                if not isinstance(record.get("nodes"), list) or not isinstance(record.get("program"), dict):
                    raise TraceError(f"{path}: line {line} is a header record without `program` and `nodes`")
                headers[record.get("key")] = record
                continue
            if record.get("kind") != RUN_SUMMARY:
                _check_label(path, line, record)
            yield line, None, record


def _check_label(path, line: int, record: dict) -> None:
    """Refuse an item record whose recorded label gsr cannot have written (data.recorded_label_problem)."""
    result = record.get("result")
    if type(result) is dict and result.get("label") is not None:
        problem = recorded_label_problem(result["label"], result.get("mode", record.get("mode")), result.get("scale"))
        if problem:
            raise TraceError(f"{path}: line {line}: {problem} (was the file edited?)")


def read_trace(path: str | Path, summaries: bool = False) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every item record of a file (and the run summary with `summaries`),
    in the logical form (the module docstring), whichever version wrote the file.

    Raises TraceError on a malformed line."""
    for line, header, record in read_records(path):
        if header is not None:
            try:
                logical = logical_record(header, record)
            except MALFORMED as exc:
                raise malformed(path, line, exc) from None
            yield line, logical
        elif record.get("kind") == RUN_SUMMARY:
            if summaries:
                yield line, record
        else:
            yield line, record
