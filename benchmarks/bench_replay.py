"""`gsr replay` at scale (issue 22): peak memory flat in the trace's length, CPU against a hand-written replay.

Targets: verifying a 1,000,000-item trace keeps its peak resident memory flat in N
(the trace is verified a chunk of items at a time: gsrlang/execution/verify.py). The
issue's CPU target, at most 1.3x the numpy replay (the columnar evaluator's replay of
the tree before the kernels), is measured by bench_before.py; the anchor here is a
floor, what decoding every line and the arithmetic cost by themselves.

(1) runs `gsr run` of bench_runtime.py's 10-node program over 2,000 generated items
    with --trace, and repeats its item records with fresh item ids up to the largest
    N (default 1,000,000) into a trace under the system's temporary folder (never the
    repository); the smaller sizes are prefixes of it (each with the run summary line
    cut off, which a cut trace lacks: both paths read that alike);
(2) per size and repeat, interleaved so that both meet the same load: the anchor, a
    numpy replay of the same arithmetic written by hand (decode every line with
    orjson, take the four criteria's recorded outputs, weighted mean, cap, floor,
    readout, and compare every score with the recorded one), then
    `gsr replay TRACE --program P -q --bootstrap 0` (verify mode: every node, the
    readout and every result compared exactly). Each runs in a subprocess; CPU time is
    the child's user + system time and peak RSS its `ru_maxrss`
    (`resource.getrusage(RUSAGE_CHILDREN)`, from a fresh parent per command).

(3) per size, once: the what-if replay `gsr replay TRACE --program OTHER -q --bootstrap 0 --out FILE`
    (OTHER: the program with its weights moved, re-composed from the recorded judgments a chunk of
    items at a time), its CPU time and peak RSS, which must stay flat in N as well.

Prints min / median / max over the repeats; asserts nothing.
Run: python benchmarks/bench_replay.py [LARGEST_N] [REPEATS]    (default 1,000,000 and 3)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runtime import PROGRAM, gsr_cmd, measure, repeat_trace, whole_numbers, write_items  # noqa: E402

SEED_ITEMS = 2000

# The anchor: the same arithmetic over the trace's recorded criterion outputs (node positions 0-3: quality, polite,
# long, cites), every score compared with the recorded one; exit 1 if any differs.
ANCHOR = r"""
import sys
import numpy as np
import orjson
quality, polite, long_, cites, scores = [], [], [], [], []
with open(sys.argv[1], "rb") as f:
    for line in f:
        rec = orjson.loads(line)
        out = rec.get("out")
        if out is None:
            continue
        quality.append(out[0][0]); polite.append(out[1][0] is True); long_.append(out[2][0]); cites.append(out[3][0])
        scores.append(rec["result"]["score"])
q = (np.asarray(quality, float) - 1.0) / 2.0
body = np.clip(0.8 * np.clip(q, 0.0, 1.0) + 0.2 * np.asarray(cites, float), 0.0, 1.0)
capped = np.where(np.asarray(long_), np.minimum(body, 0.6), body)
final = np.where(np.asarray(polite), np.maximum(capped, 0.2), capped)
score = np.floor(np.round(1.0 + final * 4.0, 9) + 0.5)
sys.exit(0 if np.array_equal(score, np.asarray(scores, float)) else 1)
"""


def make_trace(folder: Path, n: int) -> tuple[Path, Path]:
    """(program, trace of n items) in `folder`, recorded by `gsr run` and repeated with fresh ids."""
    from gsrlang.lang.check.driver import analyze
    from gsrlang.files.dataset import ColumnMap
    from gsrlang.judges.registry import default_registry
    from gsrlang.execution.planner import RunConfig
    from gsrlang.execution.runs import run_file

    program_path = folder / "bench.gsr"
    program_path.write_text(PROGRAM)
    program = analyze(PROGRAM, path=str(program_path)).program
    items, seed = folder / "items.jsonl", folder / "seed.jsonl"
    write_items(items, SEED_ITEMS)
    run_file(program, items, ColumnMap(label_field="label"), default_registry(), "pointwise",
             RunConfig(trace=str(seed)))
    trace = folder / f"trace-{n}.jsonl"
    repeat_trace(seed, trace, n, summary=True)
    return program_path, trace


def prefix(trace: Path, n: int, headers: int = 1) -> Path:
    """The trace's header and first n item records (no run summary)."""
    out = trace.with_name(f"trace-{n}.jsonl")
    with trace.open("rb") as src, out.open("wb") as dst:
        for k, line in enumerate(src):
            if k >= headers + n:
                break
            dst.write(line)
    return out


def spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    return "/".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def main(argv: list[str]) -> int:
    largest, repeats = whole_numbers(argv, "bench_replay.py [LARGEST_N] [REPEATS]", (1_000_000, 3))
    sizes = sorted({n for n in (100_000, 300_000, largest) if n <= largest})
    with tempfile.TemporaryDirectory(prefix="gsr-bench-replay-") as tmp:
        tmp = Path(tmp)
        program, full = make_trace(tmp, largest)
        anchor = tmp / "anchor.py"
        anchor.write_text(ANCHOR)
        print(f"trace of {largest:,} items: {full.stat().st_size / 1e6:,.0f} MB (in {tmp}, removed afterwards)")
        rss_at, whatif_at = {}, {}
        other = tmp / "other.gsr"
        other.write_text(PROGRAM.replace("weights: [0.8, 0.2]", "weights: [0.7, 0.3]"))
        for n in sizes:
            trace = full if n == largest else prefix(full, n)
            cmd = gsr_cmd() + ["replay", str(trace), "--program", str(program), "-q", "--bootstrap", "0"]
            ratios, cpus, anchors, rss = [], [], [], []
            for _ in range(repeats):
                _, acpu, arss, arc, atext = measure([sys.executable, str(anchor), str(trace)])
                if arc != 0:
                    print(f"the anchor's scores differ from the recorded ones (exit {arc}): {atext}")
                    return 1
                _, cpu, peak, rc, text = measure(cmd)
                if rc != 0:
                    print(f"gsr replay exit {rc}: {text}")
                    return 1
                ratios.append(cpu / acpu)
                cpus.append(cpu)
                anchors.append(acpu)
                rss.append(peak)
            rss_at[n] = statistics.median(rss)
            print(f"gsr replay {n:>9,} items: CPU {spread(cpus)} s, peak RSS {spread(rss, '{:.0f}')} MB; hand-written "
                  f"replay (the anchor) CPU {spread(anchors)} s; ratio {spread(ratios)}x (min/median/max of {repeats}; "
                  "the issue's 1.3x is against the tree before the kernels: bench_before.py)")
            _, cpu, peak, rc, text = measure(gsr_cmd() + ["replay", str(trace), "--program", str(other), "-q",
                                                          "--bootstrap", "0", "--out", str(tmp / "whatif.jsonl")])
            if rc != 0:
                print(f"gsr replay (what-if) exit {rc}: {text}")
                return 1
            whatif_at[n] = peak
            print(f"  what-if under other weights, --out: CPU {cpu:.2f} s, peak RSS {peak:.0f} MB (one run)")
        if len(sizes) > 1:
            lo, hi = sizes[0], sizes[-1]
            print(f"peak RSS at {hi:,} / at {lo:,} items: {rss_at[hi] / rss_at[lo]:.2f}x for {hi / lo:.0f}x the items "
                  f"(flat: about 1x); what-if {whatif_at[hi] / whatif_at[lo]:.2f}x")
        print(f"(machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; CPU times, not wall times, "
              "since the machine is shared)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
