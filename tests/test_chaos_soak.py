"""Chaos soak: `gsr run` against a server that injects 429s, 500s, truncated bodies, connection resets and slow
answers, SIGKILLed at random points and resumed, again and again (issue 11).

At the end of every round: every item is in the results exactly once, the results equal an undisturbed run's
byte for byte (the end line included), and no judgment already stored in the cache was bought again. The
figures (rounds, kills, items lost, faults, judgments bought twice) are printed. The soak lasts about
GSR_SOAK_SECONDS (default 30) seconds: raise it for a longer soak, e.g. GSR_SOAK_SECONDS=1800.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gsrlang.cli import main

from fakeserver import FakeOpenAI, Fault
from test_llm_run import KEY, _request_key, _run_cmd, _stored_keys, fake_model, write_jsonl

pytestmark = pytest.mark.slow  # the soak is in the slow tier (make test-all, CI)

N_ITEMS = 30
FAULT_RATE = 0.2
TRUNCATED = b'{"id": "chatcmpl-cut", "object": "chat.completion", "choices": [{"index": 0, "mess'


class Chaos:
    """Per request, with probability FAULT_RATE, one of: 429 (short Retry-After), 500, reset, truncated body."""

    def __init__(self, seed: int):
        self.rnd = random.Random(seed)
        self.lock = threading.Lock()
        self.injected = 0

    def __call__(self, body: dict) -> Fault | None:
        with self.lock:
            if self.rnd.random() >= FAULT_RATE:
                return None
            self.injected += 1
            return self.rnd.choice([Fault.status(429, retry_after=0.05), Fault.status(500), Fault.reset(),
                                    Fault.malformed(TRUNCATED)])

    def latency(self, body: dict) -> float:
        with self.lock:
            return 0.4 if self.rnd.random() < 0.05 else self.rnd.uniform(0.0, 0.03)  # some slow answers


def item_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] \
        if path.exists() else []


def test_chaos_soak_kill_and_resume(tmp_path, monkeypatch, capsys):
    budget = float(os.environ.get("GSR_SOAK_SECONDS") or 30)
    seed = int(os.environ.get("GSR_SOAK_SEED") or 20261130)
    rnd = random.Random(seed)
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"i{i:03d}", "input": f"Question {i}?", "response": ("GOOD " if i % 3 else "BAD ") + f"answer {i}"}
            for i in range(N_ITEMS)]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    chaos = Chaos(seed)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSR_", "OPENAI_"))}
    rounds = kills = lost = bought_twice = repaid = 0
    with FakeOpenAI(responder=fake_model, latency=chaos.latency) as server:
        env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        ref = tmp_path / "ref.jsonl"  # the undisturbed run: no faults, no kills
        assert main(_run_cmd(data, ref, tmp_path / "ref.sqlite")[3:]) == 0
        capsys.readouterr()
        server.chaos = chaos
        deadline = time.monotonic() + budget
        while rounds == 0 or time.monotonic() < deadline:
            rounds += 1
            out, cache = tmp_path / f"r{rounds}.jsonl", tmp_path / f"r{rounds}.sqlite"
            stored_before: dict[str, set[str]] = {}
            for attempt in range(1, 100):
                tag = f"round{rounds}-{attempt}"
                stored_before[tag] = _stored_keys(cache) if cache.exists() else set()
                sent = len(server.requests)
                proc = subprocess.Popen(_run_cmd(data, out, cache), env={**env, "OPENAI_ORG_ID": tag},
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                if attempt <= 3 and time.monotonic() < deadline:  # kill it, at a random point once it is judging
                    while len(server.requests) == sent and proc.poll() is None:
                        time.sleep(0.005)
                    time.sleep(rnd.uniform(0.0, 1.5))
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                        kills += 1
                _, err = proc.communicate(timeout=300)
                if proc.returncode != -signal.SIGKILL:
                    assert proc.returncode == 0, err.decode()
                    break
            results = item_lines(out)
            ids = [r["id"] for r in results if "kind" not in r]
            lost += len({r["id"] for r in rows} - set(ids))
            assert sorted(ids) == sorted(r["id"] for r in rows)  # every item exactly once
            assert results[-1]["kind"] == "run_summary" and results[-1]["complete"] is True
            assert out.read_bytes() == ref.read_bytes()  # the same results as the undisturbed run
            answered: dict[str, int] = {}
            for r in list(server.requests):
                tag = r.headers.get("openai-organization", "")
                complete = {"model", "messages", "response_format"} <= r.body.keys()
                if not tag.startswith(f"round{rounds}-") or r.fault is not None or not complete:
                    continue  # another round's, a fault, or the body of a request a kill cut short (a 400)
                key = _request_key(r.body, server.base_url)
                bought_twice += key in stored_before[tag]  # stored when this process started
                answered[key] = answered.get(key, 0) + 1
            repaid += sum(n - 1 for n in answered.values())  # answered, then lost to a kill before it was stored
        assert not server.errors, server.errors[0]
    with capsys.disabled():
        print(f"\nchaos soak: {rounds} rounds of {N_ITEMS} items, {kills} SIGKILLs, {lost} items lost, "
              f"{chaos.injected} faults injected (rate {FAULT_RATE}), {bought_twice} stored judgments bought twice, "
              f"{repaid} answers paid again after a kill lost them before storing; seed {seed}")
    assert kills >= 2 and lost == 0 and bought_twice == 0
