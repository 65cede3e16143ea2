"""Imports: `import "safety.gsr"` merges a fragment's criteria and nodes into the program.

A path is resolved against the importing file's folder and must stay inside the
top-level file's folder tree; `std/...` names the stdlib folder (`std/fragments/safety.gsr`).
Only fragments (files that start with `fragment NAME`) can be imported.

Only `.gsr` files are read (the resolved target's name, so a `x.gsr` symlink to `.env`
is refused too), and only up to MAX_IMPORT_BYTES, checked with stat before reading: an
`import ".env"` must not put a line of the user's secrets into a diagnostic (check,
SARIF, GitHub, the language server, a compile repair prompt sent to a model), and an
import of a multi-gigabyte file must not read it.
"""

from __future__ import annotations

import os
from pathlib import Path

from gsrlang.lang.check.context import Context
from gsrlang.lang.resources import stdlib_dir
from gsrlang.lang.syntax import ast

MAX_IMPORT_DEPTH = 16
MAX_IMPORT_BYTES = 4 * 1024 * 1024  # 4 MiB: the largest stdlib fragment is a few KiB


def resolve_imports(ctx: Context, module: ast.Module, path: str | None) -> list[tuple[ast.Module, str | None]]:
    """The imported modules (in import order, each once), main module excluded. Reports GSR01x."""
    root = Path(path).resolve().parent if path else None
    out: list[tuple[ast.Module, str | None]] = []
    _visit(ctx, module, None, Path(path).resolve() if path else None, root, set(), out, [])
    return out


def _visit(ctx, module, shown_path, real_path, root, seen, out, stack):
    for item in module.items:
        if not isinstance(item, ast.ImportDecl):
            continue
        if len(stack) >= MAX_IMPORT_DEPTH:
            target, problem = None, ("GSR011", f"imports nested more than {MAX_IMPORT_DEPTH} deep",
                                     "one import too many",
                                     "let the rubric import the fragments directly instead of through a chain")
        else:
            target, problem = _resolve(item.path.value, real_path, root)
        if not problem and (target in stack or target == real_path):
            chain = " -> ".join(p.name for p in [*stack, target])
            problem = ("GSR012", f"import cycle: {chain}", "imported again here", None)
        if problem:
            ctx.import_failed = True
            ctx.error(problem[0], problem[1], item.path.span, problem[2], path=shown_path, help=problem[3])
            continue
        if target in seen:
            continue
        seen.add(target)
        imported = _load(ctx, item, target, shown_path)
        if imported is None:
            ctx.import_failed = True
            continue
        if not any(isinstance(i, ast.Header) and i.kind == "fragment" for i in imported.items):
            ctx.import_failed = True
            ctx.error("GSR011", f"`{item.path.value}` is not a fragment", item.path.span,
                      "only fragments can be imported", path=shown_path,
                      help="start the imported file with `fragment NAME` (and give it no sink or task)")
            continue
        _visit(ctx, imported, str(target), target, root, seen, out, [*stack, target])
        out.append((imported, str(target)))


def _resolve(text: str, importer: Path | None, root: Path | None):
    """(the file an import names, None) or (None, (code, message, label, help))."""
    if "\x00" in text:
        return None, ("GSR011", "import path contains a NUL byte", "no file name holds a NUL byte", None)
    try:
        return _locate(text, importer, root)
    except (OSError, RuntimeError) as exc:  # a name too long for the file system, a symlink loop
        return None, ("GSR010", f"cannot import `{text}`: {getattr(exc, 'strerror', None) or exc}", "cannot be read",
                      None)


def _locate(text: str, importer: Path | None, root: Path | None):
    if text.startswith("std/"):
        base = stdlib_dir().resolve()
        target = (base / text[4:]).resolve()
        if not target.is_relative_to(base):
            return None, ("GSR011", f"import `{text}` leaves the stdlib folder", "outside stdlib/", None)
    else:
        if importer is None:
            return None, ("GSR010", f"cannot import `{text}` from a document without a file path",
                          "relative import", "save the file first, or import from `std/`")
        target = (importer.parent / text).resolve()
        if not target.is_relative_to(root):
            return None, ("GSR011", f"import `{text}` leaves the rubric's folder", "outside the folder tree",
                          f"imports are confined to {root} and the stdlib (`std/...`)")
    if target.suffix != ".gsr":
        return None, ("GSR011", f"import `{text}`: only .gsr files can be imported", "not a .gsr file",
                      "imports read .gsr fragments only; the file was not opened")
    if not target.is_file():
        return None, ("GSR010", f"imported file `{text}` not found", "no such file",
                      f"looked for {target}")
    return target, None


def _load(ctx: Context, item: ast.ImportDecl, target: Path, shown_path):
    from gsrlang.lang.syntax.parser import decode_source, parse

    try:
        with target.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(MAX_IMPORT_BYTES + 1) if size <= MAX_IMPORT_BYTES else b""
        if size > MAX_IMPORT_BYTES or len(data) > MAX_IMPORT_BYTES:  # checked before reading (or it grew)
            ctx.error("GSR010", f"imported file `{item.path.value}` is {max(size, len(data)):,} bytes, over the "
                      f"{MAX_IMPORT_BYTES // (1024 * 1024)} MiB limit for imports", item.path.span,
                      "too large to import", path=shown_path)
            return None
    except OSError as exc:
        ctx.error("GSR010", f"cannot read imported file `{item.path.value}`: {exc.strerror}", item.path.span,
                  path=shown_path)
        return None
    text, problem = decode_source(data)
    if problem:
        ctx.diagnostics.append(_relocate(problem, str(target)))
        return None
    result = parse(text)
    ctx.diagnostics.extend(_relocate(d, str(target)) for d in result.diagnostics)
    return result.module if not result.diagnostics else None


def _relocate(d, path):
    import attrs

    return attrs.evolve(d, primary=attrs.evolve(d.primary, path=path))
