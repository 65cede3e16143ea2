"""Bootstrap resamples as counts, and the agreement metrics over all of them at once (numpy).

Every metric of :mod:`gsrlang.analysis.metrics` is a function of the (prediction, gold) pairs
of the items it counts, and items with the same pair are interchangeable. So a
resample is fully described by how often it drew each *distinct pair*: a block of
resamples becomes a matrix ``J`` (resamples x distinct pairs) of draw counts, made by
one gather and one ``bincount`` over the drawn indices, and the metrics are small
computations on it: sums are matrix products ``J @ feature`` (exact, within-1, MAE,
coverage, the pairwise rates, the four sums of the kappa: see
:meth:`PointwiseSample.resampled`), Pearson uses centred moments, and Spearman ranks
each resample by counting how often each distinct value was drawn (the average rank
of a value is the number of smaller draws plus half its ties). Annotation data has
few distinct pairs (a 1..5 judge against 13 possible mean ratings: at most 65), so
this costs little more than drawing the indices; with continuous values there are at
most as many pairs as items.

The indices are drawn as ``numpy.random.default_rng(seed).integers(0, n, (rows, n))``,
block after block: the same stream ``scipy.stats.bootstrap`` draws for the same seed,
so its percentile intervals and ours can be checked against each other, and the same
indices the one-resample-at-a-time path (:func:`gsrlang.analysis.metrics.with_confidence`) uses.
Blocks keep the memory near ``BLOCK`` indices whatever the number of resamples.

Values are float arrays, one per metric, with NaN where a resample leaves the metric
undefined (no valid item, a constant side, no disagreement expected by chance).

**Cluster bootstrap.** When items share a prompt, a conversation or a source, they are
not independent, and resampling items makes the intervals too narrow. Given each
item's group (``groups``), a resample draws *groups* with replacement (as many as
there are) and takes every item of each drawn group, as often as the group was drawn
(:func:`group_weights`): a pair's count in a resample is then summed over the
distinct (group, pair) combinations, the same counts-per-distinct-pair computation
follows, and a metric is divided by the resample's own number of items (which now
varies). Without groups the item draws are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["BLOCK", "PairwiseSample", "PointwiseSample", "draws", "group_codes", "group_weights", "percentile_interval",
           "resampled", "round_half_up_array"]

#: Drawn indices held at once (resamples x items): 16 MB of int64.
BLOCK = 1 << 21


def draws(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of resampled item indices (rows x n, int64), n_resamples rows in all; nothing when n == 0."""
    if n == 0 or n_resamples <= 0:
        return
    rng = np.random.default_rng(seed)
    rows = max(1, min(n_resamples, BLOCK // n))
    for start in range(0, n_resamples, rows):
        yield rng.integers(0, n, (min(rows, n_resamples - start), n))


def group_codes(groups: Sequence) -> np.ndarray:
    """Each item's group as a code 0..G-1, in order of first appearance (None: a group of its own)."""
    seen: dict = {}
    out = np.empty(len(groups), np.int64)
    for i, g in enumerate(groups):
        key = ("item", i) if g is None else ("group", g)
        out[i] = seen.setdefault(key, len(seen))
    return out


def group_weights(codes: np.ndarray, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of per-item draw counts (rows x n, float64) of a cluster bootstrap: each resample draws as many
    groups as there are, with replacement, and counts each item as often as its group was drawn."""
    return (drawn[:, codes] for drawn in _group_draws(codes, n_resamples, seed))


def _group_draws(codes: np.ndarray, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """`group_weights`'s blocks as how often each resample drew each group (rows x G, float64)."""
    n = len(codes)
    k = int(codes.max()) + 1 if n else 0
    if n == 0 or n_resamples <= 0:
        return
    rng = np.random.default_rng(seed)
    rows = max(1, min(n_resamples, BLOCK // max(n, k)))
    for start in range(0, n_resamples, rows):
        yield _tally(None, k, rng.integers(0, k, (min(rows, n_resamples - start), k)))


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`np.unique(a, axis=0, return_inverse=True, return_counts=True)` of a 2-D float array: the distinct rows
    in the same (lexicographic) order, each row's code among them, how often each occurs.

    Each column is coded among its own sorted values first and a row's codes are combined into one integer,
    whose order is the rows' order, so the work is a few sorts of one column, not one sort of rows compared
    as records (300,000 rows of 3 columns: about 0.1 s against 1.6 s). Where the codes' product does not fit
    in 62 bits, or a value is NaN (np.unique's columns would merge NaNs, its rows do not), it is np.unique."""
    if a.ndim != 2 or not len(a) or np.isnan(a).any():
        return np.unique(a, axis=0, return_inverse=True, return_counts=True)
    key, columns = np.zeros(len(a), np.int64), []
    for j in range(a.shape[1]):
        values, codes = np.unique(a[:, j], return_inverse=True)
        if len(columns) and math.prod(len(v) for v in columns) * len(values) >= 1 << 62:
            return np.unique(a, axis=0, return_inverse=True, return_counts=True)
        key *= len(values)
        key += codes.reshape(-1)
        columns.append(values)
    distinct, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    rows = np.empty((len(distinct), a.shape[1]))
    for j in reversed(range(a.shape[1])):
        distinct, code = np.divmod(distinct, len(columns[j]))
        rows[:, j] = columns[j][code]
    return rows, inverse.reshape(-1), counts


def _narrowed(codes: np.ndarray, k: int) -> np.ndarray:
    """Codes 0..k-1 in the narrowest unsigned type that holds them (`_tally` gathers them)."""
    return codes.astype(np.uint8 if k <= 1 << 8 else np.uint16 if k <= 1 << 16 else np.uint32 if k <= 1 << 32
                        else np.int64)


def _tally(codes: np.ndarray | None, k: int, indices: np.ndarray) -> np.ndarray:
    """How often each of k codes was drawn in each resample: rows x k (float64), from rows x n indices (with
    `codes` None, the indices are the codes: a cluster bootstrap's drawn groups).

    One bincount a resample, over its items' codes gathered from `codes` as `_narrowed` gives them: a table of
    a byte an item (rather than 8) keeps the random gather within the cache. A million items, 15 codes, 40
    resamples, in process: 0.18-0.20 s of CPU against 0.58-1.00 s for one bincount over every resample's
    codes offset by its row, gathered from int64 (the whole bootstrap: benchmarks/bench_bootstrap.py)."""
    out = np.empty((len(indices), k))
    for r, drawn in enumerate(indices):
        out[r] = np.bincount(drawn if codes is None else codes[drawn], minlength=k)
    return out


def _group(weights: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    """Columns of ``weights`` (rows x m) summed into k groups (``groups[j]`` is column j's): rows x k."""
    rows = weights.shape[0]
    flat = (groups[None, :] + (np.arange(rows) * k)[:, None]).ravel()
    return np.bincount(flat, weights=weights.ravel(), minlength=rows * k).reshape(rows, k)


def round_half_up_array(x: np.ndarray) -> np.ndarray:
    """Each value rounded to the nearest integer, halves upwards (as `metrics.round_half_up`)."""
    return np.floor(x + 0.5)


def _share(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(whole > 0, part / np.where(whole > 0, whole, 1), np.nan)


class _Ranked:
    """One side of a correlation over the distinct valid pairs: each pair's value and its code among the values."""

    def __init__(self, values: np.ndarray):
        distinct, codes = np.unique(values, return_inverse=True)
        self.codes, self.k = codes.reshape(-1), len(distinct)
        self.centred = values - (values.mean() if len(values) else 0.0)

    def tallies(self, drawn: np.ndarray) -> np.ndarray:
        """Per resample, how often each distinct value was drawn (rows x k), from the pairs' counts."""
        return _group(drawn, self.codes, self.k)

    def ranks(self, tallies: np.ndarray, n: np.ndarray) -> np.ndarray:
        """Each pair's average rank within each resample of n valid draws, centred on the mean rank (n + 1) / 2."""
        average = np.cumsum(tallies, axis=1) - (tallies - 1) / 2
        return average[:, self.codes] - ((n + 1) / 2)[:, None]


def _correlation(w: np.ndarray, x: np.ndarray, y: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Pearson r per resample of columns x, y (m, or rows x m) drawn w times each (rows x m; n = w's row sums),
    clipped to [-1, 1]."""
    wx, wy = w * x, w * y
    sx, sy = wx.sum(axis=1), wy.sum(axis=1)
    safe = np.where(n > 0, n, 1)
    sxy = (wx * y).sum(axis=1) - sx * sy / safe
    sxx = (wx * x).sum(axis=1) - sx * sx / safe
    syy = (wy * y).sum(axis=1) - sy * sy / safe
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(sxy / np.sqrt(sxx * syy), -1.0, 1.0)


class _Coded:
    """Items coded by their distinct (prediction, gold) pair: ``codes`` (one of ``k`` per item, ``n`` items);
    a subclass's ``counted`` gives the metrics from how often each pair was drawn."""

    _narrow: np.ndarray | None = None  # the codes as `_tally` gathers them, made at the first resample

    def resampled(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """The metrics of each resample (rows of drawn item indices); NaN where undefined."""
        if self._narrow is None:
            self._narrow = _narrowed(self.codes, self.k)
        return self.counted(_tally(self._narrow, self.k, indices), np.full(len(indices), float(self.n)))

    def combinations(self, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct (group, pair) combinations of the items (`groups`: each item's group code): each one's
        group, pair and how many items it holds (float64), for `grouped`."""
        combined, count = np.unique(groups * self.k + self.codes, return_counts=True)
        return *np.divmod(combined, self.k), count.astype(np.float64)

    def grouped(self, drawn: np.ndarray, combinations: tuple) -> dict[str, np.ndarray]:
        """The metrics of each resample of a cluster bootstrap, given as how often it drew each group (rows x G;
        `combinations`: what `combinations` gives of the items' groups). Each item counts as often as its group
        was drawn, so a pair's count is that summed over the distinct (group, pair) combinations (whole
        numbers: exact in any order), a pass over those combinations, not over every item, a resample."""
        group, pair, count = combinations
        out = np.empty((len(drawn), self.k))
        for r, row in enumerate(drawn):
            out[r] = np.bincount(pair, weights=row[group] * count, minlength=self.k)
        return self.counted(out, out.sum(axis=1))  # (not drawn @ the groups' sizes: BLAS threads spin on a product
        # of 100,000 groups, twice the CPU for the same wall time on two cores)


class PointwiseSample(_Coded):
    """Pointwise predictions (None: invalid; or a float64 array, NaN: invalid) and gold scores, prepared for
    :func:`resampled`.

    Each resample gives what :func:`gsrlang.analysis.metrics.pointwise_metrics` gives on it:
    coverage, exact, within1, mae, pearson, spearman and qwk (categories nobody used add nothing to either sum
    of the kappa).
    """

    keys = ("coverage", "exact", "within1", "mae", "pearson", "spearman", "qwk")

    def __init__(self, preds: Sequence[float | None] | np.ndarray, golds: Sequence[float] | np.ndarray):
        self.n = len(golds)
        if isinstance(preds, np.ndarray):  # float64, NaN for None
            given = ~np.isnan(preds)
            items = np.stack([given.astype(np.float64), np.where(given, preds, 0.0),
                              np.asarray(golds, np.float64)], axis=1).reshape(-1, 3)
        else:
            items = np.array([[p is not None, 0.0 if p is None else float(p), float(g)]
                              for p, g in zip(preds, golds)], dtype=np.float64).reshape(-1, 3)
        pairs, codes, _ = unique_rows(items)
        self.codes, self.k = codes.reshape(-1), len(pairs)
        valid, pred, gold = pairs[:, 0] == 1, pairs[:, 1], pairs[:, 2]
        pi, gi = round_half_up_array(pred), round_half_up_array(gold)
        # per pair: valid, exact hit, within 1, absolute error (0 where invalid)
        self.features = np.stack([valid, valid & (pi == gi), valid & (np.abs(pi - gi) <= 1),
                                  np.where(valid, np.abs(pred - gold), 0.0)], axis=1).astype(np.float64)
        self.valid = valid
        self.pred, self.gold = _Ranked(pred[valid]), _Ranked(gold[valid])
        vp, vg = pi[valid], gi[valid]
        # the kappa's sums over the valid pairs: (p - g)^2, p, g, p^2 + g^2 (integers: exact in float64)
        self.kappa = np.stack([(vp - vg) ** 2, vp, vg, vp * vp + vg * vg], axis=1)

    def counted(self, drawn: np.ndarray, size: np.ndarray) -> dict[str, np.ndarray]:
        """The metrics of each resample from how often it drew each distinct pair (rows x k) and its size.

        The kappa is ``1 - m * sum (p - g)^2 / (m * sum (p^2 + g^2) - 2 * sum p * sum g)``
        over the m valid items: the expected disagreement ``sum_ij (i - j)^2 P_i G_j / m``
        with P and G the predicted and gold category counts expands to the denominator
        (the (k - 1)^2 of the weights cancels), and it is 0 exactly when every rating
        is one category, where the kappa is undefined.
        """
        valid_n, hits, near, abs_err = (drawn @ self.features).T
        out = {"coverage": _share(valid_n, size), "exact": _share(hits, size), "within1": _share(near, size),
               "mae": _share(abs_err, valid_n)}
        dv = drawn[:, self.valid]
        tp, tg = self.pred.tallies(dv), self.gold.tallies(dv)
        varied = ((tp > 0).sum(axis=1) > 1) & ((tg > 0).sum(axis=1) > 1) & (valid_n >= 2)
        pearson = _correlation(dv, self.pred.centred, self.gold.centred, valid_n)
        spearman = _correlation(dv, self.pred.ranks(tp, valid_n), self.gold.ranks(tg, valid_n), valid_n)
        out["pearson"] = np.where(varied, pearson, np.nan)
        out["spearman"] = np.where(varied, spearman, np.nan)
        squared, sp, sg, squares = (dv @ self.kappa).T
        expected = valid_n * squares - 2 * sp * sg
        with np.errstate(invalid="ignore", divide="ignore"):
            out["qwk"] = np.where((valid_n > 0) & (expected > 0), 1 - valid_n * squared / expected, np.nan)
        return out


class PairwiseSample(_Coded):
    """Pairwise verdicts (None: invalid) and gold preferences, prepared for :func:`resampled`.

    Each resample gives what :func:`gsrlang.analysis.metrics.pairwise_metrics` gives on it.
    """

    keys = ("accuracy", "valid_only_accuracy", "coverage", "invalid_rate", "tie_rate", "abstain_rate")
    _PREDICTIONS = ("first", "second", "tie", "abstain", None)
    _LABELS = ("first", "second", "tie")

    def __init__(self, preds: Sequence[str | None], golds: Sequence[str]):
        self.n, self.k = len(golds), len(self._PREDICTIONS) * len(self._LABELS)
        code = {(p, g): i * len(self._LABELS) + j for i, p in enumerate(self._PREDICTIONS)
                for j, g in enumerate(self._LABELS)}
        self.codes = np.fromiter(map(code.__getitem__, zip(preds, golds)), np.int64, self.n)
        rows = []
        for p in self._PREDICTIONS:  # per (prediction, gold) pair: correct, decisive and correct, decisive, ...
            for g in self._LABELS:
                decisive = p in ("first", "second")
                rows.append([p == g, decisive and p == g, decisive, p is None, p == "tie", p == "abstain"])
        self.features = np.array(rows, dtype=np.float64)

    def counted(self, drawn: np.ndarray, size: np.ndarray) -> dict[str, np.ndarray]:
        """The metrics of each resample from how often it drew each distinct pair (rows x k) and its size."""
        correct, decided_correct, decisive, invalid, tie, abstain = (drawn @ self.features).T
        return {"accuracy": _share(correct, size), "valid_only_accuracy": _share(decided_correct, decisive),
                "coverage": _share(decisive, size), "invalid_rate": _share(invalid, size),
                "tie_rate": _share(tie, size), "abstain_rate": _share(abstain, size)}


def resampled(samples: Sequence[PointwiseSample | PairwiseSample], n_resamples: int,
              seed: int, groups: Sequence | None = None) -> list[dict[str, np.ndarray]]:
    """Every metric of every sample over the same n_resamples resamples (paired: the same items drawn for all).

    With ``groups`` (each item's group; None: a group of its own) a cluster bootstrap: groups are drawn, not
    items. One dict per sample, metric -> array of n_resamples values (NaN where undefined);
    empty arrays when there are no items or no resamples."""
    n = samples[0].n
    if any(s.n != n for s in samples):
        raise ValueError(f"samples differ in length: {[s.n for s in samples]}")
    if groups is not None and len(groups) != n:
        raise ValueError(f"{len(groups)} groups for {n} items")
    parts: list[dict[str, list]] = [{k: [] for k in s.keys} for s in samples]
    if groups is None:
        blocks = ((s.resampled, (indices,)) for indices in draws(n, n_resamples, seed) for s in samples)
    else:
        codes = group_codes(groups)
        combinations = [s.combinations(codes) for s in samples]
        blocks = ((s.grouped, (drawn, c)) for drawn in _group_draws(codes, n_resamples, seed)
                  for s, c in zip(samples, combinations))
    for i, (method, block) in enumerate(blocks):
        for key, values in method(*block).items():
            parts[i % len(samples)][key].append(values)
    return [{k: np.concatenate(v) if v else np.empty(0) for k, v in part.items()} for part in parts]


def percentile_interval(values: np.ndarray, n_resamples: int, alpha: float, min_defined: float) -> list[float] | None:
    """The alpha/2 and 1 - alpha/2 quantiles (linear interpolation) of the defined values; None when fewer than
    min_defined * n_resamples are defined."""
    defined = values[~np.isnan(values)]
    if not len(defined) or len(defined) < min_defined * n_resamples:
        return None
    low, high = np.quantile(defined, [alpha / 2, 1 - alpha / 2])
    return [float(low), float(high)]
