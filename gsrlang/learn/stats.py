"""Paired comparison of two sets of predictions of the same items against the same labels.

`paired_report` gives, for every metric of the mode's report (`gsrlang.metrics`),
both values and their difference (B - A) with a percentile bootstrap interval
over items: each resample draws item indices with replacement and applies them
to both prediction columns, so the pairing is kept and the interval is that of
the difference itself, not of two independent figures. `mcnemar` is the exact
McNemar test on exact agreement (a binomial test on the discordant items, via
scipy), and `wins` counts per item which prediction is closer to the label.
"""

from __future__ import annotations

import random
from functools import partial
from typing import Sequence

from gsrlang.metrics import _interval, _metric_keys, pairwise_metrics, pointwise_metrics, round_half_up

__all__ = ["correct", "mcnemar", "paired_report", "report_fn", "wins"]


def report_fn(mode: str, scale=None):
    return partial(pointwise_metrics, scale=scale) if mode == "pointwise" else pairwise_metrics


def paired_report(mode: str, a: Sequence, b: Sequence, golds: Sequence, scale=None, n_resamples: int = 1000,
                  seed: int = 0, alpha: float = 0.05) -> dict:
    """{metric: {"a", "a_ci95", "b", "b_ci95", "diff", "ci95"}} for every metric of the report (diff = b - a)."""
    fn = report_fn(mode, scale)
    ra, rb = fn(list(a), list(golds)), fn(list(b), list(golds))
    keys = _metric_keys(ra)
    samples: dict[str, list] = {k: [] for k in keys}
    alone: dict[str, tuple[list, list]] = {k: ([], []) for k in keys}
    rng = random.Random(seed)
    n = len(golds)
    for _ in range(n_resamples if n else 0):
        idx = rng.choices(range(n), k=n)
        sa = fn([a[i] for i in idx], [golds[i] for i in idx])
        sb = fn([b[i] for i in idx], [golds[i] for i in idx])
        for k in keys:
            if sa[k] is not None and sb[k] is not None:
                samples[k].append(sb[k] - sa[k])
            for side, report in zip(alone[k], (sa, sb)):
                if report[k] is not None:
                    side.append(report[k])
    out = {}
    for k in keys:
        diff = None if ra[k] is None or rb[k] is None else rb[k] - ra[k]
        ci = _interval(samples[k], n_resamples, alpha, 0.5) if diff is not None and n_resamples else None
        ci_a, ci_b = (_interval(side, n_resamples, alpha, 0.5) if n_resamples else None for side in alone[k])
        out[k] = {"a": ra[k], "a_ci95": ci_a if ra[k] is not None else None, "b": rb[k],
                  "b_ci95": ci_b if rb[k] is not None else None, "diff": diff, "ci95": ci}
    return out


def correct(mode: str, pred, gold) -> bool:
    """Exact agreement of one prediction (None: invalid) with its label."""
    if pred is None:
        return False
    if mode == "pointwise":
        return round_half_up(float(pred)) == round_half_up(float(gold))
    return pred == gold


def mcnemar(mode: str, a: Sequence, b: Sequence, golds: Sequence) -> dict:
    """Exact McNemar test on exact agreement: the discordant counts and the two-sided p-value."""
    from scipy.stats import binomtest

    only_a = sum(correct(mode, x, g) and not correct(mode, y, g) for x, y, g in zip(a, b, golds))
    only_b = sum(correct(mode, y, g) and not correct(mode, x, g) for x, y, g in zip(a, b, golds))
    p = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    return {"only_a": only_a, "only_b": only_b, "p_value": float(p)}


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
