"""One bound on judge calls in flight: the run's `CallLimit`, through `gsr run` and through the API.

The criteria are judged by a role whose model allows 40 requests at once, so the model client's own
window does not bound them: only the run's limit (the default model's `concurrency`, 3) does.
"""

from __future__ import annotations

import json

import gsrlang
from gsrlang.cli import main

try:
    from fakeserver import FakeOpenAI
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI

PROGRAM = """\
rubric limited "Two criteria on a wide role"
task pointwise { scale = 1..5  quantize = none }
criterion first: Score[1..5] = llm(role: "wide") { ask "How clear is the response?"  level 1 "No"  level 5 "Yes" }
criterion second: Score[1..5] = llm(role: "wide") { ask "How correct is the response?"  level 1 "No"  level 5 "Yes" }
node both = weighted_mean(items: [scale(first), scale(second)], weights: [1, 1])
sink both
"""


def answer(body: dict) -> dict:
    return {"reason": "fine", "answer": 4}


def test_gsr_run_keeps_its_concurrency_whatever_the_role_allows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.gsr").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "gsr.toml").write_text('[judge.roles.wide]\nconcurrency = 40\n', encoding="utf-8")
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": str(i), "input": "q", "response": f"r{i}"}) + "\n"
                                              for i in range(20)), encoding="utf-8")
    with FakeOpenAI(responder=answer, latency=0.05) as fake:
        code = main(["run", "p.gsr", "--data", "d.jsonl", "--out", "out.jsonl", "--model", "m", "--base-url",
                     fake.base_url, "--api-key", "k", "--no-cache", "--concurrency", "3", "--quiet"])
        assert code == 0, capsys.readouterr().err
        assert len(fake.requests) == 40
        assert fake.max_in_flight == 3


def test_the_api_keeps_the_judges_concurrency_whatever_the_role_allows(tmp_path):
    program = gsrlang.loads(PROGRAM)
    rows = [{"input": "q", "response": f"r{i}"} for i in range(20)]
    with FakeOpenAI(responder=answer, latency=0.05) as fake, \
            gsrlang.Judges(model="m", base_url=fake.base_url, api_key="k", concurrency=3,
                           roles={"wide": {"concurrency": 40}}) as judges:
        results = program.score_batch(rows, judges=judges)
        assert [r.status for r in results] == ["ok"] * 20
        assert len(fake.requests) == 40
        assert fake.max_in_flight == 3


def test_by_criterion_is_in_program_order_whatever_answers_first(tmp_path, monkeypatch, capsys):
    """The trace summary's per-criterion usage is keyed in program order, not in the order the first answers
    came back (the server's timing): here `first` is slow, so `second` answers first."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.gsr").write_text(PROGRAM.replace('llm(role: "wide")', "llm"), encoding="utf-8")
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "1", "input": "q", "response": "r"}) + "\n", encoding="utf-8")
    with FakeOpenAI(responder=answer, latency=lambda body: 0.3 if "How clear" in json.dumps(body) else 0.0) as fake:
        code = main(["run", "p.gsr", "--data", "d.jsonl", "--trace", "t.jsonl", "--model", "m", "--base-url",
                     fake.base_url, "--api-key", "k", "--no-cache", "--no-short-circuit", "--quiet", "--structured",
                     "json_schema"])  # no negotiation: both calls are in flight at once
        assert code == 0, capsys.readouterr().err
        assert len(fake.requests) == 2
    summary = json.loads((tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert list(summary["judges"]["llm"]["by_criterion"]) == ["first", "second"]
