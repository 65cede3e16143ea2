"""Verify a trace column by column: what `gsr replay TRACE` does when it writes nothing item by item.

The item-at-a-time replay (`gsrlang.execution.replay`) recomputes every item with the
interpreter and compares it with its record: exact, and about 80 us an item. This
path reads the version 2 trace once, keeping per node one flat list of its recorded
outputs and per item its result line, evaluates the whole trace with the columnar
evaluator in exact mode (every node column equal to the interpreter's bit for bit,
items with an invalid row settled in one batch), and compares recorded and recomputed
values a column at a time, types included (1 is not 1.0). An item that is plainly
reproduced is counted and written from its record. Every other one is decided from
the evaluation, never replayed (`_Decide`): it gets the run the item path would
recompute (each node's value, unsettled where the batch settle left it so; its status;
the reason of an invalid one from the causes settling found, as `executor.reason_of`
words it; its readout), and from that run its result line (`result_line`), its first
difference (`replay.stored_difference`, the item path's own comparison) and its
counts. That covers:

- an item with an invalid row in any node column (an invalid or skipped judgment,
  a failed operator), recorded invalid or not, settled or not, with `u` flags or not;
- an item with any recorded output, score, raw score, sink, winner or result field
  that differs from the recomputed one (or a -0.0 that `--out` writes as 0.0);
- an item with an operator's outputs of the wrong shape (a difference);
- an item whose candidates repeat (the readout refuses them, as on the item path), or
  whose record lacks some criterion's judgments (read as ok ones, as the item path
  reads them);
- a failed row (no outputs), carried over as the item path carries it.

What remains is decided for the whole trace, never per row: a record the columns
cannot take (a criterion's outputs of the wrong shape, malformed judgments, an item
that is not an object, candidates that are not strings, another mode) makes
`verify_columnar` return None, as do version 1 records, a header of another program
or structure and a malformed record; the caller then replays the trace item by item,
which reports it as it always did. So the report (counts, first difference, the difference count) and the
results file are the item-at-a-time replay's.
"""

from __future__ import annotations

import contextlib
import time
from functools import partial
from pathlib import Path
from itertools import chain, repeat
from operator import eq, is_, itemgetter, ne

import attrs
import numpy as np

from gsrlang.execution.executor import ItemRun, check_judgment, reason_of
from gsrlang.execution.replay import Refused, Stored, carried_run, stored_difference, structure_getters
from gsrlang.execution.runs import RunSummary, Spool
from gsrlang.execution.tracetable import Criterion
from gsrlang.lang.program import CheckedProgram
from gsrlang.lang.syntax.parser import gc_paused
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.readout import ReadoutResult, as_read, refused_repeats
from gsrlang.trace.decode import SPECIAL, json_column, recorded_judgment
from gsrlang.files.dataset import RECORDED_PAIRWISE, recorded_label_problem
from gsrlang.trace.jsonio import DecodeError, loads
from gsrlang.trace.read import HEADER_LINE, check_label, read_records, record_header
from gsrlang.trace.schema import MALFORMED, TraceError, is_summary, result_line
from gsrlang.trace.write import node_static

__all__ = ["replay_item", "verify_columnar"]

_KINDS = {"score": float, "bool": bool, "ordinal": str, "nominal": str}
_FIRST = object()  # the header "before" the first record: no header (nor None) is it
CHUNK = 16384  # items verified together: memory stays flat in the length of the trace


@attrs.define(slots=True)
class ReadTrace:
    """What one pass over a chunk of a version 2 trace keeps for the column verification (`_read`).

    `m`: candidates per item (1 pointwise, 2 pairwise); `lines`: each record's line in the trace; `items`: per
    item (id, line, candidates); `results`: per item its result's (id, line, label, sink, score, raw, scale)
    or (id, line, label, sink, winner); `flats`: per node its recorded outputs, flat (m per item); `crits`:
    the criteria (`Criterion`) with their judgment statuses; `odd`: {item: (line, header, record)} of the
    records a column cannot take; `loose`: the items in the columns whose record is not a plain ok one (its
    status, `u` flags or result line); `label_errors`: {item: label error}; `raws` and `heads`: per item the bytes
    of its line and its header, for the items decided from the columns (`_Decide`); `scale`: pointwise, the
    program's scale, the one list that stands for every recorded scale equal to it, types included (`_read`)."""

    mode: str
    m: int
    lines: list
    items: list
    results: list
    flats: list
    crits: dict
    odd: dict
    loose: list
    label_errors: dict
    raws: list
    heads: list
    scale: list | None


def _strict_equal(a: list, b: list) -> np.ndarray:
    """Per position: same type and equal (JSON scalars)."""
    n = len(a)
    types = list(map(type, a))
    if set(types) <= {str, int} and types == list(map(type, b)) and a == b:  # no NaN: list equality is exact
        return np.ones(n, bool)
    same_value = np.fromiter(map(eq, a, b), bool, n)
    same_type = np.fromiter(map(is_, map(type, a), map(type, b)), bool, n)
    return same_value & same_type


def verify_columnar(trace_path: str, program: CheckedProgram, program_label: str = "the program",
                    out: str | None = None) -> RunSummary | None:
    """`replay_file(trace, program, verify=True, out)`'s summary for a version 2 trace of `program` (and its
    results file, the same bytes: see `_write_results`), or None when this trace must be replayed item by item
    (see the module docstring); then nothing is written. Raises ReplayError as it does."""
    with gc_paused():  # what is read is kept: collections would walk it again and again, for nothing (no cycles)
        return _verify(trace_path, program, program_label, out)


def _verify(trace_path: str, program: CheckedProgram, program_label: str, out: str | None) -> RunSummary | None:
    from gsrlang.semantics.evaluate import Evaluator

    t0 = time.perf_counter()
    evaluator = Evaluator(program)  # one for every chunk (its plan, what it derives from the program)
    plan = evaluator.plan
    static = node_static(plan)
    summary = None
    with Spool(out) if out is not None else contextlib.nullcontext() as spool:
        reader = _Reader(trace_path, program, plan, static)
        try:
            for read in reader.chunks(CHUNK):
                if summary is None:
                    summary = RunSummary(program.name, program.content_hash, read.mode)
                _verify_chunk(program, evaluator, static, read, summary, spool)
                evaluator.forget()  # (what it kept of the chunk's table)
                del read  # freed before the next chunk is read (see `_Reader.chunks`)
        except Refused:
            return None
        if reader.refused or summary is None:
            return None
        summary.recorded = reader.recorded
        summary.seconds = time.perf_counter() - t0
        if spool is not None:
            spool.keep(summary)
        return summary


def _verify_chunk(program: CheckedProgram, evaluator, static: list, read: ReadTrace, summary: RunSummary,
                  spool) -> None:
    """Verify one chunk of the trace's items (`_Reader.chunks`), counting them into `summary` in trace order and
    writing their result lines to `spool` (None: no `--out`)."""
    plan = evaluator.plan
    mode, m, lines, items, results = read.mode, read.m, read.lines, read.items, read.results
    flats, crits, odd, label_errors = read.flats, read.crits, read.odd, read.label_errors
    n = len(lines)
    rows = n * m
    iid, iline, cands = map(list, zip(*items))
    rid, rline, labels, sinks, *readout = map(list, zip(*results))
    suspect = np.zeros(n, bool)
    failed = np.zeros(n, bool)
    if odd:
        failed[list(odd)] = True
    suspect[read.loose] = True
    suspect |= failed
    suspect |= _item_problems(iid, iline, cands, rid, rline, labels, readout, mode, m, program, n, read.scale)

    # evaluate: the criteria's columns from their recorded outputs and judgment statuses
    from gsrlang.semantics.evaluate import Table
    from gsrlang.semantics.kernels import NodeValues

    positions = {node["id"]: i for i, node in enumerate(static)}
    types = list(map(set, map(partial(map, type), flats)))  # per node, the types of its recorded outputs
    decoded: list = [None] * len(flats)  # a criterion's outputs decoded once: for its column and the comparison
    columns = {}
    for cid, crit in crits.items():
        i = positions[cid]
        crit.values = flats[i]
        values, null, bad = decoded[i] = json_column(crit.type, flats[i], types[i])
        columns[cid] = NodeValues(*crit.column(rows, [], m, (values.copy(), null, bad.copy())))
    evaluation = evaluator.run(Table(mode, [None] * n, columns, failed, [None] * n))
    suspect |= ~evaluation.ok

    # every node's recorded outputs against its column
    for i, node in enumerate(plan.nodes):
        col = evaluation.nodes[node.id]
        bad = col.invalid | _differs(node.type, flats[i], col, rows, types[i], decoded[i])
        suspect |= bad.reshape(-1, m).any(axis=1)
    suspect |= _result_differs(cands, sinks, readout, evaluation, mode, m, program, n, spool is not None)
    todo = np.flatnonzero(suspect)
    decided = dict(zip(todo.tolist(), _Decide(plan, static, read, evaluation).items(todo))) if len(todo) else {}
    _summarize(plan, iid, labels, label_errors, readout[0], decided, m, summary)
    if spool is not None:
        _write_results(spool, program, mode, iid, iline, cands, sinks, labels, label_errors, readout, decided)


class _Decide:
    """The items of a chunk that are not plainly reproduced, decided from the evaluation's columns (no item is
    replayed): each gets the run the item path would recompute for it (`run`: its node values, settled where
    the batch settle settled them, its status, reason and readout), so that its result line (`result_line`),
    its first difference (`replay.stored_difference`) and its counts are the item path's."""

    def __init__(self, plan: Plan, static: list, read: ReadTrace, evaluation):
        self.plan, self.static, self.read, self.ev = plan, static, read, evaluation
        self.getters = structure_getters(static)
        self.m = read.m
        self.skipped = np.zeros(len(read.lines), np.int64)
        for crit in read.crits.values():
            for row, status in crit.status:
                if status == "skipped":
                    self.skipped[row // self.m] += 1

    def items(self, todo):
        """Per item of `todo`: (trace line, record, run, result line, first difference or None, judgments made,
        judgments skipped), as `replay_records` would give it (and `RunSummary.count` counts it)."""
        judged = len(self.plan.criteria) * self.m
        for k, values in zip(todo.tolist(), self.ev.item_values(self.plan.nodes, todo)):
            line, header, rec = _record((self.read.lines[k], self.read.heads[k], self.read.raws[k]))
            stored = Stored(header, rec)
            try:
                if k in self.read.odd:
                    if rec.get("status") != "failed" and rec.get("out") is not None:
                        raise Refused
                    run, made, skipped = carried_run(stored.logical()), 0, 0
                else:
                    run = self.run(k, rec, stored, values)
                    skipped = int(self.skipped[k])
                    made = judged - skipped
                result = result_line(run, self.plan.program)
                difference = stored_difference(self.static, self.getters, line, stored, run, result)
            except MALFORMED:
                raise Refused from None
            yield line, rec, run, result, difference, made, skipped

    def run(self, k: int, rec: dict, stored: Stored, values: tuple) -> ItemRun:
        """The run of item `k`, its node values `values` (`Evaluation.item_values`)."""
        plan, ev, m = self.plan, self.ev, self.m
        item, result = rec["item"], rec.get("result") or {}
        candidates = tuple(item["candidates"])
        if not all(type(c) is str for c in candidates):
            raise Refused
        fields = (item.get("id"), item.get("line", 0), ev.mode, candidates)
        labelled = dict(label=result.get("label"), label_error=result.get("label_error"))
        if ev.ok[k]:
            sink = ev.sink[k].tolist()
            readout = refused_repeats(plan.program.readout, ev.mode, candidates, sink)
            if readout is not None:  # candidates that repeat: the readout refuses them, as on the item path
                return ItemRun(*fields, "invalid", readout.item_reason, values, readout=readout, **labelled)
            sink = dict(zip(candidates, sink))
            if ev.mode == "pointwise":
                ((raw, score),) = as_read(plan.program.readout.pointwise, ev.raw[k:k + 1], ev.score[k:k + 1], None)
                readout = ReadoutResult("pointwise", "ok", sink, None, raw, score)
            else:
                readout = ReadoutResult("pairwise", "ok", sink, None, winner=ev.winner[k])
            return ItemRun(*fields, "ok", None, values, readout=readout, **labelled)
        causes = ev.causes.get(k)
        if not causes:
            raise Refused
        out, marks, where = rec["out"], rec.get("j") or {}, stored.positions()

        def criterion_cause(node, c, at):
            outputs, js = out[where[node.id]] or [None] * m, marks.get(node.id) or [{}] * m
            j, cause = check_judgment(node, recorded_judgment(js[c], outputs[c], node.type.kind == "score"), at)
            return cause if j.status in ("invalid", "skipped") else None

        reason = reason_of(plan, causes, candidates, criterion_cause)
        if reason is None:
            raise Refused
        return ItemRun(*fields, "invalid", reason, values, **labelled)


class _Reader:
    """The trace read a chunk at a time (`chunks`); `refused` once a record shows that this trace is not for this
    path (then the chunks stop), `recorded` its run summary record."""

    def __init__(self, path, program: CheckedProgram, plan: Plan, static: list):
        self.path, self.program, self.plan, self.static = path, program, plan, static
        self.refused, self.recorded = False, None

    def chunks(self, size: int):
        path = Path(self.path)
        if not path.is_file():  # `read_records` says so; the item path reports it
            self.refused = True
            return
        state = {"mode": None, "last": _FIRST, "key": _FIRST, "headers": set(), "known": {}}
        with path.open("rb") as handle:
            state["numbered"] = enumerate(handle, start=1)
            while True:
                try:
                    read = _read(path, self.program, self.plan, self.static, state, size)
                except (TraceError, *MALFORMED):
                    read = None
                if read is None:
                    self.refused = True
                    return
                if state.get("recorded") is not None:
                    self.recorded = state["recorded"]
                if not read.lines:
                    if state["mode"] is None:
                        self.refused = True
                    return
                last = len(read.lines) < size
                yield read
                del read  # the next chunk is made where this one was: one chunk's objects in memory, not two
                if last:
                    return


def _record(kept: tuple) -> tuple:
    """(line, header, record) of an item kept as (line, header, its line's bytes): decoded again as
    `read_records` decoded it."""
    line, header, raw = kept
    return line, header, loads(raw)


_CORE = itemgetter("p", "mode", "status", "item", "out", "j", "result")  # every key of a plain item record


def _read(path: Path, program: CheckedProgram, plan: Plan, static: list, state: dict, size: int) -> ReadTrace | None:
    """The next `size` item records of the trace (`state`: its numbered lines, and what earlier chunks learnt:
    the mode, the headers read and checked, the run summary), as a `ReadTrace`, or None when the trace is not
    for this path. Each line is decoded once, as `read_records` decodes it, and checked as it checks it (the
    same records refused: `record_header`, `check_label`; any refusal sends the whole trace to the item path).

    The loop does per record only what must look at it whole; the rest is done a column at a time afterwards.
    A record of the last header's key, the trace's mode, status ok, exactly the seven keys a plain record has
    (so no `u` flags, no `trace_version`), outputs of the program's shape, m candidates and every criterion's
    judgments takes the short way (`fast`): what `record_header` and the checks below would find of it is
    known already, judgments that are not m dicts each refuse the trace (as such a record does on the long way:
    `_Decide`), and its label is checked with the chunk's (`_labels_fine`). Keeping the record's parts beyond
    the loop (to take them a column at a time) was measured slower: the objects kept alive cost more to make and
    to walk again than the loop's few calls on them."""
    digest = program.content_hash
    mode = state["mode"]
    m = 1 if mode != "pairwise" else 2
    n_nodes = len(static)
    crits = {node.id: Criterion(node.id, node.type) for _, node in plan.criteria}
    statuses = {cid: c.status for cid, c in crits.items()}
    lines, raws, heads, items, results, loose = [], [], [], [], [], []
    flats: list[list] = [[] for _ in static]
    odd: dict = {}
    label_errors: dict = {}
    unchecked: list = []  # (line, record) of the short way's records whose label is checked one by one
    numbered = state["numbered"]
    known = state["known"]
    last = state["last"]
    key = state["key"]  # the key of the last header (an int), while it names that header
    headers: set = state["headers"]
    item_fields = itemgetter("id", "line", "candidates")
    keys = fields = placeholder = shape = source = fixed = expected = scale = scale_types = None
    if mode is not None:
        m, shape, source, fields, keys, placeholder, fixed, expected, scale, scale_types = state["fixed"]
    same_candidates = None  # the last candidates (all str) of the short way, the list equal ones are made
    cids = crits.keys()
    crit_at = [i for i, _ in plan.criteria]
    for line, raw in numbered:
        try:
            rec = loads(raw)
        except DecodeError:
            if not raw.strip():  # a blank line, as `read_records` skips it
                continue
            return None
        try:
            p, rmode, status, item, out, js, r = _CORE(rec)
            fast = type(p) is int and p == key and rmode == mode and status == "ok" and len(rec) == 7 and type(out) is list \
                and type(js) is dict and list(map(len, out)) == shape and len(item["candidates"]) == m \
                and js.keys() == cids
        except (TypeError, KeyError):
            fast = False
        if fast:
            k = len(lines)
            lines.append(line)
            raws.append(raw)
            heads.append(last)
            for _ in map(list.extend, flats, out):
                pass
            try:  # every criterion's judgments: m dicts, or the record does not fit the columns (see `_Decide`)
                _note_statuses(statuses, js, k, m)
            except (TypeError, ValueError):
                raise Refused from None
            # Lists equal to the last candidates (all str: an equal list is all str too) and scales equal to the
            # program's, types included, are replaced by that one list: the columns' checks of them, a pass over
            # each item's list (`_item_problems`, `_labels_fine`, `_result_differs`), then compare it at once.
            candidates = item["candidates"]
            if candidates == same_candidates:
                item["candidates"] = same_candidates
            elif type(candidates) is list and set(map(type, candidates)) == {str}:
                same_candidates = candidates
            try:  # a plain record: what its result line must hold to be written again as it is
                if scale is not None:
                    recorded = r["scale"]
                    if recorded == scale and list(map(type, recorded)) == scale_types:
                        r["scale"] = scale
                entry = item_fields(item), fields(r)  # with `_label_error`'s four, every key it must have
                error = _label_error(r, fixed, expected, keys)
                if error is not None:
                    label_errors[k] = error
            except (TypeError, AttributeError, KeyError, IndexError, ValueError):
                loose.append(k)  # in the columns, but its result line is compared and written from them
                unchecked.append((line, rec))
                entry = placeholder
            items.append(entry[0])
            results.append(entry[1])
            if len(lines) == size:
                break
            continue
        header = record_header(path, line, rec, known)
        if header is HEADER_LINE:
            key = state["key"] = _FIRST  # the key may name another header now
            continue
        if header is not None or not is_summary(rec):
            check_label(path, line, rec)
        if header is not last:
            if header is None:
                if is_summary(rec):
                    state["recorded"] = rec
                    continue
                return None  # version 1: item by item
            if id(header) not in headers:
                if header["program"].get("hash") != digest or header["nodes"] != static:
                    return None
                headers.add(id(header))
            last = state["last"] = header
        if mode is None:
            mode = rec.get("mode")
            if mode not in ("pointwise", "pairwise") or getattr(program.readout, mode) is None:
                return None
            m = 1 if mode == "pointwise" else 2
            shape = [m] * n_nodes
            source = {"name": program.name, "hash": digest}
            names = ("score", "raw", "scale") if mode == "pointwise" else ("winner",)
            fields = itemgetter("id", "line", "label", "sink", *names)
            keys = len(names) + 8  # keys: the fields', status, mode, program, reason (and perhaps label_error)
            placeholder = ((None, 0, None), (None, 0, None, None) + (None,) * len(names))
            fixed = itemgetter("status", "mode", "program", "reason")
            expected = ("ok", mode, source, None)
            if mode == "pointwise":
                pointwise = program.readout.pointwise
                scale, scale_types = [pointwise.lo, pointwise.hi], [type(pointwise.lo), type(pointwise.hi)]
            state["mode"] = mode
            state["fixed"] = m, shape, source, fields, keys, placeholder, fixed, expected, scale, scale_types
        if type(rec["p"]) is int:
            key = state["key"] = rec["p"]  # the next records of this header take the short way
        k = len(lines)
        lines.append(line)
        try:  # the parts the columns are made of: outputs of the program's shape, the criteria's judgments
            out = rec["out"]
            if rec["status"] == "failed" or rec["mode"] != mode or len(out) != n_nodes \
                    or len(rec["item"]["candidates"]) != m:
                raise TypeError
            try:
                shaped = list(map(len, out)) == shape
            except TypeError:
                shaped = False
            if not shaped:  # an operator's outputs of another shape: a difference, which the item path describes
                if any(len(out[i]) != m for i in crit_at):
                    raise TypeError
                out = [o if type(o) is list and len(o) == m else [None] * m for o in out]
            # every criterion's judgments: m dicts (`_note_statuses` raises for any other)
            js = rec.get("j")
            plain = type(js) is dict and js.keys() == cids
            if not plain:  # some criterion's judgments not recorded: read as ok ones, as the item path reads them
                js = {cid: row[:m] for cid, row in ((cid, js.get(cid)) for cid in cids) if row} if js else {}
            _note_statuses(statuses, js, k, m)
        except (TypeError, AttributeError, KeyError, IndexError, ValueError):
            odd[k] = (line, header, rec)
            entry = placeholder
            out = [[None] * m] * n_nodes
        else:
            try:  # a plain record: what its result line must hold to be written again as it is
                r = rec["result"]
                entry = item_fields(rec["item"]), fields(r)  # with `_label_error`'s four, every key it must have
                if not (plain and shaped) or rec["status"] != "ok" or "u" in rec:
                    raise TypeError
                error = _label_error(r, fixed, expected, keys)
                if error is not None:
                    label_errors[k] = error
            except (TypeError, AttributeError, KeyError, IndexError, ValueError):
                loose.append(k)  # in the columns, but its result line is compared and written from them
                entry = placeholder
        for _ in map(list.extend, flats, out):
            pass
        items.append(entry[0])
        results.append(entry[1])
        raws.append(raw)
        heads.append(header)
        if len(lines) == size:
            break
    state["last"] = last
    for line, rec in unchecked:
        check_label(path, line, rec)
    if results and not _labels_fine(mode, results):
        return None
    return ReadTrace(mode, m, lines, items, results, flats, crits, odd, loose, label_errors, raws, heads, scale)


def _label_error(r: dict, fixed, expected: tuple, keys: int):
    """The label error of result line `r` when it can be written again as it is (`fixed(r)`, its status, mode,
    program and reason, are `expected`; it has exactly `keys` keys, or one more: a label error), else None
    for none; raises TypeError (or KeyError) for a line that must be written from the columns instead."""
    if fixed(r) != expected:
        raise TypeError
    if len(r) == keys:
        return None
    if len(r) != keys + 1 or not r["label_error"]:
        raise TypeError
    return r["label_error"]


def _note_statuses(statuses: dict, js: dict, k: int, m: int) -> None:
    """Note item `k`'s judgments recorded invalid or skipped (`js`: per criterion its m judgments) in `statuses`
    (per criterion, (row, status)); raises TypeError or ValueError where a criterion's judgments are not m
    dicts (unpacking takes m values; `dict.__contains__` raises for all but a dict)."""
    has = dict.__contains__
    if m == 1:
        for cid, (d,) in js.items():
            if has(d, "status") and d["status"] in SPECIAL:
                statuses[cid].append((k, d["status"]))
    else:
        for cid, (d, e) in js.items():
            if has(d, "status") and d["status"] in SPECIAL:
                statuses[cid].append((2 * k, d["status"]))
            if has(e, "status") and e["status"] in SPECIAL:
                statuses[cid].append((2 * k + 1, e["status"]))


def _labels_fine(mode: str, results: list) -> bool:
    """Whether no recorded label of a chunk's result entries is one gsr cannot have written (as `check_label`
    finds it line by line: `recorded_label_problem` of the label, the mode and the line's scale; a placeholder
    entry has no label), looked at a column at a time where the column is plain, else one by one."""
    labels = list(map(itemgetter(2), results))
    if mode == "pairwise":
        with contextlib.suppress(TypeError):  # an unhashable label
            if set(labels) <= _PAIRWISE_LABELS and set(map(type, labels)) <= {str, type(None)}:
                return True
        return not any(recorded_label_problem(label, mode) for label in labels)
    scales = list(map(itemgetter(6), results))
    given = [x for x in labels if x is not None] if None in labels else labels
    first = scales[0]
    if given and set(map(type, given)) == {float} and scales.count(first) == len(scales) \
            and type(first) is list and len(first) == 2 and set(map(type, first)) <= {int, float} \
            and first[0] <= first[1] and (all(map(is_, scales, repeat(first)))
                                          or set(map(type, chain.from_iterable(scales))) <= {int, float}):
        values = np.array(given, np.float64)
        if np.isfinite(values).all() and (values >= first[0]).all() and (values <= first[1]).all():
            return True
    elif not given:
        return True
    return not any(recorded_label_problem(label, mode, scale) for label, scale in zip(labels, scales))


_PAIRWISE_LABELS = {None, *RECORDED_PAIRWISE}


def _differs(t, recorded: list, col, rows: int, types: set, decoded: tuple | None) -> np.ndarray:
    """Rows whose recorded output is not the column's value (null where it abstains), types included
    (`types`: those of the recorded outputs; `decoded`: their `json_column`, where it was made)."""
    kind = _KINDS[t.kind]
    if not types <= {kind, type(None)}:
        wrong = np.fromiter((type(v) is not kind and v is not None for v in recorded), bool, rows)
        recorded = [v if type(v) is kind else None for v in recorded]
        types = (types & {kind}) | {type(None)}
        decoded = None
    else:
        wrong = np.zeros(rows, bool)
    values, null, bad = decoded if decoded is not None else json_column(t, recorded, types)
    wrong |= null != col.abstain
    wrong |= (bad | (values != col.values)) & ~null
    return wrong


def _rows(fine: bool, test, values, n: int) -> np.ndarray:
    """Per position, whether `test(value)` fails; all false at once when `fine` (a whole-list check) holds."""
    return np.zeros(n, bool) if fine else ~np.fromiter(map(test, values), bool, n)


def _item_problems(iid, iline, cands, rid, rline, labels, readout, mode, m, program, n, scale=None) -> np.ndarray:
    """Items whose candidates, id, line, label or scale a column cannot vouch for (`scale`: the list the reader
    put for every scale equal to the program's, types included: `ReadTrace.scale`)."""
    first = cands[0] if cands else None
    problem = _rows(type(first) is list and len(first) == len(set(first)) == m and cands.count(first) == n,
                    lambda c: type(c) is list and len(c) == len(set(c)) == m, cands, n)
    problem |= ~_strict_equal(rid, iid)
    problem |= ~_strict_equal(rline, iline)
    problem |= _rows(set(map(type, iid)) <= {str, int}, lambda i: type(i) in (str, int), iid, n)
    problem |= _rows(not any(map(ne, labels, labels)), lambda lab: lab == lab, labels, n)  # NaN: never the same
    if mode == "pointwise" and not (scale is not None and all(map(is_, readout[2], repeat(scale)))):
        p = program.readout.pointwise
        scale = [p.lo, p.hi]
        scales = readout[2]
        problem |= _rows(scales.count(scale) == n, partial(eq, scale), scales, n)
        kinds = [type(p.lo), type(p.hi)]
        try:
            flat = list(chain.from_iterable(scales))
        except TypeError:
            flat = None
        problem |= _rows(flat is not None and list(map(type, flat)) == kinds * n,
                         lambda s: type(s) is list and list(map(type, s)) == kinds, scales, n)
    return problem


def _floats_differ(values: list, col: np.ndarray, n: int, zeros: bool) -> np.ndarray:
    """Where a recorded value is not a float, or not the float of `col` (`_unequal`)."""
    if set(map(type, values)) == {float}:
        return _unequal(np.array(values, np.float64), col, zeros)
    floats = np.fromiter((type(v) is float for v in values), bool, n)
    return ~floats | _unequal(np.array([v if type(v) is float else np.nan for v in values], np.float64), col, zeros)


def _unequal(values: np.ndarray, col: np.ndarray, zeros: bool) -> np.ndarray:
    """Where `values` is not `col` (and with `zeros`, where either is -0.0: equal to 0.0, but written otherwise)."""
    wrong = values != col
    if zeros:
        wrong |= (values == 0) & np.signbit(values) | (col == 0) & np.signbit(col)
    return wrong


def _result_differs(cands, sinks, readout, ev, mode: str, m: int, program: CheckedProgram, n: int,
                    zeros: bool = False) -> np.ndarray:
    """Items whose recorded score, raw score or winner, or sink, is not the recomputed one (and with `zeros`,
    those where either is -0.0: equal to 0.0, but written otherwise)."""
    wrong = _rows(set(map(type, sinks)) == {dict} and set(map(len, sinks)) == {m},
                  lambda s: type(s) is dict and len(s) == m, sinks, n)
    if wrong.any():
        sinks = [{} if bad else s for s, bad in zip(sinks, wrong)]
    if _rows(set(map(type, cands)) == {list} and set(map(len, cands)) == {m}, lambda c: type(c) is list
             and len(c) == m, cands, n).any():
        cands = [c if type(c) is list and len(c) == m else [None] * m for c in cands]
    for c in range(m):
        names = list(map(itemgetter(c), cands))
        if set(map(type, names)) != {str}:
            names = [x if type(x) is str else None for x in names]
        wrong |= _floats_differ(list(map(dict.get, sinks, names)), ev.sink[:, c], n, zeros)
    if mode == "pointwise":
        scores, raws = readout[0], readout[1]
        if program.readout.pointwise.quantize != "none":
            wrong |= _rows(set(map(type, scores)) == {int}, lambda x: type(x) is int, scores, n)
            try:
                values = np.array(scores, np.float64)
            except (TypeError, ValueError, OverflowError):
                values = np.array([float(x) if type(x) is int and abs(x) < 2 ** 53 else np.nan for x in scores])
            wrong |= _unequal(values, ev.score, zeros)
        else:
            wrong |= _floats_differ(scores, ev.score, n, zeros)
        wrong |= _floats_differ(raws, ev.raw, n, zeros)
    else:
        winners = readout[0]
        wrong |= ~np.fromiter(map(eq, winners, ev.winner), bool, n)
        wrong |= _rows(set(map(type, winners)) == {str}, lambda w: type(w) is str, winners, n)
    return wrong


def _summarize(plan, ids, labels, label_errors, preds, decided: dict, m, summary):
    """Count a chunk's items into `summary` as `replay_file` does, in trace order: the items `decided` from the
    columns ({item: what `_Decide.items` gives}) as their runs say, the others as reproduced."""
    judged = len(plan.criteria) * m
    n = len(ids)
    if not decided:  # every item reproduced: a column each
        errors = [k in label_errors for k in range(n)] if label_errors else [False] * n
        summary.count_items(ids, ["ok"] * n, errors, [judged] * n, [0] * n, labels, preds)
        return
    entries = []
    for k, item_id in enumerate(ids):
        got = decided.get(k)
        if got is None:
            entries.append((item_id, "ok", k in label_errors, judged, 0, labels[k], preds[k]))
            continue
        _, _, run, line, difference, made, skipped = got
        run_id, status, error, made_before, skipped_before, label, pred = summary.entry(run, line)
        entries.append((run_id, status, error, made_before + made, skipped_before + skipped, label, pred))
        summary.count_difference(difference)
    summary.count_entries(entries)


def _write_results(handle, program: CheckedProgram, mode: str, ids, lines, cands, sinks, labels, label_errors: dict,
                   readout, decided: dict) -> None:
    """`--out`: a chunk's result lines, in trace order, as `replay_file` writes them. An item decided from the
    columns (`_Decide`) gets the line of its run; the line of any other is its recorded one, equal to the
    recomputed line value for value and type for type (floats bit for bit: a -0.0 is decided from the
    columns), so it is built from the recorded values in the order `result_line` writes its keys."""
    from gsrlang.trace.schema import dumps, ok_line

    source = {"name": program.name, "hash": program.content_hash}
    pointwise = program.readout.pointwise if mode == "pointwise" else None
    scale = [pointwise.lo, pointwise.hi] if pointwise is not None else None
    write = handle.write
    for k, item_id in enumerate(ids):
        got = decided.get(k)
        if got is not None:
            write(dumps(got[3]) + "\n")
            continue
        sink = sinks[k]
        parts = (item_id, lines[k], mode, source, {c: sink[c] for c in cands[k]}, labels[k], label_errors.get(k))
        read = (readout[1][k], readout[0][k]) if pointwise is not None else readout[0][k]
        write(dumps(ok_line(*parts, read, scale)) + "\n")


def replay_item(trace_path: str, program: CheckedProgram, item_id: str, program_path: str | None,
                program_label: str = "the program", verify: bool = True) -> list[tuple]:
    """(recomputed run, its trace static) of every record whose item id reads `item_id`, replayed item by item
    (`verify`: compared, else re-composed): what `gsr replay --show` prints after a replay column by column (as
    `replay_file`'s `on_item` would have given them, in trace order)."""
    from gsrlang.execution.replay import Stored, replay_records
    from gsrlang.trace.write import Static

    plan = Plan(program)
    static = Static(plan, program_path if program_path is not None else program.path)
    picked = ((line, Stored(header, rec)) for line, header, rec in read_records(trace_path)
              if header is not None and type(rec.get("item")) is dict and str(rec["item"].get("id")) == item_id)
    return [(run, static) for _, _, run, _, _ in replay_records(plan, picked, verify, program_label)]
