"""Execution: judge what can change the result, settle the graph, read out.

`execute(program, item, registry)` evaluates one item:

1. the criteria are judged, concurrently (judge calls are bounded by the run's one
   `CallLimit`, gsrlang.execution.planner, held around each call; judges marked
   `inline`, which do no I/O, are simply awaited in turn). With short-circuit judging
   (the default) this happens in rounds, cheap judges and gate triggers first, and a
   judgment that can no longer change the result line is not asked for but recorded
   as `skipped` with the reason (`judge_lazily`); `short_circuit=False` judges
   everything;
2. every judgment is checked against its criterion's declared type (an answer that
   does not fit, or an abstention where the type has no `?`, makes it invalid);
3. the operators run in the program's topological order (`Plan.compose`),
   candidate-aligned, each output checked against its node's type; an invalid or
   skipped judgment, or an operator that fails, leaves a value *unsettled*, and
   the graph is settled as far as it can be (gsrlang.semantics.settle);
4. when the sink is settled for every candidate, the readout maps it onto the
   task's native score or verdict; otherwise the item is invalid, and its reason is
   the first cause (an invalid judgment, a failed operator) in program order.

Because a judgment is skipped only when no value it could have had (any value of its
type, an abstention for a `T?`, or invalid) changes the sink, short-circuit and full
judging give the same result line, always (tests/test_short_circuit.py proves it
over generated programs). An item never raises; a data row that could not become an
item is a *failed* one. `run_items` streams many items with a bounded number in
flight and yields their results in input order, so memory stays flat for any number
of items; `run_items_each` does the same with each item under its own program (`gsr
run --programs`).
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import TYPE_CHECKING, AsyncIterator, Callable, Iterable, Sequence

import attrs

from gsrlang.files.dataset import Item, ItemError
from gsrlang.lang.program import CheckedProgram
from gsrlang.semantics.compose import CompositionError, Plan
from gsrlang.semantics.judgment import Judgment
from gsrlang.semantics.kernels import INVALID
from gsrlang.semantics.readout import ReadoutResult, read
from gsrlang.semantics.settle import from_possibles, liveness, settle, to_possibles
from gsrlang.semantics.values import ABSTAIN, Unsettled, format_value, unsettled
from gsrlang.trace.decode import judgment_cell

if TYPE_CHECKING:
    from gsrlang.execution.limit import CallLimit

__all__ = ["ItemRun", "LabelReader", "all_inline", "check_judgments", "default_mode", "execute", "failed_run",
           "reason_of", "run_items", "run_items_each"]

# (item) -> (gold label in the form the results use, or None; why the label cannot be used, or None)
LabelReader = Callable[[Item], tuple[object, "str | None"]]


@attrs.frozen
class ItemRun:
    """The outcome of one item: everything the results line and the trace record need."""

    id: str | None
    line: int
    mode: str
    candidates: tuple[str, ...]
    status: str  # "ok" | "invalid" | "failed"
    reason: str | None = None
    values: tuple | None = None  # per node (program order): a tuple of per-candidate values, or None
    judgments: dict = attrs.field(factory=dict)  # criterion id -> tuple of Judgment, one per candidate
    readout: ReadoutResult | None = None
    label: object = None
    label_error: str | None = None
    failed_node: str | None = None  # the operator node that failed, if any

    def judgment_counts(self) -> tuple[int, int]:
        """(judgments made, judgments skipped) for the run summary."""
        skipped = sum(j.status == "skipped" for row in self.judgments.values() for j in row)
        return sum(map(len, self.judgments.values())) - skipped, skipped


def default_mode(program: CheckedProgram) -> str | None:
    """The program's only task, or None when it declares both."""
    modes = [m for m, r in (("pointwise", program.readout.pointwise), ("pairwise", program.readout.pairwise)) if r]
    return modes[0] if len(modes) == 1 else None


def failed_run(error: ItemError, mode: str) -> ItemRun:
    return ItemRun(error.id, error.line, mode, (), "failed", error.reason)


def _where(node_id: str, cid: str, m: int, kind: str = "criterion") -> str:
    return f"{kind} `{node_id}`" + (f" (candidate {cid})" if m > 1 else "")


def check_judgment(node, j: Judgment, where: str) -> tuple[Judgment, object]:
    """(the judgment as recorded, the criterion's value for it): its value, ABSTAIN, or Unsettled when the
    judgment is invalid or was skipped.

    An `ok` judgment whose value does not fit the criterion's type, and an abstention
    for a type without `?`, become invalid (the value is kept for the trace). A Score
    of -0.0 is read as 0.0 (settling relies on it; see gsrlang.semantics.settle).
    """
    cell, why = judgment_cell(node.type, j.status, j.value, j.reason)
    if cell is not INVALID:
        if cell is not j.value and j.status != "abstained":  # -0.0, read as 0.0
            j = attrs.evolve(j, value=cell)
        return j, cell
    if why is not None:
        j = attrs.evolve(j, status="invalid", reason=why)
    if j.status == "skipped":
        return j, f"{where}: never judged ({j.reason or 'skipped'})"
    return j, f"{where}: {j.reason or 'invalid judgment'}"


def check_judgments(plan: Plan, judgments: dict, candidates: Sequence[str]) -> tuple[list, dict]:
    """(values with criteria filled in, judgments as recorded).

    Criterion values are the judgment's value, ABSTAIN, or Unsettled (an invalid or a
    skipped judgment; see `check_judgment`). Whether the item is valid is decided by
    `finish`: it is when its sink is settled whatever those judgments would have been.
    """
    m = len(candidates)
    values = plan.new_values()
    checked = {}
    for i, node in plan.criteria:
        row, out = [], []
        for c, j in enumerate(judgments[node.id]):
            j, v = check_judgment(node, j, _where(node.id, candidates[c], m))
            if j.status == "invalid" or j.status == "skipped":
                v = unsettled(node.type, ((i, c, v),))
            out.append(v)
            row.append(j)
        checked[node.id] = tuple(row)
        values[i] = tuple(out)
    return values, checked


def _reason(plan: Plan, causes) -> str:
    """The item's reason from the causes behind its unsettled sink: the first in program order, and a count."""
    ordered = sorted(causes)
    first = ordered[0][2]
    more = len(ordered) - 1
    if not more:
        return first
    noun = "invalid judgment" if all(plan.nodes[c[0]].kind == "criterion" for c in ordered[1:]) else "problem"
    return first + f" (and {more} more {noun}{'s' if more > 1 else ''})"


def reason_of(plan: Plan, causes, candidates: Sequence[str], criterion_cause: Callable) -> str | None:
    """The reason `finish` gives an item left invalid, from the causes a batch settle left on its sink
    (`columnar.Evaluation.causes`: an operator's text is ": <problem>", a criterion's is ""):
    `criterion_cause(node, candidate index, where)` gives a criterion's (`check_judgment`'s text for the
    recorded judgment), or None when it cannot, and then so does this."""
    m = len(candidates)
    first = min(causes)
    i, c, text = first
    node = plan.nodes[i]
    if node.kind == "criterion":
        text = criterion_cause(node, c, _where(node.id, candidates[c], m))
        if text is None:
            return None
    else:
        text = _where(node.id, candidates[c], m, "node") + text
    return _reason(plan, (causes - {first}) | {(i, c, text)})


def finish(plan: Plan, mode: str, item_id, line: int, candidates: tuple[str, ...], values: list,
           judgments: dict, label=None, label_error: str | None = None) -> ItemRun:
    """Compose and read out (the deterministic part shared by execution and replay).

    Values that are not settled (invalid or skipped judgments, failing operators) are
    settled as far as they can be (gsrlang.semantics.settle); the item is invalid when
    its sink is not settled for every candidate, with the first cause as its reason.
    """
    m = len(candidates)
    failed = None
    try:
        for i, _ in plan.criteria:
            for x in values[i]:
                if type(x) is Unsettled:
                    raise CompositionError("", 0, "")  # not all settled: the general path below
        plan.compose(values, m)
    except CompositionError:
        nodes = to_possibles(plan, values, m)
        first = settle(plan, nodes, m, lambda node_id, c, kind: _where(node_id, candidates[c], m, kind))
        values[:] = from_possibles(nodes)
        first = [f for f in first.tolist() if f >= 0]
        failed = plan.nodes[min(first)].id if first else None
    sink_values = values[plan.sink_index]
    causes = [x.causes for x in sink_values if type(x) is Unsettled]
    if causes:
        return ItemRun(item_id, line, mode, candidates, "invalid", _reason(plan, frozenset().union(*causes)),
                       tuple(values), judgments, label=label, label_error=label_error, failed_node=failed)
    sink = dict(zip(candidates, sink_values))
    result = read(plan.program.readout, mode, candidates, sink)
    status = "ok" if result.status == "ok" else "invalid"
    return ItemRun(item_id, line, mode, candidates, status, result.item_reason, tuple(values), judgments, result, label,
                   label_error, failed)


def moot_reason(plan: Plan, blocker) -> str:
    """Why a judgment is not asked for: `moot: cap `safe` fired at 0.0`."""
    if blocker is None:
        return "moot: its node does not reach the sink"
    i, value = blocker
    node = plan.nodes[i]
    shown = repr(value) if type(value) is float else format_value(value)
    if node.kind == "gate":
        return f"moot: {node.op} `{node.id}` fired at {shown}"
    return f"moot: {node.op} `{node.id}` is {shown} whatever it is"


async def _guarded(call, limiter, m: int | None = None):
    """Await a judge's call (held under `limiter` when one is given): its Judgment, or with `m`, a joint
    call's m Judgments. A judge that raises makes its judgments (and the item) invalid, never the run."""
    try:
        if limiter is None:
            result = await call()
        else:
            async with limiter:
                result = await call()
    except Exception as exc:
        failed = Judgment.invalid(f"the judge failed: {type(exc).__name__}: {exc}")
        return failed if m is None else (failed,) * m
    if m is None:
        if not isinstance(result, Judgment):
            return Judgment.invalid(f"the judge returned {type(result).__name__}, not a Judgment")
        return result
    result = tuple(result)
    if len(result) != m or not all(isinstance(j, Judgment) for j in result):
        return (Judgment.invalid(f"the joint judge returned {len(result)} answers for {m} candidates"),) * m
    return result


def call_judge(judge, node, item, candidate, limiter: CallLimit | None):
    return _guarded(lambda: judge.judge(node, item, candidate), limiter)


def _call_joint(judge, node, item, limiter):
    return _guarded(lambda: judge.judge_joint(node, item), limiter, len(item.candidates))


async def _judge_some(plan: Plan, item: Item, registry, limiter, wanted: dict) -> dict:
    """{criterion id: {candidate index: Judgment}} for `wanted` ({criterion id: candidate indexes}), in program
    order; a joint criterion is judged for every candidate in one call. Inline judges are awaited in turn, the
    others concurrently."""
    import asyncio

    results: dict[str, dict] = {}
    tasks = []
    cands = item.candidates
    for _, node in plan.criteria:
        want = wanted.get(node.id)
        if not want:
            continue
        judge = registry.judge_for(node)
        joint = (len(cands) > 1 and node.criterion.procedure.args.get("joint") and hasattr(judge, "judge_joint"))
        row = results[node.id] = {}
        if getattr(judge, "inline", False):
            if joint:
                row.update(enumerate(await _call_joint(judge, node, item, None)))
            else:
                for c in sorted(want):
                    row[c] = await call_judge(judge, node, item, cands[c], None)
        elif joint:
            tasks.append((row, None, asyncio.ensure_future(_call_joint(judge, node, item, limiter))))
        else:
            for c in sorted(want):
                tasks.append((row, c, asyncio.ensure_future(call_judge(judge, node, item, cands[c], limiter))))
    if tasks:
        await asyncio.gather(*(t for _, _, t in tasks))
        for row, c, task in tasks:
            if c is None:
                row.update(enumerate(task.result()))
            else:
                row[c] = task.result()
    return results


async def judge_item(plan: Plan, item: Item, registry, limiter: CallLimit | None = None) -> dict:
    """{criterion id: (Judgment per candidate)}: every criterion, every candidate."""
    every = range(len(item.candidates))
    made = await _judge_some(plan, item, registry, limiter, {node.id: every for _, node in plan.criteria})
    return {cid: tuple(row[c] for c in every) for cid, row in made.items()}


CHEAP = ("rule", "human", "verifier")  # procedure kinds judged first: no model call


_SCHEDULES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # plan -> (registry, its Schedule)


class Schedule:
    """How short-circuit judging orders one program's criteria (built once per program and judges).

    rank 0: cheap judges (rules, human fields, verifiers); 1: model-judged criteria
    that feed a gate's trigger; 2: the other model-judged criteria. `worth` is False
    when every judge is inline (no I/O): then there is nothing worth skipping, and
    everything is judged at once.
    """

    @classmethod
    def of(cls, plan: Plan, registry) -> "Schedule":
        """The plan's schedule for these judges (built once per plan and registry, kept while the plan lives)."""
        cached = _SCHEDULES.get(plan)
        if cached is None or cached[0] is not registry:
            cached = _SCHEDULES[plan] = (registry, cls(plan, registry))
        return cached[1]

    def __init__(self, plan: Plan, registry):
        self.worth = len(plan.criteria) > 1 and not all_inline(plan, registry)
        triggers = set()  # nodes that feed a gate's trigger, transitively (consumers come first)
        for step in reversed(plan.steps):
            for port, (_, sources) in zip(step.port_names, step.ports):
                if (step.node.kind == "gate" and port == "trigger") or step.index in triggers:
                    triggers.update(sources)
        self.rank = {}
        for i, node in plan.criteria:
            kind = getattr(node.criterion.procedure, "kind", "llm")
            self.rank[i] = 0 if kind in CHEAP else (1 if i in triggers else 2)


async def judge_lazily(plan: Plan, schedule: Schedule, item: Item, registry, limiter, candidates) -> dict:
    """Short-circuit judging: {criterion id: (Judgment per candidate)}, with `skipped` judgments for those
    that cannot change the result line.

    Rounds: settle the graph with what is judged so far (the rest unsettled), find the
    judgments that can still change a candidate's sink (`settle.liveness`), and judge
    those of the lowest rank; until none is left. What is left unjudged is skipped,
    with the reason (`moot: cap `safe` fired at 0.0`).
    """
    m = len(candidates)
    where = lambda node_id, c, kind="criterion": _where(node_id, candidates[c], m, kind)  # noqa: E731
    made: dict[str, dict] = {node.id: {} for _, node in plan.criteria}
    values = plan.new_values()
    for i, node in plan.criteria:
        values[i] = tuple(unsettled(node.type, ((i, c, where(node.id, c) + ": not judged yet"),)) for c in range(m))
    while True:
        nodes = to_possibles(plan, list(values), m)
        settle(plan, nodes, m, where)
        lives = [liveness(plan, nodes, c) for c in range(m)]
        todo = [(i, node, c) for i, node in plan.criteria for c in range(m)
                if i in lives[c][0] and c not in made[node.id]]
        if not todo:
            break
        rank = min(schedule.rank[i] for i, _, _ in todo)
        wanted: dict[str, set] = {}
        for i, node, c in todo:
            if schedule.rank[i] == rank:
                wanted.setdefault(node.id, set()).add(c)
        for node_id, row in (await _judge_some(plan, item, registry, limiter, wanted)).items():
            made[node_id].update(row)
        for i, node in plan.criteria:
            row = made[node.id]
            if row:
                values[i] = tuple(_value_of(node, row[c], i, c, where) if c in row else values[i][c] for c in range(m))
    out = {}
    for i, node in plan.criteria:
        row = made[node.id]
        out[node.id] = tuple(row[c] if c in row else
                             Judgment(None, "skipped", moot_reason(plan, lives[c][1].get(i))) for c in range(m))
    return out


def _value_of(node, j: Judgment, i: int, c: int, where):
    j, v = check_judgment(node, j, where(node.id, c))
    return unsettled(node.type, ((i, c, v),)) if j.status == "invalid" else v


async def execute(program: CheckedProgram | Plan, item: Item, registry, mode: str | None = None,
                  limiter: CallLimit | None = None, labels: LabelReader | None = None,
                  short_circuit: bool = True, schedule: "Schedule | None" = None) -> ItemRun:
    """Evaluate one item. Never raises for a problem with the item or its judgments.

    short_circuit: judge only what can still change the result (`judge_lazily`; the
    result is the one full judging gives); `schedule`: the program's, when the caller
    has it (built here otherwise)."""
    plan = program if isinstance(program, Plan) else Plan(program)
    mode = mode or default_mode(plan.program)
    if mode is None:
        raise ValueError("the program declares both tasks: say which mode to run")
    candidates = tuple(c.id for c in item.candidates)
    label, label_error = labels(item) if labels else (None, None)
    wrong = wrong_count(item, mode, candidates, label, label_error)
    if wrong is not None:
        return wrong
    if schedule is None and short_circuit:
        schedule = Schedule.of(plan, registry)
    if short_circuit and schedule.worth:
        judgments = await judge_lazily(plan, schedule, item, registry, limiter, candidates)
    else:
        judgments = await judge_item(plan, item, registry, limiter)
    values, checked = check_judgments(plan, judgments, candidates)
    return finish(plan, mode, item.id, item.line, candidates, values, checked, label, label_error)


def wrong_count(item: Item, mode: str, candidates: tuple, label, label_error) -> ItemRun | None:
    """The failed run of an item with the wrong number of candidates for `mode`; None when it has the right one."""
    need = 1 if mode == "pointwise" else 2
    if len(candidates) == need:
        return None
    return ItemRun(item.id, item.line, mode, candidates, "failed",
                   f"a {mode} item needs {need} candidate{'s' if need > 1 else ''}, got {len(candidates)}",
                   label=label, label_error=label_error)


def all_inline(plan: Plan, registry) -> bool:
    """Whether every criterion of the plan is served by an inline judge (no I/O: no task per item needed)."""
    return all(getattr(registry.judge_for(node), "inline", False) for _, node in plan.criteria)


def run_items(program: CheckedProgram | Plan, items: Iterable[Item | ItemError], registry, mode: str | None,
              limit: CallLimit, labels: LabelReader | None = None, window: int | None = None,
              short_circuit: bool = True) -> AsyncIterator[ItemRun]:
    """Evaluate a stream of items, yielding one ItemRun per entry, in input order.

    `limit`: the run's one bound on judge calls in flight (made where the run is planned); at most
    `window` items (default `limit.window`, twice the calls) are in flight, so memory does not grow
    with the input. A data row that could not become an item comes out as a failed ItemRun.
    """
    import asyncio

    plan = program if isinstance(program, Plan) else Plan(program)
    mode = mode or default_mode(plan.program)
    inline = all_inline(plan, registry)

    async def start(entry):
        if isinstance(entry, ItemError):
            return failed_run(entry, mode)
        if inline:  # nothing to wait for: no task per item
            return await execute(plan, entry, registry, mode, None, labels, short_circuit)
        return asyncio.ensure_future(execute(plan, entry, registry, mode, limit, labels, short_circuit))

    return _in_order(items, start, window or limit.window)  # closing it cancels what is still in flight


def run_items_each(resolve: Callable[[Item], object], items: Iterable[Item | ItemError], registry, mode: str,
                   limit: CallLimit, window: int | None = None,
                   short_circuit: bool = True) -> AsyncIterator[tuple[ItemRun, object]]:
    """Evaluate a stream of items, each under its own program: (ItemRun, ref) per entry, in input order.

    `resolve(item)` returns the item's program reference: an object with `plan` (the
    Plan to run, or None when the item cannot run under a program), `problem` (why
    not, when `plan` is None), `labels` (a LabelReader, or None) and `inline` (every
    judge of the plan is inline). An item without a plan comes out invalid with the
    problem as its reason; a data row that could not become an item comes out failed,
    with ref None. The limit, window and order are as for `run_items`.
    """
    import asyncio

    async def pair(ref, item):
        return await execute(ref.plan, item, registry, mode, limit, ref.labels, short_circuit), ref

    async def start(entry):
        if isinstance(entry, ItemError):
            return failed_run(entry, mode), None
        ref = resolve(entry)
        if ref.plan is None:
            label, label_error = ref.labels(entry) if ref.labels else (None, None)
            return ItemRun(entry.id, entry.line, mode, tuple(c.id for c in entry.candidates), "invalid",
                           ref.problem, label=label, label_error=label_error), ref
        if ref.inline:
            return await execute(ref.plan, entry, registry, mode, None, ref.labels, short_circuit), ref
        return asyncio.ensure_future(pair(ref, entry))

    return _in_order(items, start, window or limit.window)


async def _in_order(entries: Iterable, start, window: int) -> AsyncIterator:
    """Start each entry (`await start(entry)`: a result, or a Future of one) with at most `window` in flight;
    yield the results in input order."""
    from asyncio import Future

    window = max(1, window)
    pending: deque = deque()
    try:
        for entry in entries:
            pending.append(await start(entry))
            while pending and (len(pending) >= window or not isinstance(pending[0], Future) or pending[0].done()):
                p = pending.popleft()
                yield await p if isinstance(p, Future) else p
        while pending:
            p = pending.popleft()
            yield await p if isinstance(p, Future) else p
    finally:
        for p in pending:
            if isinstance(p, Future):
                p.cancel()
