"""The checker's diagnostics as LSP diagnostics, and their fixes as quick-fix code actions.

- The message is the checker's one-line message, then its notes and `help:` on their
  own lines (as rustc's JSON output is shown by rust-analyzer), so every client shows them.
- Secondary labels ("first declared here") become related information, with their own
  file when they are in an imported fragment.
- A diagnostic whose primary span is in an imported file is shown on the `import` that
  brings that file in (the document being edited is the only one published), with the
  real location as related information.
- `code` is the stable GSR code; the `data` field carries nothing the server needs back:
  code actions are recomputed from the current analysis.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from gsrlang.lang.diagnostics import Diagnostic
from gsrlang.lang.span import Span
from gsrlang.lsp.model import DocumentModel, Files
from gsrlang.lsp.navigation import file_location
from gsrlang.lsp.positions import PositionMap

SOURCE = "gsr"
UNNECESSARY = {"GSR701", "GSR402"}  # unused parameter, a node that never reaches the sink: drawn faded


def to_lsp(model: DocumentModel, positions: PositionMap, files: Files) -> list[types.Diagnostic]:
    out = [_one(model, d, positions, files) for d in model.diagnostics]
    if model.internal_error is not None:
        last = model.internal_error.strip().splitlines()[-1]
        out.append(types.Diagnostic(
            range=positions.range(Span(0, 0)), severity=types.DiagnosticSeverity.Information, source=SOURCE,
            message=f"gsr could not check this file: an internal error ({last}); this is a bug in gsr, "
                    "the server log has the traceback"))
    return out


def _is_here(model: DocumentModel, path: str | None) -> bool:
    return path is None or (model.path is not None and Path(path).resolve() == Path(model.path).resolve())


def _one(model: DocumentModel, d: Diagnostic, positions: PositionMap, files: Files) -> types.Diagnostic:
    related = []
    message = d.message
    if _is_here(model, d.primary.path):
        rng = positions.range(d.primary.span)
    else:
        rng = positions.range(_import_span_for(model, d.primary.path))
        where = _location(model, d.primary.path, d.primary.span, positions, files)
        message = f"in imported `{Path(d.primary.path).name}`: {message}"
        if where is not None:
            related.append(types.DiagnosticRelatedInformation(location=where,
                                                              message=d.primary.message or d.message))
    for label in d.secondary:
        if (where := _location(model, label.path, label.span, positions, files)) is not None:
            related.append(types.DiagnosticRelatedInformation(location=where, message=label.message or "here"))
    if extra := [f"note: {n}" for n in d.notes] + ([f"help: {d.help}"] if d.help else []):
        message += "\n" + "\n".join(extra)
    tags = [types.DiagnosticTag.Unnecessary] if d.code in UNNECESSARY else None
    return types.Diagnostic(
        range=rng, message=message, severity=(types.DiagnosticSeverity.Error if d.is_error
                                              else types.DiagnosticSeverity.Warning),
        code=d.code, source=SOURCE, related_information=related or None, tags=tags)


def _location(model: DocumentModel, path: str | None, span: Span, positions: PositionMap,
              files: Files) -> types.Location | None:
    if _is_here(model, path):
        return types.Location(uri=model.uri, range=positions.range(span))
    return file_location(path, span, files, positions.encoding)


def _import_span_for(model: DocumentModel, path: str | None) -> Span:
    """The `import` of this document that brings in `path` (directly, or else the first import)."""
    imports = model.imports()
    if path is not None:
        for decl, resolved in imports:
            if resolved is not None and resolved == Path(path).resolve():
                return decl.path.span
    return imports[0][0].path.span if imports else Span(0, 0)


# ---- quick fixes -----------------------------------------------------------------------------------------
def code_actions(model: DocumentModel, span: Span, positions: PositionMap, files: Files,
                 context: list[types.Diagnostic] = ()) -> list[types.CodeAction]:
    """One quick fix per fix of each diagnostic (in this file) that overlaps `span`."""
    actions = []
    for d in model.diagnostics:
        overlaps = d.span.start <= span.end and span.start <= d.span.end
        if not (d.fixes and overlaps and _is_here(model, d.primary.path)):
            continue
        lsp_diag = _one(model, d, positions, files)
        # prefer the client's own copy, so it can tie the action to what it shows
        lsp_diag = next((g for g in context if g.code == d.code and g.range == lsp_diag.range), lsp_diag)
        for fix in d.fixes:
            edit = types.TextEdit(range=positions.range(fix.span), new_text=fix.replacement)
            actions.append(types.CodeAction(
                title=fix.title[:1].upper() + fix.title[1:], kind=types.CodeActionKind.QuickFix,
                diagnostics=[lsp_diag], is_preferred=fix.safe,
                edit=types.WorkspaceEdit(changes={model.uri: [edit]})))
    return actions
