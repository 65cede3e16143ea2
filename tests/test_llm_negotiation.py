"""Structured-output negotiation per (base_url, model), against the fake server's imitations of
OpenAI-like and llama.cpp-like servers (the real llama.cpp server is in tests/realmodel/)."""

from __future__ import annotations

import asyncio
import json

import pytest

from gsrlang.judges.llm import ChatRequest, JudgeCallError, JudgeConfig, JudgmentCache, LLMClient
from gsrlang.judges.llm.gbnf import regex_gbnf, schema_gbnf
from gsrlang.judges.llm.server import KnowledgeStore, context_from_error, format_rejected

from fakeserver import FakeOpenAI, Fault

SCHEMA = {"type": "object", "properties": {"reason": {"type": "string"},
                                           "answer": {"type": "string", "enum": ["A", "B"]}},
          "required": ["reason", "answer"], "additionalProperties": False}


def request(text: str = "Is it clear?") -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], schema=SCHEMA)


def client(server: FakeOpenAI, cache=None, knowledge=None, **cfg) -> LLMClient:
    config = JudgeConfig(model="m", base_url=server.base_url, timeout_s=5.0, **cfg)
    return LLMClient(config, cache, backoff_base=0.001, backoff_cap=0.01, knowledge=knowledge)


async def test_llamacpp_500_steps_down_to_json_object_with_the_schema_and_is_not_retried(tmp_path):
    with FakeOpenAI() as server:
        server.llamacpp = True
        async with client(server, knowledge=KnowledgeStore(tmp_path / "servers.json")) as c:
            result = await c.complete(request())
            assert c.structured_mode == "json_object" and c.negotiation == "negotiated"
            assert c.usage.retries == 0 and c.usage.fallbacks == 1
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object"]
    assert server.requests[1]["response_format"]["schema"] == SCHEMA
    assert result.data == {"reason": "example", "answer": "A"} and result.structured == "json_object"


async def test_concurrent_first_requests_negotiate_once(tmp_path):
    with FakeOpenAI(latency=0.05) as server:
        server.llamacpp = True
        async with client(server, knowledge=KnowledgeStore(tmp_path / "s.json"), concurrency=8) as c:
            results = await asyncio.gather(*(c.complete(request(f"q{i}")) for i in range(8)))
    kinds = [r["response_format"]["type"] for r in server.requests]
    assert kinds.count("json_schema") == 1 and kinds.count("json_object") == 8
    assert all(r.structured == "json_object" for r in results)


async def test_a_resumed_run_does_not_negotiate(tmp_path):
    cache_path = tmp_path / "cache" / "judgments.sqlite"
    with FakeOpenAI() as server:
        server.llamacpp = True
        cache = JudgmentCache(cache_path)
        async with client(server, cache) as c:
            await c.complete(request("first"))
        stored = json.loads((cache_path.parent / "servers.json").read_text())
        (entry,) = stored["servers"].values()
        assert entry["structured"] == "json_object" and entry["rejected"] == ["json_schema"]
        server.reset()
        async with client(server, cache) as c:  # a new process would build a new client just so
            assert c.negotiation == "remembered"
            await c.complete(request("second"))
        cache.close()
    assert [r["response_format"]["type"] for r in server.requests] == ["json_object"]


async def test_knowledge_is_per_server_and_model(tmp_path):
    store = KnowledgeStore(tmp_path / "s.json")
    store.update("http://a/v1", "m", structured="off")
    assert store.get("http://a/v1", "m")["structured"] == "off"
    assert store.get("http://a/v1", "other") == {} and store.get("http://b/v1", "m") == {}
    (tmp_path / "s.json").write_text("not json")
    assert store.get("http://a/v1", "m") == {}  # a damaged file is forgotten, never fatal


async def test_grammar_step_sends_gbnf_and_off_is_last(tmp_path):
    with FakeOpenAI() as server:
        server.reject_json_schema = server.reject_json_object = True
        async with client(server) as c:
            await c.complete(request())
            assert c.structured_mode == "grammar"
    sent = server.requests[-1]
    assert "response_format" not in sent and sent["grammar"].startswith("root ::=")
    assert '"\\"answer\\""' in sent["grammar"] and '"\\"A\\""' in sent["grammar"]
    assert "JSON Schema" in sent["messages"][-1]["content"]


async def test_forced_mode_the_server_refuses_fails_at_once_naming_the_flag():
    with FakeOpenAI() as server:
        server.llamacpp = True
        async with client(server, structured="json_schema") as c:
            with pytest.raises(JudgeCallError) as info:
                await c.complete(request())
    assert len(server.requests) == 1 and info.value.status == 500
    assert "--structured auto" in str(info.value) and "\n" not in str(info.value)


async def test_a_500_that_is_not_about_the_format_is_still_retried():
    with FakeOpenAI() as server:
        server.enqueue(Fault.status(500, message="CUDA out of memory"))
        async with client(server) as c:
            await c.complete(request())
            assert c.usage.retries == 1 and c.structured_mode == "json_schema"


async def test_server_down_fails_the_queued_calls_at_once():
    with FakeOpenAI() as server:
        url = server.base_url
    config = JudgeConfig(model="m", base_url=url, timeout_s=2.0, max_retries=1)
    async with LLMClient(config, backoff_base=0.001, backoff_cap=0.01) as c:
        with pytest.raises(JudgeCallError) as first:
            await c.complete(request())
        before = c.usage.http_requests
        with pytest.raises(JudgeCallError) as second:
            await c.complete(request("again"))
        assert c.usage.http_requests == before  # no new attempt
    assert "is the server running" in str(first.value) and str(second.value) == str(first.value)


async def test_context_overflow_names_the_context_and_the_fix():
    with FakeOpenAI() as server:
        server.context_length = 50
        async with client(server) as c:
            with pytest.raises(JudgeCallError) as info:
                await c.complete(request("word " * 400))
    assert "50-token context" in str(info.value) and "--n_ctx" in str(info.value)


def test_format_rejection_rules():
    sent = {"response_format": {"type": "json_schema"}}
    assert format_rejected(400, "response_format json_schema is not supported", sent)
    assert format_rejected(500, "[{'msg': \"Input should be 'text' or 'json_object'\", 'loc': "
                                "['body', 'response_format', 'type']}]", sent)
    assert not format_rejected(500, "response_format: out of memory", sent)  # a crash, not a refusal
    assert not format_rejected(400, "response_format is not supported", {})   # nothing was sent
    assert not format_rejected(429, "response_format", sent)
    assert format_rejected(400, "Unrecognized request argument supplied: grammar", {"extra_body": {"grammar": "x"}})


def test_context_length_from_errors():
    assert context_from_error("Requested tokens (8051) exceed context window of 4096") == 4096
    assert context_from_error("This model's maximum context length is 8192 tokens.") == 8192
    assert context_from_error("rate limited") is None


def test_gbnf_of_a_judgment_schema_lists_every_option_and_field():
    optional = {"type": "object", "properties": {
        "evidence": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string"},
        "answer": {"anyOf": [{"type": "number", "minimum": 1, "maximum": 5},
                             {"type": "string", "enum": ["cannot_assess"]}]}}}
    g = schema_gbnf(optional)
    assert g.startswith("root ::=") and "number" in g and '"\\"cannot_assess\\""' in g
    assert g.index('"\\"evidence\\""') < g.index('"\\"reason\\""') < g.index('"\\"answer\\""')


@pytest.mark.parametrize("pattern, expected", [
    (r"[A-Za-z_][A-Za-z0-9_]*", "[A-Za-z_] [A-Za-z0-9_]*"),
    (r"[0-9]+", "[0-9]+"),
    (r'"(?:[^"\\\n]|\\.)*"', '"\\"" ([^"\\\\\\n] | "\\\\" [^\\n])* "\\""'),
    (r"-?\d{1,3}", '"-"? [0-9]{1,3}'),
])
def test_regex_to_gbnf(pattern, expected):
    assert regex_gbnf(pattern) == expected


def test_regex_lookahead_has_no_gbnf_form():
    from gsrlang.judges.llm.gbnf import GBNFError

    with pytest.raises(GBNFError):
        regex_gbnf(r"\{(?=x)")


def test_prose_instead_of_json_is_reported_in_one_line_naming_the_server_and_the_fix(tmp_path, monkeypatch, capsys):
    from gsrlang.cli import main

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GSR_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.gsr").write_text('rubric r "x"\ntask pointwise { scale = 1..5  quantize = round }\n'
                                    'criterion polite: Bool { ask "Is it polite?" }\nsink normalize(polite)\n')
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "input": "q", "response": "r"}) + "\n")
    with FakeOpenAI(responder=lambda body: "I think the response is quite polite overall.") as server:
        code = main(["run", "p.gsr", "--data", "d.jsonl", "--mode", "pointwise", "--model", "fake-model",
                     "--base-url", server.base_url, "--no-progress", "--out", "r.jsonl"])
        origin = server.base_url.rsplit("/v1", 1)[0]
    err = capsys.readouterr().err
    assert code == 1
    (line,) = [x for x in err.splitlines() if "prose, not JSON" in x]
    assert origin in line and "1 of 1 judgments" in line and "--structured json_schema" in line
    assert "gsr probe" in line
