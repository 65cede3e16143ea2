"""LLMClient over real HTTP against the fake OpenAI-compatible server; extract_json."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from gsrlang.judges.llm import (
    AnswerFormatError,
    ChatRequest,
    ClientPool,
    JudgeCallError,
    JudgeConfig,
    JudgeSettings,
    JudgmentCache,
    LLMClient,
    RefusalError,
    extract_json,
)

try:
    from fakeserver import FakeOpenAI, Fault, Reply, scripted
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI, Fault, Reply, scripted

KEY = "sk-test-SECRET-123"
SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}


def make_request(text: str = "criterion: clarity\ncandidate: A\nIs it clear?", **kw) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "system", "content": "You are a strict judge."}, {"role": "user", "content": text}],
        schema=kw.pop("schema", SCHEMA),
        **kw,
    )


def make_client(server: FakeOpenAI, cache: JudgmentCache | None = None, **cfg) -> LLMClient:
    config = JudgeConfig(
        model=cfg.pop("model", "fake-model"),
        base_url=server.base_url,
        api_key=cfg.pop("api_key", KEY),
        timeout_s=cfg.pop("timeout_s", 5.0),
        **cfg,
    )
    return LLMClient(config, cache, backoff_base=0.001, backoff_cap=0.01)


@pytest.fixture
def server():
    with FakeOpenAI(responder=lambda body: {"score": 4, "reason": "clear"}) as s:
        yield s


# --------------------------------------------------------------------------- basics


async def test_plain_answer(server):
    async with make_client(server) as client:
        result = await client.complete(make_request())
    assert result.data == {"score": 4, "reason": "clear"}
    assert json.loads(result.text) == result.data
    assert result.cached is False and result.attempts == 1
    assert result.structured == "json_schema"
    assert result.model == "fake-model"
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.latency_s >= 0
    (body,) = server.requests
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.0
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "judgment", "schema": SCHEMA, "strict": False},
    }
    assert body["messages"][-1]["content"].startswith("criterion: clarity")
    assert body.headers["authorization"] == f"Bearer {KEY}"
    assert "seed" not in body and "max_tokens" not in body
    u = client.usage.as_dict()
    assert u["calls"] == 1 and u["http_requests"] == 1 and u["retries"] == 0 and u["failures"] == 0
    assert u["prompt_tokens"] == result.prompt_tokens and u["completion_tokens"] == result.completion_tokens


async def test_request_overrides_and_config_defaults_are_sent(server):
    async with make_client(server, seed=7, max_tokens=300, temperature=0.5) as client:
        await client.complete(make_request())
        await client.complete(make_request(temperature=0.0, seed=1, max_tokens=50, schema_name="my judgment!"))
    first, second = server.requests
    assert (first["temperature"], first["seed"], first["max_tokens"]) == (0.5, 7, 300)
    assert (second["temperature"], second["seed"], second["max_tokens"]) == (0.0, 1, 50)
    assert second["response_format"]["json_schema"]["name"] == "my_judgment_"


async def test_no_key_sends_placeholder(server):
    async with make_client(server, api_key=None) as client:
        await client.complete(make_request())
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_scripted_answers_per_criterion_and_candidate():
    script = scripted(
        {
            ("clarity", "candidate: A"): {"score": 5, "reason": "a"},
            ("clarity", "candidate: B"): {"score": 1, "reason": "b"},
            "clarity": {"score": 3, "reason": "any"},
        }
    )
    with FakeOpenAI(responder=script) as server:
        async with make_client(server) as client:
            a, b, c = await asyncio.gather(
                client.complete(make_request("criterion: clarity\ncandidate: A")),
                client.complete(make_request("criterion: clarity\ncandidate: B")),
                client.complete(make_request("criterion: clarity\ncandidate: C")),
            )
    assert (a.data["score"], b.data["score"], c.data["score"]) == (5, 1, 3)


async def test_models_endpoint():
    import openai

    with FakeOpenAI(models=["m1", "m2"]) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        models = await client.models.list()
        assert [m.id for m in models.data] == ["m1", "m2"]
        await client.close()


# --------------------------------------------------------------------------- cache


async def test_cache_hit_makes_no_http_call(server, tmp_path):
    cache = JudgmentCache(tmp_path / "judgments.sqlite")
    async with make_client(server, cache) as client:
        first = await client.complete(make_request())
        second = await client.complete(make_request())
        assert len(server.requests) == 1
        assert second.cached is True and second.attempts == 0
        assert second.prompt_tokens == 0 and second.completion_tokens == 0
        assert second.data == first.data and second.text == first.text
        assert second.structured == first.structured and second.model == first.model
        assert client.usage.cache_hits == 1 and client.usage.calls == 2
        assert client.usage.prompt_tokens == first.prompt_tokens  # the hit spent nothing
        # a different sample index is a different question
        await client.complete(make_request(sample=1))
        assert len(server.requests) == 2
    # a new client (e.g. the next run) reuses the stored answers
    cache.close()
    cache = JudgmentCache(tmp_path / "judgments.sqlite")
    async with make_client(server, cache) as client:
        again = await client.complete(make_request())
    assert again.cached and again.data == first.data
    assert len(server.requests) == 2
    assert len(cache) == 2
    cache.close()


async def test_format_errors_are_not_cached(tmp_path):
    with FakeOpenAI(responder=scripted({"x": ["not json at all", {"score": 1, "reason": "ok"}]})) as server:
        cache = JudgmentCache(tmp_path / "c.sqlite")
        async with make_client(server, cache) as client:
            with pytest.raises(AnswerFormatError):
                await client.complete(make_request("x"))
            assert len(cache) == 0
            result = await client.complete(make_request("x"))  # caller's retry reaches the server
        assert result.data == {"score": 1, "reason": "ok"} and not result.cached
        assert len(server.requests) == 2 and len(cache) == 1
        cache.close()


def test_cache_key_contents():
    base = JudgeConfig(model="m", base_url="http://localhost:8000/v1", api_key=KEY)
    req = make_request()
    key = req.cache_key(base)
    assert len(key) == 64 and key == make_request().cache_key(base)
    # not part of the key: the API key, timeouts, retries, concurrency
    assert key == req.cache_key(base.replace(api_key="other", timeout_s=3, max_retries=0, concurrency=1))
    # part of the key: everything that changes the answer
    for changed in (
        base.replace(model="m2"),
        base.replace(base_url="http://otherhost:8000/v1"),
        base.replace(temperature=0.7),
        base.replace(seed=3),
        base.replace(max_tokens=10),
        base.replace(structured="off"),
    ):
        assert req.cache_key(changed) != key
    for other in (
        make_request("different prompt"),
        make_request(schema={"type": "object"}),
        make_request(schema_name="other"),
        make_request(temperature=0.3),
        make_request(sample=2),
    ):
        assert other.cache_key(base) != key
    # request values equal to the config's defaults give the same key
    assert make_request(temperature=0.0).cache_key(base) == key
    # trailing slash in base_url does not matter
    assert req.cache_key(base.replace(base_url="http://localhost:8000/v1/")) == key


# --------------------------------------------------------------------------- retries


async def test_429_with_retry_after_is_honoured(server, monkeypatch):
    server.enqueue(Fault.status(429, retry_after=0.3))
    waits, real_sleep = [], asyncio.sleep

    async def sleep(delay, *args, **kwargs):  # what the client asks to wait (no wall-clock reading)
        waits.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    async with make_client(server) as client:
        result = await client.complete(make_request())
    assert result.data["score"] == 4 and result.attempts == 2
    first, second = server.requests
    assert first.fault == "status 429" and second.fault is None
    # backoff is capped at 0.01 s here, so only Retry-After explains a wait of 0.3 s
    assert any(w == pytest.approx(0.3, abs=0.02) for w in waits), waits
    assert client.usage.retries == 1 and client.usage.http_requests == 2


@pytest.mark.parametrize(
    "fault",
    [Fault.status(500), Fault.status(503), Fault.status(408), Fault.reset(), Fault.malformed()],
    ids=["500", "503", "408", "reset", "malformed"],
)
async def test_transient_error_then_success(server, fault):
    server.enqueue(fault)
    async with make_client(server) as client:
        result = await client.complete(make_request())
    assert result.data["score"] == 4
    assert result.attempts == 2 and client.usage.retries == 1
    assert len(server.requests) == 2 and server.requests[0].fault == fault.name


async def test_timeout_then_success(server):
    server.enqueue(Fault.timeout(60))
    async with make_client(server, timeout_s=0.3) as client:
        result = await client.complete(make_request())
    assert result.data["score"] == 4 and result.attempts == 2
    # the retry arrived while the server still held the first request (it holds it 60 s): the client's own
    # timeout ended the first attempt, not the server
    assert server.max_in_flight == 2 and server.requests[0].fault == "timeout"


async def test_all_attempts_fail(server):
    server.enqueue(*[Fault.status(503, message="upstream overloaded, try later")] * 3)
    async with make_client(server, max_retries=2) as client:
        with pytest.raises(JudgeCallError) as info:
            await client.complete(make_request())
    err = info.value
    msg = str(err)
    assert "fake-model" in msg and "HTTP 503" in msg and "3 attempts" in msg
    assert "upstream overloaded" in msg
    assert err.status == 503 and err.attempts == 3 and err.retryable and err.kind == "http"
    assert KEY not in msg and KEY not in repr(err)
    assert len(server.requests) == 3
    assert client.usage.failures == 1 and client.usage.retries == 2


async def test_timeouts_exhausted(server):
    server.enqueue(Fault.timeout(5), Fault.timeout(5))
    async with make_client(server, timeout_s=0.2, max_retries=1) as client:
        with pytest.raises(JudgeCallError) as info:
            await client.complete(make_request())
    assert info.value.kind == "timeout" and "timed out" in str(info.value) and info.value.attempts == 2


async def test_connection_refused_is_reported():
    with FakeOpenAI() as server:
        url = server.base_url
    config = JudgeConfig(model="m", base_url=url, max_retries=1, timeout_s=2)
    async with LLMClient(config, backoff_base=0.001, backoff_cap=0.001) as client:
        with pytest.raises(JudgeCallError) as info:
            await client.complete(make_request())
    assert info.value.kind == "connection" and "connection error" in str(info.value)
    assert info.value.attempts == 2


async def test_other_4xx_fail_at_once(server):
    server.enqueue(Fault.status(400, message="messages[1].content is too long"))
    async with make_client(server) as client:
        with pytest.raises(JudgeCallError) as info:
            await client.complete(make_request())
    assert len(server.requests) == 1
    assert info.value.status == 400 and not info.value.retryable and info.value.attempts == 1
    assert "not retried" in str(info.value) and "too long" in str(info.value)


async def test_server_echoing_the_key_is_scrubbed(server):
    server.enqueue(Fault.status(401, message=f"Incorrect API key provided: {KEY}. Get one at ..."))
    async with make_client(server) as client:
        with pytest.raises(JudgeCallError) as info:
            await client.complete(make_request())
    err = info.value
    for text in (str(err), repr(err), err.server_message or "", repr(err.__dict__)):
        assert KEY not in text
    assert "***" in str(err) and "API key" in str(err)
    assert err.__cause__ is None  # the SDK exception (with request headers) is not chained


async def test_max_completion_tokens_adaptation():
    def responder(body):
        if "max_tokens" in body:
            return Reply(
                status=400,
                content="Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
            )
        return {"score": 2, "reason": "r"}

    with FakeOpenAI(responder=responder) as server:
        async with make_client(server, max_tokens=100) as client:
            r1 = await client.complete(make_request())
            await client.complete(make_request("second"))
    assert r1.data["score"] == 2
    assert [("max_tokens" in b, b.get("max_completion_tokens")) for b in server.requests] == [
        (True, None),
        (False, 100),
        (False, 100),
    ]


# --------------------------------------------------------------------------- structured output


async def test_json_schema_rejected_falls_back_to_json_object(server):
    server.reject_json_schema = True
    async with make_client(server) as client:
        first = await client.complete(make_request())
        second = await client.complete(make_request("another"))
        assert client.structured_mode == "json_object"
        assert client._rejected == {"json_schema"}
    assert first.data == {"score": 4, "reason": "clear"}
    assert first.structured == second.structured == "json_object"
    assert first.attempts == 2 and second.attempts == 1
    kinds = [b["response_format"]["type"] for b in server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]  # remembered for the client
    last_user = server.requests[1]["messages"][-1]
    assert last_user["role"] == "user" and "JSON Schema" in last_user["content"]
    assert '"score"' in last_user["content"]
    assert client.usage.fallbacks == 1 and client.usage.retries == 0


async def test_both_formats_rejected_falls_back_to_plain_text():
    answer = 'Here is my judgment:\n```json\n{"score": 3, "reason": "fine"}\n```\nHope this helps.'
    with FakeOpenAI(responder=lambda body: answer) as server:
        server.reject_json_schema = server.reject_json_object = server.reject_grammar = True
        async with make_client(server) as client:
            result = await client.complete(make_request())
            assert client.structured_mode == "off"
    assert result.data == {"score": 3, "reason": "fine"} and result.structured == "off"
    assert [b.get("response_format", {}).get("type") for b in server.requests] == [
        "json_schema", "json_object", None, None]
    assert "grammar" in server.requests[2] and "grammar" not in server.requests[3]
    assert "JSON Schema" in server.requests[-1]["messages"][-1]["content"]


async def test_explicit_mode_is_not_downgraded(server):
    server.reject_json_schema = True
    async with make_client(server, structured="json_schema") as client:
        with pytest.raises(JudgeCallError) as info:
            await client.complete(make_request())
    assert info.value.status == 400 and len(server.requests) == 1


async def test_structured_off_and_no_schema(server):
    async with make_client(server, structured="off") as client:
        await client.complete(make_request())
        await client.complete(make_request("no schema here", schema=None))
    with_schema, without = server.requests
    assert "response_format" not in with_schema and "JSON Schema" in with_schema["messages"][-1]["content"]
    assert "response_format" not in without and without["messages"][-1]["content"] == "no schema here"
    # auto mode without a schema uses json_object, with an instruction mentioning JSON
    server.reset()
    async with make_client(server) as client:
        result = await client.complete(make_request("rate it", schema=None))
    assert result.structured == "json_object"
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    assert "JSON" in server.requests[0]["messages"][-1]["content"]


async def test_prose_around_fenced_json_is_parsed():
    answer = 'Let me think.\n\n```json\n{"score": 2, "reason": "has {braces} and \\"quotes\\""}\n```\nDone.'
    with FakeOpenAI(responder=lambda body: answer) as server:
        async with make_client(server) as client:
            result = await client.complete(make_request())
    assert result.data == {"score": 2, "reason": 'has {braces} and "quotes"'}
    assert result.text == answer


async def test_non_json_answer_raises_with_raw_text():
    raw = "I think the candidate is pretty good, maybe a 4 out of 5."
    with FakeOpenAI(responder=lambda body: raw) as server:
        async with make_client(server) as client:
            with pytest.raises(AnswerFormatError) as info:
                await client.complete(make_request())
            assert client.usage.format_errors == 1
            assert client.usage.completion_tokens > 0  # the bad answer still cost tokens
    err = info.value
    assert err.text == raw
    assert "pretty good" in str(err)
    assert err.usage["completion_tokens"] > 0 and err.structured == "json_schema"
    assert len(server.requests) == 1  # not retried by the client


async def test_truncated_answer_mentions_max_tokens():
    reply = Reply(content='{"score": 4, "reason": "the answer was cu', finish_reason="length")
    with FakeOpenAI(responder=lambda body: reply) as server:
        async with make_client(server) as client:
            with pytest.raises(AnswerFormatError, match="max_tokens"):
                await client.complete(make_request())


async def test_refusal(server):
    server.enqueue(Fault.refusal("I can't judge this."))
    async with make_client(server) as client:
        with pytest.raises(RefusalError) as info:
            await client.complete(make_request())
    assert info.value.refusal == "I can't judge this." and isinstance(info.value, AnswerFormatError)
    assert len(server.requests) == 1


# --------------------------------------------------------------------------- concurrency, secrets, pool


async def test_concurrency_bound_is_respected():
    with FakeOpenAI(responder=lambda body: {"score": 1, "reason": "r"}, latency=0.05) as server:
        async with make_client(server, concurrency=3) as client:
            results = await asyncio.gather(*(client.complete(make_request(f"item {i}")) for i in range(15)))
    assert len(results) == 15 and all(r.data["score"] == 1 for r in results)
    assert server.max_in_flight <= 3
    assert server.max_in_flight >= 2  # the requests did overlap


async def test_key_never_leaks(server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    cache = JudgmentCache(tmp_path / "c.sqlite")
    client = make_client(server, cache)
    config = client.config
    settings = JudgeSettings.build(config, {"strong": {"model": "big"}})
    texts = [str(config), repr(config), repr(config.api_key), f"{config.api_key}", repr(settings), repr(client)]
    await client.complete(make_request())
    await client.complete(make_request("x", schema=None))
    server.enqueue(Fault.status(500, message=f"boom {KEY}"), Fault.status(500))
    client2 = LLMClient(config.replace(max_retries=1), cache, backoff_base=0.001, backoff_cap=0.001)
    with pytest.raises(JudgeCallError) as info:
        await client2.complete(make_request("y"))
    texts += [str(info.value), repr(info.value), repr(vars(info.value))]
    await client.aclose()
    await client2.aclose()
    cache.close()
    texts.append(caplog.text)
    assert "retry 1/1" in caplog.text  # our own log lines were captured
    for text in texts:
        assert KEY not in text, text
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes(), path
    assert config.api_key.reveal() == KEY


async def test_client_pool_shares_clients_by_config(server):
    default = JudgeConfig(model="fake-model", base_url=server.base_url)
    settings = JudgeSettings.build(default, {"same": {}, "strong": {"model": "big-model"}})
    async with ClientPool(settings, backoff_base=0.001) as pool:
        assert pool.for_role(None) is pool.for_role("same")
        strong = pool.for_role("strong")
        assert strong is not pool.for_role(None) and strong.config.model == "big-model"
        r = await strong.complete(make_request())
        await pool.for_role().complete(make_request())
        assert r.model == "big-model"
        assert pool.usage.calls == 2 and pool.usage.http_requests == 2
    assert [b["model"] for b in server.requests] == ["big-model", "fake-model"]


# --------------------------------------------------------------------------- fake server


def test_fake_server_sustains_concurrent_slow_requests():
    n_threads, per_thread = 32, 8
    with FakeOpenAI(latency=0.1) as server:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})

        def worker():
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            for _ in range(per_thread):
                conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                assert resp.status == 200
                json.loads(resp.read())
            conn.close()

        threads = [threading.Thread(target=worker) for _ in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(server.requests) == n_threads * per_thread
        assert server.max_in_flight >= 16  # the slow requests overlapped (its throughput: benchmarks/bench_llm.py)


def test_fake_server_closes_promptly_with_sleeping_handler():
    server = FakeOpenAI().start()
    server.enqueue(Fault.timeout(3600))  # the handler sleeps an hour unless close() wakes it

    def call():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.request("POST", "/v1/chat/completions", body="{}", headers={"Content-Type": "application/json"})
            conn.getresponse()
        except (OSError, http.client.HTTPException):
            pass

    t = threading.Thread(target=call)
    t.start()
    while not server.requests:
        time.sleep(0.01)
    server.close()
    t.join(120)  # a liveness bound, not a speed one: without the wake-up the call would last an hour
    assert not t.is_alive()


# --------------------------------------------------------------------------- extract_json


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('  \n{"a": [1, 2, {"b": null}]}\n', {"a": [1, 2, {"b": None}]}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure!\n```\n{"a": "x"}\n```\n', {"a": "x"}),
        ('```JSON\n{"a": 1}\n```', {"a": 1}),
        ('Here it is: {"a": "b}"} -- and {"c": 2}', {"a": "b}"}),
        ('The verdict {not json} then {"ok": true}.', {"ok": True}),
        ('<think>maybe {"a": 0}? no.</think>\n{"a": 1}', {"a": 1}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ('{"text": "line one\nline two"}', {"text": "line one\nline two"}),
        ('{"s": "a \\"quoted\\" {brace"} trailing', {"s": 'a "quoted" {brace'}),
        ('{"outer": {"inner": 1}', {"inner": 1}),  # truncated outer object: the inner one closes
    ],
)
def test_extract_json(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json here", "[1, 2, 3]", '"just a string"', "{broken", "{'a': 1}"])
def test_extract_json_errors(text):
    with pytest.raises(AnswerFormatError) as info:
        extract_json(text)
    assert info.value.text == text


def test_extract_json_error_excerpt_is_short():
    text = "blah " * 1000
    with pytest.raises(AnswerFormatError) as info:
        extract_json(text)
    assert len(str(info.value)) < 300 and info.value.text == text


def test_extract_json_pathological_input_is_bounded():
    """Unbalanced braces: the brace matcher tries at most _MAX_SPANS openings, each one pass over the text (its
    work is counted in characters read, not timed; benchmarks/bench_bounds.py times it)."""
    from gsrlang.judges.llm import jsonparse

    class Counting(str):
        reads = 0

        def __getitem__(self, key):
            Counting.reads += 1
            return str.__getitem__(self, key)

    n = 2000
    with pytest.raises(AnswerFormatError):
        extract_json(Counting("{" * n))
    # trying every opening brace would read n * (n + 1) / 2 = 2,001,000 characters
    assert 0 < Counting.reads <= (jsonparse._MAX_SPANS + 1) * n


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    obj=st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=4),
    before=st.text(alphabet=st.characters(blacklist_characters="{}`"), max_size=40),
    after=st.text(max_size=40),
    fenced=st.booleans(),
)
def test_extract_json_finds_object_in_prose(obj, before, after, fenced):
    dumped = json.dumps(obj, indent=None if fenced else 2)
    body = f"```json\n{dumped}\n```" if fenced else dumped
    assert extract_json(f"{before}{body}{after}") == obj


# --------------------------------------------------------------------------- identical requests in flight


async def test_identical_requests_in_flight_are_merged_into_one_call():
    """Same prompt, model and settings while the first is in flight: one HTTP request answers all three;
    another prompt, or another sample of the same prompt, is a call of its own."""
    with FakeOpenAI(responder=lambda body: {"score": 4, "reason": "clear"}, latency=0.2) as server:
        async with make_client(server) as client:
            same = [client.complete(make_request()) for _ in range(3)]
            other = client.complete(make_request("criterion: depth\ncandidate: A\nIs it deep?"))
            sample = client.complete(make_request(sample=1))
            results = await asyncio.gather(*same, other, sample)
        assert len(server.requests) == 3
        first, *merged = results[:3]
        assert not first.merged and all(r.merged and r.data == first.data for r in merged)
        assert all(r.prompt_tokens == 0 and r.attempts == 0 for r in merged)  # the tokens were spent once
        u = client.usage.as_dict()
        assert u["calls"] == 5 and u["merged"] == 2 and u["http_requests"] == 3
        # once the first is answered, the same request is a new call (or a cache hit, with a cache)
        async with make_client(server) as again:
            await again.complete(make_request())
        assert len(server.requests) == 4




async def test_the_adaptive_window_is_the_clients_one_bound():
    """Requests in flight are bounded by the window alone: with its limit lowered (as after 429s), no more than
    that are sent at once, though the concurrency setting allows more (the window raises its limit as calls succeed,
    up to its ceiling: both are lowered here)."""
    with FakeOpenAI(responder=lambda body: {"score": 1, "reason": "r"}, latency=0.05) as server:
        async with make_client(server, concurrency=6) as client:
            client.window.ceiling = client.window.limit = 2  # as if lowered for good
            await asyncio.gather(*(client.complete(make_request(f"item {i}")) for i in range(10)))
    assert server.max_in_flight == 2
