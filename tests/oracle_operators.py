"""An independent oracle of the operator catalogue, for tests: one pure function per operator.

The package does not hold this module: every path evaluates operators through the
kernels of `gsrlang.semantics.kernels`. It is kept among the tests, written plainly
over Python values, so that tests can hold the kernels to it (tests/test_kernels.py).

Each function works on ONE candidate's values: ports are positional arguments in
the order the stdlib signature declares them (a list port is a list, in slot
order), parameters are keyword arguments (defaults already filled in by the
checker; enum members such as `skip` arrive as plain strings). Values are
Python values: Bool -> bool, Score -> float, Ordinal / Nominal -> the label str,
an abstention -> `ABSTAIN` (see gsrlang.semantics.values).

Determinism: every sum is `math.fsum`, which is correctly rounded and therefore
independent of the summation order; products are taken left to right in slot
order. The same inputs give the same output bit for bit on every platform with
IEEE-754 doubles.

Abstention: a TRANSFORM passes an abstention through (except `default`, which
replaces it); a REDUCE applies its `on_abstain` policy; GATE ports never receive
one (the checker rejects it). If every item of a reducer is skipped the reducer
raises `RuntimeFailure` and the item becomes invalid: there is nothing to reduce,
and guessing a value would hide that.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, Sequence

import attrs

from gsrlang.lang.types import JType
from gsrlang.semantics.compose import plain_param
from gsrlang.semantics.values import ABSTAIN, RuntimeFailure

__all__ = ["OPERATORS", "Operator", "apply", "bind_params", "operator"]


@attrs.frozen
class Operator:
    name: str
    kind: str  # "transform" | "reduce" | "gate"
    fn: Callable
    typed_ports: tuple[str, ...] = ()  # ports whose judgment type the function receives as `<port>_type`


OPERATORS: dict[str, Operator] = {}


def operator(name: str, kind: str, typed_ports: tuple[str, ...] = ()):
    """Register an implementation under its stdlib name."""

    def register(fn):
        if name in OPERATORS:
            raise ValueError(f"operator {name!r} is implemented twice")
        OPERATORS[name] = Operator(name, kind, fn, typed_ports)
        return fn

    return register


def port_names(fn: Callable) -> tuple[str, ...]:
    """The positional parameters of an implementation: its ports, in order."""
    return tuple(p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def param_names(fn: Callable) -> tuple[str, ...]:
    """The keyword-only parameters of an implementation: its stdlib parameters (and `<port>_type`)."""
    return tuple(p.name for p in inspect.signature(fn).parameters.values() if p.kind == p.KEYWORD_ONLY)


def bind_params(name: str, params: dict, port_types: dict[str, JType] | None = None) -> dict:
    """The keyword arguments of operator `name` for a node's parameters (and its ports' types)."""
    op = OPERATORS[name]
    kwargs = {k: plain_param(v) for k, v in params.items()}
    for port in op.typed_ports:
        kwargs[f"{port}_type"] = (port_types or {})[port]
    return kwargs


def apply(name: str, *ports, **params):
    """Apply operator `name` to one candidate's port values (a convenience for tests and the REPL)."""
    op = OPERATORS[name]
    kwargs = {k: (v if k.endswith("_type") else plain_param(v)) for k, v in params.items()}
    return op.fn(*ports, **kwargs)


# ---- TRANSFORM ------------------------------------------------------------------------------------------
@operator("normalize", "transform", typed_ports=("x",))
def normalize(x, *, x_type: JType):
    """A level's value in [0, 1]; true is 1 and false is 0."""
    if x is ABSTAIN:
        return ABSTAIN
    if x_type.kind == "bool":
        return 1.0 if x else 0.0
    return float(x_type.level_value(x))


@operator("scale", "transform", typed_ports=("x",))
def scale(x, *, x_type: JType):
    """Score[lo..hi] mapped linearly onto [0, 1]."""
    if x is ABSTAIN:
        return ABSTAIN
    lo, hi = x_type.lo, x_type.hi
    return min(1.0, max(0.0, (x - lo) / (hi - lo)))


@operator("threshold", "transform")
def threshold(x, *, at: float):
    if x is ABSTAIN:
        return ABSTAIN
    return x >= at


def _rank(x, level: str, x_type: JType) -> tuple[int, int]:
    return x_type.labels.index(x), x_type.labels.index(level)


@operator("at_most", "transform", typed_ports=("x",))
def at_most(x, *, level: str, x_type: JType):
    """The level is `level` or below it, in declaration order."""
    if x is ABSTAIN:
        return ABSTAIN
    mine, bound = _rank(x, level, x_type)
    return mine <= bound


@operator("at_least", "transform", typed_ports=("x",))
def at_least(x, *, level: str, x_type: JType):
    """The level is `level` or above it, in declaration order."""
    if x is ABSTAIN:
        return ABSTAIN
    mine, bound = _rank(x, level, x_type)
    return mine >= bound


@operator("is", "transform")
def is_(x, *, level):
    """The judgment is exactly `level` (a label, or a bool)."""
    if x is ABSTAIN:
        return ABSTAIN
    return x == level


@operator("not", "transform")
def not_(x):
    if x is ABSTAIN:
        return ABSTAIN
    return not x


@operator("invert", "transform")
def invert(x):
    if x is ABSTAIN:
        return ABSTAIN
    return 1.0 - x


@operator("map", "transform")
def map_(x, *, to: dict):
    if x is ABSTAIN:
        return ABSTAIN
    try:
        return to[x]
    except KeyError:
        raise RuntimeFailure(f"`map` gives no score for `{x}`") from None


@operator("default", "transform")
def default(x, *, value):
    return value if x is ABSTAIN else x


# ---- REDUCE -------------------------------------------------------------------------------------------------
_CREDIT = {"zero": 0.0, "partial": 0.5}


def _resolve(items: Sequence, weights: Sequence[float] | None, policy: str, op: str) -> list[tuple[float, float]]:
    """(value, weight) for each item that counts, after the `on_abstain` policy.

    skip: the item is left out (value and weight); zero: it counts 0; partial: 0.5;
    fail: the worst case for its weight's sign (0 for a positive weight, 1 for a penalty).
    """
    out = []
    for i, x in enumerate(items):
        w = 1.0 if weights is None else weights[i]
        if x is ABSTAIN:
            if policy == "skip":
                continue
            if policy == "fail":
                x = 1.0 if w < 0 else 0.0
            else:
                x = _CREDIT[policy]
        out.append((x, w))
    if not out:
        raise RuntimeFailure(f"every item of `{op}` abstained (on_abstain: skip): there is nothing to reduce")
    return out


def _clamp(s: float) -> float:
    return 1.0 if s > 1.0 else (0.0 if not s > 0.0 else s)  # also maps -0.0 to 0.0


@operator("mean", "reduce")
def mean(items, *, on_abstain: str = "fail"):
    xs = [x for x, _ in _resolve(items, None, on_abstain, "mean")]
    return _clamp(math.fsum(xs) / len(xs))


@operator("weighted_mean", "reduce")
def weighted_mean(items, *, weights="equal", on_abstain: str = "fail"):
    """sum(w x) / sum(positive w), clamped to [0, 1]; with no positive weight, 1 + sum(w x) / sum(|w|).

    `weights: equal` gives every slot weight 1. The weights that count are those of the
    items left after the abstention policy.
    """
    if weights == "equal":
        weights = [1.0] * len(items)
    if len(weights) != len(items):
        raise RuntimeFailure(f"`weighted_mean` has {len(items)} items but {len(weights)} weights")
    pairs = _resolve(items, weights, on_abstain, "weighted_mean")
    total = math.fsum(w * x for x, w in pairs)
    positive = math.fsum(w for _, w in pairs if w > 0)
    if positive > 0:
        return _clamp(total / positive)
    negative = math.fsum(-w for _, w in pairs if w < 0)
    if negative == 0:
        raise RuntimeFailure("every weight of `weighted_mean` that counts is zero: the mean is undefined")
    return _clamp(1.0 + total / negative)  # only penalties: start at 1 and lower it


@operator("min", "reduce")
def min_(items, *, on_abstain: str = "fail"):
    return min(x for x, _ in _resolve(items, None, on_abstain, "min"))


@operator("max", "reduce")
def max_(items, *, on_abstain: str = "fail"):
    return max(x for x, _ in _resolve(items, None, on_abstain, "max"))


@operator("median", "reduce")
def median(items, *, on_abstain: str = "fail"):
    xs = sorted(x for x, _ in _resolve(items, None, on_abstain, "median"))
    mid = len(xs) // 2
    if len(xs) % 2:
        return xs[mid]
    return _clamp((xs[mid - 1] + xs[mid]) / 2)


@operator("product", "reduce")
def product(items, *, on_abstain: str = "fail"):
    p = 1.0
    for x, _ in _resolve(items, None, on_abstain, "product"):  # left to right, slot order
        p *= x
    return p


def _bools(items, policy: str, op: str, fail_as: bool) -> list[bool]:
    """The items that count for all/any/fraction: skip drops, zero counts false, fail the worst case."""
    out = []
    for x in items:
        if x is ABSTAIN:
            if policy == "skip":
                continue
            x = fail_as if policy == "fail" else False
        out.append(x)
    if not out:
        raise RuntimeFailure(f"every item of `{op}` abstained (on_abstain: skip): there is nothing to reduce")
    return out


@operator("all", "reduce")
def all_(items, *, on_abstain: str = "fail"):
    return all(_bools(items, on_abstain, "all", False))


@operator("any", "reduce")
def any_(items, *, on_abstain: str = "fail"):
    # fail: an abstention counts as true ("a flagged problem cannot be ruled out")
    return any(_bools(items, on_abstain, "any", True))


@operator("fraction", "reduce")
def fraction(items, *, on_abstain: str = "fail"):
    bs = _bools(items, on_abstain, "fraction", False)
    return sum(bs) / len(bs)


# ---- GATE -----------------------------------------------------------------------------------------------------
@operator("cap", "gate")
def cap(base, trigger, *, at: float):
    """When the trigger holds, the score is at most `at`."""
    return min(base, at) if trigger else base


@operator("floor", "gate")
def floor(base, trigger, *, at: float):
    """When the trigger holds, the score is at least `at`."""
    return max(base, at) if trigger else base


@operator("veto", "gate")
def veto(base, trigger):
    """When the trigger holds, the score is 0."""
    return 0.0 if trigger else base


@operator("mask", "gate")
def mask(base, trigger):
    """When the trigger holds, the judgment abstains."""
    return ABSTAIN if trigger else base
