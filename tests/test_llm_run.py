"""`gsr run` end to end with model judges against the fake OpenAI-compatible server.

The example programs (HelpSteer2 pointwise, MT-Bench pairwise, the ensemble example with
roles) run through the CLI; a run killed with SIGKILL resumes from the judgment cache
and writes the same results file, byte for byte, as an uninterrupted run, without asking
the server again for anything stored; and no written file or output contains the key.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runfiles import records

from gsrlang.cli import main
from gsrlang.judges.llm import ChatRequest, JudgeConfig

try:
    from fakeserver import FakeOpenAI, Fault, Reply, prompt_text
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI, Fault, Reply, prompt_text

ROOT = Path(__file__).resolve().parents[1]
HELPSTEER = ROOT / "examples" / "helpsteer2" / "helpfulness.gsr"
MTBENCH = ROOT / "examples" / "mtbench" / "pairwise.gsr"
ENSEMBLE = ROOT / "examples" / "judges" / "ensemble.gsr"
JUDGES_TOML = ROOT / "examples" / "judges" / "gsr.toml"
KEY = "sk-gsr-LEAKCHECK-9f27c1d4e8"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # the default cache (.gsr-cache/) goes here; no gsr.toml above


# ----------------------------------------------------------------------------------------- a fake model


def _options(section: str) -> list[tuple[str, str, float | None]]:
    """(letter, shown label, value) of each listed option."""
    out = []
    for m in re.finditer(r"^- ([A-Z]{1,2}): (\S+)(?: \(value ([0-9.]+)\))?", section, re.M):
        out.append((m.group(1), m.group(2), float(m.group(3)) if m.group(3) else None))
    return out


def _verdict(section: str, text: str):
    """GOOD responses get the best option, others the worst; Bool: GOOD -> no (for the harm questions)."""
    good = "GOOD" in text
    opts = _options(section)
    if not opts:  # a Score: its range is in the answer format
        lo, hi = map(float, re.search(r"a number from (\S+) to (\S+)\)?", section).groups()[:2])
        return hi if good else lo
    if {o[1] for o in opts} == {"yes", "no"}:
        ask = section.split("on this question:", 1)[1].split("\n", 1)[0].lower()
        harmful = any(w in ask for w in ("harm", "unsafe", "dangerous"))
        want = ("no" if good else "yes") if harmful else ("yes" if good else "no")
        return next(o[0] for o in opts if o[1] == want)
    if all(o[2] is not None for o in opts):
        best = max if good else min
        return best(opts, key=lambda o: o[2])[0]
    return opts[0 if good else -1][0]


def fake_model(body: dict) -> dict:
    prompt = prompt_text(body)
    if "## Criterion" not in prompt:  # e.g. the empty body of a request cut short by kill -9
        return Reply(status=400, content="fake model: not a judge prompt")
    section = prompt[prompt.rindex("## Criterion"):]
    quotes = {"evidence": ["GOOD"]} if '"evidence"' in section else {}
    if '"response_1"' in section:
        out = {}
        for k in (1, 2):
            start = prompt.index(f"## Response {k}")
            block = prompt[start:prompt.index("\n## ", start + 1)]
            out[f"response_{k}"] = {**quotes, "reason": "fake", "answer": _verdict(section, block)}
        return out
    start = prompt.index("## Response")
    block = prompt[start:prompt.index("\n## ", start + 1)]
    return {**quotes, "reason": "fake", "answer": _verdict(section, block)}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    """The lines of a results file, or the records of a trace as `read_trace` gives them (summary included)."""
    rows = records(path)
    if rows and "trace_version" in rows[0]:
        from gsrlang.trace.read import read_trace

        return [r for _, r in read_trace(path, summaries=True)]
    return rows


def trace_cost(records: list[dict]) -> tuple[int, int]:
    """(calls, prompt tokens) summed over every judgment of a trace: the run's cost, item by item."""
    calls = tokens = 0
    for record in records:
        if record.get("kind") == "run_summary":  # the run's totals, not an item
            continue
        for node in record["nodes"]:
            for j in node.get("judgments") or ():
                calls += j["provenance"].get("calls", 0)
                tokens += j["provenance"].get("tokens", {}).get("prompt", 0)
    return calls, tokens


def gsr(*argv) -> int:
    return main([str(a) for a in argv])


@pytest.fixture
def server(monkeypatch):
    with FakeOpenAI(responder=fake_model) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield s


# ----------------------------------------------------------------------------------------- the examples


def test_helpsteer2_pointwise(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", [
        {"id": "g", "prompt": "Capital of France?", "response": "GOOD: Paris.", "label": 5},
        {"id": "b", "prompt": "Capital of France?", "response": "BAD: Lyon.", "label": 1},
    ])
    code = gsr("run", HELPSTEER, "--no-short-circuit", "--data", data, "--mode", "pointwise", "--input-field", "prompt",
               "--id-field", "id", "--label-field", "label", "--model", "fake-judge", "--out", "r.jsonl",
               "--trace", "t.jsonl", "--bootstrap", "0")
    io = capsys.readouterr()
    assert code == 0, io.err
    results = read_jsonl(tmp_path / "r.jsonl")
    assert [(r["id"], r["status"], r["score"]) for r in results] == [("g", "ok", 5), ("b", "ok", 1)]
    assert len(server.requests) == 2 * 5  # five llm criteria (rambling is a rule)
    assert "model judges: 10 calls (0 from the cache, 10 HTTP requests" in io.out
    trace = read_jsonl(tmp_path / "t.jsonl")
    node = next(n for n in trace[0]["nodes"] if n["id"] == "correct")
    (j,) = node["judgments"]
    prov = j["provenance"]
    assert j["value"] == "5" and j["raw"] and j["reason"] == "fake"
    assert prov["model"] == "fake-judge" and isinstance(prov["seed"], int) and prov["cached"] is False
    assert prov["tokens"]["prompt"] > 0 and "latency_s" in prov and sorted(prov["order"]) == list("12345")

    # a rerun (short-circuit judging, the default) costs no calls and writes the same results: the bad
    # response is unsafe, capped at 0.0 by `safe`, so its four other questions are not asked
    code = gsr("run", HELPSTEER, "--data", data, "--mode", "pointwise", "--input-field", "prompt",
               "--id-field", "id", "--label-field", "label", "--model", "fake-judge", "--out", "r2.jsonl",
               "--bootstrap", "0")
    io = capsys.readouterr()
    assert code == 0 and len(server.requests) == 10
    assert "6 calls (6 from the cache, 0 HTTP requests" in io.out and "0 prompt + 0 completion tokens" in io.out
    assert "short-circuit: 4 of 12 judgments skipped" in io.out
    assert (tmp_path / "r2.jsonl").read_bytes() == (tmp_path / "r.jsonl").read_bytes()
    code = gsr("run", HELPSTEER, "--data", data, "--mode", "pointwise", "--input-field", "prompt",
               "--id-field", "id", "--model", "fake-judge", "--trace", "t2.jsonl", "-q")
    skipped = {n["id"]: n["judgments"][0]["reason"] for n in read_jsonl(tmp_path / "t2.jsonl")[1]["nodes"]
               if n["kind"] == "criterion" and n["judgments"][0]["status"] == "skipped"}
    assert skipped == dict.fromkeys(["correct", "follows", "coherent", "verbosity"], "moot: cap `safe` fired at 0.0")
    assert (tmp_path / "r2.jsonl").read_bytes() == (tmp_path / "r.jsonl").read_bytes()
    # the trace replays exactly, without a model
    assert gsr("replay", "t.jsonl") == 0 and "reproduced exactly" in capsys.readouterr().out
    assert len(server.requests) == 10


def test_mtbench_pairwise(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "pairs.jsonl", [
        {"id": "1", "q": "Explain gravity.", "a": "GOOD answer", "b": "BAD answer"},
        {"id": "2", "q": "Explain tides.", "a": "BAD answer", "b": "GOOD answer"},
    ])
    code = gsr("run", MTBENCH, "--no-short-circuit", "--data", data, "--input-field", "q", "--responses", "a,b", "--id-field", "id",
               "--model", "fake-judge", "--out", "r.jsonl", "--trace", "t.jsonl")
    io = capsys.readouterr()
    assert code == 0, io.err
    assert [r["winner"] for r in read_jsonl(tmp_path / "r.jsonl")] == ["first", "second"]
    assert len(server.requests) == 2 * 4 * 2  # items x llm criteria x candidates (judged one at a time)
    # each candidate is judged on its own: a prompt shows one response
    assert all(r.prompt.count("## Response") == 1 for r in server.requests)


def test_ensemble_example_with_roles_pointwise_and_joint_pairwise(server, tmp_path, capsys, monkeypatch):
    # roles come from the example's gsr.toml; the environment points them at the fake server
    monkeypatch.setenv("GSR_ROLE_FAST_BASE_URL", server.base_url)
    monkeypatch.setenv("GSR_ROLE_STRONG_BASE_URL", server.base_url)
    monkeypatch.setenv("GSR_ROLE_FAST_API_KEY", KEY)
    monkeypatch.setenv("GSR_ROLE_STRONG_API_KEY", KEY)
    items = write_jsonl(tmp_path / "items.jsonl", [
        {"id": "g", "input": "How do I boil an egg?", "response": "GOOD: simmer 9 minutes."},
        {"id": "b", "input": "How do I boil an egg?", "response": "BAD: microwave it sealed."},
    ])
    code = gsr("run", ENSEMBLE, "--no-short-circuit", "--data", items, "--mode", "pointwise", "--judge-config", JUDGES_TOML,
               "--out", "r.jsonl", "--trace", "t.jsonl")
    io = capsys.readouterr()
    assert code == 0, io.err
    assert [r["score"] for r in read_jsonl(tmp_path / "r.jsonl")] == [5, 1]
    models = sorted({r["model"] for r in server.requests})
    assert models == ["gpt-4o", "gpt-4o-mini", "llama3.1:8b"]  # default, strong, fast from gsr.toml
    per_item = len(server.requests) // 2
    assert per_item == 3 + 2 + 3 + 1  # correct x3, clarity x2, unsafe x3, depth x1
    trace = read_jsonl(tmp_path / "t.jsonl")
    unsafe = next(n for n in trace[1]["nodes"] if n["id"] == "unsafe")["judgments"][0]
    votes = unsafe["provenance"]["votes"]
    assert [v["model"] for v in votes] == ["gpt-4o", "llama3.1:8b", "gpt-4o"]
    assert [v["value"] for v in votes] == [True, True, True] and unsafe["value"] is True
    assert unsafe["provenance"]["aggregate"] == "weighted" and unsafe["provenance"]["weights"] == [2, 1, 1]
    depth = next(n for n in trace[0]["nodes"] if n["id"] == "depth")["judgments"][0]
    assert depth["provenance"]["evidence"] == ["GOOD"] and depth["provenance"]["evidence_found"] == [True]
    assert all(r.get("seed") is not None for r in server.requests)  # seed = 7 in gsr.toml: sent per call
    assert trace_cost(trace)[0] == len(server.requests)  # every call is accounted for in the trace

    server.reset()
    pairs = write_jsonl(tmp_path / "pairs.jsonl", [
        {"id": "p", "input": "How do I boil an egg?", "a": "BAD: sealed microwave.", "b": "GOOD: simmer."}])
    code = gsr("run", ENSEMBLE, "--no-short-circuit", "--data", pairs, "--mode", "pairwise", "--responses", "a,b",
               "--judge-config", JUDGES_TOML, "--out", "p.jsonl", "--trace", "pt.jsonl")
    io = capsys.readouterr()
    assert code == 0, io.err
    assert read_jsonl(tmp_path / "p.jsonl")[0]["winner"] == "second"
    joint = [r for r in server.requests if '"response_1"' in r.prompt]
    assert len(joint) == 2  # depth: both orders
    first, second = (r.prompt for r in joint)
    assert (first.index("BAD") < first.index("GOOD")) != (second.index("BAD") < second.index("GOOD"))
    calls, tokens = trace_cost(read_jsonl(tmp_path / "pt.jsonl"))  # joint calls are counted once
    assert calls == len(server.requests) and f"model judges: {calls} calls" in io.out
    assert f"{tokens} prompt + " in io.out
    depth = next(n for n in read_jsonl(tmp_path / "pt.jsonl")[0]["nodes"] if n["id"] == "depth")
    a, b = depth["judgments"]
    assert [o["candidates"] for o in a["provenance"]["orders"]] == [["A", "B"], ["B", "A"]]
    assert a["provenance"]["agreement"] == "agree" and (a["value"], b["value"]) == ("shallow", "thorough")


def test_fewshot_file_and_options_through_the_cli(server, tmp_path, capsys):
    shots = tmp_path / "shots.csv"
    shots.write_text("criterion,text,verdict,reason\n" + "".join(
        f"correct,SHOT-{i} text,{1 + i % 5},r{i}\n" for i in range(20)), encoding="utf-8")
    data = write_jsonl(tmp_path / "items.jsonl", [{"input": "q", "response": "GOOD"}])
    code = gsr("run", HELPSTEER, "--data", data, "--mode", "pointwise", "--model", "m", "--fewshot", shots,
               "--fewshot-k", "3", "--seed", "11", "--max-reasks", "0", "--no-cache", "--out", "r.jsonl")
    io = capsys.readouterr()
    assert code == 0, io.err
    with_shots = [r for r in server.requests if "SHOT-" in r.prompt]
    assert len(with_shots) == 1  # only the criterion the file has examples for
    verdicts = re.findall(r"Verdict: [A-E] \((\d)\)", with_shots[0].prompt)
    assert len(verdicts) == 3 and len(set(verdicts)) == 3  # balanced: three different levels
    assert all(r["seed"] is not None for r in server.requests)  # --seed: a sampling seed per call
    assert not (tmp_path / ".gsr-cache").exists()  # --no-cache


def test_no_model_configured_is_a_clear_error(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", [{"input": "x", "response": "y"}])
    code = gsr("run", HELPSTEER, "--data", data, "--mode", "pointwise")
    err = capsys.readouterr().err
    assert code == 2 and "judged by a model" in err and "--model" in err


def test_unknown_role_is_reported_before_any_call(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", [{"input": "x", "response": "y"}])
    code = gsr("run", ENSEMBLE, "--data", data, "--mode", "pointwise", "--model", "m")
    err = capsys.readouterr().err
    assert code == 2 and "unknown judge role 'strong'" in err and not server.requests


def test_a_judge_failing_every_call_is_loud(server, tmp_path, capsys):
    server.responder = lambda body: Reply(status=404, content=f"The model `{body['model']}` does not exist")
    data = write_jsonl(tmp_path / "items.jsonl", [{"input": "x", "response": f"r{i}"} for i in range(5)])
    code = gsr("run", HELPSTEER, "--data", data, "--mode", "pointwise", "--model", "no-such-model",
               "--out", "r.jsonl")
    io = capsys.readouterr()
    assert code == 1
    assert "WARNING" in io.err and "EVERY call failed" in io.err and "stopped calling it" in io.err
    assert all(r["status"] == "invalid" for r in read_jsonl(tmp_path / "r.jsonl"))
    assert len(server.requests) < 5 * 5


# ----------------------------------------------------------------------------------------- run totals in the trace


def _provenance_totals(records: list[dict]) -> dict:
    """Calls and tokens summed over every judgment's provenance (the first candidate of a joint call holds it)."""
    totals = {"calls": 0, "prompt": 0, "completion": 0, "cached_calls": 0}
    for record in records:
        for node in record["nodes"]:
            for j in node.get("judgments") or ():
                p = j["provenance"]
                totals["calls"] += p.get("calls", 0)
                totals["prompt"] += p.get("tokens", {}).get("prompt", 0)
                totals["completion"] += p.get("tokens", {}).get("completion", 0)
                totals["cached_calls"] += p.get("calls", 0) if p.get("cached") else 0
    return totals


def test_the_trace_ends_with_the_run_totals(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", [
        {"id": "g", "prompt": "Capital of France?", "response": "GOOD: Paris.", "label": 5},
        {"id": "b", "prompt": "Capital of France?", "response": "BAD: Lyon.", "label": 1},
        {"id": "x", "prompt": "Capital of Italy?", "response": "GOOD: Rome.", "label": 5},
    ])
    answered = {"n": 0}

    def responder(body):  # the first answer holds no JSON: one re-ask
        answered["n"] += 1
        return "I think it is fine." if answered["n"] == 1 else fake_model(body)

    server.responder = responder
    server.enqueue(Fault.status(500))  # one retried HTTP request
    argv = ["run", HELPSTEER, "--no-short-circuit", "--data", data, "--mode", "pointwise", "--input-field", "prompt", "--id-field", "id",
            "--label-field", "label", "--model", "fake-judge", "--bootstrap", "0", "--concurrency", "2"]
    code = gsr(*argv, "--out", "r.jsonl", "--trace", "t.jsonl")
    io = capsys.readouterr()
    assert code == 0, io.err
    records = read_jsonl(tmp_path / "t.jsonl")
    items, summary = records[:-1], records[-1]
    assert len(items) == 3 and all("kind" not in r for r in items)
    assert summary["kind"] == "run_summary" and summary["trace_version"] == 2
    assert (summary["items"], summary["ok"], summary["invalid"], summary["failed"]) == (3, 3, 0, 0)
    assert summary["mode"] == "pointwise" and summary["program"]["name"] == "helpfulness"
    assert isinstance(summary["wall_s"], float) and summary["wall_s"] > 0
    llm = summary["judges"]["llm"]
    prov = _provenance_totals(items)
    # the totals are the sum over the judgments' provenance ...
    assert llm["calls"] == prov["calls"] == 3 * 5 + 1  # five model criteria per item, plus the re-ask
    assert llm["prompt_tokens"] == prov["prompt"] > 0 and llm["completion_tokens"] == prov["completion"] > 0
    assert llm["cache_hits"] == prov["cached_calls"] == 0
    # ... and what the server saw: every HTTP request (the 500 included), every token it counted
    assert llm["http_requests"] == len(server.requests) == llm["calls"] + 1
    assert llm["retries"] == 1 and llm["reasks"] == 1
    served = [r for r in server.requests if r.fault is None]
    assert llm["prompt_tokens"] == sum(max(1, -(-len(r.prompt) // 4)) for r in served)
    assert llm["judgments"] == 15 and llm["ok"] == 15
    # the summary printed at the end says the same
    assert f"model judges: {llm['calls']} calls (0 from the cache, {llm['http_requests']} HTTP requests" in io.out

    # the same run again: every call from the cache, no request, no token; the results are the same
    n = len(server.requests)
    assert gsr(*argv, "--out", "r2.jsonl", "--trace", "t2.jsonl") == 0
    capsys.readouterr()
    assert len(server.requests) == n
    assert (tmp_path / "r2.jsonl").read_bytes() == (tmp_path / "r.jsonl").read_bytes()
    again = read_jsonl(tmp_path / "t2.jsonl")
    llm2 = again[-1]["judges"]["llm"]
    assert llm2["cache_hits"] == llm2["calls"] == _provenance_totals(again[:-1])["cached_calls"] == 16
    assert (llm2["http_requests"], llm2["prompt_tokens"], llm2["completion_tokens"]) == (0, 0, 0)
    # the two traces differ only in what the run cost (provenance, the summary), never in the item outcomes
    assert [r["result"] for r in again[:-1]] == [r["result"] for r in items]

    # replay skips the summary record and reports it
    code = gsr("replay", "t.jsonl", "--bootstrap", "0")
    out = capsys.readouterr().out
    assert code == 0 and "replayed 3 items" in out
    assert ("recorded run: 3 items (3 ok, 0 invalid, 0 failed) in" in out and
            f"model judges: 16 calls (0 from the cache, 17 HTTP requests), {llm['prompt_tokens']} prompt + "
            f"{llm['completion_tokens']} completion tokens" in out)


# ----------------------------------------------------------------------------------------- kill and resume


def _run_cmd(data: Path, out: Path, cache: Path) -> list[str]:
    return [sys.executable, "-m", "gsrlang.cli", "run", str(HELPSTEER), "--no-short-circuit", "--data", str(data), "--mode", "pointwise",
            "--id-field", "id", "--model", "fake-judge", "--out", str(out), "--cache", str(cache),
            "--concurrency", "6", "--no-progress"]


def _stored_keys(cache: Path) -> set[str]:
    with sqlite3.connect(cache) as conn:
        return {k for (k,) in conn.execute("SELECT key FROM judgments")}


def _request_key(body: dict, base_url: str) -> str:
    config = JudgeConfig(model=body["model"], base_url=base_url)
    schema = body["response_format"]["json_schema"]["schema"]
    return ChatRequest(messages=body["messages"], schema=schema, temperature=body.get("temperature"),
                       seed=body.get("seed")).cache_key(config)


@pytest.mark.slow  # kills a run and resumes it: the slow tier, with the chaos soak (docs/testing.md)
def test_kill_and_resume_gives_the_same_results_without_asking_twice(tmp_path, monkeypatch, capsys):
    n_items = 36
    rows = [{"id": f"i{i:03d}", "input": f"Question {i}?", "response": ("GOOD " if i % 3 else "BAD ") + f"answer {i}"}
            for i in range(n_items)]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSR_", "OPENAI_"))}
    with FakeOpenAI(responder=fake_model, latency=0.02) as server:
        base_url = server.base_url
        env.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY=KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        # the uninterrupted reference run (in this process), with its own cache
        ref = tmp_path / "ref.jsonl"
        assert main(_run_cmd(data, ref, tmp_path / "ref.sqlite")[3:]) == 0
        capsys.readouterr()
        needed = len(server.requests)
        assert needed == n_items * 5
        server.reset()

        out, cache = tmp_path / "out.jsonl", tmp_path / "run.sqlite"
        # OPENAI_ORG_ID tags each process's requests (the SDK sends it as a header), so requests of the
        # killed process still in the server's socket buffers are not mistaken for the resumed run's
        proc = subprocess.Popen(_run_cmd(data, out, cache), env={**env, "OPENAI_ORG_ID": "killed"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(server.requests) < 50 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
        stored = _stored_keys(cache)
        answered = {k for k in stored if not k.startswith("unit:")}
        assert 0 < len(answered) < needed  # killed mid-run

        resumed = subprocess.run(_run_cmd(data, out, cache), env={**env, "OPENAI_ORG_ID": "resumed"},
                                 capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        assert not server.errors, server.errors[0]
        again = [r for r in server.requests if r.headers.get("openai-organization") == "resumed"]

    assert out.read_bytes() == ref.read_bytes()  # the same results file, byte for byte
    keys = {_request_key(body, base_url) for body in again}
    assert len(keys) == len(again)  # nothing asked twice within the resumed run
    assert not keys & stored  # nothing stored was asked for again
    assert len(again) == needed - len(answered)  # exactly what was missing
    assert "from the cache" in resumed.stdout


# ----------------------------------------------------------------------------------------- the key never leaks


def test_the_key_is_never_written(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GSR_DEBUG", "")
    calls = {"n": 0}

    def responder(body):
        calls["n"] += 1
        if calls["n"] % 7 == 0:  # a server that echoes the key in its error message
            return Reply(status=500, content=f"upstream rejected key {KEY}")
        if calls["n"] % 11 == 0:
            return "not json, but it mentions nothing secret"
        return fake_model(body)

    data = write_jsonl(tmp_path / "items.jsonl",
                       [{"id": str(i), "input": "q", "response": f"GOOD {i}"} for i in range(6)])
    with FakeOpenAI(responder=responder) as server:
        server.reject_json_schema = True  # the structured-output fallback logs a warning
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code = gsr("run", HELPSTEER, "--data", data, "--mode", "pointwise", "--model", "m", "--out", "r.jsonl",
                   "--trace", "t.jsonl", "--max-retries", "1")
        # the key given on the command line, and a server that answers 401 with the key in the message
        server.responder = lambda body: Reply(status=401, content=f"Incorrect API key provided: {KEY}")
        code2 = gsr("run", HELPSTEER, "--data", data, "--mode", "pointwise", "--model", "m2", "--api-key", KEY,
                    "--out", "r2.jsonl", "--trace", "t2.jsonl", "--cache", "other/cache.sqlite")
        assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)  # it was used
    io = capsys.readouterr()
    assert code in (0, 1) and code2 == 1
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"r.jsonl", "t.jsonl", "r2.jsonl", "t2.jsonl", "judgments.sqlite", "cache.sqlite"} <= names
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in io.out and KEY not in io.err
    assert "falling back to json_object" in caplog.text and KEY not in caplog.text  # the logs
    assert "***" in io.err or "***" in (tmp_path / "t2.jsonl").read_text()  # scrubbed, not dropped
