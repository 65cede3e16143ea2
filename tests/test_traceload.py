"""The trace loader (`table_from_trace`, gsrlang/execution/tracetable.py) gives the columns of the
value-by-value reading.

The reference below reads every record in the logical form (`read_trace`), decodes
each recorded output with `value_from_json` and turns each judgment into a cell
with `table_from_cells` (the interpreter's `check_judgments` rules). Generated
traces (hypothesis) hold every criterion type, abstained / invalid / skipped
judgments, nulls, values of the wrong JSON type or outside the range, nodes never
computed, failed items and items with the wrong number of candidates; each is
written as a version 2 file (header + lean records) and as a version 1 file (the
logical records), and both must load to the reference's arrays.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsrlang.execution.planner import RunConfig
from gsrlang.execution.replay import ReplayError
from gsrlang.execution.runs import run_file
from gsrlang.execution.tracetable import table_from_cells, table_from_trace
from gsrlang.files.dataset import ColumnMap
from gsrlang.judges.registry import default_registry
from gsrlang.lang.check.driver import analyze
from gsrlang.semantics.evaluate import Evaluator, Table
from gsrlang.semantics.values import RuntimeFailure, value_from_json
from gsrlang.trace.read import read_trace
from gsrlang.trace.schema import TraceError

PROGRAM_TEXT = """
rubric r
task pointwise { scale = 1..5  quantize = round }
task pairwise { epsilon = 0.0 }
criterion s: Score[1..3] = human(field: "s")
criterion so: Score? = human(field: "so")
criterion b: Bool = human(field: "b")
criterion bo: Bool? = human(field: "bo")
criterion o: Ordinal{low, mid, high}? = human(field: "o")
criterion n: Nominal{x, y} = human(field: "n")
node body = mean(items: [scale(s), default(so, value: 0.5), normalize(b), normalize(default(bo, value: true)),
                         normalize(default(o, value: mid))])
sink cap(base: body, trigger: is(n, level: x), at: 0.7)
"""
PROGRAM = analyze(PROGRAM_TEXT).program

CRITERIA = [(n.id, n.type) for n in PROGRAM.criteria]


def reference(program, path: str) -> Table:
    """The value-by-value reading of a trace (what the loader replaced), for the same checks' outcome."""
    types = {n.id: n.type.maybe(True) for n in program.criteria}
    rows, mode = [], None
    for _, record in read_trace(path):
        mode = mode or record.get("mode")
        item, result, nodes = record.get("item") or {}, record.get("result") or {}, record.get("nodes")
        if record.get("status") == "failed" or not nodes:
            rows.append((item.get("id"), result.get("label"), None))
            continue
        by_id = {n["id"]: n for n in nodes}
        judged = {}
        for cid, t in types.items():
            outputs, recorded = by_id[cid].get("output"), by_id[cid].get("judgments")
            row = []
            for c in range(len(item.get("candidates") or ())):
                status = recorded[c].get("status", "ok") if recorded else "ok"
                if status in ("invalid", "skipped") or outputs is None:
                    row.append(("invalid", None))
                    continue
                try:
                    row.append((status, value_from_json(outputs[c], t)))
                except RuntimeFailure:
                    row.append(("invalid", None))
            judged[cid] = row
        rows.append((item.get("id"), result.get("label"), judged))
    return table_from_cells(program, mode or "pointwise", rows)


def assert_same(a: Table, b: Table) -> None:
    assert (a.mode, a.ids, a.labels) == (b.mode, b.ids, b.labels)
    assert np.array_equal(a.failed, b.failed)
    assert a.criteria.keys() == b.criteria.keys()
    for cid in a.criteria:
        x, y = a.criteria[cid], b.criteria[cid]
        for part in ("values", "abstain", "invalid"):
            u, v = getattr(x, part), getattr(y, part)
            assert u.dtype == v.dtype and np.array_equal(u, v), (cid, part, u, v)


# ---- generated traces --------------------------------------------------------------------------------------------
def _good(draw, t):
    if t.kind == "bool":
        return draw(st.booleans())
    if t.kind == "score":
        return draw(st.one_of(st.sampled_from([t.lo, t.hi]), st.floats(t.lo, t.hi, allow_nan=False)))
    return draw(st.sampled_from(t.labels))


def _bad(draw, t):
    """A recorded value that does not fit `t` (or an integer, which a Score reads as a float)."""
    return draw(st.sampled_from([t.hi + 1.0 if t.kind == "score" else 2.5, "nope", True, 3, "nan", [1]]))


@st.composite
def cell(draw, t):
    """(judgment record, recorded output) of one candidate."""
    kind = draw(st.sampled_from(["ok"] * 6 + ["abstained", "invalid", "skipped", "null", "bad", "other"]))
    if kind == "ok":
        return {}, _good(draw, t)
    if kind == "null":
        return {}, None
    if kind == "bad":
        return {}, _bad(draw, t)
    if kind == "other":  # a status this gsr does not know reads as ok
        return {"status": "pending"}, _good(draw, t)
    value = draw(st.sampled_from([None, _good(draw, t), _bad(draw, t)]))
    return {"status": kind, "reason": "r"}, value


@st.composite
def traces(draw):
    """(mode, list of (item id, label, status, candidates, {criterion: [(judgment, output)] or None per node}))."""
    mode = draw(st.sampled_from(["pointwise", "pairwise"]))
    m = 1 if mode == "pointwise" else 2
    items = []
    for k in range(draw(st.integers(0, 12))):
        status = draw(st.sampled_from(["ok"] * 5 + ["failed", "invalid"]))
        n = draw(st.sampled_from([m] * 6 + [3 - m]))
        cells = None
        if status != "failed":
            cells = {cid: None if draw(st.integers(0, 15)) == 0 else [draw(cell(t)) for _ in range(n)]
                     for cid, t in CRITERIA}
        label = draw(st.sampled_from([None, 1.0, 3.5])) if mode == "pointwise" else draw(st.sampled_from([None, "first"]))
        items.append((f"i{k}", label, status, ["A", "B", "C"][:n], cells))
    return mode, items


def write_v2(path, mode, items) -> None:
    ids = [cid for cid, _ in CRITERIA]
    nodes = [{"id": cid, "kind": "criterion", "type": str(t), "procedure": "human()"} for cid, t in CRITERIA]
    header = {"trace_version": 2, "kind": "header", "key": 0,
              "program": {"name": "r", "hash": PROGRAM.content_hash, "path": None, "sink": "x"}, "nodes": nodes}
    lines = [header]
    for item_id, label, status, cands, cells in items:
        rec = {"p": 0, "mode": mode, "item": {"id": item_id, "line": 1, "candidates": cands}, "status": status,
               "result": {"id": item_id, "status": status, "mode": mode, "label": label, "sink": None}}
        if cells is not None:
            rec["out"] = [None if cells[cid] is None else [v for _, v in cells[cid]] for cid in ids]
            rec["j"] = {cid: [j for j, _ in cells[cid]] for cid in ids if cells[cid] is not None}
        lines.append(rec)
    lines.append({"trace_version": 2, "kind": "run_summary", "items": len(items)})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def write_v1(path, source) -> None:
    """The logical records of a version 2 file, written as a version 1 trace."""
    path.write_text("".join(json.dumps({**rec, "trace_version": 1}) + "\n" for _, rec in read_trace(source)))


@settings(max_examples=150, deadline=None)
@given(traces())
def test_the_loader_gives_the_value_by_value_arrays_on_generated_v1_and_v2_traces(tmp_path_factory, trace):
    mode, items = trace
    tmp = tmp_path_factory.mktemp("t")
    v2, v1 = tmp / "v2.jsonl", tmp / "v1.jsonl"
    write_v2(v2, mode, items)
    write_v1(v1, v2)
    expected = reference(PROGRAM, str(v2))
    for path in (v2, v1):
        got = table_from_trace(PROGRAM, str(path))
        assert_same(got, expected)
        assert got.recorded == ({"trace_version": 2, "kind": "run_summary", "items": len(items)}
                                if path == v2 else None)


def test_the_loader_equals_the_reference_on_a_recorded_run_and_evaluates_alike(tmp_path):
    """A trace written by gsr run (human judges: missing fields abstain, or are invalid where the type cannot
    abstain; out-of-range and unknown labels), through both readings, then evaluated."""
    import random

    rng = random.Random(3)
    pick = rng.choice
    rows = [{"id": f"r{k}", "label": pick([1, 3, 5, None]), "input": "q", "response": "x", "s": pick([1.0, 2.5, 3.0, 4.0, None]),
             "so": pick([0.2, None, 1.5]), "b": pick([True, False, None]), "bo": pick([True, None]),
             "o": pick(["low", "high", "top", None]), "n": pick(["x", "y", None])} for k in range(300)]
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace = tmp_path / "t.jsonl"
    run_file(PROGRAM, data, ColumnMap(id_field="id", label_field="label"), default_registry(), "pointwise",
             RunConfig(trace=str(trace)))
    got, expected = table_from_trace(PROGRAM, str(trace)), reference(PROGRAM, str(trace))
    assert_same(got, expected)
    for cid in ("so", "o"):  # some abstain, some are invalid (out of range, not a label), some have a value
        c = got.criteria[cid]
        assert c.abstain.any() and c.invalid.any() and not (c.abstain | c.invalid).all()
    assert got.recorded["items"] == 300
    write_v1(tmp_path / "v1.jsonl", trace)
    assert_same(table_from_trace(PROGRAM, str(tmp_path / "v1.jsonl")), expected)
    a, b = Evaluator(PROGRAM).run(got), Evaluator(PROGRAM).run(expected)
    assert a.predictions() == b.predictions() and a.ok.any()


# ---- bad traces -------------------------------------------------------------------------------------------------
def _write(path, *records) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


def test_a_trace_of_mixed_modes_another_program_or_malformed_records_is_refused(tmp_path):
    mode, items = "pointwise", [("a", 1.0, "ok", ["A"], {cid: [({}, None)] for cid, _ in CRITERIA})]
    write_v2(tmp_path / "ok.jsonl", mode, items)
    header, rec, _ = (json.loads(x) for x in (tmp_path / "ok.jsonl").read_text().splitlines())
    mixed = _write(tmp_path / "mixed.jsonl", header, rec, {**rec, "mode": "pairwise"})
    with pytest.raises(ReplayError, match="line 3 is a pairwise item, the others pointwise"):
        table_from_trace(PROGRAM, mixed)
    other = {**header, "nodes": [{**n, "type": "Bool"} if n["id"] == "s" else n for n in header["nodes"]]}
    with pytest.raises(ReplayError, match="criterion `s` was recorded as `Bool` but is `Score\\[1..3\\]`"):
        table_from_trace(PROGRAM, _write(tmp_path / "other.jsonl", other, rec))
    for broken in ({**rec, "out": 7}, {**rec, "j": {"s": [3]}}, {**rec, "result": "x"}):
        with pytest.raises(TraceError, match="line 2 is not a well-formed trace item record"):
            table_from_trace(PROGRAM, _write(tmp_path / "bad.jsonl", header, broken))
    with pytest.raises(TraceError, match="line 2 is not a well-formed trace item record"):  # the logical reader too
        list(read_trace(_write(tmp_path / "bad.jsonl", header, {**rec, "out": 7})))
    with pytest.raises(TraceError, match="names header 0, which no earlier line declares"):
        table_from_trace(PROGRAM, _write(tmp_path / "cut.jsonl", rec))


@pytest.mark.parametrize("command", ["replay", "ablate", "tune"])
def test_commands_meet_a_malformed_trace_with_a_one_line_error(tmp_path, capsys, command):
    from gsrlang.cli import main

    write_v2(tmp_path / "ok.jsonl", "pointwise", [("a", 1.0, "ok", ["A"], {cid: [({}, None)] for cid, _ in CRITERIA})])
    header, rec, _ = (json.loads(x) for x in (tmp_path / "ok.jsonl").read_text().splitlines())
    trace = _write(tmp_path / "bad.jsonl", header, {**rec, "out": 7})
    program = tmp_path / "p.gsr"
    program.write_text(PROGRAM_TEXT.replace("task pairwise { epsilon = 0.0 }\n", ""))  # gsr tune: one task
    args = {"replay": ["replay", trace, "--program", str(program)], "ablate": ["ablate", str(program), "--trace", trace],
            "tune": ["tune", str(program), "--trace", trace, "--all"]}[command]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"gsr {command}: error: {trace}: line 2 is not a well-formed trace item record " \
                  "(TypeError: object of type 'int' has no len())"
