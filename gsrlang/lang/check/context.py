"""State shared by the checker's passes: the catalogue, the declarations, and the diagnostics found so far."""

from __future__ import annotations

import attrs

from gsrlang.lang import records
from gsrlang.lang.catalog import Catalog
from gsrlang.lang.diagnostics import Diagnostic, Label, error, warning
from gsrlang.lang.span import Span
from gsrlang.lang.syntax import ast
from gsrlang.lang.types import JType


@records.define
class Decl:
    """A criterion or node declaration, with the file it came from (None: the file being checked)."""

    item: ast.CriterionDecl | ast.NodeDecl
    path: str | None

    @property
    def name(self) -> str:
        return self.item.name.name


@records.define
class GNode:
    """A node while the graph is being built and checked (see `gsrlang.lang.program.Node` for the result)."""

    id: str
    kind: str  # criterion | transform | reduce | gate | const
    span: Span
    path: str | None
    named: bool
    op: str | None = None
    inputs: list = attrs.Factory(list)  # (port, slot, source id, span of the argument)
    params: dict = attrs.Factory(dict)  # name -> (expression, span of the argument), as written
    param_values: dict = attrs.Factory(dict)  # name -> checked Python value (set by the type pass)
    type: JType | None = None  # None until inferred, or when it could not be
    value: object = None
    criterion: object = None  # CriterionSpec
    call: ast.Call | None = None


@records.define
class Context:
    catalog: Catalog
    diagnostics: list[Diagnostic] = attrs.Factory(list)
    decls: dict[str, Decl] = attrs.Factory(dict)
    nodes: dict[str, GNode] = attrs.Factory(dict)
    sinks: list = attrs.Factory(list)  # (expr, path)
    tasks: dict = attrs.Factory(dict)  # mode -> TaskDecl
    header: ast.Header | None = None
    sink_id: str | None = None
    order: list[str] = attrs.Factory(list)
    criterion_types: dict[str, JType | None] = attrs.Factory(dict)
    criterion_specs: dict = attrs.Factory(dict)
    aliases: dict[str, str] = attrs.Factory(dict)
    alias_roots: dict[str, str] = attrs.Factory(dict)  # resolve_alias's memo, filled once aliases are all known
    source_text: str | None = None
    on_cycle: set[str] = attrs.Factory(set)
    mentioned: set[str] = attrs.Factory(set)  # names used where an error stopped the graph from using them
    import_failed: bool = False  # then unknown names may be the missing import's: not reported
    file_end: int = 0

    def text_of(self, span: Span, path: str | None = None, max_len: int | None = None) -> str | None:
        """The source text under a span of the checked file, for help and fixes (None for an imported file,
        or when longer than `max_len` or spread over several lines where a short snippet is wanted)."""
        if self.source_text is None or path is not None:
            return None
        text = self.source_text[span.start:span.end]
        if max_len is not None and (len(text) > max_len or "\n" in text):
            return None
        return text

    def error(self, code: str, message: str, span: Span, label: str = "", *, path=None, **kw):
        self.diagnostics.append(error(code, message, span, label, path=path, **kw))

    def warn(self, code: str, message: str, span: Span, label: str = "", *, path=None, **kw):
        self.diagnostics.append(warning(code, message, span, label, path=path, **kw))


def names_in(expr) -> set[str]:
    """Every name referred to inside an expression."""
    found, todo = set(), [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, ast.Ref):
            found.add(e.name.name)
        elif isinstance(e, ast.Call):
            todo.extend(a.value for a in e.args)
        elif isinstance(e, ast.ListExpr):
            todo.extend(e.items)
        elif isinstance(e, ast.MapExpr):
            todo.extend(x.value for x in e.entries)
    return found


def did_you_mean(name: str, candidates) -> str | None:
    """The candidate closest to a misspelt `name` (None when none is close)."""
    import difflib  # only on an unknown name: kept off `gsr check`'s start-up

    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def suggestion(name: str, candidates) -> str | None:
    """"did you mean `x`?" for the closest candidate, or None."""
    close = did_you_mean(name, candidates)
    return f"did you mean `{close}`?" if close else None


def declared_here(decl_span: Span, path: str | None, what: str = "declared here") -> Label:
    return Label(decl_span, what, path)
