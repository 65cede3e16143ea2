"""Helpers for the reward server's tests and benchmark: a `gsr serve` on 127.0.0.1 (a free port) in this
process, over real HTTP, and the programs and the fake model they score with."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import threading
import time

import pytest

# A model program: two model-judged Scores; the fake model reads `q=N` in the response as the answer.
MODEL_PROGRAM = '''\
rubric served "A served reward"
task pointwise { scale = 1..5  quantize = none }
task pairwise { epsilon = 0.0  on_tie = tie }
criterion clarity: Score[1..5] { ask "How clear is the response?"  level 1 "Confusing"  level 5 "Very clear" }
criterion correct: Score[1..5] { ask "How correct is the response?"  level 1 "Wrong"  level 5 "Right" }
node both = weighted_mean(items: [scale(clarity), scale(correct)], weights: [1, 1])
sink both
'''

# A model-free program: rules only.
RULES_PROGRAM = '''\
rubric rules "Surface rules"
task pointwise { scale = 1..5 }
task pairwise { epsilon = 0.0  on_tie = tie }
criterion long: Bool = rule.word_count(above: 3)
criterion polite: Bool = rule.contains_any(words: ["please", "thanks"])
node total = weighted_mean(items: [normalize(long), normalize(polite)], weights: [2, 1])
sink total
'''


@pytest.fixture(autouse=True)
def no_model_settings(monkeypatch):
    """No GSR_ or OPENAI_ variable of the machine's reaches the server under test (imported by the tests:
    autouse there)."""
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)


def model_answer(body: dict) -> dict:
    """The fake model: `q=N` in the response is the clarity (correctness one more, at most 5); 3 without."""
    text = body["messages"][-1]["content"]
    response = text.split("BEGIN RESPONSE", 1)[-1]
    qs = re.findall(r"q=(\d)", response)
    q = int(qs[0]) if qs else 3
    if "How correct" in text:
        q = min(5, q + 1)
    return {"reason": "read from the response", "answer": q}


class Served:
    """A running server: `url`, `engine`, and `post`/`get` returning (status, JSON)."""

    def __init__(self, url: str, engine, server):
        self.url = url
        self.engine = engine
        self.server = server
        self.host, self.port = url.split("//")[1].split(":")
        self.port = int(self.port)

    def request(self, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None,
                timeout: float = 120):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            response = conn.getresponse()
            text = response.read()
            kind = response.getheader("content-type", "")
            return response.status, (json.loads(text) if "json" in kind else text.decode())
        finally:
            conn.close()

    def post(self, path: str, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)


@contextlib.contextmanager
def serving(program_path, *args: str):
    """`gsr serve PROGRAM --port 0 ARGS...` in a thread of this process; stopped (and its trace closed) after."""
    from gsrlang.cli import build_parser
    from gsrlang.commands import serve

    parsed = build_parser("serve").parse_args(["serve", str(program_path), "--port", "0", *args])
    built = serve.build(parsed)
    assert built is not None, "the program does not check"
    server, sock, engine = built
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    host, port = sock.getsockname()[:2]
    try:
        yield Served(f"http://{host}:{port}", engine, server)
    finally:
        server.should_exit = True
        thread.join(60)
        engine.judges.close()
        sock.close()


def save(path, text: str) -> None:
    """Write `path` the way an editor saves it: a new file renamed over the old one, so that `--watch` (which
    polls size and mtime) never reads it half written. (`write_text` truncates first: a poll in between sees an
    empty program, and refuses it, counting a refusal that the test did not make.)"""
    tmp = path.with_name(path.name + ".saving")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def wait_for(condition, what: str, seconds: float = 30.0, step: float = 0.05):
    """Poll `condition()` until it is true (a failure naming `what` after `seconds`)."""
    end = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)
