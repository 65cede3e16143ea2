"""Checker speed: whole-process `gsr check` of an example, and parse+check per node at 100 / 1,000 / 10,000 nodes.

Targets (issue 2): `gsr check` of a typical example within 0.3 s as a whole process;
1,000 nodes within 0.5 s; 10,000 nodes within 12x the time of 1,000 (linear growth).
Issue 22: a cold `gsr check` within 1.8x a bare `import lark` process (the anchor), as CPU time
(user + system of the child, `resource.getrusage(RUSAGE_CHILDREN)`), the two interleaved run by run
so that both meet the same load; min / median / max of the per-run ratios.
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

from gsrlang.lang.check.driver import analyze  # noqa: E402


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


def cpu_of(cmd: list[str], env: dict) -> float:
    """User + system CPU seconds of one run of `cmd`, from a fresh parent (its RUSAGE_CHILDREN is that run's)."""
    code = ("import resource, subprocess, sys\n"
            "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
            "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(ru.ru_utime + ru.ru_stime)\n")
    return float(subprocess.run([sys.executable, "-c", code, *cmd], check=True, capture_output=True, text=True,
                                env=env).stdout)


def check_vs_lark(example: Path, runs: int = 10) -> tuple[list[float], list[float], list[float]]:
    """(gsr check CPU s, `python -c "import lark"` CPU s, their ratios), interleaved run by run."""
    gsr = Path(sys.executable).parent / "gsr"
    cmd = [str(gsr), "check", "-q", str(example)] if gsr.exists() else [sys.executable, "-m", "gsrlang.cli",
                                                                          "check", "-q", str(example)]
    lark = [sys.executable, "-c", "import lark"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cpu_of(cmd, env), cpu_of(lark, env)  # warm the OS cache and the bytecode
    checks, anchors = [], []
    for _ in range(runs):
        anchors.append(cpu_of(lark, env))
        checks.append(cpu_of(cmd, env))
    return checks, anchors, [c / a for c, a in zip(checks, anchors)]


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
    checks, anchors, ratios = check_vs_lark(example)
    med = statistics.median
    print(f"  CPU: gsr check {med(checks) * 1000:.0f} ms, bare `import lark` {med(anchors) * 1000:.0f} ms (medians of "
          f"{len(ratios)}); ratio min/median/max {min(ratios):.2f}/{med(ratios):.2f}/{max(ratios):.2f}x "
          f"(target <= 1.8x; 2.3-2.6x before issue 22)")
    print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    figures["check_over_lark_cpu"] = med(ratios)
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
