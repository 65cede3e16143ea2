"""The typed syntax tree of .gsr files.

Frozen attrs classes with tuple children. Every node carries a `span`, which takes
no part in equality, so `parse(format(m)) == m` compares structure, not layout.
Nothing from Lark appears here: the parser module converts its trees into these.
"""

from __future__ import annotations

from typing import Union

import attrs

from gsrlang.lang import records
from gsrlang.lang.span import Span

_span = lambda: attrs.field(eq=False, kw_only=True, repr=False)  # noqa: E731


node = records.frozen


def key_text(key) -> str:
    """A level's or a mapping entry's key as text: a name, `true` / `false`, or a number or string."""
    if isinstance(key, Ident):
        return key.name
    if isinstance(key, BoolLit):
        return "true" if key.value else "false"
    return str(key.value)


# ---- leaves ------------------------------------------------------------------------------
@node
class Ident:
    name: str
    span: Span = _span()


@node
class String:
    value: str
    span: Span = _span()


@node
class Number:
    """A number; `tune` is the range `gsr tune` may move it within (`0.35 in 0.1..0.6`), or None."""

    value: Union[int, float]
    span: Span = _span()
    tune: "Range | None" = attrs.field(default=None, kw_only=True)

    @property
    def is_int(self) -> bool:
        return isinstance(self.value, int)


@node
class BoolLit:
    value: bool
    span: Span = _span()


@node
class Range:
    lo: Number
    hi: Number
    span: Span = _span()


# ---- expressions --------------------------------------------------------------------------
@node
class Ref:
    """A name used as a value: a node or criterion, or (in a parameter) an enum member."""

    name: Ident
    span: Span = _span()


@node
class Arg:
    name: Ident | None  # None for a positional argument
    value: "Expr"
    span: Span = _span()


@node
class Call:
    """One operator node of the graph (anonymous when nested)."""

    op: Ident
    args: tuple[Arg, ...]
    span: Span = _span()


@node
class ListExpr:
    items: tuple["Expr", ...]
    span: Span = _span()


@node
class Entry:
    key: Union[Ident, String, Number, BoolLit]
    value: "Expr"
    span: Span = _span()

    @property
    def key_text(self) -> str:
        return key_text(self.key)


@node
class MapExpr:
    entries: tuple[Entry, ...]
    span: Span = _span()


Expr = Union[Ref, Call, ListExpr, MapExpr, Number, String, BoolLit, Range]


# ---- types ----------------------------------------------------------------------------------
@node
class TypeAtom:
    """`Bool`, `Score[0..10]`, `Score[*]`, `Ordinal{poor, fair}`, `[Score]`, `{Label: Score}`, each maybe `?`.

    `form` says which: "name", "range", "any_range", "labels", "list" or "map".
    """

    form: str
    name: Ident | None = None
    range: Range | None = None
    labels: tuple[Ident, ...] = ()
    element: "TypeExpr | None" = None
    optional: bool = False
    span: Span = _span()


@node
class TypeExpr:
    options: tuple[TypeAtom, ...]  # more than one only in stdlib signatures (a union)
    span: Span = _span()


# ---- criteria ----------------------------------------------------------------------------------
@node
class Procedure:
    """`llm`, `llm(role: "strong")`, `rule.word_count(above: 600)`, `human(field: "x")`, `verifier("name")`."""

    name: tuple[Ident, ...]
    args: tuple[Arg, ...] | None  # None when written without parentheses
    span: Span = _span()

    @property
    def dotted(self) -> str:
        return ".".join(part.name for part in self.name)


@node
class Ask:
    text: String
    span: Span = _span()


@node
class Level:
    key: Union[Number, Ident, BoolLit]
    text: String
    value: Number | None = None
    span: Span = _span()

    @property
    def key_text(self) -> str:
        return key_text(self.key)


@node
class Example:
    text: String
    verdict: Expr
    reason: String | None = None
    span: Span = _span()


@node
class JudgeClause:
    procedure: Procedure
    span: Span = _span()


@node
class Judges:
    """An ensemble: `judges 3 aggregate majority` or `judges [llm(role: "a"), llm(role: "b")] aggregate mean`."""

    count: Number | None
    procedures: tuple[Procedure, ...]
    aggregate: Procedure
    span: Span = _span()


CriterionItem = Union[Ask, Level, Example, JudgeClause, Judges]


@node
class CriterionDecl:
    name: Ident
    type: TypeExpr
    procedure: Procedure | None  # the `= PROCEDURE` shorthand
    body: tuple[CriterionItem, ...] | None  # None when there is no `{ ... }`
    span: Span = _span()


# ---- program structure ---------------------------------------------------------------------------
@node
class Header:
    kind: str  # "rubric" or "fragment"
    name: Ident
    description: String | None = None
    span: Span = _span()


@node
class ImportDecl:
    path: String
    span: Span = _span()


@node
class Setting:
    key: Ident
    value: Expr
    span: Span = _span()


@node
class TaskDecl:
    mode: Ident  # pointwise or pairwise
    settings: tuple[Setting, ...]
    span: Span = _span()


@node
class NodeDecl:
    name: Ident
    value: Expr
    span: Span = _span()


@node
class SinkDecl:
    value: Expr
    span: Span = _span()


# ---- stdlib signatures ------------------------------------------------------------------------------
@node
class PortDecl:
    name: Ident
    type: TypeExpr
    span: Span = _span()


@node
class ParamDecl:
    name: Ident
    type: TypeExpr
    per: Ident | None = None  # a list parameter with one entry per slot of this port
    default: Expr | None = None
    span: Span = _span()


@node
class OpDecl:
    kind: str  # transform, reduce or gate
    name: Ident
    type_params: tuple[Ident, ...]
    ports: tuple[PortDecl, ...]
    params: tuple[ParamDecl, ...]
    result: TypeExpr
    doc: str = attrs.field(default="", eq=False)
    span: Span = _span()


@node
class RuleDecl:
    name: Ident
    params: tuple[ParamDecl, ...]
    result: TypeExpr
    doc: str = attrs.field(default="", eq=False)
    span: Span = _span()


@node
class JudgeDecl:
    """`judge NAME(PARAMETERS)`: a judge kind's signature (stdlib/judges.gsr)."""

    name: Ident
    params: tuple[ParamDecl, ...]
    doc: str = attrs.field(default="", eq=False)
    span: Span = _span()


@node
class EnumDecl:
    name: Ident
    members: tuple[Ident, ...]
    doc: str = attrs.field(default="", eq=False)
    span: Span = _span()


Item = Union[Header, ImportDecl, TaskDecl, CriterionDecl, NodeDecl, SinkDecl, OpDecl, RuleDecl, JudgeDecl, EnumDecl]


@node
class Comment:
    text: str  # including the leading '#'
    span: Span = _span()


@node
class Module:
    items: tuple[Item, ...]
    comments: tuple[Comment, ...] = attrs.field(default=(), eq=False)
    span: Span = _span()
