"""`gsr lsp` meets a hostile or broken client over raw JSON-RPC framing (issue 24 items 18 and 20): a lone
surrogate in a document, a request whose params do not fit its type, a Content-Length far past any real
message, and bidirectional control characters (Trojan Source) in a document."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import pytest

SERVER = [sys.executable, "-m", "gsrlang.cli", "lsp", "--debounce-ms", "0"]
DOC = ('rubric r "x"\ntask pointwise { scale = 1..5 }\n'
       'criterion c: Ordinal[1..5] { ask "Is it correct?" }\n'
       "sink c\n")  # GSR503: an Ordinal sink, not a Score


class Raw:
    """A `gsr lsp` process spoken to byte by byte."""

    def __init__(self):
        self.proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                if line in (b"\r\n", b"\n"):
                    break
            self.messages.put(json.loads(out.read(length)))

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def wait_for(self, match, timeout: float = 30.0) -> dict:
        end = time.monotonic() + timeout
        while True:
            message = self.messages.get(timeout=max(0.01, end - time.monotonic()))
            if match(message):
                return message

    def start(self) -> None:
        self.send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None,
                                                                "capabilities": {}}})
        self.wait_for(lambda m: m.get("id") == 1)
        self.send({"method": "initialized", "params": {}})

    def open(self, uri: str, text: str) -> None:
        self.send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "gsr", "version": 1, "text": text}}})

    def diagnostics(self, uri: str) -> list:
        return self.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                             and m["params"]["uri"] == uri)["params"]["diagnostics"]

    def close(self) -> int:
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        return self.proc.wait(timeout=30)


@pytest.fixture
def server():
    raw = Raw()
    yield raw
    if raw.proc.poll() is None:
        raw.proc.kill()
        raw.proc.wait()


def test_a_lone_surrogate_still_gets_diagnostics_and_symbols(server, tmp_path):
    # item 18: a lone surrogate gave no diagnostics and empty symbols (UnicodeEncodeError in lsp/positions.py)
    server.start()
    uri = (tmp_path / "s.gsr").as_uri()
    # the surrogate sits before the diagnostic's and the symbol's columns on their line
    server.open(uri, DOC.replace('"Is it correct?" }\nsink c', '"Is \ud800 it correct?" } sink c'))
    assert "GSR503" in {d["code"] for d in server.diagnostics(uri)}
    server.send({"id": 2, "method": "textDocument/documentSymbol", "params": {"textDocument": {"uri": uri}}})
    reply = server.wait_for(lambda m: m.get("id") == 2)
    assert "error" not in reply and {s["name"] for s in reply["result"]} >= {"c"}
    assert server.close() == 0


def test_a_request_with_mistyped_params_gets_a_json_rpc_error(server, tmp_path):
    # item 18: a hover whose position is not a Position got no reply at all
    server.start()
    uri = (tmp_path / "h.gsr").as_uri()
    server.open(uri, DOC)
    server.send({"id": 7, "method": "textDocument/hover",
                 "params": {"textDocument": {"uri": uri}, "position": "line 3"}})
    reply = server.wait_for(lambda m: m.get("id") == 7)
    assert reply["error"]["code"] == -32602 and "textDocument/hover" in reply["error"]["message"]
    # and the server goes on answering
    server.send({"id": 8, "method": "textDocument/hover",
                 "params": {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 11}}})
    assert "result" in server.wait_for(lambda m: m.get("id") == 8)
    assert server.close() == 0


def test_a_huge_content_length_does_not_end_the_server(server):
    # item 18: `Content-Length: 99999999999` made the server exit; the body is now read past in blocks
    server.start()
    server.send_bytes(b"Content-Length: 99999999999\r\n\r\n")
    server.send_bytes(b"x" * (3 << 20))
    time.sleep(1.0)
    assert server.proc.poll() is None  # alive, reading past what the client claimed
    assert server.close() == 0  # the client hung up mid-message: a clean end


def test_bidi_controls_are_warned_about_in_the_editor(server, tmp_path):
    # item 20: U+202E, U+2066 and U+2069 in comments and strings passed check and the LSP with 0 warnings
    server.start()
    uri = (tmp_path / "b.gsr").as_uri()
    server.open(uri, DOC.replace("sink c", "sink normalize(c)").replace("Is it", "Is \u2066it\u2069")
                + "# safe \u202e\n")
    found = [d for d in server.diagnostics(uri) if d["code"] == "GSR705"]
    assert len(found) == 2 and all(d["severity"] == 2 for d in found)  # 2: Warning
    assert {d["range"]["start"]["line"] for d in found} == {2, 4}
    assert server.close() == 0
