"""`gsr tune --shrink auto` speed (issue 23): wall and CPU time at 240 and 2,400 items.

The data are the Topical-Chat dev annotations of examples/topical_chat (240 items, 40
conversations x 6 systems), and for 2,400 items the same rows ten times over with fresh
ids and fresh conversation numbers (400 conversations). Each size is tuned as the worked
example of docs/learning.md is: `overall.tunable.gsr`, label `scores.overall`,
`--shrink auto` (a nested 5-fold CV, each fold choosing its shrinkage by an inner
5-fold CV), `--group-field` the conversation, in this process (`--jobs 1`).

Anchor, measured in the same run on the same items: one tuning at a fixed shrinkage
(`gsr tune --shrink 0.1 --folds 2`: three global searches), so the ratio says how many
such tunings `--shrink auto` costs, whatever the machine's load. Reported: min / median /
max over the repeats of wall time (`time.perf_counter`) and CPU time
(`time.process_time`), and the median ratio of CPU times. Target: under 60 s of CPU at
240 items. Prints the figures; asserts nothing.

Run: python benchmarks/bench_tune.py [REPEATS]   (default 1; 240 and 2,400 items)
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TC = ROOT / "examples" / "topical_chat"
sys.path.insert(0, str(ROOT))

from gsrlang.cli import main as gsr  # noqa: E402


def write_data(path: Path, copies: int) -> int:
    rows = [json.loads(line) for line in (TC / "data" / "dev.jsonl").read_text().splitlines()]
    conversations = list(dict.fromkeys(r["context"] for r in rows))
    n = 0
    with path.open("w") as f:
        for k in range(copies):
            for r in rows:
                f.write(json.dumps({"id": f"{k}-{r['id']}", "conversation": k * 1000 + conversations.index(r["context"]),
                                    "scores": r["scores"]}) + "\n")
                n += 1
    return n


def timed(argv: list[str]) -> tuple[float, float]:
    out = io.StringIO()
    w, c = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = gsr(argv)
    if code != 0:
        raise SystemExit(f"gsr {' '.join(argv)} failed ({code}):\n{out.getvalue()}")
    return time.perf_counter() - w, time.process_time() - c


def spread(xs: list[float]) -> str:
    return "/".join(f"{x:.1f}" for x in (min(xs), statistics.median(xs), max(xs)))


def main(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for copies in (1, 10):
            data = tmp / f"data{copies}.jsonl"
            n = write_data(data, copies)
            base = ["tune", str(TC / "overall.tunable.gsr"), "--data", str(data), "--id-field", "id",
                    "--label-field", "scores.overall", "--group-field", "conversation", "--bootstrap", "200",
                    "--out", str(tmp / "out.gsr")]
            auto, anchor = [], []
            for _ in range(repeats):
                anchor.append(timed(base + ["--shrink", "0.1", "--folds", "2"]))
                auto.append(timed(base + ["--shrink", "auto"]))
            ratio = statistics.median(a[1] / b[1] for a, b in zip(auto, anchor))
            print(f"gsr tune --shrink auto, {n} items ({repeats} repeat{'s' if repeats != 1 else ''}): "
                  f"wall {spread([a[0] for a in auto])} s, CPU {spread([a[1] for a in auto])} s; anchor (--shrink 0.1 "
                  f"--folds 2) CPU {spread([a[1] for a in anchor])} s; ratio {ratio:.1f}x")


if __name__ == "__main__":
    if len(sys.argv) > 2 or not all(a.isdigit() and int(a) > 0 for a in sys.argv[1:]):
        sys.exit("usage: bench_tune.py [REPEATS] (a whole number above 0)")
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
