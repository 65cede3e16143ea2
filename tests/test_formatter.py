"""The formatter (`gsrlang.lang.syntax.formatter`) and `gsr fmt`.

Golden cases live in tests/cases/fmt/: each `NAME.gsr` is formatted and compared
with `NAME.expected.gsr` beside it. After an intended change of layout, regenerate
the expected files with

    GSR_REGEN=1 .venv/bin/pytest tests/test_formatter.py

and review the diff before committing. Every expected file must itself be
formatted (a fixed point) and parse to the same AST as its input.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.lang.syntax.formatter import WIDTH, FormatError, format_module, format_source
from gsrlang.lang.syntax.parser import parse

ROOT = Path(__file__).resolve().parents[1]
CASES = Path(__file__).resolve().parent / "cases" / "fmt"
REGEN = bool(os.environ.get("GSR_REGEN"))


def _inputs() -> list[Path]:
    return sorted(p for p in CASES.glob("*.gsr") if not p.name.endswith(".expected.gsr"))


def _comment_texts(text: str) -> list[str]:
    return [c.text.rstrip() for c in parse(text).module.comments]


# ---- golden cases ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", _inputs(), ids=lambda p: p.stem)
def test_golden(case: Path):
    source = case.read_text(encoding="utf-8")
    formatted = format_source(source)
    expected_path = case.with_name(case.stem + ".expected.gsr")
    if REGEN:
        expected_path.write_text(formatted, encoding="utf-8")
    assert expected_path.exists(), f"missing {expected_path.name}: run with GSR_REGEN=1"
    assert formatted == expected_path.read_text(encoding="utf-8")
    assert parse(formatted).module == parse(source).module
    assert format_source(formatted) == formatted
    assert _comment_texts(formatted) == _comment_texts(source)


def test_there_are_enough_golden_cases():
    assert len(_inputs()) >= 8


# ---- the repository's own files ---------------------------------------------------------------------------
def _repo_files() -> list[Path]:
    files = sorted((ROOT / "stdlib").rglob("*.gsr")) + sorted((ROOT / "examples").rglob("*.gsr"))
    return [p for p in files if p.is_file()]


@pytest.mark.parametrize("path", _repo_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_files_format_faithfully(path: Path):
    source = path.read_text(encoding="utf-8")
    if not parse(source).ok:
        pytest.skip("not parseable (a deliberate error case)")
    formatted = format_source(source)
    before, after = parse(source).module, parse(formatted).module
    assert after == before
    assert format_source(formatted) == formatted
    assert _comment_texts(formatted) == _comment_texts(source)
    # documentation comments of signatures stay attached
    assert [getattr(i, "doc", None) for i in after.items] == [getattr(i, "doc", None) for i in before.items]


def test_stdlib_and_examples_are_already_formatted():
    """What ships is in the canonical layout, so `gsr fmt --check` (and the pre-commit hook) pass on it."""
    for path in _repo_files():
        text = path.read_text(encoding="utf-8")
        assert format_source(text) == text, path.relative_to(ROOT)


# ---- rules ------------------------------------------------------------------------------------------------
LANGUAGE_EXAMPLE = """\
# Helpfulness, as in HelpSteer2: a correctness-first rubric with a safety cap.
rubric helpfulness "How helpful is the response to the prompt overall?"

task pointwise { scale = 1..5  quantize = round }
task pairwise { epsilon = 0.05  on_tie = tie }

criterion correct: Ordinal[1..5] {
  ask "What share of the pertinent facts in the response are correct?"
  level 1 "Mostly wrong or hallucinated"
  level 3 "Some errors that matter"
  level 5 "Fully correct"
}
criterion coherent: Ordinal[1..5] { ask "How clear and self-consistent is the response?" }
criterion unsafe: Bool? { ask "Does the response give instructions that could cause serious harm?" }
criterion rambling: Bool = rule.word_count(above: 600)

node body = weighted_mean(items: [normalize(correct), normalize(coherent)], weights: [0.7, 0.3])
node capped = cap(base: body, trigger: default(unsafe, value: false), at: 0.25)
node final = cap(base: capped, trigger: rambling, at: 0.6)

sink final
"""


def test_the_reference_example_is_a_fixed_point():
    assert format_source(LANGUAGE_EXAMPLE) == LANGUAGE_EXAMPLE


def test_no_line_is_longer_than_the_width_when_it_can_break():
    out = format_source((CASES / "long_calls.gsr").read_text(encoding="utf-8"))
    assert max(len(line) for line in out.splitlines()) <= WIDTH


def test_a_long_call_breaks_one_argument_per_line_with_trailing_commas():
    items = ", ".join(f"normalize(criterion_number_{i})" for i in range(6))
    out = format_source(f"node n = mean(items: [{items}], on_abstain: skip)")
    assert out == (
        "node n = mean(\n"
        "  items: [\n"
        + "".join(f"    normalize(criterion_number_{i}),\n" for i in range(6))
        + "  ],\n"
        "  on_abstain: skip,\n"
        ")\n"
    )


def test_a_call_that_fits_is_joined_on_one_line():
    assert format_source("node n = mean(\n  items: [a,\n b],\n)\n") == "node n = mean(items: [a, b])\n"


def test_a_comment_inside_a_call_forces_it_to_break():
    out = format_source("node n = mean(items: [a,  # first\n b])")
    assert out == "node n = mean(\n  items: [\n    a,  # first\n    b,\n  ],\n)\n"


def test_numbers_are_printed_from_their_value():
    out = format_source("node n = f(a: 0.70, b: 600, c: - 0.3, d: 1E-5, e: 007, f: 2.50e1, g: 1.7e308)")
    assert out == "node n = f(a: 0.7, b: 600, c: -0.3, d: 1e-05, e: 7, f: 25.0, g: 1.7e+308)\n"
    assert parse(out).module == parse("node n = f(a: 0.70, b: 600, c: - 0.3, d: 1E-5, e: 007, f: 2.50e1, "
                                      "g: 1.7e308)").module


def test_strings_are_re_escaped():
    source = 'rubric r "tab\\there, quote \\" and backslash \\\\ and \\n newline"'
    out = format_source(source)
    assert out == source + "\n"
    assert parse(out).module == parse(source).module


def test_blank_lines_between_groups_and_at_most_one_kept():
    out = format_source('rubric r\ntask pointwise { scale = 1..5 }\ncriterion a: Bool\n\n\n\ncriterion b: Bool\n'
                        'sink a')
    assert out == ("rubric r\n\ntask pointwise { scale = 1..5 }\n\ncriterion a: Bool\n\ncriterion b: Bool\n\n"
                   "sink a\n")


def test_empty_and_blank_files():
    assert format_source("") == ""
    assert format_source("\n\n   \n") == ""


def test_crlf_input_gives_lf_output():
    source = "rubric r  # c\r\ncriterion a: Bool {\r\n  ask \"a?\"  # q\r\n}\r\n"
    out = format_source(source)
    assert out == 'rubric r  # c\n\ncriterion a: Bool {\n  ask "a?"  # q\n}\n'
    assert parse(out).module == parse(source).module


def test_syntax_errors_are_never_formatted():
    with pytest.raises(FormatError) as info:
        format_source("criterion a: Bool {\nnode x = mean(items: [a]\n")
    assert info.value.diagnostics
    assert all(d.code.startswith("GSR00") for d in info.value.diagnostics)
    assert "syntax errors" in str(info.value)


def test_format_module_of_a_parsed_module():
    source = "node   x=mean(items:[a])"
    module = parse(source).module
    assert format_module(module, source) == "node x = mean(items: [a])\n"


# ---- gsr fmt ------------------------------------------------------------------------------------------------
MESSY = "rubric   r\ntask pointwise{scale=1..5}\ncriterion a:Bool{ask \"a?\"}\nsink normalize( a )\n"
TIDY = format_source(MESSY)


def test_fmt_rewrites_files_in_place(tmp_path, capsys):
    path = tmp_path / "r.gsr"
    path.write_text(MESSY, encoding="utf-8")
    assert main(["fmt", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == TIDY
    assert "1 file reformatted" in capsys.readouterr().err
    assert main(["fmt", str(path)]) == 0
    assert "1 file already formatted" in capsys.readouterr().err


def test_fmt_walks_folders(tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.gsr").write_text(MESSY, encoding="utf-8")
    (tmp_path / "sub" / "b.gsr").write_text(TIDY, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not gsr", encoding="utf-8")
    assert main(["fmt", str(tmp_path)]) == 0
    assert (tmp_path / "a.gsr").read_text(encoding="utf-8") == TIDY
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "not gsr"
    assert "1 file reformatted, 1 file already formatted" in capsys.readouterr().err


def test_fmt_check_lists_files_and_writes_nothing(tmp_path, capsys):
    messy, tidy = tmp_path / "messy.gsr", tmp_path / "tidy.gsr"
    messy.write_text(MESSY, encoding="utf-8")
    tidy.write_text(TIDY, encoding="utf-8")
    assert main(["fmt", "--check", str(messy), str(tidy)]) == 1
    out = capsys.readouterr()
    assert out.out.splitlines() == [str(messy)]
    assert "1 file would be reformatted" in out.err
    assert messy.read_text(encoding="utf-8") == MESSY
    assert main(["fmt", "--check", str(tidy)]) == 0
    assert capsys.readouterr().out == ""


def test_fmt_diff_prints_a_unified_diff_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "r.gsr"
    path.write_text(MESSY, encoding="utf-8")
    assert main(["fmt", "--diff", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"--- a/{path}\n+++ b/{path}\n@@")
    assert "-rubric   r\n" in out and "+rubric r\n" in out
    assert path.read_text(encoding="utf-8") == MESSY
    assert main(["fmt", "--diff", "--check", str(path)]) == 1


def test_fmt_reads_stdin_and_writes_stdout(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MESSY.encode("utf-8")), encoding="utf-8"))
    assert main(["fmt", "-"]) == 0
    assert capsys.readouterr().out == TIDY
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MESSY.encode("utf-8")), encoding="utf-8"))
    assert main(["fmt", "--check", "-"]) == 1
    assert capsys.readouterr().out == ""


def test_fmt_stdin_with_syntax_errors(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"node x = mean(\n"), encoding="utf-8"))
    assert main(["fmt", "-", "--color", "never"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert "GSR001" in out.err and "<stdin>" in out.err


def test_fmt_never_rewrites_a_file_with_syntax_errors(tmp_path, capsys):
    bad = tmp_path / "bad.gsr"
    good = tmp_path / "good.gsr"
    broken = "criterion a: Bool {\n  ask \"unterminated\n}\nnode   x = mean(items: [a])\n"
    bad.write_text(broken, encoding="utf-8")
    good.write_text(MESSY, encoding="utf-8")
    assert main(["fmt", "--color", "never", str(bad), str(good)]) == 1
    err = capsys.readouterr().err
    assert "GSR002" in err and "unterminated string" in err and str(bad) in err
    assert "1 file reformatted" in err and "1 file with errors" in err
    assert bad.read_text(encoding="utf-8") == broken
    assert good.read_text(encoding="utf-8") == TIDY


def test_fmt_reports_missing_paths_and_binary_files(tmp_path, capsys):
    binary = tmp_path / "b.gsr"
    binary.write_bytes(b"\x00\x01\x02")
    assert main(["fmt", "--color", "never", str(tmp_path / "nope.gsr"), str(binary)]) == 1
    err = capsys.readouterr().err
    assert "no such file or folder" in err and "binary" in err


def test_fmt_stdin_cannot_be_mixed_with_paths(tmp_path, capsys):
    assert main(["fmt", "-", str(tmp_path)]) == 2
    assert "cannot be combined" in capsys.readouterr().err


def test_fmt_refuses_to_write_a_result_that_changes_the_program(tmp_path, monkeypatch, capsys):
    import gsrlang.lang.syntax.formatter as formatter

    path = tmp_path / "r.gsr"
    path.write_text(MESSY, encoding="utf-8")
    monkeypatch.setattr(formatter, "format_module", lambda module, source: "rubric other\n")
    assert main(["fmt", str(path)]) == 2
    assert "internal error" in capsys.readouterr().err
    assert path.read_text(encoding="utf-8") == MESSY
