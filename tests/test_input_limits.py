"""Limits on what a program's text may hold: each is a diagnostic, never an internal error (issue 11).

Number literals are bounded on their text (GSR006); imports refuse a NUL byte and nest
at most MAX_IMPORT_DEPTH deep (GSR011). The golden cases in tests/cases/check show the
rendered diagnostics; these tests pin the edges.
"""

from __future__ import annotations

import pytest

from gsrlang.check.driver import analyze, analyze_file
from gsrlang.check.imports import MAX_IMPORT_DEPTH
from gsrlang.syntax.parser import MAX_INT

HEAD = 'rubric r "d"\ntask pointwise { scale = 1..5 }\ncriterion a: Ordinal[1..5] { ask "?" }\n'


def codes(text: str, path=None) -> list[str]:
    return [d.code for d in analyze(text, path).diagnostics]


@pytest.mark.parametrize("literal", [str(MAX_INT + 1), "9" * 5000, "1e400", "1.5e309", "1e" + "9" * 400,
                                     "1e-400", "0.0000001e-330"])
def test_number_literals_out_of_range_are_gsr006(literal):
    assert codes(HEAD + f"sink cap(base: normalize(a), trigger: true, at: {literal})\n") == ["GSR006"]


@pytest.mark.parametrize("literal", [str(MAX_INT), "0" * 30 + "7", "1e308", "0.0", "0e-999", "5e-324"])
def test_number_literals_in_range_are_read(literal):
    found = codes(HEAD + f"sink cap(base: normalize(a), trigger: true, at: {literal})\n")
    assert "GSR006" not in found


@pytest.mark.parametrize("where", ["level 99999999999999999999 \"x\"", "judges 99999999999999999999 aggregate mean"])
def test_bounds_hold_in_every_integer_position(where):
    text = ('rubric r "d"\ntask pointwise { scale = 1..5 }\n'
            f'criterion a: Ordinal[1..5] {{ ask "?" {where} }}\nsink normalize(a)\n')
    assert "GSR006" in codes(text)


def test_a_bad_literal_drops_only_its_declaration():
    text = HEAD + "criterion b: Bool = rule.word_count(above: 1e999)\ncriterion c: Bool = rule.nope()\nsink normalize(a)\n"
    assert sorted(codes(text)) == ["GSR006", "GSR104"]


def test_nul_byte_in_an_import_path_is_a_diagnostic(tmp_path):
    text = 'rubric r "d"\nimport "a\x00b.gsr"\n' + HEAD.split("\n", 1)[1] + "sink normalize(a)\n"
    result = analyze(text, tmp_path / "main.gsr")
    assert [d.message for d in result.diagnostics] == ["import path contains a NUL byte"]


def test_an_import_path_too_long_for_the_file_system_is_a_diagnostic(tmp_path):
    text = f'rubric r "d"\nimport "{"x" * 5000}.gsr"\n' + HEAD.split("\n", 1)[1] + "sink normalize(a)\n"
    assert codes(text, tmp_path / "main.gsr") == ["GSR010"]


def test_import_chains_stop_at_the_depth_limit(tmp_path):
    n = 1000  # far deeper than the interpreter's stack would allow if the limit were not enforced
    for i in range(n):
        nxt = f'import "f{i + 1}.gsr"\n' if i + 1 < n else ""
        (tmp_path / f"f{i}.gsr").write_text(f'fragment f{i}\n{nxt}criterion c{i}: Bool {{ ask "?" }}\n')
    main = tmp_path / "main.gsr"
    main.write_text('rubric r "d"\nimport "f0.gsr"\ntask pointwise { scale = 1..5 }\nsink normalize(c0)\n')
    result = analyze_file(main)
    deep = [d for d in result.diagnostics if d.code == "GSR011"]
    assert [d.message for d in deep] == [f"imports nested more than {MAX_IMPORT_DEPTH} deep"]
    assert deep[0].primary.path.endswith(f"f{MAX_IMPORT_DEPTH - 1}.gsr")


def test_import_chains_within_the_limit_check_clean(tmp_path):
    n = MAX_IMPORT_DEPTH
    for i in range(n):
        nxt = f'import "f{i + 1}.gsr"\n' if i + 1 < n else ""
        (tmp_path / f"f{i}.gsr").write_text(f'fragment f{i}\n{nxt}criterion c{i}: Bool {{ ask "?" }}\n')
    items = ", ".join(f"c{i}" for i in range(n))
    main = tmp_path / "main.gsr"
    main.write_text(f'rubric r "d"\nimport "f0.gsr"\ntask pointwise {{ scale = 1..5 }}\nsink normalize(any(items: [{items}]))\n')
    result = analyze_file(main)
    assert result.ok, [d.message for d in result.diagnostics]
