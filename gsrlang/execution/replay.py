"""Replay: recompute composition and readout from a trace, with no judge call.

Two uses:

- **verify** (`gsr replay TRACE`): the program is the one the trace was recorded
  with (same content hash). Every operator node and the readout are recomputed
  from the recorded criterion outputs, and every recorded output, the readout and
  the result line must be reproduced *exactly* (same JSON values, floats bit for
  bit). The recorded node structure (kind, operator, parameters, inputs) must also
  match the program, and each criterion's output must agree with its recorded
  judgment. The first difference is reported precisely.
- **what if** (`gsr replay TRACE --program EDITED.gsr`): the recorded judgments
  are re-composed under an edited program. It may change operators, weights,
  gates, level values, the readout, and may leave recorded criteria unused, but
  every criterion it has must be in the trace with the same type (a `T` may become
  `T?`). Nothing is compared; new results (and a new trace) can be written.
"""

from __future__ import annotations

import contextlib
import functools
import operator
from typing import Iterable, Iterator

import attrs

from gsrlang.execution.executor import ItemRun, check_judgments, finish
from gsrlang.files.jsonl import same
from gsrlang.lang.program import CheckedProgram
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.values import ABSTAIN, Unsettled
from gsrlang.trace import TraceView
from gsrlang.trace.decode import recorded_judgment
from gsrlang.trace.read import logical_record
from gsrlang.trace.schema import MALFORMED, result_line, unknown_flags
from gsrlang.trace.write import node_static

__all__ = ["Difference", "Refused", "ReplayError", "carried", "carried_run", "compatibility_problems",
           "first_difference", "rebuild", "replay_records", "replay_records_each", "same", "stored_difference"]


class ReplayError(Exception):
    """The trace cannot be replayed under this program (another version, missing criteria, ...)."""


class Refused(Exception):
    """A trace holds a record that the columns cannot decide (verification) or write a line for (the what-if):
    the whole trace is replayed item by item, never that row alone."""


@attrs.frozen
class Difference:
    item_id: object
    trace_line: int
    node: str  # a node id, or "readout" / "result"
    candidate: str | None
    recorded: object
    recomputed: object
    detail: str = ""

    def describe(self) -> str:
        where = f"item {self.item_id!r} (trace line {self.trace_line})"
        what = "the readout" if self.node == "readout" else "the result line" if self.node == "result" \
            else f"node `{self.node}`"
        cand = f", candidate {self.candidate}" if self.candidate else ""
        text = f"{where}, {what}{cand}: recorded {_show(self.recorded)}, recomputed {_show(self.recomputed)}"
        return text + (f" ({self.detail})" if self.detail else "")


def _show(v) -> str:
    import json

    try:
        return json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(v)


# ---- compatibility ------------------------------------------------------------------------------------------
def compatibility_problems(program: CheckedProgram, record: dict, program_label: str = "the program") -> list[str]:
    """Why the recorded judgments of `record` cannot feed `program`'s criteria (empty when they can)."""
    recorded = TraceView.of_record(record).nodes
    problems = []
    for node in program.criteria:
        rec = recorded.get(node.id)
        if rec is None:
            problems.append(f"criterion `{node.id}` of {program_label} is not in the trace: "
                            "its judgments were never recorded")
        elif rec.get("kind") != "criterion":
            problems.append(f"`{node.id}` is a criterion in {program_label} but a {rec.get('kind')} node in the trace")
        else:
            was, now = rec.get("type"), str(node.type)
            if now != was and now != f"{was}?":
                problems.append(f"criterion `{node.id}` was recorded as `{was}` but is `{now}` in {program_label}")
    mode = record.get("mode")
    has = {"pointwise": program.readout.pointwise, "pairwise": program.readout.pairwise}.get(mode)
    if has is None:
        problems.append(f"the trace was recorded in {mode} mode, but {program_label} declares no {mode} task")
    return problems


def check_compatible(program: CheckedProgram, record: dict, program_label: str = "the program") -> None:
    """Raise ReplayError, saying each of its `compatibility_problems`, when `record` cannot feed `program`."""
    problems = compatibility_problems(program, record, program_label)
    if problems:
        raise ReplayError("the recorded judgments cannot feed " + program_label + ":\n  - " + "\n  - ".join(problems))


def unused_criteria(program: CheckedProgram, record: dict) -> list[str]:
    ids = {n.id for n in program.criteria}
    return [n["id"] for n in TraceView.of_record(record).criteria() if n["id"] not in ids]


# ---- recomputation -----------------------------------------------------------------------------------------------
def carried_run(record: dict) -> ItemRun:
    """A record with no nodes, carried over: a failed row, or (per-item programs) an item run under no program."""
    item, result = record.get("item") or {}, record.get("result") or {}
    status = "invalid" if record.get("status") == "invalid" else "failed"
    return ItemRun(item.get("id"), item.get("line", 0), record.get("mode"), tuple(item.get("candidates") or ()),
                   status, result.get("reason"), label=result.get("label"), label_error=result.get("label_error"))


def carried(record: dict) -> bool:
    """Whether the record is carried over as it is (a failed row, or an item not run under a program)."""
    return record.get("status") in ("failed", "invalid") and not record.get("nodes")


def rebuild(plan: Plan, record) -> ItemRun:
    """Recompute an item from its trace record (a logical record, or a `Stored` version 2 one): recorded
    criterion outputs in, composition and readout out."""
    if type(record) is Stored:
        header, rec = record.header, record.rec
        if rec.get("status") == "failed" or rec.get("out") is None or not header["nodes"]:
            return carried_run(record.logical())  # nothing to recompute
    else:
        header, rec = None, record
        if record.get("status") == "failed" or not record.get("nodes"):
            return carried_run(record)
    item = rec["item"]
    recorded = recorded_outputs(header, rec)
    mode = rec.get("mode") if header is not None else rec["mode"]
    candidates = tuple(item["candidates"])
    # the values are checked against the types once, by check_judgments
    values, checked = check_judgments(plan, recorded_judgments(plan, recorded, len(candidates)), candidates)
    result = rec.get("result") or {}
    return finish(plan, mode, item.get("id"), item.get("line", 0), candidates, values, checked, result.get("label"),
                  result.get("label_error"))


def recorded_outputs(header: dict | None, rec: dict):
    """(criterion id) -> its recorded (outputs, judgments as dicts), in a version 2 record (`header`: its header)
    or a version 1 one (`header` None); ReplayError for a criterion the record does not hold."""
    if header is not None:
        where, out, marks = Stored(header, rec).positions(), rec.get("out"), rec.get("j") or {}
        held = lambda i, cid: (out[i], marks.get(cid))  # noqa: E731
    else:
        where = {n["id"]: n for n in rec["nodes"]}
        held = lambda n, cid: (n.get("output"), n.get("judgments"))  # noqa: E731

    def recorded(cid: str):
        at = where.get(cid)
        if at is None:
            raise ReplayError(f"item {rec['item'].get('id')!r}: criterion `{cid}` is not in the trace record")
        return held(at, cid)

    return recorded


def recorded_judgments(plan: Plan, recorded, m: int) -> dict:
    """Criterion id -> its recorded judgments, a Judgment per candidate (`recorded_judgment`), from
    `recorded(criterion id)` (`recorded_outputs`)."""
    judgments = {}
    for _, node in plan.criteria:
        outputs, marks = recorded(node.id)
        outputs = outputs or [None] * m
        marks = marks or [{}] * m
        score = node.type.kind == "score"
        judgments[node.id] = tuple(recorded_judgment(marks[c], outputs[c], score) for c in range(m))
    return judgments


class Stored:
    """A version 2 item record as stored, with its header: replayed without building the logical record
    (the structure is checked once per header, the values straight from `out` and `j`)."""

    __slots__ = ("header", "rec", "_logical")

    def __init__(self, header: dict, rec: dict):
        self.header, self.rec, self._logical = header, rec, None

    def logical(self) -> dict:
        if self._logical is None:
            self._logical = logical_record(self.header, self.rec)
        return self._logical

    def get(self, key, default=None):  # the few fields read before a replay needs the whole record
        if key == "program":
            return self.header["program"]
        return self.logical()["nodes"] if key == "nodes" else self.rec.get(key, default)

    def positions(self) -> dict:
        """Criterion id -> its position in the header's nodes (kept on the header)."""
        pos = self.header.get("_positions")
        if pos is None:
            pos = self.header["_positions"] = {n["id"]: i for i, n in enumerate(self.header["nodes"])}
        return pos


def _rebuilt(plan: Plan, record, line: int) -> ItemRun:
    """`rebuild`, with a record whose parts do not fit each other (more candidates than judgments, ...) refused
    as a ReplayError that names its trace line."""
    try:
        return rebuild(plan, record)
    except MALFORMED as exc:
        raise _ill_formed(line, exc) from None


def _ill_formed(line: int, exc: Exception) -> ReplayError:
    return ReplayError(f"trace line {line} is not a well-formed item record: its parts do not fit each other "
                       f"({type(exc).__name__}: {exc})")


def stored_difference(static: list[dict], getters: list, line: int, stored: Stored, run: ItemRun,
                       result: dict) -> Difference | None:
    """`first_difference` for a version 2 record: the header's structure (once per header), then every
    node's values and unsettled flags, then the result line (the readout is implied by it)."""
    rec = stored.rec
    item_id = (rec.get("item") or {}).get("id")
    checked = stored.header.get("_checked")
    if checked is None:
        nodes = stored.header["nodes"]
        if nodes and run.values is not None:
            checked = _structure_difference(static, getters, line, nodes, item_id)
        stored.header["_checked"] = checked or False
    if checked:
        return attrs.evolve(checked, item_id=item_id, trace_line=line)
    out = rec.get("out")
    values = run.values
    if run.status != "failed" and (values is not None or out is not None):
        if out is None or values is None or len(out) != len(values):
            return first_difference(None, static, line, stored.logical(), run, result, getters)
        unknown = rec.get("u")
        for i, v in enumerate(values):
            o = out[i]
            if v is None or type(o) is not list or len(o) != len(v):
                if v is None and o is None:
                    continue
                return first_difference(None, static, line, stored.logical(), run, result, getters)
            unsettled = False
            for x, y in zip(o, v):  # strictly equal: recomputed values passed their type checks
                ty = type(y)
                if ty is float or ty is bool or ty is str:
                    if type(x) is not ty or x != y:
                        break
                elif x is not None:
                    break
                elif ty is Unsettled:
                    unsettled = True
            else:
                if not (unsettled or unknown) or (unknown or {}).get(str(i)) == unknown_flags(v):
                    continue
            return first_difference(None, static, line, stored.logical(), run, result, getters)
    if not same(rec.get("result"), result):
        return first_difference(None, static, line, stored.logical(), run, result, getters)
    return None


def _structure_difference(static, getters, line, nodes: list, item_id) -> Difference | None:
    if len(nodes) != len(static):
        return Difference(item_id, line, "result", None, f"{len(nodes)} nodes", f"{len(static)} nodes",
                          "the program has a different number of nodes than the record")
    for (get, want), base, rec in zip(getters, static, nodes):
        key = _differing_key(get, want, base, rec)
        if key is not None:
            return Difference(item_id, line, base["id"], None, rec.get(key), base[key],
                              f"recorded `{key}` differs from the program's")
    return None


def _differing_key(get, want, base: dict, rec: dict) -> str | None:
    """The first structural key in which a recorded node differs from the program's node, or None."""
    with contextlib.suppress(KeyError):
        if get(rec) == want:
            return None
    return next(k for k in base if rec.get(k) != base[k])


def structure_getters(static: list[dict]) -> list[tuple]:
    """Per node: (an itemgetter of its structural keys, their expected values): one C-level compare per node."""
    return [(operator.itemgetter(*base), tuple(base.values())) for base in static]  # every entry has >= 3 keys


def first_difference(plan: Plan, static: list[dict], line: int, record: dict, run: ItemRun,
                     result: dict | None = None, getters: list | None = None) -> Difference | None:
    """The first place where the recomputed item differs from the record (None: identical).

    Node structure (kind, type, operator, parameters, inputs) is compared by value;
    outputs, the readout and the result line strictly (types included: 1 is not 1.0).
    """
    item_id = (record.get("item") or {}).get("id")
    candidates = list(run.candidates)

    def diff(node, recorded, recomputed, candidate=None, detail=""):
        return Difference(item_id, line, node, candidate, recorded, recomputed, detail)

    nodes = record.get("nodes") or []
    if run.status != "failed" and (run.values is not None or nodes):  # else carried over: the result is compared
        if len(nodes) != len(static):
            return diff("result", f"{len(nodes)} nodes", f"{len(static)} nodes", detail="the program has a different "
                        "number of nodes than the record")
        values = run.values
        v1 = record.get("trace_version") == 1
        getters = getters or structure_getters(static)
        for i, (base, rec) in enumerate(zip(static, nodes)):
            key = _differing_key(*getters[i], base, rec)
            if key is not None:
                return diff(base["id"], rec.get(key), base[key], detail=f"recorded `{key}` differs from the program's")
            v = None if values is None else values[i]
            # recomputed values passed their type checks: finite, so only an abstention needs mapping
            got = None if v is None else [None if x is ABSTAIN or type(x) is Unsettled else x for x in v]
            rec_out = rec.get("output")
            if v1 and (rec_out is None or any(type(x) is Unsettled for x in v or ())):
                continue  # version 1 did not compute past an invalid judgment or a failed operator
            if rec.get("unknown") != unknown_flags(v):
                return diff(base["id"], rec.get("unknown"), unknown_flags(v),
                            detail="which candidates' values are settled differs")
            if not same(rec_out, got):
                if isinstance(rec_out, list) and isinstance(got, list) and len(rec_out) == len(got):
                    c = next(k for k in range(len(got)) if not same(rec_out[k], got[k]))
                    return diff(base["id"], rec_out[c], got[c], candidates[c] if c < len(candidates) else None)
                return diff(base["id"], rec_out, got)
            if base["kind"] == "criterion":
                for c, (out, j) in enumerate(zip(rec_out or (), rec.get("judgments") or ())):
                    if j.get("status") == "ok" and not same(out, j.get("value")):
                        return diff(base["id"], j.get("value"), out, candidates[c],
                                    "the criterion's output differs from its recorded judgment")
        readout = run.readout.to_json() if run.readout is not None else None
        if not same(record.get("readout"), readout):
            return diff("readout", record.get("readout"), readout)
    recomputed = result if result is not None else result_line(run, plan.program)
    recorded = record.get("result")
    if isinstance(recorded, dict) and "program" not in recorded and "program" in recomputed:
        # written before result lines named their program (version 1 traces): not a difference
        recomputed = {k: v for k, v in recomputed.items() if k != "program"}
    if not same(recorded, recomputed):
        if isinstance(recorded, dict):
            key = next((k for k in (*recomputed, *recorded) if not same(recorded.get(k), recomputed.get(k))), None)
            if key is not None:
                return diff("result", recorded.get(key), recomputed.get(key), detail=f"field `{key}`")
        return diff("result", recorded, recomputed)
    return None


def replay_records(plan: Plan, records: Iterable[tuple[int, dict]], verify: bool,
                   program_label: str = "the program"
                   ) -> Iterator[tuple[int, dict, ItemRun, dict, Difference | None]]:
    """(trace line, record, recomputed run, its result line, first difference or None) for each record.

    verify: every record must carry this program's hash (ReplayError otherwise) and is
    compared with the recomputation. Otherwise (what if) each record's criteria are
    checked for compatibility (once per recorded program) and nothing is compared.
    """
    program = plan.program
    digest = program.content_hash
    static = node_static(plan)
    getters = structure_getters(static)
    compatible: set = set()
    for line, record in records:
        header = record.get("program") or {}
        if verify and header.get("hash") != digest:
            raise ReplayError(
                f"trace line {line} was recorded under another version of the program "
                f"({header.get('name')!r}, {header.get('hash')}); {program_label} is {digest}")
        if not verify and header.get("hash") not in compatible:
            try:  # a version 2 record's logical form: refused in one line where its parts do not fit
                logical = record.logical() if type(record) is Stored else record
            except MALFORMED as exc:
                raise _ill_formed(line, exc) from None
            if logical.get("nodes"):
                check_compatible(program, logical, program_label)
                compatible.add(header.get("hash"))
        run = _rebuilt(plan, record, line)
        result = result_line(run, program)
        if not verify:
            difference = None
        elif type(record) is Stored:
            difference = stored_difference(static, getters, line, record, run, result)
        else:
            difference = first_difference(plan, static, line, record, run, result, getters)
        yield line, record, run, result, difference


def replay_records_each(programs, records: Iterable[tuple[int, dict]]
                        ) -> Iterator[tuple[int, dict, ItemRun, dict, Difference | None, object]]:
    """Verify a per-item trace: each record under the program it names (re-checked, same hash).

    `programs` is a `gsrlang.execution.peritem.RecordedPrograms`. Yields what `replay_records`
    yields, plus the trace static to write the record again with. Records of items that
    ran under no program are carried over (their result line is compared). Raises
    ReplayError when a record's program is missing, no longer checks or has changed.
    """
    from gsrlang.trace.write import NotRun, Static

    prepared: dict = {}  # program hash -> (plan, node statics, getters); bounded like the program cache
    for line, record in records:
        header = record.get("program") or {}
        if carried(record):
            run = carried_run(record)
            static = NotRun(header.get("path"), header.get("index"), header.get("name"), header.get("hash"))
            result = result_line(run, None, static.source)
            difference = first_difference(None, [], line, record, run, result)  # the result line only
            yield line, record, run, result, difference, static
            continue
        program, problem = programs.program(header)
        if program is None:
            item_id = (record.get("item") or {}).get("id")
            raise ReplayError(f"trace line {line} (item {item_id!r}): {problem}")
        key = (program.content_hash, header.get("path"), header.get("index"))
        entry = prepared.get(key)
        if entry is None:
            if len(prepared) >= 64:
                prepared.pop(next(iter(prepared)))
            plan = Plan(program)
            nodes = node_static(plan)
            entry = prepared[key] = (plan, nodes, structure_getters(nodes),
                                     Static(plan, header.get("path"), header.get("index")))
        plan, nodes, getters, static = entry
        run = _rebuilt(plan, record, line)
        result = result_line(run, program, static.source)
        yield line, record, run, result, first_difference(plan, nodes, line, record, run, result, getters), static


def needed_judgments(plan: Plan, run: ItemRun) -> list[str]:
    """The criteria whose judgments the recorded run skipped (short-circuit) but that `plan` needs for this
    item: those that could change its sink under `plan` (what-if replay tells the user which)."""
    from gsrlang.semantics.settle import liveness, to_possibles

    if run.values is None:
        return []
    possibles = functools.cache(lambda: to_possibles(plan, list(run.values), len(run.candidates)))
    return needed_of(plan, lambda node: (j.status for j in run.judgments.get(node.id) or ()),
                     lambda c: liveness(plan, possibles(), c)[0])


def needed_of(plan: Plan, statuses, live) -> list[str]:
    """`needed_judgments` as the item path and the columns both find it: `statuses(node)` gives the statuses of
    a criterion's judgments, per candidate; `live(c)` the nodes that can still change candidate c's sink
    (`settle.liveness`), asked once per candidate, and only for one with a skipped judgment."""
    lives: dict = {}
    out = []
    for i, node in plan.criteria:
        for c, status in enumerate(statuses(node)):
            if status == "skipped":
                if c not in lives:
                    lives[c] = live(c)
                if i in lives[c]:
                    out.append(node.id)
                    break
    return out
