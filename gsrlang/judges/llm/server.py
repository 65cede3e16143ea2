"""What a model server supports, found out once per (base_url, model) and remembered.

OpenAI-compatible servers differ in how they take structured output. OpenAI and vLLM
take ``response_format: {"type": "json_schema", ...}``; llama.cpp's Python server
(llama-cpp-python) answers that with HTTP 500 and a validation error, but takes
``{"type": "json_object", "schema": {...}}`` and a GBNF grammar in the request's
``grammar`` field; some servers take none of these. :data:`LADDER` lists the modes from
strongest to weakest:

``json_schema``
    ``response_format`` of type ``json_schema`` with the answer's schema;
``json_object``
    ``response_format`` of type ``json_object`` *with* the schema (llama.cpp constrains
    to it; servers that ignore the extra key still get the schema in the prompt);
``grammar``
    a GBNF grammar of the schema (:func:`gsrlang.judges.llm.gbnf.schema_gbnf`) in the
    ``grammar`` field, and the schema in the prompt;
``off``
    the schema in the prompt only.

**Negotiation.** In ``auto`` mode the client tries the ladder in order on its first
request with a schema (one request at a time while it negotiates). An answer that says
the *format* is unsupported (:func:`format_rejected`: 400, 422, or a 500 whose body
names the format) means "step down", never "retry". The first mode that gets an answer
is kept for the client and written to a small JSON file, :class:`KnowledgeStore`
(``servers.json`` beside the judgment cache), keyed by base_url and model, so a resumed
run does not negotiate at all. ``--structured MODE`` forces one mode and skips all this.

The same file keeps what ``gsr probe`` learns (context length, grammar dialect,
logprobs); ``gsr compile`` reads the context length from it to size its prompt.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "LADDER",
    "KnowledgeStore",
    "context_from_error",
    "format_rejected",
    "knowledge_path",
]

LADDER = ("json_schema", "json_object", "grammar", "off")
STORE_VERSION = 1

# words that, in an error about the request, point at the structured-output format
_FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object", "json schema",
                 "structured output", "guided_json", "guided decoding", "grammar", "gbnf")


def format_rejected(status: int | None, message: str, sent: Mapping[str, Any], param: str | None = None) -> bool:
    """True when an error answer says the request's structured-output format is unsupported.

    400 and 422 count when they name the format (or its parameter); a 500 counts only when
    its body names it too (llama-cpp-python answers an unknown ``response_format`` type with
    a 500 validation error: "Input should be 'text' or 'json_object'"). A request that sent
    no format cannot have been refused for it.
    """
    sent_format = "response_format" in sent or "grammar" in (sent.get("extra_body") or {})
    if not sent_format or status not in (400, 422, 500):
        return False
    lowered = message.lower()
    named = param in ("response_format", "grammar") or any(w in lowered for w in _FORMAT_WORDS)
    if status == 500:
        return named and ("input should be" in lowered or "validation" in lowered or "unsupported" in lowered
                          or "not supported" in lowered or "invalid" in lowered or "parse" in lowered)
    return named


_CONTEXT_PATTERNS = (
    re.compile(r"context window of (\d+)"),                   # llama-cpp-python
    re.compile(r"maximum context length is (\d+)"),           # OpenAI, vLLM
    re.compile(r"n_ctx(?:_slot)?\s*[=:]\s*(\d+)"),            # llama.cpp server
    re.compile(r"context (?:length|size) (?:of |is )?(\d+)"),
)


def context_from_error(message: str) -> int | None:
    """The context length a context-overflow error names, or None."""
    for pattern in _CONTEXT_PATTERNS:
        m = pattern.search(message)
        if m:
            return int(m.group(1))
    return None


def knowledge_path(cache_path: str | os.PathLike[str] | None) -> Path | None:
    """Where server knowledge lives: ``servers.json`` beside a cache file (None without a cache)."""
    if cache_path is None:
        return None
    return Path(cache_path).with_name("servers.json")


def _key(base_url: str, model: str) -> str:
    return hashlib.sha256(f"{base_url}\n{model}".encode()).hexdigest()[:24]


class KnowledgeStore:
    """A small JSON file of what each (base_url, model) supports (see the module doc).

    Reads are tolerant (an unreadable or foreign file is treated as empty and rewritten);
    writes replace the file atomically, so concurrent runs never see half a file (the last
    writer wins, which is harmless: every writer records the same facts).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != STORE_VERSION or not isinstance(data.get("servers"), dict):
            return {}
        return data

    def get(self, base_url: str, model: str) -> dict:
        """What is known of this server and model ({} when nothing)."""
        entry = self._read().get("servers", {}).get(_key(base_url, model))
        return dict(entry) if isinstance(entry, dict) else {}

    def update(self, base_url: str, model: str, **facts: Any) -> None:
        """Merge ``facts`` into the entry of this server and model; a write that fails is ignored
        (knowledge only saves a negotiation, it never decides a result)."""
        data = self._read() or {"version": STORE_VERSION, "servers": {}}
        key = _key(base_url, model)
        entry = dict(data["servers"].get(key) or {})
        entry.update({"base_url": base_url, "model": model, **facts, "updated": round(time.time(), 3)})
        data["servers"][key] = entry
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".servers-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            pass


# ---- gsr probe ---------------------------------------------------------------------------------------------

_MARK = "Q7X"  # an answer no model gives by chance: a mode that enforces its constraint makes the model say it
_MARK_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": [_MARK]}},
                "required": ["answer"], "additionalProperties": False}
_HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]


def _is_local(url: str) -> bool:
    from urllib.parse import urlsplit

    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def _enforced(text: str | None, mark: str = _MARK) -> bool:
    try:
        data = json.loads(text or "")
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("answer") == mark


async def probe(config, *, knowledge: KnowledgeStore | None = None, overflow: bool | None = None) -> dict:
    """Ask a server what it supports (see ``gsr probe --help``); record it in ``knowledge``.

    Every step is one small request; a step the server refuses is reported, never raised.
    ``overflow`` sends one prompt longer than any context to read the context length from the
    error (default: only for servers on this machine, where it costs nothing).
    """
    import openai

    from .client import _origin, _server_message

    base = config.effective_base_url
    report: dict[str, Any] = {"server": _origin(base), "model": config.model, "reachable": False}
    key = config.api_key.reveal() if config.api_key else "not-needed"
    sdk = openai.AsyncOpenAI(base_url=base, api_key=key, max_retries=0, timeout=config.timeout_s)
    try:
        status, listing = await asyncio.to_thread(_get_json, base.rstrip("/") + "/models", key, config.timeout_s)
        if status is None:
            report["error"] = (f"cannot reach {report['server']} ({listing}): is the server running at that "
                               "base_url?")
            return report
        report["reachable"] = True
        models, context = _read_models(status, listing, config.model)
        report["models"] = models
        report["model_listed"] = None if models is None else config.model in models
        if report["model_listed"] is False:
            report["error"] = (f"{report['server']} does not serve model {config.model!r} (it lists "
                               f"{', '.join(models) or 'none'}): pass --model with one of those")
        root = base.rstrip("/")
        root = root[:-3] if root.endswith("/v1") else root
        status, props = await asyncio.to_thread(_get_json, root + "/props", key, config.timeout_s)
        n_ctx = props.get("default_generation_settings", {}).get("n_ctx") if status == 200 and isinstance(
            props, dict) and isinstance(props.get("default_generation_settings"), dict) else None
        context = context or (n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None)  # llama.cpp's own server
        source = "server" if context else None
        if context is None and (overflow if overflow is not None else _is_local(base)):
            context = await _overflow_context(sdk, config.model)
            source = "overflow error" if context else None
        report["context_length"] = context
        report["context_source"] = source
        report["structured"] = {m: await _try_mode(sdk, config.model, m) for m in LADDER[:3]}
        report["grammar_dialect"] = await _grammar_dialect(sdk, config.model)
        report["logprobs"] = await _logprobs(sdk, config.model)
        report.update(await _speed(sdk, config))
    except openai.APIStatusError as exc:
        report["error"] = f"{report['server']} answered HTTP {exc.status_code}: {_server_message(exc)[:200]}"
    except openai.APIConnectionError as exc:
        report["error"] = f"{report['server']} dropped the connection ({type(exc).__name__})"
    finally:
        await sdk.close()
    if knowledge is not None and report["reachable"]:
        best = next((m for m in LADDER[:3] if report.get("structured", {}).get(m) == "enforced"), None)
        facts = {k: report.get(k) for k in ("context_length", "grammar_dialect", "logprobs") if k in report}
        if best is not None and report.get("structured"):
            facts["structured"] = best
        knowledge.update(base, config.model, **facts)
    return report


def _get_json(url: str, key: str, timeout: float) -> tuple[int | None, Any]:
    """(HTTP status, decoded JSON body or None) of a GET; (None, why) when the server cannot be reached."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own server URL
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
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
    import openai

    from .client import _server_message

    try:
        await sdk.chat.completions.create(model=model, max_tokens=1,
                                          messages=[{"role": "user", "content": "word " * 300_000}])
    except openai.APIStatusError as exc:
        return context_from_error(_server_message(exc))
    return None


async def _try_mode(sdk, model: str, mode: str) -> str:
    """"enforced" (the answer obeys a schema the prompt does not show), "ignored" (accepted, not obeyed),
    or "rejected" (the server refused the format)."""
    import openai

    from .client import _server_message
    from .gbnf import schema_gbnf

    kwargs: dict[str, Any] = {"model": model, "messages": _HELLO, "max_tokens": 24, "temperature": 0}
    if mode == "json_schema":
        kwargs["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "probe", "schema": _MARK_SCHEMA, "strict": True}}
    elif mode == "json_object":
        kwargs["response_format"] = {"type": "json_object", "schema": _MARK_SCHEMA}
    else:
        kwargs["extra_body"] = {"grammar": schema_gbnf(_MARK_SCHEMA)}
    try:
        resp = await sdk.chat.completions.create(**kwargs)
    except openai.APIStatusError as exc:
        sent = {k: v for k, v in kwargs.items() if k in ("response_format", "extra_body")}
        if format_rejected(exc.status_code, _server_message(exc), sent, getattr(exc, "param", None)):
            return "rejected"
        return f"error (HTTP {exc.status_code})"
    return "enforced" if _enforced(resp.choices[0].message.content) else "ignored"


async def _grammar_dialect(sdk, model: str) -> str | None:
    """Which grammar field the server obeys: GBNF in `grammar` (llama.cpp), Lark in `structured_outputs` or
    `guided_grammar` (vLLM); None when it obeys none."""
    import openai

    tries = (("gbnf", {"grammar": f'root ::= "{_MARK}"'}),
             ("structured_outputs", {"structured_outputs": {"grammar": f'start: "{_MARK}"'}}),
             ("guided_grammar", {"guided_grammar": f'start: "{_MARK}"'}))
    for name, extra in tries:
        try:
            resp = await sdk.chat.completions.create(model=model, messages=_HELLO, max_tokens=8, temperature=0,
                                                     extra_body=extra)
        except openai.APIStatusError:
            continue
        if (resp.choices[0].message.content or "").strip() == _MARK:
            return name
    return None


async def _logprobs(sdk, model: str) -> bool:
    import openai

    try:
        resp = await sdk.chat.completions.create(model=model, messages=_HELLO, max_tokens=2, temperature=0,
                                                 logprobs=True, top_logprobs=5)
    except openai.APIStatusError:
        return False
    lp = resp.choices[0].logprobs
    return bool(lp is not None and lp.content and lp.content[0].top_logprobs)


async def _speed(sdk, config) -> dict:
    """Generation speed (tokens/s over a 64-token answer) and the latency of one short judgment (auto mode)."""
    import time as _time

    from .client import ChatRequest, LLMClient

    t0 = _time.monotonic()
    resp = await sdk.chat.completions.create(model=config.model, max_tokens=64, temperature=0,
                                             messages=[{"role": "user", "content": "Count from one to forty in words."}])
    elapsed = _time.monotonic() - t0
    tokens = int(getattr(resp.usage, "completion_tokens", 0) or 0) if resp.usage else 0
    schema = {"type": "object", "properties": {"reason": {"type": "string"},
                                               "answer": {"type": "string", "enum": ["A", "B"]}},
              "required": ["reason", "answer"], "additionalProperties": False}
    request = ChatRequest(messages=[{"role": "user", "content": (
        "Is this response polite? Response: \"Thank you for asking.\" Options: A = yes, B = no. "
        "Answer with a JSON object {\"reason\": ..., \"answer\": \"A\" or \"B\"}.")}], schema=schema, max_tokens=64)
    from .jsonparse import AnswerFormatError

    async with LLMClient(config.replace(structured="auto", max_retries=0)) as client:
        t1 = _time.monotonic()
        try:
            result = await client.complete(request)
            parsed = True
        except AnswerFormatError:
            parsed = False
        latency = _time.monotonic() - t1
        mode = client.structured_mode
    return {"tokens_per_s": round(tokens / elapsed, 1) if elapsed > 0 and tokens else None,
            "judgment_latency_s": round(latency, 3), "judgment_mode": mode, "judgment_parsed": parsed}
