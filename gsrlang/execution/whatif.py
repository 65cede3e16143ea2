"""What-if replay with a results file, column by column: `gsr replay TRACE --program OTHER.gsr --out FILE`.

The item-by-item replay rebuilds every item from its record and recomposes it
under the other program with the interpreter (about 80 us an item). Here the
trace's criteria are read into columns (`table_from_trace`) and the whole graph is
evaluated by the columnar evaluator (every node column the
interpreter's bit for bit); then one more pass over the records writes each
item's result line:

- an item with a valid result in the columns gets the line `result_line` writes
  for it, assembled from its record (id, line, candidates, label) and the sink's
  column and its readout (the one readout, gsrlang.semantics.readout);
- an item the columns leave invalid, with the causes settling found (`Evaluation.causes`),
  gets the invalid line, its reason the item path's sentence (`executor.reason_of`: an
  operator's cause from the batch settle, a criterion's from its recorded judgment by
  `check_judgment`, the item path's own reading of one cell);
- every other item is replayed item by item, which gives its line: a failed one, one with a
  skipped judgment (its summary counts what the program needs), candidates that repeat, a
  criterion output or a sink of -0.0 (equal to 0.0, but written otherwise), a record of an
  unexpected shape.

So the file is the item-by-item replay's byte for byte (tests/test_whatif.py). A
trace the columns cannot read at all returns None before anything is written, and
the caller replays it item by item, which reports it as it always did.
"""

from __future__ import annotations

import time

import numpy as np

from gsrlang.execution.executor import check_judgment, reason_of
from gsrlang.execution.replay import ReplayError, Stored, replay_records
from gsrlang.execution.runs import RunSummary, open_output, recorded_complete, results_end
from gsrlang.execution.verify import count_valid, negative_zeros
from gsrlang.lang.program import CheckedProgram
from gsrlang.lang.syntax.parser import gc_paused
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.readout import as_read
from gsrlang.trace.decode import recorded_judgment
from gsrlang.trace.read import read_records
from gsrlang.trace.schema import MALFORMED, TraceError, dumps, invalid_line, is_summary, ok_line

__all__ = ["recompose_columnar"]


def recompose_columnar(trace_path: str, program: CheckedProgram, program_label: str, out: str) -> RunSummary | None:
    """`replay_file(trace, program, verify=False, out=out)`'s summary and results file, or None (nothing
    written) when the trace's criteria cannot be read into columns for `program`."""
    from gsrlang.execution.tracetable import table_from_trace
    from gsrlang.semantics.evaluate import Evaluator

    t0 = time.perf_counter()
    with gc_paused():  # what is read is kept: collections would walk it again and again, for nothing (no cycles)
        try:
            table = table_from_trace(program, trace_path, program_label)
        except (ReplayError, TraceError):
            return None  # the item-by-item replay says what is wrong, as it always did
        evaluation = Evaluator(program).run(table)
        summary = RunSummary(program.name, program.content_hash, table.mode)
        summary.recorded = table.recorded
        _write(trace_path, program, program_label, out, table, evaluation, summary)
    summary.seconds = time.perf_counter() - t0
    return summary


def _fast_rows(table, evaluation) -> tuple[list, list]:
    """Per item, whether its line can be assembled from the columns (see the module docstring): (valid ones,
    invalid ones with causes)."""
    plain = ~table.failed
    m = table.m
    for column in table.criteria.values():
        if column.values.dtype == np.float64:
            plain &= ~negative_zeros(column.values).reshape(-1, m).any(axis=1)
    invalid = plain & ~evaluation.ok
    if evaluation.causes:
        caused = np.zeros(len(plain), bool)
        caused[list(evaluation.causes)] = True
        invalid &= caused
    else:
        invalid[:] = False
    fast = plain & evaluation.ok & ~negative_zeros(evaluation.sink).any(axis=1)
    return fast.tolist(), invalid.tolist()


def _write(trace_path, program: CheckedProgram, program_label: str, out: str, table, evaluation, summary) -> None:
    plan = Plan(program)
    mode, m = table.mode, table.m
    source = {"name": program.name, "hash": program.content_hash}
    pointwise = program.readout.pointwise if mode == "pointwise" else None
    pairwise = program.readout.pairwise if mode == "pairwise" else None
    scale = [pointwise.lo, pointwise.hi] if pointwise is not None else None
    fast, invalid = _fast_rows(table, evaluation)
    sinks = evaluation.sink.tolist()
    reads = as_read(pointwise, evaluation.raw, evaluation.score, evaluation.winner)
    judged = len(plan.criteria) * m
    skipped = table.skipped.tolist() if table.skipped is not None and table.skipped.any() else None
    handle = open_output(out)
    try:
        write = handle.write
        k = 0
        for line_no, header, rec in read_records(trace_path):
            if header is None and is_summary(rec):
                continue
            item, result = rec.get("item"), rec.get("result")
            line = None
            if type(item) is dict and type(result) is dict:
                if fast[k]:
                    line = _line(item, result, sinks[k], reads[k], m, mode, source, pointwise, scale)
                elif invalid[k]:
                    line = _invalid(plan, header, rec, item, result, evaluation.causes[k], m, mode, source, scale)
                    if line is not None:
                        k += 1
                        count_valid(summary, line["id"], line["label"], None, "label_error" in line, judged, False)
                        write(dumps(line) + "\n")
                        continue
            k += 1
            if line is None:  # item by item
                record = Stored(header, rec) if header is not None else rec
                for _, _, run, line, _ in replay_records(plan, [(line_no, record)], False, program_label):
                    summary.count(run, line, True)
                    summary.count_needs(plan, run)
                    write(dumps(line) + "\n")
                continue
            pred = line["score"] if pointwise is not None else line["winner"]
            skips = skipped[k - 1] if skipped is not None else 0  # settled although the recorded run skipped some
            count_valid(summary, line["id"], line["label"], pred, "label_error" in line, judged - skips, True, skips)
            write(dumps(line) + "\n")
        write(dumps(results_end(summary, complete=recorded_complete(summary.recorded))) + "\n")
    finally:
        if out != "-":
            handle.close()


def _line(item: dict, result: dict, sink: list, read, m: int, mode: str, source: dict, pointwise,
          scale) -> dict | None:
    """The result line `result_line` writes for a valid item (None where its candidates cannot have one)."""
    candidates = _candidates(item, m)
    if candidates is None:
        return None
    parts = (item.get("id"), item.get("line", 0), mode, source, dict(zip(candidates, sink)), result.get("label"),
             result.get("label_error"))
    if pointwise is not None:
        return ok_line(*parts, read[1], read[0], scale)
    return ok_line(*parts, winner=read)


def _candidates(item: dict, m: int):
    candidates = item.get("candidates")
    if type(candidates) is not list or len(candidates) != m or any(type(c) is not str for c in candidates) \
            or len(set(candidates)) != m:
        return None
    return candidates


def _invalid(plan: Plan, header, rec: dict, item: dict, result: dict, causes, m: int, mode: str, source: dict,
             scale) -> dict | None:
    """The result line of an item the columns leave invalid, with the item path's reason; None where the item
    path must say it (a skipped judgment, a record of an unexpected shape)."""
    candidates = _candidates(item, m)
    if candidates is None:
        return None
    try:
        if header is not None:
            out, marks = rec.get("out"), rec.get("j") or {}
            positions = Stored(header, rec).positions()
            recorded = lambda cid: (out[positions[cid]], marks.get(cid))  # noqa: E731
        else:
            by_id = {n["id"]: n for n in rec["nodes"]}
            recorded = lambda cid: (by_id[cid].get("output"), by_id[cid].get("judgments"))  # noqa: E731
        cells = {}
        for _, node in plan.criteria:
            outputs, js = recorded(node.id)
            outputs = outputs or [None] * m
            js = js or [{}] * m
            score = node.type.kind == "score"
            for c in range(m):
                j, v = check_judgment(node, recorded_judgment(js[c], outputs[c], score), "")
                if j.status == "skipped":
                    return None
                cells[node.id, c] = v if j.status == "invalid" else None
        cells_of = lambda node, c, where: None if cells[node.id, c] is None else where + cells[node.id, c]  # noqa: E731
        reason = reason_of(plan, causes, candidates, cells_of)
    except MALFORMED:
        return None
    if reason is None:
        return None
    return invalid_line(item.get("id"), item.get("line", 0), mode, source, result.get("label"),
                        result.get("label_error"), reason, scale)
