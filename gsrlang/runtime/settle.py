"""Settling: what an item's nodes are when some judgments are not known, and which judgments still matter.

A judgment can be unknown for two reasons: it was invalid (the judge failed, the
answer did not fit the type), or it was never asked for (short-circuit judging
skipped it). Either way its criterion's value is *unsettled*: it could have been any
value of the criterion's type (an abstention too, for a `T?`), or invalid. Settling
evaluates the graph over such values, candidate by candidate, with every operator
applied to everything its inputs may still be:

- an operator whose output is the same whatever its unsettled inputs are gives
  that output, settled (`cap(base, trigger, at: 0.0)` whose trigger holds is 0.0
  whatever the base; `any` with one true item is true);
- otherwise its output is unsettled too, with what it may still be and the causes.

The item is valid exactly when its sink is settled for every candidate: then the
result line (score, winner, the sink values themselves) is the one every possible
value of the unknown judgments would give. This is the one semantics of invalid
judgments and failing operators, for full and short-circuit judging and replay
alike, which is why the two modes give identical results.

How "may still be" is represented and computed (`Possible`): a finite set of values
(Bool, labels) or an interval of floats (Score), plus whether it may abstain.
Every operator of the catalogue is monotone in each Score input once its discrete
inputs (Bool, labels, abstentions) are fixed, so it is evaluated on the *corners*
(every discrete value, each interval's two ends) and its outputs' hull bounds every
output in between. More than `CORNER_LIMIT` combinations, or any combination on
which the operator fails, give the whole of the node's type: a sound
over-approximation. Signed zeros cannot break this: judged Scores and parameters
are read with -0.0 as 0.0, and no operator makes a -0.0 from non-negative zeros.

`liveness` runs the other way, from the sink: an input edge is *dead* when the
operator's output is settled whatever that input is (the input replaced by all of
its type); a criterion none of whose paths to the sink is live cannot change the
result line, and short-circuit judging does not ask for it (`moot_reasons`).
"""

from __future__ import annotations

import itertools
import math

from gsrlang.semantics.values import ABSTAIN, Unsettled, format_value

__all__ = ["CORNER_LIMIT", "Possible", "liveness", "settle", "top", "unsettled"]

CORNER_LIMIT = 512  # operator evaluations per node and candidate before settling falls back to the whole type


class Possible:
    """What an unsettled value may still be: discrete `values` (a frozenset) or the interval [lo, hi]
    (values None), and whether it may abstain."""

    __slots__ = ("values", "lo", "hi", "abstain")

    def __init__(self, values: frozenset | None, lo: float = 0.0, hi: float = 0.0, abstain: bool = False):
        self.values, self.lo, self.hi, self.abstain = values, lo, hi, abstain

    def corners(self) -> list:
        out = list(self.values) if self.values is not None else ([self.lo] if self.lo == self.hi else
                                                                 [self.lo, self.hi])
        if self.abstain:
            out.append(ABSTAIN)
        return out

    def __repr__(self) -> str:
        body = (", ".join(sorted(map(format_value, self.values))) if self.values is not None
                else f"{format_value(self.lo)}..{format_value(self.hi)}")
        return "{" + body + (", abstained" if self.abstain else "") + "}"


def top(t) -> Possible:
    """Everything a value of type `t` can be."""
    if t.kind == "score":
        return Possible(None, float(t.lo) + 0.0, float(t.hi) + 0.0, t.optional)
    if t.kind == "bool":
        return Possible(frozenset((True, False)), abstain=t.optional)
    return Possible(frozenset(t.labels), abstain=t.optional)


def unsettled(t, causes) -> Unsettled:
    return Unsettled(top(t), frozenset(causes))


def _from_outputs(outputs: list) -> Possible:
    abstain = any(o is ABSTAIN for o in outputs)
    rest = [o for o in outputs if o is not ABSTAIN]
    if rest and all(type(o) is float for o in rest):
        return Possible(None, min(rest), max(rest), abstain)
    return Possible(frozenset(rest), abstain=abstain)


def _same(outputs: list) -> bool:
    first = outputs[0]
    t = type(first)
    return all(type(o) is t and (o is first or o == first) for o in outputs)


def apply_unsettled(step, args: list, node_type, c: int, where: str):
    """The output of `step` for one candidate whose arguments (port values, lists for list ports) hold
    Unsettled values: a settled value when every combination of corners gives the same one. The
    combinations are rows of one batch through the operator's kernel."""
    slots = []  # (port index, position in the list port or None, corners)
    causes = set()
    size = 1
    for p, arg in enumerate(args):
        for k, v in (enumerate(arg) if type(arg) is list else ((None, arg),)):
            if type(v) is Unsettled:
                corners = v.possible.corners()
                causes |= v.causes
                slots.append((p, k, corners))
                size *= max(1, len(corners))
    if size > CORNER_LIMIT:
        return unsettled(node_type, causes)
    rows = []
    for combo in itertools.product(*(s[2] for s in slots)):
        filled = [list(a) if type(a) is list else a for a in args]
        for (p, k, _), v in zip(slots, combo):
            if k is None:
                filled[p] = v
            else:
                filled[p][k] = v
        rows.append(filled)
    if not rows:
        return unsettled(node_type, causes)
    outputs, failed, _ = step.run_rows(rows)
    check = step.check
    if (failed is not None and failed.any()) or not all(map(check, outputs)):
        return unsettled(node_type, causes)
    if _same(outputs):
        return outputs[0]
    return Unsettled(_from_outputs(outputs), frozenset(causes))


def settle(plan, values: list, m: int, where) -> str | None:
    """Fill in every operator node of `values` (criteria set, each a tuple of m values, Unsettled where not
    known), tolerating unsettled values and failing operators. Returns the first operator node that failed
    on settled inputs (None when none did). `where(node_id, c, kind)` names a node for a cause."""
    failed = None
    for i, v in plan.consts:
        values[i] = (v,) * m
    for step in plan.steps:
        ports = step.ports
        out = []
        for c in range(m):
            args = [[values[s][c] for s in sources] if is_list else values[sources[0]][c]
                    for is_list, sources in ports]
            if any(type(a) is Unsettled or (type(a) is list and any(type(x) is Unsettled for x in a))
                   for a in args):
                out.append(apply_unsettled(step, args, step.node.type, c, ""))
                continue
            (v,), bad, cols = step.run_rows([args])
            if bad is not None and bad[0]:
                problem = step.why(0, cols)
            else:
                problem = None if step.check(v) else f"`{step.node.op}` produced a value that does not fit: {v!r}"
            if problem is not None:
                failed = failed or step.node.id
                v = unsettled(step.node.type, {(step.index, c, f"{where(step.node.id, c, 'node')}: {problem}")})
            out.append(v)
        values[step.index] = tuple(out)
    return failed


def _settled_output(step, args: list, slot: tuple, source_type) -> object:
    """The step's output for one candidate with the input at `slot` (port, position) replaced by all of
    its type: a settled value, or Unsettled."""
    p, k = slot
    whole = Unsettled(top(source_type), frozenset())
    filled = [list(a) if type(a) is list else a for a in args]
    if k is None:
        filled[p] = whole
    else:
        filled[p][k] = whole
    return apply_unsettled(step, filled, step.node.type, 0, "")


def liveness(plan, values: list, c: int) -> tuple[set, dict]:
    """(positions of the nodes that can still change the sink of candidate `c`, blockers) given the current
    (settled or not) values: blockers maps a node that cannot to (the node position that cuts it off, its
    settled value)."""
    live = {plan.sink_index}
    blockers: dict = {}
    for step in reversed(plan.steps):
        i = step.index
        if i not in live:
            continue
        args = [[values[s][c] for s in sources] if is_list else values[sources[0]][c]
                for is_list, sources in step.ports]
        for p, (is_list, sources) in enumerate(step.ports):
            for k, s in enumerate(sources):
                if s in live:
                    continue
                out = _settled_output(step, args, (p, k if is_list else None), plan.nodes[s].type)
                if type(out) is Unsettled:
                    live.add(s)
                    blockers.pop(s, None)
                else:
                    blockers.setdefault(s, (i, out))
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


def moot_reason(plan, blocker) -> str:
    """Why a judgment is not asked for: `moot: cap `safe` fired at 0.0`."""
    if blocker is None:
        return "moot: its node does not reach the sink"
    i, value = blocker
    node = plan.nodes[i]
    shown = repr(value) if type(value) is float else format_value(value)
    if node.kind == "gate":
        return f"moot: {node.op} `{node.id}` fired at {shown}"
    return f"moot: {node.op} `{node.id}` is {shown} whatever it is"
