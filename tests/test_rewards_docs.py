"""docs/rewards.md's TRL, OpenRLHF and veRL snippets, run as written against a `gsr serve` (the trainers are
not installed: the adapters are thin clients, called here the way each trainer calls them); and the
adapters' own behaviour: columns, steps, tokens, errors."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

import pytest

import gsrlang
from gsrlang.rewards import ServerError, acompute_score, compute_score_batch, trl_reward
from gsrlang.trace.read import read_trace

from fakeserver import FakeOpenAI
from servehelp import MODEL_PROGRAM, model_answer, no_model_settings, serving  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "rewards.md"


@pytest.fixture
def served(tmp_path, monkeypatch):
    program = tmp_path / "served.gsr"
    program.write_text(MODEL_PROGRAM, encoding="utf-8")
    with FakeOpenAI(responder=model_answer) as fake:
        with serving(program, "--model", "judge", "--base-url", fake.base_url, "--api-key", "k", "--no-cache",
                     "--trace", str(tmp_path / "t.jsonl")) as s:
            s.fake = fake
            s.trace = tmp_path / "t.jsonl"
            yield s


def test_the_docs_snippets_run(served, monkeypatch, capsys):
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 4  # TRL (two), OpenRLHF, veRL
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block.replace("http://127.0.0.1:8080", served.url), "docs/rewards.md", "exec"), namespace)
    assert "{'gsr_ok': [1.0, 1.0]}" in capsys.readouterr().out
    assert len(served.fake.requests) > 0  # scored by the model judge, through the server


def test_the_docs_command_lines_parse():
    from gsrlang.cli import build_parser

    text = DOC.read_text(encoding="utf-8")
    lines = [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()
             if line.strip().startswith("gsr serve ")]
    assert len(lines) >= 3
    for line in lines:
        args = build_parser("serve").parse_args(shlex.split(line)[1:])
        assert args.program == "rubric.gsr"


def test_trl_columns_reference_and_step(served):
    class State:  # what TRL passes as trainer_state
        global_step = 300

    reward = trl_reward(served.url, reference_column="answer", name="gsr_helpful")
    assert reward.__name__ == "gsr_helpful"
    rewards = reward(prompts=["Q1", "Q2"], completions=["q=5 a", "q=1 b"], answer=["ref one", None],
                     level=["easy", "hard"], completion_ids=[[1], [2]], trainer_state=State(),
                     log_extra=lambda *a: None, log_metric=lambda *a: None)
    assert rewards[0] > rewards[1]
    prompts = [r.prompt for r in served.fake.requests]
    assert any("ref one" in p and "q=5 a" in p for p in prompts)
    # the trainer's step is in the trace's item ids
    served.engine.sink.flush()
    ids = [r["item"]["id"] for _, r in read_trace(served.trace)]
    # within a request the records come in the order the items finished (docs/rewards.md), not the request's
    assert sorted(ids[:2]) == ["300/r1/0", "300/r1/1"]


def test_trl_in_process_reward_takes_trls_own_keywords(tmp_path):
    """TRL passes trainer_state, log_extra and log_metric (not lists): the in-process reward leaves them out."""
    program = tmp_path / "p.gsr"
    program.write_text(MODEL_PROGRAM, encoding="utf-8")
    with FakeOpenAI(responder=model_answer) as fake, \
            gsrlang.Judges(model="judge", base_url=fake.base_url, api_key="k") as judges:
        reward = gsrlang.reward_function(str(program), judges)
        rewards = reward(prompts=["q"], completions=["q=4 x"], completion_ids=[[1]], trainer_state=object(),
                         log_extra=print, log_metric=print)
        assert rewards == [0.875]


def test_a_request_the_server_refuses_raises_server_error_naming_the_field(served):
    reward = trl_reward(served.url, deadline_s=-1)
    with pytest.raises(ServerError) as caught:
        reward(prompts=["q"], completions=["a"])
    assert caught.value.status == 400 and caught.value.field == "deadline_s"
    with pytest.raises(ValueError, match="reference column 'answer' was not passed"):
        trl_reward(served.url, reference_column="answer")(prompts=["q"], completions=["a"])


def test_an_unreachable_server_is_a_server_error():
    reward = trl_reward("http://127.0.0.1:9", timeout=5)  # the discard port: nothing listens there
    reward.client.retries = 0
    with pytest.raises(ServerError, match="cannot reach the reward server"):
        reward(prompts=["q"], completions=["a"])


def test_the_token_travels(tmp_path, monkeypatch):
    from servehelp import RULES_PROGRAM

    program = tmp_path / "rules.gsr"
    program.write_text(RULES_PROGRAM, encoding="utf-8")
    monkeypatch.setenv("REWARD_TOKEN", "tok-123")
    with serving(program, "--token-env", "REWARD_TOKEN") as s:
        assert trl_reward(s.url, token_env="REWARD_TOKEN")(prompts=["q"], completions=["one two three four"]) \
            == [2 / 3]
        monkeypatch.setenv("OTHER", "wrong")
        with pytest.raises(ServerError) as caught:
            trl_reward(s.url, token_env="OTHER")(prompts=["q"], completions=["x"])
        assert caught.value.status == 401


def test_verl_async_and_batch_forms(served):
    one = asyncio.run(acompute_score("primes", "q=5 seven", "7", {"prompt": "Name a prime."}, url=served.url))
    many = compute_score_batch(["primes", "primes"], ["q=5 seven", "q=1 nine"], ["7", "7"],
                               [{"prompt": "Name a prime."}, {"question": "Name a prime.", "arr": object()}],
                               url=served.url, failure_value=None)
    assert one == many[0] and many[0]["score"] > many[1]["score"] and many[1]["gsr_ok"] == 1.0
    prompts = [r.prompt for r in served.fake.requests]
    assert all("Name a prime." in p for p in prompts)
    with pytest.raises(ValueError, match="no reward server"):
        compute_score_batch(["x"], ["y"], ["z"], [{}])


def test_judges_concurrency_is_also_the_model_clients(tmp_path):
    """`Judges(concurrency=16)` lets 16 model calls be in flight, not the model client's default 8."""
    program = tmp_path / "p.gsr"
    program.write_text(MODEL_PROGRAM, encoding="utf-8")
    with FakeOpenAI(responder=model_answer, latency=0.3) as fake, \
            gsrlang.Judges(model="judge", base_url=fake.base_url, api_key="k", concurrency=16) as judges:
        rewards = gsrlang.reward_function(str(program), judges)(prompts=["q"] * 12,
                                                                  completions=[f"q={i % 5 + 1} {i}" for i in range(12)])
        assert len(rewards) == 12
        assert 8 < fake.max_in_flight <= 16
