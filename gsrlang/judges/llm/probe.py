"""`gsr probe`: ask a server what it supports, with a few small requests, and remember it.

Each finding is measured, not assumed: a structured-output mode *enforces* its schema when
the answer obeys a schema the prompt never shows (an enum of one improbable word), a
grammar field is *obeyed* when the answer is exactly what a one-word grammar allows, the
context length is what the server tells (vLLM's listing, llama.cpp's /props) or what its
error to an over-long prompt names (for servers on this machine only). What is learnt is
written to the :class:`~gsrlang.judges.llm.server.KnowledgeStore`, where ``gsr run`` reads
its structured-output mode and ``gsr compile`` the context length and grammar field.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import openai

from .client import ADAPTABLE, ChatRequest, LLMClient, adapt_body, api_error_message, describe_adaptation, token_counts
from .gbnf import schema_gbnf
from .jsonparse import AnswerFormatError
from .server import LADDER, KnowledgeStore, context_from_error, format_rejected
from .transport import AnswerRefused, bounded_http_client, refusal_of
from .trust import host_of, is_loopback

__all__ = ["probe"]

_MARK = "Q7X"  # an answer no model gives by chance: a mode that enforces its constraint makes the model say it
_MARK_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": [_MARK]}},
                "required": ["answer"], "additionalProperties": False}
_HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]


def _enforced(text: str | None, mark: str = _MARK) -> bool:
    try:
        data = json.loads(text or "")
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("answer") == mark


class _Adapting:
    """The SDK's chat call, adapting the parameters the server refuses (a 400 naming one, as OpenAI's reasoning
    models answer `temperature` or `max_tokens`) once each, as judge calls do (gsrlang.judges.llm.client)."""

    def __init__(self, sdk, adapted: dict[str, str]) -> None:
        self.sdk = sdk
        self.adapted = adapted

    async def create(self, **kwargs):
        kwargs.setdefault("temperature", 0)
        tried: set[str] = set()
        while True:
            body = adapt_body(dict(kwargs), self.adapted)
            try:
                return await self.sdk.chat.completions.create(**body)
            except openai.APIStatusError as exc:
                param = getattr(exc, "param", None)
                if exc.status_code not in (400, 422) and param is None:
                    raise
                if param not in ADAPTABLE and "max_completion_tokens" in api_error_message(exc) and "max_tokens" in body:
                    param = "max_tokens"
                if param not in ADAPTABLE or param not in body or param in tried:
                    raise
                tried.add(param)
                for name in ("logprobs", "top_logprobs") if param in ("logprobs", "top_logprobs") else (param,):
                    self.adapted[name] = ADAPTABLE[name] or "dropped"
                if param in ("logprobs", "top_logprobs"):
                    raise


async def probe(config, *, knowledge: KnowledgeStore | None = None, overflow: bool | None = None) -> dict:
    """Ask a server what it supports (see ``gsr probe --help``); record it in ``knowledge``.

    Every step is one small request; a step the server refuses is reported, never raised.
    ``overflow`` sends one prompt longer than any context to read the context length from the
    error (default: only for servers on this machine, where it costs nothing).
    """
    base = config.effective_base_url
    report: dict[str, Any] = {"server": config.origin, "model": config.model, "reachable": False}
    key = config.api_key.reveal() if config.api_key else "not-needed"
    raw_sdk = openai.AsyncOpenAI(base_url=base, api_key=key, max_retries=0, timeout=config.timeout_s,
                                 http_client=bounded_http_client(config.max_answer_bytes))
    known = knowledge.get(base, config.model) if knowledge is not None else {}
    adapted: dict[str, str] = dict(known.get("adapted") or {}) if isinstance(known.get("adapted"), dict) else {}
    sdk = _Adapting(raw_sdk, adapted)  # every step's chat call goes through it
    try:
        status, listing = await asyncio.to_thread(_get_json, base.rstrip("/") + "/models", key, config.timeout_s,
                                                  config.max_answer_bytes)
        if status is None:
            report["error"] = (f"cannot reach {report['server']} ({listing}): is the server running at that "
                               "base_url?")
            return report
        report["reachable"] = True
        models, context = _read_models(status, listing, config.model)
        report.update(models=models, model_listed=None if models is None else config.model in models)
        if report["model_listed"] is False:
            report["error"] = (f"{report['server']} does not serve model {config.model!r} (it lists "
                               f"{', '.join(models) or 'none'}): pass --model with one of those")
        root = base.rstrip("/").removesuffix("/v1")
        status, props = await asyncio.to_thread(_get_json, root + "/props", key, config.timeout_s,
                                                config.max_answer_bytes)
        n_ctx = props.get("default_generation_settings", {}).get("n_ctx") if status == 200 and isinstance(
            props, dict) and isinstance(props.get("default_generation_settings"), dict) else None
        context = context or (n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None)  # llama.cpp's own server
        source = "server" if context else None
        if context is None and (overflow if overflow is not None else is_loopback(host_of(base)[0])):
            context = await _overflow_context(sdk, config.model)
            source = "overflow error" if context else None
        report.update(context_length=context, context_source=source)
        report["structured"] = {m: await _try_mode(sdk, config.model, m) for m in LADDER[:3]}
        report["grammar_dialect"] = await _grammar_dialect(sdk, config.model)
        report["logprobs"] = await _logprobs(sdk, config.model)
        report["prompt_cache"] = await _prompt_cache(sdk, config.model)
        report.update(await _speed(sdk, config))
    except openai.APIStatusError as exc:
        report["error"] = f"{report['server']} answered HTTP {exc.status_code}: {api_error_message(exc)[:200]}"
    except (openai.APIConnectionError, AnswerRefused) as exc:
        refused = refusal_of(exc)
        report["error"] = f"{report['server']}: {refused.detail}" if refused is not None else \
            f"{report['server']} dropped the connection ({type(exc).__name__})"
    finally:
        await raw_sdk.close()
    report["adapted"] = [describe_adaptation(p, a) for p, a in sorted(adapted.items())]
    if knowledge is not None and report["reachable"]:
        best = next((m for m in LADDER[:3] if report.get("structured", {}).get(m) == "enforced"), None)
        facts = {k: report.get(k) for k in ("context_length", "grammar_dialect", "logprobs", "prompt_cache")
                 if k in report}
        if adapted:
            facts["adapted"] = dict(sorted(adapted.items()))
        if best is not None and report.get("structured"):
            facts["structured"] = best
        knowledge.update(base, config.model, **facts)
    return report


_PREFIX = ("You are checking whether this server caches prompts. The following text is padding that repeats; "
           "ignore it.\n" + "The quick brown fox jumps over the lazy dog near the quiet river bank. " * 110)


async def _prompt_cache(sdk, model: str) -> bool | None:
    """Whether the server serves a repeated prompt prefix from a cache: True when the second of two requests
    sharing a long prefix (about 1,300 tokens: OpenAI caches from 1,024) reports cached tokens
    (`usage.prompt_tokens_details.cached_tokens`), False when it reports 0, None when it reports nothing."""
    seen = None
    for n in (1, 2):
        try:
            resp = await sdk.create(model=model, max_tokens=1, messages=[
                {"role": "system", "content": _PREFIX}, {"role": "user", "content": f"Reply with the digit {n}."}])
        except openai.APIStatusError:
            return None
        usage = resp.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
        if details is None or getattr(details, "cached_tokens", None) is None:
            seen = None if n == 2 else seen
            continue
        seen = token_counts(usage)[2] > 0
    return seen


class _Unbounded(Exception):
    """A GET's body passed the size or time bound."""


def _get_json(url: str, key: str, timeout: float, limit: int = 4 * 1024 * 1024) -> tuple[int | None, Any]:
    """(HTTP status, decoded JSON body or None) of a GET; (None, why) when the server cannot be reached, or its
    body passes `limit` bytes or `timeout` seconds in all (as model calls are bounded, see transport.py)."""
    import urllib.error
    import urllib.request

    def read(resp) -> bytes:
        chunks, n, until = [], 0, time.monotonic() + timeout
        while part := resp.read1(65536):
            n += len(part)
            if n > limit:
                raise _Unbounded(f"an answer larger than --max-answer-bytes {limit}")
            if time.monotonic() > until:
                raise _Unbounded(f"no whole answer within {timeout:g}s")
            chunks.append(part)
        return b"".join(chunks)

    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"})
    try:
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own server URL
                status, body = resp.status, read(resp)
        except urllib.error.HTTPError as exc:
            status, body = exc.code, read(exc)
    except _Unbounded as exc:
        return None, str(exc)
    except (urllib.error.URLError, OSError) as exc:
        return None, type(getattr(exc, "reason", exc)).__name__
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, None


def _read_models(status: int, body: Any, model: str) -> tuple[list[str] | None, int | None]:
    """Model ids, and a context length where the listing tells it (vLLM: max_model_len; llama.cpp: meta)."""
    data = body.get("data") if status == 200 and isinstance(body, dict) else None
    if not isinstance(data, list):
        return None, None
    ids = [str(m.get("id")) for m in data if isinstance(m, dict)]
    for m in data:
        if isinstance(m, dict) and m.get("id") == model:
            meta = m.get("meta") if isinstance(m.get("meta"), dict) else {}
            for value in (m.get("max_model_len"), meta.get("n_ctx"), m.get("context_length"), meta.get("n_ctx_train")):
                if isinstance(value, int) and value > 0:
                    return ids, value
    return ids, None


async def _overflow_context(sdk, model: str) -> int | None:
    try:
        await sdk.create(model=model, max_tokens=1, messages=[{"role": "user", "content": "word " * 300_000}])
    except openai.APIStatusError as exc:
        return context_from_error(api_error_message(exc))
    return None


async def _try_mode(sdk, model: str, mode: str) -> str:
    """"enforced" (the answer obeys a schema the prompt does not show), "ignored" (accepted, not obeyed),
    or "rejected" (the server refused the format)."""
    kwargs: dict[str, Any] = {"model": model, "messages": _HELLO, "max_tokens": 24, "temperature": 0}
    if mode == "json_schema":
        kwargs["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "probe", "schema": _MARK_SCHEMA, "strict": True}}
    elif mode == "json_object":
        kwargs["response_format"] = {"type": "json_object", "schema": _MARK_SCHEMA}
    else:
        kwargs["extra_body"] = {"grammar": schema_gbnf(_MARK_SCHEMA)}
    try:
        resp = await sdk.create(**kwargs)
    except openai.APIStatusError as exc:
        sent = {k: v for k, v in kwargs.items() if k in ("response_format", "extra_body")}
        if format_rejected(exc.status_code, api_error_message(exc), sent, getattr(exc, "param", None)):
            return "rejected"
        return f"error (HTTP {exc.status_code})"
    return "enforced" if _enforced(resp.choices[0].message.content) else "ignored"


async def _grammar_dialect(sdk, model: str) -> str | None:
    """Which grammar field the server obeys: GBNF in `grammar` (llama.cpp), Lark in `structured_outputs` or
    `guided_grammar` (vLLM); None when it obeys none."""
    tries = (("gbnf", {"grammar": f'root ::= "{_MARK}"'}),
             ("structured_outputs", {"structured_outputs": {"grammar": f'start: "{_MARK}"'}}),
             ("guided_grammar", {"guided_grammar": f'start: "{_MARK}"'}))
    for name, extra in tries:
        try:
            resp = await sdk.create(model=model, messages=_HELLO, max_tokens=8, temperature=0, extra_body=extra)
        except openai.APIStatusError:
            continue
        if (resp.choices[0].message.content or "").strip() == _MARK:
            return name
    return None


async def _logprobs(sdk, model: str) -> bool | None:
    """Whether the server returns per-token logprobs; None when the model answered no token at all,
    so there was nothing to return them for (Gemma 3 under llama-cpp-python's default chat template
    answers free-text prompts with an empty message)."""
    try:
        resp = await sdk.create(model=model, messages=_HELLO, max_tokens=2, temperature=0, logprobs=True,
                                top_logprobs=5)
    except openai.APIStatusError:
        return False
    if (lp := resp.choices[0].logprobs) is not None and lp.content and lp.content[0].top_logprobs:
        return True
    return None if not resp.choices[0].message.content else False


async def _speed(sdk, config) -> dict:
    """Generation speed (tokens/s over a 64-token answer) and the latency of one short judgment (auto mode)."""
    t0 = time.monotonic()
    resp = await sdk.create(model=config.model, max_tokens=64, temperature=0,
                            messages=[{"role": "user", "content": "Count from one to forty in words."}])
    elapsed = time.monotonic() - t0
    tokens = int(getattr(resp.usage, "completion_tokens", 0) or 0) if resp.usage else 0
    schema = {"type": "object", "properties": {"reason": {"type": "string"},
                                               "answer": {"type": "string", "enum": ["A", "B"]}},
              "required": ["reason", "answer"], "additionalProperties": False}
    request = ChatRequest(messages=[{"role": "user", "content": (
        "Is this response polite? Response: \"Thank you for asking.\" Options: A = yes, B = no. "
        "Answer with a JSON object {\"reason\": ..., \"answer\": \"A\" or \"B\"}.")}], schema=schema, max_tokens=64)
    judge_config = config.replace(structured="auto", max_retries=0)
    async with LLMClient(judge_config, knowledge=_Remembering(sdk.adapted)) as client:
        t1 = time.monotonic()
        try:
            result = await client.complete(request)
            parsed = True
        except AnswerFormatError:
            parsed = False
        latency = time.monotonic() - t1
        mode = client.structured_mode
    return {"tokens_per_s": round(tokens / elapsed, 1) if elapsed > 0 and tokens else None,
            "speed_answer_empty": not resp.choices or not resp.choices[0].message.content,
            "judgment_latency_s": round(latency, 3), "judgment_mode": mode, "judgment_parsed": parsed}


class _Remembering:
    """A stand-in knowledge store for the probe's own judge call: it starts from what the probe adapted, and
    keeps what the client adapts, without writing (the probe writes everything at the end)."""

    def __init__(self, adapted: dict[str, str]) -> None:
        self.adapted = adapted

    def get(self, base_url: str, model: str) -> dict:
        return {"adapted": dict(self.adapted)}

    def update(self, base_url: str, model: str, **facts) -> None:
        if isinstance(facts.get("adapted"), dict):
            self.adapted.update(facts["adapted"])
