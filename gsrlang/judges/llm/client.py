"""The model-call transport used by LLM judges.

:class:`LLMClient` sends a :class:`ChatRequest` to any OpenAI-compatible chat
completions endpoint (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio)
through ``openai.AsyncOpenAI`` and returns a :class:`ChatResult` whose
``data`` is the JSON object parsed from the answer.

Behaviour
---------
* **Concurrency**: at most ``config.concurrency`` HTTP requests in flight per
  client: the ceiling of its adaptive window (held per attempt, released while
  backing off, lowered on 429s), its one bound (a semaphore of the same size
  inside it never waited, and is gone). What bounds the calls themselves is
  said in gsrlang.judges.llm.judge.LLMJudge.
* **Bounds**: ``config.timeout_s`` bounds each request whole, from sending it
  to the answer's last byte (``asyncio.wait_for`` around the SDK call; the
  SDK's own timeout only bounds the wait between two reads), and never past
  ``deadline_at`` (the run's ``--deadline``; a call cut there is not retried).
  At most ``config.max_answer_bytes`` of an answer are read
  (:mod:`gsrlang.judges.llm.transport`): a larger one fails at once, not
  retried (kind ``"too_large"``).
* **Retries**: the SDK's own retries are off (``max_retries=0``).  On 429, 408,
  409, 5xx, timeouts, connection errors and malformed (non-JSON) response
  bodies the client retries up to ``config.max_retries`` times (so at most
  ``max_retries + 1`` attempts), waiting with exponential backoff and full
  jitter (``uniform(0, min(cap, base * 2**n))``, base 0.5 s, cap 20 s by
  default, injectable).  A ``Retry-After`` (or ``retry-after-ms``) header is
  honoured instead (capped at ``retry_after_cap``); after a 429 with
  ``Retry-After`` every request of the client waits until that moment.  Other
  4xx fail at once.  Failure raises :class:`JudgeCallError` (status, shortened
  server message, attempts; never the key).
* **Structured output**: ``config.structured`` selects how JSON is asked for:
  ``json_schema`` (``response_format`` with the request's schema,
  ``strict: False``), ``json_object`` (``response_format={"type":
  "json_object", "schema": ...}`` plus an appended instruction describing the
  schema), ``grammar`` (a GBNF grammar of the schema in the ``grammar`` field,
  plus the instruction) or ``off`` (only the appended instruction).  ``auto``
  negotiates the mode once per (base_url, model), see
  :mod:`gsrlang.judges.llm.server`: the first request with a schema walks the
  ladder while the others wait for the outcome of its first attempt that is not
  a refusal (never longer than one request's timeout; after that they go ahead
  concurrently, each stepping down on its own refusals, so a hanging server
  costs one timeout, not one per queued call), an error that says the format is unsupported
  (400, 422, or a 500 that says so) steps down and is never retried, and the
  outcome is remembered in ``servers.json`` beside the judgment cache, so a
  resumed run does not negotiate at all (fallbacks are not counted as retries).
  A forced mode the server refuses fails at once, naming ``--structured``.
  A request without a schema skips ``json_schema``.  In every mode the answer
  is parsed with :func:`extract_json`; a non-JSON answer raises
  :class:`AnswerFormatError` carrying the raw text (retrying it is the
  caller's job: vary ``seed`` or ``sample`` to get a different answer).
  The instruction is appended to the last user message (or added as a new
  user message), because several local chat templates reject a system
  message that is not first.
* **Rate limits**: the requests in flight adapt (AIMD): a 429 halves the
  window (once per burst: only a request sent after the last cut can cut it
  again), and every ``window`` successes raise it by one, up to
  ``config.concurrency``. A 429's ``Retry-After`` / ``retry-after-ms`` is
  honoured, else its ``x-ratelimit-reset-requests`` / ``-tokens`` ("20ms",
  "1s", "6m0s"). ``config.rpm`` / ``config.tpm`` cap requests and tokens a
  minute with ``aiolimiter`` (tokens: the prompt, estimated at 4 characters a
  token, plus ``max_tokens`` or the mean answer so far).
* **Refused parameters** (OpenAI reasoning models): a 400/422 whose error names
  a parameter the request sent (``param``, as OpenAI sends it:
  ``{"error": {"message", "type": "invalid_request_error", "param":
  "temperature", "code": "unsupported_value"}}``) adapts the request once per
  parameter and model (:data:`ADAPTABLE`): ``max_tokens`` is sent as
  ``max_completion_tokens``, ``temperature``, ``top_p``, ``seed`` are dropped
  (the server's default is used). The adaptation is remembered in the
  negotiation record (``servers.json``, ``adapted``) beside the structured-output
  mode, so a later run sends a valid request at once; :attr:`LLMClient.adapted`
  lists it for the run summary. ``logprobs`` refused for a request that needs
  them (weighted verdicts) fails the client at once, saying what to use instead,
  and is remembered (``logprobs: false``) so a later run refuses before any call.
  A refusal under another shape (no ``param``, a parameter not sent, another
  language) is an ordinary 400: a clear error quoting the server's message.
* **reasoning_effort**: ``config.reasoning_effort`` is sent when set, and is
  part of the cache key.
* **Cache**: with a :class:`JudgmentCache`, a request whose
  :meth:`ChatRequest.cache_key` is stored returns without any HTTP call
  (``cached=True``, zero tokens, ``attempts=0``); each successful answer is
  stored (committed) before ``complete`` returns, its text and strings cut to
  ``STORED_ANSWER_CHARS`` (64 Ki characters, marked ``[cut by gsr ...]``); an
  entry still over ``STORED_ENTRY_CHARS`` is not stored.  Format errors are not stored.
* **Counters**: ``client.usage`` (:class:`Usage`): calls, cache_hits,
  http_requests, prompt/completion tokens actually spent (including on answers
  that failed to parse), the cached part of the prompt tokens
  (``usage.prompt_tokens_details.cached_tokens``) and the reasoning part of the
  completion tokens (``usage.completion_tokens_details.reasoning_tokens``),
  retries, failures, format_errors, fallbacks, adaptations.

Cache key
---------
sha256 over canonical JSON (sorted keys, no whitespace) of: a format version,
``model``, the effective ``base_url`` (the OpenAI URL when unset) -- the same
model name on two servers is two different judges (quantisation, templates,
versions), so their answers must not be mixed -- ``messages``, ``schema``,
``schema_name``, the effective ``temperature``, ``seed`` and ``max_tokens``,
the *configured* ``structured`` mode (the effective one is only known after
talking to the server), ``reasoning_effort`` when set, and the request's
``sample`` index.  Never the key,
the timeout, retries or concurrency.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import json
import logging
import random
import re
import time
from typing import Any, Iterable, Mapping, Sequence

import attrs
import openai
from openai.types.chat import ChatCompletion

from .cache import JudgmentCache
from .config import JudgeConfig, JudgeSettings, LLMError
from .jsonparse import STORED_ANSWER_CHARS, AnswerFormatError, RefusalError, clip, clip_strings, excerpt, extract_json
from .server import LADDER, KnowledgeStore, context_from_error, format_rejected, knowledge_path
from .transport import AnswerRefused, bounded_http_client, refusal_of

__all__ = ["ADAPTABLE", "ChatRequest", "ChatResult", "Usage", "LLMClient", "ClientPool", "JudgeCallError",
           "CACHE_KEY_VERSION"]

log = logging.getLogger("gsrlang.judges.llm")

CACHE_KEY_VERSION = "gsr-judge/1"
NO_KEY_PLACEHOLDER = "not-needed"
RETRYABLE_STATUS = frozenset({408, 409, 429})
STORED_ENTRY_CHARS = 4 * STORED_ANSWER_CHARS  # the largest judgment cache entry kept (answer, data, logprobs)

# what a refused parameter becomes: a new name, or None (dropped: the server's default is used)
ADAPTABLE: dict[str, str | None] = {"max_tokens": "max_completion_tokens", "temperature": None, "top_p": None,
                                    "seed": None, "logprobs": None, "top_logprobs": None}
_TOGETHER = {"logprobs": ("logprobs", "top_logprobs"), "top_logprobs": ("logprobs", "top_logprobs")}


def adapt_body(kwargs: dict[str, Any], adapted: Mapping[str, str]) -> dict[str, Any]:
    """`kwargs` with the remembered adaptations applied: a refused parameter renamed or dropped."""
    for param, action in adapted.items():
        if param in kwargs:
            value = kwargs.pop(param)
            if action not in (None, "", "dropped"):
                kwargs.setdefault(action, value)
    return kwargs


def describe_adaptation(param: str, action: str) -> str:
    """`temperature dropped (the server's default)` / `max_tokens sent as max_completion_tokens`."""
    return f"{param} dropped (the server's default is used)" if action in (None, "", "dropped") else \
        f"{param} sent as {action}"


class JudgeCallError(LLMError):
    """A model call failed for good (after retries, or at once for other 4xx).

    Attributes: ``status`` (HTTP status or None), ``kind`` (``"http"``,
    ``"timeout"``, ``"connection"``, ``"malformed"`` or ``"too_large"``: the
    answer passed ``max_answer_bytes``, not retried), ``server_message``
    (shortened, key-free), ``attempts``, ``retryable`` (whether the last error
    was of a transient kind, i.e. retries were exhausted) and ``model``.
    """

    def __init__(self, message: str, *, status: int | None = None, kind: str = "http",
                 server_message: str | None = None, attempts: int = 0, retryable: bool = False,
                 model: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.server_message = server_message
        self.attempts = attempts
        self.retryable = retryable
        self.model = model


# --------------------------------------------------------------------------- data


def _to_messages(messages: Iterable[Mapping[str, Any]]) -> tuple[dict, ...]:
    if isinstance(messages, (str, bytes)) or isinstance(messages, Mapping):
        raise TypeError("messages must be a sequence of {'role': ..., 'content': ...} dicts")
    out = tuple(dict(m) for m in messages)
    for m in out:
        if "role" not in m:
            raise ValueError(f"message without a role: {m!r:.80}")
    return out


@attrs.frozen
class ChatRequest:
    """One chat completion to ask for.

    ``schema`` is a JSON Schema for the answer (or None); ``temperature``,
    ``seed`` and ``max_tokens`` override the config's when not None.
    ``sample`` is the index of an independent sample of the same request: it
    is part of the cache key but not sent, so repeated sampling does not
    return one cached answer N times.
    """

    messages: tuple[dict, ...] = attrs.field(converter=_to_messages)
    schema: dict | None = None
    schema_name: str = "judgment"
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    sample: int = 0
    top_logprobs: int | None = None  # ask for the tokens' logprobs (this many alternatives per token)

    def effective(self, config: JudgeConfig) -> dict[str, Any]:
        """temperature/seed/max_tokens after applying the config's defaults."""
        return {
            "temperature": float(config.temperature if self.temperature is None else self.temperature),
            "seed": config.seed if self.seed is None else self.seed,
            "max_tokens": config.max_tokens if self.max_tokens is None else self.max_tokens,
        }

    def cache_key(self, config: JudgeConfig) -> str:
        """sha256 hex of everything that determines the answer (see module doc)."""
        payload = {"v": CACHE_KEY_VERSION, "model": config.model, "base_url": config.effective_base_url,
                   "messages": list(self.messages), "schema": self.schema, "schema_name": self.schema_name,
                   "structured": config.structured, "sample": self.sample, **self.effective(config)}
        if self.top_logprobs:
            payload["top_logprobs"] = self.top_logprobs
        if config.reasoning_effort is not None:  # absent when unset: earlier caches stay valid
            payload["reasoning_effort"] = config.reasoning_effort
        canon = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()


@attrs.frozen
class ChatResult:
    """A parsed answer.  ``latency_s`` is the duration of the successful HTTP
    request (0 for a cache hit); ``attempts`` counts HTTP requests made for
    this call (retries and structured-output fallbacks included; 0 when
    cached); tokens are those spent by this call (0 when cached);
    ``structured`` is the mode that produced the answer."""

    text: str
    data: object
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    cached: bool
    model: str
    structured: str
    finish_reason: str | None = None
    logprobs: list | None = None  # [[token, [[candidate, logprob], ...]], ...] when asked for and given
    merged: bool = False  # answered by an identical request already in flight (no call of its own)
    cached_tokens: int = 0  # of prompt_tokens, served from the server's prompt cache
    reasoning_tokens: int = 0  # of completion_tokens, spent on reasoning the answer does not show


@attrs.define
class Usage:
    """Counters of one client (or a sum of several)."""

    calls: int = 0  # complete() calls
    cache_hits: int = 0
    http_requests: int = 0  # HTTP requests sent, retries and fallbacks included
    prompt_tokens: int = 0  # tokens actually spent (cache hits spend none)
    completion_tokens: int = 0
    retries: int = 0  # re-sends after transient errors
    failures: int = 0  # complete() calls that raised JudgeCallError
    format_errors: int = 0  # answers with no parseable JSON (incl. refusals)
    fallbacks: int = 0  # structured-output downgrades
    merged: int = 0  # complete() calls answered by an identical request in flight (no HTTP request)
    cached_tokens: int = 0  # of prompt_tokens: served from the server's prompt cache
    reasoning_tokens: int = 0  # of completion_tokens: reasoning
    adaptations: int = 0  # requests re-sent without (or with a renamed) refused parameter
    rate_limited: int = 0  # 429 answers

    def as_dict(self) -> dict[str, int]:
        return attrs.asdict(self)

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(**{k: v + getattr(other, k) for k, v in self.as_dict().items()})


# --------------------------------------------------------------------------- client


class CallFailure(Exception):
    """One failed attempt, classified."""

    def __init__(self, kind: str, detail: str, *, status: int | None = None, server_message: str | None = None,
                 retryable: bool, retry_after: float | None = None, format_rejected: bool = False,
                 param: str | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.status = status
        self.server_message = server_message
        self.retryable = retryable
        self.retry_after = retry_after
        self.format_rejected = format_rejected
        self.param = param  # the request parameter the server refused (its error's `param`), if it named one

    def error(self, message: str, attempts: int, model: str) -> JudgeCallError:
        """The judge error of a call that ended with this failure, saying `message`."""
        return JudgeCallError(message, status=self.status, kind=self.kind, server_message=self.server_message,
                              attempts=attempts, retryable=self.retryable, model=model)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def _ratelimit_reset(headers: Mapping[str, str] | None) -> float | None:
    """Seconds until OpenAI's `x-ratelimit-reset-requests` / `-tokens` ("20ms", "1s", "6m0s"), the later one."""
    resets = [sum(float(n) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[u] for n, u in parts)
              for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
              if (parts := _DURATION.findall((headers or {}).get(name) or ""))]
    return max(resets, default=None)


class AdaptiveWindow:
    """Requests in flight, between 1 and `ceiling`, additive increase and multiplicative decrease (see the module
    doc): `async with window.slot() as slot: ...; slot.throttled()` on a 429."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = self.limit = self.lowest = max(1, ceiling)
        self.active = self.cuts = self._epoch = self._ok = 0
        self._cond = asyncio.Condition()

    async def acquire(self) -> int:
        async with self._cond:
            await self._cond.wait_for(lambda: self.active < self.limit)
            self.active += 1
            return self._epoch

    async def release(self, epoch: int, throttled: bool) -> None:
        async with self._cond:
            self.active -= 1
            if throttled:
                if epoch == self._epoch and self.limit > 1:  # one cut per burst of 429s
                    self.limit = max(1, self.limit // 2)
                    self.lowest = min(self.lowest, self.limit)
                    self._epoch += 1
                    self.cuts += 1
                self._ok = 0
            else:
                self._ok += 1
                if self._ok >= self.limit and self.limit < self.ceiling:
                    self.limit += 1
                    self._ok = 0
            self._cond.notify_all()


def api_error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(body.get("message"), str):
            return body["message"]
        if isinstance(body.get("detail"), str):  # FastAPI-style servers
            return body["detail"]
        return json.dumps(body)[:500]
    if isinstance(body, str) and body.strip():
        return body
    return exc.message or ""


def _retry_hint(headers: Mapping[str, str] | None, status: int | None) -> float | None:
    """How long a server asks to wait: `retry-after-ms` or `Retry-After` (seconds, or an HTTP date), else for a 429
    its rate-limit reset."""
    headers = headers or {}
    value = headers.get("retry-after")
    for text, scale in ((headers.get("retry-after-ms"), 1000.0), (value, 1.0)):
        try:
            return max(0.0, float(text or "") / scale)
        except ValueError:
            pass
    if value:
        with contextlib.suppress(TypeError, ValueError):
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    return _ratelimit_reset(headers) if status == 429 else None


def _append_instruction(messages: Sequence[dict], instruction: str) -> list[dict]:
    out = [dict(m) for m in messages]
    if out and out[-1].get("role") == "user":
        content = out[-1].get("content")
        if isinstance(content, str):
            out[-1]["content"] = f"{content}\n\n{instruction}"
            return out
        if isinstance(content, list):
            out[-1]["content"] = [*content, {"type": "text", "text": instruction}]
            return out
    out.append({"role": "user", "content": instruction})
    return out


def _schema_instruction(schema: dict | None) -> str:
    if schema is None:
        return "Respond with a single JSON object only."
    return ("Respond with a single JSON object only (no other text) that conforms to this JSON Schema:\n"
            + json.dumps(schema, ensure_ascii=False, sort_keys=True))


def _mentions_json(messages: Sequence[dict]) -> bool:
    contents = [m.get("content") for m in messages]
    texts = [c for c in contents if isinstance(c, str)] + [
        str(part.get("text", "")) for c in contents if isinstance(c, list) for part in c if isinstance(part, Mapping)]
    return any("json" in text.lower() for text in texts)


def _count(value) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def token_counts(usage) -> tuple[int, int, int, int]:
    """(prompt, completion, cached prompt, reasoning) tokens of a response's `usage` (the SDK's object or a
    dict): `prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens`, as
    OpenAI reports them; 0 for what a server does not report. The parts never exceed their whole."""
    def get(obj, name):
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    if usage is None:
        return 0, 0, 0, 0
    pt, ct = _count(get(usage, "prompt_tokens")), _count(get(usage, "completion_tokens"))
    pd, cd = get(usage, "prompt_tokens_details"), get(usage, "completion_tokens_details")
    cached = _count(get(pd, "cached_tokens")) if pd is not None else 0
    reasoning = _count(get(cd, "reasoning_tokens")) if cd is not None else 0
    return pt, ct, min(cached, pt), min(reasoning, ct)


LOGPROB_SLACK = 1e-4  # a log-probability above 0 by less is float rounding (exp(1e-4) = 1.0001), read as 0


def _logprob(value: Any, token: Any) -> float:
    """A log-probability as a float <= 0; ValueError for one no model can give (positive, NaN)."""
    x = float(value)
    if not x <= LOGPROB_SLACK:  # NaN fails this too
        raise ValueError(f"the server gave token {str(token)[:20]!a} the log-probability {x!r}; a probability is "
                         "at most 1, so a log-probability is at most 0")
    return min(x, 0.0)


def _token_logprobs(choice) -> list | None:
    """``[[token, [[candidate, logprob], ...]], ...]`` of a choice, or None when the server sent none.
    ValueError when a log-probability is impossible (see :func:`_logprob`)."""
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        return None
    out = []
    for t in content:
        if getattr(t, "logprob", None) is not None:
            _logprob(t.logprob, t.token)
        out.append([t.token, [[c.token, _logprob(c.logprob, c.token)] for c in (t.top_logprobs or [])]])
    return out


class LLMClient:
    """Calls one judge model; see the module docstring for the behaviour.

    ``backoff_base``/``backoff_cap`` (seconds) shape the retry backoff,
    ``retry_after_cap`` bounds a server's ``Retry-After``, ``rng`` makes the
    jitter reproducible, ``http_client`` is passed to ``AsyncOpenAI``;
    ``knowledge`` is where negotiated modes are remembered (default:
    ``servers.json`` beside the cache; none without a cache).
    """

    def __init__(self, config: JudgeConfig, cache: JudgmentCache | None = None, *, backoff_base: float = 0.5,
                 backoff_cap: float = 20.0, retry_after_cap: float = 60.0, rng: random.Random | None = None,
                 http_client: Any = None, knowledge: KnowledgeStore | None = None,
                 deadline_at: float | None = None) -> None:
        self.config = config
        self.cache = cache
        self.usage = Usage()
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self._rng = rng or random.Random()
        self.window = AdaptiveWindow(config.concurrency)  # lowered on 429s, raised again as calls succeed
        self._rpm = self._tpm = None
        if config.rpm or config.tpm:
            from aiolimiter import AsyncLimiter

            self._rpm = AsyncLimiter(config.rpm, 60) if config.rpm else None
            self._tpm = AsyncLimiter(config.tpm, 60) if config.tpm else None
        self._answer_tokens = [0, 0]  # completion tokens and answers so far (the --tpm allowance of the next)
        self._secrets = tuple(s for s in [config.api_key.reveal() if config.api_key else ""] if len(s) >= 4)
        self.origin = config.origin  # the server as scheme://host:port (no path, userinfo or query)
        # auto mode: the modes the server rejected, and the one settled on (negotiated or remembered)
        self._rejected: set[str] = set()
        if knowledge is None and cache is not None:
            knowledge = KnowledgeStore(knowledge_path(cache.path))
        self.knowledge = knowledge
        known = knowledge.get(config.effective_base_url, config.model) if knowledge is not None else {}
        self._settled: str | None = known.get("structured") if known.get("structured") in LADDER else None
        self.negotiation: str | None = "remembered" if self._settled else None  # or "negotiated"
        # set once the negotiating request's first attempt that was not a refusal has an outcome: the
        # other requests wait for it (one request's time at most), never for each other in turn
        self._negotiated: asyncio.Event | None = None
        self._fatal: JudgeCallError | None = None  # the server is unreachable: fail the rest at once
        self._answered = 0
        remembered = known.get("adapted")
        # refused parameter -> what it became (a new name, or "dropped"); from the negotiation record
        self.adapted: dict[str, str] = {str(k): str(v) for k, v in remembered.items()} if isinstance(
            remembered, dict) else {}
        self.adapted_now: set[str] = set()  # the adaptations this client made itself (not remembered)
        self.logprobs_refused = known.get("logprobs") is False or "logprobs" in self.adapted
        self._pause_until = 0.0
        self._closed = False
        self._inflight: dict[str, asyncio.Future] = {}  # cache key -> the answer of the request in flight
        self.batcher = None  # gsr run --batch: a gsrlang.judges.llm.batch.Batcher answers what the cache does not
        key = config.api_key.reveal() if config.api_key else NO_KEY_PLACEHOLDER
        self._client = openai.AsyncOpenAI(base_url=config.effective_base_url, api_key=key, max_retries=0,
                                          timeout=config.timeout_s,
                                          http_client=bounded_http_client(config.max_answer_bytes, http_client))
        self.deadline_at = deadline_at  # time.monotonic() past which no call runs (the run's --deadline)

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, base_url={self.origin!r}, structured={self.structured_mode!r})"

    # ------------------------------------------------------------------ state

    @property
    def structured_mode(self) -> str:
        """The mode used now for requests with a schema (after any fallback)."""
        if self.config.structured != "auto":
            return self.config.structured
        return self._settled or next(m for m in LADDER if m not in self._rejected)

    def mode_for(self, request: ChatRequest) -> str:
        mode = self.structured_mode
        if request.schema is None:  # nothing to send a schema or grammar for
            if self.config.structured != "auto":
                return {"json_schema": "json_object", "grammar": "off"}.get(mode, mode)
            weak = self._settled in ("grammar", "off") or "json_object" in self._rejected
            return "off" if weak else "json_object"
        return mode

    def scrub(self, text: str) -> str:
        """`text` with the API key replaced by ``***`` (for every message that quotes a server)."""
        for s in self._secrets:
            text = text.replace(s, "***")
        return text

    # ------------------------------------------------------------------ request

    def _build(self, request: ChatRequest, mode: str) -> dict[str, Any]:
        eff = request.effective(self.config)
        messages: list[dict] = list(request.messages)
        kwargs: dict[str, Any] = {"model": self.config.model, "temperature": eff["temperature"]}
        if mode == "json_schema":
            name = "".join(c if c.isalnum() or c in "_-" else "_" for c in request.schema_name)[:64] or "judgment"
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": name, "schema": request.schema, "strict": False}}
        elif mode == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
            if request.schema is not None:  # llama.cpp constrains to it; others still read it in the prompt
                kwargs["response_format"]["schema"] = request.schema
            if request.schema is not None or not _mentions_json(messages):
                messages = _append_instruction(messages, _schema_instruction(request.schema))
        elif request.schema is not None:  # grammar, off
            if mode == "grammar":
                from .gbnf import schema_gbnf

                kwargs["extra_body"] = {"grammar": schema_gbnf(request.schema)}
            messages = _append_instruction(messages, _schema_instruction(request.schema))
        kwargs["messages"] = messages
        if request.top_logprobs:
            kwargs.update(logprobs=True, top_logprobs=request.top_logprobs)
        sent_if_set = {"seed": eff["seed"], "max_tokens": eff["max_tokens"],
                       "reasoning_effort": self.config.reasoning_effort}
        kwargs.update({k: v for k, v in sent_if_set.items() if v is not None})
        return adapt_body(kwargs, self.adapted)

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of `request` exactly as the online path sends it now: the structured-output mode
        negotiated (or remembered, or forced) and every remembered adaptation applied; `extra_body` fields
        (a grammar) are merged in, as the SDK merges them. For the Batch API, which sends the same bodies."""
        kwargs = self._build(request, self.mode_for(request))
        extra = kwargs.pop("extra_body", None) or {}
        return {**kwargs, **extra}

    async def _post(self, kwargs: dict[str, Any]) -> tuple[ChatCompletion, float]:
        """One attempt; the caller holds a slot of the adaptive window (`send`), which bounds attempts."""
        self.usage.http_requests += 1
        t0 = time.monotonic()
        limit, by_deadline = self._time_limit(t0)
        try:  # the whole call, not only the wait between two reads (the SDK's timeout)
            resp = await asyncio.wait_for(self._client.chat.completions.create(**kwargs), limit)
        except (openai.APITimeoutError, asyncio.TimeoutError):
            if by_deadline:
                raise CallFailure("timeout", "cut at the run's --deadline", retryable=False) from None
            raise CallFailure("timeout", f"timed out after {self.config.timeout_s:g}s (--timeout bounds the whole "
                           "request)", retryable=True) from None
        except AnswerRefused as exc:
            raise CallFailure(exc.kind, self.scrub(exc.detail), retryable=False) from None
        except openai.APIConnectionError as exc:
            if (refused := refusal_of(exc)) is not None:  # older SDKs wrap what the transport's hooks raise
                raise CallFailure(refused.kind, self.scrub(refused.detail), retryable=False) from None
            cause = exc.__cause__ or exc.__context__
            why = f"{type(cause).__name__}: {cause}" if cause else str(exc)
            raise CallFailure("connection", f"connection error ({self.scrub(why)[:200]})", retryable=True) from None
        except openai.APIStatusError as exc:
            raise self._classify_status(exc, kwargs) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a malformed body
            raise CallFailure("malformed", f"malformed response body ({type(exc).__name__}: {exc})"[:300],
                           retryable=True) from None
        latency = time.monotonic() - t0
        if not isinstance(resp, ChatCompletion) or not getattr(resp, "choices", None):
            shown = excerpt(resp if isinstance(resp, str) else repr(resp), 120)
            raise CallFailure("malformed", f"malformed response (not a chat completion): {self.scrub(shown)}",
                           retryable=True)
        return resp, latency

    def _time_limit(self, now: float) -> tuple[float, bool]:
        """(seconds this request may take, whether the run's --deadline is what sets them)."""
        limit = float(self.config.timeout_s)
        if self.deadline_at is not None and self.deadline_at - now < limit:
            return max(self.deadline_at - now, 0.0), True
        return limit, False

    def _classify_status(self, exc: openai.APIStatusError, kwargs: Mapping[str, Any]) -> CallFailure:
        status = exc.status_code
        message = self.scrub(api_error_message(exc))
        short = excerpt(message, 300, quoted=False)
        param = getattr(exc, "param", None)
        rejected = format_rejected(status, message, kwargs, param)
        retryable = (status in RETRYABLE_STATUS or status >= 500) and not rejected
        refused = None
        if status in (400, 422) and not rejected:
            if isinstance(param, str) and param in ADAPTABLE and param in kwargs:
                refused = param
            elif "max_completion_tokens" in message.lower() and "max_tokens" in kwargs:  # said in words only
                refused = "max_tokens"
            elif isinstance(param, str) and param in kwargs and param != "messages":
                refused = param  # sent but not adaptable (reasoning_effort): a clear error, never a loop
        detail = f"HTTP {status}: {short}" if short else f"HTTP {status}"
        headers = exc.response.headers if exc.response is not None else None
        return CallFailure("http", detail, status=status, server_message=short, retryable=retryable,
                           retry_after=_retry_hint(headers, status), format_rejected=rejected, param=refused)

    async def _throttle(self, kwargs: Mapping[str, Any]) -> None:
        """Wait for --rpm / --tpm room (aiolimiter): one request, and its tokens (the prompt, estimated, plus the
        answer's allowance: max_tokens, else the mean answer so far)."""
        if self._rpm is not None:
            await self._rpm.acquire(1)
        if self._tpm is not None:
            chars = sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else 0
                        for m in kwargs.get("messages") or ())
            done, answers = self._answer_tokens
            allowance = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens") or (
                done // answers if answers else 256)
            await self._tpm.acquire(min(float(self.config.tpm), chars / 4 + allowance))

    def _backoff(self, retry_number: int) -> float:
        ceiling = min(self.backoff_cap, self.backoff_base * (2 ** (retry_number - 1)))
        return self._rng.uniform(0.0, max(0.0, ceiling))

    async def _respect_pause(self) -> None:
        if (delay := self._pause_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def _fail(self, failure: CallFailure, attempts: int) -> JudgeCallError:
        self.usage.failures += 1
        how = (f"after {attempts} attempt{'s' if attempts != 1 else ''}" if failure.retryable
               else "(not retried)" if failure.status is None else f"(HTTP {failure.status} is not retried)")
        hint = ""
        if failure.status in (401, 403):
            hint = " -- check the API key (OPENAI_API_KEY or the role's key)"
        elif failure.status == 404:
            hint = " -- check the model name, and that base_url ends with /v1"
        elif failure.kind == "connection":
            hint = " -- is the server running at that base_url? (`gsr probe` checks it)"
        elif failure.format_rejected:
            hint = (f" -- the server does not take --structured {self.config.structured}; use --structured auto to "
                    "negotiate a mode it takes")
        elif failure.param == "reasoning_effort":
            hint = (f" -- the model does not take --reasoning-effort {self.config.reasoning_effort}: choose another "
                    "value, or leave it unset (gsr.toml [judge] reasoning_effort)")
        elif failure.param in ("logprobs", "top_logprobs"):
            hint = (" -- weighted verdicts need a model that returns logprobs: drop `weighted` (llm(weighted: "
                    "false) or no --weighted) to judge with this model, or judge with one that returns them")
        elif failure.param is not None:
            hint = f" -- the server refused the parameter {failure.param!r}, which gsr does not adapt"
        elif (context := context_from_error(failure.server_message or "")) is not None:
            hint = (f" -- the prompt does not fit the server's {context}-token context: start the server with a "
                    "larger context (llama.cpp: --n_ctx) or shorten the prompt")
        error = failure.error(self.scrub(f"judge call to model {self.config.model!r} at {self.origin} failed "
                                          f"{how}: {failure.detail}{hint}"), attempts, self.config.model)
        if failure.kind == "connection" and not self._answered:
            self._fatal = error  # never reached: the calls still queued fail at once with the same line
        return error

    # ------------------------------------------------------------------ API

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Ask the model; return the parsed answer (see module docstring).

        Raises :class:`JudgeCallError` when the call fails for good and
        :class:`AnswerFormatError` (or :class:`RefusalError`) when the answer
        holds no JSON object.
        """
        if self._closed:
            raise LLMError("LLMClient is closed")
        self.usage.calls += 1
        key = request.cache_key(self.config)
        if (leader := self._inflight.get(key)) is not None:  # an identical request is in flight: share its answer
            self.usage.merged += 1
            result = await asyncio.shield(leader)
            return attrs.evolve(result, prompt_tokens=0, completion_tokens=0, attempts=0, merged=True)
        future = self._inflight[key] = asyncio.get_running_loop().create_future()
        try:
            result = await self._complete(request, key)
        except BaseException as exc:
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # retrieved: no warning when no identical request was waiting
            else:
                future.cancel()
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._inflight[key]

    async def _complete(self, request: ChatRequest, key: str) -> ChatResult:
        """`complete` for the first of identical requests: the cache, then the model."""
        if self.cache is not None:
            t0 = time.monotonic()
            if (hit := self.cache.get(key)) is not None and isinstance(hit.get("text"), str) and "data" in hit:
                self.usage.cache_hits += 1
                return ChatResult(text=hit["text"], data=hit["data"], prompt_tokens=0, completion_tokens=0,
                                  latency_s=time.monotonic() - t0, attempts=0, cached=True,
                                  model=str(hit.get("model") or self.config.model),
                                  structured=str(hit.get("structured") or self.config.structured),
                                  finish_reason=hit.get("finish_reason"), logprobs=hit.get("logprobs"))

        if self._fatal is not None:
            self.usage.failures += 1
            raise self._fatal
        batcher = self.batcher
        if (self.config.structured == "auto" and self._settled is None and request.schema is not None
                and not (batcher is not None and batcher.offline)):
            if self._negotiated is None:  # this request negotiates (online, in a batch run too); the others wait
                self._negotiated = asyncio.Event()
                if batcher is not None:
                    batcher.negotiating(1)
                try:
                    resp, latency, attempts, mode = await self.send(request, negotiating=True)
                finally:
                    self._negotiated.set()
                    if batcher is not None:
                        batcher.negotiating(-1)
                self._settle(mode)
                return self.finish(request, resp, latency, attempts, mode, key)
            await self._negotiated.wait()
        if batcher is not None:
            return await batcher.ask(self, request, key)
        resp, latency, attempts, mode = await self.send(request)
        if self.config.structured == "auto" and self._settled is None and request.schema is not None:
            self._settle(mode)  # the negotiating request failed for good; this one found the mode
        return self.finish(request, resp, latency, attempts, mode, key)

    def _settle(self, mode: str) -> None:
        """Keep the mode that got an answer, for this client and (through the store) later runs."""
        self._settled = mode
        self.negotiation = "negotiated"
        if self.knowledge is not None:
            self.knowledge.update(self.config.effective_base_url, self.config.model, structured=mode,
                                  rejected=sorted(self._rejected), adapted=dict(sorted(self.adapted.items())))
        log.info("%s at %s: structured output negotiated: %s", self.config.model, self.origin, mode)

    def _adapt(self, param: str) -> None:
        """Remember that the server refused `param` (see the module doc), here and in the negotiation record.
        Raises the judge error at once when the refused parameter is one the request cannot do without."""
        for name in _TOGETHER.get(param, (param,)):
            if name not in self.adapted:
                self.adapted[name] = ADAPTABLE[name] or "dropped"
                self.adapted_now.add(name)
        if param in _TOGETHER:
            self.logprobs_refused = True
        if self.knowledge is not None:
            refused = {"logprobs": False} if param in _TOGETHER else {}
            self.knowledge.update(self.config.effective_base_url, self.config.model,
                                  adapted=dict(sorted(self.adapted.items())), **refused)
        log.warning("%s at %s refused the parameter %s: %s from now on", self.config.model, self.origin, param,
                    describe_adaptation(param, self.adapted[param]))

    async def send(self, request: ChatRequest, negotiating: bool = False) -> tuple[ChatCompletion, float, int, str]:
        """Post the request, stepping down the ladder on format rejections, adapting refused parameters (once
        each) and retrying transient errors. `negotiating`: release the requests waiting on the negotiation
        as soon as an attempt has an outcome that is not a refusal."""
        if self._fatal is not None:
            self.usage.failures += 1
            raise self._fatal
        attempts = retries = fallbacks = 0
        tried: set[str] = set()  # parameters this request had refused: each is adapted at most once
        while True:
            mode = self.mode_for(request)
            kwargs = self._build(request, mode)
            await self._respect_pause()
            attempts += 1
            await self._throttle(kwargs)
            epoch = await self.window.acquire()
            failure: CallFailure | None = None
            try:
                resp, latency = await self._post(kwargs)
            except CallFailure as exc:
                failure = exc
            finally:
                await self.window.release(epoch, throttled=failure is not None and failure.status == 429)
            if failure is None:
                self._answered += 1
                self._answer_tokens[0] += token_counts(getattr(resp, "usage", None))[1]
                self._answer_tokens[1] += 1
                return resp, latency, attempts, mode
            if failure.status == 429:
                self.usage.rate_limited += 1
            if (fallbacks < len(LADDER) and failure.format_rejected and self.config.structured == "auto"
                    and mode != "off" and self._settled is None):
                fallbacks += 1
                if mode not in self._rejected:
                    self._rejected.add(mode)
                    self.usage.fallbacks += 1
                    log.warning("%s at %s rejected structured-output mode %s (%s); falling back to %s",
                                self.config.model, self.origin, mode, failure.server_message, self.mode_for(request))
                continue
            if (param := failure.param) in ADAPTABLE and param not in tried:
                tried.add(param)
                self._adapt(param)
                if param in _TOGETHER and request.top_logprobs:  # weighted verdicts cannot do without them
                    self._fatal = self._fail(failure, attempts)
                    raise self._fatal from None
                self.usage.adaptations += 1
                continue
            if negotiating and self._negotiated is not None:
                self._negotiated.set()  # an outcome: the others need not wait for this request's retries
            if not failure.retryable or retries >= self.config.max_retries:
                raise self._fail(failure, attempts) from None
            retries += 1
            self.usage.retries += 1
            if failure.retry_after is not None:
                delay = min(failure.retry_after, self.retry_after_cap)
                if failure.status == 429:
                    self._pause_until = max(self._pause_until, time.monotonic() + delay)
            else:
                delay = self._backoff(retries)
            log.info("judge call to %s at %s: %s; retry %d/%d in %.2fs", self.config.model, self.origin,
                     failure.detail, retries, self.config.max_retries, delay)
            await asyncio.sleep(delay)

    def finish(self, request: ChatRequest, resp: ChatCompletion, latency: float, attempts: int, mode: str,
               key: str | None) -> ChatResult:
        """The answer `resp` to `request` as a ChatResult: its tokens counted, its JSON read, stored in the cache
        under `key`; what an online call and a Batch API line share (AnswerFormatError, RefusalError)."""
        choice = resp.choices[0]
        message = choice.message
        pt, ct, cached, reasoning = token_counts(resp.usage)
        self.usage.prompt_tokens += pt
        self.usage.completion_tokens += ct
        self.usage.cached_tokens += cached
        self.usage.reasoning_tokens += reasoning
        model = resp.model or self.config.model
        finish_reason = getattr(choice, "finish_reason", None)
        details = {"usage": {"prompt_tokens": pt, "completion_tokens": ct, "cached_tokens": cached,
                             "reasoning_tokens": reasoning}, "model": model, "structured": mode,
                   "finish_reason": finish_reason}
        if (text := message.content) is None:
            self.usage.format_errors += 1
            if refusal := getattr(message, "refusal", None):
                raise RefusalError(f"the model refused to answer: {excerpt(refusal)}", refusal, **details)
            raise AnswerFormatError(f"the model returned no content (finish_reason={finish_reason!r})", text=None,
                                    **details)
        try:
            data = self._data(request, text)
        except AnswerFormatError as exc:
            self.usage.format_errors += 1
            msg = str(exc)
            if finish_reason == "length":
                msg += " (the answer was cut off at max_tokens)"
            raise AnswerFormatError(msg, text=text, **details) from None
        try:
            logprobs = _token_logprobs(choice) if request.top_logprobs else None
        except (TypeError, ValueError) as exc:  # a malformed answer: the server's, not the model's words
            raise self._fail(CallFailure("malformed", f"malformed answer: {exc}", retryable=False), attempts) from None
        if self.cache is not None and key is not None:
            self._store(key, {
                "text": clip(text, STORED_ANSWER_CHARS), "data": clip_strings(data, STORED_ANSWER_CHARS),
                "model": model, "structured": mode, "finish_reason": finish_reason,
                "prompt_tokens": pt, "completion_tokens": ct, **({"cached_tokens": cached} if cached else {}),
                **({"reasoning_tokens": reasoning} if reasoning else {}), "latency_s": latency,
                **({"logprobs": logprobs} if logprobs is not None else {}),
            })
        return ChatResult(text=text, data=data, prompt_tokens=pt, completion_tokens=ct, latency_s=latency,
                          attempts=attempts, cached=False, model=model, structured=mode, finish_reason=finish_reason,
                          logprobs=logprobs, cached_tokens=cached, reasoning_tokens=reasoning)

    def _data(self, request: ChatRequest, text: str) -> object:
        """What the answer `text` says: its JSON object (AnswerFormatError when it holds none)."""
        return extract_json(text)

    def _store(self, key: str, entry: dict) -> None:
        """Keep an answer in the cache, its text and strings cut to STORED_ANSWER_CHARS (the text says so); an
        entry still larger than STORED_ENTRY_CHARS (many small strings) is not kept: the call is made again."""
        if (size := len(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))) > STORED_ENTRY_CHARS:
            log.warning("%s at %s: an answer of %d characters is too large for the judgment cache (at most %d); "
                        "it is not stored", self.config.model, self.origin, size, STORED_ENTRY_CHARS)
            return
        self.cache.put(key, entry)

    async def aclose(self) -> None:
        """Close the HTTP client (the cache belongs to the caller)."""
        if not self._closed:
            self._closed = True
            await self._client.close()

    async def __aenter__(self) -> "LLMClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class ClientPool:
    """One :class:`LLMClient` per distinct judge config of a :class:`JudgeSettings`.

    Roles resolving to the same config share a client (and its concurrency
    bound and structured-output fallback state).  Extra keyword arguments go
    to every :class:`LLMClient`.
    """

    def __init__(self, settings: JudgeSettings, cache: JudgmentCache | None = None, **client_kwargs: Any) -> None:
        self.settings = settings
        self.cache = cache
        self._kwargs = client_kwargs
        self._clients: dict[JudgeConfig, LLMClient] = {}
        self.batcher = None  # given to every client (gsr run --batch)

    def for_role(self, role: str | None = None) -> LLMClient:
        config = self.settings.for_role(role)
        if (client := self._clients.get(config)) is None:
            client = self._clients[config] = LLMClient(config, self.cache, **self._kwargs)
            client.batcher = self.batcher
        return client

    @property
    def clients(self) -> tuple[LLMClient, ...]:
        return tuple(self._clients.values())

    @property
    def usage(self) -> Usage:
        return sum((client.usage for client in self._clients.values()), Usage())

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def __aenter__(self) -> "ClientPool":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
