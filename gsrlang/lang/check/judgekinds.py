"""The judge kinds (`llm`, `human`, `verifier`, `rule.*`): one registry every part of gsrlang reads.

A judge kind is two things:

- its signature, declared in stdlib/judges.gsr like an operator (`judge human(field:
  String, missing: [Real | String] = none)`), with its documentation and an example;
- one class, registered here with `@judge_kind`, that names the kind, says which
  judge serves it (`factory`: a "module:Class" path, loaded only when a run needs it,
  or the class itself when it also implements `judge(...)`) and adds the static checks
  its parameters' types cannot express (`check`).

The checker binds a procedure's arguments against the signature and calls `check`;
the JSON form, the language server (hover, completion), the compiler's prompt,
`gsr explain KIND` and the runtime's `JudgeRegistry` all read `judge_kinds(catalog)`.
Adding a kind is one declaration and one class (tests/test_judge_kinds.py does it).
"""

from __future__ import annotations

import importlib
import re
from typing import ClassVar

from gsrlang.lang import records
from gsrlang.lang.catalog import Catalog, JudgeSig
from gsrlang.lang.syntax import ast
from gsrlang.lang.syntax.literals import Symbol
from gsrlang.lang.types import JType, convert

__all__ = ["DEFAULT_KIND", "JudgeKind", "KindUse", "judge_kind", "judge_kinds", "unregister"]

DEFAULT_KIND = "llm"  # the kind of a criterion that names no procedure

_REGISTERED: dict[str, type["JudgeKind"]] = {}


@records.define
class KindUse:
    """One use of a kind in a criterion, as its static checks see it."""

    ctx: object  # gsrlang.lang.check.context.Context
    proc: ast.Procedure
    type: JType | None  # the criterion's declared type (None when it did not check)
    values: dict  # the bound arguments
    path: str | None

    def span_of(self, param: str):
        """The span of argument `param`'s value (the whole procedure when it is not given)."""
        return next((a.value.span for a in self.proc.args or () if a.name and a.name.name == param),
                    self.proc.span)

    def error(self, code: str, message: str, span=None, label: str = "", help: str | None = None) -> None:
        self.ctx.error(code, message, span or self.proc.span, label, path=self.path, help=help)


class JudgeKind:
    """The class half of a judge kind; subclass it and decorate the subclass with `@judge_kind`."""

    name: ClassVar[str] = ""
    # what serves the kind at run time: "module:Class" (imported lazily, so checking never loads judges),
    # None when the class itself implements the judge protocol, or "configured" when a command builds it
    # from settings (the model judge: gsrlang.judges.llm.options)
    factory: ClassVar[str | None] = None
    positional: ClassVar[str | None] = None  # a parameter that may be written without its name
    fill_defaults: ClassVar[bool] = False  # whether defaults are stored in the procedure's arguments
    needs_ask: ClassVar[bool] = False  # the criterion must say `ask "..."`
    samples: ClassVar[bool] = False  # may be sampled several times in an ensemble (`judges 3 aggregate ...`)

    def __init__(self, sig: JudgeSig | None = None):
        self.sig = sig

    # ---- what the checker asks --------------------------------------------------------------------------
    def params(self, catalog: Catalog, proc: ast.Procedure) -> dict | None:
        """{name: ParamSig} the procedure binds (None when the dotted name is not one of this kind's)."""
        return {p.name: p for p in self.sig.params} if len(proc.name) == 1 else None

    def check(self, use: KindUse) -> bool:
        """Checks beyond the signature's types; report with `use.error(...)` and return False on a problem."""
        return True

    def spec(self, proc: ast.Procedure, values: dict) -> tuple[str, dict]:
        """(the procedure's name, its arguments) as `ProcedureSpec` keeps them."""
        return (values.pop(self.positional, "") if self.positional else ""), values

    # ---- what the runtime asks ----------------------------------------------------------------------
    def make_judge(self):
        """The judge serving this kind (None for a configured one: a command builds it)."""
        if self.factory == "configured":
            return None
        if self.factory is None:
            return self
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)()

    # ---- what people read ---------------------------------------------------------------------------
    def use_text(self) -> str:
        """How the kind is written in a criterion: `human(field: String, ...)`."""
        inside = None if self.sig is None else ", ".join(f"{p.name}: {p.pattern}" for p in self.sig.params)
        return self.name if inside is None else f"{self.name}({inside})"


def judge_kind(cls: type[JudgeKind]) -> type[JudgeKind]:
    """Register a judge kind's class under `cls.name` (its signature is read from the catalogue)."""
    if not cls.name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cls.name):
        raise ValueError(f"a judge kind needs a name, got {cls.name!r}")
    if cls.name in _REGISTERED and _REGISTERED[cls.name] is not cls:
        raise ValueError(f"judge kind {cls.name!r} is registered twice")
    _REGISTERED[cls.name] = cls
    _kinds_cache.clear()
    return cls


def unregister(name: str) -> None:
    """Remove a registered kind (tests, notebooks)."""
    _REGISTERED.pop(name, None)
    _kinds_cache.clear()


_kinds_cache: dict[int, tuple[Catalog, dict[str, JudgeKind]]] = {}


def judge_kinds(catalog: Catalog) -> dict[str, JudgeKind]:
    """{name: kind} for every kind both declared in the catalogue and registered, in declaration order."""
    hit = _kinds_cache.get(id(catalog))
    if hit is None or hit[0] is not catalog:
        hit = (catalog, {name: _REGISTERED[name](sig) for name, sig in catalog.judges.items()
                         if name in _REGISTERED})
        _kinds_cache[id(catalog)] = hit
    return hit[1]


def written_forms(catalog: Catalog) -> list[str]:
    """Every procedure name an author may write: `llm`, `human`, `verifier`, `rule.word_count`, ..."""
    out = []
    for name in judge_kinds(catalog):
        out += [f"rule.{r}" for r in catalog.rules] if name == "rule" else [name]
    return out


# ---- the built-in kinds ---------------------------------------------------------------------------------
@judge_kind
class LLMKind(JudgeKind):
    name = "llm"
    factory = "configured"
    needs_ask = True
    samples = True

    def check(self, use: KindUse) -> bool:
        t = use.type
        if use.values.get("on_disagree") == Symbol("abstain") and t is not None and not t.optional:
            use.error("GSR601", f"`on_disagree: abstain` lets the judge abstain, but the criterion is `{t}`",
                      use.span_of("on_disagree"), "may abstain",
                      help=f"declare the criterion `{t}?`, or choose `mean`, `first` or `invalid`")
            return False
        return True


@judge_kind
class HumanKind(JudgeKind):
    name = "human"
    factory = "gsrlang.judges.human:HumanJudge"

    def check(self, use: KindUse) -> bool:
        missing = use.values.get("missing")
        t = use.type
        if not missing or t is None:
            return True
        if not t.optional:
            use.error("GSR311", f"`missing` values are abstentions, but the criterion is `{t}`, which cannot "
                                "abstain", use.span_of("missing"), "makes abstentions",
                      help=f"declare the criterion `{t}?`")
            return False
        for value, item in zip(missing, _items(use.proc, "missing")):
            _, problem = convert(value, t.required())
            if problem is None:
                use.error("GSR311", f"missing-value sentinel {_shown(value)} is also a value of `{t.required()}`",
                          item.span, "a real answer", help="a sentinel must be a value the annotators never give "
                                                           "as an answer (such as 0 or \"N/A\" on a 1..5 scale)")
                return False
        return True


def _items(proc: ast.Procedure, param: str) -> list:
    """The items of the list given to `param` (none when it is not a list)."""
    return next((list(a.value.items) for a in proc.args or ()
                 if a.name and a.name.name == param and isinstance(a.value, ast.ListExpr)), [])


def _shown(value) -> str:
    return f'"{value}"' if isinstance(value, str) else (f"{value:g}" if isinstance(value, float) else str(value))


@judge_kind
class VerifierKind(JudgeKind):
    name = "verifier"
    factory = "gsrlang.judges.verifier:VerifierJudge"
    positional = "name"


@judge_kind
class RuleKind(JudgeKind):
    name = "rule"
    factory = "gsrlang.judges.rules:RuleJudge"
    fill_defaults = True

    def params(self, catalog: Catalog, proc: ast.Procedure) -> dict | None:
        rule = catalog.rules.get(proc.name[1].name) if len(proc.name) == 2 else None
        return None if rule is None else {p.name: p for p in rule.params}

    def check(self, use: KindUse) -> bool:
        rule, values, t = use.proc.name[1].name, use.values, use.type
        if rule in ("word_count", "char_count") and values.get("above") is None and values.get("below") is None:
            use.error("GSR202", f"`rule.{rule}` needs `above` or `below`", help=f"e.g. `rule.{rule}(above: 600)`")
            return False
        if rule == "regex":
            from gsrlang.lang.check.patterns import PatternError, compile_pattern, re2_help

            try:
                compile_pattern(values["pattern"])
            except PatternError as exc:
                use.error("GSR305", f"invalid regular expression: {exc}", use.span_of("pattern"),
                          help=re2_help(values["pattern"]))
                return False
        if t is not None and t.required().kind != "bool":
            use.error("GSR301", f"`rule.{rule}` gives a Bool, but the criterion is declared `{t}`", None,
                      "gives Bool", help="declare the criterion as `Bool`")
        return True

    def spec(self, proc: ast.Procedure, values: dict) -> tuple[str, dict]:
        return proc.name[1].name, values

    def use_text(self) -> str:
        return "rule.NAME(...)"


def kind_of(catalog: Catalog, proc: ast.Procedure) -> JudgeKind | None:
    return judge_kinds(catalog).get(proc.name[0].name)

