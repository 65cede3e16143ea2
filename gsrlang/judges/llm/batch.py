"""Model calls through a provider's Batch API (OpenAI's ``/v1/files`` + ``/v1/batches``), round by round.

``gsr run --batch`` gives every :class:`~gsrlang.judges.llm.client.LLMClient` of the run a
:class:`Batcher`. A call the cache cannot answer is *parked* instead of sent: its request
body is built exactly as the online path builds it (:meth:`LLMClient.request_body`, after the
structured-output negotiation), keyed by its cache key (the batch line's ``custom_id``).
The run itself is the online run: the executor's short-circuit rounds, the judge's
re-asks and ensembles all ask as they would online, so a judgment the online path skips
is never asked, hence never batched. When every item in flight is waiting (the run is
*quiescent*), the parked requests become one batch (several at the size limits), which is
uploaded, created, polled with backoff and read: each answer goes through the client's own
``finish`` (the same parsing, the same cache entry as an online answer) as its line is
read, and the waiting judgments go on to their next round.

Durability. Everything is recorded in the *state folder* (``OUT.gsr-batch/`` beside the
results, or ``--batch-state``) before the step it protects: a part's custom_ids
(``NNNN.ids``) and input file before the upload, the file id after it, the batch id after
the create (and the create carries ``metadata.gsr_part``, so a batch created just before a
kill is found again by listing), its status as it changes. A run killed at any point and
run again asks the same questions; the ones already answered come from the cache, the
others join the batch they were sent in (polled, downloaded again): nothing is submitted twice. A batch
whose results are there is read before the parked requests are submitted, so that the requests of the
answers stored before the kill and of those read now make one batch, as they would have without the kill.

Failures. A line with an error (HTTP status other than 200, ``batch_expired``, a line
missing from an expired or failed batch, an unreadable line) is retried ``online`` (the
online path, with its retries) or in the next ``batch`` (at most :data:`BATCH_RETRIES`
times), as ``--batch-retry`` says; a cancelled batch's unanswered lines are not retried:
their judgments are invalid, saying so. ``--batch-export FILE`` writes the parked requests
in the same JSONL format instead of uploading them and stops; ``--batch-import FILE`` reads
a results file of that format (any runner's, e.g. ``vllm run-batch``) and answers from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from gsrlang.files.safeio import write_atomic

from .client import RETRYABLE_STATUS, CallFailure, ChatRequest, JudgeCallError, LLMClient
from .config import LLMError
from .config import origin_of as _origin
from .jsonparse import AnswerFormatError

__all__ = ["BATCH_RETRIES", "BatchError", "BatchLimits", "BatchState", "Batcher", "ImportRefused", "batch_line",
           "check_batch_api", "read_results"]

STATE_VERSION = "gsr-batch/1"
ENDPOINT = "/v1/chat/completions"
TERMINAL = ("failed", "completed", "expired", "cancelled")
BATCH_RETRIES = 2  # a line that failed goes into at most this many later batches (--batch-retry batch)
QUIET_TICKS = 30  # loop turns with nothing new before the run counts as waiting on its batches


class BatchError(LLMError):
    """The batch run cannot go on (no Batch API at the server, a state folder of another run, ...): one line."""


class ImportRefused(BatchError):
    """A --batch-import file that does not belong to this run."""


def batch_line(custom_id: str, body: dict) -> bytes:
    """One line of a batch input file (OpenAI's format, which `vllm run-batch` also reads)."""
    line = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
    # ASCII only: a reader that splits lines on U+0085 or U+2028 (Python's str.splitlines) reads the same lines
    return (json.dumps(line, separators=(",", ":")) + "\n").encode("ascii")


@attrs.frozen
class BatchLimits:
    """Where a batch is split: requests per batch and bytes per input file (OpenAI: 50,000 and 200 MB)."""

    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024

    def split(self, lines: list[tuple[Any, bytes]]) -> Iterable[list[tuple[Any, bytes]]]:
        chunk: list = []
        size = 0
        for item in lines:
            n = len(item[1])
            if chunk and (len(chunk) >= self.max_requests or size + n > self.max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append(item)
            size += n
        if chunk:
            yield chunk


def parse_size(text: str) -> int:
    """`200MB`, `512K`, `1G` or a number of bytes."""
    t = str(text).strip().upper().removesuffix("B")
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(t[-1:], 1)
    try:
        value = int(float(t[:-1] if scale > 1 else t) * scale)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (write bytes, or e.g. 200MB)") from None
    if value < 1:
        raise ValueError(f"a size must be positive, got {text!r}")
    return value


# --------------------------------------------------------------------------------------------- state


@attrs.define
class Part:
    """One batch of the run, as recorded in the state folder (`waiters` is this process's, never saved)."""

    n: int
    model: str
    base_url: str
    requests: int
    bytes: int
    filename: str
    stage: str = "built"  # built, uploaded, created, done (terminal status), read; exported
    file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None
    counts: dict = attrs.field(factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list = attrs.field(factory=list)
    created: float = 0.0
    waiters: dict = attrs.field(factory=dict, eq=False, repr=False)

    def to_json(self) -> dict:
        return attrs.asdict(self, filter=lambda a, _: a.name != "waiters")

    @classmethod
    def from_json(cls, d: dict) -> "Part":
        names = {a.name for a in attrs.fields(cls)} - {"waiters"}
        return cls(**{k: v for k, v in d.items() if k in names})


def scrubbed_url(url: str) -> str:
    """The base URL without userinfo or query (what the state file records)."""
    from urllib.parse import urlsplit

    return _origin(url) + urlsplit(url).path.rstrip("/")


class BatchState:
    """The state folder of a batch run: ``state.json`` (written atomically), ``NNNN.ids`` and ``NNNN.jsonl``."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / "state.json"
        self.parts: list[Part] = []
        self.ledger: dict[str, Part] = {}  # custom_id -> the latest part it was sent (or exported) in
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") != STATE_VERSION:
                raise ValueError(f"version {data.get('version')!r}, not {STATE_VERSION}")
            self.parts = [Part.from_json(p) for p in data["parts"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BatchError(f"the batch state {self.path} cannot be read ({exc}); move it away to start "
                             "the batches anew") from None
        self.ledger.update((cid, part) for part in self.parts for cid in self.ids(part))

    def ids(self, part: Part) -> list[str]:
        try:
            return (self.folder / f"{part.n:04d}.ids").read_text(encoding="utf-8").split()
        except OSError as exc:
            raise BatchError(f"the batch state {self.folder} lacks {part.n:04d}.ids ({exc.strerror}); move the "
                             "folder away to start the batches anew") from None

    def save(self) -> None:
        data = {"version": STATE_VERSION, "parts": [p.to_json() for p in self.parts]}
        write_atomic(self.path, json.dumps(data, indent=1) + "\n")

    def input_path(self, part: Part) -> Path:
        return self.folder / f"{part.n:04d}.jsonl"

    def add(self, client: LLMClient, chunk: list[tuple[Any, bytes]], stage: str = "built") -> Part:
        """Record a new part: its ids and input file, then the state (so a kill after this resumes it)."""
        n = max((p.n for p in self.parts), default=0) + 1
        self.folder.mkdir(parents=True, exist_ok=True)
        ids = [w.key for w, _ in chunk]
        write_atomic(self.folder / f"{n:04d}.ids", "".join(k + "\n" for k in ids))
        data = b"".join(line for _, line in chunk)
        token = os.urandom(4).hex()
        part = Part(n, client.config.model, scrubbed_url(client.config.effective_base_url), len(ids), len(data),
                    f"gsr-{token}-{n:04d}.jsonl", stage=stage, created=time.time())
        if stage == "built":
            write_atomic(self.input_path(part), data)
        self.parts.append(part)
        self.ledger.update(dict.fromkeys(ids, part))
        self.save()
        return part

    def update(self, part: Part, **changes) -> None:
        for k, v in changes.items():
            setattr(part, k, v)
        self.save()


# --------------------------------------------------------------------------------------------- the API


def _api_message(exc: Exception) -> tuple[int | None, str]:
    import openai

    from .client import api_error_message

    if isinstance(exc, openai.APIStatusError):
        return exc.status_code, " ".join(api_error_message(exc).split())[:300]
    if isinstance(exc, openai.APITimeoutError):
        return None, "timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return None, f"connection error ({type(cause).__name__ if cause else 'unknown'}: {cause or exc})"[:300]
    return None, f"{type(exc).__name__}: {exc}"[:300]


class BatchAPI:
    """Files and Batch calls to one server, through the openai package (its own retries and backoff)."""

    def __init__(self, client: LLMClient):
        import openai

        cfg = client.config
        self.origin = client.origin
        self.client = client
        self._sdk = openai.AsyncOpenAI(base_url=cfg.effective_base_url,
                                       api_key=cfg.api_key.reveal() if cfg.api_key else "not-needed",
                                       max_retries=cfg.max_retries, timeout=max(cfg.timeout_s, 300.0))

    def error(self, what: str, exc: Exception) -> JudgeCallError:
        status, message = _api_message(exc)
        shown = f"HTTP {status}: {message}" if status else message
        return JudgeCallError(self.client.scrub(f"the Batch API at {self.origin} failed to {what}: {shown}"),
                              status=status, server_message=message, model=self.client.config.model,
                              retryable=status is None or status in RETRYABLE_STATUS or status >= 500)

    async def probe(self) -> None:
        """Raise BatchError when the server has no Batch API (404/405 on /v1/batches, as llama.cpp answers)."""
        import openai

        try:
            await self._sdk.batches.list(limit=1)
        except openai.APIError as exc:
            if isinstance(exc, openai.APIStatusError) and exc.status_code in (404, 405):
                raise BatchError(f"the server at {self.origin} has no Batch API (GET /v1/batches answered HTTP "
                                 f"{exc.status_code}); run without --batch to judge online") from None
            raise self.error("list batches", exc) from None

    async def find_file(self, filename: str) -> str | None:
        async for f in self._sdk.files.list(purpose="batch"):
            if f.filename == filename:
                return f.id
        return None

    async def upload(self, path: Path, filename: str) -> str:
        with open(path, "rb") as handle:
            f = await self._sdk.files.create(file=(filename, handle, "application/jsonl"), purpose="batch")
        return f.id

    async def find_batch(self, file_id: str) -> Any:
        async for b in self._sdk.batches.list(limit=100):
            if b.input_file_id == file_id:
                return b
        return None

    async def create(self, file_id: str, part: Part):
        return await self._sdk.batches.create(input_file_id=file_id, endpoint=ENDPOINT, completion_window="24h",
                                              metadata={"gsr_part": part.filename})

    async def retrieve(self, batch_id: str):
        return await self._sdk.batches.retrieve(batch_id)

    async def cancel(self, batch_id: str):
        return await self._sdk.batches.cancel(batch_id)

    async def lines(self, file_id: str):
        """The lines of a file, as they arrive."""
        async with self._sdk.files.with_streaming_response.content(file_id) as resp:
            async for line in resp.iter_lines():
                yield line

    async def aclose(self) -> None:
        await self._sdk.close()


async def check_batch_api(clients: Iterable[LLMClient]) -> None:
    """Raise BatchError (one line) when a server of `clients` has no Batch API; nothing is uploaded."""
    for client in clients:
        api = BatchAPI(client)
        try:
            await api.probe()
        finally:
            await api.aclose()


# --------------------------------------------------------------------------------------------- results files


def read_results(path: str, known: Callable[[str], bool]) -> tuple[dict[str, dict], list[str]]:
    """({custom_id: line} of a batch results file, the problems of the lines that cannot be used).

    Raises ImportRefused naming the first custom_id `known` does not know (nothing is used then).
    A line that is not JSON, has no custom_id, or neither a response nor an error is a problem
    (its request is asked again); so is a cut-off last line."""
    answers: dict[str, dict] = {}
    problems: list[str] = []
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise BatchError(f"--batch-import {path}: cannot read it ({exc.strerror or exc})") from None
    with handle:
        for n, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                cut = "" if raw.endswith(b"\n") else " (cut short?)"
                problems.append(f"line {n}: not JSON{cut}")
                continue
            cid = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(cid, str) or not cid:
                problems.append(f"line {n}: no custom_id")
                continue
            if not known(cid):
                raise ImportRefused(f"--batch-import {path}: line {n}: custom_id {cid!r} is not a request this run "
                                    "exported (a results file of another run or program?); nothing was imported")
            if not isinstance(line.get("response"), dict) and not isinstance(line.get("error"), dict):
                problems.append(f"line {n} (custom_id {cid[:12]}…): neither a response nor an error")
                continue
            answers[cid] = line
    return answers, problems


def _line_answer(line: dict):
    """(a ChatCompletion, None) for a line answered with HTTP 200, else (None, a _Failure describing it)."""
    from openai.types.chat import ChatCompletion
    from pydantic import ValidationError

    resp, err = line.get("response"), line.get("error")
    status, body = (resp.get("status_code"), resp.get("body")) if isinstance(resp, dict) else (None, None)
    if status == 200 and isinstance(body, dict):
        try:
            completion = ChatCompletion.model_validate(body)
        except ValidationError:
            completion = None
        if completion is not None and completion.choices:
            return completion, None
        return None, CallFailure("malformed", "malformed batch line (its body is not a chat completion)", retryable=True)
    if isinstance(status, int) and status != 200:
        message = ""
        if isinstance(body, dict):
            e = body.get("error", body)
            message = str(e.get("message") if isinstance(e, dict) else e)
        elif isinstance(body, str):
            message = body
        short = " ".join(message.split())[:300]
        return None, CallFailure("http", f"HTTP {status}: {short}" if short else f"HTTP {status}", status=status,
                              server_message=short, retryable=status in RETRYABLE_STATUS or status >= 500)
    if isinstance(err, dict):
        code, message = err.get("code"), " ".join(str(err.get("message") or "").split())[:300]
        return None, CallFailure("batch", f"batch error {code}: {message}" if code else f"batch error: {message}",
                              server_message=message, retryable=True)
    return None, CallFailure("malformed", "malformed batch line (no response)", retryable=True)


# --------------------------------------------------------------------------------------------- the batcher


@attrs.define(eq=False)
class _Wait:
    client: LLMClient
    request: ChatRequest
    key: str
    body: dict
    mode: str
    future: asyncio.Future
    retries: int = 0


class _Stop(Exception):
    """Why the coordinator stopped the run early (an export written, or a one-line error)."""


class Batcher:
    """Parks the calls of a run and answers them from batches (see the module docstring).

    `api_for(client)` gives the :class:`BatchAPI` of a client (None: no Batch API is used, as
    with --batch-import alone, whose other calls go online); `export` is the --batch-export
    path; `imported` the answers of --batch-import; `retry` is ``online`` or ``batch``;
    `poll` the first wait between status checks (doubling up to `poll_cap`); `say(text)`
    prints a progress line."""

    def __init__(self, state: BatchState, *, api: bool = True, limits: BatchLimits = BatchLimits(),
                 retry: str = "online", poll: float = 5.0, poll_cap: float = 60.0, export: str | None = None,
                 imported: dict[str, dict] | None = None, say: Callable[[str], None] | None = None,
                 warn: Callable[[str], None] | None = None):
        self.state = state
        self.use_api = api
        self.limits = limits
        self.retry = retry
        self.poll = poll
        self.poll_cap = max(poll, poll_cap)
        self.export = export
        self.imported = dict(imported or {})
        self.say = say or (lambda text: None)  # the progress line
        self.warn = warn or self.say  # failed, expired and cancelled batches (said even with -q)
        self.pending: dict[str, _Wait] = {}
        self.unclaimed: dict[str, dict] = {}  # lines read before their request was asked (a resumed run)
        self.asks = self.resolved = self.busy = 0
        self.stats = {"batched": 0, "batches": 0, "answered": 0, "retried_online": 0, "retried_in_batch": 0,
                      "failed_lines": 0, "unreadable_lines": 0, "imported": 0, "exported": 0, "cancelled": 0}
        self.stop: _Stop | None = None
        self.main_task: asyncio.Task | None = None
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._apis: dict[int, BatchAPI] = {}
        self._fatal: dict[int, JudgeCallError] = {}
        self._api_failures = 0
        self._t0 = time.monotonic()
        self._shown = ("", 0.0)

    # ---------------------------------------------------------------- the client's side

    def attach(self, task: asyncio.Task) -> None:
        """The run's main task (cancelled when the run must stop early: an export written, an error)."""
        self.main_task = task

    async def ask(self, client: LLMClient, request: ChatRequest, key: str):
        """The ChatResult for a request the cache did not have (raises as the online path would)."""
        if (fatal := self._fatal.get(id(client))) is not None:
            client.usage.failures += 1
            raise fatal
        loop = asyncio.get_running_loop()
        body, mode = client.request_body(request), client.mode_for(request)  # as the online path would send it
        w = _Wait(client, request, key, body, mode, loop.create_future())
        self.asks += 1
        if (line := self.imported.pop(key, None)) is not None:
            self.stats["imported"] += 1
        else:
            line = self.unclaimed.pop(key, None)
        if line is not None:
            self._resolve(w, line, None)
            return await w.future
        if not self.use_api and self.export is None:
            self._online(w)
            return await w.future
        self._start()
        part = self.state.ledger.get(key)
        if part is not None and part.stage != "exported" and part.base_url == scrubbed_url(
                client.config.effective_base_url) and part.model == client.config.model and not (
                part.stage == "read" and part.status == "cancelled"):
            part.waiters[key] = w  # sent before this process started: it joins that batch
        else:
            self.pending[key] = w
        self._wake.set()
        return await w.future

    @property
    def offline(self) -> bool:
        """No server is called (--batch-export): structured output is not negotiated, the configured mode is used."""
        return self.export is not None and not self.use_api

    def negotiating(self, delta: int) -> None:
        """An online call (structured-output negotiation) starts (+1) or ends (-1): the run is not waiting yet."""
        self.busy += delta

    # ---------------------------------------------------------------- answers

    def _resolve(self, w: _Wait, line: dict, part: Part | None) -> None:
        if w.future.done():
            return
        completion, failure = _line_answer(line)
        if failure is not None:
            self._failed(w, failure, part)
            return
        self.resolved += 1
        self.stats["answered"] += 1
        try:
            result = w.client.finish(w.request, completion, 0.0, 1, w.mode, w.key)  # the online parse and store
        except AnswerFormatError as exc:
            w.future.set_exception(exc)
        else:
            w.future.set_result(result)

    def _failed(self, w: _Wait, failure: CallFailure, part: Part | None) -> None:
        self.stats["failed_lines"] += 1
        where = f" (batch {part.batch_id})" if part is not None and part.batch_id else ""
        if part is not None and part.status == "cancelled":
            self.stats["cancelled"] += 1
            self._fail(w, CallFailure("batch", f"not answered: batch {part.batch_id} was cancelled; run again to "
                                            "submit it anew", retryable=False))
            return
        if self.retry == "online":
            self.stats["retried_online"] += 1
            self._online(w)
        elif w.retries < BATCH_RETRIES and (self.use_api or self.export is not None):
            w.retries += 1
            self.stats["retried_in_batch"] += 1
            self.pending[w.key] = w
        else:
            self._fail(w, CallFailure(failure.kind, failure.detail + where, status=failure.status,
                                   server_message=failure.server_message, retryable=False))

    def _fail(self, w: _Wait, failure: CallFailure) -> None:
        self.resolved += 1
        if not w.future.done():
            client = w.client
            client.usage.failures += 1
            w.future.set_exception(failure.error(client.scrub(
                f"judge call to model {client.config.model!r} at {client.origin} failed in a batch: {failure.detail}"),
                w.retries + 1, client.config.model))

    def _online(self, w: _Wait) -> None:
        """Answer `w` through the online path (its retries, its negotiation), in a task of its own."""
        async def go():
            self.busy += 1
            try:
                resp, latency, attempts, mode = await w.client.send(w.request)
                result = w.client.finish(w.request, resp, latency, attempts, mode, w.key)
            except (JudgeCallError, AnswerFormatError) as exc:
                if not w.future.done():
                    w.future.set_exception(exc)
            except BaseException as exc:  # cancelled with the run
                if not w.future.done():
                    w.future.cancel()
                if not isinstance(exc, Exception):
                    raise
            else:
                if not w.future.done():
                    w.future.set_result(result)
            finally:
                self.resolved += 1
                self.busy -= 1

        asyncio.ensure_future(go())

    # ---------------------------------------------------------------- the coordinator

    def _start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.ensure_future(self._run())

    async def _quiet(self) -> None:
        """Return once the run has made no new request and resolved none for QUIET_TICKS loop turns."""
        last, still = None, 0
        while still < QUIET_TICKS:
            await asyncio.sleep(0 if not self.busy else 0.01)
            now = (self.asks, self.resolved, self.busy)
            if now == last and not self.busy:
                still += 1
            else:
                last, still = now, 0

    async def _run(self) -> None:
        delay = self.poll
        try:
            while True:
                await self._quiet()
                if self.pending and self.export is None and any(
                        [await self._step(part) for part in self.state.parts if part.waiters and part.stage in
                         ("done", "read")]):
                    continue  # answers already there are read first: their next requests join the same batch
                if self.pending:
                    if self.export is not None:
                        self._export()
                        return
                    await self._submit()
                    delay = self.poll
                if not (active := [p for p in self.state.parts if p.waiters]):
                    if self.pending:
                        continue
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                moved = any([await self._step(part) for part in active])  # every part is stepped
                self._progress()
                if not moved:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.poll_cap)
                else:
                    delay = self.poll
        except _Stop as stop:
            self._halt(stop)
        except BatchError as exc:
            self._halt(_Stop(str(exc)))

    def _halt(self, stop: _Stop) -> None:
        self.stop = stop
        if self.main_task is not None:
            self.main_task.cancel()

    async def _submit(self) -> None:
        by_client: dict[int, list] = {}
        for w in self.pending.values():
            by_client.setdefault(id(w.client), []).append(w)
        self.pending = {}
        for waits in by_client.values():
            client = waits[0].client
            if id(client) not in self._apis:
                try:
                    await self._api(client)
                except JudgeCallError as exc:
                    self._give_up(client, exc, waits)
                    continue
            lines = [(w, batch_line(w.key, w.body)) for w in waits]
            for w, line in lines:
                if len(line) > self.limits.max_bytes:
                    self._fail(w, CallFailure("batch", f"the request is {len(line)} bytes, more than a batch file "
                                                    f"may hold (--batch-max-bytes {self.limits.max_bytes})",
                                           retryable=False))
            lines = [(w, line) for w, line in lines if len(line) <= self.limits.max_bytes]
            for chunk in self.limits.split(lines):
                self.state.add(client, chunk).waiters = {w.key: w for w, _ in chunk}
                self.stats["batches"] += 1
                self.stats["batched"] += len(chunk)

    async def _api(self, client: LLMClient) -> BatchAPI:
        """The client's Batch API, probed on first use; a server without one stops the run."""
        if (api := self._apis.get(id(client))) is None:
            api = self._apis[id(client)] = BatchAPI(client)
            try:
                await api.probe()
            except BatchError as exc:
                raise _Stop(str(exc)) from None
        return api

    def _give_up(self, client: LLMClient, exc: JudgeCallError, waits: Iterable[_Wait]) -> None:
        """A Batch API failure that retrying will not mend: the client's calls fail with it from now on."""
        self._fatal[id(client)] = exc
        for w in waits:
            self.resolved += 1
            if not w.future.done():
                client.usage.failures += 1
                w.future.set_exception(exc)

    async def _step(self, part: Part) -> bool:
        """Move one part on (upload, create, poll, read); True when something changed."""
        client = next(iter(part.waiters.values())).client
        api = await self._api(client)
        import openai

        try:
            if part.stage == "built":
                if (file_id := await api.find_file(part.filename)) is None:  # uploaded just before a kill?
                    file_id = await api.upload(self.state.input_path(part), part.filename)
                self.state.update(part, stage="uploaded", file_id=file_id)
                return True
            if part.stage == "uploaded":
                if (batch := await api.find_batch(part.file_id)) is None:  # created just before a kill?
                    batch = await api.create(part.file_id, part)
                self._record(part, batch, stage="created")
                with contextlib.suppress(OSError):
                    os.unlink(self.state.input_path(part))  # the server has it; the ids stay
                return True
            if part.stage == "created":
                batch = await api.retrieve(part.batch_id)
                self._record(part, batch, stage="done" if batch.status in TERMINAL else "created")
                self._api_failures = 0
                return part.stage == "done"
            if part.stage in ("done", "read"):
                await self._read(api, part)
                return True
        except openai.APIError as exc:
            error = api.error({"built": "upload a batch file", "uploaded": "create a batch",
                               "created": f"check batch {part.batch_id}"}.get(part.stage, "download a batch's "
                                                                                          "results"), exc)
            self._api_failures += 1
            if error.retryable and self._api_failures < 10:
                self.warn(f"gsr run: {error}; trying again")
                return False
            for other in self.state.parts:
                if other.waiters and next(iter(other.waiters.values())).client is client:
                    self._give_up(client, error, other.waiters.values())
                    other.waiters = {}
            self._give_up(client, error, [w for w in self.pending.values() if w.client is client])
            self.pending = {k: w for k, w in self.pending.items() if w.client is not client}
            return True
        return False

    def _record(self, part: Part, batch, stage: str) -> None:
        counts = batch.request_counts.model_dump() if batch.request_counts is not None else {}
        errors = [f"{e.code}: {e.message}" + (f" (line {e.line})" if e.line else "")
                  for e in ((batch.errors.data or []) if batch.errors is not None else [])]
        if batch.status == "failed" and stage == "done" and part.status != "failed":
            self.warn(f"gsr run: batch {batch.id} failed: {'; '.join(errors) or 'no reason given'}")
        elif batch.status in ("expired", "cancelled") and part.status != batch.status:
            self.warn(f"gsr run: batch {batch.id} {batch.status} with {counts.get('completed', 0)} of "
                     f"{counts.get('total', part.requests)} requests answered")
        self.state.update(part, stage=stage, batch_id=batch.id, status=batch.status, counts=counts,
                          output_file_id=batch.output_file_id, error_file_id=batch.error_file_id, errors=errors)

    async def _read(self, api: BatchAPI, part: Part) -> None:
        """Download the part's output and error files, answering each waiting request as its line is read."""
        for file_id in (part.output_file_id, part.error_file_id):
            if not file_id:
                continue
            async for raw in api.lines(file_id):
                if not raw.strip():
                    continue
                try:
                    line = json.loads(raw)
                    cid = line["custom_id"]
                except (ValueError, KeyError, TypeError):
                    self.stats["unreadable_lines"] += 1
                    continue
                if (w := part.waiters.pop(cid, None)) is not None:
                    self._resolve(w, line, part)
                elif cid in self.state.ledger and self.state.ledger[cid] is part:
                    self.unclaimed[cid] = line
        missing = list(part.waiters.values())
        part.waiters = {}
        for w in missing:  # no line at all: the batch failed, expired or was cancelled before it
            self._failed(w, CallFailure("batch", f"batch {part.batch_id} ended {part.status} without an answer for "
                                              "this request" + (f" ({'; '.join(part.errors)})" if part.errors
                                                                else ""), retryable=True), part)
        if part.stage != "read":
            self.state.update(part, stage="read")

    def _export(self) -> None:
        """Write the parked requests to the --batch-export file and stop the run."""
        waits = list(self.pending.values())
        by_model = {(w.client.config.model, w.client.config.effective_base_url) for w in waits}
        lines = [(w, batch_line(w.key, w.body)) for w in waits]
        write_atomic(self.export, b"".join(line for _, line in lines))
        self.state.add(waits[0].client, lines, stage="exported")
        self.stats["exported"] = len(lines)
        raise _Stop(f"exported:{len(lines)}:{', '.join(sorted(m for m, _ in by_model))}")

    def _progress(self) -> None:
        if not (active := [p for p in self.state.parts if p.batch_id and p.stage in ("created", "done")]):
            return
        shown = ", ".join(f"{p.batch_id} {p.status} {p.counts.get('completed', 0)}/{p.counts.get('total', 0) or p.requests}"
                          + (f" ({p.counts['failed']} failed)" if p.counts.get("failed") else "") for p in active[:4])
        more = f" and {len(active) - 4} more" if len(active) > 4 else ""
        total = sum(p.requests for p in self.state.parts if p.stage != "exported")
        done = sum(p.counts.get("completed", 0) + p.counts.get("failed", 0) for p in self.state.parts
                   if p.stage != "exported")
        text = f"batch: {shown}{more}; {done}/{total} requests done"
        now = time.monotonic()
        if text != self._shown[0] or now - self._shown[1] > 60:
            self._shown = (text, now)
            self.say(f"{text}; {now - self._t0:.0f} s")

    def summary(self) -> dict:
        """What went through batches (for the run summary and the trace's run record)."""
        return dict(self.stats)

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for api in self._apis.values():
            await api.aclose()
        self._apis = {}
