"""Issue 22's before/after measures: this tree against the tree before the kernels, in the same run.

Issue 22 asks of `gsr replay` CPU at most 1.3x "the numpy replay", and of tuning a per-candidate
evaluation "unchanged or faster". The numpy replay is the replay through the columnar (numpy)
evaluator that the issue found beside the item interpreter; it is gone from this tree, so this
benchmark runs it from the tree the issue was filed against, REV (default 974f21d), extracted with
`git archive` into the system's temporary folder (never the repository), with the same Python and
packages.

(1) `gsr replay TRACE --program P -q --bootstrap 0` (verify mode) of bench_replay.py's trace of N items
    (default 300,000), the before tree and this one alternated REPEATS times (default 3), each in a
    subprocess: CPU (user + system) and peak RSS (bench_runtime.measure); the ratio is per pair. Both
    must print that every output was reproduced.
(2) Per candidate, in one subprocess per tree and repeat, alternated: `Evaluator.run` of one parameter
    set over bench_learn.py's 100,000-item trace of the 10-node program (bench_learn part 3, the call
    its "gsr tune" figure timed when the issue was filed: `exact=False` then), and `Space.run` of one
    weight vector over 100,000 distinct items of a 4-slot weighted mean (bench_learn part 5, what a
    search calls), 30 candidates each, CPU time (`time.process_time`) per call. The 10-node scores are
    checked equal between the trees; the 4-slot ones may differ at rounding boundaries (plain sums
    before, exact sums now), and the share that agree is printed.

Prints min / median / max; asserts nothing.
Run: python benchmarks/bench_before.py [N] [REPEATS] [REV]
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_learn import FOUR  # noqa: E402
from bench_replay import make_trace  # noqa: E402
from bench_runtime import ROOT, measure  # noqa: E402

BEFORE = "974f21d"  # the commit issue 22 was filed against: the columnar evaluator beside the interpreter
TUNE_ITEMS = 100_000

# One tree's per-candidate timings (argv: kind, program, trace, candidates), as JSON: [CPU s per call], digest.
CANDIDATES = r"""
import hashlib, json, sys, time
import numpy as np
try:
    from gsrlang.lang.check.driver import analyze
    from gsrlang.execution.tracetable import table_from_trace as load
    from gsrlang.semantics.evaluate import Evaluator
    from gsrlang.analysis.tune import Space, knobs
    before = False
except ImportError:  # the tree before the kernels
    from gsrlang.check.driver import analyze
    from gsrlang.runtime.columnar import Evaluator, Table
    from gsrlang.learn.tune import Space, knobs
    load, before = Table.from_trace, True
kind, path, trace, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
program = analyze(open(path).read(), path=path).program
table = load(program, trace)
if kind == "ten":
    evaluator = Evaluator(program)
    body = next(node.id for node in program.nodes if node.op == "weighted_mean")
    params = {body: {"weights": [0.7, 0.3]}}
    extra = {"exact": False} if before else {}
    calls = [lambda: evaluator.run(table, params=params, **extra)] * count
else:
    space = Space(program, knobs(program, every=True))
    rng = np.random.default_rng(3)
    calls = [lambda w=rng.random(4).round(3): space.run(table, w) for _ in range(count)]
times, scores = [], []
if not calls[0]().ok.all():  # (the first call also derives what no parameter changes)
    sys.exit("not every item is valid: the trace was not recorded as meant")
for call in calls:
    t0 = time.process_time()
    ev = call()
    ev.ok, ev.score  # what the metric objective reads of it
    times.append(time.process_time() - t0)
    scores.append(np.where(ev.ok, ev.score, -1.0))
print(json.dumps([times, np.concatenate(scores).tolist()]))
"""


def extract(rev: str, folder: Path) -> Path:
    """The package, grammar and stdlib of `rev`, written under `folder` (the repository is only read)."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "gsrlang", "grammar", "stdlib"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(folder, filter="data")
    return folder


def _holds(rev: str) -> bool:
    """Whether the repository holds commit `rev` (False without git)."""
    try:
        return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"],
                              capture_output=True).returncode == 0
    except OSError:
        return False


def spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    return "/".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def in_tree(tree: Path, args: list[str]) -> list[str]:
    return ["env", f"PYTHONPATH={tree}", sys.executable, *args]


def replay(trees: dict, tmp: Path, n: int, repeats: int) -> None:
    (tmp / "replay").mkdir()
    program, trace = make_trace(tmp / "replay", n)
    args = ["-m", "gsrlang.cli", "replay", str(trace), "--program", str(program), "-q", "--bootstrap", "0"]
    for tree in trees.values():  # once each, untimed: each tree's first process writes its bytecode
        measure(in_tree(tree, args))
    cpu = {name: [] for name in trees}
    rss = {name: [] for name in trees}
    for _ in range(repeats):
        for name, tree in trees.items():
            _, seconds, peak, rc, text = measure(in_tree(tree, args))
            if rc != 0 or "reproduced exactly" not in text:
                raise SystemExit(f"gsr replay ({name}) exit {rc}: {text}")
            cpu[name].append(seconds)
            rss[name].append(peak)
    ratio = [a / b for a, b in zip(cpu["after"], cpu["before"])]
    print(f"gsr replay (verify) of {n:,} items, CPU: before {spread(cpu['before'])} s, after {spread(cpu['after'])} s; "
          f"after / before {spread(ratio)}x (min/median/max of {repeats} pairs; target <= 1.3x)")
    print(f"  peak RSS: before {spread(rss['before'], '{:.0f}')} MB, after {spread(rss['after'], '{:.0f}')} MB")


def candidates(trees: dict, tmp: Path, repeats: int) -> None:
    from gsrlang.execution.planner import RunConfig
    from gsrlang.execution.runs import run_file
    from gsrlang.files.dataset import ColumnMap
    from gsrlang.judges.registry import default_registry
    from gsrlang.lang.check.driver import analyze
    import numpy as np

    (tmp / "ten").mkdir()
    ten_program, ten = make_trace(tmp / "ten", TUNE_ITEMS)
    four_program = tmp / "four.gsr"
    four_program.write_text(FOUR)
    items, four = tmp / "four-items.jsonl", tmp / "four.jsonl"
    x = np.random.default_rng(5).random((TUNE_ITEMS, 4)).round(3)
    with items.open("w") as f:
        for k, row in enumerate(x.tolist()):
            f.write(json.dumps({"id": f"f{k}", "input": "q", "response": "r", **dict(zip("abcd", row))}) + "\n")
    run_file(analyze(FOUR, path=str(four_program)).program, items, ColumnMap(), default_registry(), "pointwise",
             RunConfig(trace=str(four)))
    script = tmp / "candidates.py"
    script.write_text(CANDIDATES)
    for kind, program, trace, what in (
            ("ten", ten_program, ten, "Evaluator.run, 10-node program, one parameter set"),
            ("four", four_program, four, "Space.run, 4-slot weighted mean, continuous, one weight vector")):
        times = {name: [] for name in trees}
        scores = {}
        for _ in range(repeats):
            for name, tree in trees.items():
                out = subprocess.run(in_tree(tree, [str(script), kind, str(program), str(trace), "30"]),
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"{name} tree, {kind}: {out.stderr[-2000:]}")
                seconds, scores[name] = json.loads(out.stdout.splitlines()[-1])
                times[name].append(statistics.median(seconds) * 1e3)
        ratio = [a / b for a, b in zip(times["after"], times["before"])]
        agree = float(np.mean(np.asarray(scores["after"]) == np.asarray(scores["before"])))
        print(f"per candidate, {what}, {TUNE_ITEMS:,} items: before {spread(times['before'])} ms, after "
              f"{spread(times['after'])} ms CPU (each a median of 30 calls, {repeats} processes a tree, alternated); "
              f"after / before {spread(ratio)}x; scores equal on {agree:.4%} of the 30 candidates' items")


def main(argv: list[str]) -> int:
    try:
        n = int(argv[0]) if argv else 300_000
        repeats = int(argv[1]) if len(argv) > 1 else 3
        if n < 1 or repeats < 1:
            raise ValueError
    except ValueError:
        print("usage: python benchmarks/bench_before.py [N] [REPEATS] [REV]  (N and REPEATS whole numbers, at least 1)")
        return 2
    rev = argv[2] if len(argv) > 2 else BEFORE
    if len(argv) <= 2 and not _holds(BEFORE):  # `make bench` in a shallow clone: nothing to compare with
        print(f"skipped: this checkout does not hold {BEFORE} (a shallow clone, or no git history)")
        return 0
    with tempfile.TemporaryDirectory(prefix="gsr-bench-before-") as tmp:
        tmp = Path(tmp)
        try:
            before = extract(rev, tmp / "before")
        except subprocess.CalledProcessError as e:
            print(f"cannot extract {rev} from {ROOT}: {e.stderr.decode(errors='replace').strip()}")
            return 2
        except OSError as e:  # no git
            print(f"cannot extract {rev} from {ROOT}: {e}")
            return 2
        trees = {"before": before, "after": ROOT}
        print(f"before: {rev} (extracted to {before}); after: {ROOT}")
        replay(trees, tmp, n, repeats)
        candidates(trees, tmp, repeats)
        print(f"(machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; CPU times, since the machine "
              "is shared)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
