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

`status` is "ok", "invalid" (the item was evaluated but has no valid result: an
invalid judgment, a failed operator, a readout check) or "failed" (the data row
could not become an item). `score` is the quantized native score (an int, or the
raw float for `quantize = none`); `raw` is `lo + s * (hi - lo)` before quantizing.

**Trace record** (one JSON object per item, `--trace trace.jsonl`)::

    {"trace_version": 1,
     "program": {"name": ..., "hash": "sha256:...", "path": "examples/x.gsr", "sink": "final"},
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
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterator

from gsrlang.data import DataError
from gsrlang.judges.base import Judgment
from gsrlang.program import Program, json_value
from gsrlang.runtime.compose import Plan
from gsrlang.runtime.executor import ItemRun
from gsrlang.runtime.values import ABSTAIN

__all__ = ["TRACE_VERSION", "TraceError", "dumps", "judgment_json", "read_trace", "result_line", "trace_record",
           "TraceWriter"]

TRACE_VERSION = 1


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


def result_line(run: ItemRun, program: Program) -> dict:
    """The results-file line for one item (see the module docstring)."""
    out: dict = {"id": run.id, "line": run.line, "status": run.status, "mode": run.mode}
    r = run.readout
    ok = run.status == "ok" and r is not None
    if run.mode == "pointwise":
        out["score"] = r.score if ok else None
        out["raw"] = r.raw if ok else None
        p = program.readout.pointwise
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
    """The per-node parts of a trace record that do not depend on the item (computed once per program)."""

    def __init__(self, plan: Plan, path: str | None):
        program = plan.program
        self.header = {"name": program.name, "hash": program.content_hash, "path": path, "sink": program.sink}
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


def node_static(plan: Plan) -> list[dict]:
    """The item-independent part of each node's trace entry, in program order."""
    return _Static(plan, None).nodes


def trace_record(run: ItemRun, plan: Plan, path: str | None = None, static: _Static | None = None) -> dict:
    static = static or _Static(plan, path)
    nodes = []
    if run.values is not None:
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
        "result": result_line(run, plan.program),
    }


class TraceWriter:
    """Writes trace records for one program to an open text file."""

    def __init__(self, handle, plan: Plan, path: str | None):
        self.handle = handle
        self.plan = plan
        self.static = _Static(plan, path)

    def write(self, run: ItemRun) -> None:
        self.handle.write(dumps_compact(trace_record(run, self.plan, static=self.static)) + "\n")


def read_trace(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every trace record of a file; raises TraceError on a malformed line."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    with path.open("rb") as handle:
        for line, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise TraceError(f"{path}: line {line} is not a JSON object: {exc}") from None
            if not isinstance(record, dict) or "trace_version" not in record:
                raise TraceError(f"{path}: line {line} is not a trace record (no `trace_version`)")
            if record["trace_version"] != TRACE_VERSION:
                raise TraceError(f"{path}: line {line} is a version {record['trace_version']} trace record; "
                                 f"this gsr reads version {TRACE_VERSION}")
            yield line, record
