"""Judge kinds are declared like operators, and the language's additions authors asked for.

- a new judge kind is one declaration (a `judge` signature) and one class: the checker,
  the runtime's judge registry, the JSON form, the language server, the compiler's prompt
  and `gsr explain` all pick it up;
- `human(field: ..., missing: [...])` sentinels are abstentions;
- `at_most`, `at_least` and `is` compare a judgment with one of its levels.
"""

from __future__ import annotations

import asyncio

import pytest

from gsrlang.cli import main
from gsrlang.execution.executor import execute
from gsrlang.files.dataset import Candidate, Item
from gsrlang.judges.registry import default_registry
from gsrlang.lang.catalog import default_catalog, load_catalog
from gsrlang.lang.check.driver import analyze
from gsrlang.lang.check.judgekinds import JudgeKind, KindUse, judge_kind, judge_kinds, unregister
from gsrlang.lang.resources import stdlib_dir
from gsrlang.semantics.judgment import ABSTAIN, Judgment

# ---- one declaration ...
DECLARATION = """
# Counts the response's sentences and says whether there are at least `min`.
# e.g. criterion enough: Bool = sentences(min: 3)
judge sentences(min: Int, separator: String = ".")
"""


# ... and one class: its name, a static check its parameter types cannot express, and the judge itself
class Sentences(JudgeKind):
    name = "sentences"
    inline = True

    def check(self, use: KindUse) -> bool:
        if use.values["min"] < 1:
            use.error("GSR305", "`min` must be at least 1", use.span_of("min"))
            return False
        return True

    async def judge(self, node, item, candidate) -> Judgment:
        args = node.criterion.procedure.args
        count = sum(1 for s in candidate.text.split(args.get("separator", ".")) if s.strip())
        return Judgment.ok(count >= args["min"], f"{count} sentences")


PROGRAM = """
rubric prose
task pointwise { scale = 1..5 }
criterion enough: Bool = sentences(min: 2)
sink normalize(enough)
"""


@pytest.fixture
def catalog():
    judge_kind(Sentences)
    try:
        yield load_catalog(stdlib_dir(), extra_sources={"extra/judges.gsr": DECLARATION})
    finally:
        unregister("sentences")


def _item(text: str, record: dict | None = None) -> Item:
    return Item("x", 1, "input", (Candidate("A", text),), None, None, record or {})


def test_a_new_judge_kind_is_one_declaration_and_one_class(catalog):
    assert "sentences" in judge_kinds(catalog) and "sentences" not in judge_kinds(default_catalog())
    analysis = analyze(PROGRAM, catalog=catalog)
    assert analysis.ok, [d.message for d in analysis.diagnostics]
    assert analysis.program.criteria[0].criterion.procedure.describe() == "sentences(min: 2)"
    registry = default_registry(catalog=catalog)  # the runtime's registry serves it with the class
    run = asyncio.run(execute(analysis.program, _item("One. Two. Three."), registry))
    assert run.status == "ok" and run.judgments["enough"][0].value is True
    run = asyncio.run(execute(analysis.program, _item("Only one."), registry))
    assert run.judgments["enough"][0].value is False and run.judgments["enough"][0].reason == "1 sentences"


def test_the_new_kinds_signature_and_static_check_are_enforced(catalog):
    codes = lambda text: [d.code for d in analyze(text, catalog=catalog).diagnostics]  # noqa: E731
    assert codes(PROGRAM.replace("min: 2", "min: 0")) == ["GSR305"]  # the class's own check
    assert codes(PROGRAM.replace("min: 2", "min: \"two\"")) == ["GSR304"]  # the declared type
    assert codes(PROGRAM.replace("sentences(min: 2)", "sentences()")) == ["GSR202"]  # a required parameter
    assert codes(PROGRAM.replace("min: 2", "min: 2, sep: \".\"")) == ["GSR201"]
    assert codes(PROGRAM.replace("sentences(", "sentence(")) == ["GSR104"]  # unknown kind, with a suggestion
    assert "did you mean `sentences`" in analyze(PROGRAM.replace("sentences(", "sentence("), catalog=catalog) \
        .diagnostics[0].help


def test_every_reader_of_judge_kinds_sees_the_new_one(catalog):
    from gsrlang.commands.explain import explain_name
    from gsrlang.compiler.prompt import catalogue_text
    from gsrlang.lang.jsonform import json_to_source, program_to_json
    from gsrlang.lsp.hover import describe_judge_kind

    kind = judge_kinds(catalog)["sentences"]
    assert "judge sentences(min: Int, separator: String = \".\")" in catalogue_text(catalog)
    shown = explain_name("sentences", catalog)
    assert "Counts the response's sentences" in shown and "sentences(min: 3)" in shown
    hover = describe_judge_kind(kind)
    assert "separator: String" in hover and "Example: `criterion enough: Bool = sentences(min: 3)`" in hover
    program = analyze(PROGRAM, catalog=catalog).program
    source = json_to_source(program_to_json(program), catalog=catalog)
    assert "sentences(min: 2)" in source and analyze(source, catalog=catalog).ok


def test_the_builtin_kinds_are_declared_in_the_stdlib_and_all_registered():
    catalog = default_catalog()
    assert list(judge_kinds(catalog)) == list(catalog.judges) == ["llm", "human", "verifier", "rule"]
    # the drift the registry removes: the hover text for llm now lists on_disagree, from its signature
    from gsrlang.lsp.hover import describe_judge_kind

    assert "on_disagree: Disagreement" in describe_judge_kind(judge_kinds(catalog)["llm"])


# ---- missing-value sentinels ------------------------------------------------------------------------------
SENTINELS = """
rubric annotations
task pointwise { scale = 1..5 }
criterion q1: Ordinal[1..5]? = human(field: "q.Q1", missing: [0, "N/A"])
sink mean(items: [normalize(q1)], on_abstain: skip)
"""


@pytest.mark.parametrize("cell, status, value", [
    (0, "abstained", ABSTAIN), ("0", "abstained", ABSTAIN), (0.0, "abstained", ABSTAIN),
    ("n/a ", "abstained", ABSTAIN), ("N/A", "abstained", ABSTAIN), (3, "ok", "3"), (7, "invalid", None),
])
def test_missing_sentinels_are_abstentions(cell, status, value):
    program = analyze(SENTINELS).program
    run = asyncio.run(execute(program, _item("text", {"q": {"Q1": cell}}), default_registry()))
    judgment = run.judgments["q1"][0]
    assert (judgment.status, judgment.value) == (status, value)
    if status == "abstained":
        assert "not applicable" in judgment.reason


def test_without_missing_a_sentinel_is_invalid_as_before():
    program = analyze(SENTINELS.replace(', missing: [0, "N/A"]', "")).program
    run = asyncio.run(execute(program, _item("text", {"q": {"Q1": 0}}), default_registry()))
    assert run.judgments["q1"][0].status == "invalid"


# ---- comparisons ------------------------------------------------------------------------------------------
COMPARISONS = """
rubric levels
task pointwise { scale = 1..5 }
criterion q1: Ordinal[1..5]? = human(field: "q1")
criterion quality: Ordinal{poor, fair, good, great} = human(field: "quality")
criterion tone: Nominal{polite, neutral, rude} = human(field: "tone")
criterion ok: Bool = human(field: "ok")
node low = at_most(q1, 2)
node high = at_least(quality, level: good)
node rude = is(tone, rude)
node fine = is(ok, true)
sink mean(items: [normalize(low), normalize(high), normalize(rude), normalize(fine)], on_abstain: skip)
"""


@pytest.mark.parametrize("record, expected", [
    ({"q1": 1, "quality": "good", "tone": "rude", "ok": True}, (True, True, True, True)),
    ({"q1": 2, "quality": "great", "tone": "polite", "ok": False}, (True, True, False, False)),
    ({"q1": 3, "quality": "fair", "tone": "neutral", "ok": True}, (False, False, False, True)),
    ({"q1": None, "quality": "poor", "tone": "rude", "ok": True}, (ABSTAIN, False, True, True)),
])
def test_comparisons_read_like_the_rubric(record, expected):
    program = analyze(COMPARISONS).program
    run = asyncio.run(execute(program, _item("text", record), default_registry()))
    assert run.status == "ok", run.reason
    ids = [n.id for n in program.nodes]
    values = tuple(run.values[ids.index(n)][0] for n in ("low", "high", "rude", "fine"))
    assert values == expected


def test_explain_prints_an_operator_and_a_judge_kind(capsys):
    assert main(["explain", "cap"]) == 0
    out = capsys.readouterr().out
    assert "gate cap(base: Score, trigger: Bool; at: Score) -> Score" in out and "Example:" in out
    assert main(["explain", "human"]) == 0
    assert "missing: [Real | String] = none" in capsys.readouterr().out
    assert main(["explain", "capp"]) == 2
    assert "did you mean `cap`?" in capsys.readouterr().err
