"""Golden diagnostics: every diagnostic code has failing programs, with the expected output beside them.

Each case is `tests/cases/check/<CODE>_<short_name>.gsr`; `<same name>.expected` holds the
diagnostics rendered in the full format, without colour, with the path shown as the
repository-relative `tests/cases/check/NAME.gsr`. Cases run through the same code path
as `gsr check` (`collect_files`, `analyze_file`, `render_full` with `Sources`), with the
repository root as the working directory; absolute paths of the checkout (imported
fragments, `looked for ...` help) are shown relative to the repository root, so the
files do not depend on where the checkout lives. Helper fragments for the import codes
(GSR010-GSR012) live in `tests/cases/check/imports/`.

A few cases are not files: GENERATED ones are bytes written to a temporary folder (a
binary file, invalid UTF-8; no raw bytes are committed) and MISSING ones name a path
that deliberately does not exist (GSR005). Both still have a `.expected` file.

Regenerate the expected files after an intended change of the checker's output:

    GSR_REGEN=1 .venv/bin/pytest tests/test_diagnostics_golden.py

and review the diff. The explanations of `gsr explain` are checked here too: every
code has one, its wrong example triggers the code, and its right example checks clean.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.commands.common import collect_files, read_error
from gsrlang.lang.check.driver import analyze_file
from gsrlang.lang.diagnostics import Diagnostic
from gsrlang.lang.diagnostics.codes import CODES
from gsrlang.lang.diagnostics.explanations import EXPLANATIONS, explain
from gsrlang.lang.diagnostics.render import Sources, render_concise, render_full
from gsrlang.lang.span import SourceText

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases" / "check"
SHOWN = "tests/cases/check"  # how case paths are passed to the checker and shown
REGEN = bool(os.environ.get("GSR_REGEN"))

_LATIN1_TEXT = (
    'rubric helpfulness "How helpful is the response to the prompt?"\n'
    "task pointwise { scale = 1..5 }\n"
    'criterion correct: Ordinal[1..5] { ask "Are the facts correct (vérifiés)?" }\n'
    "sink normalize(correct)\n"
)
GENERATED: dict[str, bytes] = {
    # a PNG image renamed to .gsr: a NUL byte in the first bytes
    "GSR003_binary_file": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06",
    # a rubric saved as Latin-1: "é" is the single byte 0xE9, on line 3
    "GSR003_latin1_text": _LATIN1_TEXT.encode("latin-1"),
    # Trojan Source (issue 24 item 20): bidirectional controls in a comment and in a question; written here, not
    # committed, so that no file of the repository holds them
    "GSR705_trojan_source": ('rubric r "bidi"\ntask pointwise { scale = 1..5 }\n'
                             '# reviewed: safe \u202e gsr.example \u2066 end\n'
                             'criterion c: Ordinal[1..5] { ask "Is it \u2069 correct?" }\n'
                             'sink normalize(c)\n').encode("utf-8"),
}
MISSING = {"GSR005_missing_file"}  # checked by path; there is deliberately no such file


def _codes(ds) -> list[str]:
    return [d.code for d in ds]


# name -> (why the current output is not acceptable, a check that holds once it is fixed)
def _case_names() -> list[str]:
    names = {p.stem for p in CASES.glob("*.gsr")} | set(GENERATED) | MISSING
    return sorted(names)


ALL_CASES = _case_names()
GOLDEN_CASES = ALL_CASES


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _portable(text: str) -> str:
    """Absolute paths of this checkout shown relative to it (imported fragments, `looked for` help)."""
    return text.replace(str(ROOT) + os.sep, "").replace(ROOT.as_posix() + "/", "")


def check_like_cli(path: str) -> tuple[list[Diagnostic], str | None]:
    """What `gsr check PATH` does for one path (gsrlang/commands/check.py): diagnostics and the text read."""
    found = list(collect_files([path]))
    assert len(found) == 1, found
    shown, problem = found[0]
    if problem:
        return [read_error(shown, problem)], None
    try:
        analysis = analyze_file(shown)
    except OSError as exc:
        return [read_error(shown, f"cannot read `{shown}`: {exc.strerror}")], None
    return list(analysis.diagnostics), analysis.text


def run_case(name: str, tmp_path: Path) -> tuple[list[Diagnostic], str, str]:
    """(diagnostics, full rendering, concise rendering) of a case, shown as tests/cases/check/NAME.gsr."""
    shown = f"{SHOWN}/{name}.gsr"
    if name in GENERATED:
        real = tmp_path / f"{name}.gsr"
        real.write_bytes(GENERATED[name])
        diagnostics, text = check_like_cli(str(real))
    else:
        diagnostics, text = check_like_cli(shown)
    sources = Sources(SourceText(shown, text)) if text is not None else Sources(main_path=shown)
    return diagnostics, _portable(render_full(diagnostics, sources)), _portable(render_concise(diagnostics, sources))


def _code_of(name: str) -> str:
    return name.split("_", 1)[0]


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden(name, tmp_path):
    diagnostics, full, _ = run_case(name, tmp_path)
    assert _code_of(name) in _codes(diagnostics), f"{name} does not report {_code_of(name)}: {_codes(diagnostics)}"
    expected_path = CASES / f"{name}.expected"
    if REGEN:
        expected_path.write_text(full, encoding="utf-8")
    assert expected_path.exists(), f"no {expected_path.name}: run with GSR_REGEN=1 to create it"
    assert full == expected_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", [n for n in GOLDEN_CASES if n not in GENERATED])
def test_cli_output_is_the_golden_output(name, capsys):
    """`gsr check` itself prints exactly the expected file (so the harness cannot drift from the CLI)."""
    status = main(["check", "--color", "never", "--quiet", f"{SHOWN}/{name}.gsr"])
    out = capsys.readouterr().out
    expected = (CASES / f"{name}.expected").read_text(encoding="utf-8")
    assert _portable(out) == expected
    has_error = expected.startswith("error[") or "\nerror[" in expected
    assert status == (1 if has_error else 0)


# ---- the case folder itself ------------------------------------------------------------------------------
def test_every_code_has_a_golden_case():
    covered = {_code_of(n) for n in GOLDEN_CASES if (CASES / f"{n}.expected").exists()}
    missing = sorted(set(CODES) - covered)
    assert not missing, f"codes without a golden case: {missing}"


def test_case_names_and_files_are_consistent():
    for name in ALL_CASES:
        assert _code_of(name) in CODES, f"{name}: the name must start with a known code"
        if name in MISSING:
            assert not (CASES / f"{name}.gsr").exists()
    for expected in CASES.glob("*.expected"):
        assert expected.stem in GOLDEN_CASES, f"{expected.name} has no case"


def test_import_fragments_are_used():
    used = "".join(p.read_text(encoding="utf-8") for p in [*CASES.glob("*.gsr"), *CASES.glob("imports/*.gsr")])
    for fragment in (CASES / "imports").glob("*.gsr"):
        assert fragment.read_text(encoding="utf-8").startswith(("fragment ", "rubric ")), fragment
        assert f"{fragment.name}\"" in used, f"imports/{fragment.name} is not imported by any case"


# ---- explanations ------------------------------------------------------------------------------------------
def test_every_code_has_an_explanation():
    assert set(EXPLANATIONS) == set(CODES)
    for code, info in CODES.items():
        text = explain(code)
        assert text.startswith(f"{code}: {info.title} ({info.severity})\n")
        assert "\nWrong:\n" in text and "\nRight:\n" in text
        assert explain(code.lower()) == text
        assert len(EXPLANATIONS[code].text) > 150, f"{code}: the explanation is too short"
    assert explain("GSR999") is None


def _check_example(example, folder: Path, capsys) -> tuple[int, list[str]]:
    main_file = example.write(folder)
    capsys.readouterr()
    status = main(["check", "--format", "json", str(main_file)])
    out = capsys.readouterr().out
    return status, [d["code"] for d in json.loads(out)]


@pytest.mark.parametrize("code", sorted(EXPLANATIONS))
def test_explanation_examples(code, tmp_path, capsys):
    e = EXPLANATIONS[code]
    status, found = _check_example(e.wrong, tmp_path / "wrong", capsys)
    assert code in found, f"the wrong example of {code} gives {found}"
    assert set(found) == {code, *e.also}, f"the wrong example of {code} gives {found}; declared also={e.also}"
    assert status == (0 if CODES[code].severity == "warning" else 1)
    status, found = _check_example(e.right, tmp_path / "right", capsys)
    assert found == [] and status == 0, f"the right example of {code} gives {found}"
