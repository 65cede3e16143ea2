"""The trace schema: what a run writes for every item (result lines, trace records), in one place.

**Result line** (one JSON object per item, `--out results.jsonl`; read by
`gsrlang.analysis.metrics.read_results` / `metrics_from_results`)::

    {"id": "tc-000", "line": 1, "status": "ok", "mode": "pointwise",
     "score": 4, "raw": 3.8125, "scale": [1.0, 5.0],          # pointwise
     "winner": "first",                                       # pairwise (instead of score/raw/scale)
     "sink": {"A": 0.703125},                                 # the sink Score per candidate, or null
     "label": 4.6666666667,                                   # the gold label (parsed), or null
     "label_error": "...",                                    # only when the row's label was unusable
     "reason": null}                                          # why the item is invalid / failed

A completed run ends its results file with `{"kind": "run_summary", "complete": true,
"mode", "items", "ok", "invalid", "failed"}` (`gsrlang.execution.runs.results_end`);
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
from json.encoder import c_make_encoder, encode_basestring

from gsrlang.files.dataset import DataError
from gsrlang.semantics.judgment import Judgment
from gsrlang.semantics.readout import READOUT_REASON
from gsrlang.semantics.values import ABSTAIN, Unsettled

__all__ = ["HEADER", "MALFORMED", "READABLE_VERSIONS", "RUN_SUMMARY", "TRACE_VERSION", "TraceError", "dumps",
           "invalid_line", "is_summary", "jsonable", "judgment_json", "judgment_v1", "judgment_v2", "malformed", "ok_line",
           "prediction", "readout_of_result", "result_line", "summary_record", "unknown_flags"]

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
# its C encoder, made once too (`JSONEncoder.encode` makes one a call, with a table of the containers seen to
# catch cycles, which a line cannot have): what a call of `encode` runs, for a fraction of its cost
_C_RESULTS = None if c_make_encoder is None else c_make_encoder(
    None, _RESULTS.default, encode_basestring, None, _RESULTS.key_separator, _RESULTS.item_separator, False,
    False, True)


def dumps(obj) -> str:
    """A results line: JSON, readable spacing (what `json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))`
    writes). The one encoder of result lines: `gsr run` and `gsr replay --out` write them with it."""
    return "".join(_C_RESULTS(obj, 0)) if _C_RESULTS is not None and type(obj) is dict else _RESULTS.encode(obj)


def prediction(line: dict, mode: str):
    """What a result line says of its item, to compare with its label: its score (pointwise), or its winner."""
    return line.get("score") if mode == "pointwise" else line.get("winner")


def jsonable(value):
    if value is ABSTAIN or type(value) is Unsettled:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # invalid answers may be NaN; keep the file strict JSON
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def judgment_json(j: Judgment) -> dict:
    return {"value": jsonable(j.value), "status": j.status, "reason": j.reason, "raw": j.raw,
            "provenance": j.provenance}


def judgment_v2(j: Judgment) -> dict:
    """A judgment as a version 2 record holds it: only what differs from the defaults."""
    d = {}
    if j.status != "ok":
        d["status"] = j.status
        if j.value is not None and j.value is not ABSTAIN:
            d["value"] = jsonable(j.value)  # an invalid answer's value (an ok one's is the node's output)
    if j.reason is not None:
        d["reason"] = j.reason
    if j.raw is not None:
        d["raw"] = j.raw
    if j.provenance:
        d["provenance"] = j.provenance
    return d


def judgment_v1(d: dict, output) -> dict:
    """A version 2 judgment in the logical (version 1) form; `output` is the node's output for the candidate."""
    status = d.get("status", "ok")
    return {"value": output if status == "ok" else d.get("value"), "status": status, "reason": d.get("reason"),
            "raw": d.get("raw"), "provenance": d.get("provenance") or {}}


def result_line(run, program, source: dict | None = None) -> dict:
    """The results-file line for one item (see the module docstring).

    `program` is the program the item ran under (None: it ran under none, so no
    scale); `source` (per-item programs only) is the `program` field: name, hash, path.
    Otherwise the line names its program by name and content hash, so that results
    files can tell several runs of one program from runs of different programs.
    """
    if source is None and program is not None:
        source = {"name": program.name, "hash": program.content_hash}
    r = run.readout
    ok = run.status == "ok" and r is not None
    p = program.readout.pointwise if program is not None and run.mode == "pointwise" else None
    return _parts_line(run.id, run.line, run.status, run.mode, source, r.score if ok else None,
                       r.raw if ok else None, [p.lo, p.hi] if p is not None else None, r.winner if ok else None,
                       {c: jsonable(v) for c, v in r.sink.items()} if r is not None else None, run.label,
                       run.label_error, run.reason)


def ok_line(item_id, line: int, mode: str, source: dict, sink: dict, label, label_error, read, scale=None) -> dict:
    """The line `result_line` writes for an item with a valid result (status ok, no reason), from its parts: what
    the columnar paths write for the items the columns vouch for, with `result_line`'s keys in its order.
    `read` is its readout as `readout.as_read` gives it: (raw, score) pointwise, the winner pairwise; `scale`
    is the pointwise readout's [lo, hi]."""
    raw, score, winner = (*read, None) if mode == "pointwise" else (None, None, read)
    return _parts_line(item_id, line, "ok", mode, source, score, raw, scale, winner, sink, label, label_error, None)


def invalid_line(item_id, line: int, mode: str, source: dict, label, label_error, reason: str,
                 scale=None, sink: dict | None = None) -> dict:
    """The line `result_line` writes for an invalid item, from its parts: left invalid before its readout (no
    `sink`), or with the sink its readout refused."""
    if sink is not None:
        sink = {c: jsonable(v) for c, v in sink.items()}
    return _parts_line(item_id, line, "invalid", mode, source, None, None, scale, None, sink, label, label_error,
                       reason)


def _parts_line(item_id, line, status, mode, source, score, raw, scale, winner, sink, label, label_error,
                reason) -> dict:
    out = {"id": item_id, "line": line, "status": status, "mode": mode}
    if source is not None:  # None: the item ran under no program, and `result_line` names none
        out["program"] = source
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
    out["reason"] = reason
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
    out["reason"] = None if ok else (reason[len(READOUT_REASON):] if isinstance(reason, str)
                                      and reason.startswith(READOUT_REASON) else reason)
    return out


def unknown_flags(v) -> list | None:
    """One flag per candidate, true where the value is not settled; None when every value is."""
    return None if v is None or not any(type(x) is Unsettled for x in v) else [type(x) is Unsettled for x in v]


def summary_record(**fields) -> dict:
    """The run-summary record that ends a completed run's trace (see the module docstring)."""
    return {"trace_version": TRACE_VERSION, "kind": RUN_SUMMARY, **fields}


def is_summary(record: dict) -> bool:
    return record.get("kind") == RUN_SUMMARY
