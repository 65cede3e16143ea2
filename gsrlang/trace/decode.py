"""The one judgment decoder: what a raw judgment (its status and value) is as a criterion's value.

The rules, written once (a scalar form for one judgment, column forms for many):

- an `ok` judgment is its value; it is invalid when it has none (ABSTAIN, or null in
  a record) or the value does not fit the criterion's type (outside the range, not a
  label, not a number). A Score of -0.0 is read as 0.0 (settling relies on it; see
  gsrlang.semantics.settle);
- an `abstained` judgment is an abstention, invalid where the type cannot abstain
  (it has no `?`);
- an `invalid` or `skipped` judgment is invalid (never judged, for `skipped`); a recorded
  judgment with any other status reads as `ok`.

`judgment_cell` is the scalar form: the item interpreter (`executor.check_judgment`)
and the columnar evaluator's tables of cells (`execution.tracetable.table_from_cells`,
then `semantics.kernels.encode`) use it.
`plain_column` reads one criterion's judgments over a chunk into a column (the columnar
run's). `recorded_judgment` turns a trace's judgment back into a Judgment for
replay. `json_column` and `judged_column` read recorded (JSON) values and
their judgment statuses into a column: the trace loaders (`execution/tracetable.py`,
`execution/verify.py`) use them. tests/test_traceload.py and tests/test_columnrun.py
compare the column forms with the scalar one.
"""

from __future__ import annotations

import math
from itertools import repeat
from operator import is_

import numpy as np

from gsrlang.lang.types import JType
from gsrlang.semantics.judgment import Judgment
from gsrlang.semantics.kernels import INVALID, dtype
from gsrlang.semantics.values import ABSTAIN, RuntimeFailure, value_from_json, value_problem

__all__ = ["SPECIAL", "json_column", "judged_column", "judgment_cell", "plain_column", "recorded_judgment"]

SPECIAL = ("invalid", "skipped", "abstained")  # the statuses that change a recorded cell (any other reads as ok)
_PLAIN = {"score": float, "bool": bool}  # the one Python type of a plain value of each kind (labels: str)


def judgment_cell(t: JType, status: str, value, reason: str | None = None) -> tuple[object, str | None]:
    """(cell, why) of one judgment: the cell is the criterion's value (the judgment's value, 0.0 for -0.0),
    ABSTAIN, or INVALID; `why` says why an `ok` or `abstained` judgment is invalid (None otherwise: it is
    valid, or its status already says so). `reason` is the judgment's own reason (quoted for an abstention
    the type cannot take)."""
    if status == "invalid" or status == "skipped":
        return INVALID, None
    if status == "abstained":
        if t.optional:
            return ABSTAIN, None
        why = f" ({reason})" if reason else ""
        return INVALID, f"abstained{why}, but `{t}` cannot abstain (declare it `{t}?`)"
    if value is ABSTAIN:  # ok (a Judgment's other statuses; a record's unknown one reads as ok, as in SPECIAL)
        return INVALID, "an `ok` answer has no value"
    problem = value_problem(value, t)
    if problem:
        return INVALID, f"the answer does not fit: {problem}"
    if type(value) is float and value == 0.0 and math.copysign(1.0, value) < 0:
        return 0.0, None
    return value, None


def recorded_judgment(d: dict, output, score: bool) -> Judgment:
    """The Judgment a trace recorded: its record dict (the logical form, or a version 2 one, where an `ok`
    judgment's value is its node's `output`), as replay feeds it back to `judgment_cell`'s rules. An output of
    null is an abstention; a Score recorded as an integer is read as a float (`score`: the criterion's type is
    a Score)."""
    status = d.get("status", "ok")
    if status == "invalid" or status == "skipped":
        return Judgment(d.get("value"), status, d.get("reason"), d.get("raw"), d.get("provenance") or {})
    if status != "abstained":  # any other recorded status reads as ok (SPECIAL), as the columns read it
        status = "ok"
    if output is None:
        output = ABSTAIN
    elif score and type(output) is int:
        output = float(output)
    return Judgment(output, status, d.get("reason"), d.get("raw"), d.get("provenance") or {})


def _all_plain(t: JType, values: list) -> bool:
    """Whether every value is a plain value of the type (Score: a float in range, not -0.0)."""
    types = set(map(type, values))
    if t.kind == "bool":
        return types == {bool}
    if t.kind == "score":
        if types != {float}:
            return False
        x = np.array(values, np.float64)
        return bool(((x >= t.lo) & (x <= t.hi)).all() and not (np.signbit(x) & (x == 0.0)).any())
    return types == {str} and set(values) <= set(t.labels)


def plain_column(t: JType, statuses: list, values: list, into: np.ndarray, abstain: np.ndarray,
                 invalid: np.ndarray, start: int = 0, step: int = 1) -> list:
    """One criterion's judgments (their statuses and values) for one candidate, into the rows
    `start::step` of a column (`into`: the type's encoding, `abstain`, `invalid`), by `judgment_cell`'s
    rules (an invalid row is left 0). Gives the criterion's values as the item path holds them (the
    cells: -0.0 read as 0.0; None where it abstained or is invalid), what a trace records."""
    n = len(values)
    code = {label: i for i, label in enumerate(t.labels)} if t.kind not in _PLAIN else None
    if statuses.count("ok") == n and _all_plain(t, values):  # the common case: every value fits
        into[start::step] = [code[v] for v in values] if code is not None else values
        return values
    out = []
    for k, (status, v) in enumerate(zip(statuses, values)):
        cell, _ = judgment_cell(t, status, v)
        row = start + k * step
        if cell is ABSTAIN:
            abstain[row] = True
            out.append(None)
        elif cell is INVALID:
            invalid[row] = True
            out.append(None)
        else:  # encoded as `kernels.encode` encodes the item path's cell
            into[row] = (code.get(cell, 0) if type(cell) is str else 0) if code is not None else \
                cell is True if t.kind == "bool" else cell
            out.append(cell)
    return out


def json_column(t: JType, raw: list, kinds: set | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, recorded null, does not fit `t`) of recorded JSON values, as `value_from_json` reads each one
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
    return _json_each(t, raw)


def _json_each(t: JType, raw: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value by value (`value_from_json`): for columns with values of unexpected JSON types."""
    n = len(raw)
    values, absent, bad = np.zeros(n, dtype(t)), np.zeros(n, bool), np.zeros(n, bool)
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


def judged_column(t: JType, decoded: tuple, void: np.ndarray | None, special: list
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The column (values, abstain, invalid) of recorded values (`decoded`: their `json_column`, changed in
    place) and judgments, by `judgment_cell`'s rules (a Score of -0.0 read as 0.0): `void` marks the rows
    with no usable output (None: none), `special` lists (row, status) for the judgments whose status is in
    SPECIAL."""
    values, null, bad = decoded
    if values.dtype == np.float64:
        values += 0.0  # -0.0 + 0.0 is 0.0
    invalid = bad | null  # an ok judgment must have a value
    if void is not None:
        bad |= void
        invalid |= void
    abstain = np.zeros(len(values), bool)
    if special:
        at = np.array([row for row, _ in special], np.int64)
        abstained = np.array([status == "abstained" for _, status in special], bool)
        invalid[at[~abstained]] = True  # invalid or skipped
        fits = at[abstained & ~bad[at]]  # an abstention, whatever value it carries (when that fits)
        invalid[fits] = not t.optional
        abstain[fits] = t.optional
    empty = abstain | invalid
    if empty.any():
        values[empty] = 0
    return values, abstain, invalid
