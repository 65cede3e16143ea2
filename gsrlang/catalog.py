"""The operator, judge-kind and rule catalogue, read from the `.gsr` signature files in stdlib/.

This is the single source of truth for what operators and judge kinds exist, their ports,
parameters, defaults, documentation and examples: the checker, the runtime, the LLM compiler's prompt and
the language server all read it from here.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import pickle
import stat
import sys
from functools import cache
from pathlib import Path

import attrs

from gsrlang import __version__, records
from gsrlang.span import Span
from gsrlang.syntax import ast
from gsrlang.syntax.literals import Symbol, format_literal, literal_value
from gsrlang.types import Pattern

class _Required:
    """The default of a parameter without one; a singleton that survives pickling (the catalogue cache)."""

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
    operators: dict[str, OperatorSig]
    rules: dict[str, RuleSig]
    enums: dict[str, EnumSig]
    judges: dict[str, JudgeSig] = attrs.field(factory=dict)

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
    """Read every `*.gsr` signature file directly in `folder` (fragments/ holds rubric fragments)."""
    from gsrlang.syntax.parser import parse

    sources = {str(p): p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.gsr"))}
    sources.update(extra_sources or {})
    modules = []
    for path, text in sources.items():
        result = parse(text)
        if result.diagnostics:
            d = result.diagnostics[0]
            raise CatalogError(f"{path}: {d.code} {d.message}")
        modules.append((path, result.module))
    enums = {}
    for path, module in modules:
        for item in module.items:
            if isinstance(item, ast.EnumDecl):
                enums[item.name.name] = EnumSig(item.name.name, tuple(m.name for m in item.members), item.doc)
    operators, rules, judges = {}, {}, {}
    for path, module in modules:
        for item in module.items:
            if isinstance(item, ast.OpDecl):
                tv = tuple(t.name for t in item.type_params)
                if item.name.name in operators:
                    raise CatalogError(f"{path}: operator {item.name.name!r} declared twice")
                operators[item.name.name] = OperatorSig(
                    item.kind, item.name.name, tv,
                    tuple(PortSig(p.name.name, pattern_of(p.type, tv, enums)) for p in item.ports),
                    _params(item.params, tv, enums), pattern_of(item.result, tv, enums), item.doc, path,
                    item.span)
            elif isinstance(item, ast.RuleDecl):
                rules[item.name.name] = RuleSig(item.name.name, _params(item.params, (), enums), item.doc, path,
                                                item.span, pattern_of(item.result, (), enums))
            elif isinstance(item, ast.JudgeDecl):
                if item.name.name in judges:
                    raise CatalogError(f"{path}: judge kind {item.name.name!r} declared twice")
                judges[item.name.name] = JudgeSig(item.name.name, _params(item.params, (), enums), item.doc, path,
                                                  item.span)
    return Catalog(operators, rules, enums, judges)


# The modules whose classes a cached catalogue holds: their source is part of the cache key, and
# unpickling may build instances of their classes and nothing else.
_PICKLED = ("catalog.py", "types.py", "span.py", "syntax/literals.py")
_MAGIC = b"gsr-catalog-1\n"


@cache
def default_catalog() -> Catalog:
    """The stdlib's catalogue; kept in a per-user cache keyed by the stdlib's folder and text, so start-up skips parsing it.

    The cache is a pickle, so it is verified before it is loaded: the folder and the file
    must belong to this user and be writable by no one else, the file must carry an
    HMAC-SHA256 made with this user's key (``catalog.key`` beside it, mode 0600), and
    unpickling may only build the catalogue's own classes. A cache that fails any check
    is ignored and rebuilt: whoever can write the folder cannot make `gsr check` run code.
    """
    from gsrlang.resources import stdlib_dir

    folder = stdlib_dir()
    sources = sorted(folder.glob("*.gsr"))
    # the stdlib's folder is part of the key: the catalogue holds spans naming its files, so two
    # checkouts with the same stdlib text (a clone beside a working copy) never share an entry
    key = hashlib.sha256(f"{__version__} {sys.version} {folder.resolve()}".encode())
    # the classes being pickled are part of the key too, so an edited catalog.py, types.py or
    # syntax/literals.py never loads stale objects
    here = Path(__file__).parent
    for path in (*sources, *(here / name for name in _PICKLED)):
        key.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    cache_dir = _private_cache_dir()
    secret = _cache_key(cache_dir) if cache_dir is not None else None
    if secret is None:  # no private folder for a cache: parse the stdlib on every start
        return load_catalog(folder)
    cached = cache_dir / f"catalog-{key.hexdigest()[:32]}.pickle"
    catalog = _load_verified(cached, secret)
    if catalog is not None:
        return catalog
    catalog = load_catalog(folder)
    _store(cached, secret, catalog)
    return catalog


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else (always true where there are no owners)."""
    owner = getattr(os, "getuid", None)
    return (owner is None or st.st_uid == owner()) and not st.st_mode & 0o022


def _private_cache_dir() -> Path | None:
    folder = _cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return folder if _private(os.stat(folder)) else None
    except OSError:
        return None


def _open_private(path: Path) -> bytes | None:
    """The file's bytes if it is a regular file that passes `_private` (symlinks not followed), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or not _private(st):
            return None
        return fh.read()


def _cache_key(folder: Path) -> bytes | None:
    """This user's HMAC key for catalogue caches (made on first use, mode 0600), or None when unusable."""
    path = folder / "catalog.key"
    data = _open_private(path)
    if data is None and not path.exists():
        import secrets  # made once per user: kept off the start-up of every later `gsr check`

        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(32))
        except OSError:
            pass  # another process made it first, or the folder is read-only
        data = _open_private(path)
    return data if data is not None and len(data) == 32 else None


class _CatalogUnpickler(pickle.Unpickler):
    """Builds only the classes of the catalogue's own modules: a forged pickle cannot reach os.system."""

    def find_class(self, module: str, name: str):
        allowed = {"gsrlang." + m[:-3].replace("/", ".") for m in _PICKLED}
        if module in allowed and "." not in name:
            obj = getattr(sys.modules.get(module), name, None)
            if obj is not None and (isinstance(obj, type) or not callable(obj)):
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a catalogue")


def _load_verified(path: Path, secret: bytes) -> Catalog | None:
    data = _open_private(path)
    if data is None or not data.startswith(_MAGIC):
        return None
    mac, payload = data[len(_MAGIC):len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
    if not hmac.compare_digest(mac, hmac.new(secret, payload, hashlib.sha256).digest()):
        return None
    try:
        catalog = _CatalogUnpickler(io.BytesIO(payload)).load()
    except Exception:  # from another layout: rebuild it
        return None
    return catalog if isinstance(catalog, Catalog) else None


def _store(path: Path, secret: bytes, catalog: Catalog) -> None:
    import tempfile  # only where the cache is written, not on every start

    payload = pickle.dumps(catalog, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".catalog-", suffix=".tmp", dir=path.parent)  # mode 0600
    except OSError:
        return  # a read-only cache: parse the stdlib on every start instead
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_MAGIC + hmac.new(secret, payload, hashlib.sha256).digest() + payload)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gsrlang"
