"""Runtime speed and memory: `gsr run` over 100,000 generated items, then replay of its 100,000-record trace.

Targets (issue 3): replay of 100,000 recorded items of a 10-node program within 10 s;
`gsr run` over 100,000 items with rule judges keeps its resident memory under 300 MB.

(1) writes 100,000 items (JSONL) and runs `gsr run` on them in a subprocess with
    --out and --trace (rule and human judges, a 10-node program); peak RSS is the
    child's `ru_maxrss` from `resource.getrusage(RUSAGE_CHILDREN)`; items/s is
    items over the child's wall time; CPU time is user + system;
(2) replays the trace in a second subprocess (`gsr replay`, verify mode: every node,
    readout and result compared exactly) and reports its wall time and peak RSS.

Prints the figures; it asserts nothing. Run: python benchmarks/bench_runtime.py [N]
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = r"""
# 10 nodes: 4 criteria (2 read from the data, 2 rules) and 6 operators.
rubric bench "A benchmark rubric"
task pointwise { scale = 1..5  quantize = round }
criterion quality: Score[1..3] = human(field: "ann.quality")
criterion polite: Bool? = human(field: "ann.polite")
criterion long: Bool = rule.word_count(above: 40)
criterion cites: Bool = rule.regex(pattern: "\\[[0-9]+\\]")
node body = weighted_mean(items: [scale(quality), normalize(cites)], weights: [0.8, 0.2])
node capped = cap(base: body, trigger: long, at: 0.6)
node final = floor(base: capped, trigger: default(polite, value: false), at: 0.2)
sink final
"""

WORDS = ("the of and to in is was for on that with as by at from this be are or an it which not have has had "
         "one all were when there can more also their been into its other than some what about only first new "
         "time these two may after such most used many over where would like").split()


def write_items(path: Path, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for k in range(n):
            words = rng.choices(WORDS, k=rng.randint(5, 60))
            if rng.random() < 0.3:
                words.append(f"[{rng.randint(1, 9)}]")
            polite = rng.choice([True, False, None])
            row = {"id": f"b{k}", "input": "a question", "response": " ".join(words),
                   "ann": {"quality": round(rng.uniform(1, 3), 4), "polite": polite},
                   "label": rng.randint(1, 5)}
            f.write(json.dumps(row) + "\n")


def gsr_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "gsr"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "gsrlang.cli"]


def measure(cmd: list[str]) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s, peak RSS MB, exit code, output tail) of `cmd`.

    It runs from a fresh Python parent, so that that parent's RUSAGE_CHILDREN (ru_maxrss,
    KiB on Linux; user + system time) describes this one command alone. CPU time is the
    fairer figure on a shared machine.
    """
    code = ("import json, resource, subprocess, sys, time\n"
            "t0 = time.perf_counter()\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "wall = time.perf_counter() - t0\n"
            "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(json.dumps([wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, p.returncode,"
            " (p.stdout + p.stderr)[-2000:]]))\n")
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    with tempfile.TemporaryDirectory(prefix="gsr-bench-") as tmp:
        tmp = Path(tmp)
        program = tmp / "bench.gsr"
        program.write_text(PROGRAM)
        data = tmp / "items.jsonl"
        t0 = time.perf_counter()
        write_items(data, n)
        print(f"generated {n:,} items ({data.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")

        results, trace = tmp / "results.jsonl", tmp / "trace.jsonl"
        cmd = gsr_cmd() + ["run", str(program), "--data", str(data), "--label-field", "label", "--out",
                           str(results), "--trace", str(trace), "--no-progress", "--bootstrap", "0", "-q"]
        wall, cpu, rss, rc, text = measure(cmd)
        print(f"gsr run    {n:,} items: {wall:6.1f} s wall, {cpu:6.1f} s CPU, {n / wall:7,.0f} items/s, "
              f"peak RSS {rss:5.1f} MB (target < 300 MB), exit {rc}; trace {trace.stat().st_size / 1e6:.0f} MB")
        if rc not in (0, 1):
            print(text)

        cmd = gsr_cmd() + ["replay", str(trace), "--program", str(program), "--bootstrap", "0", "-q"]
        wall, cpu, rss, rc, text = measure(cmd)
        print(f"gsr replay {n:,} items: {wall:6.1f} s wall, {cpu:6.1f} s CPU, {n / wall:7,.0f} items/s, "
              f"peak RSS {rss:5.1f} MB (target < 10 s), exit {rc} "
              f"({'reproduced exactly' if rc == 0 else 'DIFFERENCES'})")
        print(f"(machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}: wall times grow with load)")
        if rc != 0:
            print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
