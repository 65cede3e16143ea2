"""Judging, negotiation, resume, compile and the probe through a real llama.cpp server.

Format and plumbing, not quality: every judgment is parsed or honestly invalid (with its raw
answer and a reason), every item is accounted for, the negotiated mode is the one the server
takes, and nothing is served from anywhere but the server. The quality figures are printed
(`-s`, or benchmarks/bench_realmodel.py), never asserted.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_weighted import PROGRAM as WEIGHTED_PROGRAM  # the fake-server test's weighted Score program

from gsrlang.cli import main
from gsrlang.trace.read import read_trace
from gsrlang.trace.schema import is_summary

ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("GSR_REAL_BASE_URL")
MODEL = os.environ.get("GSR_REAL_MODEL", "smollm2")

# The tier runs only when GSR_REAL_BASE_URL names a server (scripts/realmodel.sh starts llama-cpp-python's
# server with SmolLM2-135M-Instruct and sets it, with GSR_REAL_MODEL); otherwise every test is skipped.
pytestmark = [pytest.mark.realmodel,
              pytest.mark.skipif(not BASE_URL, reason="no real model server: set GSR_REAL_BASE_URL "
                                                      "(scripts/realmodel.sh does)")]


@pytest.fixture
def real(monkeypatch, tmp_path):
    """The server's URL and model, with a fresh working folder (its own caches) as the current directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", BASE_URL)
    monkeypatch.setenv("GSR_MODEL", MODEL)
    return BASE_URL, MODEL

TYPES_PROGRAM = '''\
rubric realmodel_types "Every criterion type a model judge answers"

task pointwise { scale = 1..5  quantize = round }
task pairwise { epsilon = 0.05  on_tie = tie }

criterion polite: Bool { ask "Is the response polite?" }
criterion clarity: Ordinal[1..5] {
  ask "How clear is the response?"
  level 1 "Confusing"
  level 5 "Very clear"
}
criterion tone: Nominal{formal, casual, rude} { ask "What is the tone of the response?" }
criterion length_fit: Score[0..10] { ask "How well does the length of the response fit the question, from 0 to 10?" }
criterion unsafe: Bool? { ask "Does the response give harmful advice? Answer cannot_assess if safety does not apply." }
criterion correct: Bool {
  ask "Does the response answer the question correctly?"
  judges 3 aggregate majority
}

node body = weighted_mean(
  items: [normalize(polite), normalize(clarity), map(tone, to: {formal: 1.0, casual: 0.7, rude: 0.0}),
          scale(length_fit), normalize(correct)],
  weights: [1, 1, 1, 1, 2],
)
node final = veto(base: body, trigger: default(unsafe, value: false))
sink final
'''

JOINT_PROGRAM = '''\
rubric realmodel_joint "Pairwise, both responses shown together"

task pairwise { epsilon = 0.05  on_tie = tie }

criterion helpful: Ordinal{poor, fair, good} = llm(joint: true) {
  ask "How helpful is the response to the question?"
}
sink normalize(helpful)
'''

# llama-cpp-python's server answers one request at a time: more in flight only queue there and time out
ONE_AT_A_TIME = ("--concurrency", "1", "--timeout", "900")

ITEMS = [
    ("What is the capital of France?", "The capital of France is Paris.", "I think it's Berlin, maybe."),
    ("How many legs does a spider have?", "A spider has eight legs.", "Six."),
]


def write_items(path: Path, n: int = len(ITEMS)) -> Path:
    with path.open("w") as f:
        for i, (q, a, b) in enumerate(ITEMS[:n]):
            f.write(json.dumps({"id": f"it{i}", "input": q, "response": a, "a": a, "b": b}) + "\n")
    return path


def judgments(trace: Path) -> list[tuple[str, dict]]:
    """(criterion id, judgment) of every criterion judgment in a trace."""
    out = []
    for _, rec in read_trace(trace):
        for node in rec["nodes"]:
            if node.get("kind") == "criterion":
                out += [(node["id"], j) for j in node["judgments"]]
    return out


def summary(trace: Path) -> dict:
    (rec,) = [r for _, r in read_trace(trace, summaries=True) if is_summary(r)]
    return rec


def results_of(path: Path) -> list[dict]:
    """The item lines of a results file (less its end-of-run line)."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [r for r in lines if r.get("kind") != "run_summary"]


def stored_judgments(cache: Path) -> int:
    """How many judgments a run's SQLite cache holds so far (0 before it exists)."""
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    except sqlite3.OperationalError:  # created but its table not yet made, or locked for a moment
        return 0


def assert_honest(js: list[tuple[str, dict]]) -> None:
    """Every judgment is a value of its type, an abstention, or invalid with a reason and the model's raw answer."""
    for crit, j in js:
        assert j["status"] in ("ok", "abstained", "invalid"), (crit, j)
        prov = j["provenance"]
        assert prov.get("model") or prov.get("procedure") == "ensemble", (crit, j)
        if j["status"] == "invalid":
            assert j["reason"], (crit, j)
        if j["status"] == "ok":
            assert j["value"] is not None, (crit, j)


def report(title: str, js: list[tuple[str, dict]]) -> None:
    counts: dict[str, Counter] = {}
    for crit, j in js:
        counts.setdefault(crit, Counter())[j["status"]] += 1
    print(f"\n{title}: " + "; ".join(f"{c} {dict(v)}" for c, v in counts.items()))


def test_pointwise_every_criterion_type_and_an_ensemble(real, tmp_path, capsys):
    (tmp_path / "p.gsr").write_text(TYPES_PROGRAM)
    data = write_items(tmp_path / "items.jsonl")
    code = main(["run", "p.gsr", "--data", str(data), "--mode", "pointwise", "--out", "r.jsonl",
                 "--trace", "t.jsonl", "--no-progress", "--max-tokens", "160", "--seed", "1", "--no-short-circuit",
                 *ONE_AT_A_TIME])
    out = capsys.readouterr().out
    assert code in (0, 1)
    results = results_of(Path("r.jsonl"))
    assert len(results) == len({r["id"] for r in results}) == len(ITEMS)  # every item accounted for
    assert all(r["status"] in ("ok", "invalid") for r in results)
    js = judgments(Path("t.jsonl"))
    assert Counter(c for c, _ in js) == {c: len(ITEMS) for c in
                                         ("polite", "clarity", "tone", "length_fit", "unsafe", "correct")}
    assert_honest(js)
    # llama-cpp-python refuses json_schema (HTTP 500) and takes json_object with the schema
    modes = summary(Path("t.jsonl"))["judges"]["llm"]["structured"]
    assert list(modes.values()) == ["json_object (negotiated)"], modes
    assert f"structured output of {MODEL}" in out and "json_object (negotiated)" in out
    singles = [j for c, j in js if c != "correct" and j["status"] == "ok"]
    assert {j["provenance"]["structured"] for j in singles} <= {"json_object"}
    votes = [v for c, j in js if c == "correct" for v in j["provenance"]["votes"]]
    assert len(votes) == 3 * len(ITEMS) and {v["status"] for v in votes} <= {"ok", "invalid"}
    report("pointwise judgments by criterion", js)


def test_joint_pairwise_in_both_orders(real, tmp_path):
    (tmp_path / "j.gsr").write_text(JOINT_PROGRAM)
    data = write_items(tmp_path / "items.jsonl")
    code = main(["run", "j.gsr", "--data", str(data), "--mode", "pairwise", "--responses", "a,b", "--out",
                 "r.jsonl", "--trace", "t.jsonl", "--no-progress", "--max-tokens", "200", *ONE_AT_A_TIME])
    assert code in (0, 1)
    results = results_of(Path("r.jsonl"))
    assert len(results) == len(ITEMS) and all(r["status"] in ("ok", "invalid") for r in results)
    js = judgments(Path("t.jsonl"))
    assert len(js) == 2 * len(ITEMS)  # two candidates per item
    assert_honest(js)
    for _, j in js:
        orders = j["provenance"]["orders"]
        assert [o["candidates"] for o in orders] in (
            [["A", "B"], ["B", "A"]], [["a", "b"], ["b", "a"]]) or len(orders) == 2
    report("joint pairwise", js)


def test_kill_9_then_resume_accounts_for_every_item_and_does_not_negotiate_again(real, tmp_path):
    (tmp_path / "p.gsr").write_text(TYPES_PROGRAM)
    data = write_items(tmp_path / "items.jsonl")
    cmd = [sys.executable, "-m", "gsrlang.cli", "run", "p.gsr", "--data", str(data), "--mode", "pointwise",
           "--out", "r.jsonl", "--trace", "t.jsonl", "--no-progress", "--max-tokens", "160", "--seed", "2",
           "--no-short-circuit", *ONE_AT_A_TIME]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 1800
    # kill it once the first judgment is stored: one of the run's 16 calls, so most of its work is still ahead
    # (waiting for the first results line raced the run's end on an idle machine, where the two items finish
    # within moments of each other)
    while time.monotonic() < deadline and proc.poll() is None:
        if stored_judgments(Path(".gsr-cache") / "judgments.sqlite") >= 1:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the run finished before it could be killed; give it more items"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert resumed.returncode in (0, 1), resumed.stderr
    results = results_of(Path("r.jsonl"))
    assert len(results) == len({r["id"] for r in results}) == len(ITEMS)
    s = summary(Path("t.jsonl"))["judges"]["llm"]
    assert s["cache_hits"] > 0, s  # the killed run's judgments were kept
    assert list(s["structured"].values()) == ["json_object (remembered)"], s
    assert_honest(judgments(Path("t.jsonl")))


def test_probe_reports_what_llamacpp_takes(real, capsys):
    url, model = real
    code = main(["probe", "--model", model, "--base-url", url, "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert code == 0, rep
    assert rep["reachable"] and model in rep["models"]
    assert rep["context_length"] == int(os.environ.get("GSR_REAL_N_CTX", "4096"))
    assert rep["structured"]["json_schema"] == "rejected"
    assert rep["structured"]["json_object"] == "enforced"
    assert rep["grammar_dialect"] == "gbnf"
    assert rep["judgment_mode"] == "json_object"
    if model == "gemma3":
        # Gemma 3 270M under its GGUF's chat template answers free-text prompts with an empty message
        # (0 tokens): the schema grammar's probe reads nothing, and there is no token for logprobs or a speed
        assert rep["structured"]["grammar"] in ("enforced", "ignored")
        assert rep["logprobs"] in (True, None)
        assert rep["tokens_per_s"] is None or rep["tokens_per_s"] > 0
    else:
        assert rep["structured"]["grammar"] == "enforced"
        assert isinstance(rep["logprobs"], bool)
        assert rep["tokens_per_s"] and rep["tokens_per_s"] > 0
    print(f"\nprobe: {rep}")


def test_unknown_model_and_context_overflow_are_one_line_errors(real, tmp_path, capsys):
    url, _ = real
    code = main(["probe", "--model", "no-such-model", "--base-url", url, "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "does not serve model 'no-such-model'" in err[0]
    (tmp_path / "p.gsr").write_text(JOINT_PROGRAM.replace("llm(joint: true)", "llm()"))
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"id": "x", "input": "q " * 6000, "a": "a", "b": "b"}) + "\n")
    code = main(["run", "p.gsr", "--data", str(long), "--mode", "pairwise", "--responses", "a,b", "--no-progress",
                 "--out", "r.jsonl", *ONE_AT_A_TIME])
    io = capsys.readouterr()
    assert code == 1
    warn = [line for line in io.err.splitlines() if "context" in line]
    assert warn and "--n_ctx" in warn[0], io.err


def test_compile_unconstrained_fits_the_context_and_ends_in_a_program_or_a_recorded_failure(real, tmp_path, capsys):
    url, model = real
    rubric = ROOT / "examples" / "rubrics" / "helpsteer2_helpfulness.md"
    code = main(["compile", str(rubric), "--task", "pointwise", "--scale", "1..5", "--repairs", "0",
                 "--max-tokens", "400", "--timeout", "900", "--model", model, "--base-url", url, "-o", "free.gsr"])
    err = capsys.readouterr().err
    assert code in (0, 1), err  # compiled, or a failure recorded honestly: never a tool failure
    (fitted,) = [line for line in err.splitlines() if "the prompt is fitted" in line]
    assert "4096-token context (from the server)" in fitted and "cut:" in fitted
    assert Path("free.gsr").exists() or Path("free.gsr.failed").exists() or "compile failed" in err
    print(f"\ncompile, unconstrained: exit {code}; " + "; ".join(x for x in err.splitlines() if x.startswith("round")))


async def test_compile_under_the_generated_gbnf_grammar_is_accepted_and_parses(real):
    from gsrlang.compiler.prompt import fit_prompt
    from gsrlang.compiler.spec import CompileSpec, Pointwise
    from gsrlang.compiler.synthesize import CompilerClient, compile_rubric
    from gsrlang.judges.llm import JudgeConfig
    from gsrlang.lang.syntax.parser import parse

    url, model = real
    rubric = (ROOT / "examples" / "rubrics" / "helpsteer2_helpfulness.md").read_text()
    spec = CompileSpec(rubric=rubric, contract=Pointwise(scale="1..5", quantize="round"))
    prompt, cut = fit_prompt(spec, int(os.environ.get("GSR_REAL_N_CTX", "4096")), 1000)
    config = JudgeConfig(model=model, base_url=url, max_tokens=500, timeout_s=900, max_retries=0)
    async with CompilerClient(config) as client:  # a grammar the server rejected would raise here
        result = await compile_rubric(spec, client, repairs=0, constrain="grammar", grammar_field="grammar",
                                      prompt=prompt)
    for r in result.rounds:
        assert r.program is not None, r.problem
        cut_off = r.finish_reason == "length"
        diagnostics = parse(r.program).diagnostics
        assert not diagnostics or cut_off, (r.program, diagnostics)  # what the grammar allowed parses
        print(f"\nround {r.index}: finish {r.finish_reason}, parses {not diagnostics}, "
              f"checks clean {r.accepted}, {len(r.program)} chars")
    assert any(r.finish_reason != "length" for r in result.rounds), "every round was cut off at max_tokens"


def test_weighted_verdicts_read_the_answer_tokens_probabilities(real, tmp_path):
    (tmp_path / "w.gsr").write_text(WEIGHTED_PROGRAM)
    data = write_items(tmp_path / "items.jsonl")
    code = main(["run", "w.gsr", "--data", str(data), "--mode", "pointwise", "--trace", "t.jsonl", "--out",
                 "r.jsonl", "--no-progress", "--max-tokens", "160", *ONE_AT_A_TIME])
    assert code in (0, 1)
    js = judgments(Path("t.jsonl"))
    assert len(js) == len(ITEMS)
    assert_honest(js)
    read = 0
    for _, j in js:
        w = j["provenance"].get("weighted")
        if j["status"] != "ok" or w is None or "expected" not in w:
            continue
        read += 1
        # the token read is the answer the model wrote, and the value is the expectation over the points
        assert int(w["token"].strip()) == w["written"]
        assert abs(sum(w["probs"].values()) - 1) < 1e-3 and 0 < w["mass"] <= 1
        assert j["value"] == sum(int(k) * p for k, p in w["probs"].items()) or \
            abs(j["value"] - sum(int(k) * p for k, p in w["probs"].items())) < 1e-3
        assert 1 <= j["value"] <= 5
        print(f"\nweighted: written {w['written']}, value {j['value']:.3f}, probs {w['probs']}, mass {w['mass']}")
    assert read, [j for _, j in js]


def test_batch_against_llama_cpp_is_one_line_saying_it_has_no_batch_api(real, tmp_path, capsys):
    """llama.cpp's server has no Batch API (404 on /v1/batches): --batch says so in one line, before anything is
    uploaded or judged, and writes nothing."""
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "1", "input": "Say hello.", "response": "Hello!"}) + "\n",
                                          encoding="utf-8")
    (tmp_path / "p.gsr").write_text(TYPES_PROGRAM, encoding="utf-8")
    code = main(["run", "p.gsr", "--data", "items.jsonl", "--mode", "pointwise", "--out", "r.jsonl", "--batch"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "has no Batch API (GET /v1/batches answered HTTP 404)" in lines[0], err
    assert "run without --batch to judge online" in lines[0]
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "r.jsonl.gsr-batch").exists()
