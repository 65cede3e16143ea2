"""The Python API's per-call overhead over the judge call itself.

    python benchmarks/bench_api.py            # 300 calls per measure, 3 repeats
    python benchmarks/bench_api.py --quick

Against the fake OpenAI-compatible server (its own process, no latency), one program
with one model-judged criterion:

1. **anchor**: the bare `openai` SDK sending the very request the judge sends (captured
   once), one call at a time on one `AsyncOpenAI` client: the judge call itself;
2. **`program.score(...)`**: the same call through the API (item building, the judges'
   loop hop, prompt building, answer parsing, composition, readout, the result line and
   the trace record), no cache;
3. **no judge call**: `program.score(...)` of a program whose criteria are human
   annotations (the API's own work alone).

Per-call times are medians over the calls of one repeat; each figure is given as
min / median / max over the repeats, and (2) as a ratio to (1) measured in the same run.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

QUICK = "--quick" in sys.argv
CALLS = 60 if QUICK else 300
REPEATS = 3
PROGRAM = 'rubric one "one criterion"\ntask pointwise { scale = 1..5 }\n' \
          'criterion good: Bool { ask "Does the response answer the question?" }\nsink normalize(good)\n'
SERVER = """
import sys
sys.path.insert(0, {tests!r})
from fakeserver import FakeOpenAI
server = FakeOpenAI(latency=0.0).start()
print(server.base_url, flush=True)
sys.stdin.read()
server.close()
"""


def capture_request(program) -> dict:
    """The chat request the judge sends for one item (from an in-process fake server)."""
    import gsrlang
    from fakeserver import FakeOpenAI

    with FakeOpenAI() as server, gsrlang.Judges(model="m", base_url=server.base_url, api_key="k") as judges:
        program.score(input="What is 2 + 2?", response="4", judges=judges)
        body = dict(server.requests[-1])
    return body


def bare_sdk(base_url: str, body: dict) -> list[float]:
    import openai

    async def go():
        client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
        times = []
        kwargs = {k: v for k, v in body.items() if k in ("model", "messages", "response_format", "temperature",
                                                         "max_tokens", "seed")}
        await client.chat.completions.create(**kwargs)  # warm the connection
        for i in range(CALLS):  # a new response text each time, as the API's calls get
            kwargs["messages"] = [dict(m) for m in body["messages"]]
            kwargs["messages"][-1]["content"] += f" {i} {time.perf_counter_ns()}"
            t = time.perf_counter()
            await client.chat.completions.create(**kwargs)
            times.append(time.perf_counter() - t)
        await client.close()
        return times

    return asyncio.run(go())


def api_calls(program, judges, **call) -> list[float]:
    """Per-call times; a model-judged call gets a new response each time (no memoised answer)."""
    vary = "response" in call
    program.score(judges=judges, **call)  # warm
    times = []
    for i in range(CALLS):
        if vary:
            call["response"] = f"4 (answer {i}, {time.perf_counter_ns()})"
        t = time.perf_counter()
        program.score(judges=judges, **call)
        times.append(time.perf_counter() - t)
    return times


def spread(values: list[float], unit: float = 1e3, suffix: str = "ms") -> str:
    return f"{min(values) * unit:.3f} / {statistics.median(values) * unit:.3f} / {max(values) * unit:.3f} {suffix}"


def main() -> int:
    import gsrlang

    program = gsrlang.loads(PROGRAM, "one.gsr")
    human = gsrlang.load(ROOT / "examples" / "topical_chat" / "overall.gsr")
    import json

    row = json.loads((ROOT / "examples" / "topical_chat" / "data" / "dev.jsonl").read_text().splitlines()[0])
    body = capture_request(program)
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(tests=str(ROOT / "tests"))], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    base_url = proc.stdout.readline().strip()
    anchor, through, ratio, alone = [], [], [], []
    try:
        with gsrlang.Judges(model="m", base_url=base_url, api_key="k") as judges:
            for _ in range(REPEATS):
                a = statistics.median(bare_sdk(base_url, body))
                b = statistics.median(api_calls(program, judges, input="What is 2 + 2?", response="4"))
                c = statistics.median(api_calls(human, judges, record=row))
                anchor.append(a)
                through.append(b)
                ratio.append(b / a)
                alone.append(c)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    print(f"per call, median of {CALLS} calls; min / median / max over {REPEATS} repeats")
    print(f"  anchor: bare openai SDK, the judge's request      {spread(anchor)}")
    print(f"  program.score(), one model-judged criterion        {spread(through)}")
    print(f"  overhead over the judge call                       "
          f"{spread([b - a for a, b in zip(anchor, through)])}")
    print(f"  ratio to the anchor                                "
          f"{min(ratio):.2f} / {statistics.median(ratio):.2f} / {max(ratio):.2f} x")
    print(f"  program.score() with no judge call (human fields)  {spread(alone, 1e6, 'us')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
