"""Columnar runs: `gsr run` of a program whose judges all answer a column at once, a chunk of items at a time.

A program judged only by inline judges (rules, human fields) does no I/O, so the
cost of a run is the CPU spent around the judgments: one coroutine, one set of
`Judgment` checks, one composition and one readout per item. This path does the
same work a chunk (`CHUNK` items) at a time: each criterion is judged over the
chunk in one call (`judge_many`, see gsrlang.judges.base), the graph is evaluated
by the columnar evaluator (every node column equal to the
interpreter's bit for bit; gsrlang.semantics.evaluate), and the result lines and
trace records are assembled from the columns.

Every item the columns evaluate is written from the evaluation: a judgment that is not a
value of its type (invalid, skipped, an abstention the type cannot take, an answer that
does not fit) is an invalid cell, read by `judgment_cell`'s rules as the interpreter's
`check_judgment` reads it (-0.0 as 0.0); the evaluator settles the items with such cells
or a failed operator in one batch, and an item it leaves invalid gets the item path's
reason from the causes settling found (`executor.reason_of`) and, in its trace record,
settling's node values (`Evaluation.item_values`), written as the trace writer writes
them (`outputs_v2`: null and flagged in `u` where open). Candidate ids that repeat
make the readout refuse the sink (`readout.refused_repeats`). Only a row that did not
become an item, or one with the wrong number of candidates, is written as a failed run.
The readout of the valid items is the evaluation's (the one readout,
gsrlang.semantics.readout, exact for a column too). So every result line and trace
record is the item-at-a-time path's, byte for byte (proved over generated programs and
judgments in tests/test_columnrun.py); only the run summary's wall time differs.

`on_item` callbacks get a `ColumnRun` per item: it has an ItemRun's fields, and builds
its `values`, `judgments` and `readout` (by the interpreter) only when one of them is
first read (`gsr run` reads none).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from operator import attrgetter

import numpy as np

from gsrlang.execution.executor import call_judge, check_judgment, check_judgments, failed_run, finish, reason_of, \
    wrong_count
from gsrlang.files.dataset import ItemError
from gsrlang.lang.syntax.parser import gc_paused
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.evaluate import Evaluator, Table
from gsrlang.semantics.judgment import Judgment
from gsrlang.semantics.kernels import NodeValues, decode, dtype
from gsrlang.semantics.readout import as_read, refused_repeats
from gsrlang.trace.decode import plain_column
from gsrlang.trace.schema import invalid_line, jsonable, judgment_v2, ok_line, result_line
from gsrlang.trace.write import outputs_v2, record_v2

__all__ = ["CHUNK", "ColumnRun", "ColumnRunner", "column_line", "columnar_judges"]

CHUNK = 2048  # items judged and evaluated together: large enough to amortize, small enough for flat memory
COLLECT_EVERY = 16  # chunks between two runs of the cyclic garbage collector (see `ColumnRunner.batches`)

_status, _value = attrgetter("status"), attrgetter("value")


def columnar_judges(plan: Plan, registry) -> bool:
    """Whether this path can run `plan` with these judges: each criterion's judge is inline and answers a
    column at once (`judge_many`), and none judges the candidates of an item jointly."""
    for _, node in plan.criteria:
        judge = registry.get(node.criterion.procedure.kind)
        if judge is None or not getattr(judge, "inline", False) or not callable(getattr(judge, "judge_many", None)):
            return False
        if node.criterion.procedure.args.get("joint") and hasattr(judge, "judge_joint"):
            return False
    return True


class ColumnRun:
    """An item as `on_item` sees it: an ItemRun's fields; `values`, `judgments`, `readout` and `failed_node`
    are the interpreter's, made when first read (the written line and record never read them)."""

    __slots__ = ("id", "line", "mode", "candidates", "status", "reason", "label", "label_error", "_judged", "_k",
                 "_skipped", "_run", "_plan")

    def __init__(self, plan: Plan, item, mode: str, candidates: tuple, label, label_error, judged: list, k: int,
                 status: str = "ok", reason: str | None = None, skipped: int = 0):
        self.id, self.line, self.mode, self.candidates = item.id, item.line, mode, candidates
        self.status, self.reason, self.label, self.label_error = status, reason, label, label_error
        self._plan, self._judged, self._k, self._skipped, self._run = plan, judged, k, skipped, None

    def judgment_counts(self) -> tuple[int, int]:
        return len(self._judged) * len(self.candidates) - self._skipped, self._skipped

    def __getattr__(self, name):  # values, judgments, readout, failed_node: the interpreter's ItemRun
        if name.startswith("_"):
            raise AttributeError(name)
        if self._run is None:
            k = self._k
            judgments = {crit.node.id: tuple(row[k] for row in crit.rows) for crit in self._judged}
            values, checked = check_judgments(self._plan, judgments, self.candidates)
            self._run = finish(self._plan, self.mode, self.id, self.line, self.candidates, values, checked, self.label,
                               self.label_error)
        return getattr(self._run, name)


class _Judged:
    """One criterion's judgments over a chunk: per candidate, the Judgments, and the column the evaluator
    takes (`judgment_cell`'s rules: invalid where a judgment is invalid, skipped or does not fit)."""

    def __init__(self, node, per_candidate: list[list[Judgment]]):
        self.node = node
        self.rows = per_candidate
        t = node.type
        n, m = len(per_candidate[0]), len(per_candidate)
        values, abstain, invalid = np.zeros(n * m, dtype(t)), np.zeros(n * m, bool), np.zeros(n * m, bool)
        for c, js in enumerate(per_candidate):
            plain_column(t, list(map(_status, js)), list(map(_value, js)), values, abstain, invalid, c, m)
        self.column = NodeValues(values, abstain, invalid)
        # the judgments made invalid by their check (an answer that does not fit), as the item path records
        # them: {(item, candidate): Judgment}; and per item, the judgments the judge said it skipped
        self.checked: dict = {}
        self.skipped = None
        for r in np.flatnonzero(invalid).tolist():
            k, c = divmod(r, m)
            j = per_candidate[c][k]
            if j.status == "skipped":
                if self.skipped is None:
                    self.skipped = np.zeros(n, np.int64)
                self.skipped[k] += 1
            elif j.status != "invalid":
                self.checked[k, c] = check_judgment(node, j, "")[0]

    def v2(self) -> list[list[dict]]:
        """Per candidate, per item: the judgments as a version 2 trace record holds them (`trace.judgment_v2`),
        each distinct object once."""
        seen: dict = {}
        out = []
        for js in self.rows:
            keys = list(map(id, js))
            for key, j in dict(zip(keys, js)).items():  # the distinct objects
                if key not in seen:
                    seen[key] = judgment_v2(j)
            out.append(list(map(seen.__getitem__, keys)))
        for (k, c), j in self.checked.items():
            out[c][k] = judgment_v2(j)
        return out


def column_line(program, mode: str, item_id, line: int, source: dict, candidates, sink: list, label, label_error,
                read, scale) -> dict:
    """The result line `result_line` writes for an item valid in the columns, from its parts (`read`: its readout,
    `readout.as_read`): ok, or invalid where its candidate ids repeat and the readout refuses its sink
    (`readout.refused_repeats`)."""
    refused = refused_repeats(program.readout, mode, candidates, sink)
    if refused is not None:
        return invalid_line(item_id, line, mode, source, label, label_error, refused.item_reason, scale, refused.sink)
    return ok_line(item_id, line, mode, source, dict(zip(candidates, sink)), label, label_error, read, scale)


def _criterion_cause(judged: list, k: int):
    """`executor.reason_of`'s criterion cause for item `k`: `check_judgment`'s text for its judgment."""
    by_id = {crit.node.id: crit for crit in judged}
    return lambda node, c, where: check_judgment(node, by_id[node.id].rows[c][k], where)[1]


def _per_item(columns: list[list]) -> list[list]:
    """Per-candidate columns (each a list over the items) as one list per item of its candidates' values."""
    return [[x] for x in columns[0]] if len(columns) == 1 else list(map(list, zip(*columns)))


class ColumnRunner:
    """Runs one program's items a chunk at a time (see the module docstring); `await run(entries)` gives, per
    entry in order, (run, result line, trace record or None: the trace writer makes it from the run)."""

    def __init__(self, plan: Plan, registry, mode: str, labels, static, records: bool = True):
        self.plan, self.mode, self.labels, self.static = plan, mode, labels, static
        self.records = records  # False: no trace is written, so no trace record is made (each is None)
        self.m = 1 if mode == "pointwise" else 2
        program = plan.program
        self.evaluator = Evaluator(program)
        self.judges = [(node, registry.judge_for(node)) for _, node in plan.criteria]
        self.source = static.source if static.source is not None else {"name": program.name,
                                                                        "hash": program.content_hash}
        self.pointwise = program.readout.pointwise if mode == "pointwise" else None
        self.scale = [self.pointwise.lo, self.pointwise.hi] if self.pointwise is not None else None

    async def batches(self, entries):
        """The runs of a stream of entries (Item or ItemError), `CHUNK` at a time: lists of (run, static, result
        line, trace record or None), as `runs._write_runs` takes them.

        Python's cyclic garbage collector is paused meanwhile, and run every `COLLECT_EVERY`
        chunks: a chunk allocates hundreds of thousands of objects, each of which would
        otherwise trigger collections that walk everything still alive (a fifth of the CPU
        of a run), while what a chunk makes is freed by reference counting."""
        static = self.static
        collecting = gc.isenabled()
        with gc_paused():
            for n, chunk in enumerate(iter(lambda: list(itertools.islice(entries, CHUNK)), []), 1):
                yield [(run, static, line, record) for run, line, record in await self.run(chunk)]
                if collecting and n % COLLECT_EVERY == 0:
                    gc.collect()

    async def run(self, entries: list) -> list[tuple]:
        plan, mode, labels, m = self.plan, self.mode, self.labels, self.m
        done: list = [None] * len(entries)
        items, where, labelled, cands = [], [], [], []
        for k, entry in enumerate(entries):
            if isinstance(entry, ItemError):
                run = failed_run(entry, mode)
                done[k] = (run, result_line(run, plan.program, self.static.source), None)
                continue
            candidates = tuple([c.id for c in entry.candidates])
            label, label_error = labels(entry) if labels else (None, None)
            if len(candidates) != m:
                wrong = wrong_count(entry, mode, candidates, label, label_error)
                done[k] = (wrong, result_line(wrong, plan.program, self.static.source), None)
                continue
            items.append(entry)
            where.append(k)
            labelled.append((label, label_error))
            cands.append(candidates)
        if items:
            for k, got in zip(where, await self._chunk(items, labelled, cands)):
                done[k] = got
        return done

    async def _judge(self, node, judge, items: list, c: int) -> list[Judgment]:
        with contextlib.suppress(Exception):  # asked again one by one, as the item path asks (which records it)
            js = judge.judge_many(node, items, c)
            if len(js) == len(items) and all(map(isinstance, js, itertools.repeat(Judgment))):
                return js
        return [await call_judge(judge, node, item, item.candidates[c], None) for item in items]

    async def _chunk(self, items: list, labelled: list, cands: list) -> list[tuple]:
        plan, mode, m, n = self.plan, self.mode, self.m, len(items)
        judged = []  # a loop, not a nested comprehension: Python 3.10 refuses an await inside an inner one
        for node, judge in self.judges:
            judged.append(_Judged(node, [await self._judge(node, judge, items, c) for c in range(m)]))
        table = Table(mode, [None] * n, {crit.node.id: crit.column for crit in judged}, np.zeros(n, bool), [None] * n)
        try:
            ev = self.evaluator.run(table)
        finally:
            self.evaluator.forget()  # a chunk's columns are not needed again
        records = self.records
        if records:
            outs, unknown = self._outputs(ev, n)
        ok = ev.ok.tolist()
        sinks = ev.sink.tolist()
        reads = as_read(self.pointwise, ev.raw, ev.score, ev.winner)
        if records:
            ids = [crit.node.id for crit in judged]
            js = list(map(dict, map(zip, itertools.repeat(ids), zip(*[_per_item(crit.v2()) for crit in judged]))))
        skips = sum(crit.skipped for crit in judged if crit.skipped is not None)
        skips = skips.tolist() if type(skips) is np.ndarray else None
        done = []
        for k, item in enumerate(items):
            label, label_error = labelled[k]
            candidates = cands[k]
            if ok[k]:
                line = column_line(plan.program, mode, item.id, item.line, self.source, candidates, sinks[k], label,
                                   label_error, reads[k], self.scale)
                status, reason = line["status"], line["reason"]
            else:  # left invalid: the reason is the item path's, from the causes settling found
                status = "invalid"
                reason = reason_of(plan, ev.causes[k], candidates, _criterion_cause(judged, k))
                line = invalid_line(item.id, item.line, mode, self.source, label, label_error, reason, self.scale)
            run = ColumnRun(plan, item, mode, candidates, label, label_error, judged, k, status, reason,
                            skips[k] if skips is not None else 0)
            record = record_v2(None, mode, item.id, item.line, candidates, status, line, outs[k], unknown[k], js[k]) \
                if records else None
            done.append((run, line, record))
        return done

    def _outputs(self, ev, n: int) -> tuple[list, list]:
        """Per item: its node outputs as the trace writes them, and its `u` flags (None: none). An item the
        columns vouch for, a column at a time (`kernels.decode`, `jsonable` where a column needs it); one
        settling went over, as the writer writes its values (`outputs_v2` of `Evaluation.item_values`)."""
        m = self.m
        per_node = []
        for node in self.plan.nodes:
            col = ev.nodes[node.id]
            cells = decode(node.type, col.values, col.abstain)
            if col.abstain.any() or (node.type.kind == "score" and not np.isfinite(col.values).all()):
                cells = list(map(jsonable, cells))  # ABSTAIN as null, a non-finite score as the writer spells it
            per_node.append(list(zip(*[cells[c::m] for c in range(m)])))  # per item: its m outputs
        outs = list(zip(*per_node))
        unknown = [None] * n
        if ev.settled:
            todo = ev.settled[0]
            for k, values in zip(todo.tolist(), ev.item_values(self.plan.nodes, todo)):
                outs[k], unknown[k] = outputs_v2(values)
        return outs, unknown
