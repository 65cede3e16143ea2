"""Judgment types (what flows along the graph's edges) and the patterns of stdlib signatures.

A `JType` is the type of one candidate's judgment: Bool, Score[lo..hi], an Ordinal with
its levels' values, or a Nominal with its labels, each possibly `?` (may abstain).
A `Pattern` is what a signature accepts: a judgment type family, a type variable, or a
parameter type (Real, Int, String, an enum, a list or a map).
"""

from __future__ import annotations

import math

import attrs

from gsrlang.lang import records


def fmt_number(x) -> str:
    """A number as .gsr writes it: 5, 0.05."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _fmt_num(x: float, exact_below: float = 1e16) -> str:  # a type's bounds: `fmt_number`, but 1e308, not 309 digits
    return fmt_number(x) if abs(x) < exact_below else repr(float(x))


@records.frozen
class JType:
    kind: str  # "bool" | "score" | "ordinal" | "nominal"
    lo: float = 0.0
    hi: float = 1.0
    labels: tuple[str, ...] = ()
    values: tuple[float, ...] = ()  # an ordinal level's value in [0, 1], one per label
    numbered: bool = False  # Ordinal[1..k] rather than Ordinal{...}
    optional: bool = False

    def __str__(self) -> str:
        return self.text()

    def text(self, exact_below: float = 1e16) -> str:
        """The type in `.gsr` syntax; a Score's bounds from `exact_below` on in magnitude are written as floats."""
        if self.kind == "bool":
            s = "Bool"
        elif self.kind == "score":
            lo, hi = _fmt_num(self.lo, exact_below), _fmt_num(self.hi, exact_below)
            s = "Score" if (self.lo, self.hi) == (0.0, 1.0) else f"Score[{lo}..{hi}]"
        elif self.kind == "ordinal":
            s = f"Ordinal[{self.labels[0]}..{self.labels[-1]}]" if self.numbered else "Ordinal{" + ", ".join(self.labels) + "}"
        else:
            s = "Nominal{" + ", ".join(self.labels) + "}"
        return s + ("?" if self.optional else "")

    def required(self) -> "JType":
        return attrs.evolve(self, optional=False) if self.optional else self

    def maybe(self, optional: bool = True) -> "JType":
        return attrs.evolve(self, optional=optional) if optional != self.optional else self

    @property
    def is_unit_score(self) -> bool:
        return self.kind == "score" and (self.lo, self.hi) == (0.0, 1.0)

    def level_value(self, label: str) -> float:
        return self.values[self.labels.index(label)]

    def to_json(self) -> dict:
        out: dict = {"kind": self.kind, "optional": self.optional}
        if self.kind == "score":
            out.update(lo=self.lo, hi=self.hi)
        if self.kind in ("ordinal", "nominal"):
            out["labels"] = list(self.labels)
        if self.kind == "ordinal":
            out.update(values=list(self.values), numbered=self.numbered)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "JType":
        return cls(data["kind"], float(data.get("lo", 0.0)), float(data.get("hi", 1.0)),
                   tuple(data.get("labels", ())), tuple(float(v) for v in data.get("values", ())),
                   bool(data.get("numbered", False)), bool(data.get("optional", False)))


BOOL = JType("bool")
SCORE = JType("score")


def ordinal(labels, values=None, numbered=False) -> JType:
    labels = tuple(str(label) for label in labels)
    if values is None:
        k = len(labels)
        values = tuple(i / (k - 1) for i in range(k)) if k > 1 else (1.0,)
    return JType("ordinal", labels=labels, values=tuple(values), numbered=numbered)


# ---- signature patterns ------------------------------------------------------------------------
@records.frozen
class Pattern:
    """A type in a stdlib signature.

    kind: "bool", "score" (lo/hi, or any_range), "ordinal" / "nominal" (any of that family),
    "var" (a type variable), "real", "int", "string", "enum" (name), "level" (a level of the
    judgment at the operator's first port), "list" (element),
    "map" (element is the value pattern), or "union" (options).
    """

    kind: str
    name: str = ""
    lo: float = 0.0
    hi: float = 1.0
    any_range: bool = False
    element: "Pattern | None" = None
    options: tuple["Pattern", ...] = ()
    optional: bool = False

    def __str__(self) -> str:
        k = self.kind
        if k == "union":
            s = " | ".join(str(o) for o in self.options)
        elif k == "list":
            s = f"[{self.element}]"
        elif k == "map":
            s = f"{{{self.name}: {self.element}}}"
        elif k == "score":
            s = "Score[*]" if self.any_range else ("Score" if (self.lo, self.hi) == (0, 1) else
                                                    f"Score[{_fmt_num(self.lo)}..{_fmt_num(self.hi)}]")
        elif k in ("var", "enum"):
            s = self.name
        else:
            s = {"bool": "Bool", "ordinal": "Ordinal", "nominal": "Nominal", "real": "Real", "int": "Int",
                 "string": "String", "level": "Level"}[k]
        return s + ("?" if self.optional else "")

    @property
    def is_list(self) -> bool:
        return self.kind == "list"

    def alternatives(self) -> tuple["Pattern", ...]:
        return self.options if self.kind == "union" else (self,)

    @property
    def accepts_abstention(self) -> bool:
        return any(o.optional for o in self.alternatives())


def matches(pattern: Pattern, t: JType, bindings: dict[str, JType]) -> bool:
    """Does judgment type `t` (its `?` ignored) fit `pattern`? Binds type variables in `bindings`."""
    t = t.required()
    for p in pattern.alternatives():
        if p.kind == "var":
            if bindings.setdefault(p.name, t) == t:
                return True
        elif p.kind == t.kind and (p.kind != "score" or p.any_range or (p.lo, p.hi) == (t.lo, t.hi)):
            return True
    return False


def substitute(pattern: Pattern, bindings: dict[str, JType]) -> JType | None:
    """The judgment type a result pattern denotes, once its type variables are bound."""
    if pattern.kind == "var":
        bound = bindings.get(pattern.name)
        return bound.maybe(pattern.optional or bound.optional) if bound else None
    if pattern.kind == "bool":
        return BOOL.maybe(pattern.optional)
    if pattern.kind == "score" and not pattern.any_range:
        return JType("score", pattern.lo, pattern.hi, optional=pattern.optional)
    return None


# ---- raw values (a data file's cell) as judgment values -----------------------------------------------
_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}


def is_number(value) -> bool:
    """An int or a float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite_number(value) -> bool:
    """An int or a finite float (not a bool)."""
    return is_number(value) and math.isfinite(value)


def number_of(value) -> float | None:
    """A number, or a string holding one, as a float (None for anything else, a bool included)."""
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
    """(converted value, None) or (None, why it does not fit `t`) for a non-null raw value.

    Used by `human(...)` judges on each cell and by the checker on `missing` sentinels."""
    kind = t.kind
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value), None
        if isinstance(value, str) and ((word := value.strip().lower()) in _TRUE or word in _FALSE):
            return word in _TRUE, None
        return None, "is not a Bool (expected true/false, yes/no or 1/0)"
    if kind == "score":
        x = number_of(value)
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
        x = number_of(value)
        if x is not None and x.is_integer() and str(int(x)) in t.labels:
            return str(int(x)), None
        return None, f"is not a level of {t.required()}"
    if isinstance(value, str) and value.strip() in t.labels:
        return value.strip(), None
    what = "level" if kind == "ordinal" else "label"
    return None, f"is not a {what} of {t.required()} (expected one of {', '.join(t.labels)})"
