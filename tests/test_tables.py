"""The parser tables shipped in the package (gsrlang/syntax/_tables.py) are those of grammar/gsr.lark.

When the grammar changes, the tables must be regenerated (`make tables`): the first test fails until
they are, and stale tables are never used to parse (the parser is built from the grammar instead).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lark

from gsrlang.resources import grammar_path
from gsrlang.syntax import _tables, tables
from gsrlang.syntax.parser import _parser, parse

ROOT = Path(__file__).resolve().parents[1]


def _grammar() -> str:
    return (ROOT / "grammar" / "gsr.lark").read_text(encoding="utf-8")


def test_the_shipped_tables_are_those_of_the_grammar():
    assert _tables.GRAMMAR_SHA256 == tables.digest(_grammar()), \
        "grammar/gsr.lark changed: regenerate the parser tables with `make tables`"
    assert _tables.LARK_VERSION == lark.__version__, \
        f"Lark {lark.__version__} is installed, the tables are Lark {_tables.LARK_VERSION}'s: run `make tables`"
    check = subprocess.run([sys.executable, "-m", "gsrlang.syntax.tables", "--check"], capture_output=True,
                           text=True, cwd=ROOT)
    assert check.returncode == 0, check.stderr + " (never edit gsrlang/syntax/_tables.py by hand)"


def test_the_parser_in_use_is_read_from_the_shipped_tables():
    assert grammar_path().read_text(encoding="utf-8") == _grammar()
    in_use = _parser().parser.parser.parser.parse_table.states
    assert in_use == tables.load(_grammar()).parser.parser.parser.parse_table.states


def test_the_shipped_parser_reads_every_program_like_one_built_from_the_grammar():
    shipped, built = tables.load(_grammar()), tables.build(_grammar())
    sources = sorted(ROOT.glob("examples/**/*.gsr")) + sorted(ROOT.glob("tests/cases/**/*.gsr")) + \
        sorted(ROOT.glob("stdlib/**/*.gsr"))
    assert len(sources) > 20
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for variant in (text, text[: len(text) // 2]):  # whole, and cut in the middle (mostly a syntax error)
            outcomes = []
            for parser in (shipped, built):
                try:
                    outcomes.append(parser.parse(variant))
                except lark.exceptions.UnexpectedInput as exc:
                    outcomes.append((type(exc).__name__, exc.pos_in_stream, sorted(getattr(exc, "expected", ()))))
            assert outcomes[0] == outcomes[1], path


def test_stale_tables_are_never_used():
    assert tables.load(_grammar() + "\n// an edit\n") is None


def test_a_parser_built_from_the_grammar_builds_the_same_ast(monkeypatch):
    """Where the tables are stale (an edited grammar, another Lark), the parser is built from the grammar;
    it must build the same AST, spans included."""
    text = (ROOT / "examples" / "helpsteer2" / "helpfulness.gsr").read_text(encoding="utf-8")
    shipped = parse(text)
    monkeypatch.setattr(tables, "load", lambda grammar, **options: None)
    _parser.cache_clear()
    try:
        rebuilt = parse(text)
    finally:
        _parser.cache_clear()
    assert rebuilt.module == shipped.module and rebuilt.ok
    spans = lambda m: [(type(i).__name__, i.span) for i in m.items]  # noqa: E731
    assert spans(rebuilt.module) == spans(shipped.module)
