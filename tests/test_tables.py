"""The parser shipped in the package (gsrlang/lang/syntax/_standalone.py, Lark's standalone parser) is that of
grammar/gsr.lark (`gsr check` never imports Lark: tests/test_check_cli.py).

When the grammar changes, the module must be regenerated (`make tables`): the first test fails until it is,
and a stale module is never used to parse (the parser is generated from the grammar instead).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lark

from gsrlang.lang.resources import grammar_path
from gsrlang.lang.syntax import _standalone, parser, tables
from gsrlang.lang.syntax.parser import parse

ROOT = Path(__file__).resolve().parents[1]


def _grammar() -> str:
    return (ROOT / "grammar" / "gsr.lark").read_text(encoding="utf-8")


def test_the_shipped_parser_is_that_of_the_grammar():
    assert _standalone.GRAMMAR == _grammar(), \
        "grammar/gsr.lark changed: regenerate the parser with `make tables`"
    check = subprocess.run([sys.executable, "-m", "gsrlang.lang.syntax.tables", "--check"], capture_output=True,
                           text=True, cwd=ROOT)
    assert check.returncode == 0, check.stderr + " (never edit gsrlang/lang/syntax/_standalone.py by hand)"


def test_the_shipped_parser_keeps_lark_s_license_header():
    head = _standalone.__loader__.get_source(_standalone.__name__)[:2000]
    assert "Lark Stand-alone Generator Tool" in head and "Mozilla Public License, v. 2.0" in head


def test_the_parser_in_use_is_the_shipped_one():
    assert grammar_path().read_text(encoding="utf-8") == _grammar()
    assert parser._runtime() is _standalone
    assert parser._parser().parser.parser.parser.parse_table.states == \
        _standalone.Lark_StandAlone().parser.parser.parser.parse_table.states


def _outcome(parse_with, unexpected, text):
    """The parse tree, or the syntax error's kind, offset and expected tokens."""
    try:
        return parse_with(text)
    except unexpected as exc:
        return type(exc).__name__, exc.pos_in_stream, sorted(getattr(exc, "expected", ()))


def test_the_shipped_parser_reads_every_program_like_lark_built_from_the_grammar():
    """Lark's parse trees (the shipped module's and Lark's own classes differ, so trees are compared as text)."""
    shipped = _standalone.Lark_StandAlone()
    built = lark.Lark(_grammar(), **tables.OPTIONS)
    sources = sorted(ROOT.glob("examples/**/*.gsr")) + sorted(ROOT.glob("tests/cases/**/*.gsr")) + \
        sorted(ROOT.glob("stdlib/**/*.gsr"))
    assert len(sources) > 20
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for variant in (text, text[: len(text) // 2]):  # whole, and cut in the middle (mostly a syntax error)
            ours = _outcome(shipped.parse, _standalone.UnexpectedInput, variant)
            theirs = _outcome(built.parse, lark.exceptions.UnexpectedInput, variant)
            assert (ours.pretty() if hasattr(ours, "pretty") else ours) == \
                (theirs.pretty() if hasattr(theirs, "pretty") else theirs), path


def test_a_stale_module_is_never_used():
    edited = _grammar() + "\n// an edit\n"
    module = tables.load(edited)
    assert module is not _standalone and module.GRAMMAR == edited


def test_a_parser_generated_from_the_grammar_builds_the_same_ast_and_errors(monkeypatch):
    """Where the shipped module is stale (an edited grammar), the parser is generated from the grammar; it must
    build the same AST, spans included, and report the same syntax errors."""
    good = (ROOT / "examples" / "helpsteer2" / "helpfulness.gsr").read_text(encoding="utf-8")
    bad = good.replace("criterion", "criterion (", 1) + "\nnode x = mean(items: [a, ]\n"
    shipped = [parse(good), parse(bad)]
    generated = tables.generate(_grammar())
    monkeypatch.setattr(parser, "_runtime", lambda: generated)
    parser._parser.cache_clear()
    try:
        rebuilt = [parse(good), parse(bad)]
    finally:
        parser._parser.cache_clear()
    assert rebuilt[0].module == shipped[0].module and rebuilt[0].ok
    spans = lambda m: [(type(i).__name__, i.span) for i in m.items]  # noqa: E731
    assert spans(rebuilt[0].module) == spans(shipped[0].module)
    assert rebuilt[1].diagnostics == shipped[1].diagnostics and len(shipped[1].diagnostics) == 2
