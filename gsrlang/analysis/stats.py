"""Paired comparison of two sets of predictions of the same items against the same labels.

`paired_report` gives, for every metric of the mode's report (`gsrlang.analysis.metrics`),
both values and their difference (B - A) with a percentile bootstrap interval
over items: each resample draws item indices with replacement and applies them
to both prediction columns, so the pairing is kept and the interval is that of
the difference itself, not of two independent figures; with `groups` (each item's
prompt, conversation or source) the resamples draw groups, not items (a cluster
bootstrap). `mcnemar` is the exact McNemar test on exact agreement (a binomial
test on the discordant items, computed here: `binomial_two_sided`), and `wins`
counts per item which prediction is closer to the label. Nothing here needs scipy.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from gsrlang.analysis.metrics import metric_keys, pairwise_metrics, pointwise_metrics, round_half_up
from gsrlang.analysis.resampling import PairwiseSample, PointwiseSample, percentile_interval, resampled

__all__ = ["binomial_two_sided", "correct", "mcnemar", "paired_report", "wins"]


def paired_report(mode: str, a: Sequence, b: Sequence, golds: Sequence, n_resamples: int = 1000,
                  seed: int = 0, alpha: float = 0.05, groups: Sequence | None = None) -> dict:
    """{metric: {"a", "a_ci95", "b", "b_ci95", "diff", "ci95"}} for every metric of the report (diff = b - a).

    Both prediction columns are scored on the same resamples at once (`gsrlang.analysis.resampling`); a
    resample counts towards the difference's interval when both sides define the metric on it."""
    fn = pointwise_metrics if mode == "pointwise" else pairwise_metrics
    ra, rb = fn(list(a), list(golds)), fn(list(b), list(golds))
    keys = metric_keys(ra)
    sample = PointwiseSample if mode == "pointwise" else PairwiseSample
    sa, sb = resampled([sample(list(a), list(golds)), sample(list(b), list(golds))], n_resamples, seed, groups)

    def interval(values, defined):
        return percentile_interval(values, n_resamples, alpha, 0.5) if defined and n_resamples else None

    out = {}
    for k in keys:
        diff = None if ra[k] is None or rb[k] is None else rb[k] - ra[k]
        out[k] = {"a": ra[k], "a_ci95": interval(sa[k], ra[k] is not None), "b": rb[k],
                  "b_ci95": interval(sb[k], rb[k] is not None), "diff": diff,
                  "ci95": interval(sb[k] - sa[k], diff is not None)}
    return out


def correct(mode: str, pred, gold) -> bool:
    """Exact agreement of one prediction (None: invalid) with its label."""
    if pred is None:
        return False
    return round_half_up(float(pred)) == round_half_up(float(gold)) if mode == "pointwise" else pred == gold


def mcnemar(mode: str, a: Sequence, b: Sequence, golds: Sequence) -> dict:
    """Exact McNemar test on exact agreement: the discordant counts and the two-sided p-value."""
    only_a = sum(correct(mode, x, g) and not correct(mode, y, g) for x, y, g in zip(a, b, golds))
    only_b = sum(correct(mode, y, g) and not correct(mode, x, g) for x, y, g in zip(a, b, golds))
    return {"only_a": only_a, "only_b": only_b, "p_value": binomial_two_sided(only_a, only_a + only_b)}


def binomial_two_sided(k: int, n: int) -> float:
    """The exact two-sided p-value of k successes in n trials at p = 1/2 (what `scipy.stats.binomtest(k, n)`
    gives): P(X <= min(k, n - k)) + P(X >= max(k, n - k)), at most 1. The binomial is symmetric at 1/2, so
    this is twice the lower tail; the tail is summed in log space (`math.lgamma`), so any n is fine."""
    if n <= 0:
        return 1.0
    low = min(k, n - k)
    if 2 * low == n:
        return 1.0
    i = np.arange(low + 1, dtype=np.float64)
    lg = np.vectorize(math.lgamma, otypes=[float])
    log_pmf = math.lgamma(n + 1) - lg(i + 1) - lg(n - i + 1) - n * math.log(2.0)
    top = float(log_pmf.max())
    tail = math.exp(top) * float(np.exp(log_pmf - top).sum())
    return min(1.0, 2.0 * tail)


def wins(mode: str, a: Sequence, b: Sequence, golds: Sequence) -> dict:
    """Per item: which prediction is closer to the label (an invalid one is the farthest); ties counted apart."""
    counts = {"a": 0, "b": 0, "tie": 0}
    for x, y, g in zip(a, b, golds):
        if mode == "pointwise":
            dx = abs(float(x) - float(g)) if x is not None else float("inf")
            dy = abs(float(y) - float(g)) if y is not None else float("inf")
        else:
            dx, dy = (0 if correct(mode, x, g) else 1), (0 if correct(mode, y, g) else 1)
        counts["a" if dx < dy else "b" if dy < dx else "tie"] += 1
    return counts
