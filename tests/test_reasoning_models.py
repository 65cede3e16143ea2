"""Frontier judges: OpenAI's reasoning models (refused parameters, reasoning effort, reasoning and cached
tokens), over real HTTP against the fake server, which answers as OpenAI's API reference and error bodies
show (tests/fakeserver.py, `reasoning`, `prompt_cache`, `refusal_style`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.judges.llm import ChatRequest, JudgeCallError, JudgeConfig, LLMClient
from gsrlang.judges.llm.cache import JudgmentCache
from gsrlang.judges.llm.server import KnowledgeStore

import manualclock
from fakeserver import FakeOpenAI, Fault
from test_llm_run import HELPSTEER, fake_model, read_jsonl, write_jsonl
from test_weighted import PROGRAM as WEIGHTED

KEY = "sk-gsr-reasoning-0c1d2e3f"
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


@pytest.fixture(autouse=True)
def clean_env(model_env):
    """The model settings of conftest.model_env: none from the caller's shell, the test's folder as cwd."""


@pytest.fixture
def reasoning(monkeypatch):
    with FakeOpenAI(responder=fake_model) as s:
        s.reasoning = True
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield s


def items(tmp_path: Path, n: int = 6) -> Path:
    return write_jsonl(tmp_path / "items.jsonl", [
        {"id": f"i{k}", "prompt": "Capital of France?", "response": ("GOOD: Paris." if k % 2 else "BAD: Lyon."),
         "label": 5 if k % 2 else 1} for k in range(n)])


def run(*extra, data, out="r.jsonl", cache=".gsr-cache/judgments.sqlite") -> int:
    return main([str(a) for a in ("run", HELPSTEER, "--mode", "pointwise", "--model", "gpt-5-mini", "--data", data,
                                  "--input-field", "prompt", "--id-field", "id", "--out", out, "--cache", cache,
                                  "--bootstrap", "0", *extra)])


def test_a_run_refused_on_temperature_adapts_once_and_a_second_run_sends_no_refused_request(reasoning, tmp_path,
                                                                                              capsys):
    data = items(tmp_path)
    code = run("--max-tokens", "300", "--trace", "t.jsonl", data=data)
    io = capsys.readouterr()
    assert code == 0, io.err
    rows = read_jsonl(tmp_path / "r.jsonl")
    assert sum(r.get("status") == "ok" for r in rows) == 6  # the run: 0 of 6 before
    bad = [r for r in reasoning.requests if "temperature" in r or "max_tokens" in r]
    # one refusal per parameter: temperature first, then max_tokens (each request sends only one refused one)
    assert len(bad) == 2 and "temperature" in bad[0] and "max_tokens" in bad[1] and "temperature" not in bad[1]
    assert all(r.get("max_completion_tokens") == 300 for r in reasoning.requests[2:])
    assert "adapted for gpt-5-mini at http://127.0.0.1" in io.out
    assert "temperature dropped (the server's default is used)" in io.out
    assert "max_tokens sent as max_completion_tokens" in io.out
    record = KnowledgeStore(tmp_path / ".gsr-cache" / "servers.json").get(reasoning.base_url, "gpt-5-mini")
    assert record["adapted"] == {"max_tokens": "max_completion_tokens", "temperature": "dropped"}
    assert record["structured"] == "json_schema"
    summary = read_jsonl(tmp_path / "t.jsonl")[-1]
    assert summary["judges"]["llm"]["adapted"]

    # a second run, with nothing cached (another cache file beside the same negotiation record): no refusal
    before = len(reasoning.requests)
    code = run("--max-tokens", "300", data=data, out="r2.jsonl", cache=".gsr-cache/other.sqlite")
    io = capsys.readouterr()
    assert code == 0, io.err
    second = reasoning.requests[before:]
    assert second and not any("temperature" in r or "max_tokens" in r for r in second)
    assert "(remembered)" in io.out
    assert (tmp_path / "r2.jsonl").read_bytes() == (tmp_path / "r.jsonl").read_bytes()


def test_reasoning_and_cached_tokens_are_counted_per_judge_and_criterion(reasoning, tmp_path, capsys):
    reasoning.prompt_cache = 64  # OpenAI caches from 1024 tokens; the fake's prompts are shorter
    data = items(tmp_path, 4)
    assert run("--no-short-circuit", "--reasoning-effort", "low", "--trace", "t.jsonl", data=data) == 0
    io = capsys.readouterr()
    assert all(r.get("reasoning_effort") == "low" for r in reasoning.requests)
    llm = read_jsonl(tmp_path / "t.jsonl")[-1]["judges"]["llm"]
    answered = [r for r in reasoning.requests if "temperature" not in r]
    assert llm["reasoning_tokens"] == 64 * len(answered)  # the fake's `low` effort: 64 a call
    assert 0 < llm["cached_tokens"] < llm["prompt_tokens"]
    assert llm["completion_tokens"] > llm["reasoning_tokens"]
    assert sum(r["reasoning_tokens"] for r in llm["by_criterion"].values()) == llm["reasoning_tokens"]
    assert sum(r["cached_tokens"] for r in llm["by_criterion"].values()) == llm["cached_tokens"]
    assert set(llm["by_criterion"]) == {"correct", "follows", "coherent", "verbosity", "unsafe"}
    assert llm["by_judge"]["default"]["model"] == "gpt-5-mini"
    assert llm["by_judge"]["default"]["prompt_tokens"] == llm["prompt_tokens"]
    # priced by genai-prices: gpt-5-mini $0.25 in / $0.025 cached / $2 out per million tokens
    expect = ((llm["prompt_tokens"] - llm["cached_tokens"]) * 0.25 + llm["cached_tokens"] * 0.025
              + llm["completion_tokens"] * 2.0) / 1e6
    assert llm["cost_usd"] == pytest.approx(expect, rel=1e-6)
    assert f"{llm['cached_tokens']} of the prompt tokens cached" in io.out
    assert f"{llm['reasoning_tokens']} of the completion tokens reasoning" in io.out
    assert "by criterion: " in io.out
    # a judgment's own tokens in its provenance
    trace = read_jsonl(tmp_path / "t.jsonl")
    prov = next(n for n in trace[0]["nodes"] if n["id"] == "correct")["judgments"][0]["provenance"]
    assert prov["tokens"]["reasoning"] == 64


def test_reasoning_effort_is_part_of_the_cache_key():
    config = JudgeConfig(model="gpt-5-mini", base_url="http://127.0.0.1:9/v1")
    request = ChatRequest(messages=[{"role": "user", "content": "x"}])
    keys = {request.cache_key(config.replace(reasoning_effort=e)) for e in (None, "minimal", "low", "medium", "high")}
    assert len(keys) == 5
    from gsrlang.judges.llm.config import ConfigError

    with pytest.raises(ConfigError, match="reasoning_effort must be one of"):
        config.replace(reasoning_effort="extreme")


def test_reasoning_effort_from_gsr_toml_and_per_role(reasoning, tmp_path):
    from gsrlang.judges.llm.config import resolve_settings

    (tmp_path / "gsr.toml").write_text('[judge]\nmodel = "gpt-5-mini"\nreasoning_effort = "high"\n'
                                       '[judge.roles.fast]\nreasoning_effort = "minimal"\n')
    settings = resolve_settings({}, cwd=tmp_path)
    assert settings.default.reasoning_effort == "high"
    assert settings.for_role("fast").reasoning_effort == "minimal"
    assert resolve_settings({"reasoning_effort": "low"}, cwd=tmp_path).default.reasoning_effort == "low"


def test_a_model_that_refuses_reasoning_effort_is_a_clear_error(tmp_path, monkeypatch, capsys):
    with FakeOpenAI(responder=fake_model) as server:  # not a reasoning model
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code = run("--reasoning-effort", "high", "--limit", "1", "--no-short-circuit", data=items(tmp_path))
        io = capsys.readouterr()
    assert code == 1
    assert "Unsupported parameter: 'reasoning_effort' is not supported with this model." in io.err
    assert "does not take --reasoning-effort high" in io.err
    assert len(server.requests) == 5  # one request a criterion: never a loop


@pytest.mark.parametrize("style", ["detail", "no_param", "french"])
def test_a_refusal_in_another_shape_is_a_clear_error_and_never_a_loop(reasoning, tmp_path, capsys, style):
    reasoning.refusal_style = style
    code = run("--limit", "1", "--no-short-circuit", data=items(tmp_path))
    io = capsys.readouterr()
    assert code == 1
    shown = {"detail": "Unsupported value: 'temperature' does not support 0.0",
             "no_param": "Unsupported value: 'temperature' does not support 0.0",
             "french": "Valeur non prise en charge"}[style]
    assert shown in io.err and "HTTP 400" in io.err
    assert len(reasoning.requests) == 5  # each criterion's call tried once


def weighted_run(*extra) -> int:
    Path("p.gsr").write_text(WEIGHTED)
    write_jsonl(Path("d.jsonl"), [{"id": f"a{k}", "input": "q", "response": f"r{k}"} for k in range(6)])
    return main(["run", "p.gsr", "--data", "d.jsonl", "--model", "gpt-5-mini", "--out", "r.jsonl", "--no-progress",
                 *extra])


def test_weighted_verdicts_on_a_model_without_logprobs(reasoning, tmp_path, capsys):
    code = weighted_run()
    io = capsys.readouterr()
    assert code == 1
    assert "weighted verdicts need a model that returns logprobs" in io.err
    # nothing was bought: every request the server got was refused (HTTP 400 costs nothing)
    assert reasoning.requests and all("logprobs" in r or "temperature" in r for r in reasoning.requests)
    record = KnowledgeStore(tmp_path / ".gsr-cache" / "servers.json").get(reasoning.base_url, "gpt-5-mini")
    assert record["logprobs"] is False
    # the next run knows it before any call: a one-line usage error, no request
    before = len(reasoning.requests)
    code = weighted_run()
    io = capsys.readouterr()
    assert code == 2 and len(reasoning.requests) == before
    assert "llm(weighted: true) reads the answer's logprobs" in io.err and "drop it" in io.err
    assert len(io.err.strip().splitlines()) <= 2


def test_weighted_on_an_openai_reasoning_model_is_refused_before_any_call(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # no base_url: OpenAI itself, which is never called
    code = weighted_run()
    io = capsys.readouterr()
    assert code == 2
    assert "'gpt-5-mini' is an OpenAI reasoning model, which returns none" in io.err


async def test_the_client_counts_cached_and_reasoning_tokens(tmp_path):
    with FakeOpenAI() as server:
        server.reasoning = True
        server.prompt_cache = 16
        config = JudgeConfig(model="o4-mini", base_url=server.base_url, reasoning_effort="high")
        long = "shared instructions " * 40
        async with LLMClient(config) as client:
            first = await client.complete(ChatRequest(messages=[{"role": "user", "content": long + "one"}],
                                                      schema=SCHEMA))
            second = await client.complete(ChatRequest(messages=[{"role": "user", "content": long + "two"}],
                                                       schema=SCHEMA))
    assert first.reasoning_tokens == second.reasoning_tokens == 512
    assert first.cached_tokens == 0 and second.cached_tokens > 0 and second.cached_tokens % 128 == 0
    assert client.usage.reasoning_tokens == 1024 and client.usage.cached_tokens == second.cached_tokens
    assert client.usage.adaptations == 1  # temperature, once


async def test_the_request_body_is_what_the_online_path_sends(tmp_path):
    with FakeOpenAI() as server:
        server.reasoning = True
        config = JudgeConfig(model="gpt-5-mini", base_url=server.base_url, max_tokens=50, reasoning_effort="low")
        async with LLMClient(config, JudgmentCache(tmp_path / "c.sqlite")) as client:
            request = ChatRequest(messages=[{"role": "user", "content": "judge this"}], schema=SCHEMA)
            await client.complete(request)
            body = client.request_body(attrs_evolve(request, sample=1))
            await client.complete(attrs_evolve(request, sample=1))
    assert body == dict(server.requests[-1])
    assert "temperature" not in body and body["max_completion_tokens"] == 50 and body["reasoning_effort"] == "low"


def attrs_evolve(obj, **changes):
    import attrs

    return attrs.evolve(obj, **changes)


async def arrived(server: FakeOpenAI, n: int, tasks) -> bool:
    """Whether `n` requests reach `server` before any of `tasks` ends (one that fails before its request arrives
    ends the wait instead of hanging it); no clock involved."""
    waiter = asyncio.ensure_future(asyncio.to_thread(server.wait_for_requests, n))
    await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    return waiter.done() and waiter.result()


def test_calls_do_not_wait_in_turn_behind_a_hanging_negotiation():
    """Issue 24 item 6: against a server that hangs, the calls queued behind the negotiating one go out together
    when its first attempt times out, not one after another (each when the one before it timed out).

    On a loop whose clock stands still until the test moves it (tests/manualclock.py), no timeout fires but the
    one the test lets fire, so what goes out is seen as events, however slow the machine: the clock moved once,
    past the first attempt's timeout, and all seven are sent, and are at the server at once with the first."""
    async def scenario(loop):
        with FakeOpenAI() as server:
            server.enqueue(*[Fault.timeout(3600)] * 8)  # hangs until the server closes, on leaving the block
            config = JudgeConfig(model="m", base_url=server.base_url, timeout_s=2.0, max_retries=0, concurrency=8)
            async with LLMClient(config) as client:
                tasks = [asyncio.ensure_future(client.complete(ChatRequest(
                    messages=[{"role": "user", "content": f"q{k}"}], schema=SCHEMA))) for k in range(8)]
                await loop.settle()
                assert client.usage.http_requests == 1  # the first negotiates; the others wait for its outcome
                assert await arrived(server, 1, tasks)
                loop.advance(config.timeout_s)  # the first attempt times out: the negotiation's outcome
                await asyncio.wait(tasks[:1])
                await loop.settle()
                # serialised, one more would be sent now and the rest only as each before it timed out
                assert client.usage.http_requests == 8, client.usage
                assert await arrived(server, 8, tasks[1:])
                assert server.in_flight == 8  # all eight at the server at once: the first is still hanging there
                loop.advance(config.timeout_s)  # the seven time out together
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(o, JudgeCallError) for o in outcomes), outcomes
        assert len(server.requests) == 8

    manualclock.run(scenario)


async def test_a_negotiation_that_succeeds_releases_the_others_with_its_mode():
    with FakeOpenAI() as server:
        server.reject_json_schema = True
        config = JudgeConfig(model="m", base_url=server.base_url, concurrency=8)
        async with LLMClient(config) as client:
            requests = [ChatRequest(messages=[{"role": "user", "content": f"q{k}"}], schema=SCHEMA) for k in range(8)]
            await asyncio.gather(*(client.complete(r) for r in requests))
    formats = [r["response_format"]["type"] for r in server.requests]
    assert formats.count("json_schema") == 1 and formats.count("json_object") == 8
    assert client.negotiation == "negotiated" and client.structured_mode == "json_object"


def test_gsr_compile_adapts_to_a_reasoning_model(tmp_path, capsys):
    from fakeserver import scripted
    from test_compile_cli import GOOD, RUBRIC, block

    (tmp_path / "rubric.md").write_text(RUBRIC + "\n", encoding="utf-8")
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        server.reasoning = True
        code = main(["compile", str(tmp_path / "rubric.md"), "--task", "pointwise", "--scale", "1..5", "--model",
                     "o3-mini", "--base-url", server.base_url, "--max-tokens", "2000", "-o", "p.gsr"])
        io = capsys.readouterr()
    assert code == 0, io.err
    assert (tmp_path / "p.gsr").read_text().endswith(GOOD)
    refused = [r for r in server.requests if "temperature" in r or "max_tokens" in r]
    assert len(refused) == 2  # temperature, then max_tokens: once each
    assert server.requests[-1]["max_completion_tokens"] == 2000


def test_gsr_probe_adapts_reports_and_remembers_and_sees_the_prompt_cache(tmp_path, capsys):
    cache = tmp_path / "c" / "judgments.sqlite"
    with FakeOpenAI(models=["gpt-5-mini"]) as server:
        server.reasoning = True
        server.prompt_cache = 1024
        code = main(["probe", "--model", "gpt-5-mini", "--base-url", server.base_url, "--cache", str(cache), "--json"])
        report = json.loads(capsys.readouterr().out)
        url = server.base_url
        code_table = main(["probe", "--model", "gpt-5-mini", "--base-url", url, "--cache", str(cache)])
        table = capsys.readouterr().out
        sent = list(server.requests)
    assert code == 0 and code_table == 0
    assert report["prompt_cache"] is True
    assert report["logprobs"] is False
    assert "temperature dropped (the server's default is used)" in report["adapted"]
    assert "max_tokens sent as max_completion_tokens" in report["adapted"]
    assert report["judgment_parsed"] is True
    known = KnowledgeStore(cache.with_name("servers.json")).get(url, "gpt-5-mini")
    assert known["adapted"]["temperature"] == "dropped" and known["prompt_cache"] is True
    assert "prompt cache" in table and "yes (cached tokens on a repeated prefix)" in table
    # the second probe starts from the record: it sends neither refused parameter
    second = sent[len(sent) // 2:]
    assert not any(r.get("temperature", 1) != 1 or "max_tokens" in r for r in sent[-5:])
    assert second


def test_gsr_probe_of_a_server_without_prompt_caching(tmp_path, capsys):
    with FakeOpenAI(models=["m"]) as server:
        server.prompt_cache = None
        code = main(["probe", "--model", "m", "--base-url", server.base_url, "--no-cache", "--json"])
        report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["prompt_cache"] is None  # the fake reports no cached_tokens at all


def test_tokens_and_dollars_in_metrics_json_and_the_report(reasoning, tmp_path, capsys):
    reasoning.prompt_cache = 64
    assert run("--no-short-circuit", "--label-field", "label", "--trace", "t.jsonl", data=items(tmp_path, 2)) == 0
    capsys.readouterr()
    assert main(["metrics", "r.jsonl", "--trace", "t.jsonl", "--json", "--bootstrap", "0"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    llm = read_jsonl(tmp_path / "t.jsonl")[-1]["judges"]["llm"]
    assert cost["reasoning_tokens"] == llm["reasoning_tokens"] > 0 and cost["cached_tokens"] == llm["cached_tokens"]
    assert cost["cost_usd"] == llm["cost_usd"] > 0 and set(cost["by_criterion"]) == set(llm["by_criterion"])
    assert main(["metrics", "r.jsonl", "--trace", "t.jsonl", "--bootstrap", "0"]) == 0
    assert f"{llm['reasoning_tokens']} of the completion tokens reasoning" in capsys.readouterr().out
    assert main(["report", "r.jsonl", "--trace", "t.jsonl", "-o", "page.html"]) == 0
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert f"{llm['cached_tokens']} of the prompt tokens cached" in page


def test_an_unknown_model_costs_unknown_never_zero(tmp_path, monkeypatch, capsys):
    with FakeOpenAI(responder=fake_model) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert main(["run", str(HELPSTEER), "--mode", "pointwise", "--model", "no-such-model-anywhere", "--data",
                     str(items(tmp_path, 1)), "--input-field", "prompt", "--trace", "t.jsonl", "--no-progress"]) == 0
    io = capsys.readouterr()
    assert "cost unknown (no price for the model" in io.out
    assert read_jsonl(tmp_path / "t.jsonl")[-1]["judges"]["llm"]["cost_usd"] is None


def test_prices_in_gsr_toml_override_the_library(tmp_path, monkeypatch, capsys):
    (tmp_path / "gsr.toml").write_text('[prices."no-such-model-anywhere"]\ninput = 1.0\noutput = 2.0\n')
    with FakeOpenAI(responder=fake_model) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert main(["run", str(HELPSTEER), "--mode", "pointwise", "--model", "no-such-model-anywhere", "--data",
                     str(items(tmp_path, 1)), "--input-field", "prompt", "--trace", "t.jsonl", "--no-progress"]) == 0
    llm = read_jsonl(tmp_path / "t.jsonl")[-1]["judges"]["llm"]
    assert llm["cost_usd"] == pytest.approx((llm["prompt_tokens"] * 1.0 + llm["completion_tokens"] * 2.0) / 1e6)
    (tmp_path / "gsr.toml").write_text('[prices."m"]\ninput = "cheap"\noutput = 1\n')
    code = main(["run", str(HELPSTEER), "--mode", "pointwise", "--model", "m", "--data", str(items(tmp_path, 1)),
                 "--input-field", "prompt", "--base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 2 and "input must be a number of US dollars per million tokens" in err


def test_batch_prices_are_the_librarys_or_half():
    from gsrlang.judges.llm.prices import price_of

    online, batch = price_of("gpt-5-mini", None), price_of("gpt-5-mini", None, batch=True)
    assert (online.input, online.cached_input, online.output) == (0.25, 0.025, 2.0)
    assert batch.input == pytest.approx(online.input / 2) and batch.output == pytest.approx(online.output / 2)
    own = price_of("mine", None, batch=True, overrides={"mine": {"input": 1.0, "output": 4.0}})
    assert (own.input, own.cached_input, own.output) == (0.5, 0.5, 2.0)
    assert price_of("no-such-model-anywhere", "http://127.0.0.1:9/v1") is None


async def test_429s_lower_the_requests_in_flight_and_successes_raise_them_again():
    from gsrlang.judges.llm.client import _ratelimit_reset

    with FakeOpenAI(latency=0.05) as server:
        server.rate_limit = 3  # more than 3 at once: 429 with retry-after-ms and x-ratelimit-* headers
        config = JudgeConfig(model="m", base_url=server.base_url, concurrency=8, max_retries=8)
        async with LLMClient(config, backoff_base=0.01) as client:
            requests = [ChatRequest(messages=[{"role": "user", "content": f"q{k}"}], schema=SCHEMA) for k in range(40)]
            results = await asyncio.gather(*(client.complete(r) for r in requests))
    assert len(results) == 40 and client.usage.failures == 0
    assert client.usage.rate_limited == server.rate_limited > 0
    assert client.window.cuts >= 1 and client.window.lowest <= 4
    # without the window, 8 in flight against a limit of 3 would meet a 429 on most requests
    assert server.rate_limited < 40
    assert _ratelimit_reset({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}) == 360
    assert _ratelimit_reset({"x-ratelimit-reset-tokens": "1.5s"}) == 1.5 and _ratelimit_reset({}) is None


def test_rpm_caps_the_requests_a_minute():
    """rpm=2: two requests go at once, and the third waits for room in the minute's budget of 2: 30 s, as the
    bucket (aiolimiter's, on the loop's clock) leaks 2 a minute. The clock stands still until the test moves it
    (tests/manualclock.py), so the third is seen waiting, and going, however slow the machine."""
    async def scenario(loop):
        with FakeOpenAI() as server:
            config = JudgeConfig(model="m", base_url=server.base_url, rpm=2)
            async with LLMClient(config) as client:
                tasks = [asyncio.ensure_future(client.complete(ChatRequest(
                    messages=[{"role": "user", "content": f"q{k}"}]))) for k in range(3)]
                await loop.settle()
                # the minute's budget, sent with the clock where it was; the third waits on the clock alone
                assert client.usage.http_requests == 2, client.usage
                await asyncio.gather(*tasks[:2])  # answered (a sent request waits on I/O only)
                loop.advance(29.9)
                await loop.settle()
                assert client.usage.http_requests == 2, client.usage  # not before the bucket has room
                loop.advance(0.2)  # 30.1 s on: room for one
                await loop.settle()
                assert client.usage.http_requests == 3, client.usage
                await tasks[2]
        assert len(server.requests) == 3

    manualclock.run(scenario)


def test_rpm_and_tpm_are_settings(tmp_path):
    from gsrlang.judges.llm.config import ConfigError, resolve_settings

    (tmp_path / "gsr.toml").write_text('[judge]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nrpm = 500\n'
                                       'tpm = 200000\n')
    d = resolve_settings({}, cwd=tmp_path).default
    assert (d.rpm, d.tpm) == (500, 200000)
    with pytest.raises(ConfigError, match="rpm must be a positive integer"):
        resolve_settings({"rpm": 0}, cwd=tmp_path)
