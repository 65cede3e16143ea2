"""What-if replay with a results file, column by column: `gsr replay TRACE --program OTHER.gsr --out FILE`.

The item-by-item replay rebuilds every item from its record and recomposes it
under the other program with the interpreter (about 80 us an item). Here the
trace is read a chunk of items at a time (`TraceTables`, so that memory stays flat
in its length): the chunk's criteria go into columns, the whole graph is evaluated
by the columnar evaluator (every node column the interpreter's bit for bit), and the
chunk's records, read again, give each item's result line:

- an item with a valid result in the columns gets the line `result_line` writes
  for it, assembled from its record (id, line, candidates, label) and the sink's
  column and its readout (the one readout, gsrlang.semantics.readout; candidate ids
  that repeat make it refuse the sink);
- an item the columns leave invalid, with the causes settling found (`Evaluation.causes`),
  gets the invalid line, its reason the item path's sentence (`executor.reason_of`: an
  operator's cause from the batch settle, a criterion's from its recorded judgment by
  `check_judgment`, the item path's own reading of one cell); where the recorded run
  skipped a judgment, the summary counts what the program needs of it (`settle.liveness`
  over settling's rows of the item, `Evaluation.settled`);
- a failed row (or an item run under no program) is carried over, as the item path carries it.

A recorded Score of -0.0 is read as 0.0, as `check_judgment` reads it (`judged_column`).

So the file is the item-by-item replay's byte for byte (tests/test_whatif.py). The lines are
spooled to an anonymous temporary file until the whole trace is read. What is decided for the
whole trace, never per row (as verification decides it): a trace the columns cannot read, or
one holding a record of an unexpected shape (candidates that are not `m` strings, parts that
do not fit each other, an invalid item whose causes its record cannot give), returns None with
nothing written, and the caller replays it item by item, which says what is wrong with it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator

import numpy as np

from gsrlang.execution.executor import check_judgment, reason_of
from gsrlang.execution.inlinerun import column_line
from gsrlang.execution.replay import Refused, ReplayError, carried_run, needed_of, recorded_judgments, \
    recorded_outputs
from gsrlang.execution.runs import RunSummary, Spool
from gsrlang.lang.program import CheckedProgram
from gsrlang.lang.syntax.parser import gc_paused
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.readout import as_read
from gsrlang.semantics.settle import liveness
from gsrlang.trace.jsonio import loads
from gsrlang.trace.schema import MALFORMED, TraceError, dumps, invalid_line, prediction, result_line

__all__ = ["recompose_columnar"]


def recompose_columnar(trace_path: str, program: CheckedProgram, program_label: str,
                       out: str | None = None) -> RunSummary | None:
    """`replay_file(trace, program, verify=False, out=out)`'s summary and results file (`out` None: the summary
    alone), or None (nothing written) when the trace's criteria cannot be read into columns for `program`, or
    a record has an unexpected shape (see the module docstring).

    The trace is read a chunk of items at a time (`TraceTables`), keeping of each item what its result line
    takes of its record (its id, line, candidates, label and label error); the records of the few items whose
    lines need more (an item the columns leave invalid, a failed row, a record of an unexpected shape) are
    decoded again from their lines (`_Again`; the first reading checked them). The result lines are spooled
    to an anonymous temporary file and copied to `out` once the whole trace has been read."""
    from gsrlang.execution.tracetable import CHUNK, TraceTables
    from gsrlang.semantics.evaluate import Evaluator

    t0 = time.perf_counter()
    evaluator = Evaluator(program)
    plan = evaluator.plan
    reader = TraceTables(program, trace_path, program_label, keep=True)
    summary = None
    # (gc: no cycles in what is read, nothing to collect)
    with gc_paused(), Spool(out) if out is not None else contextlib.nullcontext() as spool, \
            _Again(trace_path) as again:
        try:
            for table in reader.chunks(CHUNK):
                if summary is None:
                    summary = RunSummary(program.name, program.content_hash, table.mode)
                _write(plan, program, spool, table, evaluator.run(table), summary, reader.kept, again)
                evaluator.forget()
        except (ReplayError, TraceError, Refused):
            return None  # the item-by-item replay says what is wrong, as it always did
        summary.recorded = reader.recorded
        if spool is not None:
            spool.keep(summary)
    summary.seconds = time.perf_counter() - t0
    return summary


class _Again:
    """The trace's lines read again, in order, for the records a result line needs whole (`record(line)`):
    decoded as the first reading decoded them, which checked them."""

    def __init__(self, path: str):
        self.path = path
        self.handle = self.lines = None

    def __enter__(self) -> "_Again":
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()

    def record(self, line: int) -> dict:
        """The record on trace line `line` (lines asked for in increasing order)."""
        if self.handle is None:
            self.handle = open(self.path, "rb")
            self.lines = enumerate(self.handle, start=1)
        for at, raw in self.lines:
            if at == line:
                return loads(raw)
        raise TraceError(f"{self.path}: line {line} is gone: the file changed while it was read")


def _write(plan: Plan, program: CheckedProgram, spool, table, evaluation, summary, kept: list,
           again: _Again) -> None:
    """The result lines of a chunk of items (`kept`: per item (trace line, header, its line's parts or None),
    `TraceTables.keep`) to `spool` (None: counted only)."""
    mode, m = table.mode, table.m
    source = {"name": program.name, "hash": program.content_hash}
    pointwise = program.readout.pointwise if mode == "pointwise" else None
    scale = [pointwise.lo, pointwise.hi] if pointwise is not None else None
    ok, failed = evaluation.ok.tolist(), table.failed.tolist()
    sinks = evaluation.sink.tolist()
    reads = as_read(pointwise, evaluation.raw, evaluation.score, evaluation.winner)
    judged = len(plan.criteria) * m
    skipped = table.skipped.tolist() if table.skipped is not None and table.skipped.any() else None
    write = (lambda line: spool.write(dumps(line) + "\n")) if spool is not None else (lambda line: None)
    ids, labels = table.ids, table.labels
    counted = []  # per item, `RunSummary.count_item`'s arguments: counted at the end, all at once where they can be

    for k, (line_no, header, parts) in enumerate(kept):
        rec = None  # the item's record, decoded again where its line needs more than its parts
        if failed[k]:  # carried over as it was recorded: a failed row, an item run under no program
            run = carried_run(again.record(line_no))
            line = result_line(run, program)
            counted.append(summary.entry(run, line))
            write(line)
            continue
        line = None
        if parts is not None and parts[1] is not None:
            item_line, candidates, label_error = parts
            if ok[k]:
                line = column_line(program, mode, ids[k], item_line, source, candidates, sinks[k], labels[k],
                                   label_error, reads[k], scale)
            else:
                line = _invalid(plan, header, rec := again.record(line_no), (ids[k], item_line), candidates,
                                evaluation.causes.get(k), m, mode, source, (labels[k], label_error), scale)
        if line is None:  # a record of an unexpected shape: the item-by-item replay says what is wrong
            raise Refused
        valid = line["status"] == "ok"
        skips = skipped[k] if skipped is not None else 0  # the recorded run's skipped judgments
        counted.append((line["id"], line["status"], "label_error" in line, judged - skips, skips, line["label"],
                        prediction(line, mode) if valid else None))
        if skips and not valid:  # what the program needs of what the recorded run skipped
            for criterion in _needed(plan, evaluation, k, m, rec if rec is not None else again.record(line_no),
                                     header):
                summary.needs[criterion] = summary.needs.get(criterion, 0) + 1
        write(line)
    summary.count_entries(counted)


def _invalid(plan: Plan, header, rec: dict, item: tuple, candidates: list, causes, m: int, mode: str,
             source: dict, labelled: tuple, scale) -> dict | None:
    """The result line of an item the columns leave invalid (`item`: its id and line, `labelled`: its label and
    label error), with the item path's reason (a judgment's from `check_judgment` of the recorded one); None
    for a record of an unexpected shape."""
    if not causes:
        return None
    try:
        judgments = recorded_judgments(plan, recorded_outputs(header, rec), m)
        cause = lambda node, c, where: check_judgment(node, judgments[node.id][c], where)[1]  # noqa: E731
        reason = reason_of(plan, causes, candidates, cause)
    except (*MALFORMED, ReplayError):
        return None
    return invalid_line(*item, mode, source, *labelled, reason, scale)


def _needed(plan: Plan, evaluation, k: int, m: int, rec: dict, header) -> list[str]:
    """`replay.needed_judgments` of item `k` from the evaluation: the criteria with a judgment the recorded run
    skipped that can still change its sink (`settle.liveness` over settling's rows of the item)."""
    todo, nodes = evaluation.settled  # (an item with a skipped judgment is among them: it is invalid in the columns)
    at = int(np.searchsorted(todo, k)) * m

    def statuses(node) -> Iterator:
        js = recorded(node.id)[1] or [{}] * m
        return (js[c].get("status") for c in range(m))

    try:
        recorded = recorded_outputs(header, rec)
        return needed_of(plan, statuses, lambda c: liveness(plan, nodes, at + c)[0])
    except (*MALFORMED, ReplayError):
        return []
