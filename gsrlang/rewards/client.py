"""A small HTTP client of `gsr serve` (the standard library only: nothing more in a trainer's process).

One keep-alive connection per thread (trainers call reward functions from worker threads), JSON in and out,
the token from an environment variable, retries on a refused connection or a 502/503 (a server that is
restarting), never on an answer about the request itself (400, 401, 413) or a deadline that passed (504).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse

__all__ = ["RewardClient", "ServerError"]


class ServerError(RuntimeError):
    """The server refused the request, or could not be reached. `status` (None when unreachable), `field`
    (the request field a 400 names), `body` (the server's JSON answer)."""

    def __init__(self, message: str, status: int | None = None, field: str | None = None, body: dict | None = None):
        super().__init__(message)
        self.status = status
        self.field = field
        self.body = body or {}


def _default(value):
    """JSON for the values trainers put in their columns (numpy scalars and arrays, tensors, ...)."""
    for attr in ("tolist", "item"):
        if callable(fn := getattr(value, attr, None)):
            with contextlib.suppress(Exception):  # fall back to the text
                return fn()
    return str(value)


class _Connection(http.client.HTTPConnection):
    """Without Nagle's algorithm: http.client writes a request's headers and body separately, and the
    body would wait for the server's delayed acknowledgement of the headers (~40 ms a request)."""

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _TLSConnection(_Connection, http.client.HTTPSConnection):
    """The same over TLS: `_Connection.connect` sets the option once HTTPSConnection has wrapped the socket."""


class RewardClient:
    """Posts to a `gsr serve` at `url` (e.g. http://127.0.0.1:8080).

    `token`: the token itself, or `token_env`: the environment variable holding it. `timeout`: seconds for
    one request (longer than any deadline you set). `retries`: attempts after the first when the server
    cannot be reached (a second apart)."""

    def __init__(self, url: str, *, token: str | None = None, token_env: str | None = None,
                 timeout: float = 600.0, retries: int = 3):
        parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the reward server's URL must be http://HOST:PORT, got {url!r}")
        self.url = url
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._base = parts.path.rstrip("/")
        if token is None and token_env is not None:
            if not (token := os.environ.get(token_env)):
                raise ValueError(f"token_env {token_env!r}: that environment variable is not set")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token.strip()}"
        self.timeout = timeout
        self.retries = retries
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        if (conn := getattr(self._local, "conn", None)) is None:
            cls = _TLSConnection if self._scheme == "https" else _Connection
            conn = self._local.conn = cls(self._host, self._port, timeout=self.timeout)
        return conn

    def _drop(self) -> None:
        if (conn := getattr(self._local, "conn", None)) is not None:
            conn.close()
        self._local.conn = None

    def post(self, path: str, body: dict) -> dict:
        """POST `body` (JSON) to `path`; the answer's JSON, or ServerError."""
        data = json.dumps(body, default=_default).encode("utf-8")
        attempt = 0
        while True:
            try:
                status, answer = self._send("POST", path, data)
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self._drop()
                if attempt >= self.retries:
                    raise ServerError(f"cannot reach the reward server at {self.url}: {exc}") from None
            else:
                if status == 200:
                    return answer
                if status not in (502, 503) or attempt >= self.retries:
                    error = answer.get("error") if isinstance(answer, dict) else None
                    error = error if isinstance(error, dict) else {}
                    raise ServerError(f"the reward server answered {status} to {path}: "
                                      f"{error.get('message') or answer}", status, error.get("field"), answer)
            attempt += 1
            time.sleep(1.0)

    def get(self, path: str) -> dict:
        status, answer = self._send("GET", path, None)
        if status != 200:
            raise ServerError(f"the reward server answered {status} to {path}", status, None, answer)
        return answer

    def _send(self, method: str, path: str, data: bytes | None) -> tuple[int, dict]:
        for fresh in (False, True):  # a kept-alive connection the server closed meanwhile: once more, anew
            conn = self._connection()
            try:
                conn.request(method, self._base + path, body=data, headers=self._headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop()
                if fresh:
                    raise
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = {"error": {"message": raw[:200].decode("utf-8", "replace")}}
        if response.getheader("connection", "").lower() == "close":
            self._drop()
        return response.status, answer

    async def apost(self, path: str, body: dict) -> dict:
        """`post`, awaitable (in a worker thread, so the caller's event loop keeps running)."""
        return await asyncio.to_thread(self.post, path, body)

    def close(self) -> None:
        self._drop()
