"""The fake OpenAI server itself: a call that ends early (a deadline, a cancelled request) must not print into
whichever test captures stderr when the fake's answer finally fails to go out."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
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


def test_wait_for_requests_returns_once_they_arrived_or_the_fake_closed():
    server = FakeOpenAI().start()
    try:
        url = urllib.parse.urlsplit(server.base_url)
        conn = http.client.HTTPConnection(url.hostname, url.port)
        conn.request("POST", "/v1/chat/completions", BODY, {"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
        conn.close()
        assert server.wait_for_requests(1)
        result: list[bool] = []
        waiter = threading.Thread(target=lambda: result.append(server.wait_for_requests(2)))
        waiter.start()
    finally:
        server.close()
    waiter.join()
    assert result == [False]  # the second never came: close() woke the wait


def test_wait_for_requests_gives_up_when_its_patience_runs_out():
    """A request that never comes fails the waiting test instead of hanging it (the server stays open)."""
    with FakeOpenAI() as server:
        assert not server.wait_for_requests(1, patience_s=0.05)
