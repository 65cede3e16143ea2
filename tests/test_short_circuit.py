"""Short-circuit judging: a judgment that cannot change the result line is not asked for, and the results
are those of full judging, always.

(1) Property test over generated programs (tests/test_properties.checkable_programs: every criterion
    type, reducers with every abstention policy and negative weights, cap / floor / veto gates) and
    generated judgments (values of every type at the edges and inside, abstentions, invalid answers):
    short-circuit and full judging give the same result line; every skipped judgment says why; and,
    the ground truth, giving a skipped judgment any other answer (re-judged in full) changes nothing.
(2) The trace of a short-circuited run replays exactly; a what-if replay under a program that needs a
    skipped judgment says which ones were never made.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import checkable_programs, draw_checked
from tiers import examples

from gsrlang.execution.executor import execute
from gsrlang.execution.replay import replay_records
from gsrlang.files.dataset import Candidate, Item
from gsrlang.judges.registry import JudgeRegistry
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.judgment import ABSTAIN, Judgment
from gsrlang.trace.schema import dumps, result_line
from gsrlang.trace.write import trace_record

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Table:
    """A judge for every procedure kind that answers from a table {(criterion, candidate): Judgment} and
    counts what it was asked."""

    inline = False

    def __init__(self, answers: dict):
        self.answers = answers
        self.asked: list = []

    async def judge(self, node, item, candidate):
        self.asked.append((node.id, candidate.id))
        return self.answers[(node.id, candidate.id)]


def registry(judge) -> JudgeRegistry:
    return JudgeRegistry({kind: judge for kind in ("llm", "rule", "human", "verifier")})


def answers_for(t, draw) -> list[Judgment]:
    """Answers for a criterion of type `t`: its values (edges and inside), an abstention, invalid ones."""
    if t.kind == "bool":
        values = [True, False]
    elif t.kind == "score":
        values = [float(t.lo), float(t.hi), (t.lo + t.hi) / 2,
                  draw(st.floats(float(t.lo), float(t.hi), allow_nan=False))]
    else:
        values = list(t.labels)
    out = [Judgment.ok(v) for v in values]
    out += [Judgment.abstained("cannot tell"), Judgment.invalid("no answer"), Judgment.ok("not a value")]
    return out


def item(m: int) -> Item:
    return Item("x", 1, "a question", tuple(Candidate(c, f"response {c}") for c in "AB"[:m]), None, None, {})


def run(plan, mode, answers, short_circuit: bool):
    judge = Table(answers)
    done = asyncio.run(execute(plan, item(2 if mode == "pairwise" else 1), registry(judge), mode,
                               short_circuit=short_circuit))
    return done, judge.asked


def line(done, plan) -> str:
    return dumps(result_line(done, plan.program))


@pytest.mark.examples
@settings(max_examples=examples(120), **SETTINGS)
@given(checkable_programs(), st.data())
def test_short_circuit_gives_the_results_of_full_judging(generated, data):
    program, mode = draw_checked(generated, data)
    plan = Plan(program)
    cands = "AB" if mode == "pairwise" else "A"
    options = {(node.id, c): answers_for(node.type, data.draw) for _, node in plan.criteria for c in cands}
    # mostly valid answers (so that gates fire and results are ok), sometimes anything
    answers = {k: data.draw(st.sampled_from(v[:-3]) if data.draw(st.integers(0, 4)) else st.sampled_from(v))
               for k, v in options.items()}
    full, asked_full = run(plan, mode, answers, short_circuit=False)
    short, asked_short = run(plan, mode, answers, short_circuit=True)
    assert line(short, plan) == line(full, plan), text
    assert set(asked_short) <= set(asked_full) and len(asked_short) == len(set(asked_short))
    skipped = [(node_id, cands[c]) for node_id, row in short.judgments.items()
               for c, j in enumerate(row) if j.status == "skipped"]
    assert len(skipped) + len(asked_short) == len(asked_full)
    for node_id, c in skipped:
        assert short.judgments[node_id]["AB".index(c)].reason.startswith("moot: ")
    # the ground truth: any other answer to a skipped judgment leaves the result line as it is
    for key in skipped[:3]:
        for other in options[key]:
            changed, _ = run(plan, mode, {**answers, key: other}, short_circuit=False)
            assert line(changed, plan) == line(full, plan), (text, key, other)
    # and the short-circuited record replays exactly
    record = json.loads(json.dumps(trace_record(short, plan, "p.gsr")))
    [(_, _, _, _, difference)] = list(replay_records(plan, [(1, record)], verify=True))
    assert difference is None, difference.describe()


# ---- (3) the real examples against the fake server -----------------------------------------------------------
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
POINTWISE = ["helpsteer2/helpfulness.gsr", "biggen/instance.gsr", "checklist/checklist.gsr",
             "summeval/relevance.gsr", "judges/ensemble.gsr"]
PAIRWISE = ["mtbench/pairwise.gsr", "judges/ensemble.gsr"]


def _gate_heavy_rows(n: int = 8) -> list[dict]:
    """Good and bad responses mixed (the fake model flags bad ones as unsafe, wrong, off topic)."""
    return [{"id": f"r{k}", "prompt": "How do I bake bread?",
             "response": ("GOOD: knead, prove, bake at 230 C." if k % 3 == 0 else "BAD: just microwave it."),
             "a": "GOOD: knead, prove, bake." if k % 2 else "BAD: no idea.",
             "b": "BAD: microwave it." if k % 4 else "GOOD: a long proof, then bake."} for k in range(n)]


@pytest.mark.parametrize("example,mode", [(p, "pointwise") for p in POINTWISE] + [(p, "pairwise") for p in PAIRWISE])
def test_the_examples_give_the_same_results_with_fewer_calls(example, mode, tmp_path, monkeypatch, capsys):
    from fakeserver import FakeOpenAI
    from test_llm_run import KEY, fake_model

    from gsrlang.cli import main

    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _gate_heavy_rows()), encoding="utf-8")
    program = EXAMPLES / example
    columns = ["--responses", "a,b"] if mode == "pairwise" else []
    config = ["--judge-config", str(program.parent / "gsr.toml")] if (program.parent / "gsr.toml").is_file() \
        else ["--model", "fake"]
    calls = {}
    for flag in ("--no-short-circuit", None):
        with FakeOpenAI(responder=fake_model) as server:
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", KEY)
            name = "full" if flag else "short"
            argv = ["run", str(program), "--data", str(data), "--mode", mode, "--input-field", "prompt", *columns,
                    *config, "--id-field", "id", "--cache", "off", "--out", f"{name}.jsonl", "--trace",
                    f"{name}.trace.jsonl", "-q", "--no-progress", *([flag] if flag else [])]
            code = main(argv)
            err = capsys.readouterr().err
            assert code in (0, 1) and "Traceback" not in err, err
            calls[name] = len(server.requests)
    assert (tmp_path / "short.jsonl").read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    if example == "summeval/relevance.gsr":  # its caps (at 0.6, 0.7) never settle the score: nothing is moot
        assert calls["short"] == calls["full"], calls
    else:  # a cap at 0.0 or a veto that the bad responses fire
        assert calls["short"] < calls["full"], calls
    assert main(["replay", "short.trace.jsonl", "-q"]) == 0  # the short-circuited trace replays exactly
    from test_verify_columnar import assert_same_report  # skipped judgments and abstentions: verified alike

    from gsrlang.lang.check.driver import analyze_file
    for name in ("short", "full"):
        assert_same_report(analyze_file(str(program)).program, tmp_path / f"{name}.trace.jsonl")


def test_what_if_replay_names_the_judgments_it_would_need(tmp_path, monkeypatch, capsys):
    """A trace whose `safe` cap skipped four questions, replayed under a program without the cap: the
    items that the cap settled need those judgments, and replay says so."""
    from fakeserver import FakeOpenAI
    from test_llm_run import KEY, fake_model

    from gsrlang.cli import main

    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _gate_heavy_rows(3)))
    source = (EXAMPLES / "helpsteer2" / "helpfulness.gsr").read_text()
    (tmp_path / "h.gsr").write_text(source)
    (tmp_path / "nocap.gsr").write_text(source.replace("node safe = cap(base: body, trigger: unsafe_flag, at: 0.0)",
                                                       "node safe = body"))
    with FakeOpenAI(responder=fake_model) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        assert main(["run", "h.gsr", "--data", "items.jsonl", "--mode", "pointwise", "--input-field", "prompt", "--id-field", "id",
                     "--model", "fake", "--trace", "t.jsonl", "-q", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["replay", "t.jsonl", "--program", "nocap.gsr", "--out", "w.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "needs judgments that the recorded run never made" in out
    for name in ("correct", "follows", "coherent", "verbosity"):
        assert f"`{name}` (2 items)" in out  # r1 and r2 are bad responses: their cap fired
    results = [r for r in map(json.loads, (tmp_path / "w.jsonl").read_text().splitlines()) if "id" in r]
    assert [r["status"] for r in results] == ["ok", "invalid", "invalid"]  # (less the results file's end line)
    assert "never judged (moot: cap `safe` fired at 0.0)" in results[1]["reason"]
    assert main(["replay", "t.jsonl", "--program", "nocap.gsr"]) == 0  # nothing written: the same report
    assert "`correct` (2 items)" in capsys.readouterr().out
