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

**Trace record** (one JSON object per item, `--trace trace.jsonl`)::

    {"trace_version": 1,
     "program": {"name": ..., "hash": "sha256:...", "path": "examples/x.gsr",
                 "abs_path": "/home/me/proj/examples/x.gsr", "sink": "final"},
     "mode": "pointwise",
     "item": {"id": "tc-000", "line": 1, "candidates": ["A"]},
     "nodes": [
       {"id": "coherent", "kind": "criterion", "type": "Score[1..3]", "procedure": "human(field: ...)",
        "output": [2.3333333333],
        "judgments": [{"value": 2.3333333333, "status": "ok", "reason": null, "raw": "2.3333333333",
                       "provenance": {"procedure": "human", "field": "scores.coherence"}}]},
       {"id": "body", "kind": "reduce", "type": "Score", "op": "weighted_mean",
        "params": {"weights": [0.5, 0.5], "on_abstain": {"enum": "fail"}},
        "inputs": {"items": ["body.items[0]", "body.items[1]"]},
        "output": [0.6666666666]}, ...],
     "readout": {"mode": "pointwise", "status": "ok", "sink": {"A": 0.7}, "raw": 3.8, "score": 4, "reason": null},
     "result": {...the result line...}}

Nodes appear in the program's topological order; `inputs` lists, per port, the
source node ids in slot order; `output` holds one value per candidate (null for an
abstention, or for a criterion whose judgment was invalid; the whole `output` is
null for a node that was never computed). Floats are written with `repr`, so
they round-trip exactly.

**Per-item programs** (`gsr run --programs index.jsonl`): every record names its own
program, and its header also holds `"index"` (the index file as given); the result
line gets `"program": {"name", "hash", "path"}`. An item that was not run under a
program (none compiled, it does not check, another mode or scale) has no nodes, its
result's `status` is "invalid", and its header has null `name` / `hash` when the
program could not be loaded.

**Run summary**: a run that completes ends its trace with one more record,
`{"trace_version": 1, "kind": "run_summary", "items", "ok", "invalid", "failed",
"label_problems", "labelled", "wall_s", "mode", "program" | "programs", "judges":
{"llm": {"calls", "http_requests", "cache_hits", "prompt_tokens",
"completion_tokens", ...}}}`. Item records have no `kind`; `read_trace` yields only
item records unless asked for the summary too (`summaries=True`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterator

from gsrlang.data import DataError
from gsrlang.jsonl import read_jsonl
from gsrlang.judgment import Judgment
from gsrlang.program import Program, json_value
from gsrlang.runtime.compose import Plan
from gsrlang.runtime.executor import ItemRun
from gsrlang.runtime.values import ABSTAIN

__all__ = ["RUN_SUMMARY", "TRACE_VERSION", "TraceError", "dumps", "is_summary", "judgment_json", "read_trace",
           "result_line", "summary_record", "trace_record", "TraceWriter"]

TRACE_VERSION = 1
RUN_SUMMARY = "run_summary"  # the `kind` of the record that ends a completed run's trace


class TraceError(DataError):
    """A trace file cannot be read (a line that is not a trace record)."""


def dumps(obj) -> str:
    """A results line: JSON, readable spacing."""
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def dumps_compact(obj) -> str:
    """A trace record: JSON without optional spaces (traces are large; every byte is parsed on replay)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _jsonable(value):
    if value is ABSTAIN:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # invalid answers may be NaN; keep the file strict JSON
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def judgment_json(j: Judgment) -> dict:
    return {"value": _jsonable(j.value), "status": j.status, "reason": j.reason, "raw": j.raw,
            "provenance": j.provenance}


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


def trace_record(run: ItemRun, plan: Plan | None, path: str | None = None, static: _Static | None = None) -> dict:
    static = static or _Static(plan, path)
    nodes = []
    if run.values is not None and static.nodes:
        for i, base in enumerate(static.nodes):
            d = dict(base)
            v = run.values[i]
            d["output"] = None if v is None else [_jsonable(x) for x in v]
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


class TraceWriter:
    """Writes trace records to an open text file: for one program, or each item's own (`static`)."""

    def __init__(self, handle, plan: Plan | None = None, path: str | None = None):
        self.handle = handle
        self.plan = plan
        self.static = _Static(plan, path) if plan is not None else None

    def write(self, run: ItemRun, static: _Static | NotRun | None = None) -> None:
        static = static or self.static
        self.handle.write(dumps_compact(trace_record(run, self.plan, static=static)) + "\n")

    def write_summary(self, record: dict) -> None:
        self.handle.write(dumps_compact(record) + "\n")


def summary_record(**fields) -> dict:
    """The run-summary record that ends a completed run's trace (see the module docstring)."""
    return {"trace_version": TRACE_VERSION, "kind": RUN_SUMMARY, **fields}


def is_summary(record: dict) -> bool:
    return record.get("kind") == RUN_SUMMARY


def read_trace(path: str | Path, summaries: bool = False) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every item record of a file (and the run summary with `summaries`).

    Raises TraceError on a malformed line."""
    path = Path(path)
    for line, record in read_jsonl(path, TraceError, "a trace record"):
        if "trace_version" not in record:
            raise TraceError(f"{path}: line {line} is not a trace record (no `trace_version`)")
        if record["trace_version"] != TRACE_VERSION:
            raise TraceError(f"{path}: line {line} is a version {record['trace_version']} trace record; "
                             f"this gsr reads version {TRACE_VERSION}")
        if "kind" in record and not summaries and record["kind"] == RUN_SUMMARY:
            continue
        yield line, record
