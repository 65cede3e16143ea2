"""Probability-weighted verdicts (G-Eval) against the fake server's logprobs."""

from __future__ import annotations

import json
import math

import pytest
from fakeserver import Reply
from runfiles import records

from gsrlang.cli import main
from gsrlang.judges.llm.weighted import eligible, read_weighted
from gsrlang.lang.types import JType

PROGRAM = '''\
rubric weighted "A weighted Score"
task pointwise { scale = 1..5  quantize = none }
criterion clarity: Score[1..5] = llm(weighted: true) {
  ask "How clear is the response?"
  level 1 "Confusing"
  level 5 "Very clear"
}
sink scale(clarity)
'''

TOKENS = ['{"', "reason", '":', ' "', "fine", '",', ' "', "answer", '":', " ", "4", "}"]


def answer_with_logprobs(body: dict) -> Reply:
    assert body["logprobs"] is True and body["top_logprobs"] == 10
    assert body["response_format"]["json_schema"]["schema"]["properties"]["answer"] == {
        "type": "integer", "enum": [1, 2, 3, 4, 5]}
    top = [("4", math.log(0.6)), ("5", math.log(0.3)), ("3", math.log(0.05)), ("x", math.log(0.05))]
    content = [{"token": t, "logprob": -0.1, "bytes": None,
                "top_logprobs": [{"token": c, "logprob": lp, "bytes": None} for c, lp in (top if t == "4" else
                                                                                          [(t, -0.1)])]}
               for t in TOKENS]
    return Reply(content="".join(TOKENS), logprobs={"content": content})


@pytest.fixture(autouse=True)
def clean_env(model_env, tmp_path):
    (tmp_path / "p.gsr").write_text(PROGRAM)
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "input": "q", "response": "r"}) + "\n")


def run(server, *extra) -> int:
    return main(["run", "p.gsr", "--data", "d.jsonl", "--mode", "pointwise", "--model", "fake-model", "--base-url",
                 server.base_url, "--trace", "t.jsonl", "--out", "r.jsonl", "--no-progress", *extra])


def trace_judgment(path="t.jsonl") -> dict:
    from gsrlang.trace.read import read_trace

    _, rec = next(read_trace(path))
    (node,) = [n for n in rec["nodes"] if n["id"] == "clarity"]
    return node["judgments"][0]


def test_the_verdict_is_the_expected_point_over_the_answer_tokens_probabilities(capsys):
    from fakeserver import FakeOpenAI

    with FakeOpenAI(responder=answer_with_logprobs) as server:
        assert run(server) == 0
    j = trace_judgment()
    expected = (4 * 0.6 + 5 * 0.3 + 3 * 0.05) / 0.95
    assert j["value"] == pytest.approx(expected)
    w = j["provenance"]["weighted"]
    assert w["written"] == 4 and w["token"] == "4" and w["mass"] == pytest.approx(0.95)
    assert w["probs"] == {"3": pytest.approx(0.05 / 0.95, abs=1e-6), "4": pytest.approx(0.6 / 0.95, abs=1e-6),
                          "5": pytest.approx(0.3 / 0.95, abs=1e-6)}
    # replay reads the recorded value: exact, with no server
    assert main(["replay", "t.jsonl", "--out", "replayed.jsonl"]) == 0
    assert records("replayed.jsonl")[0]["raw"] == records("r.jsonl")[0]["raw"]


def test_a_server_without_logprobs_is_refused_in_one_line(capsys):
    from fakeserver import FakeOpenAI

    with FakeOpenAI(responder=lambda body: {"reason": "r", "answer": 4}) as server:
        assert run(server) == 1
    j = trace_judgment()
    assert j["status"] == "invalid" and "returned no logprobs" in j["reason"] and "gsr probe" in j["reason"]


def test_only_one_digit_whole_number_scores_can_be_weighted():
    assert eligible(JType("score", 1.0, 5.0)) is None
    assert "one digit" in eligible(JType("score", 1.0, 10.0))
    assert "Score[lo..hi]" in eligible(JType("ordinal", labels=("a", "b"), values=(0.0, 1.0)))


def test_reading_finds_the_answer_position_not_an_earlier_digit():
    t = JType("score", 1.0, 5.0)
    tokens = [['{"', []], ["reason", []], ['":', []], [' "', []], ["2", [["2", 0.0]]], [' apples",', []],
              [' "', []], ["answer", []], ['":', []], [" 5", [[" 5", math.log(0.5)], [" 1", math.log(0.5)]]], ["}", []]]
    w = read_weighted(t, tokens)
    assert w["expected"] == pytest.approx(3.0) and w["probs"] == {"1": 0.5, "5": 0.5}


def test_the_run_flag_weights_every_eligible_score_criterion(tmp_path):
    from fakeserver import FakeOpenAI

    (tmp_path / "p.gsr").write_text(PROGRAM.replace(" = llm(weighted: true)", ""))
    with FakeOpenAI(responder=answer_with_logprobs) as server:
        assert run(server, "--weighted") == 0
        assert server.requests[0]["logprobs"] is True
    assert trace_judgment()["value"] == pytest.approx((4 * 0.6 + 5 * 0.3 + 3 * 0.05) / 0.95)


YES_NO = '''\
rubric weighted_yes_no "A yes/no question, weighted: the probability of yes"
task pointwise { scale = 0..1  quantize = none }
criterion polite: Score[0..1] = llm(weighted: true) {
  ask "Is the response polite?"
  level 0 "No"
  level 1 "Yes"
}
sink scale(polite)
'''


def test_a_yes_no_question_reads_as_the_probability_of_yes(tmp_path):
    """A Bool-like verdict is `Score[0..1]` with `no`/`yes` levels: weighted, it is P(yes) over the two tokens."""
    from fakeserver import FakeOpenAI

    def answer(body: dict) -> Reply:
        assert body["response_format"]["json_schema"]["schema"]["properties"]["answer"] == {
            "type": "integer", "enum": [0, 1]}
        tokens = ['{"', "answer", '":', " ", "1", "}"]
        top = {"1": [("1", math.log(0.7)), ("0", math.log(0.2)), ("no", math.log(0.1))]}
        content = [{"token": t, "logprob": -0.1, "bytes": None,
                    "top_logprobs": [{"token": c, "logprob": lp, "bytes": None} for c, lp in top.get(t, [(t, -0.1)])]}
                   for t in tokens]
        return Reply(content="".join(tokens), logprobs={"content": content})

    (tmp_path / "p.gsr").write_text(YES_NO)
    with FakeOpenAI(responder=answer) as server:
        assert run(server) == 0
    from gsrlang.trace.read import read_trace

    _, rec = next(read_trace("t.jsonl"))
    (node,) = [n for n in rec["nodes"] if n["id"] == "polite"]
    j = node["judgments"][0]
    assert j["value"] == pytest.approx(0.7 / 0.9)
    assert j["provenance"]["weighted"]["probs"] == {"0": pytest.approx(0.2 / 0.9, abs=1e-6),
                                                    "1": pytest.approx(0.7 / 0.9, abs=1e-6)}


@pytest.mark.parametrize("bad", [0.7, float("nan")])
def test_an_impossible_log_probability_is_a_malformed_answer(bad, capsys):
    """Issue 24, item 21: a positive (or NaN) log-probability was accepted silently, and weighted a verdict."""
    from fakeserver import FakeOpenAI

    def answer(body: dict) -> Reply:
        reply = answer_with_logprobs(body)
        reply.logprobs["content"][10]["top_logprobs"][1]["logprob"] = bad  # the "5" at the answer position
        return reply

    with FakeOpenAI(responder=answer) as server:
        assert run(server) == 1
        assert len(server.requests) == 1  # not retried: the same server gives the same numbers
    j = trace_judgment()
    assert j["status"] == "invalid" and "malformed answer" in j["reason"] and "(not retried)" in j["reason"]
    assert f"the server gave token '5' the log-probability {bad!r}" in j["reason"]
    assert "weighted" not in j["provenance"]


def test_float_rounding_above_zero_is_read_as_zero(capsys):
    from fakeserver import FakeOpenAI

    def answer(body: dict) -> Reply:
        reply = answer_with_logprobs(body)
        reply.logprobs["content"][10]["top_logprobs"][0]["logprob"] = 3e-7  # "4", certain, rounded above 0
        return reply

    with FakeOpenAI(responder=answer) as server:
        assert run(server) == 0
    w = trace_judgment()["provenance"]["weighted"]
    assert w["probs"]["4"] > 0.5 and w["mass"] == 1.0
