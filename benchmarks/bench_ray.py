"""`gsr run --engine ray` next to the local engine, in the same run: model-call throughput and Ray's per-item cost.

    python benchmarks/bench_ray.py                      # 2,000 items (about 3 minutes on 2 cores)
    GSR_BENCH_RAY_ITEMS=100000 python benchmarks/bench_ray.py   # the full size (hours at 200 ms on 2 cores)

1. **Throughput**: N items (default 2,000, GSR_BENCH_RAY_ITEMS) x 4 model criteria
   against the fake OpenAI-compatible server (its own process) at 200 ms latency, with
   32 calls in flight per process (the local engine) or per actor: the local engine,
   then the Ray engine with 1 and 2 actors, on a local Ray of 2 CPUs started once.
   Calls/s is the fake server's count of requests over the run's wall time (Ray's
   actor start included); the ideal is 32 / 0.2 s = 160 calls/s per process.
2. **Per-item overhead**: a rule-only program (4 rule criteria, no I/O) over M items
   (default 20,000, GSR_BENCH_RAY_RULE_ITEMS) both ways; Ray's fixed cost (starting the
   actors and the cache server, a 10-item run) is measured apart, and the per-item
   overhead is (ray wall - fixed - local wall) / M.

Each configuration runs GSR_BENCH_RAY_REPEATS times (default 1 for the model runs, 3 for
the rule runs) and prints min / median / max. The judgment cache is off (every call is
bought), results go to a JSONL file as in production, and a run's progress bar is off.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_llm import ServerProcess  # noqa: E402  (the fake server in a child process)

ITEMS = int(os.environ.get("GSR_BENCH_RAY_ITEMS", "2000"))
RULE_ITEMS = int(os.environ.get("GSR_BENCH_RAY_RULE_ITEMS", "20000"))
REPEATS = int(os.environ.get("GSR_BENCH_RAY_REPEATS", "1"))
RULE_REPEATS = max(REPEATS, 3)
LATENCY, CONCURRENCY = 0.2, 32

MODEL_PROGRAM = """rubric bench_model "Four model-judged criteria"
task pointwise { scale = 1..5  quantize = round }
criterion correct: Ordinal[1..5] { ask "Is it correct?" level 1 "wrong" level 5 "right" }
criterion clear: Ordinal[1..5] { ask "Is it clear?" level 1 "muddled" level 5 "clear" }
criterion complete: Ordinal[1..5] { ask "Is it complete?" level 1 "partial" level 5 "complete" }
criterion safe: Bool { ask "Is it safe?" }
node body = weighted_mean(items: [normalize(correct), normalize(clear), normalize(complete)], weights: [0.5, 0.25, 0.25])
node final = cap(base: body, trigger: not(safe), at: 0.0)
sink final
"""

RULE_PROGRAM = """rubric bench_rules "Four rule criteria"
task pointwise { scale = 1..5  quantize = round }
criterion long: Bool = rule.word_count(above: 12)
criterion short: Bool = rule.char_count(below: 20)
criterion polite: Bool = rule.contains_any(words: ["please", "thanks"])
criterion digits: Bool = rule.regex(pattern: "[0-9]+")
node score = mean(items: [normalize(long), normalize(polite), normalize(digits)])
node final = cap(base: score, trigger: short, at: 0.2)
sink final
"""


def _data(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"b{i:06d}", "input": f"Question {i}: what is {i} + {i}?",
                                "response": f"It is {2 * i}, thanks for asking about item {i} of the benchmark."})
                    + "\n")
    return path


def _gsr(program: Path, data: Path, out: Path, *extra) -> float:
    from gsrlang.cli import main

    t0 = time.perf_counter()
    code = main(["run", str(program), "--data", str(data), "--out", str(out), "--no-progress", "-q", "--no-cache",
                 *map(str, extra)])
    wall = time.perf_counter() - t0
    if code not in (0, 1):
        raise SystemExit(f"gsr run failed ({code})")
    return wall


def _spread(values: list[float], unit: str, fmt: str = "{:.1f}") -> str:
    return (f"min {fmt.format(min(values))} / median {fmt.format(statistics.median(values))} / "
            f"max {fmt.format(max(values))} {unit}")


def main() -> None:
    import ray

    tmp = Path(tempfile.mkdtemp(prefix="gsr-bench-ray-"))
    (tmp / "model.gsr").write_text(MODEL_PROGRAM, encoding="utf-8")
    (tmp / "rules.gsr").write_text(RULE_PROGRAM, encoding="utf-8")
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    print(f"local Ray with 2 CPUs started in {time.perf_counter() - t0:.1f} s (once; not in the figures below)")
    try:
        _throughput(tmp)
        _overhead(tmp)
    finally:
        ray.shutdown()


def _throughput(tmp: Path) -> None:
    data = _data(tmp / "items.jsonl", ITEMS)
    calls = ITEMS * 4
    ideal = CONCURRENCY / LATENCY
    print(f"\n1. {ITEMS:,} items x 4 model criteria = {calls:,} calls, latency {LATENCY * 1000:.0f} ms, "
          f"{CONCURRENCY} in flight per process (ideal {ideal:.0f} calls/s per process)"
          + ("" if ITEMS == 100_000 else f"; scaled down from 100,000 items (GSR_BENCH_RAY_ITEMS)"))
    configs = [("local engine", ()), ("ray, 1 actor", ("--engine", "ray", "--actors", 1)),
               ("ray, 2 actors", ("--engine", "ray", "--actors", 2))]
    rates: dict[str, list[float]] = {}
    for name, extra in configs:
        for _ in range(REPEATS):
            server = ServerProcess(LATENCY)
            try:
                wall = _gsr(tmp / "model.gsr", data, tmp / "out.jsonl", "--model", "bench", "--base-url",
                            server.base_url, "--api-key", "bench", "--concurrency", CONCURRENCY,
                            "--no-short-circuit", *extra)  # every call made: this measures calls per second
            finally:
                requests, peak = server.close()
            if requests != calls:
                raise SystemExit(f"{name}: the server saw {requests} requests, expected {calls}")
            rates.setdefault(name, []).append(calls / wall)
        print(f"  {name:14s} {_spread(rates[name], 'calls/s')} "
              f"({statistics.median(rates[name]) / statistics.median(rates['local engine']):.2f}x local; "
              f"{statistics.median(rates[name]) / ideal:.0%} of one process's ideal; peak in flight {peak})")


def _overhead(tmp: Path) -> None:
    data = _data(tmp / "rules.jsonl", RULE_ITEMS)
    small = _data(tmp / "small.jsonl", 10)
    print(f"\n2. rule-only program (4 rule criteria), {RULE_ITEMS:,} items, {RULE_REPEATS} repeats")
    local = [_gsr(tmp / "rules.gsr", data, tmp / "o.jsonl") for _ in range(RULE_REPEATS)]
    print(f"  local engine   {_spread(local, 's', '{:.2f}')} ({RULE_ITEMS / statistics.median(local):,.0f} items/s)")
    for actors in (1, 2):
        fixed = [_gsr(tmp / "rules.gsr", small, tmp / "o.jsonl", "--engine", "ray", "--actors", actors)
                 for _ in range(RULE_REPEATS)]
        walls = [_gsr(tmp / "rules.gsr", data, tmp / "o.jsonl", "--engine", "ray", "--actors", actors)
                 for _ in range(RULE_REPEATS)]
        per_item = [(w - statistics.median(fixed) - statistics.median(local)) / RULE_ITEMS * 1e6 for w in walls]
        print(f"  ray, {actors} actor{'s' if actors > 1 else ' '} {_spread(walls, 's', '{:.2f}')} "
              f"({RULE_ITEMS / statistics.median(walls):,.0f} items/s); fixed cost (10 items) "
              f"{_spread(fixed, 's', '{:.2f}')}; per-item overhead {_spread(per_item, 'us', '{:.0f}')}")


if __name__ == "__main__":
    main()
