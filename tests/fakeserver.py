"""A fake OpenAI-compatible chat-completions server for tests and benchmarks.

It speaks just enough of the OpenAI HTTP API for :mod:`gsrlang.judges.llm`
(and the ``openai`` package's ``AsyncOpenAI`` client) to talk to it over real
HTTP on ``127.0.0.1``; no network, no key, no model.

Usage::

    from fakeserver import FakeOpenAI, Fault, Reply, scripted

    with FakeOpenAI(responder=fn, latency=0.0) as server:
        server.base_url            # "http://127.0.0.1:PORT/v1"
        server.requests            # chat-completion requests received (see below)
        server.enqueue(Fault.status(429, retry_after=1), Fault.status(500),
                       Fault.reset(), Fault.timeout(5), Fault.malformed(),
                       Fault.refusal("I can't"))
        server.reject_json_schema = True   # 400 for response_format json_schema
        server.reject_json_object = True   # 400 for response_format json_object
        server.reject_grammar = True       # 400 for a `grammar` field (OpenAI: unknown argument)
        server.llamacpp = True             # imitate llama-cpp-python's server (below)
        server.context_length = 4096       # 400 "exceed context window" past it (prompt tokens)
        server.reasoning = True            # answer as OpenAI documents its reasoning models (below)
        server.prompt_cache = 1024         # serve repeated prompt prefixes "from the cache" (below)
        server.refusal_style = "detail"    # how `reasoning` refuses: openai (default), detail, no_param, french
        server.rate_limit = 4              # more chat requests than this at once: 429 with rate-limit headers
        server.max_in_flight       # peak number of chat requests handled at once
        server.chaos = fn          # fn(body) -> Fault | None, asked per request when the queue is empty

Endpoints: ``POST /v1/chat/completions`` (non-streaming; ``stream: true`` gets a
400), ``GET /v1/models``, and the Files and Batch APIs (``server.batch``, see
tests/fakebatch.py: its lines are answered by the same logic as the online endpoint).
Anything else is a 404.

``llamacpp = True`` imitates llama-cpp-python 0.3's server as met in practice:
``response_format`` of type ``json_schema`` gets **HTTP 500** with the pydantic
validation error it sends ("Input should be 'text' or 'json_object'");
``{"type": "json_object", "schema": S}`` is answered by the default responder with
an instance of ``S`` (the server constrains decoding to it); a ``grammar`` field is
accepted; ``logprobs: true`` gets per-token logprobs (``Reply.logprobs``).

``reasoning = True`` answers as OpenAI's API reference and error bodies show for its
reasoning models (o1, o3, o4-mini, gpt-5): a request with ``temperature`` other than 1
gets ``400 {"error": {"message": "Unsupported value: 'temperature' does not support 0.0
with this model. Only the default (1) value is supported.", "type":
"invalid_request_error", "param": "temperature", "code": "unsupported_value"}}``; one
with ``max_tokens``, ``top_p``, ``logprobs``/``top_logprobs`` gets the same shape with
``code: "unsupported_parameter"`` ("Unsupported parameter: 'max_tokens' is not supported
with this model. Use 'max_completion_tokens' instead."); ``reasoning_effort`` must be
one of minimal, low, medium, high (else ``unsupported_value``). An answer's
``completion_tokens`` include ``completion_tokens_details.reasoning_tokens`` (by
effort: minimal 0, low 64, medium 192 -- the default --, high 512), which the message
does not show. A model that is not a reasoning model (``reasoning = False``) refuses
``reasoning_effort`` with ``unsupported_parameter``. ``refusal_style`` changes the
error's shape: ``detail`` (``{"detail": "..."}``, no ``param``), ``no_param`` (the
OpenAI shape with ``param: null``), ``french`` (the message in French, no ``param``).

``prompt_cache = N`` imitates OpenAI's automatic prompt caching: a prompt of at least
``N`` tokens whose leading part was sent before (the longest prefix shared with any of
the last 256 prompts, in whole 128-token blocks) reports that part as
``usage.prompt_tokens_details.cached_tokens``. Every answer carries
``prompt_tokens_details`` and ``completion_tokens_details`` when ``reasoning`` or
``prompt_cache`` is set, as OpenAI's do.

``rate_limit = N``: a chat request arriving while ``N`` are in flight gets ``429
{"error": {"type": "requests", "code": "rate_limit_exceeded", ...}}`` with
``retry-after-ms``, ``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests: 0``
and ``x-ratelimit-reset-requests`` headers; ``server.rate_limited`` counts them.

``responder(body: dict) -> str | dict | Reply`` computes the answer to a chat
request whose faults queue is empty.  A ``str`` is the assistant message
content, a ``dict`` is JSON-encoded into the content, a :class:`Reply` gives full
control (HTTP status, headers, content, usage, refusal, finish_reason).  If the
responder raises, the server answers ``400`` with the exception in the error
message (a 400 is not retried, so a broken test fails fast) and also records it
in ``server.errors``.  The default responder answers with an instance of the
``json_schema`` sent in ``response_format`` (see :func:`schema_example`), or
``{"answer": "ok"}`` when there is none.

:func:`scripted` builds a responder from a table keyed by substrings of the
prompt (all message contents joined), e.g. per (criterion, candidate)::

    scripted({
        ("clarity", "cand-1"): {"score": 4},
        ("clarity", "cand-2"): ["not json", {"score": 2}],   # successive answers
        "tone": lambda body: {"score": 3},
    }, default={"score": 0})

A key is a substring or a tuple of substrings that must all occur; when several
keys match, the most specific one (most substrings, then longest) wins.

``server.requests`` is a thread-safe list of :class:`Received` records, one per
chat-completion request (including ones answered with a fault).  A ``Received``
*is* the decoded JSON body (a ``dict`` subclass) with extra attributes
``headers`` (lower-cased names), ``path``, ``time`` (``time.monotonic()`` at
arrival), ``fault`` (the name of the fault served, or ``None``) and ``prompt``
(all message texts joined by newlines).  ``server.wait_for_requests(n)`` blocks
until ``n`` have arrived (or the server is closed, or its patience ran out).

Faults (served FIFO, one per chat request, before normal answers):

* ``Fault.status(code, retry_after=None, message=None)`` -- an HTTP error with an
  OpenAI-style JSON error body and an optional ``Retry-After`` header (seconds);
* ``Fault.reset()`` -- close the connection without any response (TCP RST);
* ``Fault.timeout(seconds)`` -- wait ``seconds`` (longer than the client timeout),
  then drop the connection; cut short when the server shuts down;
* ``Fault.malformed(body=...)`` -- ``200`` with a body that is not JSON;
* ``Fault.refusal(text)`` -- ``200`` whose message has ``content: null`` and a
  ``refusal`` field.
* ``Fault.endless(seconds=60, limit=2**31)`` -- ``200`` with a chunked body that
  begins like a chat completion and never ends: 64 KiB chunks as fast as the
  client reads them, until the client hangs up, ``seconds`` pass, ``limit``
  bytes are sent or the server shuts down;
* ``Fault.trickle(interval=2.0, seconds=60)`` -- the same body, one byte every
  ``interval`` seconds.

``server.streamed`` lists, per endless or trickle answer that ended, ``(bytes,
why)``: the body bytes the server managed to send (socket buffers included)
and why it stopped: ``"client"`` (the client hung up), ``"time"`` (``seconds``
passed, or the server shut down) or ``"limit"``.

``usage`` is realistic-ish: ``prompt_tokens = ceil(len(prompt chars) / 4)``,
``completion_tokens = ceil(len(content) / 4)`` (at least 1 each).

``latency`` (seconds, or a callable ``body -> seconds``) delays every normal
answer; it runs in the handling thread, so concurrent requests overlap.  The
server is a ``ThreadingHTTPServer`` with HTTP/1.1 keep-alive and one daemon
thread per connection; it sustains dozens of concurrent slow requests at
several hundred requests per second.  ``close()`` (or leaving the ``with``
block) stops the server, wakes sleeping handlers and closes open connections.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import socket
import struct
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

try:
    from fakebatch import BatchAPI, error_body
except ImportError:  # tests/ imported as a package
    from tests.fakebatch import BatchAPI, error_body

__all__ = [
    "FakeOpenAI",
    "Fault",
    "Reply",
    "Received",
    "scripted",
    "schema_example",
    "prompt_text",
]


# --------------------------------------------------------------------------- replies


@dataclass
class Reply:
    """A full answer: ``content`` (str, dict -> JSON, or None), HTTP ``status``
    (non-200 makes an OpenAI-style error whose message is ``content``),
    extra ``headers``, optional ``usage`` override, ``refusal`` text,
    ``finish_reason`` and the ``model`` reported back."""

    content: Union[str, dict, None] = ""
    status: int = 200
    headers: dict = field(default_factory=dict)
    usage: Union[dict, None] = None
    refusal: Union[str, None] = None
    finish_reason: str = "stop"
    model: Union[str, None] = None
    logprobs: Union[dict, None] = None  # the choice's `logprobs` ({"content": [...]}) when asked for


@dataclass(frozen=True)
class Fault:
    """A misbehaviour served instead of a normal answer (see module docstring)."""

    kind: str
    status_code: int = 0
    retry_after: Union[float, None] = None
    message: Union[str, None] = None
    seconds: float = 0.0
    body: bytes = b""
    interval: float = 0.0  # trickle: seconds between two bytes
    limit: int = 0  # endless: the most body bytes sent

    @classmethod
    def status(cls, code: int, retry_after: Union[float, None] = None, message: Union[str, None] = None) -> "Fault":
        return cls("status", status_code=code, retry_after=retry_after, message=message)

    @classmethod
    def reset(cls) -> "Fault":
        return cls("reset")

    @classmethod
    def timeout(cls, seconds: float = 5.0) -> "Fault":
        return cls("timeout", seconds=seconds)

    @classmethod
    def malformed(cls, body: bytes = b"<html>502 Bad Gateway? this is not JSON") -> "Fault":
        return cls("malformed", body=body)

    @classmethod
    def refusal(cls, text: str = "I'm sorry, but I can't help with that.") -> "Fault":
        return cls("refusal", message=text)

    @classmethod
    def endless(cls, seconds: float = 60.0, limit: int = 2 ** 31) -> "Fault":
        return cls("endless", seconds=seconds, limit=limit)

    @classmethod
    def trickle(cls, interval: float = 2.0, seconds: float = 60.0) -> "Fault":
        return cls("trickle", seconds=seconds, interval=interval)

    @property
    def name(self) -> str:
        return f"status {self.status_code}" if self.kind == "status" else self.kind


class Received(dict):
    """One received chat request: the JSON body plus metadata attributes."""

    headers: dict
    path: str
    time: float
    fault: Union[str, None]
    prompt: str

    def __init__(self, body: dict, *, headers: dict, path: str, time: float, fault: Union[str, None] = None):
        super().__init__(body)
        self.headers = headers
        self.path = path
        self.time = time
        self.fault = fault
        self.prompt = prompt_text(body)

    @property
    def body(self) -> dict:
        return dict(self)


# --------------------------------------------------------------------------- helpers


def prompt_text(body: Mapping[str, Any]) -> str:
    """All message texts of a chat body, joined by newlines (text parts only)."""
    parts: list[str] = []
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return "\n".join(parts)


def schema_example(schema: Any) -> Any:
    """A small instance of a JSON Schema (enough for typical judgment schemas)."""
    if not isinstance(schema, Mapping):
        return {}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return schema_example(schema[key][0])
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "null")
    if typ == "object" or (typ is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: schema_example(sub) for name, sub in props.items()}
    if typ == "array":
        n = int(schema.get("minItems", 0) or 0)
        return [schema_example(schema.get("items", {})) for _ in range(n)]
    if typ == "string":
        return "example"
    if typ == "integer":
        return int(schema.get("minimum", 0) or 0)
    if typ == "number":
        return float(schema.get("minimum", 0) or 0)
    if typ == "boolean":
        return True
    if typ == "null":
        return None
    return {}


def _default_responder(body: dict) -> Any:
    fmt = body.get("response_format") or {}
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        return schema_example(schema)
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), Mapping):
        return schema_example(fmt["schema"])  # llama.cpp's json_object + schema
    return {"answer": "ok"}


Answer = Union[str, dict, Reply, Callable[[dict], Any], Sequence[Any]]


def scripted(script: Mapping[Union[str, tuple], Answer], default: Any = None) -> Callable[[dict], Any]:
    """Build a responder from ``{substring-or-tuple-of-substrings: answer}``.

    An answer is a str, dict, :class:`Reply`, a callable ``body -> answer``, or
    a list of those served one after another for successive matching requests
    (the last one repeats).  With no matching key, ``default`` is used (same
    forms); with no default the server answers 400 naming the unmatched prompt.
    """
    entries = []
    for order, (key, answer) in enumerate(script.items()):
        parts = (key,) if isinstance(key, str) else tuple(key)
        entries.append(((-len(parts), -sum(map(len, parts)), order), parts, answer))
    entries.sort(key=lambda e: e[0])
    counters: dict[int, itertools.count] = {}
    lock = threading.Lock()

    def resolve(answer: Any, ident: int, body: dict) -> Any:
        if isinstance(answer, list):
            with lock:
                n = next(counters.setdefault(ident, itertools.count()))
            answer = answer[min(n, len(answer) - 1)]
        if callable(answer) and not isinstance(answer, Reply):
            answer = answer(body)
        return answer

    def responder(body: dict) -> Any:
        prompt = prompt_text(body)
        for _, parts, answer in entries:
            if all(p in prompt for p in parts):
                return resolve(answer, id(parts), body)
        if default is not None:
            return resolve(default, -1, body)
        raise LookupError(f"no scripted answer matches prompt {prompt[:200]!r}")

    return responder


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    allow_reuse_address = True

    fake: "FakeOpenAI"

    def handle_error(self, request, client_address) -> None:
        # A client that went away (a deadline passed, a call was cancelled) or the fake's own close() cutting a
        # connection mid-answer is how such calls end: say nothing, as a provider would. socketserver would print
        # a traceback to sys.stderr from the handler's thread, into whichever test captures stderr by then.
        if self.fake._stop.is_set() or isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body are separate writes: without NODELAY, Nagle + delayed
        # ACK would add ~40 ms to every response
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    # ---- plumbing

    def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, headers: Mapping[str, str] | None = None, param: str | None = None) -> None:
        self._send(status, error_body(status, message, param), headers)

    def _drop(self, rst: bool = True) -> None:
        """Close the connection without sending anything."""
        self.close_connection = True
        try:
            if rst:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- endpoints

    def do_GET(self) -> None:
        fake = self.server.fake
        if fake.batch.handles(self.path):
            fake.batch.get(self)
        elif self.path.rstrip("/") == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fakeserver"} for m in fake.models]
            self._send(200, {"object": "list", "data": data})
        else:
            self._error(404, f"fakeserver: no route GET {self.path}")

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if fake.batch.handles(self.path):
            fake.batch.post(self, raw)
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"fakeserver: no route POST {self.path}")
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            self._error(400, f"fakeserver: request body is not JSON: {exc}")
            return
        fake._serve_chat(self, body)


class FakeOpenAI:
    """A fake OpenAI-compatible server on 127.0.0.1 (see module docstring)."""

    def __init__(
        self,
        responder: Callable[[dict], Any] | None = None,
        latency: float | Callable[[dict], float] = 0.0,
        *,
        models: Iterable[str] = ("fake-model",),
        require_key: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.host = host  # another local address makes the server look remote (key-trust tests)
        self.responder = responder or _default_responder
        self.latency = latency
        self.models = list(models)
        self.require_key = require_key
        self.reject_json_schema = False
        self.reject_json_object = False
        self.reject_grammar = False
        self.llamacpp = False
        self.context_length: int | None = None
        self.reasoning = False
        self.prompt_cache: int | None = None
        self.refusal_style = "openai"
        self.rate_limit: int | None = None
        self.rate_limited = 0
        self._prompts: deque[str] = deque(maxlen=256)  # for the prompt cache: what was sent before
        self.chaos: Callable[[dict], Fault | None] | None = None  # a fault per request when the queue is empty
        self.requests: list[Received] = []
        self.errors: list[str] = []
        self.streamed: list[tuple[int, str]] = []  # (body bytes sent, why it stopped) per endless/trickle answer
        self.in_flight = 0
        self.max_in_flight = 0
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified as each chat request arrives, and on close()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._ids = itertools.count(1)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.batch = BatchAPI(self)  # the Files and Batch APIs (tests/fakebatch.py)

    # ---- lifecycle

    def start(self) -> "FakeOpenAI":
        if self._httpd is not None:
            return self
        httpd = _Server((self.host, 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fakeopenai", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stop.set()
        with self._arrived:
            self._arrived.notify_all()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- public API

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    url = base_url

    def enqueue(self, *faults: Fault | Reply) -> None:
        """Queue faults (or explicit Replies) served FIFO before normal answers."""
        with self._lock:
            self._faults.extend(faults)

    def wait_for_requests(self, n: int, patience_s: float = 120.0) -> bool:
        """Block until `n` chat requests have arrived (True), or the server is closed or `patience_s` of wall
        time have passed (False): for a test whose clock stands still (tests/manualclock.py), which awaits it
        in a thread (``await asyncio.to_thread(server.wait_for_requests, n)``) once it knows they are on their
        way. The patience is a liveness bound, not a speed: a request that never comes (a client that
        stopped sending) fails the test's assertion instead of hanging the suite; on time, requests to a
        local socket arrive in milliseconds."""
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.requests) >= n or self._stop.is_set(), timeout=patience_s)
            return len(self.requests) >= n

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    def reset(self) -> None:
        """Forget received requests, errors, queued faults and the in-flight peak."""
        with self._lock:
            self.requests.clear()
            self.errors.clear()
            self._faults.clear()
            self.max_in_flight = self.in_flight

    # ---- internals

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _serve_chat(self, h: _Handler, body: dict) -> None:
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            fault = self._faults.popleft() if self._faults else (self.chaos(body) if self.chaos else None)
            limited = self.rate_limit is not None and fault is None and self.in_flight >= self.rate_limit
            if limited:
                self.rate_limited += 1
            rec = Received(body, headers=headers, path=h.path, time=time.monotonic(),
                           fault=fault.name if isinstance(fault, Fault) else ("status 429" if limited else None))
            self.requests.append(rec)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._arrived.notify_all()
        try:
            if limited:
                h._send(429, {"error": {"message": f"Rate limit reached for requests: limit {self.rate_limit} at "
                                                   "once. Please try again in 20ms.", "type": "requests",
                                        "param": None, "code": "rate_limit_exceeded"}},
                        {"retry-after-ms": "20", "x-ratelimit-limit-requests": str(self.rate_limit),
                         "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms"})
                return
            self._answer(h, body, headers, fault)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, h: _Handler, body: dict, headers: dict, fault: Fault | Reply | None) -> None:
        if self.require_key is not None and headers.get("authorization") != f"Bearer {self.require_key}":
            h._error(401, "Incorrect API key provided.")
            return
        if isinstance(fault, Fault):
            if fault.kind == "status":
                extra = {} if fault.retry_after is None else {"Retry-After": _fmt_seconds(fault.retry_after)}
                h._error(fault.status_code, fault.message or f"fakeserver: injected HTTP {fault.status_code}", extra)
                return
            if fault.kind == "reset":
                h._drop(rst=True)
                return
            if fault.kind == "timeout":
                self._stop.wait(fault.seconds)
                h._drop(rst=False)
                return
            if fault.kind == "malformed":
                h._send(200, None, raw=fault.body)
                return
            if fault.kind == "refusal":
                self._complete(h, body, Reply(content=None, refusal=fault.message))
                return
            if fault.kind in ("endless", "trickle"):
                self._stream_forever(h, fault)
                return
        if body.get("stream"):
            h._error(400, "fakeserver: streaming is not supported", param="stream")
            return
        fmt = body.get("response_format")
        if self.context_length is not None and _tokens(prompt_text(body)) > self.context_length:
            h._error(400, f"Requested tokens ({_tokens(prompt_text(body))}) exceed context window of "
                          f"{self.context_length}")
            return
        if self.llamacpp and isinstance(fmt, Mapping) and fmt.get("type") not in ("text", "json_object"):
            detail = [{"type": "literal_error", "loc": ["body", "response_format", "type"],
                       "msg": "Input should be 'text' or 'json_object'", "input": fmt.get("type"),
                       "ctx": {"expected": "'text' or 'json_object'"}}]
            h._send(500, {"error": {"message": str(detail), "type": "internal_server_error",
                                    "param": None, "code": None}})
            return
        refused = self._refuse(body)
        if refused is not None:
            status, payload = refused
            h._send(status, payload)
            return
        if "grammar" in body and self.reject_grammar:
            h._error(400, "Unrecognized request argument supplied: grammar", param="grammar")
            return
        if isinstance(fmt, Mapping):
            if fmt.get("type") == "json_schema" and self.reject_json_schema:
                h._error(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
                         param="response_format")
                return
            if fmt.get("type") == "json_object" and self.reject_json_object:
                h._error(400, "Invalid parameter: 'response_format' of type 'json_object' is not supported with this model.",
                         param="response_format")
                return
        if isinstance(fault, Reply):
            answer: Any = fault
        else:
            delay = self.latency(body) if callable(self.latency) else self.latency
            if delay and delay > 0:
                self._stop.wait(delay)
            try:
                answer = self.responder(body)
            except Exception as exc:  # a test bug: fail fast with a non-retryable 400
                msg = f"fakeserver responder failed: {type(exc).__name__}: {exc}"
                with self._lock:
                    self.errors.append(msg + "\n" + traceback.format_exc())
                h._error(400, msg)
                return
        if not isinstance(answer, Reply):
            answer = Reply(content=answer)
        if answer.status != 200:
            content = answer.content if isinstance(answer.content, str) else json.dumps(answer.content)
            h._error(answer.status, content or f"HTTP {answer.status}", answer.headers)
            return
        self._complete(h, body, answer)

    def _refuse(self, body: dict) -> tuple[int, dict] | None:
        """The 400 a reasoning model (or, for reasoning_effort, another model) answers this body with, or None."""
        problem = None
        effort = body.get("reasoning_effort")
        if self.reasoning:
            if "temperature" in body and body["temperature"] != 1:
                t = body["temperature"]
                problem = ("temperature", "unsupported_value", f"Unsupported value: 'temperature' does not support "
                           f"{t!r} with this model. Only the default (1) value is supported.")
            elif "top_p" in body and body["top_p"] != 1:
                problem = ("top_p", "unsupported_parameter",
                           "Unsupported parameter: 'top_p' is not supported with this model.")
            elif "max_tokens" in body:
                problem = ("max_tokens", "unsupported_parameter", "Unsupported parameter: 'max_tokens' is not "
                           "supported with this model. Use 'max_completion_tokens' instead.")
            elif "logprobs" in body or "top_logprobs" in body:
                name = "logprobs" if "logprobs" in body else "top_logprobs"
                problem = (name, "unsupported_parameter",
                           f"Unsupported parameter: '{name}' is not supported with this model.")
            elif effort is not None and effort not in ("minimal", "low", "medium", "high"):
                problem = ("reasoning_effort", "unsupported_value", f"Unsupported value: 'reasoning_effort' does "
                           f"not support {effort!r} with this model. Supported values are: 'minimal', 'low', "
                           "'medium', and 'high'.")
        elif effort is not None:
            problem = ("reasoning_effort", "unsupported_parameter",
                       "Unsupported parameter: 'reasoning_effort' is not supported with this model.")
        if problem is None:
            return None
        param, code, message = problem
        if self.refusal_style == "detail":
            return 400, {"detail": message}
        if self.refusal_style == "french":
            return 400, {"error": {"message": f"Valeur non prise en charge : le paramètre '{param}' n'est pas "
                                              "accepté par ce modèle.", "type": "invalid_request_error",
                                   "param": None, "code": None}}
        return 400, {"error": {"message": message, "type": "invalid_request_error",
                               "param": None if self.refusal_style == "no_param" else param, "code": code}}

    def _cached_tokens(self, body: dict, prompt_tokens: int) -> int:
        """OpenAI-style prompt caching: the prefix shared with an earlier prompt, in 128-token blocks."""
        if self.prompt_cache is None:
            return 0
        text = json.dumps(body.get("messages"), sort_keys=True)
        with self._lock:
            shared = max((len(os.path.commonprefix([text, p])) for p in self._prompts), default=0)
            self._prompts.append(text)
        if prompt_tokens < self.prompt_cache:
            return 0
        return min(prompt_tokens, (_tokens(text[:shared]) // 128) * 128) if shared else 0

    def _stream_forever(self, h: _Handler, fault: Fault) -> None:
        """A 200 whose chunked body never ends (Fault.endless, Fault.trickle); bounded by time, bytes and close()."""
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        head = b'{"id":"chatcmpl-endless","object":"chat.completion","created":0,"model":"fake-model",' \
               b'"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"'
        chunk = b"a" * (1 if fault.kind == "trickle" else 65536)
        sent, until, why = 0, time.monotonic() + fault.seconds, "limit"
        try:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(head), head))
            h.wfile.flush()
            sent += len(head)
            while fault.kind == "trickle" or sent < fault.limit:
                if self._stop.is_set() or time.monotonic() > until:
                    why = "time"
                    break
                if fault.kind == "trickle" and self._stop.wait(fault.interval):
                    why = "time"
                    break
                h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                h.wfile.flush()
                sent += len(chunk)
        except OSError:  # the client hung up
            why = "client"
        finally:
            with self._lock:
                self.streamed.append((sent, why))
            h._drop(rst=False)

    def _complete(self, h: _Handler, body: dict, reply: Reply) -> None:
        content = reply.content
        if isinstance(content, (dict, list)):
            content = json.dumps(content)
        usage = reply.usage or {
            "prompt_tokens": _tokens(prompt_text(body)),
            "completion_tokens": _tokens(content or reply.refusal or ""),
        }
        if (self.reasoning or self.prompt_cache is not None) and reply.usage is None:
            reasoning = {"minimal": 0, "low": 64, "medium": 192, "high": 512}.get(
                body.get("reasoning_effort") or "medium", 192) if self.reasoning else 0
            usage = {**usage, "completion_tokens": usage["completion_tokens"] + reasoning,
                     "prompt_tokens_details": {"cached_tokens": self._cached_tokens(body, usage["prompt_tokens"]),
                                               "audio_tokens": 0},
                     "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                                   "accepted_prediction_tokens": 0,
                                                   "rejected_prediction_tokens": 0}}
        usage = {**usage, "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)}
        payload = {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or "fake-model",
            "system_fingerprint": "fp_fake",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": reply.refusal},
                "logprobs": reply.logprobs if body.get("logprobs") else None,
                "finish_reason": reply.finish_reason,
            }],
            "usage": usage,
        }
        h._send(200, payload, reply.headers)


def _fmt_seconds(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else repr(float(s))
