"""One open document as the server sees it: its text, the checker's analysis, and what is where.

`DocumentModel.build` runs `analyze` (the diagnostics every other tool sees). The
answers to hover, definition and completion need more than diagnostics: the types
the checker inferred and the declarations of imported fragments. `semantic` re-runs
the checker's passes over the (possibly partial) syntax tree and keeps their context;
it is computed on first use, once per document version.

Nothing here raises on a user's mistake or a half-typed document: a checker crash is
recorded as `internal_error` and the features fall back on the syntax tree and text.
"""

from __future__ import annotations

import re
import traceback
from functools import cached_property
from pathlib import Path
from typing import Iterator

import attrs

from gsrlang.lang import records
from gsrlang.lang.catalog import Catalog, OperatorSig, ParamSig, PortSig, RuleSig, default_catalog
from gsrlang.lang.check.context import Context
from gsrlang.lang.check.driver import Analysis, analyze, check_module
from gsrlang.lang.check.ports import resolve_alias
from gsrlang.lang.resources import stdlib_dir
from gsrlang.lang.span import Span
from gsrlang.lang.syntax import ast
from gsrlang.lang.syntax.parser import parse
from gsrlang.lang.types import JType

_DECL_TEXT = re.compile(r"^[ \t]*(criterion|node)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)


@records.frozen
class DeclInfo:
    """A criterion or node declaration, where it is (path None: this document) and what the checker knows."""

    name: str
    kind: str  # "criterion" | "node"
    name_span: Span
    item: ast.CriterionDecl | ast.NodeDecl | None  # None when found only in the text (a broken declaration)
    path: str | None


@records.frozen
class Target:
    """What the cursor is on.

    kind: "name" (a reference to a criterion or node), "declaration" (its own name in a
    declaration), "operator", "argument" (a port or parameter name in a call or a
    procedure), "rule", "procedure" (llm, human, verifier), "import", "setting" (a task
    setting's key), "task" (pointwise / pairwise), "type" (a type name), "member" (an
    enum member given to a parameter).
    """

    kind: str
    name: str
    span: Span
    node: object = None  # the AST node the target belongs to (Call, Procedure, ImportDecl, ...)
    chain: tuple = ()  # the AST nodes containing the cursor, outermost first


class Semantic:
    """The checker's context after its passes: declarations (imports included) and inferred types."""

    def __init__(self, model: "DocumentModel"):
        self.ctx = None
        self.error = None
        module = model.module
        if module is None:
            return
        ctx = Context(model.catalog, source_text=model.text, file_end=len(model.text.rstrip()))
        try:
            check_module(ctx, module, model.path)
        except Exception:  # the passes are written for whole modules; a partial one may trip them
            self.error = traceback.format_exc()
        self.ctx = ctx

    def type_of(self, name: str) -> JType | None:
        ctx = self.ctx
        if ctx is None:
            return None
        try:
            node_id = resolve_alias(ctx, name)
        except Exception:
            node_id = name
        node = ctx.nodes.get(node_id)
        return node.type if node is not None and node.type is not None else ctx.criterion_types.get(node_id)

    def op_of(self, name: str) -> str | None:
        if self.ctx is None:
            return None
        node = self.ctx.nodes.get(resolve_alias(self.ctx, name))
        return node.op if node is not None else None


class DocumentModel:
    def __init__(self, uri: str, text: str, version: int | None = None, path: str | None = None,
                 catalog: Catalog | None = None):
        self.uri, self.text, self.version, self.path = uri, text, version, path
        self.catalog = catalog or default_catalog()
        self.internal_error: str | None = None
        try:
            self.analysis = analyze(text, path, self.catalog)
        except Exception:  # a bug in the checker: keep serving, say so once, fall back on the parser
            self.internal_error = traceback.format_exc()
            self.analysis = Analysis(None, (), self._parse_only(text), text)

    @staticmethod
    def _parse_only(text: str) -> ast.Module | None:
        try:
            return parse(text).module
        except Exception:
            return None

    @property
    def module(self) -> ast.Module | None:
        return self.analysis.module

    @property
    def diagnostics(self):
        return self.analysis.diagnostics

    @cached_property
    def semantic(self) -> Semantic:
        return Semantic(self)

    # ---- declarations ----------------------------------------------------------------------------
    @cached_property
    def declarations(self) -> dict[str, DeclInfo]:
        """Every criterion and node name: this document's, imported fragments', and (for a
        declaration the parser could not read) names found in the text."""
        out: dict[str, DeclInfo] = {}
        for item in self.module.items if self.module else ():
            if isinstance(item, (ast.CriterionDecl, ast.NodeDecl)):
                out.setdefault(item.name.name, _decl(item, None))
        ctx = self.semantic.ctx
        if ctx is not None:
            for name, d in ctx.decls.items():
                out.setdefault(name, _decl(d.item, d.path))
        for m in _DECL_TEXT.finditer(self.text):
            if m.group(2) not in out:
                out[m.group(2)] = DeclInfo(m.group(2), m.group(1), Span(m.start(2), m.end(2)), None, None)
        return out

    def imports(self) -> list[tuple[ast.ImportDecl, Path | None]]:
        """This document's imports with the files they name (None when the file does not exist)."""
        items = self.module.items if self.module else ()
        return [(i, resolve_import(i.path.value, self.path)) for i in items if isinstance(i, ast.ImportDecl)]

    # ---- what is at an offset -----------------------------------------------------------------------
    def chain_at(self, offset: int) -> tuple:
        """The AST nodes that contain `offset`, outermost first."""
        if self.module is None:
            return ()
        chain: list = []
        nodes = list(self.module.items)
        while True:
            hit = None
            for n in nodes:
                span = getattr(n, "span", None)
                if span is not None and span.start <= offset <= span.end and span.end > span.start:
                    hit = n
                    if span.start < offset < span.end:
                        break  # strictly inside: no sibling can be a better match
            if hit is None:
                return tuple(chain)
            chain.append(hit)
            nodes = list(_children(hit))

    def target_at(self, offset: int) -> Target | None:
        chain = self.chain_at(offset)
        if not chain:
            return None
        inner = chain[-1]
        parent = chain[-2] if len(chain) > 1 else None
        grand = chain[-3] if len(chain) > 2 else None
        if isinstance(inner, ast.String) and isinstance(parent, ast.ImportDecl):
            return Target("import", inner.value, inner.span, parent, chain)
        if not isinstance(inner, ast.Ident):
            return None
        name = inner.name
        if isinstance(parent, ast.Ref):
            # a name given to a parameter is an enum member (`on_abstain: skip`), not a judgment
            arg = grand if isinstance(grand, ast.Arg) else None
            call = _enclosing(chain, (ast.Call, ast.Procedure, ast.Setting))
            if isinstance(call, ast.Setting):
                return Target("member", name, inner.span, call, chain)
            if arg is not None and arg.name is not None and isinstance(call, ast.Call):
                sig = self.catalog.operator(call.op.name)
                if sig is not None and sig.param(arg.name.name) is not None:
                    return Target("member", name, inner.span, (call, arg), chain)
            return Target("name", name, inner.span, parent, chain)
        if isinstance(parent, ast.Call) and parent.op is inner:
            return Target("operator", name, inner.span, parent, chain)
        if isinstance(parent, ast.Arg) and parent.name is inner:
            owner = grand if isinstance(grand, (ast.Call, ast.Procedure)) else None
            return Target("argument", name, inner.span, owner, chain)
        if isinstance(parent, (ast.CriterionDecl, ast.NodeDecl)) and parent.name is inner:
            return Target("declaration", name, inner.span, parent, chain)
        if isinstance(parent, ast.Procedure):
            dotted = parent.dotted
            if dotted.startswith("rule.") and len(parent.name) == 2 and parent.name[1] is inner:
                return Target("rule", name, inner.span, parent, chain)
            return Target("procedure", dotted, inner.span, parent, chain)
        if isinstance(parent, ast.Setting) and parent.key is inner:
            return Target("setting", name, inner.span, parent, chain)
        if isinstance(parent, ast.TaskDecl) and parent.mode is inner:
            return Target("task", name, inner.span, parent, chain)
        if isinstance(parent, ast.TypeAtom) and parent.name is inner:
            return Target("type", name, inner.span, parent, chain)
        return None

    # ---- catalogue lookups -----------------------------------------------------------------------------
    def signature_for(self, owner) -> OperatorSig | RuleSig | None:
        if isinstance(owner, ast.Call):
            return self.catalog.operator(owner.op.name)
        if isinstance(owner, ast.Procedure) and owner.dotted.startswith("rule.") and len(owner.name) == 2:
            return self.catalog.rules.get(owner.name[1].name)
        return None

    def argument_sig(self, owner, name: str) -> PortSig | ParamSig | None:
        sig = self.signature_for(owner)
        if isinstance(sig, OperatorSig):
            return sig.port(name) or sig.param(name)
        if isinstance(sig, RuleSig):
            return sig.param(name)
        if isinstance(owner, ast.Procedure):
            kind = self.catalog.judges.get(owner.dotted)
            return kind.param(name) if kind is not None else None
        return None


def _decl(item, path) -> DeclInfo:
    kind = "criterion" if isinstance(item, ast.CriterionDecl) else "node"
    return DeclInfo(item.name.name, kind, item.name.span, item, path)


def _enclosing(chain, kinds):
    return next((n for n in reversed(chain) if isinstance(n, kinds)), None)


def _children(node) -> Iterator:
    """The AST nodes in a node's fields (a tuple field's items one by one; no field holds tuples of tuples)."""
    for f in attrs.fields(type(node)) if attrs.has(type(node)) else ():
        if f.name not in ("span", "doc", "comments"):
            value = getattr(node, f.name)
            yield from (x for x in (value if isinstance(value, tuple) else (value,)) if attrs.has(type(x)))


def resolve_import(text: str, importer: str | None) -> Path | None:
    """The file an `import "..."` names, as the checker resolves it; None when it does not exist."""
    try:
        if text.startswith("std/"):
            target = (stdlib_dir() / text[4:]).resolve()
        elif importer is not None:
            target = (Path(importer).parent / text).resolve()
        else:
            return None
        return target if target.is_file() else None
    except (OSError, ValueError):
        return None


class Files:
    """The text of other files (imported fragments, the stdlib): an open editor buffer when there is one
    (`open_text(path)`), else the file on disk."""

    def __init__(self, open_text=None):
        self._open_text = open_text or (lambda path: None)
        self._disk: dict[str, tuple[float, str]] = {}

    def text(self, path: str | Path) -> str | None:
        path = str(path)
        if (text := self._open_text(path)) is not None:
            return text
        if not path.endswith(".gsr"):  # only .gsr files are quoted (never a `.env` an import names)
            return None
        try:
            mtime = Path(path).stat().st_mtime
            cached = self._disk.get(path)
            if cached is None or cached[0] != mtime:
                cached = self._disk[path] = (mtime, Path(path).read_text(encoding="utf-8"))
            return cached[1]
        except (OSError, UnicodeDecodeError):
            return None
