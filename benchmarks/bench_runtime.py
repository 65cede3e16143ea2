"""Runtime speed and memory: `gsr run` over 100,000 generated items, then replay of its 100,000-record trace.

Targets (issue 3): replay of 100,000 recorded items of a 10-node program within 10 s;
`gsr run` over 100,000 items with rule judges keeps its resident memory under 300 MB.
Issue 22: `gsr run` CPU within 4x the json+numpy pipeline of the same arithmetic (the anchor, measured in
the same run, interleaved), with --trace and without it (the anchor writes result lines and no trace);
replay at 1,000,000 items is benchmarks/bench_replay.py.

(1) writes 100,000 items (JSONL) and runs `gsr run` on them in a subprocess with
    --out and --trace (rule and human judges, a 10-node program: the columnar run
    path, and once item by item with GSR_COLUMNAR_RUN=0); peak RSS is the
    child's `ru_maxrss` from `resource.getrusage(RUSAGE_CHILDREN)`; items/s is
    items over the child's wall time; CPU time is user + system;
(2) replays the trace in a second subprocess (`gsr replay`, verify mode: every node,
    readout and result compared exactly) and reports its wall time and peak RSS.

Prints the figures; it asserts nothing. Run: python benchmarks/bench_runtime.py [N]
"""

from __future__ import annotations

import json
import os
import statistics
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


def repeat_trace(seed: Path, trace: Path, n: int, summary: bool = False) -> None:
    """`trace`: the items of the recorded trace `seed` repeated to n, each with a fresh id, under seed's headers
    (and, with `summary`, its run summary counting n items, all ok)."""
    records = [json.loads(line) for line in seed.read_text().splitlines()]
    headers = [r for r in records if r.get("kind") == "header"]
    summaries = [r for r in records if r.get("kind") == "run_summary"] if summary else []
    records = [r for r in records if "kind" not in r]
    with trace.open("w") as f:
        for h in headers:
            f.write(json.dumps(h, separators=(",", ":")) + "\n")
        for k in range(n):
            r = records[k % len(records)]
            r["item"]["id"] = r["result"]["id"] = f"i{k}"
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
        for s in summaries:
            f.write(json.dumps({**s, "items": n, "ok": n}, separators=(",", ":")) + "\n")


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
    # As installed: Python writes bytecode (a wheel install compiles it), so PYTHONDONTWRITEBYTECODE, which some
    # sandboxes set, is dropped: with it every run recompiles ~240 modules (~0.6 s of CPU).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, check=True, env=env)
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


# The anchor: the same program hand-written with json + numpy (read the items, judge the rules and the human
# fields, weighted mean, cap, floor, readout, write one result line per item), timed like gsr in a subprocess.
PIPELINE = r"""
import json, re, sys
import numpy as np
data, out = sys.argv[1], sys.argv[2]
cites = re.compile(r"\[[0-9]+\]")
quality, polite, long_, cited, ids, labels = [], [], [], [], [], []
with open(data, encoding="utf-8") as f:
    for line in f:
        row = json.loads(line)
        ids.append(row["id"]); labels.append(row.get("label"))
        quality.append(row["ann"]["quality"]); polite.append(row["ann"]["polite"] is True)
        text = row["response"]
        long_.append(len(text.split()) > 40); cited.append(cites.search(text) is not None)
q = (np.asarray(quality, float) - 1.0) / 2.0
body = np.clip((0.8 * q + 0.2 * np.asarray(cited, float)) / 1.0, 0.0, 1.0)
capped = np.where(np.asarray(long_), np.minimum(body, 0.6), body)
final = np.where(np.asarray(polite), np.maximum(capped, 0.2), capped)
raw = 1.0 + final * 4.0
score = np.floor(np.round(raw, 9) + 0.5).astype(int)
with open(out, "w", encoding="utf-8") as f:
    for i, s, r, x, lab in zip(ids, score.tolist(), raw.tolist(), final.tolist(), labels):
        f.write(json.dumps({"id": i, "status": "ok", "score": s, "raw": r, "sink": {"A": x}, "label": lab}) + "\n")
"""


def v1_bytes(trace: Path) -> tuple[int, int, int]:
    """(items, bytes of the version 2 file's item records incl. its headers, bytes the same records take in
    version 1): version 1 is the logical record `read_trace` yields, written as version 1 wrote it."""
    from gsrlang.trace.read import read_trace

    v2 = sum(len(line) + 1 for line in trace.read_bytes().splitlines() if b'"run_summary"' not in line)
    v1 = items = 0
    for _, record in read_trace(trace):
        items += 1
        v1 += len(json.dumps({**record, "trace_version": 1}, ensure_ascii=False, separators=(",", ":"))) + 1
    return items, v2, v1


def whole_numbers(args: list[str], usage: str, defaults: tuple[int, ...]) -> list[int]:
    """`args` as whole numbers above 0, the `defaults` for those not given; or exit with a one-line `usage`
    message (never a traceback)."""
    if len(args) > len(defaults) or not all(a.isdigit() and int(a) > 0 for a in args):
        sys.exit(f"usage: {usage} (whole numbers above 0)")
    return [int(a) for a in args] + list(defaults[len(args):])


def ratio_line(name: str, ratios: list[float], target: str) -> str:
    return (f"{name}: median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f}, "
            f"{len(ratios)} runs) {target}")


def main(argv: list[str]) -> int:
    n, repeats = whole_numbers(argv, "bench_runtime.py [N] [REPEATS]", (100_000, 3))
    with tempfile.TemporaryDirectory(prefix="gsr-bench-") as tmp:
        tmp = Path(tmp)
        program = tmp / "bench.gsr"
        program.write_text(PROGRAM)
        data = tmp / "items.jsonl"
        t0 = time.perf_counter()
        write_items(data, n)
        print(f"generated {n:,} items ({data.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")

        results, trace = tmp / "results.jsonl", tmp / "trace.jsonl"
        pipeline = tmp / "pipeline.py"
        pipeline.write_text(PIPELINE)
        run_cmd = gsr_cmd() + ["run", str(program), "--data", str(data), "--label-field", "label", "--out",
                               str(results), "--trace", str(trace), "--no-progress", "--bootstrap", "0", "-q"]
        # the same run without --trace: the work the anchor does (it writes result lines, no trace)
        bare_cmd = [a for a in run_cmd if a not in ("--trace", str(trace))]
        replay_cmd = gsr_cmd() + ["replay", str(trace), "--program", str(program), "--bootstrap", "0", "-q"]
        anchor_cmd = [sys.executable, str(pipeline), str(data), str(tmp / "anchor.jsonl")]
        run_ratios, bare_ratios, replay_ratios = [], [], []
        for k in range(repeats):  # alternate anchor, run, replay: the machine's load hits all three alike
            _, anchor_cpu, _, arc, atext = measure(anchor_cmd)
            if arc != 0:
                print(atext)
                return 1
            wall, cpu, rss, rc, text = measure(run_cmd)
            if k == 0:
                print(f"gsr run    {n:,} items: {wall:6.1f} s wall, {cpu:6.1f} s CPU, {n / wall:7,.0f} items/s, "
                      f"peak RSS {rss:5.1f} MB (target < 300 MB), exit {rc}; trace "
                      f"{trace.stat().st_size / 1e6:.0f} MB")
            if rc not in (0, 1):
                print(text)
            run_ratios.append(cpu / anchor_cpu)
            _, bare_cpu, _, brc, btext = measure(bare_cmd)
            if brc not in (0, 1):
                print(btext)
            bare_ratios.append(bare_cpu / anchor_cpu)
            if k == 0:  # the same run item by item (GSR_COLUMNAR_RUN=0), once: the path programs with models take
                _, icpu, irss, _, _ = measure(["env", "GSR_COLUMNAR_RUN=0"] + run_cmd)
                print(f"gsr run    {n:,} items item by item (GSR_COLUMNAR_RUN=0): {icpu:6.1f} s CPU, "
                      f"{icpu / anchor_cpu:.2f}x the anchor, peak RSS {irss:5.1f} MB")
            rwall, rcpu, rrss, rrc, rtext = measure(replay_cmd)
            if k == 0:
                print(f"gsr replay {n:,} items: {rwall:6.1f} s wall, {rcpu:6.1f} s CPU, {n / rwall:7,.0f} items/s, "
                      f"peak RSS {rrss:5.1f} MB (target < 10 s), exit {rrc} "
                      f"({'reproduced exactly' if rrc == 0 else 'DIFFERENCES'})")
                print(f"json+numpy pipeline (the anchor) {n:,} items: {anchor_cpu:6.2f} s CPU")
            if rrc != 0:
                print(rtext)
            replay_ratios.append(rcpu / anchor_cpu)
        print(ratio_line("gsr run CPU / json+numpy pipeline CPU", run_ratios,
                         "(target <= 4x, issue 22; 11x before trace v2, 9.6x item by item)"))
        print(ratio_line("gsr run without --trace (the anchor's work: result lines alone) CPU / json+numpy "
                         "pipeline CPU", bare_ratios, "(target <= 4x)"))
        print(ratio_line("gsr replay CPU / json+numpy pipeline CPU", replay_ratios,
                         "(target <= 1.5x; 2.9x before trace v2)"))
        items, v2, v1 = v1_bytes(trace)
        print(f"trace bytes per item: version 1 {v1 / items:,.0f}, version 2 {v2 / items:,.0f}: "
              f"{v1 / v2:.2f}x smaller (target >= 2x)")
        print(f"(machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}: wall times grow with load)")
        from gsrlang.trace.jsonio import BACKEND

        print(f"(traces written and read with {BACKEND}; without orjson (off CPython) replay decodes its "
              "trace about 2.5x slower)")
        if rc != 0:
            print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
