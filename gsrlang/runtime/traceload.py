"""A trace file straight into criterion columns: what `Table.from_trace` (tune, ablate, what-if replay) reads.

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

The cells equal those of the value-by-value reading (`value_from_json`, then the
interpreter's `check_judgments` rules; tests/test_traceload.py compares the two on
version 1 and version 2 traces with abstained, invalid, skipped and ill-typed
judgments):

- a judgment whose status is `invalid` or `skipped`, a node that was never
  computed, or an item whose candidate count is not the mode's, is invalid;
- an `abstained` judgment is an abstention (invalid where the criterion's type
  cannot abstain), unless it carries a value that does not fit;
- any other judgment is its recorded value, invalid when that is null or does not
  fit the criterion's type (outside the range, not a label, not a number).
"""

from __future__ import annotations

from itertools import repeat
from operator import is_, itemgetter

import numpy as np

from gsrlang.program import Program
from gsrlang.semantics.values import RuntimeFailure, value_from_json
from gsrlang.types import JType

__all__ = ["load_trace"]

_UNSET = object()
_SPECIAL = ("invalid", "skipped", "abstained")  # judgment statuses that change a cell (any other reads as ok)


class _Criterion:
    """One criterion's cells while the file is read: raw JSON values, and the rows they do not settle."""

    def __init__(self, cid: str, t: JType):
        self.id, self.type = cid, t
        self.values: list = []  # one raw value per row (None where nothing was recorded)
        self.void: list = []  # rows with no usable output (the node was never computed, too few values)
        self.status: list = []  # (row, status) of the judgments whose status is in _SPECIAL

    def column(self, rows: int, void_items: list, m: int, decoded: tuple | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The finished arrays (values, abstain, invalid), as `columnar._encode` would make them (`decoded`:
        `_decode` of the values where the caller has it, which this changes in place)."""
        t = self.type
        values, null, bad = decoded if decoded is not None else _decode(t, self.values)
        invalid = bad | null  # an ok judgment must have a value
        if self.void or void_items:
            void = np.zeros(rows, bool)
            void[np.asarray(self.void, np.int64)] = True
            void.reshape(-1, m)[np.asarray(void_items, np.int64)] = True
            bad |= void
            invalid |= void
        abstain = np.zeros(rows, bool)
        if self.status:
            at = np.array([row for row, _ in self.status], np.int64)
            abstained = np.array([status == "abstained" for _, status in self.status], bool)
            invalid[at[~abstained]] = True  # invalid or skipped
            fits = at[abstained & ~bad[at]]  # an abstention, whatever value it carries (when that fits)
            invalid[fits] = not t.optional
            abstain[fits] = t.optional
        empty = abstain | invalid
        if empty.any():
            values[empty] = 0
        return values, abstain, invalid


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


def _decode(t: JType, raw: list, kinds: set | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, recorded null, does not fit `t`) of raw JSON values, as `value_from_json` reads each one
    (`kinds`: their types, where the caller has them already)."""
    n = len(raw)
    if kinds is None:
        kinds = set(map(type, raw))
    nulls = raw.count(None) if type(None) in kinds else 0
    if t.kind == "score" and kinds <= {float, int, type(None)}:
        values = np.array(raw, np.float64) if n else np.zeros(0)  # null becomes NaN
        nan = np.isnan(values)
        if int(nan.sum()) == nulls:  # every NaN is a null (a decoder that reads NaN literals would add others)
            with np.errstate(invalid="ignore"):
                bad = ~nan & ~((values >= t.lo) & (values <= t.hi))
            return values, nan, bad
    elif t.kind == "bool" and kinds <= {bool, type(None)}:
        values = np.array(raw, bool) if n else np.zeros(0, bool)  # null becomes false
        absent = np.fromiter(map(is_, raw, repeat(None)), bool, n) if nulls else np.zeros(n, bool)
        return values, absent, np.zeros(n, bool)
    elif t.kind in ("ordinal", "nominal") and kinds <= {str, type(None)}:
        code = {label: i for i, label in enumerate(t.labels)}
        code[None] = -2
        codes = np.fromiter(map(code.get, raw, repeat(-1)), np.int32, n)
        return np.where(codes < 0, 0, codes).astype(np.int32), codes == -2, codes == -1
    return _decode_each(t, raw)


def _decode_each(t: JType, raw: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value by value (`value_from_json`): for columns with values of unexpected JSON types."""
    n = len(raw)
    dtype = {"score": np.float64, "bool": bool}.get(t.kind, np.int32)
    values, absent, bad = np.zeros(n, dtype), np.zeros(n, bool), np.zeros(n, bool)
    loose = t.maybe(True)
    for row, data in enumerate(raw):
        if data is None:
            absent[row] = True
            continue
        try:
            value = value_from_json(data, loose)
        except RuntimeFailure:
            bad[row] = True
            continue
        values[row] = t.labels.index(value) if t.kind in ("ordinal", "nominal") else value
    return values, absent, bad


def load_trace(program: Program, path: str, program_label: str = "the program"):
    """(mode, ids, {criterion id: (values, abstain, invalid)}, failed, labels, label errors, run summary or None)
    of a trace.

    Raises ReplayError when the trace's criteria cannot feed `program` (as `gsr replay
    --program` refuses them) or its items mix modes, TraceError on a malformed file."""
    from gsrlang.runtime.replay import ReplayError, compatibility_problems
    from gsrlang.trace.read import logical_record, read_records
    from gsrlang.trace.schema import MALFORMED, is_summary, malformed

    crits = [_Criterion(n.id, n.type) for n in program.criteria]
    ids: list = []
    labels: list = []
    failed: list = []
    void_items: list = []  # items whose criteria are all invalid (wrong candidate count)
    label_errors = 0
    mode = _UNSET
    m = 1
    summary = None
    positions: dict = {}  # version 2: header key -> criterion positions in `out`
    checked: set = set()  # version 1: program hashes whose criteria were checked
    v1_positions: dict = {}  # version 1: program hash -> {criterion id: index in `nodes`}

    def void_item(fail: bool) -> None:
        """An item with no usable criterion output: failed (no judgments), or with the wrong candidate count."""
        void_items.append(len(failed))
        failed.append(fail)
        for c in crits:
            c.values.extend(repeat(None, m))

    def refuse(record: dict) -> None:
        problems = compatibility_problems(program, record, program_label)
        if problems:
            raise ReplayError("the recorded judgments cannot feed " + program_label + ":\n  - " +
                              "\n  - ".join(problems))

    for line, header, rec in read_records(path):
        if header is None and is_summary(rec):
            summary = rec
            continue
        try:
            rmode = rec.get("mode")
            if mode is _UNSET:
                mode = rmode
                m = 1 if (mode or "pointwise") == "pointwise" else 2
            elif rmode != mode:
                raise ReplayError(f"trace line {line} is a {rmode} item, the others {mode}")
            item, result = rec.get("item") or {}, rec.get("result") or {}
            ids.append(item.get("id"))
            labels.append(result.get("label"))
            if result.get("label_error"):
                label_errors += 1
            row = len(failed) * m
            if header is not None:  # version 2: outputs by position, judgments by criterion id
                out = rec.get("out")
                where = positions.get(rec["p"])
                if out is not None and where is None and header["nodes"]:
                    refuse(logical_record(header, rec))
                    index = {n.get("id"): i for i, n in enumerate(header["nodes"])}
                    where = positions[rec["p"]] = _Positions([index[c.id] for c in crits])
                if rec.get("status") == "failed" or out is None or not header["nodes"]:
                    void_item(True)
                    continue
                outputs = where.pick(out)
                judgments = rec.get("j") or {}
            else:  # version 1: one dict per node
                nodes = rec.get("nodes")
                if rec.get("status") == "failed" or not nodes:
                    void_item(True)
                    continue
                digest = (rec.get("program") or {}).get("hash")
                if digest not in checked:
                    refuse(rec)
                    checked.add(digest)
                where = v1_positions.get(digest)
                if where is None or any(nodes[i].get("id") != cid for cid, i in where.items()):
                    index = {n.get("id"): i for i, n in enumerate(nodes)}
                    where = v1_positions[digest] = {c.id: index[c.id] for c in crits}
                picked = [nodes[where[c.id]] for c in crits]
                outputs = [n.get("output") for n in picked]
                judgments = {c.id: n.get("judgments") for c, n in zip(crits, picked)}
            if len(item.get("candidates") or ()) != m:
                void_item(False)
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
                        if status in _SPECIAL:
                            c.status.append((row + k, status))
        except MALFORMED as exc:
            raise malformed(path, line, exc) from None
    rows = len(failed) * m
    columns = {c.id: c.column(rows, void_items, m) for c in crits}
    return "pointwise" if mode is _UNSET else mode or "pointwise", ids, columns, np.array(failed, bool), labels, label_errors, summary
