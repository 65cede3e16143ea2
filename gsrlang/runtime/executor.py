"""Execution: judge every criterion for every candidate, compose, read out.

`execute(program, item, registry)` evaluates one item:

1. every criterion node is judged for every candidate, concurrently (judge calls
   are bounded by a semaphore shared by the whole run; judges marked `inline`, which
   do no I/O, are simply awaited in turn);
2. every judgment is checked against its criterion's declared type (an answer that
   does not fit, or an abstention where the type has no `?`, makes it invalid);
3. if every judgment is valid, the operators run in the program's topological order
   (`Plan.compose`), candidate-aligned, each output checked against its node's type;
4. the readout maps the sink vector onto the task's native score or verdict.

An item never raises: a judge that raises, an invalid judgment, an operator that
fails (every item skipped) or a readout that cannot read the sink make it an
*invalid* item with a reason; a data row that could not become an item is a
*failed* one. `run_items` streams many items with a bounded number in flight and
yields their results in input order, so memory stays flat for any number of items;
`run_items_each` does the same with each item under its own program (`gsr run --programs`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator, Callable, Iterable, Sequence

import attrs

from gsrlang.data import Item, ItemError
from gsrlang.judgment import Judgment
from gsrlang.program import Program
from gsrlang.runtime.compose import CompositionError, Plan
from gsrlang.runtime.readout import ReadoutResult, read
from gsrlang.runtime.values import ABSTAIN, value_problem

__all__ = ["ItemRun", "LabelReader", "all_inline", "check_judgments", "default_mode", "execute", "failed_run",
           "run_items", "run_items_each"]

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


def default_mode(program: Program) -> str | None:
    """The program's only task, or None when it declares both."""
    modes = [m for m, r in (("pointwise", program.readout.pointwise), ("pairwise", program.readout.pairwise)) if r]
    return modes[0] if len(modes) == 1 else None


def failed_run(error: ItemError, mode: str) -> ItemRun:
    return ItemRun(error.id, error.line, mode, (), "failed", error.reason)


def _where(node_id: str, cid: str, m: int, kind: str = "criterion") -> str:
    return f"{kind} `{node_id}`" + (f" (candidate {cid})" if m > 1 else "")


def check_judgments(plan: Plan, judgments: dict, candidates: Sequence[str]) -> tuple[list, dict, str | None]:
    """(values with criteria filled in, judgments as recorded, the item's reason if any is invalid).

    An `ok` judgment whose value does not fit the criterion's type, and an abstention
    for a type without `?`, are turned into invalid judgments (the value is kept for the
    trace). Criterion values are the judgment's value, ABSTAIN, or None when invalid.
    """
    m = len(candidates)
    values = plan.new_values()
    checked = {}
    reasons = []
    for i, node in plan.criteria:
        row = []
        out = []
        for c, j in enumerate(judgments[node.id]):
            if j.status == "ok":
                problem = value_problem(j.value, node.type) if j.value is not ABSTAIN else "an `ok` answer has no value"
                if problem:
                    j = attrs.evolve(j, status="invalid", reason=f"the answer does not fit: {problem}")
            elif j.status == "abstained" and not node.type.optional:
                why = f" ({j.reason})" if j.reason else ""
                j = attrs.evolve(j, status="invalid",
                                 reason=f"abstained{why}, but `{node.type}` cannot abstain (declare it `{node.type}?`)")
            if j.status == "invalid":
                reasons.append(f"{_where(node.id, candidates[c], m)}: {j.reason or 'invalid judgment'}")
                out.append(None)
            else:
                out.append(ABSTAIN if j.status == "abstained" else j.value)
            row.append(j)
        checked[node.id] = tuple(row)
        values[i] = tuple(out)
    reason = None
    if reasons:
        reason = reasons[0] + (f" (and {len(reasons) - 1} more invalid judgment{'s' if len(reasons) > 2 else ''})"
                               if len(reasons) > 1 else "")
    return values, checked, reason


def finish(plan: Plan, mode: str, item_id, line: int, candidates: tuple[str, ...], values: list,
           judgments: dict, reason: str | None, label=None, label_error: str | None = None) -> ItemRun:
    """Compose and read out (the deterministic part shared by execution and replay)."""
    if reason is not None:
        return ItemRun(item_id, line, mode, candidates, "invalid", reason, tuple(values), judgments,
                       label=label, label_error=label_error)
    m = len(candidates)
    try:
        plan.compose(values, m)
    except CompositionError as exc:
        return ItemRun(item_id, line, mode, candidates, "invalid",
                       f"{_where(exc.node_id, candidates[exc.candidate], m, 'node')}: {exc.reason}",
                       tuple(values), judgments, label=label, label_error=label_error, failed_node=exc.node_id)
    sink = dict(zip(candidates, values[plan.sink_index]))
    result = read(plan.program.readout, mode, candidates, sink)
    status = "ok" if result.status == "ok" else "invalid"
    why = None if result.status == "ok" else f"readout: {result.reason}"
    return ItemRun(item_id, line, mode, candidates, status, why, tuple(values), judgments, result, label, label_error)


async def _call(judge, node, item, candidate, limiter: asyncio.Semaphore | None) -> Judgment:
    try:
        if limiter is None:
            result = await judge.judge(node, item, candidate)
        else:
            async with limiter:
                result = await judge.judge(node, item, candidate)
    except Exception as exc:  # a judge that raises makes this judgment (and the item) invalid, never the run
        return Judgment.invalid(f"the judge failed: {type(exc).__name__}: {exc}")
    if not isinstance(result, Judgment):
        return Judgment.invalid(f"the judge returned {type(result).__name__}, not a Judgment")
    return result


async def _call_joint(judge, node, item, limiter) -> tuple[Judgment, ...]:
    m = len(item.candidates)
    try:
        if limiter is None:
            result = await judge.judge_joint(node, item)
        else:
            async with limiter:
                result = await judge.judge_joint(node, item)
    except Exception as exc:
        return (Judgment.invalid(f"the judge failed: {type(exc).__name__}: {exc}"),) * m
    result = tuple(result)
    if len(result) != m or not all(isinstance(j, Judgment) for j in result):
        return (Judgment.invalid(f"the joint judge returned {len(result)} answers for {m} candidates"),) * m
    return result


async def judge_item(plan: Plan, item: Item, registry, limiter: asyncio.Semaphore | None = None) -> dict:
    """{criterion id: (Judgment per candidate)}."""
    results: dict[str, object] = {}
    tasks = []
    for _, node in plan.criteria:
        judge = registry.judge_for(node)
        joint = (len(item.candidates) > 1 and node.criterion.procedure.args.get("joint")
                 and hasattr(judge, "judge_joint"))
        if getattr(judge, "inline", False):
            if joint:
                results[node.id] = await _call_joint(judge, node, item, None)
            else:
                results[node.id] = tuple([await _call(judge, node, item, c, None) for c in item.candidates])
        elif joint:
            tasks.append((node.id, None, asyncio.ensure_future(_call_joint(judge, node, item, limiter))))
        else:
            for c in item.candidates:
                tasks.append((node.id, c.id, asyncio.ensure_future(_call(judge, node, item, c, limiter))))
    if tasks:
        await asyncio.gather(*(t for _, _, t in tasks))
        per_node: dict[str, list] = {}
        for node_id, cid, task in tasks:
            if cid is None:
                results[node_id] = task.result()
            else:
                per_node.setdefault(node_id, []).append(task.result())
        for node_id, row in per_node.items():
            results[node_id] = tuple(row)
    return results


async def execute(program: Program | Plan, item: Item, registry, mode: str | None = None,
                  limiter: asyncio.Semaphore | None = None, labels: LabelReader | None = None) -> ItemRun:
    """Evaluate one item. Never raises for a problem with the item or its judgments."""
    plan = program if isinstance(program, Plan) else Plan(program)
    mode = mode or default_mode(plan.program)
    if mode is None:
        raise ValueError("the program declares both tasks: say which mode to run")
    candidates = tuple(c.id for c in item.candidates)
    label, label_error = labels(item) if labels else (None, None)
    need = 1 if mode == "pointwise" else 2
    if len(candidates) != need:
        return ItemRun(item.id, item.line, mode, candidates, "failed",
                       f"a {mode} item needs {need} candidate{'s' if need > 1 else ''}, got {len(candidates)}",
                       label=label, label_error=label_error)
    judgments = await judge_item(plan, item, registry, limiter)
    values, checked, reason = check_judgments(plan, judgments, candidates)
    return finish(plan, mode, item.id, item.line, candidates, values, checked, reason, label, label_error)


def all_inline(plan: Plan, registry) -> bool:
    """Whether every criterion of the plan is served by an inline judge (no I/O: no task per item needed)."""
    return all(getattr(registry.judge_for(node), "inline", False) for _, node in plan.criteria)


def run_items(program: Program | Plan, items: Iterable[Item | ItemError], registry, mode: str | None = None,
              concurrency: int = 8, labels: LabelReader | None = None,
              window: int | None = None) -> AsyncIterator[ItemRun]:
    """Evaluate a stream of items, yielding one ItemRun per entry, in input order.

    At most `concurrency` judge calls run at once, and at most `window` items
    (default 2 x concurrency) are in flight, so memory does not grow with the input.
    A data row that could not become an item comes out as a failed ItemRun.
    """
    plan = program if isinstance(program, Plan) else Plan(program)
    mode = mode or default_mode(plan.program)
    concurrency = max(1, int(concurrency))
    limiter = asyncio.Semaphore(concurrency)
    inline = all_inline(plan, registry)

    async def start(entry):
        if isinstance(entry, ItemError):
            return failed_run(entry, mode)
        if inline:  # nothing to wait for: no task per item
            return await execute(plan, entry, registry, mode, None, labels)
        return asyncio.ensure_future(execute(plan, entry, registry, mode, limiter, labels))

    return _in_order(items, start, window or 2 * concurrency)  # closing it cancels what is still in flight


def run_items_each(resolve: Callable[[Item], object], items: Iterable[Item | ItemError], registry, mode: str,
                   concurrency: int = 8, window: int | None = None) -> AsyncIterator[tuple[ItemRun, object]]:
    """Evaluate a stream of items, each under its own program: (ItemRun, ref) per entry, in input order.

    `resolve(item)` returns the item's program reference: an object with `plan` (the
    Plan to run, or None when the item cannot run under a program), `problem` (why
    not, when `plan` is None), `labels` (a LabelReader, or None) and `inline` (every
    judge of the plan is inline). An item without a plan comes out invalid with the
    problem as its reason; a data row that could not become an item comes out failed,
    with ref None. Concurrency, window and order are as for `run_items`.
    """
    concurrency = max(1, int(concurrency))
    limiter = asyncio.Semaphore(concurrency)

    async def pair(ref, item):
        return await execute(ref.plan, item, registry, mode, limiter, ref.labels), ref

    async def start(entry):
        if isinstance(entry, ItemError):
            return failed_run(entry, mode), None
        ref = resolve(entry)
        if ref.plan is None:
            label, label_error = ref.labels(entry) if ref.labels else (None, None)
            return ItemRun(entry.id, entry.line, mode, tuple(c.id for c in entry.candidates), "invalid",
                           ref.problem, label=label, label_error=label_error), ref
        if ref.inline:
            return await execute(ref.plan, entry, registry, mode, None, ref.labels), ref
        return asyncio.ensure_future(pair(ref, entry))

    return _in_order(items, start, window or 2 * concurrency)


async def _in_order(entries: Iterable, start, window: int) -> AsyncIterator:
    """Start each entry (`await start(entry)`: a result, or a Future of one) with at most `window` in flight;
    yield the results in input order."""
    window = max(1, window)
    pending: deque = deque()
    try:
        for entry in entries:
            pending.append(await start(entry))
            while pending and (len(pending) >= window or _done(pending[0])):
                yield await _result(pending.popleft())
        while pending:
            yield await _result(pending.popleft())
    finally:
        for p in pending:
            if isinstance(p, asyncio.Future):
                p.cancel()


def _done(p) -> bool:
    return not isinstance(p, asyncio.Future) or p.done()


async def _result(p):
    return await p if isinstance(p, asyncio.Future) else p
