"""How a model's HTTP answer is read: bounded in size, uncompressed.

Every model call goes through the ``openai`` SDK; this module only configures
the HTTP client the SDK is given (``AsyncOpenAI(http_client=...)``) with two
event hooks of the SDK's HTTP library (``httpx2``, or ``httpx`` for older SDKs;
their public API is the same):

* a request hook asks for an uncompressed answer (``Accept-Encoding:
  identity``), so the bytes counted are the bytes held in memory (a gzip answer
  of 1 MB may inflate to 1 GB);
* a response hook refuses an answer that declares (``Content-Length``) more than
  the limit, or that comes compressed all the same, before reading any of its
  body, and wraps the body's byte stream so that reading stops, and the
  connection is closed, as soon as it passes the limit.

The hooks raise :class:`AnswerRefused`, which the SDK lets through (newer
versions) or wraps as the cause of an ``APIConnectionError`` (older ones);
:func:`refusal_of` finds it in either case. The time bound of the whole call is
the caller's (``asyncio.wait_for`` around the SDK call, see
:mod:`gsrlang.judges.llm.client`): the SDK's own timeout only bounds the wait
between two reads, which a server sending one byte a second never exceeds.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

try:  # the HTTP library of the openai SDK: httpx2 from openai 3, httpx before
    import httpx2 as httpx
except ModuleNotFoundError:  # pragma: no cover - older openai SDKs
    import httpx  # type: ignore[no-redef]

__all__ = ["AnswerRefused", "DEFAULT_MAX_ANSWER_BYTES", "bounded_http_client", "refusal_of"]

from .config import DEFAULT_MAX_ANSWER_BYTES


class AnswerRefused(Exception):
    """The HTTP answer was not read to its end: too large, or compressed. ``kind``: "too_large" or "malformed";
    ``bytes_read``: the body's bytes read before stopping (0 when refused on its headers)."""

    def __init__(self, detail: str, *, kind: str = "too_large", bytes_read: int = 0) -> None:
        super().__init__(detail)
        self.detail = detail
        self.kind = kind
        self.bytes_read = bytes_read


def refusal_of(exc: BaseException) -> AnswerRefused | None:
    """The :class:`AnswerRefused` behind `exc` (itself, or a cause of it), or None."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, AnswerRefused):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class _Capped(httpx.AsyncByteStream):
    """A response body that stops with :class:`AnswerRefused` past `limit` bytes."""

    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise AnswerRefused(f"the answer is larger than --max-answer-bytes {self._limit} (stopped reading "
                                    f"after {read} bytes)", bytes_read=read)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounded_http_client(limit: int, http_client: Any = None) -> Any:
    """`http_client` (default: the SDK's own ``DefaultAsyncHttpxClient``) with the hooks that bound an answer to
    `limit` bytes (see the module docstring). A given client keeps its own hooks; these are added after them."""
    if http_client is None:
        import openai

        http_client = openai.DefaultAsyncHttpxClient()

    async def uncompressed(request: Any) -> None:
        request.headers["Accept-Encoding"] = "identity"

    async def bounded(response: Any) -> None:
        if (declared := response.headers.get("content-length", "").strip()).isdigit() and int(declared) > limit:
            raise AnswerRefused(f"the answer declares {int(declared)} bytes (Content-Length), more than "
                                f"--max-answer-bytes {limit}; it was not read")
        if (encoding := response.headers.get("content-encoding", "").strip().lower()) not in ("", "identity"):
            raise AnswerRefused(f"the server compressed its answer (Content-Encoding: {encoding[:40]!a}) though gsr "
                                "asked for none; its size cannot be bounded before inflating it", kind="malformed")
        response.stream = _Capped(response.stream, limit)

    hooks = http_client.event_hooks
    http_client.event_hooks = {"request": [*hooks.get("request", []), uncompressed],
                               "response": [*hooks.get("response", []), bounded]}
    return http_client
