"""Go to definition and the document outline."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from gsrlang.lang.span import Span
from gsrlang.lang.syntax import ast
from gsrlang.lsp.model import DocumentModel, Files
from gsrlang.lsp.positions import PositionMap


def _uri(path: str | Path) -> str:
    return Path(path).resolve().as_uri()


def definition(model: DocumentModel, offset: int, positions: PositionMap, files: Files) -> list[types.Location]:
    """Where the name, import, operator or rule under the cursor is declared.

    Criteria and nodes jump to their declaration (in an imported fragment when they come
    from one); an import jumps to the file; operators, their ports and parameters, and
    rules jump to their signature in the stdlib.
    """
    target = model.target_at(offset)
    if target is None:
        return []
    if target.kind in ("name", "declaration"):
        decl = model.declarations.get(target.name)
        if decl is not None and decl.path is None:
            return [types.Location(uri=model.uri, range=positions.range(decl.name_span))]
        return _location(decl.path, decl.name_span, files, positions.encoding) if decl is not None else []
    if target.kind == "import":
        resolved = dict((d.path.value, p) for d, p in model.imports()).get(target.name)
        if resolved is None:
            return []
        return [types.Location(uri=_uri(resolved), range=positions.range(Span(0, 0)))]  # the file's start
    if target.kind in ("operator", "rule", "argument"):
        catalog = model.catalog
        sig = catalog.operator(target.name) if target.kind == "operator" else catalog.rules.get(target.name) \
            if target.kind == "rule" else model.signature_for(target.node)
        return _location(sig.path, sig.span, files, positions.encoding) if sig else []
    return []


def _location(path: str, span: Span, files: Files, encoding: str) -> list[types.Location]:
    location = file_location(path, span, files, encoding)
    return [location] if location is not None else []


def file_location(path: str | Path, span: Span, files: Files, encoding: str) -> types.Location | None:
    """Where `span` of another file is, for the client (None when that file cannot be read)."""
    text = files.text(path)
    return None if text is None else types.Location(uri=_uri(path), range=PositionMap(text, encoding).range(span))


# ---- outline ---------------------------------------------------------------------------------------------
def document_symbols(model: DocumentModel, positions: PositionMap) -> list[types.DocumentSymbol]:
    """Header, imports, tasks, criteria, nodes and the sink, in file order; a node's nested calls are its children."""
    symbols = (_symbol(model, item, positions) for item in (model.module.items if model.module else ()))
    return [sym for sym in symbols if sym is not None]


def _symbol(model: DocumentModel, item, positions: PositionMap) -> types.DocumentSymbol | None:
    rng = positions.range(item.span)
    text = model.text

    def make(name, kind, sel: Span, detail=None, children=None):
        return types.DocumentSymbol(name=name or "?", kind=kind, range=rng, selection_range=positions.range(sel),
                                    detail=detail, children=children or None)

    if isinstance(item, ast.Header):
        detail = item.description.value if item.description else None
        return make(item.name.name, types.SymbolKind.Module, item.name.span, f"{item.kind}" +
                    (f": {detail}" if detail else ""))
    if isinstance(item, ast.ImportDecl):
        return make(f'import "{item.path.value}"', types.SymbolKind.File, item.path.span)
    if isinstance(item, ast.TaskDecl):
        detail = ", ".join(f"{s.key.name} = {text[s.value.span.start:s.value.span.end]}" for s in item.settings)
        return make(f"task {item.mode.name}", types.SymbolKind.Struct, item.mode.span, detail)
    if isinstance(item, ast.CriterionDecl):
        detail = text[item.type.span.start:item.type.span.end]
        if item.procedure is not None:
            detail += " = " + text[item.procedure.span.start:item.procedure.span.end]
        return make(item.name.name, types.SymbolKind.Field, item.name.span, detail)
    if isinstance(item, ast.NodeDecl):
        jtype = model.semantic.type_of(item.name.name)
        op = item.value.op.name if isinstance(item.value, ast.Call) else None
        detail = " ".join(x for x in (op, f"-> {jtype}" if jtype else None) if x) or None
        return make(item.name.name, types.SymbolKind.Function, item.name.span, detail,
                    _nested_calls(item.value, positions))
    if isinstance(item, ast.SinkDecl):
        return make("sink", types.SymbolKind.Event, item.value.span, text[item.value.span.start:item.value.span.end])
    return None


def _nested_calls(expr, positions: PositionMap) -> list[types.DocumentSymbol]:
    """The anonymous operator nodes (nested calls) inside a node's expression."""
    if not isinstance(expr, ast.Call):
        return []
    return [types.DocumentSymbol(
        name=v.op.name + "(...)", kind=types.SymbolKind.Operator, range=positions.range(v.span),
        selection_range=positions.range(v.op.span), detail=f"{arg.name.name}" if arg.name else None,
        children=_nested_calls(v, positions) or None)
        for arg in expr.args for v in (arg.value.items if isinstance(arg.value, ast.ListExpr) else (arg.value,))
        if isinstance(v, ast.Call)]
