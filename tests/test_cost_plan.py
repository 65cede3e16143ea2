"""`gsr run --dry-run` (a plan of the model calls, none made) and `gsr run --budget USD`, against the fake
OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gsrlang.cli import main

from fakeserver import FakeOpenAI
from test_llm_run import HELPSTEER, fake_model, read_jsonl, write_jsonl

KEY = "sk-gsr-budget-5a6b7c8d"
MODEL = "gpt-4.1-mini"  # genai-prices: $0.40 in, $0.10 cached, $1.60 out per million tokens


@pytest.fixture(autouse=True)
def clean_env(model_env):
    """The model settings of conftest.model_env: none from the caller's shell, the test's folder as cwd."""


@pytest.fixture
def server(monkeypatch):
    with FakeOpenAI(responder=fake_model) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield s


def items(tmp_path: Path, n: int = 6) -> Path:
    return write_jsonl(tmp_path / "items.jsonl", [
        {"id": f"i{k}", "prompt": f"Question {k}: the capital of France?",
         "response": ("GOOD: Paris." if k % 3 else "BAD: Lyon."), "label": 5 if k % 3 else 1} for k in range(n)])


def gsr(*argv) -> int:
    return main([str(a) for a in argv])


def run(data, *extra, model=MODEL) -> int:
    return gsr("run", HELPSTEER, "--mode", "pointwise", "--model", model, "--data", data, "--input-field", "prompt",
               "--id-field", "id", "--bootstrap", "0", "--no-progress", *extra)


def plan_rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0] in ("correct", "coherent", "follows", "verbosity", "unsafe", "total"):
            rows[cells[0]] = cells[1:]
    return rows


def test_a_dry_run_makes_no_call_and_plans_what_the_run_then_buys(server, tmp_path, capsys):
    data = items(tmp_path)
    assert run(data, "--dry-run") == 0
    out = capsys.readouterr().out
    assert server.requests == [] and not (tmp_path / ".gsr-cache").exists()
    rows = plan_rows(out)
    assert rows["total"][:4] == ["30", "30", "0", "0"]  # 6 items x 5 model criteria; none cached or merged
    assert all(rows[c][0] == "6" for c in ("correct", "coherent", "follows", "verbosity", "unsafe"))
    assert "estimated at about 4 characters a token" in out and "guessed" in out
    assert "genai-prices" in out and "openai gpt-4.1-mini" in out and rows["total"][-1].startswith("$")

    assert run(data, "--no-short-circuit", "--trace", "t.jsonl", "--out", "r.jsonl") == 0
    capsys.readouterr()
    llm = read_jsonl(tmp_path / "t.jsonl")[-1]["judges"]["llm"]
    assert llm["http_requests"] == 30
    planned_prompt = int(rows["total"][5].replace(",", ""))
    assert abs(planned_prompt - llm["prompt_tokens"]) / llm["prompt_tokens"] < 0.25

    # with the previous trace: measured answer lengths; and the cache now answers everything
    assert run(data, "--dry-run", "--trace", "t.jsonl") == 0
    again = capsys.readouterr().out
    rows = plan_rows(again)
    assert rows["total"][:3] == ["30", "0", "30"] and rows["total"][-1] == "$0"
    assert "use the 6 items of --trace t.jsonl" in again
    assert len(server.requests) == 30


def test_a_previous_trace_gives_the_short_circuit_rates(server, tmp_path, capsys):
    first = items(tmp_path, 6)
    assert run(first, "--trace", "t.jsonl", "--out", "r.jsonl") == 0  # short-circuit judging skips some
    capsys.readouterr()
    trace = read_jsonl(tmp_path / "t.jsonl")
    made = trace[-1]["short_circuit"]["judgments"]
    # new items of the same kind, planned from the first run's rates, then run
    second = write_jsonl(tmp_path / "more.jsonl", [
        {"id": f"j{k}", "prompt": f"Another question {k}?", "response": ("GOOD: yes." if k % 3 else "BAD: no."),
         "label": 3} for k in range(6)])
    assert run(second, "--dry-run", "--trace", "t.jsonl") == 0
    rows = plan_rows(capsys.readouterr().out)
    expected = float(rows["total"][4])
    before = len(server.requests)
    assert run(second, "--out", "r2.jsonl") == 0
    bought = len(server.requests) - before
    assert bought < 30 and made < 30  # the programme's cap skips the other questions of a BAD response
    assert abs(expected - bought) / bought <= 0.10


def test_the_budget_stops_mid_run_and_a_resume_buys_only_the_rest(server, tmp_path, capsys):
    data = items(tmp_path)
    # the reference: the same run with no budget, in a cache of its own
    assert run(data, "--no-short-circuit", "--out", "full.jsonl", "--cache", "full/c.sqlite") == 0
    capsys.readouterr()
    full = [dict(r) for r in server.requests]
    server.reset()

    # about half of what the full run cost (30 calls of about $0.00026)
    code = run(data, "--no-short-circuit", "--out", "r.jsonl", "--trace", "t.jsonl", "--budget", "0.004",
               "--concurrency", "2")
    io = capsys.readouterr()
    assert code == 1
    assert "stopped by the budget: spent $" in io.err and "of the --budget of $0.0040" in io.err
    first = [r.prompt for r in server.requests]
    assert 0 < len(first) < 30
    written = read_jsonl(tmp_path / "r.jsonl")
    expected = read_jsonl(tmp_path / "full.jsonl")
    assert written and len(written) < 6 and all("kind" not in r for r in written)  # a prefix, no end line
    assert written == expected[:len(written)]
    summary = read_jsonl(tmp_path / "t.jsonl")[-1]
    assert summary["complete"] is False and summary["stopped"] == "budget"
    assert summary["judges"]["llm"]["cost_usd"] <= 0.004

    server.reset()
    assert run(data, "--no-short-circuit", "--out", "r.jsonl", "--budget", "1") == 0
    capsys.readouterr()
    second = [r.prompt for r in server.requests]
    assert not set(first) & set(second)  # nothing bought twice
    assert len(first) + len(second) == len(full)
    assert (tmp_path / "r.jsonl").read_bytes() == (tmp_path / "full.jsonl").read_bytes()


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf", ""])
def test_a_bad_budget_is_a_one_line_usage_error(server, tmp_path, capsys, value):
    assert run(items(tmp_path), "--budget", value) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--budget must be a positive number of US dollars" in err[0]
    assert server.requests == []


def test_a_budget_refuses_a_model_without_a_price(server, tmp_path, capsys):
    assert run(items(tmp_path), "--budget", "5", model="no-such-model-anywhere") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--budget needs the price of model 'no-such-model-anywhere'" in err[0]
    assert server.requests == []
    # and the plan says "unknown" for its dollars
    assert run(items(tmp_path), "--dry-run", model="no-such-model-anywhere") == 0
    out = capsys.readouterr().out
    assert plan_rows(out)["total"][-1] == "unknown" and "no price for no-such-model-anywhere" in out


def test_dry_run_and_budget_options_that_cannot_work(server, tmp_path, capsys):
    data = items(tmp_path)
    assert run(data, "--dry-run", "--out", "r.jsonl") == 2
    assert "--dry-run writes nothing" in capsys.readouterr().err
    assert run(data, "--dry-run", "--budget", "3") == 2
    assert "needs no --budget" in capsys.readouterr().err
    assert run(data, "--budget", "3", "--engine", "ray") == 2
    assert "local engine only" in capsys.readouterr().err
    assert run(data, "--dry-run", "--trace", "missing.jsonl") == 2
    assert "--trace missing.jsonl" in capsys.readouterr().err
    assert server.requests == []
