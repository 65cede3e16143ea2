"""The model-call transport's bounds (issue 24, items 3, 5, 7): an answer's size and a call's whole time.

Every server here is a local fake (tests/fakeserver.py) that misbehaves as the issue found servers do: a body that
never ends, one byte every interval, a 20 MB answer. Each fault bounds itself (seconds, bytes), so a regression fails
the test (the fault's own bound is reported as why the stream stopped) instead of hanging it; no test asserts a wall
time: the figures are bytes (read, sent, traced in memory) and the server's account of who hung up.
"""

from __future__ import annotations

import asyncio
import re
import time
import tracemalloc

import pytest

from gsrlang.judges.llm import ChatRequest, JudgeCallError, JudgeConfig, LLMClient
from gsrlang.judges.llm.config import DEFAULT_MAX_ANSWER_BYTES, ConfigError, resolve_settings

try:
    from fakeserver import FakeOpenAI, Fault, Reply
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI, Fault, Reply

MiB = 1024 * 1024


def request() -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "Is it clear? Answer in JSON."}])


def client(server: FakeOpenAI, **cfg) -> LLMClient:
    deadline_at = cfg.pop("deadline_at", None)
    config = JudgeConfig(model="fake-model", base_url=server.base_url, api_key="sk-test-transport",
                         timeout_s=cfg.pop("timeout_s", 5.0), max_retries=cfg.pop("max_retries", 2), **cfg)
    return LLMClient(config, backoff_base=0.001, backoff_cap=0.01, deadline_at=deadline_at)


async def fails(c: LLMClient) -> JudgeCallError:
    with pytest.raises(JudgeCallError) as info:
        await c.complete(request())
    await c.aclose()
    return info.value


def stream_end(server: FakeOpenAI) -> tuple[int, str]:
    """(bytes sent, why it stopped) of the server's one endless answer, once its handler has noticed the end."""
    for _ in range(200):  # the handler notices a hang-up at its next write: bounded wait, 10 s at most
        if server.streamed:
            return server.streamed[0]
        time.sleep(0.05)
    raise AssertionError("the endless answer did not end")


@pytest.fixture
def server():
    with FakeOpenAI(responder=lambda body: {"answer": "ok"}) as s:
        yield s


# ----------------------------------------------------------------------------------------- item 3: no end


async def test_an_endless_answer_stops_at_the_cap_with_memory_bounded_by_it(server):
    cap = 1 * MiB
    c = client(server, max_answer_bytes=cap, timeout_s=30)
    await c.complete(request())  # the SDK's first-call set-up is not the answer's memory
    server.enqueue(Fault.endless(seconds=30))
    tracemalloc.start()
    try:
        error = await fails(c)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.kind == "too_large" and not error.retryable and error.attempts == 1
    assert len(server.requests) == 2  # not retried: the same server would send the same endless answer
    message = str(error)
    assert "\n" not in message and "--max-answer-bytes 1048576" in message and "not retried" in message
    read = int(re.search(r"stopped reading after (\d+) bytes", message).group(1))
    assert cap < read <= cap + 2 * 65536
    print(f"endless answer, cap {cap}: read {read} bytes, peak traced memory {peak} bytes")
    assert peak < 2 * cap  # what was read is held once (and freed); the body is never joined whole
    sent, why = stream_end(server)
    assert why == "client"  # gsr hung up; the fault's own 30 s bound did not end it
    assert sent < 64 * MiB  # what gsr read plus the sockets' buffers


async def test_the_default_cap(server):
    assert JudgeConfig(model="m").max_answer_bytes == DEFAULT_MAX_ANSWER_BYTES == 4 * MiB
    server.enqueue(Fault.endless(seconds=30))
    error = await fails(client(server, timeout_s=30))
    read = int(re.search(r"stopped reading after (\d+) bytes", str(error)).group(1))
    assert error.kind == "too_large" and 4 * MiB < read <= 4 * MiB + 2 * 65536
    assert stream_end(server)[1] == "client"


async def test_a_declared_20_mb_answer_is_not_read(server):
    server.responder = lambda body: {"reason": "x" * (20 * 1000 * 1000)}
    error = await fails(client(server))
    assert error.kind == "too_large" and "declares" in str(error) and "it was not read" in str(error)
    assert len(server.requests) == 1


async def test_an_answer_within_the_cap_is_read_and_asked_uncompressed(server):
    server.responder = lambda body: {"reason": "x" * 500_000}
    async with client(server, max_answer_bytes=MiB) as c:
        result = await c.complete(request())
    assert len(result.data["reason"]) == 500_000
    assert server.requests[0].headers["accept-encoding"] == "identity"


async def test_a_compressed_answer_is_refused(server):
    server.responder = lambda body: Reply(content={"answer": "ok"}, headers={"Content-Encoding": "gzip"})
    error = await fails(client(server))
    assert error.kind == "malformed" and "Content-Encoding: 'gzip'" in str(error) and error.attempts == 1


# ----------------------------------------------------------------------------------------- item 5: one byte at a time


async def test_a_trickling_answer_is_cut_by_the_timeout_of_the_whole_call(server):
    # one byte every 0.2 s never trips a timeout between reads of 1 s: only a bound on the whole call ends it
    server.enqueue(Fault.trickle(interval=0.2, seconds=30))
    error = await fails(client(server, timeout_s=1.0, max_retries=0))
    assert error.kind == "timeout" and "--timeout bounds the whole request" in str(error)
    sent, why = stream_end(server)
    assert why == "client"
    assert sent < 250 + 15  # the head, then about 1 s / 0.2 s bytes (the trickle's 30 s would send 150)


async def test_a_trickling_answer_is_retried_each_time_within_its_timeout(server):
    server.enqueue(Fault.trickle(interval=0.2, seconds=30), Fault.trickle(interval=0.2, seconds=30))
    error = await fails(client(server, timeout_s=0.6, max_retries=1))
    assert error.kind == "timeout" and error.retryable and error.attempts == 2


async def test_the_runs_deadline_cuts_a_call_in_flight(server):
    server.enqueue(Fault.trickle(interval=0.2, seconds=30))
    c = client(server, timeout_s=60, deadline_at=time.monotonic() + 0.8)
    error = await fails(c)
    assert error.kind == "timeout" and "--deadline" in str(error) and error.attempts == 1 and not error.retryable
    assert stream_end(server)[1] == "client"


async def test_a_judge_with_a_deadline_gives_its_clients_that_deadline(server):
    from gsrlang.judges.llm import JudgeSettings
    from gsrlang.judges.llm.judge import LLMJudge

    judge = LLMJudge(JudgeSettings.build(JudgeConfig(model="m", base_url=server.base_url)), deadline_s=5)
    c = judge.pool.for_role(None)
    assert c.deadline_at is not None and 0 < c.deadline_at - time.monotonic() <= 5
    await judge.aclose()


# ----------------------------------------------------------------------------------------- where the cap is set


def test_max_answer_bytes_from_each_layer(tmp_path):
    (tmp_path / "gsr.toml").write_text('[judge]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
                                       "max_answer_bytes = 65536\n")
    assert resolve_settings({}, env={}, cwd=tmp_path).default.max_answer_bytes == 65536
    env = {"GSR_MAX_ANSWER_BYTES": "131072"}
    assert resolve_settings({}, env=env, cwd=tmp_path).default.max_answer_bytes == 131072
    flags = {"max_answer_bytes": 2048}
    assert resolve_settings(flags, env=env, cwd=tmp_path).default.max_answer_bytes == 2048
    with pytest.raises(ConfigError, match="max_answer_bytes must be a whole number of bytes, at least 1024"):
        resolve_settings({"max_answer_bytes": 10}, env={}, cwd=tmp_path)


def test_the_flag_reaches_the_settings(tmp_path, monkeypatch):
    import argparse

    from gsrlang.commands.config import add_model_arguments, model_settings

    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    args = parser.parse_args(["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--max-answer-bytes", "4096"])
    assert model_settings(args).default.max_answer_bytes == 4096


# ----------------------------------------------------------------------------------------- a whole run


def test_gsr_run_against_an_endless_server_marks_the_items_and_stays_small(tmp_path):
    """The issue's reproduction: `gsr run --timeout 10` against a server whose body never ends (it grew to 9.5 GB
    resident in 300 s and wrote nothing). Now each call stops at the cap, its item is invalid saying why, and the
    process's peak resident memory stays that of an ordinary run."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "p.gsr").write_text('rubric r "r"\ntask pointwise { scale = 1..5  quantize = round }\n'
                                    'criterion polite: Bool { ask "Is the response polite?" }\n'
                                    "sink normalize(polite)\n")
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": f"i{k}", "input": "q", "response": f"r{k}"}) + "\n"
                                              for k in range(3)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSR_", "OPENAI_"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    with FakeOpenAI() as server, open(tmp_path / "err.txt", "wb") as errf:
        server.chaos = lambda body: Fault.endless(seconds=60)
        proc = subprocess.Popen([sys.executable, "-m", "gsrlang.cli", "run", "p.gsr", "--data", "d.jsonl",
                                 "--model", "fake-model", "--base-url", server.base_url, "--timeout", "10",
                                 "--no-cache", "--no-progress", "--out", "r.jsonl"],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=errf)
        usage = None
        for _ in range(1200):  # 120 s at most; os.wait4 gives this child's own peak resident memory
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.1)
        else:
            proc.kill()
            proc.wait()
            raise AssertionError("gsr run did not finish")
        proc.returncode = os.waitstatus_to_exitcode(status)
        stream_end(server)
        ends = list(server.streamed)
    rss_mib = usage.ru_maxrss / 1024
    print(f"gsr run, endless server: peak resident {rss_mib:.0f} MiB, server sent {[s for s, _ in ends]} bytes")
    assert proc.returncode == 1, (tmp_path / "err.txt").read_text()
    results = [r for r in map(json.loads, (tmp_path / "r.jsonl").read_text().splitlines()) if "status" in r]
    assert len(results) == 3 and all(r["status"] == "invalid" for r in results)
    assert all("larger than --max-answer-bytes 4194304" in r["reason"] for r in results)
    assert ends and all(why == "client" for _, why in ends)
    assert rss_mib < 600  # unbounded, loopback fills gigabytes in the 10 s of one --timeout


# ----------------------------------------------------------------------------------------- item 7: what is kept


def test_clip_says_it_cut_and_is_the_same_from_any_longer_text():
    from gsrlang.judges.llm.jsonparse import clip, clip_strings

    assert clip("short", 100) == "short"
    cut = clip("x" * 1000, 100)
    assert len(cut) == 100 and cut.endswith("[cut by gsr to 100 characters]") and cut.startswith("x" * 60)
    assert clip(cut, 100) == cut and clip(clip("x" * 5000, 500), 100) == cut
    assert clip_strings({"a" * 300: ["b" * 300, 3, None]}, 100) == {clip("a" * 300, 100): [clip("b" * 300, 100), 3,
                                                                                           None]}


PROGRAM = '''rubric r "r"
task pointwise { scale = 1..5  quantize = round }
criterion polite: Bool { ask "Is the response polite?" }
sink normalize(polite)
'''


def _big_answer(body: dict) -> dict:
    from fakeserver import schema_example

    answer = schema_example(body["response_format"]["json_schema"]["schema"])
    return {**answer, "reason": "why " * (5 * 1000 * 1000)}  # a 20 MB answer, almost all of it the reason


def _run_big(server, tmp_path, monkeypatch, *extra):
    import json

    from gsrlang.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.gsr").write_text(PROGRAM)
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": f"i{k}", "input": "q", "response": f"r{k}"}) + "\n"
                                              for k in range(2)))
    server.responder = _big_answer
    server.reset()
    code = main(["run", "p.gsr", "--data", "d.jsonl", "--model", "fake-model", "--base-url", server.base_url,
                 "--no-progress", "--out", "r.jsonl", "--trace", "t.jsonl", *extra])
    return code, len(server.requests)


def test_a_20_mb_answer_within_a_raised_cap_is_kept_cut_in_the_cache_and_trace(server, tmp_path, monkeypatch,
                                                                                capsys):
    """Issue 24, item 7: 4 judgments of a 20 MB answer made a 336 MB cache, and a 10 MB reason 21 MB trace lines."""
    code, requests = _run_big(server, tmp_path, monkeypatch, "--max-answer-bytes", str(32 * MiB))
    err = capsys.readouterr().err
    assert code == 0 and requests == 2
    cache = sum(f.stat().st_size for f in (tmp_path / ".gsr-cache").glob("judgments.sqlite*"))
    lines = (tmp_path / "t.jsonl").read_bytes().splitlines()
    print(f"two 20 MB answers: cache {cache} bytes, longest trace line {max(map(len, lines))} bytes")
    assert cache < 2 * MiB  # two answers; each kept as 64 Ki characters in the call's entry and the judgment's
    assert max(map(len, lines)) < 200_000
    judgments = _judgments(tmp_path / "t.jsonl")
    assert len(judgments) == 2
    for j in judgments:
        assert j["status"] == "ok" and len(j["raw"]) == 65536 and j["raw"].endswith("[cut by gsr to 65536 characters]")
        assert len(j["reason"]) == 2000 and j["reason"].endswith("[cut by gsr to 2000 characters]")
    assert "2 model answers were longer than the 65536 characters gsr keeps" in err

    # a rerun is served from the cache: the same verdicts and the same (cut) raw answers and reasons
    code, requests = _run_big(server, tmp_path, monkeypatch, "--max-answer-bytes", str(32 * MiB))
    assert code == 0 and requests == 0
    again = _judgments(tmp_path / "t.jsonl")
    assert [(j["value"], j["raw"], j["reason"]) for j in again] == [(j["value"], j["raw"], j["reason"])
                                                                    for j in judgments]


def _judgments(trace) -> list[dict]:
    from gsrlang.trace.read import read_trace

    return [n["judgments"][0] for _, rec in read_trace(trace) for n in rec["nodes"] if n["id"] == "polite"]


def test_a_20_mb_answer_under_the_default_cap_fails_its_item(server, tmp_path, monkeypatch, capsys):
    import json

    code, requests = _run_big(server, tmp_path, monkeypatch)
    assert code == 1 and requests == 2  # one call per item, none retried
    results = [r for r in map(json.loads, (tmp_path / "r.jsonl").read_text().splitlines()) if "status" in r]
    assert [r["status"] for r in results] == ["invalid", "invalid"]
    assert all("declares" in r["reason"] and "--max-answer-bytes 4194304" in r["reason"] for r in results)


async def test_gsr_probe_is_bounded_too(server):
    """`gsr probe` talks to the server through its own SDK client: an endless answer ends it with one line."""
    from gsrlang.judges.llm.probe import probe

    server.chaos = lambda body: Fault.endless(seconds=30)
    report = await probe(JudgeConfig(model="fake-model", base_url=server.base_url, max_answer_bytes=MiB,
                                     timeout_s=30), overflow=False)
    assert report["reachable"] and "larger than --max-answer-bytes 1048576" in report["error"]
    assert stream_end(server)[1] == "client"
