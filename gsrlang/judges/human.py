"""Human annotations as judgments: `criterion x: T = human(field: "scores.naturalness")`.

The judgment is read from a field of the item's row (`item.record`; a dotted path
as in `gsrlang.data.get_path`) and converted to the criterion's declared type:

- Bool: true / false, 1 / 0, or the strings "true", "false", "yes", "no", "1", "0"
  (any case);
- Score[lo..hi]: a number (or a numeric string) within [lo, hi];
- Ordinal: a level's label ("good"), or for a numbered ordinal (`Ordinal[1..5]`) an
  integer (3, 3.0, "3");
- Nominal: a label.

`raw` keeps the cell as written when it differs from the converted value ("yes" for
true, "3" for a level); provenance names the field only when it contains `{candidate}`
(the trace node already shows the procedure and its field).

A null (or an empty CSV cell) is an abstention when the criterion is declared `T?`,
and invalid otherwise. A value that does not fit is invalid, with a reason such as
`field 'scores.naturalness' = 4.5 is outside Score[1..3]`.

The field may contain `{candidate}`, replaced by the candidate's id (A, B, ...), so
that pairwise data can carry one annotation per candidate (`"ratings.{candidate}"`).
"""

from __future__ import annotations

import json
import math

from gsrlang.data import MissingFieldError, get_path
from gsrlang.judgment import Judgment
from gsrlang.types import JType

__all__ = ["HumanJudge", "convert"]

_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}


def _shown(value) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else str(value)


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def convert(value, t: JType) -> tuple[object, str | None]:
    """(converted value, None) or (None, why it does not fit `t`) for a non-null value."""
    kind = t.kind
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value), None
        if isinstance(value, str):
            word = value.strip().lower()
            if word in _TRUE:
                return True, None
            if word in _FALSE:
                return False, None
        return None, "is not a Bool (expected true/false, yes/no or 1/0)"
    if kind == "score":
        x = _number(value)
        if x is None:
            return None, f"is not a number ({t.required()} expected)"
        if not math.isfinite(x):
            return None, "is not a finite number"
        if not t.lo <= x <= t.hi:
            return None, f"is outside {t.required()}"
        return x, None
    if isinstance(value, str) and value in t.labels:
        return value, None
    if kind == "ordinal" and t.numbered:
        x = _number(value)
        if x is not None and x.is_integer() and str(int(x)) in t.labels:
            return str(int(x)), None
        return None, f"is not a level of {t.required()}"
    if isinstance(value, str) and value.strip() in t.labels:
        return value.strip(), None
    what = "level" if kind == "ordinal" else "label"
    return None, f"is not a {what} of {t.required()} (expected one of {', '.join(t.labels)})"


class HumanJudge:
    """Serves every `human(field: ...)` criterion by reading the annotation from the row."""

    inline = True

    def validate(self, node) -> str | None:
        if not node.criterion.procedure.args.get("field"):
            return f"criterion `{node.id}` is `human(...)` without a field"
        return None

    async def judge(self, node, item, candidate) -> Judgment:
        return self.read(node, item.record, candidate.id)

    @staticmethod
    def read(node, record, candidate_id: str = "A") -> Judgment:
        declared = node.criterion.procedure.args["field"]
        field = declared.replace("{candidate}", candidate_id)
        # the trace node already names the procedure and its field; say which field only when it varies
        where = {"field": field} if field != declared else {}
        t: JType = node.type
        try:
            value = get_path(record, field)
        except MissingFieldError as exc:
            return Judgment.invalid(str(exc), **where)
        raw = None if value is None else _shown(value)
        if value is None or value == "":
            if t.optional:
                return Judgment.abstained(f"field {field!r} is empty", raw, **where)
            return Judgment.invalid(f"field {field!r} is empty, and `{t}` cannot abstain (declare it `{t}?` "
                                    "to treat an empty annotation as an abstention)", raw, **where)
        converted, problem = convert(value, t)
        if problem:
            return Judgment.invalid(f"field {field!r} = {raw} {problem}", raw, **where)
        if converted == value and type(converted) is type(value) or (t.kind == "score" and _number(value) == converted
                                                                     and not isinstance(value, str)):
            raw = None  # the cell held exactly the value: no need to keep it twice
        return Judgment.ok(converted, None, raw, **where)
