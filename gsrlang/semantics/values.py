"""Runtime values: what one candidate's judgment is while a program runs.

A judgment of type `Bool` is a Python `bool`, a `Score[lo..hi]` a finite `float` in
[lo, hi], an `Ordinal` or `Nominal` the label `str`, and an abstention ("cannot
assess", only for a `T?`) the `ABSTAIN` sentinel. In JSON (results, traces) an
abstention is `null`, every other value is itself; floats round-trip exactly
because `json` writes them with `repr`.

`value_problem(value, type)` is the one domain check of a value: on every judge's
answer, and the reason given for an operator output that does not fit (the outputs
themselves are checked as columns, `gsrlang.semantics.settle.unfit`).
"""

from __future__ import annotations

import math

from gsrlang.lang.types import JType
from gsrlang.semantics.judgment import ABSTAIN, Abstain

__all__ = ["ABSTAIN", "Abstain", "Possible", "RuntimeFailure", "Unsettled", "format_value", "top",
           "unsettled", "value_from_json", "value_problem"]


class Unsettled:
    """A value that is not settled for one candidate: an invalid or skipped judgment, or an operator output
    that depends on one (see gsrlang.semantics.settle).

    `possible` is what the value may still be (a `Possible`); `causes` are the
    problems behind it, as (node position, candidate, sentence) triples, so that the
    item's reason names the first one in program order.
    """

    __slots__ = ("possible", "causes")

    def __init__(self, possible, causes: frozenset):
        self.possible = possible
        self.causes = causes

    def __repr__(self) -> str:
        return f"Unsettled({self.possible!r})"


class Possible:
    """What an unsettled value may still be: discrete `values` (a frozenset) or the interval [lo, hi]
    (values None), and whether it may abstain."""

    __slots__ = ("values", "lo", "hi", "abstain")

    def __init__(self, values: frozenset | None, lo: float = 0.0, hi: float = 0.0, abstain: bool = False):
        self.values, self.lo, self.hi, self.abstain = values, lo, hi, abstain

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


class RuntimeFailure(Exception):
    """A value or an operator went wrong while one item was evaluated: that item is invalid.

    The message is a complete sentence, shown to the user as the item's reason.
    """


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def format_value(value) -> str:
    """A value as a person reads it: `true`, `0.75`, `good`, `abstained`."""
    if value is ABSTAIN:
        return "abstained"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _number_text(value) if value.is_integer() else f"{value:.6g}"
    return str(value)


def value_problem(value, t: JType) -> str | None:
    """Why `value` is not a value of type `t` (None when it is)."""
    if value is ABSTAIN:
        return None if t.optional else f"it abstained, but `{t}` cannot abstain"
    kind = t.kind
    if kind == "bool":
        return None if isinstance(value, bool) else f"{value!r} is not a Bool"
    if kind == "score":
        if isinstance(value, bool) or not isinstance(value, float):
            return f"{value!r} is not a number"
        if not math.isfinite(value):
            return f"{value!r} is not a finite number"
        if not t.lo <= value <= t.hi:
            return f"{format_value(value)} is outside {t.required()}"
        return None
    if not isinstance(value, str):
        return f"{value!r} is not a label of {t.required()}"
    if value not in t.labels:
        return f"`{value}` is not a label of {t.required()}"
    return None


def value_from_json(data, t: JType):
    """Read a value back from JSON for type `t`; raises RuntimeFailure when it does not fit."""
    value = ABSTAIN if data is None else \
        float(data) if t.kind == "score" and isinstance(data, int) and not isinstance(data, bool) else data
    problem = value_problem(value, t)
    if problem:
        raise RuntimeFailure(problem)
    return value
