"""Bootstrap resamples as count vectors, and the agreement metrics over all of them at once (numpy).

A resample of n items is n indices drawn with replacement; all that a metric of
:mod:`gsrlang.metrics` needs from it is how often each item was drawn. So a block of
resamples is a matrix ``W`` (resamples x items) of draw counts, and every sum the
metrics are made of is a matrix product ``W @ feature``: one pass for exact, within-1,
MAE, coverage and the pairwise rates. Pearson is the same with centred moments,
Spearman ranks each resample by counting how often each distinct value was drawn
(the average rank of a value is the number of smaller draws plus half its ties), and
the quadratic weighted kappa needs only five sums (see :meth:`PointwiseSample.resampled`).

The indices are drawn as ``numpy.random.default_rng(seed).integers(0, n, (rows, n))``,
block after block: the same stream ``scipy.stats.bootstrap`` draws for the same seed,
so its percentile intervals and ours can be checked against each other, and the same
indices the one-resample-at-a-time path (:func:`gsrlang.metrics.with_confidence`) uses.
Blocks keep the memory near ``BLOCK`` counts whatever the number of resamples.

Values are float arrays, one per metric, with NaN where a resample leaves the metric
undefined (no valid item, a constant side, no disagreement expected by chance).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["BLOCK", "PairwiseSample", "PointwiseSample", "counts", "draws", "percentile_interval", "resampled"]

#: Draw counts held at once (resamples x items): about 16 MB of float64.
BLOCK = 1 << 21


def draws(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of resampled item indices (rows x n, int64), n_resamples rows in all; nothing when n == 0."""
    if n == 0 or n_resamples <= 0:
        return
    rng = np.random.default_rng(seed)
    rows = max(1, min(n_resamples, BLOCK // n))
    for start in range(0, n_resamples, rows):
        yield rng.integers(0, n, (min(rows, n_resamples - start), n))


def counts(indices: np.ndarray) -> np.ndarray:
    """How often each item was drawn in each resample (rows x n, float64)."""
    rows, n = indices.shape
    flat = (indices + (np.arange(rows) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


def _round_half_up(x: np.ndarray) -> np.ndarray:
    return np.floor(x + 0.5)


def _share(part: np.ndarray, whole: np.ndarray | float) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(whole > 0, part / np.where(whole > 0, whole, 1), np.nan)


class _Ranked:
    """One side of a correlation over the valid items: values, their distinct-value codes, a centre."""

    def __init__(self, values: np.ndarray):
        self.values = values
        self.distinct, self.codes = np.unique(values, return_inverse=True)
        self.centred = values - (values.mean() if len(values) else 0.0)

    def tallies(self, w: np.ndarray) -> np.ndarray:
        """Per resample, how often each distinct value was drawn (rows x distinct)."""
        rows, k = w.shape[0], len(self.distinct)
        flat = (self.codes[None, :] + (np.arange(rows) * k)[:, None]).ravel()
        return np.bincount(flat, weights=w.ravel(), minlength=rows * k).reshape(rows, k)

    def ranks(self, tallies: np.ndarray, drawn: np.ndarray) -> np.ndarray:
        """Each item's average rank within each resample, centred on the mean rank (drawn + 1) / 2."""
        average = np.cumsum(tallies, axis=1) - (tallies - 1) / 2
        return average[:, self.codes] - ((drawn + 1) / 2)[:, None]


def _correlation(w: np.ndarray, x: np.ndarray, y: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Weighted Pearson r per resample of centred columns (x, y: n or rows x n), clipped to [-1, 1]."""
    wx, wy = w * x, w * y
    sx, sy = wx.sum(axis=1), wy.sum(axis=1)
    safe = np.where(drawn > 0, drawn, 1)
    sxy = (wx * y).sum(axis=1) - sx * sy / safe
    sxx = (wx * x).sum(axis=1) - sx * sx / safe
    syy = (wy * y).sum(axis=1) - sy * sy / safe
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(sxy / np.sqrt(sxx * syy), -1.0, 1.0)


class PointwiseSample:
    """Pointwise predictions (None: invalid) and gold scores, prepared for :func:`resampled`.

    Each resample gives what :func:`gsrlang.metrics.pointwise_metrics` gives on it:
    coverage, exact, within1, mae, pearson, spearman and qwk (``scale`` does not
    change the kappa: categories nobody used add nothing to either sum of it).
    """

    keys = ("coverage", "exact", "within1", "mae", "pearson", "spearman", "qwk")

    def __init__(self, preds: Sequence[float | None], golds: Sequence[float]):
        self.n = len(golds)
        valid = np.array([p is not None for p in preds], dtype=bool)
        pred = np.array([float(p) if p is not None else 0.0 for p in preds], dtype=np.float64)
        gold = np.asarray(golds, dtype=np.float64).reshape(self.n)
        pi, gi = _round_half_up(pred), _round_half_up(gold)
        self.valid = valid
        # per item: valid, exact hit, within 1, absolute error (0 where invalid)
        self.features = np.stack([valid, valid & (pi == gi), valid & (np.abs(pi - gi) <= 1),
                                  np.where(valid, np.abs(pred - gold), 0.0)], axis=1).astype(np.float64)
        self.pred, self.gold = _Ranked(pred[valid]), _Ranked(gold[valid])
        vp, vg = pi[valid], gi[valid]
        # kappa's sums over the valid items: (p - g)^2, p, g, p^2 + g^2 (integers: exact in float64)
        self.kappa = np.stack([(vp - vg) ** 2, vp, vg, vp * vp + vg * vg], axis=1)

    def resampled(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """The metrics of each resample (rows of draw counts ``w``, rows x n); NaN where undefined.

        The kappa is ``1 - m * sum (p - g)^2 / (m * sum (p^2 + g^2) - 2 * sum p * sum g)``
        over the m valid items: the expected disagreement ``sum_ij (i - j)^2 P_i G_j / m``
        with P and G the predicted and gold category counts expands to the denominator
        (the (k - 1)^2 of the weights cancels), and it is 0 exactly when every rating
        is one category, where the kappa is undefined.
        """
        valid_n, hits, near, abs_err = (w @ self.features).T
        out = {"coverage": valid_n / self.n, "exact": hits / self.n, "within1": near / self.n,
               "mae": _share(abs_err, valid_n)}
        wv = w[:, self.valid]
        tp, tg = self.pred.tallies(wv), self.gold.tallies(wv)
        varied = ((tp > 0).sum(axis=1) > 1) & ((tg > 0).sum(axis=1) > 1) & (valid_n >= 2)
        pearson = _correlation(wv, self.pred.centred, self.gold.centred, valid_n)
        spearman = _correlation(wv, self.pred.ranks(tp, valid_n), self.gold.ranks(tg, valid_n), valid_n)
        out["pearson"] = np.where(varied, pearson, np.nan)
        out["spearman"] = np.where(varied, spearman, np.nan)
        squared, sp, sg, squares = (wv @ self.kappa).T
        expected = valid_n * squares - 2 * sp * sg
        with np.errstate(invalid="ignore", divide="ignore"):
            out["qwk"] = np.where((valid_n > 0) & (expected > 0), 1 - valid_n * squared / expected, np.nan)
        return out


class PairwiseSample:
    """Pairwise verdicts (None: invalid) and gold preferences, prepared for :func:`resampled`.

    Each resample gives what :func:`gsrlang.metrics.pairwise_metrics` gives on it.
    """

    keys = ("accuracy", "valid_only_accuracy", "coverage", "invalid_rate", "tie_rate", "abstain_rate")

    def __init__(self, preds: Sequence[str | None], golds: Sequence[str]):
        self.n = len(golds)
        decisive = [p in ("first", "second") for p in preds]
        correct = [p == g for p, g in zip(preds, golds)]
        self.features = np.array([[c, d and c, d, p is None, p == "tie", p == "abstain"]
                                  for p, c, d in zip(preds, correct, decisive)], dtype=np.float64).reshape(-1, 6)

    def resampled(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """The metrics of each resample (rows of draw counts ``w``); NaN where undefined."""
        correct, decided_correct, decisive, invalid, tie, abstain = (w @ self.features).T
        return {"accuracy": correct / self.n, "valid_only_accuracy": _share(decided_correct, decisive),
                "coverage": decisive / self.n, "invalid_rate": invalid / self.n, "tie_rate": tie / self.n,
                "abstain_rate": abstain / self.n}


def resampled(samples: Sequence[PointwiseSample | PairwiseSample], n_resamples: int,
              seed: int) -> list[dict[str, np.ndarray]]:
    """Every metric of every sample over the same n_resamples resamples (paired: the same items drawn for all).

    One dict per sample, metric -> array of n_resamples values (NaN where undefined);
    empty arrays when there are no items or no resamples."""
    n = samples[0].n
    if any(s.n != n for s in samples):
        raise ValueError(f"samples differ in length: {[s.n for s in samples]}")
    parts: list[dict[str, list]] = [{k: [] for k in s.keys} for s in samples]
    for indices in draws(n, n_resamples, seed):
        w = counts(indices)
        for sample, part in zip(samples, parts):
            for key, values in sample.resampled(w).items():
                part[key].append(values)
    return [{k: np.concatenate(v) if v else np.empty(0) for k, v in part.items()} for part in parts]


def percentile_interval(values: np.ndarray, n_resamples: int, alpha: float,
                        min_defined: float) -> list[float] | None:
    """The alpha/2 and 1 - alpha/2 quantiles (linear interpolation) of the defined values; None when fewer than
    min_defined * n_resamples are defined."""
    defined = values[~np.isnan(values)]
    if not len(defined) or len(defined) < min_defined * n_resamples:
        return None
    low, high = np.quantile(defined, [alpha / 2, 1 - alpha / 2])
    return [float(low), float(high)]
