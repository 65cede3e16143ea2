"""Columnar evaluation: one checked program over N items at once, one numpy array per node.

The item-at-a-time interpreter (`gsrlang.semantics.compose` + `readout`) is the
reference; this module computes the same thing for a whole column of items, so
that tuning, ablation and what-if replay can try thousands of parameter sets
over recorded judgments in milliseconds. It reads the same checked `Program` and
the same `Plan` (ports, slot order, bound parameters), and never calls a judge.
It does no I/O: a `Table` of criterion values is made elsewhere, from a trace
(`table_from_trace`), from the judgments of inline judges (`human()`, `rule.*`)
over a data file (`table_from_data`) or from raw judgments (`table_from_cells`),
all in gsrlang.execution.tracetable.

Layout: a pointwise item is one row, a pairwise item two (candidate-minor), so a
column has R = N x m rows. Every node gives a `NodeValues`: its values (float64 for a
Score, bool for a Bool, int32 level codes for an Ordinal / Nominal), an
`abstain` mask and an `invalid` mask. A row is invalid when a judgment was
invalid, when an operator failed for it (a reducer with nothing left to reduce,
a `map` with no score for the label) or when a value does not fit its node's
type. The items with an invalid row anywhere are then settled, in one batch, on
the same kernels (`_settle_invalid`, gsrlang.semantics.settle): such an item is
valid when its result does not depend on what is unknown (a fired `cap(at: 0.0)`
over an invalid judgment), as `executor.finish` decides.

Each step is `gsrlang.semantics.compose.apply`, the one the item interpreter
(`Plan.compose`) runs over a batch of one row (two for a pairwise item): the same
kernels, the same exact sums, the same invalid rows, so every node column is the
interpreter's bit for bit. The readout is gsrlang.semantics.readout's, the one
every path uses (`read_columns`).
"""

from __future__ import annotations

from functools import cached_property
from typing import Sequence

import attrs
import numpy as np

from gsrlang.lang.program import CheckedProgram, Readout
from gsrlang.semantics.compose import Masks, Plan, apply
from gsrlang.semantics.kernels import NodeValues, decode, encode
from gsrlang.semantics.readout import read_columns
from gsrlang.semantics.settle import Possibles, from_possibles, settle

__all__ = ["Evaluation", "Evaluator", "SINK_TOLERANCE", "Table", "Taken"]

SINK_TOLERANCE = 1e-12


@attrs.define
class Table:
    """The criterion values of N items (R = N x m rows), their labels and which items failed outright.

    `labels` holds each item's gold label as the results lines do (a number, first /
    second / tie, or None); `label_errors` counts the labels that could not be used.
    A table is not modified once made: evaluators keep what they derive from it.
    """

    mode: str
    ids: list
    criteria: dict  # criterion id -> NodeValues
    failed: np.ndarray  # per item: the data row never became an item (no judgments)
    labels: list
    label_errors: int = 0
    recorded: dict | None = None  # from a trace: its run summary record, if it has one
    skipped: np.ndarray | None = None  # from a trace: per item, its criteria's judgments the recorded run skipped

    @property
    def m(self) -> int:
        return 1 if self.mode == "pointwise" else 2

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: np.ndarray) -> "Table":
        """The items at `index` (a fold, a resample), in that order."""
        index = np.asarray(index)
        rows = (index[:, None] * self.m + np.arange(self.m)).ravel()
        crit = {k: NodeValues(c.values[rows], c.abstain[rows], c.invalid[rows]) for k, c in self.criteria.items()}
        return Table(self.mode, [self.ids[i] for i in index], crit, self.failed[index],
                     [self.labels[i] for i in index], self.label_errors)

    def distinct(self) -> tuple["Table", np.ndarray]:
        """The table of this one's distinct items, each the first of its kind, in order, and per item the
        position of its kind there. Items are alike when every criterion's value and masks are the same bits,
        candidate by candidate, and so is `failed`: an item's evaluation depends on nothing else, so the
        evaluation of the distinct table taken at those positions (`Evaluation.at`) is this table's, bit for
        bit."""
        n = len(self)
        if not n:
            return self, np.zeros(0, np.intp)
        parts = [self.failed.reshape(n, 1).view(np.uint8)]
        for c in self.criteria.values():
            for column in c:
                parts.append(np.ascontiguousarray(column).reshape(n, -1).view(np.uint8))
        key = np.ascontiguousarray(np.hstack(parts))
        key = key.view(np.dtype((np.void, key.shape[1]))).ravel()
        _, first, at = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(first)  # the kinds in the order they first appear
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return self.take(first[order]), rank[at.ravel()]


# ---- evaluation ----------------------------------------------------------------------------------------------------
@attrs.frozen
class Evaluation:
    """The outcome over N items: per node columns, the sink, each item's status and native result."""

    mode: str
    nodes: dict  # node id -> NodeValues
    sink: np.ndarray  # (N, m) the sink's Score per candidate (0 where invalid)
    ok: np.ndarray  # per item: has a valid result
    failed: np.ndarray  # per item: the data row never became an item
    raw: np.ndarray | None = None  # pointwise: lo + s (hi - lo)
    score: np.ndarray | None = None  # pointwise: the quantized score (float; NaN where not ok)
    winner: np.ndarray | None = None  # pairwise: "first" | "second" | "tie" | "abstain" | None
    # per item left invalid by settling: the causes behind its unsettled sink, as (node position, candidate,
    # text) where the text is "" for a criterion (its judgment's reason is in the trace, not the table) and
    # ": <problem>" for an operator (`executor.reason_of` names the node and the candidate)
    causes: dict = attrs.field(factory=dict)
    # the batch settle's (items, per node `Possibles` of their rows), for a consumer that needs every node's
    # value of an item that was settled (the verifying replay compares them with the record); empty if none was
    settled: list = attrs.field(factory=list)

    def item_values(self, nodes: Sequence, items: Sequence[int]) -> list:
        """Per item of `items` (positions), its node values as the item path holds them: per node of `nodes`
        (the program's, in order) a tuple of m Python values, ABSTAIN where abstained. An item settling went
        over has settling's values (Unsettled where they stay open); any other, its rows of the columns."""
        m = 1 if self.mode == "pointwise" else 2
        items = np.asarray(items, np.int64)
        rows = (items[:, None] * m + np.arange(m)).ravel()
        columns = [decode(node.type, self.nodes[node.id].values[rows], self.nodes[node.id].abstain[rows])
                   for node in nodes]
        per_node = [list(zip(*[cells[c::m] for c in range(m)])) for cells in columns]  # per item, m values
        out = list(zip(*per_node))  # per item: per node, its m values
        if self.settled and len(self.settled[0]):
            todo, possibles = self.settled
            settled = from_possibles(possibles)
            at = {k: p for p, k in enumerate(todo.tolist())}
            for pos, k in enumerate(items.tolist()):
                p = at.get(k)
                if p is not None:
                    out[pos] = tuple(cells[p * m:p * m + m] for cells in settled)
        return out

    def at(self, items: np.ndarray) -> "Taken":
        """The outcome of the items at `items` (positions, as `Table.distinct` gives them), column by column."""
        return Taken(self, items)

    def predictions(self) -> list:
        """Per item, the prediction as the metrics take it: the score / winner, or None where not ok."""
        if self.mode == "pointwise":
            return [float(s) if ok else None for s, ok in zip(self.score, self.ok)]
        return [w if ok else None for w, ok in zip(self.winner, self.ok)]


class Taken:
    """An evaluation's per-item columns taken at some items' positions (`Evaluation.at`), each when first read:
    a search reads two or three of them. The node columns, causes and settled values, which are by row of the
    evaluation, are not taken."""

    def __init__(self, ev: Evaluation, items: np.ndarray):
        self.mode, self._ev, self._items = ev.mode, ev, items

    def _take(self, name: str):
        column = getattr(self._ev, name)
        return None if column is None else np.take(column, self._items, axis=0)

    sink = cached_property(lambda self: self._take("sink"))
    ok = cached_property(lambda self: self._take("ok"))
    failed = cached_property(lambda self: self._take("failed"))
    raw = cached_property(lambda self: self._take("raw"))
    score = cached_property(lambda self: self._take("score"))
    winner = cached_property(lambda self: self._take("winner"))
    predictions = Evaluation.predictions


class _Memo(Masks):
    """What an evaluator derives from one table and keeps across parameter sets: the columns of every node
    that no parameter set has changed (the criteria, the constants, and the operators upstream of what is
    tuned), by node position, and the table's all-false mask, shared by every column with nothing to mask."""

    def __init__(self, table: Table):
        super().__init__(len(table) * table.m)
        self.table = table
        self.columns: dict[int, NodeValues] = {}


class Evaluator:
    """A program bound for columnar evaluation; `run(table, params=...)` evaluates a parameter set.

    `params` overrides node parameters ({node id: {parameter: value}}) and `thresholds`
    the readout's cut points, without rebuilding the program: what tuning varies.
    What does not depend on them is computed once per table and kept (the last few
    tables): the criterion columns, and every node upstream of no overridden one.

    Every node column is the interpreter's bit for bit (the same kernels, the same exact
    sums), and the readout is the one of gsrlang.semantics.readout.
    """

    KEEP = 8  # tables whose parameter-free columns are kept (tuning alternates between a few folds)

    def __init__(self, program: CheckedProgram):
        self.program = program
        self.plan = plan = Plan(program)
        used = {i for step in plan.steps for _, sources in step.ports for i in sources}
        # an invalid row propagates to every node downstream, so the nodes nothing reads hold all of them
        self._leaves = [i for i in range(len(plan.nodes)) if i not in used]
        self._memos: dict[int, _Memo] = {}

    def forget(self) -> None:
        """Drop the columns kept for every table seen (a caller done with its tables frees them at once)."""
        self._memos.clear()

    def _memo(self, table: Table) -> _Memo:
        memo = self._memos.pop(id(table), None)
        if memo is None or memo.table is not table:
            memo = _Memo(table)
            failed_rows = memo.mask(np.repeat(table.failed, table.m))
            for i, node in self.plan.criteria:
                c = table.criteria[node.id]
                memo.columns[i] = NodeValues(c.values, memo.mask(c.abstain),
                                             memo.either(memo.mask(c.invalid), failed_rows))
            R = len(memo.zero)
            for i, v in self.plan.consts:
                fill = encode(self.plan.nodes[i].type, (v,)).values[0]
                memo.columns[i] = NodeValues(np.full(R, fill), memo.zero, memo.zero)
            if len(self._memos) >= self.KEEP:
                del self._memos[next(iter(self._memos))]
        self._memos[id(table)] = memo  # most recently used last
        return memo

    def run(self, table: Table, params: dict | None = None, thresholds: Sequence[float] | None = None,
            read: bool = True) -> Evaluation:
        """`read=False`: the sink and validity alone, no readout (raw, score and winner None): what a search by
        a surrogate of the sink reads."""
        params = params or {}
        memo = self._memo(table)
        cols = dict(memo.columns)
        changed: set = set()
        for step in self.plan.steps:
            i, override = step.index, params.get(step.node.id)
            if override or any(s in changed for s in step.sources):
                changed.add(i)
                cols[i] = apply(step, cols, step.with_params(override) if override else step.kwargs, memo)[0]
            elif i not in cols:
                cols[i] = memo.columns[i] = apply(step, cols, step.kwargs, memo)[0]
        sink = cols[self.plan.sink_index]
        m = table.m
        bad_rows = sink.abstain
        for leaf in self._leaves:
            bad_rows = memo.either(bad_rows, cols[leaf].invalid)
        if bad_rows is memo.zero:  # every item is valid: nothing is settled or written into the sink below
            s = sink.values.astype(np.float64, copy=False)
            ok = np.ones(len(table), bool)
        else:
            s = sink.values.astype(np.float64)  # a copy: the few rows settled below are written into it
            s[bad_rows] = 0.0
            ok = ~bad_rows.reshape(-1, m).any(axis=1)
        s = s.reshape(-1, m)
        ev = read_columns(self.program.readout, table.mode, s, ok, thresholds) if read else ()
        nodes = self.plan.nodes
        evaluation = Evaluation(table.mode, {nodes[i].id: c for i, c in cols.items()}, s, ok, table.failed, *ev)
        if bad_rows is not memo.zero:
            self._settle_invalid(table, evaluation, params, thresholds, memo)
        return evaluation

    def _settle_invalid(self, table: Table, ev: Evaluation, params, thresholds, memo: _Memo) -> None:
        """Items with an invalid (or skipped) judgment or a failed operator: settled on the same kernels, as
        `executor.finish` does (valid when the result does not depend on what is unknown; see
        gsrlang.semantics.settle), all of them in one batch."""
        todo = np.flatnonzero(~ev.ok & ~ev.failed)
        if not len(todo):
            return
        plan, m = self.plan, table.m
        rows = (todo[:, None] * m + np.arange(m)).ravel()
        nodes: list = [None] * len(plan.nodes)
        for i, node in plan.criteria:
            c = table.criteria[node.id]
            invalid = c.invalid[rows]
            p = nodes[i] = Possibles(node.type, c.values[rows], c.abstain[rows] & ~invalid)
            for r in np.flatnonzero(invalid).tolist():
                p.set_top(r, ((i, r % m, ""),))
        for i, v in plan.consts:
            nodes[i] = Possibles(plan.nodes[i].type, memo.columns[i].values[rows], np.zeros(len(rows), bool))
        params = params or {}
        settle(plan, nodes, m, lambda *_: "",
               lambda step: step.with_params(params[step.node.id]) if params.get(step.node.id) else step.kwargs)
        ev.settled[:] = todo, nodes
        sink = nodes[plan.sink_index]
        s = sink.values.astype(np.float64)
        with np.errstate(invalid="ignore"):
            good = ~(sink.open | sink.abstain | ~((s >= 0.0) & (s <= 1.0)))
        good = good.reshape(-1, m).all(axis=1)
        for k in np.flatnonzero(~good).tolist():
            causes = frozenset().union(*(sink.causes.get(k * m + c, ()) for c in range(m)))
            if causes:
                ev.causes[int(todo[k])] = causes
        if not good.any():
            return
        done, s = todo[good], s.reshape(-1, m)[good]
        ev.ok[done] = True
        ev.sink[done] = s
        if ev.raw is None and ev.winner is None:  # not read out
            return
        raw, score, winner = read_columns(self.program.readout, table.mode, s, np.ones(len(done), bool), thresholds)
        if ev.mode == "pointwise":
            ev.raw[done], ev.score[done] = raw, score
        else:
            ev.winner[done] = winner


def with_parameters(program: CheckedProgram, params: dict, thresholds: Sequence[float] | None = None) -> CheckedProgram:
    """The program with some node parameters (and the readout's cut points) replaced; structure unchanged."""
    nodes = tuple(attrs.evolve(n, params={**n.params, **params[n.id]}) if n.id in params else n for n in program.nodes)
    readout = program.readout
    if thresholds is not None and readout.pointwise is not None:
        readout = Readout(attrs.evolve(readout.pointwise, thresholds=tuple(float(t) for t in thresholds)),
                          readout.pairwise)
    return attrs.evolve(program, nodes=nodes, readout=readout)

