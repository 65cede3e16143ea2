"""Hover: what a name, operator, port, parameter, rule or keyword under the cursor is, in Markdown."""

from __future__ import annotations

import contextlib
from pathlib import Path

from lsprotocol import types

from gsrlang.lang import tasks
from gsrlang.lang.catalog import EnumSig, ParamSig, PortSig, param_text
from gsrlang.lang.check.judgekinds import judge_kinds
from gsrlang.lang.resources import stdlib_dir
from gsrlang.lang.span import SourceText, source_lines
from gsrlang.lang.syntax import ast
from gsrlang.lang.types import substitute
from gsrlang.lsp import knowledge
from gsrlang.lsp.model import DeclInfo, DocumentModel, Files
from gsrlang.lsp.positions import PositionMap

MAX_DEFINITION_LINES = 12


def hover(model: DocumentModel, offset: int, positions: PositionMap, files: Files) -> types.Hover | None:
    target = model.target_at(offset)
    if target is None:
        return None
    text = None
    if target.kind in ("name", "declaration"):
        decl = model.declarations.get(target.name)
        text = describe_declaration(model, decl, files) if decl else None
    elif target.kind in ("operator", "rule"):
        catalog = model.catalog
        sig = catalog.operator(target.name) if target.kind == "operator" else catalog.rules.get(target.name)
        text = describe_signature(sig) if sig else None
    elif target.kind == "argument":
        sig = model.argument_sig(target.node, target.name)
        text = describe_argument(model, target.node, sig) if sig is not None else None
    elif target.kind == "procedure":
        text = _procedure_text(model, target.name)
    elif target.kind == "member":
        text = _member_text(model, target)
    elif target.kind == "setting":
        setting = tasks.SETTINGS.get(target.name)
        text = _code(setting.form) + f"\n{setting.mode} readout setting: {setting.about}" if setting else None
    elif target.kind == "task" and target.name in tasks.MODES:
        text = _code(f"task {target.name} {{ ... }}") + "\n" + tasks.MODES[target.name]
    elif target.kind == "type" and target.name in knowledge.TYPES:
        form, about = knowledge.TYPES[target.name]
        text = _code(form) + "\n" + about
    elif target.kind == "import":
        resolved = dict((d.path.value, p) for d, p in model.imports()).get(target.name)
        text = f"imports `{resolved}`" if resolved else f"`{target.name}` is not found"
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
                       range=positions.range(target.span)) if text else None


# ---- texts (also used by completion) ---------------------------------------------------------------------
def _code(text: str) -> str:
    return f"```gsr\n{text}\n```\n"


def describe_signature(sig) -> str:
    """A signature, its documentation and its example (the stdlib's `e.g.` line), for hover and completion."""
    text = _code(sig.signature()) + (f"\n{sig.description}" if sig.description else "")
    return text + (f"\n\nExample: `{sig.example}`" if sig.example else "")


def describe_argument(model: DocumentModel, owner, sig: PortSig | ParamSig) -> str:
    owner_name = owner.op.name if isinstance(owner, ast.Call) else owner.dotted if owner is not None else "?"
    if isinstance(sig, PortSig):
        what = "a list port (its slots are in order)" if sig.is_list else "a port"
        text = _code(f"(port) {sig.name}: {sig.pattern}") + f"\n{what} of `{owner_name}`: a graph input"
    else:
        text = _code(f"(parameter) {param_text(sig)}") + f"\nparameter of `{owner_name}`: a literal fixed when " \
                                                          "the program is written"
        if sig.per:
            text += f"; one entry per slot of `{sig.per}`"
        if (enum := _enum_of(model, sig)) is not None:
            text += f"\n\none of: {', '.join(f'`{m}`' for m in enum.members)}" + (f"\n\n{enum.doc}" if enum.doc else "")
    return text


def _enum_of(model: DocumentModel, sig: ParamSig) -> EnumSig | None:
    return model.catalog.enums.get(sig.pattern.name) if sig.pattern.kind == "enum" else None


def describe_judge_kind(kind) -> str:
    """A judge kind's signature, documentation and example (stdlib/judges.gsr), for hover and completion."""
    return describe_signature(kind.sig)


def _procedure_text(model: DocumentModel, name: str) -> str | None:
    if (kind := judge_kinds(model.catalog).get(name)) is not None:
        return describe_judge_kind(kind)
    about = knowledge.AGGREGATES.get(name)
    return _code(f"aggregate {name}") + "\nensemble aggregation. " + about if about is not None else None


def _member_text(model: DocumentModel, target) -> str | None:
    node = target.node
    if isinstance(node, ast.Setting):
        setting = tasks.SETTINGS.get(node.key.name)
        values = dict(setting.values) if setting else {}
        return _code(f"{node.key.name} = {target.name}") + "\n" + values[target.name] if target.name in values else None
    call, arg = node
    sig = model.catalog.operator(call.op.name)
    param = sig.param(arg.name.name) if sig else None
    enum = _enum_of(model, param) if param else None
    if enum is None or target.name not in enum.members:
        return None
    return _code(f"{enum.name}.{target.name}") + (f"\n{enum.doc}" if enum.doc else "")


def describe_declaration(model: DocumentModel, decl: DeclInfo, files: Files) -> str:
    jtype = model.semantic.type_of(decl.name)
    item = decl.item
    source = model.text if decl.path is None else files.text(decl.path)
    where = _where(model, decl, source)
    if decl.kind == "criterion":
        type_text = str(jtype) if jtype is not None else _slice(source, item.type.span if item else None) or "?"
        head = _code(f"criterion {decl.name}: {type_text}")
        spec = model.semantic.ctx.criterion_specs.get(decl.name) if model.semantic.ctx else None
        lines = [f"**criterion** \u00b7 {where}"]
        if spec is not None:
            lines[0] = f"**criterion** judged by `{spec.procedure.describe()}` \u00b7 {where}"
            if spec.ask:
                lines.append("> " + " ".join(spec.ask.split()))
            if spec.levels:
                lines.append("levels: " + "; ".join(f"`{lv.key}` {lv.text}" + (f" (= {lv.value:g})" if lv.value
                                                                                 is not None else "")
                                                     for lv in spec.levels))
        return head + "\n" + "\n\n".join(lines) + "\n" + _definition(source, item)
    op = model.semantic.op_of(decl.name)
    sig = model.catalog.operator(op) if op else None
    if jtype is None and sig:
        jtype = substitute(sig.result, {})  # what the operator gives, when fixed
    type_text = str(jtype) if jtype is not None else "type unknown until the errors are fixed"
    kind = f"**{sig.kind}** `{op}` \u00b7 " if sig else ""
    return _code(f"node {decl.name}: {type_text}") + f"\n{kind}{where}\n" + _definition(source, item)


def _where(model: DocumentModel, decl: DeclInfo, source: str | None) -> str:
    line = SourceText("", source).position(decl.name_span.start)[0] if source is not None else None
    if decl.path is None:
        return f"line {line}" if line else "this file"
    return f"from `{_shown_path(decl.path, model.path)}`" + (f", line {line}" if line else "")


def _shown_path(path: str, importer: str | None) -> str:
    p = Path(path)
    with contextlib.suppress(ValueError):  # not in the stdlib
        return "std/" + p.relative_to(stdlib_dir().resolve()).as_posix()
    if importer:
        with contextlib.suppress(ValueError):  # not beside the importer
            return p.relative_to(Path(importer).resolve().parent).as_posix()
    return p.name


def _slice(source: str | None, span) -> str | None:
    return None if source is None or span is None else source[span.start:span.end]


def _definition(source: str | None, item) -> str:
    text = _slice(source, item.span if item is not None else None)
    if not text:
        return ""
    lines = source_lines(text)
    if len(lines) > MAX_DEFINITION_LINES:
        lines = lines[:MAX_DEFINITION_LINES] + ["  ..."]
    return "\n" + _code("\n".join(lines))
