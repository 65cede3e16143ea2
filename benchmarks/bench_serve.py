"""`gsr serve` against the in-process reward function, on the same work in the same run.

    python benchmarks/bench_serve.py            # 3 repeats
    python benchmarks/bench_serve.py --quick

Two programs:

1. **model-free**: five rule criteria (word counts, phrases, a regex) in a weighted mean;
2. **model**: four model-judged Score criteria in a weighted mean, against the fake OpenAI-compatible
   server (its own process) answering after 200 ms; 64 judge calls in flight on both sides, no cache.

Each is scored as a trainer asks for rewards: batches of completions one after another (64 per batch
model-free, 32 for the model program: 128 judge calls), every completion a new text. The **anchor** is
`gsrlang.reward_function(program, judges)` called in this process; the **server** is `gsr serve` in its own
process, called through `gsrlang.rewards.trl_reward` (the TRL adapter: HTTP, JSON, the server's micro-batch,
the judges' loop). Throughput is rewards per second over the batches of one repeat, the ratio server /
in-process per repeat; latency is each batch request's, p50 and p99 over all repeats; and single-item
requests of the model-free program (one completion per call, as veRL's per-response function asks) give the
per-request latency against one in-process call. Figures are min / median / max over the repeats.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

QUICK = "--quick" in sys.argv
REPEATS = 3
RULES_BATCHES, RULES_BATCH = (8, 64) if QUICK else (30, 64)
MODEL_BATCHES, MODEL_BATCH = (2, 32) if QUICK else (5, 32)
SINGLES = 50 if QUICK else 200
CONCURRENCY = 64
LATENCY = 0.2

RULES = '''\
rubric rules_bench "Surface rules"
task pointwise { scale = 1..5 }
criterion long: Bool = rule.word_count(above: 8)
criterion short: Bool = rule.word_count(below: 40)
criterion polite: Bool = rule.contains_any(words: ["please", "thanks", "glad"])
criterion refuses: Bool = rule.contains_any(words: ["I cannot", "I can't", "as an AI"])
criterion numbered: Bool = rule.regex(pattern: "[0-9]+")
node total = weighted_mean(
  items: [normalize(long), normalize(short), normalize(polite), normalize(refuses), normalize(numbered)],
  weights: [2, 1, 1, -2, 1],
)
sink total
'''

MODEL = '''\
rubric model_bench "Four model-judged criteria"
task pointwise { scale = 1..5  quantize = none }
criterion clear: Score[1..5] { ask "How clear is the response?"  level 1 "Confusing"  level 5 "Very clear" }
criterion correct: Score[1..5] { ask "How correct is the response?"  level 1 "Wrong"  level 5 "Right" }
criterion complete: Score[1..5] { ask "How complete is the response?"  level 1 "Partial"  level 5 "Complete" }
criterion concise: Score[1..5] { ask "How concise is the response?"  level 1 "Rambling"  level 5 "Tight" }
node total = weighted_mean(items: [scale(clear), scale(correct), scale(complete), scale(concise)],
                           weights: [2, 3, 2, 1])
sink total
'''

FAKE = """
import sys
sys.path.insert(0, {tests!r})
from fakeserver import FakeOpenAI
server = FakeOpenAI(latency={latency}).start()
print(server.base_url, flush=True)
sys.stdin.read()
server.close()
"""


def texts(n: int, tag: str) -> list[str]:
    return [f"Thanks for asking {tag}-{i}: the answer is {i * 7 % 97}, and here is why it holds in general."
            for i in range(n)]


def start_fake(latency: float):
    proc = subprocess.Popen([sys.executable, "-c", FAKE.format(tests=str(ROOT / "tests"), latency=latency)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def start_server(program: Path, base_url: str | None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "gsrlang.cli", "serve", str(program), "--port", "0", "--no-cache",
           "--concurrency", str(CONCURRENCY), "--log-level", "warning"]
    if base_url:
        cmd += ["--model", "judge", "--base-url", base_url, "--api-key", "k"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir())
    line = proc.stderr.readline()
    if "serving" not in line:
        proc.kill()
        raise RuntimeError(f"gsr serve did not start: {line}{proc.stderr.read()}")
    return proc, "http://127.0.0.1:" + line.rsplit(":", 1)[1].strip()


def measure(fn, batches: int, size: int, tag: str) -> tuple[float, list[float]]:
    """(rewards per second over `batches` batches of `size` new completions, each batch's seconds)."""
    times = []
    t0 = time.perf_counter()
    for b in range(batches):
        completions = texts(size, f"{tag}{b}")
        t = time.perf_counter()
        rewards = fn(prompts=["Explain the answer."] * size, completions=completions)
        times.append(time.perf_counter() - t)
        assert len(rewards) == size and all(r is not None for r in rewards), rewards[:3]
    return batches * size / (time.perf_counter() - t0), times


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def spread(xs: list[float], fmt: str = "{:.0f}") -> str:
    return " / ".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def bench(name: str, source: str, batches: int, size: int, latency: float | None) -> dict:
    import gsrlang
    from gsrlang.rewards import trl_reward

    folder = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    program = folder / f"{name}.gsr"
    program.write_text(source, encoding="utf-8")
    fake = None
    base_url = None
    if latency is not None:
        fake, base_url = start_fake(latency)
    server, url = start_server(program, base_url)
    out = {"inproc": [], "served": [], "ratio": [], "inproc_lat": [], "served_lat": []}
    try:
        judges = gsrlang.Judges(model="judge" if base_url else None, base_url=base_url, api_key="k",
                                concurrency=CONCURRENCY, cache=None)
        local = gsrlang.reward_function(str(program), judges)
        remote = trl_reward(url)
        measure(local, 1, size, "warm")  # imports, connections
        measure(remote, 1, size, "warm")
        for r in range(REPEATS):
            (a, at), (b, bt) = (measure(local, batches, size, f"l{r}-"), measure(remote, batches, size, f"s{r}-")) \
                if r % 2 == 0 else reversed((measure(remote, batches, size, f"s{r}-"),
                                             measure(local, batches, size, f"l{r}-")))
            out["inproc"].append(a)
            out["served"].append(b)
            out["ratio"].append(b / a)
            out["inproc_lat"] += at
            out["served_lat"] += bt
        if latency is None:  # one completion per call
            singles_local, singles_remote = [], []
            for i in range(SINGLES):
                for fn, sink in ((local, singles_local), (remote, singles_remote)):
                    t = time.perf_counter()
                    fn(prompts=["Explain."], completions=[f"single {i} thanks {time.perf_counter_ns()}"])
                    sink.append(time.perf_counter() - t)
            out["singles"] = (singles_local, singles_remote)
        judges.close()
    finally:
        server.terminate()
        server.wait(30)
        if fake is not None:
            fake.stdin.close()
            fake.wait(30)
    return out


def report(title: str, out: dict, size: int) -> None:
    print(f"\n{title}")
    print(f"  in-process reward_function : {spread(out['inproc'])} rewards/s")
    print(f"  gsr serve (TRL adapter)    : {spread(out['served'])} rewards/s")
    print(f"  server / in-process        : {spread(out['ratio'], '{:.2f}')}x  (goal >= 0.9x)")
    for key, label in (("inproc_lat", "in-process"), ("served_lat", "gsr serve ")):
        xs = out[key]
        print(f"  {label} batch of {size}: p50 {pct(xs, 0.5) * 1000:.1f} ms, p99 {pct(xs, 0.99) * 1000:.1f} ms "
              f"({len(xs)} batches)")
    if "singles" in out:
        a, b = out["singles"]
        print(f"  one completion per call    : in-process p50 {pct(a, 0.5) * 1000:.2f} ms, p99 {pct(a, 0.99) * 1000:.2f}"
              f" ms; gsr serve p50 {pct(b, 0.5) * 1000:.2f} ms, p99 {pct(b, 0.99) * 1000:.2f} ms ({len(a)} calls)")


def main() -> int:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"gsr serve vs in-process rewards; {REPEATS} repeats; load average {load:.1f}")
    rules = bench("rules", RULES, RULES_BATCHES, RULES_BATCH, None)
    report(f"model-free program (5 rules), {RULES_BATCHES} batches of {RULES_BATCH} per repeat", rules, RULES_BATCH)
    model = bench("model", MODEL, MODEL_BATCHES, MODEL_BATCH, LATENCY)
    report(f"4-criterion model program, fake model at {LATENCY * 1000:.0f} ms, {CONCURRENCY} calls in flight, "
           f"{MODEL_BATCHES} batches of {MODEL_BATCH} per repeat", model, MODEL_BATCH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
