"""The bootstrap's cost at scale: what `gsr run`, `gsr replay` and `gsr metrics` spend on the default 1,000
resamples once a run's items are counted.

For N items (10,000, 100,000 and LARGEST_N, default 300,000), of a pointwise run (a 1..5 judge against gold
ratings), of the same in groups of three items (a cluster bootstrap: `--group-field`) and of a pairwise run
(five verdicts against three preferences):
- `metrics_with_confidence` with 1,000 resamples, seed 0, as a run summary calls it (pointwise: float arrays;
  pairwise: lists of verdicts), CPU time (`time.process_time`);
- the anchor, interleaved repeat by repeat: drawing the same resamples' item indices alone (`draws`, the stream
  `numpy.random.default_rng(0).integers` gives, as `scipy.stats.bootstrap` draws it), which any bootstrap that
  keeps that stream pays;
min / median / max of REPEATS (default 3) and the ratio per repeat. Prints the figures; asserts nothing.
Run: python benchmarks/bench_bootstrap.py [LARGEST_N] [REPEATS]
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from gsrlang.analysis.metrics import metrics_with_confidence
from gsrlang.analysis.resampling import draws

RESAMPLES = 1000


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return "/".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def data(mode: str, n: int, rng: np.random.Generator) -> tuple:
    if mode == "pointwise":
        preds = rng.integers(1, 6, n).astype(np.float64)
        preds[rng.random(n) < 0.02] = np.nan  # a few invalid items
        golds = np.clip(preds + rng.integers(-1, 2, n), 1, 5)
        golds[np.isnan(golds)] = 3.0
        return preds, golds
    verdicts = np.array(["first", "second", "tie", "abstain", None], dtype=object)
    labels = np.array(["first", "second", "tie"], dtype=object)
    return verdicts[rng.integers(0, 5, n)].tolist(), labels[rng.integers(0, 3, n)].tolist()


def main(largest: int, repeats: int) -> None:
    rng = np.random.default_rng(7)
    for n in sorted({10_000, 100_000, largest}):
        for mode, groups in (("pointwise", None), ("pointwise", (np.arange(n) // 3).tolist()), ("pairwise", None)):
            preds, golds = data(mode, n, rng)
            times, anchor = [], []
            for _ in range(repeats):
                times.append(cpu(lambda: metrics_with_confidence(mode, preds, golds, n_resamples=RESAMPLES,
                                                                 groups=groups)))
                anchor.append(cpu(lambda: [None for _ in draws(n, RESAMPLES, 0)]))
            ratio = [t / a for t, a in zip(times, anchor) if a > 0]
            kind = mode if groups is None else "grouped"
            print(f"{n:>9,} items, {kind:<9}: {spread(times)} s CPU with {RESAMPLES:,} resamples; drawing their "
                  f"indices alone {spread(anchor)} s; ratio {spread(ratio)}x (min/median/max of {repeats})",
                  flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 3 or not all(a.isdigit() and int(a) > 0 for a in sys.argv[1:]):
        sys.exit("usage: bench_bootstrap.py [LARGEST_N] [REPEATS] (whole numbers above 0)")
    args = [int(a) for a in sys.argv[1:]]
    main(args[0] if args else 300_000, args[1] if len(args) > 1 else 3)
