"""Checker speed: whole-process `gsr check` of an example, and parse+check per node at 100 / 1,000 / 10,000 nodes.

Targets (issue 2): `gsr check` of a typical example within 0.3 s as a whole process;
1,000 nodes within 0.5 s; 10,000 nodes within 12x the time of 1,000 (linear growth).
Run: python benchmarks/bench_check.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from generate import generate_program  # noqa: E402

from gsrlang.check.driver import analyze  # noqa: E402


def time_process(example: Path, runs: int = 7) -> list[float]:
    gsr = Path(sys.executable).parent / "gsr"
    cmd = [str(gsr), "check", "-q", str(example)] if gsr.exists() else [sys.executable, "-m", "gsrlang.cli",
                                                                          "check", "-q", str(example)]
    # As installed: Python writes bytecode (a wheel install compiles it), so PYTHONDONTWRITEBYTECODE, which some
    # sandboxes set, is dropped; the first run warms the OS cache, the bytecode and Lark's grammar cache.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return times


def time_analyze(n: int, runs: int = 3) -> tuple[float, int]:
    text = generate_program(n)
    result = analyze(text)
    assert result.ok, result.diagnostics[:3]
    nodes = len(result.program.nodes)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        analyze(text)
        times.append(time.perf_counter() - t0)
    return min(times), nodes


def main() -> dict:
    example = ROOT / "examples" / "helpsteer2" / "helpfulness.gsr"
    proc = time_process(example)
    print("gsr check (whole process) of examples/helpsteer2/helpfulness.gsr")
    print(f"  median {statistics.median(proc) * 1000:.0f} ms, min {min(proc) * 1000:.0f} ms over {len(proc)} runs "
          f"(target < 300 ms)")
    figures = {"check_process_median_s": statistics.median(proc)}
    print("parse + check of generated programs (best of 3)")
    per = {}
    for n in (100, 1_000, 10_000):
        seconds, nodes = time_analyze(n)
        per[n] = seconds
        print(f"  {nodes:>6} nodes: {seconds * 1000:8.1f} ms  ({seconds / nodes * 1e6:6.1f} us/node)")
        figures[f"analyze_{n}_s"] = seconds
    ratio = per[10_000] / per[1_000]
    print(f"  10,000 / 1,000 time ratio: {ratio:.1f}x (target <= 12x); 1,000 nodes: "
          f"{per[1_000] * 1000:.0f} ms (target < 500 ms)")
    figures["ratio_10k_1k"] = ratio
    return figures


if __name__ == "__main__":
    main()
