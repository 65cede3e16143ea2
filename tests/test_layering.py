"""The package's layering: imports run one way, from the surfaces down to the language (docs/architecture.md).

Read from the source (every `import`, including the ones inside functions), so a lazy import
that hides a back-arrow is caught too. A module's layer is the longest entry of LAYERS its name starts with;
lowest first:

    files (bytes in and out) -> lang (records, resources, span, types, tasks, diagnostics, syntax, catalog, program,
    check, jsonform) -> semantics (a leaf: nothing above lang, no I/O) -> trace -> analysis.resampling,
    analysis.metrics (a run reports them) -> judges -> execution -> analysis (tuning and ablation run the
    evaluator) -> compiler -> views -> api, reward -> serve, rewards, lsp -> commands -> cli -> demo
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "gsrlang"

LAYERS = ["files", "lang.records", "lang.resources", "lang.span", "lang.types", "lang.tasks", "lang.diagnostics",
          "lang.syntax", "lang.catalog", "lang.program", "lang.check", "lang.jsonform", "lang", "semantics", "trace",
          "analysis.resampling", "analysis.metrics", "judges", "execution", "analysis", "compiler", "views", "api",
          "reward", "serve", "rewards", "lsp", "commands", "cli", "demo"]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


@functools.cache
def _package_imports() -> dict[str, set[str]]:
    """The package's import graph, read once for the tests below (parsing every module costs ~1.5 s of CPU)."""
    return _imports(_modules())


def _layer(module: str) -> int | None:
    """The rank of the longest entry of LAYERS that `module` is or is under."""
    found, length = None, -1
    for rank, layer in enumerate(LAYERS):
        prefix = f"gsrlang.{layer}"
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
            found, length = rank, len(prefix)
    return found


def test_no_module_imports_a_layer_above_it():
    edges = _package_imports()
    upward = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                    if _layer(a) is not None and _layer(b) is not None and _layer(b) > _layer(a))
    assert upward == []


def test_no_import_cycles():
    edges = _package_imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_import_reader_sees_lazy_and_relative_imports(tmp_path):
    """What hid the old back-arrows: an import inside a function, a relative import."""
    (tmp_path / "a.py").write_text("def f():\n    from gsrlang.cli import main\n")
    (tmp_path / "b.py").write_text("from . import a\n")
    (tmp_path / "__init__.py").write_text("")
    modules = {"gsrlang.execution.a": tmp_path / "a.py", "gsrlang.execution.b": tmp_path / "b.py",
               "gsrlang.execution": tmp_path / "__init__.py", "gsrlang.cli": tmp_path / "__init__.py"}
    edges = _imports(modules)
    assert edges["gsrlang.execution.a"] == {"gsrlang.cli"}
    assert edges["gsrlang.execution.b"] == {"gsrlang.execution.a"}
    assert _layer("gsrlang.execution.a") < _layer("gsrlang.cli")


SURFACES = ("gsrlang.commands", "gsrlang.cli")  # where a command line is parsed into typed settings


def _argparse_uses(source: str) -> list[str]:
    """Where `source` imports argparse or names an argparse namespace (`Namespace`, `argparse.X`) at all."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
            found.append(f"line {node.lineno}: import argparse")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            found.append(f"line {node.lineno}: from argparse import ...")
        elif isinstance(node, ast.Name) and node.id == "Namespace":
            found.append(f"line {node.lineno}: Namespace")
        elif isinstance(node, ast.Attribute) and node.attr == "Namespace":
            found.append(f"line {node.lineno}: .Namespace")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Namespace" in node.value \
                and "argparse" in node.value:  # a string annotation: "argparse.Namespace"
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_no_argparse_namespace_goes_below_the_commands():
    """A command builds typed settings from its flags (gsrlang.commands.config) and passes those down: no module
    below gsrlang.commands imports argparse or takes a namespace."""
    leaks = [f"{name} {use}" for name, path in sorted(_modules().items())
             if not any(name == s or name.startswith(s + ".") for s in SURFACES)
             for use in _argparse_uses(path.read_text(encoding="utf-8"))]
    assert leaks == []


def test_the_argparse_reader_sees_every_way_in():
    uses = _argparse_uses("import argparse\nfrom argparse import Namespace\n"
                          "def f(args: 'argparse.Namespace'): pass\ndef g(a: argparse.Namespace): pass\n")
    assert len(uses) == 4, uses
    assert _argparse_uses("def f(args): return args.get('x')\n") == []


def test_semantics_is_a_leaf():
    """`gsrlang.semantics` imports only itself and the language (`gsrlang.lang`), and nothing that does I/O."""
    edges = _imports(_modules())
    out = sorted(f"{a} -> {b}" for a, targets in edges.items() if a.startswith("gsrlang.semantics")
                 for b in targets if not (b.startswith("gsrlang.semantics") or b.startswith("gsrlang.lang")))
    assert out == []


def test_every_module_has_a_layer():
    """A new package or top-level module is given its place in LAYERS (and in docs/architecture.md)."""
    assert sorted(m for m in _modules() if m != "gsrlang" and _layer(m) is None) == []


def test_no_private_name_is_imported_across_modules():
    """A private name (`_x`) is its module's: a module that needs it asks for a public name instead. A private
    submodule (`gsrlang.lang.syntax._standalone`) may be imported by its own package."""
    modules = _modules()
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                private = a.name.startswith("_") and not a.name.startswith("__")
                if private and base != name and not (full in modules and full.startswith(package + ".")):
                    found.append(f"{name} imports {full}")
    assert found == []


# Private attributes read on other objects, each for a reason: argparse has no public lookup of a parser's
# actions, and `_run` is the command a parser's defaults give (set and read in gsrlang.cli alone).
_LIBRARY_PRIVATES = {("gsrlang.commands.compare", "p._actions"), ("gsrlang.commands.config",
                     "parser._option_string_actions"), ("gsrlang.cli", "args._run")}


def test_no_module_reaches_into_another_objects_private_state():
    """`obj._x`, read, set or called, outside `self`, `cls`, `super()` and `other` (the other operand of a
    comparison, of the same class): the object's class gives a public method or attribute instead."""
    found = []
    for name, path in _modules().items():
        if path.name == "_standalone.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls", "other"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            if (name, ast.unparse(node)) not in _LIBRARY_PRIVATES:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []

