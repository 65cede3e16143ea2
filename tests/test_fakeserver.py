"""The fake OpenAI server itself: a call that ends early (a deadline, a cancelled request) must not print into
whichever test captures stderr when the fake's answer finally fails to go out."""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.parse

import pytest
from fakeserver import FakeOpenAI

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _post_and_hang_up(base_url: str) -> None:
    """Send a chat completion request and reset the connection before the answer comes."""
    url = urllib.parse.urlsplit(base_url)
    sock = socket.create_connection((url.hostname, url.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer k\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("close_first", [False, True], ids=["client-gone", "fake-closed"])
def test_an_answer_nobody_reads_any_more_prints_nothing(capfd, close_first):
    server = FakeOpenAI(latency=0.3).start()
    try:
        for _ in range(4):
            _post_and_hang_up(server.base_url)
        if close_first:
            server.close()
        time.sleep(0.8)  # the handlers wake from the latency and write into reset or shut connections
    finally:
        server.close()
    time.sleep(0.2)
    assert "Traceback" not in capfd.readouterr().err
