"""The operator, judge-kind and rule catalogue, read from the `.gsr` signature files in stdlib/.

This is the single source of truth for what operators and judge kinds exist, their ports,
parameters, defaults, documentation and examples: the checker, the runtime, the LLM compiler's prompt and
the language server all read it from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import attrs

from gsrlang.lang import records
from gsrlang.lang.span import Span
from gsrlang.lang.syntax import ast
from gsrlang.lang.syntax.literals import Symbol, format_literal, literal_value
from gsrlang.lang.types import Pattern


class _Required:
    """The default of a parameter without one; a singleton that survives pickling."""

    def __repr__(self) -> str:
        return "REQUIRED"

    def __reduce__(self):
        return "REQUIRED"


REQUIRED = _Required()


class CatalogError(Exception):
    """The stdlib itself is broken: a tool failure, not a user's mistake."""


@records.frozen
class PortSig:
    name: str
    pattern: Pattern

    @property
    def is_list(self) -> bool:
        return self.pattern.is_list

    @property
    def item_pattern(self) -> Pattern:
        return self.pattern.element if self.pattern.is_list else self.pattern


@records.frozen
class ParamSig:
    name: str
    pattern: Pattern
    default: object = REQUIRED  # a literal value (see literal_value), or REQUIRED
    per: str | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


class _Signature:
    """What operator, rule and judge-kind signatures share: parameters by name, and the documentation
    comment split into its prose and its `e.g. ...` example line."""

    doc: str
    params: tuple

    def param(self, name: str) -> "ParamSig | None":
        return next((p for p in self.params if p.name == name), None)

    @property
    def description(self) -> str:
        return "\n".join(line for line in self.doc.splitlines() if not line.startswith("e.g. ")).strip()

    @property
    def example(self) -> str | None:
        return next((line[5:] for line in self.doc.splitlines() if line.startswith("e.g. ")), None)


@records.frozen
class OperatorSig(_Signature):
    kind: str  # transform | reduce | gate
    name: str
    type_params: tuple[str, ...]
    ports: tuple[PortSig, ...]
    params: tuple[ParamSig, ...]
    result: Pattern
    doc: str
    path: str
    span: Span

    def port(self, name: str) -> PortSig | None:
        return next((p for p in self.ports if p.name == name), None)

    def signature(self) -> str:
        tp = f"<{', '.join(self.type_params)}>" if self.type_params else ""
        ports = ", ".join(f"{p.name}: {p.pattern}" for p in self.ports)
        params = ", ".join(param_text(p) for p in self.params)
        inside = ports + (f"; {params}" if params else "")
        return f"{self.kind} {self.name}{tp}({inside}) -> {self.result}"


@records.frozen
class JudgeSig(_Signature):
    """A judge kind's signature (stdlib/judges.gsr): its parameters and documentation."""

    name: str
    params: tuple[ParamSig, ...]
    doc: str
    path: str
    span: Span

    def signature(self) -> str:
        return f"judge {self.name}({', '.join(param_text(p) for p in self.params)})"


@records.frozen
class RuleSig(JudgeSig):
    """A rule's signature (stdlib/rules.gsr): a judge kind's, plus the type it gives."""

    result: Pattern

    def signature(self) -> str:
        return f"rule {self.name}({', '.join(param_text(p) for p in self.params)}) -> {self.result}"


@records.frozen
class EnumSig:
    name: str
    members: tuple[str, ...]
    doc: str


@records.frozen
class Catalog:
    operators: Mapping[str, OperatorSig]
    rules: Mapping[str, RuleSig]
    enums: Mapping[str, EnumSig]
    judges: Mapping[str, JudgeSig] = attrs.field(factory=dict)

    def operator(self, name: str) -> OperatorSig | None:
        return self.operators.get(name)


def param_text(p: ParamSig) -> str:
    """A parameter as written in a signature: `weights: [Real] per items = equal`."""
    text = f"{p.name}: {p.pattern}"
    if p.per:
        text += f" per {p.per}"
    if not p.required:
        text += f" = {format_literal(p.default)}"
    return text


# ---- loading -----------------------------------------------------------------------------------------
_NAMED = {"Bool": "bool", "Real": "real", "Int": "int", "String": "string", "Ordinal": "ordinal",
          "Nominal": "nominal", "Score": "score", "Level": "level"}


def pattern_of(t: ast.TypeExpr, type_vars=(), enums=()) -> Pattern:
    options = tuple(_atom_pattern(a, type_vars, enums) for a in t.options)
    return options[0] if len(options) == 1 else Pattern("union", options=options)


def _atom_pattern(a: ast.TypeAtom, type_vars, enums) -> Pattern:
    if a.form == "list":
        return Pattern("list", element=pattern_of(a.element, type_vars, enums), optional=a.optional)
    if a.form == "map":
        return Pattern("map", name=a.name.name, element=pattern_of(a.element, type_vars, enums), optional=a.optional)
    name = a.name.name
    if a.form == "any_range":
        return Pattern("score", any_range=True, optional=a.optional)
    if a.form == "range":
        return Pattern("score", lo=float(a.range.lo.value), hi=float(a.range.hi.value), optional=a.optional)
    if name in type_vars:
        return Pattern("var", name=name, optional=a.optional)
    if name in enums:
        return Pattern("enum", name=name, optional=a.optional)
    if name in _NAMED:
        return Pattern(_NAMED[name], optional=a.optional)
    raise CatalogError(f"unknown type {name!r} in a stdlib signature")


def _params(decls, type_vars, enums) -> tuple[ParamSig, ...]:
    out = []
    for d in decls:
        default = REQUIRED if d.default is None else literal_value(d.default)
        if default == Symbol("none"):
            default = None
        out.append(ParamSig(d.name.name, pattern_of(d.type, type_vars, enums), default,
                            d.per.name if d.per else None))
    return tuple(out)


def load_catalog(folder: Path, extra_sources: dict[str, str] | None = None) -> Catalog:
    """The catalogue of the `*.gsr` signature files directly in `folder` (fragments/ holds rubric fragments) and of
    `extra_sources` ({path: text}). Each declaration is parsed when it is first asked for (see `_Declarations`)."""
    sources = {str(p): p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.gsr"))}
    sources.update(extra_sources or {})
    found: dict[str, dict[str, tuple[str, str, int]]] = {"op": {}, "rule": {}, "judge": {}, "enum": {}}
    for path, text in sources.items():
        starts = [(m.start(), m.group(1), m.group(2)) for m in _DECLARATION.finditer(text)]
        for i, (start, keyword, name) in enumerate(starts):
            kind = "op" if keyword in ("transform", "reduce", "gate") else keyword
            if name in found[kind] and kind in ("op", "judge"):
                what = "operator" if kind == "op" else "judge kind"
                raise CatalogError(f"{path}: {what} {name!r} declared twice")
            # from the comment lines above it (its documentation) to the next declaration's
            begin = _doc_start(text, start) if i else 0
            end = _doc_start(text, starts[i + 1][0]) if i + 1 < len(starts) else len(text)
            found[kind][name] = (path, text[begin:end], begin)
    enums = frozenset(found["enum"])
    return Catalog(_Declarations(found["op"], enums, _operator), _Declarations(found["rule"], enums, _rule),
                   _Declarations(found["enum"], enums, _enum), _Declarations(found["judge"], enums, _judge))


@cache
def default_catalog() -> Catalog:
    """The stdlib's catalogue."""
    from gsrlang.lang.resources import stdlib_dir

    return load_catalog(stdlib_dir())


# A signature declaration starts a line: its keyword and name.
_DECLARATION = re.compile(r"^(transform|reduce|gate|rule|judge|enum)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def _doc_start(text: str, start: int) -> int:
    """Where the comment lines directly above offset `start` (a line start) begin; `start` when there are none."""
    while start > 0:
        above = text.rfind("\n", 0, start - 1) + 1
        if not text[above:start].lstrip(" \t").startswith("#"):
            break
        start = above
    return start


class _Declarations(Mapping):
    """One kind of declaration of the signature files, by name: each is parsed (on its own, spans still in its
    file's offsets) and made into its signature the first time it is asked for. A `gsr check` asks for a few of
    the stdlib's ~40 (its program's operators and rules, the judge kinds): parsing them all took ~9 ms of a
    ~140 ms check where no cached catalogue was at hand (a fresh machine), and reading the cache (a pickle,
    verified with an HMAC) ~4 ms where one was."""

    def __init__(self, found: dict[str, tuple[str, str, int]], enums: frozenset[str], make):
        self._found, self._enums, self._make = found, enums, make
        self._made: dict = {}

    def __getitem__(self, name: str):
        sig = self._made.get(name)
        if sig is None:
            path, text, base = self._found[name]  # KeyError: no such declaration
            sig = self._made[name] = self._make(_declaration(path, text, base), path, self._enums)
        return sig

    def __contains__(self, name) -> bool:
        return name in self._found

    def __iter__(self):
        return iter(self._found)

    def __len__(self) -> int:
        return len(self._found)

    def __repr__(self) -> str:
        return repr(dict(self))

    def __reduce__(self):  # pickled as the plain mapping it stands for
        return dict, (dict(self),)


def _declaration(path: str, text: str, base: int):
    from gsrlang.lang.syntax.parser import parse_declaration

    result = parse_declaration(text, base)
    if result.diagnostics:
        d = result.diagnostics[0]
        raise CatalogError(f"{path}: {d.code} {d.message}")
    return next(item for item in result.module.items
                if isinstance(item, (ast.OpDecl, ast.RuleDecl, ast.JudgeDecl, ast.EnumDecl)))


def _operator(item: ast.OpDecl, path: str, enums) -> OperatorSig:
    tv = tuple(t.name for t in item.type_params)
    return OperatorSig(item.kind, item.name.name, tv, tuple(PortSig(p.name.name, pattern_of(p.type, tv, enums))
                                                            for p in item.ports),
                       _params(item.params, tv, enums), pattern_of(item.result, tv, enums), item.doc, path, item.span)


def _rule(item: ast.RuleDecl, path: str, enums) -> RuleSig:
    return RuleSig(item.name.name, _params(item.params, (), enums), item.doc, path, item.span,
                   pattern_of(item.result, (), enums))


def _judge(item: ast.JudgeDecl, path: str, enums) -> JudgeSig:
    return JudgeSig(item.name.name, _params(item.params, (), enums), item.doc, path, item.span)


def _enum(item: ast.EnumDecl, path: str, enums) -> EnumSig:
    return EnumSig(item.name.name, tuple(m.name for m in item.members), item.doc)
