"""Columnar runs: `gsr run` of a program whose judges all answer a column at once, a chunk of items at a time.

A program judged only by inline judges (rules, human fields) does no I/O, so the
cost of a run is the CPU spent around the judgments: one coroutine, one set of
`Judgment` checks, one composition and one readout per item. This path does the
same work a chunk (`CHUNK` items) at a time: each criterion is judged over the
chunk in one call (`judge_many`, see gsrlang.judges.base), the graph is evaluated
by the columnar evaluator (every node column equal to the
interpreter's bit for bit; gsrlang.semantics.evaluate), and the result lines and
trace records are assembled from the columns.

What the columns do not vouch for goes through the interpreter itself
(`executor.check_judgments` + `finish`, with the judgments already made): an item
with a judgment that is not a plain value of its type (invalid, an abstention the
type cannot take, a value that does not fit, -0.0), an item that is not valid in
the columns (an operator failed, the sink abstained or is not settled), an item
whose candidate ids repeat, a row that did not become an item, an item with the
wrong number of candidates. The readout of the others is the evaluation's (the one
readout, gsrlang.semantics.readout, exact for a column too). So every result
line and trace record is the item-at-a-time path's, byte for byte (proved over
generated programs and judgments in tests/test_columnrun.py); only the run
summary's wall time differs.

`on_item` callbacks get, for the items the columns settled, a `ColumnRun`: it has
an ItemRun's fields, and builds its `values`, `judgments` and `readout` (by the
interpreter) when one of them is first read.
"""

from __future__ import annotations

import gc
import itertools
from operator import attrgetter

import numpy as np

from gsrlang.semantics.evaluate import Evaluator, Table
from gsrlang.semantics.kernels import NodeValues
from gsrlang.execution.executor import call_judge, check_judgments, failed_run, finish, wrong_count
from gsrlang.files.dataset import ItemError
from gsrlang.lang.syntax.parser import gc_paused
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.judgment import Judgment
from gsrlang.semantics.readout import as_read
from gsrlang.semantics.values import RuntimeFailure
from gsrlang.trace.decode import plain_column
from gsrlang.trace.schema import jsonable, judgment_v2, ok_line, result_line
from gsrlang.trace.write import record_v2

__all__ = ["CHUNK", "ColumnRun", "ColumnRunner", "columnar_judges"]

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
    """An item the columns settled, as `on_item` sees it: an ItemRun's fields; `values`, `judgments`,
    `readout` and `failed_node` are the interpreter's, made when first read."""

    __slots__ = ("id", "line", "mode", "candidates", "status", "reason", "label", "label_error", "_judged", "_k",
                 "_run", "_plan")

    def __init__(self, plan: Plan, item, mode: str, candidates: tuple, label, label_error, judged: list, k: int):
        self.id, self.line, self.mode, self.candidates = item.id, item.line, mode, candidates
        self.status, self.reason, self.label, self.label_error = "ok", None, label, label_error
        self._plan, self._judged, self._k, self._run = plan, judged, k, None

    def judgment_counts(self) -> tuple[int, int]:
        return len(self._judged) * len(self.candidates), 0

    def __getattr__(self, name):  # values, judgments, readout, failed_node: the interpreter's ItemRun
        if name.startswith("_"):
            raise AttributeError(name)
        if self._run is None:
            k = self._k
            judgments = {crit.node.id: tuple(row[k] for row in crit.rows) for crit in self._judged}
            values, checked, reason = check_judgments(self._plan, judgments, self.candidates)
            self._run = finish(self._plan, self.mode, self.id, self.line, self.candidates, values, checked, reason,
                               self.label, self.label_error)
        return getattr(self._run, name)


class _Judged:
    """One criterion's judgments over a chunk: per candidate, the Judgments, and the column the evaluator
    takes (the cells the interpreter must settle are marked `suspect`)."""

    def __init__(self, node, per_candidate: list[list[Judgment]]):
        self.node = node
        self.rows = per_candidate
        t = node.type
        n = len(per_candidate[0])
        m = len(per_candidate)
        kind = t.kind
        values = np.zeros(n * m, np.float64 if kind == "score" else bool if kind == "bool" else np.int32)
        abstain = np.zeros(n * m, bool)
        suspect = np.zeros(n * m, bool)
        # per candidate: the node's output per item (None where it abstained or is suspect)
        self.outputs = [plain_column(t, list(map(_status, js)), list(map(_value, js)), values, abstain, suspect, c, m)
                        for c, js in enumerate(per_candidate)]
        self.column = NodeValues(values, abstain, np.zeros(n * m, bool))
        self.suspect = suspect.reshape(n, m).any(axis=1) if suspect.any() else None


def _per_item(columns: list[list]) -> list[list]:
    """Per-candidate columns (each a list over the items) as one list per item of its candidates' values."""
    if len(columns) == 1:
        return [[x] for x in columns[0]]
    return list(map(list, zip(*columns)))


def _v2(rows: list[list[Judgment]]) -> list[list[dict]]:
    """Judgments as a version 2 trace record holds them (`trace.judgment_v2`), each distinct object once."""
    seen: dict = {}
    out = []
    for js in rows:
        got = []
        for j in js:
            d = seen.get(id(j))
            if d is None:
                d = seen[id(j)] = judgment_v2(j)
            got.append(d)
        out.append(got)
    return out


class ColumnRunner:
    """Runs one program's items a chunk at a time (see the module docstring); `await run(entries)` gives, per
    entry in order, (run, result line, trace record or None: the trace writer makes it from the run)."""

    def __init__(self, plan: Plan, registry, mode: str, labels, static):
        self.plan, self.mode, self.labels, self.static = plan, mode, labels, static
        self.m = 1 if mode == "pointwise" else 2
        program = plan.program
        self.evaluator = Evaluator(program)
        self.judges = [(node, registry.judge_for(node)) for _, node in plan.criteria]
        self.source = static.source if static.source is not None else {"name": program.name,
                                                                        "hash": program.content_hash}
        self.pointwise = program.readout.pointwise if mode == "pointwise" else None
        self.pairwise = program.readout.pairwise if mode == "pairwise" else None
        self.consts = {i: [jsonable(v)] * self.m for i, v in plan.consts}

    async def batches(self, entries):
        """The runs of a stream of entries (Item or ItemError), `CHUNK` at a time: lists of (run, static, result
        line, trace record or None), as `batch._write_runs` takes them.

        Python's cyclic garbage collector is paused meanwhile, and run every `COLLECT_EVERY`
        chunks: a chunk allocates hundreds of thousands of objects, each of which would
        otherwise trigger collections that walk everything still alive (a fifth of the CPU
        of a run), while what a chunk makes is freed by reference counting."""
        static = self.static
        collecting = gc.isenabled()
        with gc_paused():
            for n in itertools.count(1):
                chunk = list(itertools.islice(entries, CHUNK))
                if not chunk:
                    return
                yield [(run, static, line, record) for run, line, record in await self.run(chunk)]
                if collecting and n % COLLECT_EVERY == 0:
                    gc.collect()

    async def run(self, entries: list) -> list[tuple]:
        plan, mode, labels = self.plan, self.mode, self.labels
        done: list = [None] * len(entries)
        items, where, labelled, cands = [], [], [], []
        for k, entry in enumerate(entries):
            if isinstance(entry, ItemError):
                run = failed_run(entry, mode)
                done[k] = (run, result_line(run, plan.program, self.static.source), None)
                continue
            candidates = tuple(c.id for c in entry.candidates)
            label, label_error = labels(entry) if labels else (None, None)
            wrong = wrong_count(entry, mode, candidates, label, label_error)
            if wrong is not None:
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
        try:
            js = judge.judge_many(node, items, c)
            if len(js) == len(items) and all(map(isinstance, js, itertools.repeat(Judgment))):
                return js
        except Exception:  # noqa: BLE001 - asked again one by one, as the item path asks (which records it)
            pass
        return [await call_judge(judge, node, item, item.candidates[c], None) for item in items]

    async def _chunk(self, items: list, labelled: list, cands: list) -> list[tuple]:
        plan, m, n = self.plan, self.m, len(items)
        judged = []  # a loop, not a nested comprehension: Python 3.10 refuses an await inside an inner one
        for node, judge in self.judges:
            judged.append(_Judged(node, [await self._judge(node, judge, items, c) for c in range(m)]))
        suspect = np.fromiter((len(set(c)) != m for c in cands), bool, n)
        for crit in judged:
            if crit.suspect is not None:
                suspect |= crit.suspect
        table = Table(self.mode, [None] * n, {crit.node.id: crit.column for crit in judged}, suspect, [None] * n)
        try:
            ev = self.evaluator.run(table)
        except RuntimeFailure:  # an operator without a columnar implementation: the interpreter settles all
            fast, outputs = np.zeros(n, bool), None
        else:
            bad = ev.nodes[plan.program.sink].abstain.copy()
            for col in ev.nodes.values():
                bad |= col.invalid
            fast = ev.ok & ~suspect & ~bad.reshape(n, m).any(axis=1)
            outputs = self._outputs(ev, judged, n)
        finally:
            self.evaluator.forget()  # a chunk's columns are not needed again
        ids = [crit.node.id for crit in judged]
        done = []
        if outputs is not None:
            sinks = list(zip(*outputs[plan.sink_index]))
            outs = list(zip(*map(_per_item, outputs)))  # per item: per node, the candidates' outputs
            reads = as_read(self.pointwise, ev.raw, ev.score, ev.winner)
            js = [dict(zip(ids, row)) for row in zip(*(_per_item(_v2(crit.rows)) for crit in judged))]
        for k, item in enumerate(items):
            label, label_error = labelled[k]
            candidates = cands[k]
            if not fast[k]:
                judgments = {crit.node.id: tuple(row[k] for row in crit.rows) for crit in judged}
                values, checked, reason = check_judgments(plan, judgments, candidates)
                run = finish(plan, self.mode, item.id, item.line, candidates, values, checked, reason, label,
                             label_error)
                done.append((run, result_line(run, plan.program, self.static.source), None))
                continue
            run = ColumnRun(plan, item, self.mode, candidates, label, label_error, judged, k)
            line = self._line(item, candidates, sinks[k], label, label_error, reads[k])
            record = record_v2(None, self.mode, item.id, item.line, candidates, "ok", line, outs[k], None, js[k])
            done.append((run, line, record))
        return done

    def _outputs(self, ev, judged: list, n: int) -> list:
        """Per node, per candidate: the output per item as the trace writes it (valid rows only)."""
        m = self.m
        by_id = {crit.node.id: crit for crit in judged}
        out = []
        for i, node in enumerate(self.plan.nodes):
            if node.kind == "criterion":
                out.append(by_id[node.id].outputs)
            elif node.kind == "const":
                out.append([[v] * n for v in self.consts[i]])
            else:
                col = ev.nodes[node.id]
                t = node.type
                kind = t.kind
                values = col.values.astype(np.float64 if kind == "score" else bool if kind == "bool" else np.int64,
                                           copy=False).tolist()
                if kind not in ("score", "bool"):
                    labels = t.labels
                    values = [labels[v] for v in values]
                if col.abstain.any():
                    values = [None if a else v for v, a in zip(values, col.abstain.tolist())]
                out.append([values[c::m] for c in range(m)])
        return out

    def _line(self, item, candidates: tuple, sink: list, label, label_error, read) -> dict:
        """The result line of a valid item (what `trace.result_line` writes for it), with its readout."""
        sinks = dict(zip(candidates, sink))
        if self.pointwise is not None:
            return ok_line(item.id, item.line, self.mode, self.source, sinks, label, label_error, read[1], read[0],
                           [self.pointwise.lo, self.pointwise.hi])
        return ok_line(item.id, item.line, self.mode, self.source, sinks, label, label_error, winner=read)
