"""Human annotations as judgments: `criterion x: T = human(field: "scores.naturalness")`.

The judgment is read from a field of the item's row (`item.record`; a dotted path
as in `gsrlang.files.dataset.get_path`) and converted to the criterion's declared type:

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
and invalid otherwise. So is a value listed in `missing` (`human(field: "q.Q1",
missing: [0, "N/A"])`): annotation files often write "not applicable" as 0 or "N/A";
the checker requires such a criterion to be `T?`. A value that does not fit is invalid, with a reason such as
`field 'scores.naturalness' = 4.5 is outside Score[1..3]`.

The field may contain `{candidate}`, replaced by the candidate's id (A, B, ...), so
that pairwise data can carry one annotation per candidate (`"ratings.{candidate}"`).
"""

from __future__ import annotations

import json

from gsrlang.files.dataset import MissingFieldError, get_path
from gsrlang.lang.types import JType, convert, number_of
from gsrlang.semantics.judgment import Judgment

__all__ = ["HumanJudge", "convert"]

_MISSING = object()  # a field the row does not hold verbatim (a dotted path, or absent): `read` decides


def _shown(value) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (str, bool, list, dict)) else str(value)


def _is_sentinel(value, sentinels) -> bool:
    """Whether a cell holds one of `missing`'s values: numbers compare as numbers (0 matches 0, 0.0 and
    "0"), strings without surrounding spaces and case ("N/A" matches "n/a ")."""
    return any(isinstance(value, str) and value.strip().casefold() == s.strip().casefold() if isinstance(s, str)
               else number_of(value) == float(s) for s in sentinels or ())


class HumanJudge:
    """Serves every `human(field: ...)` criterion by reading the annotation from the row."""

    inline = True

    def validate(self, node) -> str | None:
        has_field = node.criterion.procedure.args.get("field")
        return None if has_field else f"criterion `{node.id}` is `human(...)` without a field"

    async def judge(self, node, item, candidate) -> Judgment:
        return self.read(node, item.record, candidate.id)

    def judge_many(self, node, items, c: int) -> list[Judgment]:
        """`judge` for candidate `c` of every item, in one call (the columnar run path; see
        gsrlang.judges.base).

        The common cells take a short way with the same outcome as `read`: a number in a
        Score's range, a bool for a Bool (one shared Judgment per value: they are frozen),
        an empty cell of a `T?`. Every other cell, and every field with `{candidate}` or
        `missing`, goes through `read`."""
        read = self.read
        args = node.criterion.procedure.args
        field = args["field"]
        if "{candidate}" in field or args.get("missing"):
            return [read(node, item.record, item.candidates[c].id) for item in items]
        t: JType = node.type
        kind, lo, hi = t.kind, t.lo, t.hi
        # per type of cell (1, 1.0 and True are one key to a dict), cell -> its Judgment; no 0: -0.0 is 0.0 as a key
        known: dict = {float: {}, int: {}, bool: {}, type(None): {}}
        if t.optional:
            known[type(None)][None] = Judgment.abstained(f"field {field!r} is empty")
        parts = field.split(".")
        out = []
        for item in items:
            record = item.record
            if field in record:
                value = record[field]
            else:  # a dotted path through objects (anything else: `read`, which says what is missing)
                value = record
                for part in parts:
                    if type(value) is not dict or part not in value:
                        value = _MISSING
                        break
                    value = value[part]
            seen = known.get(type(value))
            j = seen.get(value) if seen is not None else None
            if j is None:
                if kind == "score" and (type(value) is float or type(value) is int) and lo <= value <= hi \
                        and value != 0:
                    j = seen[value] = Judgment(float(value), "ok", None, None, {})
                elif kind == "bool" and type(value) is bool:
                    j = seen[value] = Judgment(value, "ok", None, None, {})
                else:
                    j = read(node, record, item.candidates[c].id)
            out.append(j)
        return out

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
        if _is_sentinel(value, node.criterion.procedure.args.get("missing")):
            return Judgment.abstained(f"field {field!r} = {raw} means not applicable (`missing`)", raw, **where)
        converted, problem = convert(value, t)
        if problem:
            return Judgment.invalid(f"field {field!r} = {raw} {problem}", raw, **where)
        if converted == value and type(converted) is type(value) or (t.kind == "score" and number_of(value) == converted
                                                                     and not isinstance(value, str)):
            raw = None  # the cell held exactly the value: no need to keep it twice
        return Judgment.ok(converted, None, raw, **where)
