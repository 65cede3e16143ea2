"""The compile specification S and the task contracts it carries.

S = (task input, rubric text, optional fixed reference, task contract). It is
everything the compiler may see: a candidate response and a gold label are not
fields of any class here, and the classes are frozen and slotted, so neither can
be attached to a spec, passed to its constructor, or reach a prompt by mistake.

`CompileSpec.sha256` identifies S (canonical JSON, sorted keys); compiled programs
are cached under it and their provenance header names it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Union

import attrs

from gsrlang.lang.tasks import ON_TIE, QUANTIZE
from gsrlang.lang.types import fmt_number

_RANGE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*\.\.\s*(-?\d+(?:\.\d+)?)\s*$")


class SpecError(ValueError):
    """An invalid compile specification (a bad scale, an empty rubric, ...)."""


def _number(x) -> Union[int, float]:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise SpecError(f"a scale bound must be a finite number, got {x!r}")
    return int(x) if float(x).is_integer() else float(x)


def parse_scale(value) -> tuple[Union[int, float], Union[int, float]]:
    """A native scale from `"1..5"`, `(1, 5)` or `[1, 5]`; raises SpecError when it is not lo < hi."""
    if isinstance(value, str):
        if not (m := _RANGE.match(value)):
            raise SpecError(f"a scale is written LO..HI with LO < HI (for example 1..5), got {value!r}")
        lo, hi = (float(g) for g in m.groups())
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
    else:
        raise SpecError(f"a scale is a pair (lo, hi) or the text 'LO..HI', got {value!r}")
    lo, hi = _number(lo), _number(hi)
    if not lo < hi:
        raise SpecError(f"a scale needs LO < HI, got {fmt_number(lo)}..{fmt_number(hi)}")
    return lo, hi


def _one_of(choices):
    """An attrs validator: the value is one of `choices` (quantize, on_tie)."""
    def check(instance, attribute, value) -> None:
        if value not in choices:
            raise SpecError(f"{attribute.name} must be one of {', '.join(choices)}; got {value!r}")
    return check


def _check_epsilon(instance, attribute, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise SpecError(f"epsilon must be a number in [0, 1), got {value!r}")


@attrs.frozen(kw_only=True)
class Pointwise:
    """One candidate per item, read out on its native scale.

    `quantize="thresholds"` lets the program choose its own hi - lo cut points.
    """

    scale: tuple = attrs.field(converter=parse_scale)
    quantize: str = attrs.field(default="round", validator=_one_of(QUANTIZE))

    kind = "pointwise"

    def task_line(self) -> str:
        lo, hi = self.scale
        q = "thresholds(...)" if self.quantize == "thresholds" else self.quantize
        return f"task pointwise {{ scale = {fmt_number(lo)}..{fmt_number(hi)}  quantize = {q} }}"

    def describe(self) -> str:
        lo, hi = self.scale
        return f"pointwise, scale {fmt_number(lo)}..{fmt_number(hi)}, quantize {self.quantize}"

    def to_json(self) -> dict:
        return {"task": "pointwise", "scale": list(self.scale), "quantize": self.quantize}


@attrs.frozen(kw_only=True)
class Pairwise:
    """Two candidates per item; the readout picks a winner or applies the tie policy."""

    epsilon: float = attrs.field(default=0.0, validator=_check_epsilon)
    on_tie: str = attrs.field(default="tie", validator=_one_of(ON_TIE))

    kind = "pairwise"

    def task_line(self) -> str:
        return f"task pairwise {{ epsilon = {fmt_number(self.epsilon)}  on_tie = {self.on_tie} }}"

    def describe(self) -> str:
        return f"pairwise, epsilon {fmt_number(self.epsilon)}, on_tie {self.on_tie}"

    def to_json(self) -> dict:
        return {"task": "pairwise", "epsilon": float(self.epsilon), "on_tie": self.on_tie}


Contract = Union[Pointwise, Pairwise]


def contract_from_json(doc: dict) -> Contract:
    if doc.get("task") == "pointwise":
        return Pointwise(scale=doc["scale"], quantize=doc.get("quantize", "round"))
    if doc.get("task") == "pairwise":
        return Pairwise(epsilon=doc.get("epsilon", 0.0), on_tie=doc.get("on_tie", "tie"))
    raise SpecError(f"unknown task contract {doc!r}")


def _check_rubric(instance, attribute, value) -> None:
    if not isinstance(value, str):
        raise TypeError(f"rubric must be text, got {type(value).__name__}")
    if not value.strip():
        raise SpecError("the rubric text is empty")


def _check_optional_text(instance, attribute, value) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be text or None, got {type(value).__name__}")


def _check_contract(instance, attribute, value) -> None:
    if not isinstance(value, (Pointwise, Pairwise)):
        raise TypeError(f"contract must be Pointwise(...) or Pairwise(...), got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class CompileSpec:
    """S: what a rubric is compiled from. There is no field for a response or a label, by design."""

    rubric: str = attrs.field(validator=_check_rubric)
    contract: Contract = attrs.field(validator=_check_contract)
    task_input: str | None = attrs.field(default=None, validator=_check_optional_text)
    reference: str | None = attrs.field(default=None, validator=_check_optional_text)

    def to_json(self) -> dict:
        return {"rubric": self.rubric, "task_input": self.task_input, "reference": self.reference,
                "contract": self.contract.to_json()}

    @classmethod
    def from_json(cls, doc: dict) -> "CompileSpec":
        return cls(rubric=doc["rubric"], contract=contract_from_json(doc["contract"]),
                   task_input=doc.get("task_input"), reference=doc.get("reference"))

    @property
    def sha256(self) -> str:
        """The hash of S: canonical JSON of every field."""
        return sha256_text(canonical_json(self.to_json()))

    @property
    def rubric_sha256(self) -> str:
        return sha256_text(self.rubric)


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
