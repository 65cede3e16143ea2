"""The Python API (gsrlang.load / Program.score / compile_rubric) and the reward adapter, against the fake
OpenAI-compatible server over real HTTP; docs/python.md's examples are run as written."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gsrlang
from gsrlang.cli import main

try:
    from fakeserver import FakeOpenAI, scripted
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI, scripted

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"
HELPSTEER = ROOT / "examples" / "helpsteer2" / "helpfulness.gsr"
ROW = json.loads((TC / "data" / "dev.jsonl").read_text(encoding="utf-8").splitlines()[0])


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


@pytest.fixture
def judges(server):
    with gsrlang.Judges(model="judge", base_url=server.base_url, api_key="k", concurrency=8) as j:
        yield j


def test_docs_python_examples_run(server, monkeypatch, capsys):
    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 7
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block.replace("http://localhost:8000/v1", server.base_url), "docs/python.md", "exec"),
             namespace)
    out = capsys.readouterr().out
    assert "GSR101 unknown name `missing`" in out and "a pointwise item has 1 response, got 0" in out
    namespace["judges"].close()


def test_load_gives_a_checked_program_and_scores_like_gsr_run(tmp_path, capsys):
    program = gsrlang.load(TC / "overall.gsr")
    result = program.score(record=ROW, id=ROW["id"])
    assert result.ok and result.line["id"] == "tc-000"
    # the same item through gsr run gives the same result line and trace record
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    out, trace = tmp_path / "r.jsonl", tmp_path / "t.jsonl"
    assert main(["run", str(TC / "overall.gsr"), "--data", str(data), "--id-field", "id", "--out",
                             str(out), "--trace", str(trace), "-q"]) == 0
    line = json.loads(out.read_text().splitlines()[0])
    from gsrlang.trace.read import read_trace

    _, record = next(read_trace(trace))  # the logical record (the file holds a header, then lean records)
    assert {k: v for k, v in line.items() if k != "line"} == {k: v for k, v in result.line.items() if k != "line"}
    assert record["nodes"] == result.trace["nodes"] and record["readout"] == result.trace["readout"]


def test_the_trace_record_replays(tmp_path, capsys):
    program = gsrlang.load(str(TC / "overall.gsr"))
    results = program.score_batch([{**ROW}])
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(results[0].trace) + "\n", encoding="utf-8")
    assert main(["replay", str(trace)]) == 0
    assert "reproduced exactly" in capsys.readouterr().out


def test_program_errors_carry_the_diagnostics(tmp_path):
    with pytest.raises(gsrlang.ProgramError) as info:
        gsrlang.loads('rubric r "r"\ntask pointwise { scale = 1..5 }\ncriterion a: Bool { ask "?" }\n'
                      'sink normalize(b)\n', "p.gsr")
    assert [d.code for d in info.value.diagnostics] == ["GSR101"] and "p.gsr:4:" in str(info.value)
    with pytest.raises(gsrlang.ProgramError, match="cannot read .*nothing.gsr"):
        gsrlang.load(tmp_path / "nothing.gsr")
    assert issubclass(gsrlang.ProgramError, gsrlang.GsrError)


def test_llm_program_without_a_model_is_a_judge_error():
    program = gsrlang.load(HELPSTEER)
    with gsrlang.Judges() as judges, pytest.raises(gsrlang.JudgeError, match="judged by a model"):
        program.score(input="q", response="a", judges=judges)


def test_bad_arguments_are_input_errors(judges):
    program = gsrlang.load(HELPSTEER)
    with pytest.raises(gsrlang.InputError, match="a pointwise item has 1 response, got 0"):
        program.score(input="q", judges=judges)
    with pytest.raises(gsrlang.InputError, match="`response` must be a str"):
        program.score(input="q", response=3, judges=judges)
    with pytest.raises(gsrlang.InputError, match="batch row 1"):
        program.score_batch([{"input": "q", "response": "a"}, {"input": "q"}], judges=judges)
    with pytest.raises(ValueError):  # an InputError is a ValueError too
        program.score(input="q", responses=("a", "b", "c"), judges=judges)


def test_score_ascore_and_batch_agree_and_share_the_client(server, judges):
    server.latency = 0.05
    program = gsrlang.load(HELPSTEER)
    one = program.score(input="q", response="a", judges=judges)
    calls_one = judges.usage()["llm"]["calls"]
    asked = [n for n in one.trace["nodes"] if n["kind"] == "criterion" and n["procedure"].startswith("llm")
             and n["judgments"][0]["status"] != "skipped"]  # short-circuit judging: what could change the result
    assert calls_one == len(asked) > 0
    rows = [{"input": "q", "response": f"answer {i}"} for i in range(6)]

    async def both():
        return await program.ascore(input="q", response="a", judges=judges), await program.ascore_batch(
            rows, judges=judges)

    again, many = asyncio.run(both())
    batch = program.score_batch(rows, judges=judges)
    assert again.line == one.line and len(many) == 6 and [r.line for r in many] == [r.line for r in batch]
    # one client served every call: the server saw concurrent requests from the batch
    assert server.max_in_flight > 1


def test_pairwise_program(judges):
    program = gsrlang.load(ROOT / "examples" / "mtbench" / "pairwise.gsr")
    result = program.score(input="q", responses=("first answer", "second answer"), judges=judges)
    assert result.mode == "pairwise" and (result.winner in ("first", "second", "tie") or not result.ok)


def test_reward_function_has_trl_shape_and_runs_concurrently(server):
    from gsrlang.reward import RewardFunction

    server.latency = 0.05
    program = gsrlang.load(HELPSTEER)
    with gsrlang.Judges(model="judge", base_url=server.base_url, api_key="k", concurrency=16) as judges:
        reward = gsrlang.reward_function(program, judges, reference_column="answer")
        assert isinstance(reward, RewardFunction) and reward.__name__ == "gsr_helpfulness"
        prompts = [[{"role": "user", "content": f"question {i}"}] for i in range(8)]
        completions = [[{"role": "assistant", "content": f"completion {i}"}] for i in range(8)]
        rewards = reward(prompts=prompts, completions=completions, answer=[f"ref {i}" for i in range(8)],
                         completion_ids=[[1, 2]] * 8)
        assert len(rewards) == 8 and all(isinstance(r, float) and 0.0 <= r <= 1.0 for r in rewards)
        assert server.max_in_flight > 1  # the batch ran concurrently
        prompts_seen = [r.prompt for r in server.requests]
        assert any("question 3" in p and "completion 3" in p and "ref 3" in p for p in prompts_seen)
        native = gsrlang.reward_function(program, judges, scale="native")(prompts=["q"], completions=["a"])
        lo, hi = program.checked.readout.pointwise.lo, program.checked.readout.pointwise.hi
        assert lo <= native[0] <= hi


def test_reward_failures_get_the_documented_value(server):
    server.responder = lambda body: "this is not JSON at all"
    program = gsrlang.load(HELPSTEER)
    with gsrlang.Judges(model="judge", base_url=server.base_url, api_key="k", max_retries=0) as judges:
        rewards = gsrlang.reward_function(program, judges)(prompts=["q", "r"], completions=["a", "b"])
        assert rewards == [0.0, 0.0]
        fn = gsrlang.reward_function(program, judges, failure_value=None)
        assert fn(prompts=["q"], completions=["a"]) == [None]
        assert fn.last_results[0].status == "invalid" and fn.last_results[0].reason


def test_reward_refuses_pairwise_programs_and_ragged_columns(judges):
    with pytest.raises(gsrlang.InputError, match="no pointwise task"):
        gsrlang.reward_function(ROOT / "examples" / "mtbench" / "pairwise.gsr", judges)
    reward = gsrlang.reward_function(HELPSTEER, judges)
    with pytest.raises(gsrlang.InputError, match="column 'answer': expected a list of 2"):
        reward(prompts=["a", "b"], completions=["x", "y"], answer=["only one"])


def test_compile_rubric_against_the_fake_server(server):
    good = (TC / "flat.gsr").read_text(encoding="utf-8")
    server.responder = lambda body: "```gsr\n" + good + "\n```"
    program = gsrlang.compile_rubric("Rate the response overall.", scale=(1, 5), model="m",
                                     base_url=server.base_url, api_key="k", repairs=0)
    assert isinstance(program, gsrlang.Program) and program.name == "topical_chat_flat"
    server.responder = lambda body: "```gsr\nrubric broken\n```"
    with pytest.raises(gsrlang.CompileError) as info:
        gsrlang.compile_rubric("Rate it.", model="m", base_url=server.base_url, api_key="k", repairs=0)
    assert info.value.diagnostics
    with pytest.raises(gsrlang.JudgeError):
        gsrlang.compile_rubric("Rate it.")


def test_compile_rubric_runs_where_an_event_loop_is_running(server):
    """A notebook calls it with a loop already running: it compiles on a thread of its own, errors come back."""
    import asyncio

    good = (TC / "flat.gsr").read_text(encoding="utf-8")

    async def inside():
        server.responder = lambda body: "```gsr\n" + good + "\n```"
        program = gsrlang.compile_rubric("Rate it.", model="m", base_url=server.base_url, api_key="k", repairs=0)
        server.responder = lambda body: "```gsr\nrubric broken\n```"
        with pytest.raises(gsrlang.CompileError):
            gsrlang.compile_rubric("Rate it.", model="m", base_url=server.base_url, api_key="k", repairs=0)
        return program

    assert asyncio.run(inside()).name == "topical_chat_flat"


def test_import_is_light_and_check_imports_no_network_client():
    code = ("import sys, gsrlang; from gsrlang.cli import main; main(['check', sys.argv[1]]); "
            "heavy = [m for m in ('openai', 'httpx', 'gsrlang.api', 'gsrlang.reward', 'graphviz') if m in sys.modules];"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code, str(TC / "overall.gsr")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_score_takes_the_records_id_as_gsr_run_does():
    """Issue 26: `program.score(record=row)` ignored the row's `id`; an explicit id still wins."""
    program = gsrlang.load(TC / "overall.gsr")
    assert program.score(record=ROW).line["id"] == ROW["id"]
    assert program.score(record=ROW, id="mine").line["id"] == "mine"
    assert program.score(record={k: v for k, v in ROW.items() if k != "id"}).line["id"] == "0"
