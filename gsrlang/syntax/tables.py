"""The parser's tables, shipped in the package, so that a fresh machine starts as fast as a warm one.

Building Lark's LALR tables from grammar/gsr.lark takes longer than the rest of a small `gsr check`,
and Lark caches them only in the system temp folder, which a fresh CI container or a new user does
not have. `_tables.py` is generated from the grammar and committed: Lark's own serialized parser
(the data `Lark.save` pickles), pickled, zlib-compressed and base64-encoded into one string
constant, with the SHA-256 of the grammar text and the Lark version it was made with. `load`
returns None when either differs, so stale tables never parse: the parser is then built from the
grammar. One string compiles in well under a millisecond and unpacks in about 5; the same data
written as a Python literal took 115-156 ms to compile on every start where Python keeps no
bytecode cache (PYTHONDONTWRITEBYTECODE, a read-only install), more than importing Lark itself.
The pickle is this package's own constant, trusted as its code is.
tests/test_tables.py fails while the committed tables are stale or differ from what the grammar
gives. Regenerate them with `make tables` (`python -m gsrlang.syntax.tables`; `--check` only compares);
never edit `_tables.py` by hand. Lark numbers the LALR states in an order that changes from run to
run (it follows object hashes); `render` renumbers them in a fixed order (breadth first from the
start state, tokens by name), so the same grammar and Lark always give the same file.
"""

from __future__ import annotations

import base64
import hashlib
import pickle
import sys
import zlib
from collections import deque
from pathlib import Path

import lark

# The options the tables are built with; `load` and `build` give the same parser.
OPTIONS = dict(parser="lalr", lexer="contextual", strict=True, maybe_placeholders=True)
TABLES = Path(__file__).with_name("_tables.py")


def digest(grammar: str) -> str:
    return hashlib.sha256(grammar.encode("utf-8")).hexdigest()


def build(grammar: str, **options) -> lark.Lark:
    """The parser built from the grammar text (Lark caches its tables in the temp folder)."""
    return lark.Lark(grammar, **OPTIONS, cache=True, **options)


def load(grammar: str, **options) -> lark.Lark | None:
    """The parser read from the shipped tables, or None when they were made from another grammar or Lark."""
    try:
        from gsrlang.syntax import _tables
    except ImportError:  # a tree without the generated module
        return None
    if _tables.GRAMMAR_SHA256 != digest(grammar) or _tables.LARK_VERSION != lark.__version__:
        return None
    data, memo = pickle.loads(zlib.decompress(base64.b64decode(_tables.PACKED)))
    return lark.Lark._load_from_dict(data, memo, **options)


def render(grammar: str) -> str:
    """The source of `_tables.py` for the grammar text."""
    parser = lark.Lark(grammar, **OPTIONS)
    _renumber(parser.parser.parser.parser.parse_table)
    data, memo = parser.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
    payload = _pickle((_sorted(data), _sorted(memo)))
    packed = base64.b64encode(zlib.compress(payload, 9)).decode("ascii")
    lines = "\n".join(f"    {packed[i:i + 100]!r}" for i in range(0, len(packed), 100))
    return ('"""Generated from grammar/gsr.lark by `make tables` (python -m gsrlang.syntax.tables): do not edit."""\n\n'
            f"GRAMMAR_SHA256 = {digest(grammar)!r}\nLARK_VERSION = {lark.__version__!r}\n"
            f"# Lark's serialized parser and its memo: pickled, zlib-compressed, base64 (see tables.py)\n"
            f"PACKED = (\n{lines}\n)\n")


def _pickle(value) -> bytes:
    """Pickle without the memo (the data is a tree): with it, equal strings that happen to be one object in
    this run are written as back-references, and the bytes would change from run to run."""
    import io

    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=4)
    pickler.fast = True
    pickler.dump(value)
    return out.getvalue()


def _sorted(value):
    """The value with every dict's items in key order, so the same tables always pickle to the same bytes."""
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in sorted(value.items(), key=lambda kv: (type(kv[0]).__name__, kv[0]))}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_sorted(v) for v in value)
    return value


def _renumber(table) -> None:
    """Number the states of an LALR parse table in a fixed order: breadth first from the start states, each
    state's actions in the order of their token names (in place)."""
    order: dict[int, int] = {}
    queue = deque(table.start_states[name] for name in sorted(table.start_states))
    while queue:
        state = queue.popleft()
        if state in order:
            continue
        order[state] = len(order)
        for token in sorted(table.states[state]):
            action, arg = table.states[state][token]
            if action.name == "Shift":
                queue.append(arg)
    table.states = {order[state]: {token: (action, order[arg] if action.name == "Shift" else arg)
                                   for token, (action, arg) in sorted(table.states[state].items())}
                    for state in sorted(order, key=order.get)}
    table.start_states = {name: order[state] for name, state in table.start_states.items()}
    table.end_states = {name: order[state] for name, state in table.end_states.items()}


def main(argv: list[str]) -> int:
    from gsrlang.resources import grammar_path

    text = render(grammar_path().read_text(encoding="utf-8"))
    if "--check" in argv:
        if TABLES.is_file() and TABLES.read_text(encoding="utf-8") == text:
            return 0
        print(f"{TABLES} is not what grammar/gsr.lark gives: run `make tables`", file=sys.stderr)
        return 1
    TABLES.write_text(text, encoding="utf-8")
    print(f"wrote {TABLES}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
