"""LLM judges against the fake OpenAI-compatible server: throughput, memory, shared prompt prefixes.

    python benchmarks/bench_llm.py            # everything (about a minute)
    python benchmarks/bench_llm.py --quick    # smaller runs

1. **Throughput**: 2,000 judge calls (400 items x 5 criteria of the HelpSteer2 example,
   through the real executor) with 200 ms latency per call and concurrency 32; the
   ideal is 32 / 0.2 s = 160 calls/s (target: at least 85% of it).
2. **Memory**: peak resident memory of a `gsr run` process (results, trace and the
   SQLite judgment cache written as usual) over 10,000 items (target: under 300 MB),
   measured for that child alone with os.wait4.
3. **Shared prefixes**: for each example program with model-judged criteria, the
   share of prompt tokens that are a prefix shared by every criterion's prompt for the
   same item and candidate (what a prefix-caching server computes once), and the share
   it can reuse (all but the first prompt's copy). Tokens are counted as words and
   punctuation marks.

The fake server runs in its own process, so it does not compete with the judge for
the GIL.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

QUICK = "--quick" in sys.argv
HELPSTEER = ROOT / "examples" / "helpsteer2" / "helpfulness.gsr"

SERVER_CODE = """
import sys, time
sys.path.insert(0, {tests!r})
from fakeserver import FakeOpenAI
server = FakeOpenAI(latency={latency!r}).start()
print(server.base_url, flush=True)
sys.stdin.read()
print(len(server.requests), server.max_in_flight, flush=True)
server.close()
"""


class ServerProcess:
    """The fake server in a child process (answers with an instance of the requested schema)."""

    def __init__(self, latency: float):
        code = SERVER_CODE.format(tests=str(ROOT / "tests"), latency=latency)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.base_url = self.proc.stdout.readline().strip()

    def close(self) -> tuple[int, int]:
        out, _ = self.proc.communicate("", timeout=30)
        n, peak = out.split()
        return int(n), int(peak)


def program(path: Path):
    from gsrlang.lang.check.driver import analyze_file

    analysis = analyze_file(path)
    assert analysis.program is not None, path
    return analysis.program


def sample_text(seed: int, words: int) -> str:
    import random

    rng = random.Random(seed)
    vocab = ("the a of to and in is that for it as with was on be by this are or from at an which not have "
             "answer model question water light energy people time result because example first two data").split()
    return " ".join(rng.choice(vocab) for _ in range(words)).capitalize() + "."


# ------------------------------------------------------------------------------------------ 1. throughput


async def _throughput(base_url: str, items: int, concurrency: int) -> tuple[float, dict]:
    from gsrlang.files.dataset import Candidate, Item
    from gsrlang.judges.llm.config import JudgeConfig, JudgeSettings
    from gsrlang.judges.llm.judge import LLMJudge
    from gsrlang.judges.registry import default_registry
    from gsrlang.execution.executor import run_items
    from gsrlang.execution.limit import CallLimit

    prog = program(HELPSTEER)
    settings = JudgeSettings(default=JudgeConfig(model="bench", base_url=base_url, concurrency=concurrency,
                                                 timeout_s=30))
    judge = LLMJudge(settings)
    registry = default_registry(judge)
    stream = (Item(str(i), i + 1, sample_text(i, 60), (Candidate("A", sample_text(10_000 + i, 150)),), None, None, {})
              for i in range(items))
    t0 = time.perf_counter()
    n = 0
    async for run in run_items(prog, stream, registry, "pointwise", CallLimit(concurrency)):
        n += run.status == "ok"
    elapsed = time.perf_counter() - t0
    usage = judge.usage()
    await registry.aclose()
    assert n == items, f"{items - n} items not ok"
    return elapsed, usage


def bench_throughput() -> None:
    latency, concurrency = 0.2, 32
    items = 80 if QUICK else 400
    server = ServerProcess(latency)
    try:
        elapsed, usage = asyncio.run(_throughput(server.base_url, items, concurrency))
    finally:
        received, peak = server.close()
    calls = usage["calls"]
    ideal = concurrency / latency
    rate = calls / elapsed
    print(f"throughput: {calls} calls in {elapsed:.2f} s = {rate:.1f} calls/s; ideal {ideal:.0f} calls/s "
          f"(latency {latency * 1000:.0f} ms, concurrency {concurrency}): {100 * rate / ideal:.1f}% of ideal "
          f"[target >= 85%] ; server saw {received} requests, at most {peak} at once")


# ------------------------------------------------------------------------------------------ 2. memory

MEMORY_PROGRAM = """
rubric mem "memory benchmark"
task pointwise { scale = 1..5 }
criterion quality: Ordinal[1..5] {
  ask "How good is the response?"
  level 1 "Bad"
  level 5 "Excellent"
}
node s = normalize(quality)
sink s
"""


def bench_memory() -> None:
    items = 2_000 if QUICK else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        prog = tmp_path / "mem.gsr"
        prog.write_text(MEMORY_PROGRAM, encoding="utf-8")
        data = tmp_path / "items.jsonl"
        with data.open("w", encoding="utf-8") as f:
            for i in range(items):
                f.write(json.dumps({"id": f"i{i}", "input": sample_text(i, 60),
                                    "response": sample_text(50_000 + i, 200)}) + "\n")
        server = ServerProcess(0.0)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GSR_", "OPENAI_"))}
        env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-bench")
        cmd = [sys.executable, "-m", "gsrlang.cli", "run", str(prog), "--data", str(data), "--model", "bench",
               "--out", str(tmp_path / "r.jsonl"), "--trace", str(tmp_path / "t.jsonl"),
               "--cache", str(tmp_path / "cache.sqlite"), "--concurrency", "32", "--no-progress", "-q"]
        t0 = time.perf_counter()
        try:
            child = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            _, status, rusage = os.wait4(child.pid, 0)
            out = child.stdout.read().decode()
            err = child.stderr.read().decode()
        finally:
            received, _ = server.close()
        elapsed = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            print(f"memory: gsr run failed ({code}): {err[-500:]}")
            return
        lines = sum(1 for _ in (tmp_path / "r.jsonl").open())
        peak_mb = rusage.ru_maxrss / 1024  # KiB on Linux
        print(f"memory: gsr run over {items} items ({received} calls, {elapsed:.1f} s): peak RSS {peak_mb:.0f} MB "
              f"[target < 300 MB]; {lines} result lines; {out.strip().splitlines()[0] if out.strip() else ''}")


# ------------------------------------------------------------------------------------------ 3. shared prefixes

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _lcp(seqs: list[list[str]]) -> int:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs[1:]):
            return i
    return n


async def _prompts_for(prog, base_url: str, pairwise: bool) -> dict[str, list[list[str]]]:
    """The first-ask prompt of every model call for one item, grouped by the candidate it shows."""
    from gsrlang.files.dataset import Candidate, Item
    from gsrlang.judges.llm.config import JudgeConfig, JudgeSettings
    from gsrlang.judges.llm.judge import LLMJudge

    cands = (Candidate("A", sample_text(7, 220)),) + ((Candidate("B", sample_text(8, 200)),) if pairwise else ())
    item = Item("1", 1, sample_text(5, 80), cands, None, None, {})
    roles = {}
    for n in prog.criteria:
        spec = n.criterion
        for p in (spec.ensemble.judges if spec.ensemble else (spec.procedure,)):
            if p.args.get("role"):
                roles[p.args["role"]] = {"model": "bench"}
    settings = JudgeSettings.build(JudgeConfig(model="bench", base_url=base_url), roles)
    sent: list[list[dict]] = []
    judge = LLMJudge(settings)

    original = judge._unit

    async def record(client, role, messages, spec, keys, sample, opts):
        sent.append(messages)
        return await original(client, role, messages, spec, keys, sample, opts)

    judge._unit = record
    groups: dict[str, list[list[str]]] = {}
    for n in prog.criteria:
        if n.criterion.procedure.kind != "llm":
            continue
        if pairwise and n.criterion.procedure.args.get("joint"):
            start = len(sent)
            await judge.judge_joint(n, item)
            for messages in sent[start:]:
                groups.setdefault("joint", []).append(tokens("\n".join(m["content"] for m in messages)))
            continue
        for c in item.candidates:
            start = len(sent)
            await judge.judge(n, item, c)
            for messages in sent[start:]:
                groups.setdefault(c.id, []).append(tokens("\n".join(m["content"] for m in messages)))
    await judge.aclose()
    return groups


def bench_prefixes() -> None:
    server = ServerProcess(0.0)
    rows = []
    try:
        for path in sorted(ROOT.joinpath("examples").rglob("*.gsr")):
            prog = program(path)
            if not any(n.criterion.procedure.kind == "llm" for n in prog.criteria):
                continue
            pairwise = prog.readout.pointwise is None
            groups = asyncio.run(_prompts_for(prog, server.base_url, pairwise))
            total = shared = reusable = calls = 0
            for key, prompts in groups.items():
                if key == "joint":
                    total += sum(map(len, prompts))
                    calls += len(prompts)
                    continue
                k = len(prompts)
                lcp = _lcp(prompts) if k > 1 else 0
                total += sum(map(len, prompts))
                shared += k * lcp
                reusable += (k - 1) * lcp
                calls += k
            rows.append((str(path.relative_to(ROOT)), "pairwise" if pairwise else "pointwise", calls,
                         total / max(calls, 1), shared / max(total, 1), reusable / max(total, 1)))
    finally:
        server.close()
    print("shared prompt prefix across the criteria of one item (per candidate; response ~200 words, "
          "task ~80 words):")
    print(f"  {'program':44} {'mode':9} {'calls':>5} {'tok/call':>8} {'shared':>7} {'reusable':>8}")
    for name, mode, calls, per, sh, re_ in rows:
        print(f"  {name:44} {mode:9} {calls:5d} {per:8.0f} {100 * sh:6.1f}% {100 * re_:7.1f}%")


def main() -> int:
    bench_throughput()
    bench_memory()
    bench_prefixes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
