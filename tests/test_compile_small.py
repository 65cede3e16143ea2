"""Compiling for small servers: a prompt that fits the context, and the program grammar in GBNF (llama.cpp)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import EXAMPLES
from fakeserver import FakeOpenAI, scripted

from gsrlang.cli import main
from gsrlang.compiler.grammar import program_gbnf
from gsrlang.compiler.prompt import DEFAULT_EXAMPLES, LEVELS, estimate_tokens, fit_prompt
from gsrlang.compiler.spec import CompileSpec, Pointwise
from gsrlang.lang.catalog import default_catalog

GOOD = (EXAMPLES / "summeval" / "relevance.gsr").read_text(encoding="utf-8")
RUBRIC = "RUBRIC-SMALL: rate the relevance of the summary from 1 to 5."
SPEC = CompileSpec(rubric=RUBRIC, contract=Pointwise(scale="1..5", quantize="round"))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GSR_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("context", [3000, 4096, 6000, 8000, 10000, 16000])
def test_the_fitted_prompt_fits_and_keeps_every_signature(context):
    prompt, cut = fit_prompt(SPEC, context, 2048)
    text = prompt.system + prompt.user
    smallest = len(LEVELS) - 1
    assert estimate_tokens(text) + 2048 <= context or cut == LEVELS[smallest][0]
    for name in [*default_catalog().operators, *default_catalog().rules]:
        assert re.search(rf"\b{name}\b", prompt.system), name  # the compact catalogue still lists everything
    assert RUBRIC in prompt.user and "task pointwise { scale = 1..5" in prompt.user
    assert "```gsr" in prompt.system  # at least one example program


def test_unknown_context_keeps_the_full_prompt():
    prompt, cut = fit_prompt(SPEC, None)
    assert cut == "nothing"
    assert all(f"examples/{name}" in prompt.system for name in DEFAULT_EXAMPLES)
    small, cut = fit_prompt(SPEC, 4096)
    assert cut != "nothing" and len(small.system) < len(prompt.system) / 3


def block(program: str) -> str:
    return "```gsr\n" + program + "```\n"


def test_compile_learns_the_context_from_the_overflow_error_and_fits_the_prompt(capsys, tmp_path):
    (tmp_path / "rubric.md").write_text(RUBRIC)
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        server.context_length = 4096
        code = main(["compile", "rubric.md", "--task", "pointwise", "--scale", "1..5", "--model", "fake-model",
                     "--base-url", server.base_url, "-o", "out.gsr"])
        sizes = [len(r.prompt) for r in server.requests]
    err = capsys.readouterr().err
    assert code == 0, err
    assert len(sizes) == 2 and sizes[1] < sizes[0] / 3  # the full prompt overflowed; the fitted one went through
    (line,) = [x for x in err.splitlines() if "fitted" in x]
    assert "4096-token context (from the server)" in line and "cut:" in line
    assert Path("out.gsr").read_text().endswith(GOOD)
    # the next compile knows the context at once
    capsys.readouterr()
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server2:
        server2.context_length = 4096
        code = main(["compile", "rubric.md", "--task", "pointwise", "--scale", "1..5", "--model", "fake-model",
                     "--base-url", server2.base_url, "--context", "4096", "--no-cache"])
        assert code == 0 and len(server2.requests) == 1


def test_constrain_grammar_for_llamacpp_sends_gbnf(capsys, tmp_path):
    (tmp_path / "rubric.md").write_text(RUBRIC)
    with FakeOpenAI(responder=scripted({RUBRIC: GOOD})) as server:
        code = main(["compile", "rubric.md", "--task", "pointwise", "--scale", "1..5", "--model", "fake-model",
                     "--base-url", server.base_url, "--constrain", "grammar", "--grammar-field", "grammar"])
        (sent,) = server.requests
    assert code == 0, capsys.readouterr().err
    assert sent["grammar"] == program_gbnf() and "structured_outputs" not in sent


def test_program_gbnf_is_complete_and_has_no_left_recursion():
    g = program_gbnf()
    rules = dict(line.split(" ::= ", 1) for line in g.splitlines() if " ::= " in line and not line.startswith("#"))
    referenced = set(re.findall(r"(?<![\"\w-])((?:r|t)-[A-Za-z0-9-]+|ws1?|root)(?![\w-])",
                                re.sub(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]', " ", g)))
    assert referenced <= set(rules), referenced - set(rules)
    for name, body in rules.items():
        for alt in body.split(" | "):
            assert not alt.strip().startswith(name + " "), name
    for keyword in ("criterion", "sink", "node", "task", "rubric", "aggregate"):
        assert f'"{keyword}"' in g
    assert "op_decl" not in g and "enum" not in g  # stdlib signatures are not for programs


def test_program_gbnf_uses_only_what_llamacpp_accepts():
    """Found against llama-cpp-python 0.3.36: an empty alternative crashes its sampler, and an escape it does not
    know (`\\-`, `\\^`) or a raw tab or newline inside a character class breaks its grammar parser."""
    g = program_gbnf()
    for line in g.splitlines():
        if " ::= " in line:
            body = line.split(" ::= ", 1)[1]
            assert not body.rstrip().endswith("|") and "| |" not in body and not body.startswith("|"), line
    assert "\t" not in g and g.count("\n") == len(g.splitlines())
    escapes = set(re.findall(r"\\(.)", g))
    assert escapes <= {"\\", '"', "[", "]", "t", "r", "n", "x"}, escapes
