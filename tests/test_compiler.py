"""The rubric compiler's API over real HTTP against the fake OpenAI-compatible server.

Synthesis, repair from diagnostics, recorded failures, answers with prose, timeouts,
the task contract check, constrained output, the compile cache, the prompt generated
from the catalogue, and the exclusion of candidates and labels by construction.
"""

from __future__ import annotations

import inspect
import json
import re

import attrs
import lark
import pytest
from conftest import EXAMPLES
from fakeserver import FakeOpenAI, Fault, Reply, scripted

from gsrlang.compiler import CompileSpec, Pairwise, Pointwise, SpecError
from gsrlang.compiler.batch import CompileFields, RefusedField, read_compile_items
from gsrlang.compiler.cache import CompileCache
from gsrlang.compiler.grammar import program_grammar
from gsrlang.compiler.prompt import build_prompt
from gsrlang.compiler.synthesize import (
    CompileFailure,
    CompilerClient,
    CompileSuccess,
    compile_rubric,
    extract_program,
)
from gsrlang.judges.llm import JudgeCallError, JudgeConfig, LLMClient
from gsrlang.lang.catalog import default_catalog, load_catalog
from gsrlang.lang.check.driver import analyze
from gsrlang.lang.resources import stdlib_dir

GOOD = (EXAMPLES / "summeval" / "relevance.gsr").read_text(encoding="utf-8")
# two different mistakes, then the right program
BAD_1 = GOOD.replace("normalize(coverage)", "normalise(coverage)").replace("sink final", "sink finale")
BAD_2 = GOOD.replace("at: 0.6)", "at: 1.6)")
RUBRIC = "RUBRIC-RELEVANCE: how well does the summary select the important content? Penalise redundancy."
SPEC = CompileSpec(rubric=RUBRIC, contract=Pointwise(scale=(1, 5)))


def block(program: str) -> str:
    return "```gsr\n" + program + "```\n"


def client_for(server: FakeOpenAI, **cfg) -> CompilerClient:
    config = JudgeConfig(model="fake-model", base_url=server.base_url, timeout_s=cfg.pop("timeout_s", 5.0), **cfg)
    return CompilerClient(config, backoff_base=0.001, backoff_cap=0.01)


def errors_of(program: str):
    return analyze(program).errors


# ---- synthesis and repair ------------------------------------------------------------------------------
async def test_valid_program_at_once_is_accepted_as_is():
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client)
    assert isinstance(result, CompileSuccess) and result.ok
    assert result.status == "compiled" and result.repairs == 0 and result.model_calls == 1
    assert result.source.endswith(GOOD)  # the accepted program, unchanged, after the header
    assert result.program.readout.pointwise.lo == 1 and result.program.readout.pointwise.hi == 5
    (body,) = server.requests
    assert "response_format" not in body  # a program is asked for as text, not JSON
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert user["content"].rstrip().endswith(RUBRIC)  # the prompt ends with the rubric
    assert "task pointwise { scale = 1..5  quantize = round }" in user["content"]


async def test_two_repairs_carry_the_previous_rounds_diagnostics():
    with FakeOpenAI(responder=scripted({RUBRIC: [block(BAD_1), block(BAD_2), block(GOOD)]})) as server:
        async with client_for(server) as client:
            seen = []
            result = await compile_rubric(SPEC, client, on_round=seen.append)
    assert result.ok and result.status == "repaired" and result.repairs == 2
    assert [r.accepted for r in seen] == [False, False, True]
    assert len(server.requests) == 3
    first_errors = errors_of(BAD_1)
    assert {d.code for d in first_errors} == {"GSR101", "GSR102"}
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "normalise(coverage)" in second[2]["content"]  # the previous program goes back
    feedback = second[3]["content"]
    for d in first_errors:  # codes and messages of round 0
        assert f"error[{d.code}]: {d.message}" in feedback
    assert "sink finale" in feedback and "help: did you mean `final`?" in feedback  # offending line, help
    third = server.requests[2]["messages"]
    assert third[2]["content"].count("at: 1.6") == 1 and "normalise" not in third[2]["content"]
    for d in errors_of(BAD_2):
        assert d.code in third[3]["content"] and d.message in third[3]["content"]
    assert result.codes == (*seen[0].codes, *seen[1].codes)


async def test_a_model_that_never_succeeds_is_a_recorded_failure():
    with FakeOpenAI(responder=scripted({RUBRIC: block(BAD_1)})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client, repairs=2)
    assert isinstance(result, CompileFailure) and not result.ok and result.status == "failed"
    assert len(server.requests) == 3 and len(result.rounds) == 3 and result.repairs == 2
    assert result.last_program == BAD_1
    assert {d.code for d in result.diagnostics} == {"GSR101", "GSR102"}
    assert "no valid program after 3 rounds" in result.reason and "GSR10" in result.reason


async def test_zero_repairs_means_one_call():
    with FakeOpenAI(responder=scripted({RUBRIC: block(BAD_1)})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client, repairs=0)
    assert not result.ok and len(server.requests) == 1


async def test_prose_around_a_code_block():
    answer = ("Sure! The rubric has two qualities and a hard rule, so:\n\n" + block(GOOD)
              + "\nThe cap keeps unsupported summaries below the top score. Let me know!")
    with FakeOpenAI(responder=scripted({RUBRIC: answer})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client)
    assert result.ok and result.repairs == 0 and result.source.endswith(GOOD)


async def test_an_answer_without_a_program_is_a_round_not_a_crash():
    with FakeOpenAI(responder=scripted({RUBRIC: ["", "I cannot write programs.", block(GOOD)]})) as server:
        server.enqueue(Fault.refusal("I won't."))
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client, repairs=3)
    assert result.ok and result.repairs == 3
    refusal, empty, prose, good = result.rounds
    assert refusal.codes == ("GSR900",) and "refused" in refusal.problem
    assert empty.codes == ("GSR900",) and empty.program is None
    assert prose.program is not None and "GSR001" in prose.codes  # prose is read as a program: syntax errors
    assert "Your answer held no program: the model refused: I won't." in server.requests[1]["messages"][-1]["content"]
    assert server.requests[2]["messages"][2]["content"] == "(an empty answer)"


async def test_timeout_is_a_clear_error():
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        server.enqueue(Fault.timeout(5), Fault.timeout(5))
        async with client_for(server, timeout_s=0.3, max_retries=1) as client:
            with pytest.raises(JudgeCallError) as info:
                await compile_rubric(SPEC, client)
    assert info.value.kind == "timeout" and "timed out after 0.3s" in str(info.value)
    assert len(server.requests) == 2


async def test_task_contract_mismatch_is_fed_back_like_a_diagnostic():
    ten = GOOD.replace("scale = 1..5", "scale = 0..10")
    with FakeOpenAI(responder=scripted({RUBRIC: [block(ten), block(GOOD)]})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client)
    assert result.ok and result.repairs == 1
    assert result.rounds[0].codes == ("GSR901",)
    feedback = server.requests[1]["messages"][-1]["content"]
    assert "error[GSR901]: the pointwise scale is 0..10; the compile spec requires 1..5" in feedback
    assert "task pointwise { scale = 0..10" in feedback  # the offending line


async def test_a_fragment_that_checks_clean_is_not_accepted_as_a_program():
    """SmolLM2-135M under the program grammar once answered a task block then a fragment header: it checked
    clean, yet it is no program (and no file that gsr run can run); the compiler feeds that back."""
    fragment = 'fragment listing "recipe checklist"\ncriterion complete: Bool { ask "Is every ingredient listed?" }\n'
    assert errors_of(fragment) == ()
    with FakeOpenAI(responder=scripted({RUBRIC: [block(fragment), block(GOOD)]})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client)
    assert result.ok and result.repairs == 1
    assert result.rounds[0].codes == ("GSR901",) and not result.rounds[0].accepted
    feedback = server.requests[1]["messages"][-1]["content"]
    assert "error[GSR901]: the answer is a fragment, not a program" in feedback
    assert 'head the file `rubric NAME "..."`, declare `task pointwise' in feedback


async def test_pairwise_contract():
    pairwise = (EXAMPLES / "mtbench" / "pairwise.gsr").read_text(encoding="utf-8")
    spec = CompileSpec(rubric=RUBRIC, contract=Pairwise(epsilon=0.05, on_tie="tie"))
    with FakeOpenAI(responder=scripted({RUBRIC: [block(pairwise), block(pairwise.replace("0.04", "0.05"))]})) as srv:
        async with client_for(srv) as client:
            result = await compile_rubric(spec, client)
    assert result.ok and result.repairs == 1
    assert "the pairwise epsilon is 0.04; the compile spec requires 0.05" in result.rounds[0].diagnostics[0].message
    assert "task pairwise { epsilon = 0.05  on_tie = tie }" in srv.requests[0]["messages"][1]["content"]


# ---- provenance -----------------------------------------------------------------------------------------
async def test_provenance_header():
    with FakeOpenAI(responder=scripted({RUBRIC: [block(BAD_1), block(GOOD)]})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client)
    header = result.source[: result.source.index(GOOD)]
    lines = header.strip().splitlines()
    assert all(line.startswith("# ") for line in lines)
    fields = dict(line[2:].split(": ", 1) for line in lines[1:])
    assert fields["rubric-sha256"] == SPEC.rubric_sha256 and len(fields["rubric-sha256"]) == 64
    assert fields["spec-sha256"] == SPEC.sha256
    assert fields["contract"] == "task pointwise { scale = 1..5  quantize = round }"
    assert fields["model"] == "fake-model" and fields["repair-rounds"] == "1"
    assert fields["date"].endswith("Z") and fields["date"][:4].isdigit() and "T" in fields["date"]
    final = analyze(result.source)
    assert final.ok and not final.errors and final.program == result.program


# ---- candidates and labels cannot be passed ------------------------------------------------------------
def test_compile_spec_has_no_field_for_a_response_or_a_label():
    assert [a.name for a in attrs.fields(CompileSpec)] == ["rubric", "contract", "task_input", "reference"]
    for bad in ("response", "responses", "candidates", "label", "gold"):
        with pytest.raises(TypeError):
            CompileSpec(rubric="r", contract=Pointwise(scale=(1, 5)), **{bad: "x"})
    with pytest.raises(AttributeError):
        SPEC.response = "x"  # frozen and slotted: nothing can be attached
    with pytest.raises(TypeError):
        CompileSpec(rubric="r", contract="pointwise")
    with pytest.raises(TypeError):
        CompileSpec(rubric="r", contract=Pointwise(scale=(1, 5)), reference=["a", "b"])
    with pytest.raises(SpecError):
        CompileSpec(rubric="   ", contract=Pointwise(scale=(1, 5)))


async def test_compile_entry_points_reject_candidates():
    params = inspect.signature(compile_rubric).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    assert not any(word in name for name in params for word in ("response", "candidate", "label", "gold"))
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        async with client_for(server) as client:
            for bad in ({"response": "an answer"}, {"candidates": ["a", "b"]}, {"label": 5}):
                with pytest.raises(TypeError):
                    await compile_rubric(SPEC, client, **bad)
            with pytest.raises(TypeError):  # anything but a CompileSpec, e.g. a data item with responses
                await compile_rubric({"rubric": RUBRIC, "response": "x"}, client)
    assert server.requests == []  # nothing reached the model
    with pytest.raises(TypeError):
        build_prompt({"rubric": RUBRIC})


def test_batch_fields_cannot_name_responses_or_labels(tmp_path):
    for column in ("response", "response_a", "output_2", "label", "gold", "winner", "human_score", "x.response"):
        with pytest.raises(RefusedField):
            CompileFields(rubric=column)
        with pytest.raises(RefusedField):
            CompileFields(rubric="rubric", input=column)
    assert [a.name for a in attrs.fields(CompileFields)] == ["rubric", "input", "reference", "id"]
    data = tmp_path / "items.jsonl"
    data.write_text(json.dumps({"id": "q1", "input": "Q", "rubric": "R", "response": "SECRET-RESPONSE",
                                "label": "SECRET-LABEL"}) + "\n", encoding="utf-8")
    (item,) = read_compile_items(data, CompileFields(rubric="rubric", input="input"), Pointwise(scale=(1, 5)))
    assert item.id == "q1" and item.spec.rubric == "R" and item.spec.task_input == "Q"
    assert "SECRET" not in repr(item)  # the row was cut down to the compile columns


# ---- the prompt ------------------------------------------------------------------------------------------
def test_prompt_catalogue_is_generated_from_the_stdlib():
    catalog = load_catalog(stdlib_dir(), extra_sources={
        "extra.gsr": "# Squares the score: a made-up operator for this test.\ntransform squash(x: Score) -> Score\n"})
    prompt = build_prompt(SPEC, catalog)
    assert "transform squash(x: Score) -> Score" in prompt.system
    assert "# Squares the score: a made-up operator for this test." in prompt.system
    plain = build_prompt(SPEC)
    assert "squash" not in plain.system and plain.sha256 != prompt.sha256
    for sig in [*default_catalog().operators.values(), *default_catalog().rules.values()]:
        assert sig.signature() in plain.system
    assert "enum Abstain { skip, zero, partial, fail }" in plain.system
    # the hand-written catalogue block of docs/language.md is replaced, not repeated
    assert plain.system.count("transform normalize(x: Ordinal | Bool) -> Score") == 1
    assert "Refinements of the proposal" not in plain.system
    assert plain.system.count("```gsr") >= 4  # the catalogue and the example programs
    assert "rubric mt_bench_preference" in plain.system and "rubric helpfulness" in plain.system


async def test_the_checker_uses_the_same_catalogue():
    catalog = load_catalog(stdlib_dir(), extra_sources={"extra.gsr": "transform squash(x: Score) -> Score\n"})
    program = GOOD.replace("node final = cap(", "node final0 = cap(") + "node final = squash(final0)\n"
    program = program.replace("sink final\n", "") + "sink final\n"
    with FakeOpenAI(responder=scripted({RUBRIC: block(program)})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client, catalog=catalog)
    assert result.ok, result.rounds[-1].diagnostics


def test_prompt_sections_in_order():
    spec = CompileSpec(rubric=RUBRIC, contract=Pointwise(scale="1..5"), task_input="TASK-INPUT",
                       reference="REFERENCE-TEXT")
    user = build_prompt(spec).user
    order = [user.index(s) for s in ("## Task input", "TASK-INPUT", "## Reference", "REFERENCE-TEXT",
                                     "## Task contract", "## Rubric", RUBRIC)]
    assert order == sorted(order)


# ---- reading answers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, expected", [
    ("rubric a\nsink 1.0\n", "rubric a\nsink 1.0\n"),
    ("text\n```gsr\nrubric a\n```\nmore", "rubric a\n"),
    ("```\nrubric a\n```", "rubric a\n"),
    ("```python\nx = 1\n```\n```gsr\nrubric b\n```", "rubric b\n"),
    ("```gsr\nrubric draft\n```\nbetter:\n```gsr\nrubric final\n```", "rubric final\n"),
    ("<think>```gsr\nrubric no\n```</think>```gsr\nrubric yes\n```", "rubric yes\n"),
    ("cut off:\n```gsr\nrubric partial\n", "rubric partial\n"),
])
def test_extract_program(answer, expected):
    assert extract_program(answer) == (expected, None)


@pytest.mark.parametrize("answer", [None, "", "  \n", "```gsr\n```"])
def test_extract_program_none(answer):
    program, problem = extract_program(answer)
    assert program is None and problem


# ---- constrained output ------------------------------------------------------------------------------
def test_program_grammar_is_derived_from_the_parsers_grammar():
    grammar = program_grammar()
    assert "op_decl" not in grammar and "(?=" not in grammar and "(?!" not in grammar
    assert not re.search(r"->\s*[a-z_]", grammar) and not re.search(r"^\?", grammar, re.M)  # no aliases, no ?rule
    parser = lark.Lark(grammar, parser="earley")
    for path in sorted(EXAMPLES.glob("*/*.gsr")):
        parser.parse(path.read_text(encoding="utf-8"))
    with pytest.raises(lark.exceptions.LarkError):
        parser.parse("transform f(x: Score) -> Score")  # stdlib signatures are not programs


@pytest.mark.parametrize("field", ["structured_outputs", "guided_grammar"])
async def test_constrain_grammar_sends_the_grammar(field):
    with FakeOpenAI(responder=scripted({RUBRIC: GOOD})) as server:  # a constrained answer is the bare program
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client, constrain="grammar", grammar_field=field)
    assert result.ok
    body = server.requests[0]
    grammar = body["structured_outputs"]["grammar"] if field == "structured_outputs" else body["guided_grammar"]
    assert grammar == program_grammar() and "response_format" not in body


async def test_constrain_grammar_rejected_by_the_server():
    with FakeOpenAI(responder=scripted({RUBRIC: GOOD})) as server:
        server.enqueue(Fault.status(400, message="Unrecognized request argument supplied: structured_outputs"))
        async with client_for(server) as client:
            with pytest.raises(JudgeCallError) as info:
                await compile_rubric(SPEC, client, constrain="grammar")
    assert "--constrain grammar" in str(info.value)


async def test_constrain_json_sketch_form_and_the_checker_decides():
    sketch = {
        "name": "relevance", "description": "How relevant is the summary?",
        "criteria": [
            {"name": "coverage", "type": "Ordinal[1..5]", "ask": "How many key points are covered?",
             "levels": [{"key": "1", "text": "none"}, {"key": "5", "text": "all"}]},
            {"name": "unsupported", "type": "Bool", "ask": "Does it say something the source does not?"},
            {"name": "rambling", "type": "Bool", "procedure": "rule.word_count(above: 300)"},
        ],
        "nodes": [{"name": "body", "expr": "normalize(coverage)"},
                  {"name": "capped", "expr": "cap(base: body, trigger: unsupported, at: 0.5)"},
                  {"name": "final", "expr": "cap(base: capped, trigger: rambling, at: 0.75)"}],
        "sink": "final",
    }
    broken = {**sketch, "sink": "finale"}
    with FakeOpenAI(responder=scripted({RUBRIC: [broken, sketch]})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client, constrain="json", json_form="sketch")
    assert result.ok and result.repairs == 1 and result.rounds[0].codes == ("GSR101",)
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and "criteria" in fmt["json_schema"]["schema"]["properties"]
    assert "task pointwise { scale = 1..5  quantize = round }" in result.source


async def test_constrain_json_project_form():
    from gsrlang.compiler import jsonmode

    if jsonmode._project_schema() is None:
        pytest.skip("the project's JSON form (gsrlang/lang/jsonform.py, docs/program.schema.json) is not installed")
    import gsrlang.lang.jsonform as jsonform
    doc = jsonform.program_to_json(analyze(GOOD).program)
    broken = {**doc, "sink": "finale"}
    with FakeOpenAI(responder=scripted({RUBRIC: [broken, doc]})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client, constrain="json", json_form="project")
    assert result.ok and result.repairs == 1 and result.rounds[0].codes == ("GSR900",)
    assert "sink: unknown node 'finale'" in server.requests[1]["messages"][-1]["content"]
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["format"] == {"const": "gsr-program"}
    assert result.program.to_json() == analyze(GOOD).program.to_json()


# ---- the compile cache -------------------------------------------------------------------------------
async def test_cache_makes_recompiling_free(tmp_path):
    with FakeOpenAI(responder=scripted({RUBRIC: [block(BAD_1), block(GOOD)]})) as server:
        with CompileCache(tmp_path / "compile.sqlite") as cache:
            async with client_for(server) as client:
                first = await compile_rubric(SPEC, client, cache=cache)
                again = await compile_rubric(SPEC, client, cache=cache)
        assert len(server.requests) == 2
        assert again.cached and not first.cached and again.model_calls == 0
        assert again.source == first.source and again.rounds == first.rounds and again.status == "repaired"
        with CompileCache(tmp_path / "compile.sqlite") as cache:  # the next process
            async with client_for(server) as client:
                third = await compile_rubric(SPEC, client, cache=cache)
                assert third.cached and len(server.requests) == 2
                # a different S is another compile
                other = CompileSpec(rubric=RUBRIC, contract=Pointwise(scale=(1, 5)), task_input="another task")
                await compile_rubric(other, client, cache=cache)
        assert len(server.requests) == 3


async def test_cached_failures_are_reused_only_for_the_same_budget(tmp_path):
    with FakeOpenAI(responder=scripted({RUBRIC: block(BAD_1)})) as server:
        with CompileCache(tmp_path / "compile.sqlite") as cache:
            async with client_for(server) as client:
                await compile_rubric(SPEC, client, repairs=1, cache=cache)
                again = await compile_rubric(SPEC, client, repairs=1, cache=cache)
                assert again.cached and not again.ok and len(server.requests) == 2
                await compile_rubric(SPEC, client, repairs=2, cache=cache)
                assert len(server.requests) == 5


# ---- misuse ----------------------------------------------------------------------------------------------
async def test_bad_arguments():
    with FakeOpenAI() as server:
        async with client_for(server) as client:
            with pytest.raises(ValueError):
                await compile_rubric(SPEC, client, repairs=-1)
            with pytest.raises(ValueError):
                await compile_rubric(SPEC, client, constrain="regex")
        config = JudgeConfig(model="fake-model", base_url=server.base_url)
        async with LLMClient(config) as plain:  # asks for JSON: not a program
            with pytest.raises(TypeError, match="CompilerClient"):
                await compile_rubric(SPEC, plain)
    for scale in ("5..1", "abc", (1, 1), (1, float("nan"))):
        with pytest.raises(SpecError):
            Pointwise(scale=scale)
    with pytest.raises(SpecError):
        Pairwise(epsilon=1.0)
    with pytest.raises(SpecError):
        Pointwise(scale=(1, 5), quantize="nearest")


async def test_plain_client_in_text_mode_also_works():
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        config = JudgeConfig(model="fake-model", base_url=server.base_url, structured="off")
        async with LLMClient(config) as plain:
            result = await compile_rubric(SPEC, plain)
    assert result.ok


async def test_answer_cut_off_at_max_tokens():
    cut = Reply(content="```gsr\nrubric relevance \"x\"\ncriterion a: Bool {", finish_reason="length")
    with FakeOpenAI(responder=scripted({RUBRIC: [cut, block(GOOD)]})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(SPEC, client)
    assert result.ok and result.rounds[0].finish_reason == "length" and "GSR001" in result.rounds[0].codes


async def test_thresholds_contract_lets_the_model_choose_cut_points():
    spec = CompileSpec(rubric=RUBRIC, contract=Pointwise(scale=(1, 5), quantize="thresholds"))
    assert spec.contract.task_line() == "task pointwise { scale = 1..5  quantize = thresholds(...) }"
    cuts = GOOD.replace("quantize = round", "quantize = thresholds(0.2, 0.4, 0.6, 0.8)")
    with FakeOpenAI(responder=scripted({RUBRIC: [block(GOOD), block(cuts)]})) as server:
        async with client_for(server) as client:
            result = await compile_rubric(spec, client)
    assert result.ok and result.repairs == 1
    assert "quantizes with `round`; the compile spec requires `thresholds`" in result.rounds[0].diagnostics[0].message
    assert result.program.readout.pointwise.thresholds == (0.2, 0.4, 0.6, 0.8)
