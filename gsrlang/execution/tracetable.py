"""Tables of criterion values for the columnar evaluator (gsrlang.semantics.evaluate), made from outside.

`table_from_trace` reads a trace file straight into criterion columns (tune, ablate,
what-if replay); `table_from_data` judges a data file's items with a program's inline
judges; `table_from_cells` tabulates raw judgments (status, value) by the one judgment
decoder's rules (gsrlang.trace.decode). The evaluator itself does no I/O.

`read_trace` gives every record in the logical (version 1) form: a dict per node,
per judgment, per item. Columnar evaluation needs none of that: only the
criteria's recorded outputs, the statuses of their judgments, and each item's id
and label. This loader reads the records as stored (`read_records`: one JSON
decoding per line, the same validation and errors) and, for version 2 records,
takes the criterion outputs out of `out` by their position in the header, once
per header, appending the raw JSON values to one flat list per criterion. Each
list is decoded into a numpy array in one pass at the end (a few C-level calls
when every value has the expected JSON type, a value-by-value check otherwise).
Version 1 records hold the same data, per node: they go through the same lists.

The cells follow the one judgment decoder's rules (gsrlang.trace.decode: `json_column` for
the recorded values, `judged_column` for their statuses), which equal the value-by-value
reading (`value_from_json`, then the interpreter's `check_judgments`); tests/test_traceload.py
compares the two on version 1 and version 2 traces with abstained, invalid, skipped and
ill-typed judgments. A node that was never computed, or an item whose candidate count is
not the mode's, is invalid. This loader stays in the runtime (not in gsrlang/trace/): it
refuses a trace whose criteria cannot feed the program as `gsr replay --program` does.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Iterable, Iterator

import attrs
import numpy as np

from gsrlang.lang.program import CheckedProgram
from gsrlang.lang.types import JType
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.evaluate import Table
from gsrlang.semantics.kernels import INVALID, NodeValues, encode
from gsrlang.semantics.values import ABSTAIN
from gsrlang.trace.decode import SPECIAL, json_column, judged_column, judgment_cell

__all__ = ["Criterion", "TraceTables", "table_from_cells", "table_from_data", "table_from_trace"]

_UNSET = object()
CHUNK = 16384  # items a what-if replay reads, evaluates and writes together: memory flat in the trace's length


class Criterion:
    """One criterion's cells while the file is read: raw JSON values, and the rows they do not settle."""

    def __init__(self, cid: str, t: JType):
        self.id, self.type = cid, t
        self.values: list = []  # one raw value per row (None where nothing was recorded)
        self.void: list = []  # rows with no usable output (the node was never computed, too few values)
        self.status: list = []  # (row, status) of the judgments whose status is in SPECIAL

    def column(self, rows: int, void_items: list, m: int, decoded: tuple | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The finished arrays (values, abstain, invalid), as `table_from_cells` would make them
        (`decoded`: `json_column` of the values where the caller has it, which this changes in place)."""
        void = None
        if self.void or void_items:
            void = np.zeros(rows, bool)
            void[np.asarray(self.void, np.int64)] = True
            void.reshape(-1, m)[np.asarray(void_items, np.int64)] = True
        return judged_column(self.type, decoded if decoded is not None else json_column(self.type, self.values),
                             void, self.status)


class _Positions:
    """Where a version 2 header puts the program's criteria in a record's `out` (in the program's order)."""

    def __init__(self, where: list[int]):
        self.where = where
        self.need = max(where, default=-1) + 1
        getter = itemgetter(*where) if where else (lambda out: ())
        self.getter = getter if len(where) != 1 else (lambda out: (out[where[0]],))

    def pick(self, out: list) -> tuple:
        """The criteria's outputs (None for a node the record does not reach)."""
        if len(out) >= self.need:
            return self.getter(out)
        return tuple(out[i] if i < len(out) else None for i in self.where)


def table_from_trace(program: CheckedProgram, path: str, program_label: str = "the program") -> Table:
    """The recorded criterion outputs of a trace (version 1 or 2), for `program`, read straight into columns.

    The trace's criteria must feed the program (same names and types), as for `gsr replay
    --program`: raises ReplayError otherwise (or when its items mix modes), TraceError on a
    malformed file. The table's `recorded` is the trace's run summary record (None if it has
    none), its `skipped` per item the count of its program criteria's skipped judgments."""
    return next(TraceTables(program, path, program_label).chunks())


class TraceTables:
    """`table_from_trace` a chunk of items at a time, so that what is held stays flat in the trace's length.

    `chunks(size)` yields a Table per `size` items (every item at once without a size; at least one, empty,
    for a trace of no items). The run summary record, once read, is `recorded` (and the last table's).
    Raises as `table_from_trace`."""

    def __init__(self, program: CheckedProgram, path: str, program_label: str = "the program", keep: bool = False):
        self.program, self.path, self.program_label = program, path, program_label
        self.recorded: dict | None = None
        self.keep = keep
        self.kept: list = []  # `keep`: per item of the last table, (trace line, header, its line's parts or None)

    def chunks(self, size: int | None = None) -> Iterator[Table]:
        from gsrlang.execution.replay import ReplayError, check_compatible
        from gsrlang.trace.read import logical_record, read_records
        from gsrlang.trace.schema import MALFORMED, is_summary, malformed

        program, program_label = self.program, self.program_label
        positions: dict = {}  # version 2: header key -> criterion positions in `out`
        checked: set = set()  # version 1: program hashes whose criteria were checked
        v1_positions: dict = {}  # version 1: program hash -> {criterion id: index in `nodes`}
        mode, m = _UNSET, 1
        last = None  # (`keep`) the last candidates that a result line can be made of
        chunk, yielded = _Chunk(program), False
        crits, ids, labels, failed, kept = chunk.crits, chunk.ids, chunk.labels, chunk.failed, chunk.kept
        for line, header, rec in read_records(self.path):
            if header is None and is_summary(rec):
                self.recorded = rec
                continue
            if size is not None and len(failed) >= size:
                self.kept = kept
                yield chunk.table(_mode(mode), m, None)
                chunk, yielded = _Chunk(program), True
                crits, ids, labels, failed, kept = chunk.crits, chunk.ids, chunk.labels, chunk.failed, chunk.kept
            try:
                rmode = rec.get("mode")
                if mode is _UNSET:
                    mode = rmode
                    m = 1 if (mode or "pointwise") == "pointwise" else 2
                elif rmode != mode:
                    raise ReplayError(f"trace line {line} is a {rmode} item, the others {mode}")
                item, result = rec.get("item"), rec.get("result")
                plain = type(item) is dict and type(result) is dict
                if not plain:
                    item, result = item or {}, result or {}
                ids.append(item.get("id"))
                labels.append(result.get("label"))
                label_error = result.get("label_error")
                if label_error:
                    chunk.label_errors += 1
                if self.keep:  # what a result line takes of the record, where its item and result are objects
                    if plain:
                        candidates = item.get("candidates")
                        if type(candidates) is not list or candidates != last:  # (a list equal to `last` is of str)
                            candidates = _line_candidates(item, m)
                            last = candidates if candidates is not None else last
                        kept.append((line, header, (item.get("line", 0), candidates, label_error)))
                    else:
                        kept.append((line, header, None))
                row = len(failed) * m
                if header is not None:  # version 2: outputs by position, judgments by criterion id
                    out = rec.get("out")
                    where = positions.get(rec["p"])
                    if out is not None and where is None and header["nodes"]:
                        check_compatible(program, logical_record(header, rec), program_label)
                        index = {n.get("id"): i for i, n in enumerate(header["nodes"])}
                        where = positions[rec["p"]] = _Positions([index[c.id] for c in crits])
                    if rec.get("status") == "failed" or out is None or not header["nodes"]:
                        chunk.void_item(True, m)
                        continue
                    outputs = where.pick(out)
                    judgments = rec.get("j") or {}
                else:  # version 1: one dict per node
                    nodes = rec.get("nodes")
                    if rec.get("status") == "failed" or not nodes:
                        chunk.void_item(True, m)
                        continue
                    digest = (rec.get("program") or {}).get("hash")
                    if digest not in checked:
                        check_compatible(program, rec, program_label)
                        checked.add(digest)
                    where = v1_positions.get(digest)
                    if where is None or any(nodes[i].get("id") != cid for cid, i in where.items()):
                        index = {n.get("id"): i for i, n in enumerate(nodes)}
                        where = v1_positions[digest] = {c.id: index[c.id] for c in crits}
                    picked = [nodes[where[c.id]] for c in crits]
                    outputs = [n.get("output") for n in picked]
                    judgments = {c.id: n.get("judgments") for c, n in zip(crits, picked)}
                if len(item.get("candidates") or ()) != m:
                    chunk.void_item(False, m)
                    continue
                failed.append(False)
                for c, v in zip(crits, outputs):
                    if v is None or len(v) < m:
                        c.values.extend(repeat(None, m))
                        c.void.extend(range(row, row + m))
                    else:
                        c.values.extend(v if len(v) == m else v[:m])
                    js = judgments.get(c.id)
                    if js:
                        for k, d in enumerate(js[:m]):
                            status = d.get("status")
                            if status in SPECIAL:
                                c.status.append((row + k, status))
            except MALFORMED as exc:
                raise malformed(self.path, line, exc) from None
        if failed or not yielded:
            self.kept = kept
            yield chunk.table(_mode(mode), m, self.recorded)


def _line_candidates(item: dict, m: int) -> list | None:
    """An item's recorded candidates, when a result line can be made of them: a list of `m` strings."""
    candidates = item.get("candidates")
    if type(candidates) is not list or len(candidates) != m or any(type(c) is not str for c in candidates):
        return None
    return candidates


def _mode(mode) -> str:
    return "pointwise" if mode is _UNSET else mode or "pointwise"


class _Chunk:
    """The cells of a chunk of items while they are read."""

    def __init__(self, program: CheckedProgram):
        self.crits = [Criterion(n.id, n.type) for n in program.criteria]
        self.ids: list = []
        self.labels: list = []
        self.failed: list = []
        self.void_items: list = []  # items whose criteria are all invalid (wrong candidate count)
        self.label_errors = 0
        self.kept: list = []  # (`TraceTables.keep`) per item: (trace line, header, its line's parts or None)

    def void_item(self, fail: bool, m: int) -> None:
        """An item with no usable criterion output: failed (no judgments), or with the wrong candidate count."""
        self.void_items.append(len(self.failed))
        self.failed.append(fail)
        for c in self.crits:
            c.values.extend(repeat(None, m))

    def table(self, mode: str, m: int, recorded: dict | None) -> Table:
        n = len(self.failed)
        columns = {c.id: c.column(n * m, self.void_items, m) for c in self.crits}
        skipped = np.zeros(n, np.int64)
        for c in self.crits:
            at = [row // m for row, status in c.status if status == "skipped"]
            if at:
                skipped += np.bincount(np.asarray(at, np.int64), minlength=n)
        return Table(mode, self.ids, {k: NodeValues(*arrays) for k, arrays in columns.items()},
                     np.array(self.failed, bool), self.labels, self.label_errors, recorded, skipped)


def table_from_cells(program: CheckedProgram, mode: str, entries: Iterable[tuple]) -> Table:
    """From (id, label, {criterion id: [(status, value) per candidate]} or None for a failed item)."""
    m = 1 if mode == "pointwise" else 2
    crit_nodes = program.criteria
    cells: dict = {n.id: [] for n in crit_nodes}
    ids, labels, failed = [], [], []
    for item_id, label, judged in entries:
        ids.append(item_id)
        labels.append(label)
        failed.append(judged is None)
        for n in crit_nodes:
            row = judged.get(n.id) if judged is not None else None
            if row is None or len(row) != m:
                cells[n.id].extend([INVALID] * m)
            else:
                cells[n.id].extend(judgment_cell(n.type, s, v)[0] for s, v in row)
    return Table(mode, ids, {n.id: encode(n.type, cells[n.id]) for n in crit_nodes}, np.array(failed, bool), labels)


def table_from_data(program: CheckedProgram, data, columns, registry, mode: str, labels=None) -> Table:
    """Judge every item of a data file with the program's inline judges (human(), rule.*), then tabulate.

    `labels` reads an item's gold label (`gsrlang.execution.runs.label_reader`); None: no labels."""
    import asyncio

    from gsrlang.execution.executor import all_inline, judge_item
    from gsrlang.files.dataset import ItemError, read_items
    from gsrlang.judges.base import JudgeConfigError

    plan = Plan(program)
    try:
        inline = all_inline(plan, registry)
    except JudgeConfigError:  # a criterion with no judge here (a model's): not one that reads the data
        inline = False
    if not inline:
        raise ValueError("columnar evaluation from data needs criteria that only read the data "
                         "(human(), rule.*): record a trace with `gsr run --trace` for the others")
    errors = 0
    need = 1 if mode == "pointwise" else 2

    async def go():
        nonlocal errors
        out = []
        for entry in read_items(data, columns):
            if isinstance(entry, ItemError):
                out.append((entry.id, None, None))
                continue
            label, problem = labels(entry) if labels else (None, None)
            errors += problem is not None
            if len(entry.candidates) != need:
                out.append((entry.id, label, None))
                continue
            judged = await judge_item(plan, entry, registry)
            out.append((entry.id, label, {k: [(j.status, ABSTAIN if j.status == "abstained" else j.value)
                                              for j in v] for k, v in judged.items()}))
        await registry.aclose()
        return out

    return attrs.evolve(table_from_cells(program, mode, asyncio.run(go())), label_errors=errors)
