"""Standard models on the same criteria values and the same folds as `gsr tune` (`gsr tune --baseline`).

A graph is worth its structure only if the structure does not cost agreement. So
`gsr tune --baseline` fits two standard models to the very numbers the graph reads,
its criteria's values (one feature per criterion of the table: a Score or a numbered
level as its value, a Bool as 0 / 1, an Ordinal as its level's value), and
cross-validates them on the very folds the graph was cross-validated on:

- **linear**: least squares of the label on the features (with an intercept),
  the fitted value rounded half up and clipped to the scale;
- **ordered logit**: the label's category (rounded half up) under
  P(score <= k) = sigmoid(c_k - x . beta), fitted by maximum likelihood
  (scipy's L-BFGS-B; cut points kept increasing by fitting their first value and
  the logs of their gaps; a tiny ridge, 1e-4 per feature, keeps it defined when a
  fold's categories are separable); the prediction is the most probable category.

Features are standardised on each fold's training items; a criterion's abstention
or invalid judgment is the training mean (0 once standardised). Nominal criteria
have no order and are left out. Pointwise programs only.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["BASELINES", "baseline_predictions", "features"]

BASELINES = ("ordered logit", "linear")


def features(program, table) -> tuple[np.ndarray, list[str]]:
    """(items x criteria feature matrix, NaN where abstained or invalid; the criteria's names)."""
    cols, names = [], []
    for node in program.criteria:
        column = table.criteria.get(node.id)
        if column is None:
            continue
        t = node.type
        values = np.asarray(column.values)
        if t.kind == "ordinal":
            levels = np.array([float(v) if v is not None else np.nan for v in t.values], float)
            if np.isnan(levels).any():
                levels = np.arange(len(t.labels), dtype=float)
            values = levels[np.clip(values.astype(int), 0, len(levels) - 1)]
        elif t.kind == "nominal":
            continue
        values = values.astype(float)
        missing = np.asarray(column.abstain, bool) | np.asarray(column.invalid, bool)
        cols.append(np.where(missing, np.nan, values)[: len(table)])
        names.append(node.id)
    return (np.stack(cols, axis=1) if cols else np.zeros((len(table), 0))), names


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = np.nanmean(train, axis=0) if len(train) else np.zeros(train.shape[1])
    mean = np.where(np.isnan(mean), 0.0, mean)
    sd = np.nanstd(train, axis=0) if len(train) else np.ones(train.shape[1])
    sd = np.where(~np.isfinite(sd) | (sd == 0), 1.0, sd)

    def scaled(x):
        z = (x - mean) / sd
        return np.where(np.isnan(z), 0.0, z)

    return scaled(train), scaled(test)


def _linear(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, lo: float, hi: float) -> np.ndarray:
    a = np.column_stack([np.ones(len(x)), x])
    coef = np.linalg.lstsq(a, y, rcond=None)[0]
    fitted = np.column_stack([np.ones(len(x_test)), x_test]) @ coef
    return np.clip(np.floor(fitted + 0.5), lo, hi)


def _ordered_logit(x: np.ndarray, c: np.ndarray, k: int, x_test: np.ndarray) -> np.ndarray:
    from scipy.optimize import minimize

    m = x.shape[1]
    present = np.bincount(c, minlength=k)
    share = np.cumsum(present)[:-1] / len(c)
    start_cuts = np.log(np.clip(share, 1e-3, 1 - 1e-3) / (1 - np.clip(share, 1e-3, 1 - 1e-3)))
    start_cuts = np.maximum.accumulate(start_cuts + np.arange(k - 1) * 1e-3)
    gaps = np.log(np.maximum(np.diff(start_cuts), 1e-3))
    start = np.concatenate([np.zeros(m), start_cuts[:1], gaps])
    rows = np.arange(len(c))

    def cuts_of(p):
        return p[m] + np.concatenate([[0.0], np.cumsum(np.exp(p[m + 1:]))])

    def sigmoid(z):
        return 0.5 + 0.5 * np.tanh(0.5 * z)

    def nll(p):
        eta = x @ p[:m]
        cum = sigmoid(cuts_of(p)[None, :] - eta[:, None])
        upper = np.concatenate([cum, np.ones((len(c), 1))], axis=1)
        lower = np.concatenate([np.zeros((len(c), 1)), cum], axis=1)
        prob = np.maximum(upper[rows, c] - lower[rows, c], 1e-300)
        return -float(np.log(prob).sum()) + 1e-4 * float(p[:m] @ p[:m])

    p = minimize(nll, start, method="L-BFGS-B").x
    eta = x_test @ p[:m]
    cum = sigmoid(cuts_of(p)[None, :] - eta[:, None])
    probs = np.diff(np.concatenate([np.zeros((len(x_test), 1)), cum, np.ones((len(x_test), 1))], axis=1), axis=1)
    return probs.argmax(axis=1)


def baseline_predictions(program, table, golds: Sequence[float], fold_of: Sequence[int]) -> dict[str, list]:
    """{model: out-of-fold predictions per item} of `table` (its labelled items, in order: `golds`), on the
    folds `fold_of` (the graph's)."""
    p = program.readout.pointwise
    lo, hi = float(p.lo), float(p.hi)
    k = int(round(hi - lo)) + 1
    x, _ = features(program, table)
    y = np.asarray(golds, float)
    c = np.clip(np.floor(y + 0.5) - lo, 0, k - 1).astype(int)
    fold = np.asarray(fold_of)
    out = {name: [None] * len(y) for name in BASELINES}
    for f in np.unique(fold):
        train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        xtr, xte = _standardise(x[train], x[test])
        for i, v in zip(test, _linear(xtr, y[train], xte, lo, hi)):
            out["linear"][i] = float(v)
        for i, v in zip(test, _ordered_logit(xtr, c[train], k, xte)):
            out["ordered logit"][i] = float(lo + v)
    return out
