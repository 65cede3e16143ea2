"""Settling: a program's nodes over rows where some judgments are not known, on the operator kernels.

A judgment can be unknown for two reasons: it was invalid (the judge failed, the
answer did not fit the type), or it was never asked for (short-circuit judging
skipped it). Either way its criterion's value is *unsettled* on that row: it could
have been any value of the criterion's type (an abstention too, for a `T?`), or
invalid. Settling evaluates the graph over such rows with every operator applied to
everything its inputs may still be:

- an operator whose output is the same whatever its unsettled inputs are gives
  that output, settled (`cap(base, trigger, at: 0.0)` whose trigger holds is 0.0
  whatever the base; `any` with one true item is true);
- otherwise its output is unsettled too, with what it may still be and the causes.

A row is valid exactly when its sink is settled: then its result is the one every
possible value of the unknown judgments would give. This is the one semantics of
invalid judgments and failing operators, for full and short-circuit judging, replay
and the columnar evaluator alike.

What a node may still be is held in columns (`Possibles`): where a row is `open`,
[lo, hi] for a Score, a bitmask of level codes (false 1, true 2 for a Bool)
otherwise, and whether it may abstain; the causes per open row. Every operator of
the catalogue is monotone in each Score input once its discrete inputs (Bool,
labels, abstentions) are fixed, so an operator over open rows is its kernel
evaluated on the *corners* (every discrete value, each interval's two ends): all
open rows' corners concatenated into one kernel call per node, the outputs' hull
taken per row. More than `CORNER_LIMIT` corners, or any corner on which the
operator fails, give the whole of the node's type: a sound over-approximation.
Signed zeros cannot break this: judged Scores and parameters are read with -0.0 as
0.0, and no operator makes a -0.0 from non-negative zeros.

The item path holds one item's values as tuples (an `Unsettled` where not known):
`to_possibles` and `from_possibles` convert them to these columns and back, the one
place where a set of possible values becomes bits and bits values again.

`liveness` runs the other way, from the sink: an input edge of a row is *dead* when
the operator's output is settled whatever that input is (the input replaced by all
of its type); a criterion none of whose paths to the sink is live cannot change the
result, and short-circuit judging does not ask for it.
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from gsrlang.semantics.kernels import NodeValues, decode, dtype, encode
from gsrlang.semantics.values import ABSTAIN, Possible, Unsettled

__all__ = ["CORNER_LIMIT", "Possibles", "from_possibles", "liveness", "settle", "to_possibles", "unfit"]

CORNER_LIMIT = 512  # operator evaluations per node and row before settling falls back to the whole type


def unfit(t, unit: bool = False) -> Callable[[np.ndarray, np.ndarray], np.ndarray | None]:
    """The type fit of `t`'s columns, `t` read once (every operator output is checked: `Step.unfit`): the rows
    whose value does not fit (None: every row fits), an abstention where `t` cannot abstain, a Score outside
    its range or not finite (NaN fails both comparisons). The common case, every value in range, is settled
    by the column's minimum and maximum (on a few rows, the item path's, by a list: numpy's reductions cost
    several times more there), and not looked at when `unit` says every value is in [0, 1] (a clamped
    kernel's output) and `t`'s range holds [0, 1]."""
    optional, lo, hi = t.optional, t.lo, t.hi
    score = t.kind == "score" and not (unit and lo <= 0.0 and hi >= 1.0)

    def rows(values: np.ndarray, abstain: np.ndarray) -> np.ndarray | None:
        few = len(values) <= 16
        if score:
            if few:
                fits = True
                for v in values.tolist():
                    if not lo <= v <= hi:
                        fits = False
                        break
            else:
                fits = values.min() >= lo and values.max() <= hi
            if not fits:
                bad = ~((values >= lo) & (values <= hi))  # (comparisons with NaN are false and do not warn)
                if optional:
                    bad &= ~abstain
                else:
                    bad |= abstain
                return bad
        if optional or not (True in abstain.tolist() if few else abstain.any()):
            return None
        return abstain.copy()
    return rows


def _top(t) -> tuple:
    """(lo, hi, bits, may_abstain): everything a value of type `t` can be."""
    if t.kind == "score":
        return float(t.lo) + 0.0, float(t.hi) + 0.0, 0, t.optional
    return 0.0, 0.0, (1 << len(_levels(t))) - 1, t.optional


def _corners(t, lo: float, hi: float, bits: int, may_abstain: bool) -> list:
    """(value, abstained) pairs: the corners of what a value of type `t` may still be."""
    if t.kind == "score":
        out = [(lo, False)] if lo == hi else [(lo, False), (hi, False)]
    else:
        out = [(code if t.kind != "bool" else bool(code), False) for code in range(bits.bit_length())
               if bits >> code & 1]
    if may_abstain:
        out.append((0.0 if t.kind == "score" else False if t.kind == "bool" else 0, True))
    return out


def _levels(t) -> tuple:
    """The values of a Bool or label type in code order: a level's code is its bit in `Possibles.bits`."""
    return (False, True) if t.kind == "bool" else t.labels


class Possibles:
    """One node over R rows. Where settled: `values` and `abstain` (a kernel's encoding). Where `open`: what
    it may still be, [lo, hi] (a Score) or the level codes of `bits`, `may_abstain`, and `causes[row]`
    (a frozenset of (node position, candidate, sentence))."""

    __slots__ = ("type", "values", "abstain", "open", "lo", "hi", "bits", "may_abstain", "causes")

    def __init__(self, t, values: np.ndarray, abstain: np.ndarray, open_: np.ndarray | None = None):
        R = len(values)
        self.type, self.values, self.abstain = t, values, abstain
        self.open = np.zeros(R, bool) if open_ is None else open_
        self.lo, self.hi = np.zeros(R), np.zeros(R)
        self.bits, self.may_abstain = np.zeros(R, np.int64), np.zeros(R, bool)
        self.causes: dict[int, frozenset] = {}

    def set_top(self, row: int, causes) -> None:
        self.set_possible(row, *_top(self.type), causes)

    def set_possible(self, row: int, lo: float, hi: float, bits: int, may_abstain: bool, causes) -> None:
        self.open[row] = True
        self.lo[row], self.hi[row], self.bits[row], self.may_abstain[row] = lo, hi, bits, may_abstain
        self.causes[row] = frozenset(causes)

    def corners(self, row: int) -> list:
        """(value, abstained) pairs: the row's settled value, or the corners of what it may still be."""
        if not self.open[row]:
            return [(self.values[row], bool(self.abstain[row]))]
        return _corners(self.type, float(self.lo[row]), float(self.hi[row]), int(self.bits[row]),
                        bool(self.may_abstain[row]))


def _encoded(t, cells: list) -> NodeValues:
    """Corner cells (value, abstained) of one slot as a kernel's input Column."""
    values = np.array([v for v, _ in cells], dtype(t))
    abstain = np.array([a for _, a in cells], bool)
    return NodeValues(values, abstain, abstain)


def _slots(step) -> list:
    """(port, position in a list port or None, source node position) per input slot, in port order."""
    return [(p, k if is_list else None, s) for p, (is_list, sources) in enumerate(step.ports)
            for k, s in enumerate(sources)]


def _corner_outputs(step, slots: list, kwargs: dict, nodes: list, t, variants: list) -> list:
    """For each variant (row, the slot replaced by all of its type or None): None (whatever the corners are,
    the operator fails or gives a value that does not fit, or there are too many), ("settled", value,
    abstained) or ("open", lo, hi, bits, may_abstain). The corners of every variant are rows of one call."""
    cells: list[list] = [[] for _ in slots]
    spans = []
    for row, replaced in variants:
        lists, size = [], 1
        for n, (_, _, s) in enumerate(slots):
            corners = _corners(nodes[s].type, *_top(nodes[s].type)) if n == replaced else nodes[s].corners(row)
            if n == replaced or nodes[s].open[row]:
                size *= max(1, len(corners))
            lists.append(corners)
        if size > CORNER_LIMIT or not all(lists):
            spans.append(None)
            continue
        start = len(cells[0]) if cells else 0
        for combo in itertools.product(*lists):
            for column, cell in zip(cells, combo):
                column.append(cell)
        spans.append((start, len(cells[0])))
    if not any(spans):
        return [None] * len(variants)
    cols = [_encoded(nodes[s].type, column) for (_, _, s), column in zip(slots, cells)]
    args = [[] if is_list else None for is_list, _ in step.ports]
    for (p, k, _), col in zip(slots, cols):
        if k is None:
            args[p] = col
        else:
            args[p].append(col)
    out = step.kernel.fn(*args, **kwargs)
    values = decode(t, out.values, None)
    absent = [False] * len(values) if out.abstain is None else out.abstain.tolist()
    failed = None if out.failed is None else out.failed.tolist()
    score, lo, hi, optional = t.kind == "score", t.lo, t.hi, t.optional
    results = []
    for span in spans:
        if span is None:
            results.append(None)
            continue
        a, b = span
        vs, ab = values[a:b], absent[a:b]
        if (failed is not None and any(failed[a:b])) or (not optional and any(ab)) or \
                (score and not all(x or lo <= v <= hi for v, x in zip(vs, ab))):  # unfit (NaN fails both)
            results.append(None)
            continue
        if all(ab) or (not any(ab) and all(type(v) is type(vs[0]) and v == vs[0] for v in vs)):
            results.append(("settled", out.values[a], ab[0]))
            continue
        rest = [v for v, x in zip(vs, ab) if not x]
        if t.kind == "score":
            results.append(("open", min(rest), max(rest), 0, any(ab)))
        else:
            codes = {int(c) for c, x in zip(out.values[a:b].tolist(), ab) if not x}
            results.append(("open", 0.0, 0.0, sum(1 << c for c in codes), any(ab)))
    return results


def settle(plan, nodes: list, m: int, where: Callable, kwargs_of: Callable | None = None) -> np.ndarray:
    """Fill in every operator node of `nodes` (one Possibles per node position; criteria and constants set)
    over R rows, m rows (candidates) an item. Returns per row the position of the first operator node that
    failed on settled inputs (-1 where none did). `where(node_id, candidate, kind)` names a node for a
    cause; `kwargs_of(step)` gives a step's kernel arguments (default: the step's own)."""
    R = len(next(n for n in nodes if n is not None).values)
    first_failed = np.full(R, -1)
    for step in plan.steps:
        kw = step.kwargs if kwargs_of is None else kwargs_of(step)
        t = step.node.type
        slots = _slots(step)
        sources = [s for _, _, s in slots]
        open_in = nodes[sources[0]].open.copy()
        for s in sources[1:]:
            open_in |= nodes[s].open
        if open_in.all():  # nothing settled to compute: only corners (the item path's usual case when settling)
            node = nodes[step.index] = Possibles(t, np.zeros(R, dtype(t)), np.zeros(R, bool), open_in.copy())
            bad = ()
        else:
            args = [[nodes[s] for s in srcs] if is_list else nodes[srcs[0]] for is_list, srcs in step.ports]
            cols = [[NodeValues(n.values, n.abstain, n.open) for n in a] if type(a) is list else
                    NodeValues(a.values, a.abstain, a.open) for a in args]
            out = step.kernel.fn(*cols, **kw)
            abstain = np.zeros(R, bool) if out.abstain is None else out.abstain
            bad = step.unfit(out.values, abstain)
            if bad is None:
                bad = np.zeros(R, bool)
            if out.failed is not None:
                bad |= out.failed
            bad &= ~open_in
            node = nodes[step.index] = Possibles(t, out.values.copy(), abstain.copy(), open_in.copy())
            bad = np.flatnonzero(bad).tolist()
        for r in bad:
            c = r % m
            if out.failed is not None and out.failed[r]:
                problem = step.kernel.why(r, *cols, **kw)
            else:
                shown = decode(t, out.values[r:r + 1], abstain[r:r + 1])[0]
                problem = f"`{step.node.op}` produced a value that does not fit: {shown!r}"
            node.set_top(r, {(step.index, c, f"{where(step.node.id, c, 'node')}: {problem}")})
            if first_failed[r] < 0:
                first_failed[r] = step.index
        rows = np.flatnonzero(open_in).tolist()
        if not rows:
            continue
        for r, got in zip(rows, _corner_outputs(step, slots, kw, nodes, t, [(r, None) for r in rows])):
            causes = frozenset().union(*(nodes[s].causes[r] for s in sources if r in nodes[s].causes))
            if got is None:
                node.set_top(r, causes)
            elif got[0] == "settled":
                node.open[r] = False
                node.values[r], node.abstain[r] = got[1], got[2]
            else:
                node.set_possible(r, *got[1:], causes)
    return first_failed


def to_possibles(plan, values: list, m: int) -> list:
    """The settling columns of one item's values (per node, a tuple of m values, Unsettled where not known;
    None for a node not computed yet): the constants are filled in."""
    nodes: list = [None] * len(values)
    for i, v in plan.consts:
        values[i] = (v,) * m
    for i, cells in enumerate(values):
        if cells is None:
            continue
        t = plan.nodes[i].type
        col = encode(t, [x if type(x) is not Unsettled else ABSTAIN for x in cells])
        node = nodes[i] = Possibles(t, col.values, col.abstain & np.array([type(x) is not Unsettled for x in cells]))
        for r, x in enumerate(cells):
            if type(x) is Unsettled:
                p = x.possible
                if p.values is None:
                    node.set_possible(r, p.lo, p.hi, 0, p.abstain, x.causes)
                else:
                    bits = sum(1 << c for c, v in enumerate(_levels(t)) if v in p.values)
                    node.set_possible(r, 0.0, 0.0, bits, p.abstain, x.causes)
    return nodes


def from_possibles(nodes: list) -> list:
    """One item's values (per node, a tuple of values, Unsettled where open) from its settling columns."""
    out = []
    for node in nodes:
        t = node.type
        cells = decode(t, node.values, node.abstain)
        for r in np.flatnonzero(node.open).tolist():
            may = bool(node.may_abstain[r])
            if t.kind == "score":
                possible = Possible(None, float(node.lo[r]), float(node.hi[r]), may)
            else:
                bits = int(node.bits[r])
                possible = Possible(frozenset(v for c, v in enumerate(_levels(t)) if bits >> c & 1), abstain=may)
            cells[r] = Unsettled(possible, node.causes[r])
        out.append(tuple(cells))
    return out


def liveness(plan, nodes: list, row: int, kwargs_of: Callable | None = None) -> tuple[set, dict]:
    """(positions of the nodes that can still change the sink on `row`, blockers) given the settled nodes:
    blockers maps a node that cannot to (the node position that cuts it off, its settled value)."""
    live = {plan.sink_index}
    blockers: dict = {}
    for step in reversed(plan.steps):
        i = step.index
        if i not in live:
            continue
        slots = _slots(step)
        dead = [(n, s) for n, (_, _, s) in enumerate(slots) if s not in live]
        if not dead:
            continue
        kw = step.kwargs if kwargs_of is None else kwargs_of(step)
        t = step.node.type
        outs = _corner_outputs(step, slots, kw, nodes, t, [(row, n) for n, _ in dead])
        for (_, s), got in zip(dead, outs):
            if s in live:
                continue
            if got is None or got[0] != "settled":
                live.add(s)
                blockers.pop(s, None)
            else:
                blockers.setdefault(s, (i, decode(t, np.array([got[1]]), np.array([got[2]]))[0]))
    # a node cut off everywhere inherits the blocker of a node it feeds
    for step in reversed(plan.steps):
        if step.index in live:
            continue
        b = blockers.get(step.index)
        for _, sources in step.ports:
            for s in sources:
                if s not in live and b is not None:
                    blockers.setdefault(s, b)
    return live, blockers
