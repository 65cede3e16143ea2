"""`gsr serve`'s /group route through a real llama.cpp server (scripts/realmodel.sh): format and plumbing,
not quality. Every response of the group gets a reward (a number, or the failure value with a reason), the
answer names the program, the model judge is the real server, and the served trace replays exactly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gsrlang
from gsrlang.cli import main
from gsrlang.trace.read import read_trace

from servehelp import serving

BASE_URL = os.environ.get("GSR_REAL_BASE_URL")
MODEL = os.environ.get("GSR_REAL_MODEL", "smollm2")

pytestmark = [pytest.mark.realmodel,
              pytest.mark.skipif(not BASE_URL, reason="no real model server: set GSR_REAL_BASE_URL "
                                                      "(scripts/realmodel.sh does)")]

PROGRAM = '''\
rubric realmodel_served "A served reward"
task pointwise { scale = 1..5  quantize = none }
criterion correct: Bool { ask "Does the response answer the question correctly?" }
criterion clear: Ordinal[1..5] { ask "How clear is the response?"  level 1 "Confusing"  level 5 "Very clear" }
sink weighted_mean(items: [normalize(correct), normalize(clear)], weights: [2, 1])
'''

RESPONSES = ["The capital of France is Paris.", "I think it's Berlin, maybe.", "Lyon is the capital."]


def test_a_group_through_a_real_model(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GSR_MODEL"):
        monkeypatch.delenv(var, raising=False)
    program = tmp_path / "served.gsr"
    program.write_text(PROGRAM, encoding="utf-8")
    trace = tmp_path / "t.jsonl"
    # llama-cpp-python's server answers one request at a time: more in flight only queue there
    with serving(program, "--model", MODEL, "--base-url", BASE_URL, "--concurrency", "1", "--timeout", "900",
                 "--max-tokens", "160", "--seed", "1", "--trace", str(trace)) as s:
        status, answer = s.post("/group", {"input": "What is the capital of France?", "responses": RESPONSES,
                                           "normalize": "zscore", "step": 1}, timeout=1800)
        usage = s.engine.judges.usage()["llm"]
    assert status == 200, answer
    assert answer["program"]["hash"] == gsrlang.load(program).hash
    assert len(answer["rewards"]) == len(answer["raw"]) == len(RESPONSES) and answer["unfinished"] == []
    for result in answer["results"]:
        assert result["status"] in ("ok", "invalid"), result
        if result["status"] == "ok":
            assert 0.0 <= result["reward"] <= 1.0
        else:
            assert result["reason"] and result["reward"] == 0.0
    assert usage["http_requests"] > 0  # judged by the real server
    assert main(["replay", str(trace)]) == 0
    assert "reproduced exactly" in capsys.readouterr().out
    assert sorted(r["item"]["id"] for _, r in read_trace(trace)) == [f"1/r1/{k}" for k in range(3)]
    print(f"\nreal-model group rewards: raw {answer['raw']}, z-scores {answer['rewards']}")
    assert Path(trace).stat().st_size > 0
