"""Agreement between judge outputs and human labels, with bootstrap intervals.

Reports are plain dicts. The metric functions return a *flat report*::

    {"mode": "pointwise", "n": 240, "n_valid": 236, "coverage": 0.983,
     "exact": 0.41, ..., "pearson": None,
     "undefined": {"pearson": "zero variance in the predictions"}}

Integer values are counts; float values are metrics. A metric that is
undefined on the given data (an empty sample, zero variance, ...) is ``None``,
never 0, and ``report["undefined"]`` says why.

:func:`with_confidence` runs a metric function once on the data and again on
bootstrap resamples, and returns the same report with each metric replaced by
``{"value": 0.41, "ci95": [0.35, 0.47]}``. :func:`metrics_from_results` does
all of this for a results JSONL file written by the runtime, and
:func:`format_report` renders any of these reports as a plain-text table.

The bootstrap is vectorised: :func:`metrics_with_confidence` computes the built-in
metrics over all resamples at once with numpy (:mod:`gsrlang.analysis.resampling`), and
:func:`with_confidence` takes any report function, one resample at a time, over the
same resampled indices (so the two agree for the same seed).
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from gsrlang.analysis.resampling import (PairwiseSample, PointwiseSample, draws, percentile_interval, resampled,
                                        unique_rows)
from gsrlang.files.dataset import DataError, parse_pointwise_label, recorded_label_problem
from gsrlang.files.jsonl import read_jsonl
from gsrlang.lang.types import is_finite_number

__all__ = ["PAIRWISE_PREDICTIONS", "PAIRWISE_LABELS", "bootstrap_ci", "format_report", "metrics_from_results",
           "metrics_with_confidence", "pairwise_metrics", "pearson", "pointwise_metrics", "quadratic_weighted_kappa",
           "read_results", "round_half_up", "spearman", "summarize_runs", "with_confidence"]

#: What a pairwise judge may answer (None, for an invalid output, aside).
PAIRWISE_PREDICTIONS = ("first", "second", "tie", "abstain")
#: What a pairwise gold label may be.
PAIRWISE_LABELS = ("first", "second", "tie")

_NOT_METRICS = frozenset({"mode", "undefined", "bootstrap"})


# --------------------------------------------------------------------------- building blocks


def round_half_up(x: float) -> int:
    """Round to the nearest integer, halves upwards (2.5 -> 3, 3.5 -> 4).

    Python's ``round`` rounds halves to even, which would send a mean rating of
    2.5 to 2 but 3.5 to 4.
    """
    return math.floor(x + 0.5)


def _undefined_if_constant(xs: Sequence[float], ys: Sequence[float]) -> str | None:
    if len(xs) < 2:
        return f"needs at least 2 valid items, got {len(xs)}"
    lo, hi = (np.min, np.max) if isinstance(xs, np.ndarray) else (min, max)
    if lo(xs) == hi(xs):
        return "zero variance in the predictions"
    if lo(ys) == hi(ys):
        return "zero variance in the gold labels"
    return None


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson's r of two sequences or float64 arrays alike: each item's float operations, then exact sums."""
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    mx = _fsum(xs) / len(xs)
    my = _fsum(ys) / len(ys)
    dx = xs - mx
    dy = ys - my
    r = _fsum(dx * dy) / math.sqrt(_fsum(dx * dx) * _fsum(dy * dy))
    return max(-1.0, min(1.0, r))


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation, or None when it is undefined (n < 2 or a constant side)."""
    return None if _undefined_if_constant(xs, ys) else _pearson(xs, ys)


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks of a sequence or array; a run of equal values (-0.0 and 0.0 alike) shares the mean of the
    ranks it spans."""
    _, inverse, counts = np.unique(np.asarray(values, np.float64), return_inverse=True, return_counts=True)
    start = np.cumsum(counts) - counts
    shared = (start + (start + counts - 1)) / 2 + 1
    return shared[inverse.reshape(-1)]


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson on average ranks (ties share ranks); None when undefined."""
    return None if _undefined_if_constant(xs, ys) else _pearson(average_ranks(xs), average_ranks(ys))


def _qwk(pairs: Sequence[tuple], n: int) -> tuple[float | None, str | None]:
    """The kappa, and why it is undefined, of n items given as their distinct (prediction, gold, how many) pairs,
    over any categories lo..hi holding the values, in closed form, O(n) in the items whatever the scale's width.

    With weights (i - j)^2 / (k - 1)^2, the observed disagreement is sum (p - g)^2 / (k - 1)^2 and the
    expected one, over every pairing of a prediction with a gold, (n sum p^2 + n sum g^2 - 2 sum p sum g) /
    (n (k - 1)^2): the (k - 1)^2 cancels, and categories nobody used add nothing: lo..hi does not change the
    kappa. So no k x k table is built (a scale 0..100000 needed ~80 GB); for integers the sums are exact, so
    grouping the items into pairs does not change them."""
    squared = sum(c * (p - g) ** 2 for p, g, c in pairs)
    sp, sg = sum(c * p for p, g, c in pairs), sum(c * g for p, g, c in pairs)
    expected = n * sum(c * p * p for p, g, c in pairs) + n * sum(c * g * g for p, g, c in pairs) - 2 * sp * sg
    if expected == 0:  # every rating, predicted and gold, in one category (or no items)
        return None, "no disagreement expected by chance (all ratings in one category)"
    return 1 - n * squared / expected, None


def quadratic_weighted_kappa(preds: Sequence[int], golds: Sequence[int], lo: int | None = None,
                             hi: int | None = None) -> float | None:
    """Cohen's kappa with quadratic weights over the integer categories lo..hi.

    ``lo``/``hi`` (default: the smallest and largest rating present) do not
    change the value: categories nobody used add nothing. Returns None when kappa is undefined: no
    items, or every rating (predicted and gold) in the same single category.
    """
    return _qwk([(p, g, 1) for p, g in zip(preds, golds)], len(preds))[0]  # one pair an item: any numbers


def _share(count: int, total: int) -> float | None:
    return count / total if total else None


def _finalize(report: dict, reasons: dict[str, str]) -> dict:
    report["undefined"] = {key: reasons[key] for key in report if report[key] is None and key in reasons}
    return report


# --------------------------------------------------------------------------- pointwise


def pointwise_metrics(preds: Sequence[float | None], golds: Sequence[float]) -> dict:
    """Agreement of quantized pointwise scores with (possibly fractional) gold scores.

    ``preds[i]`` is the judge's quantized native score for item i, or None when
    the judge's output for it was invalid; ``golds[i]`` is the human score
    (e.g. a mean of annotators, 4.67). Golds are rounded half up to the nearest
    integer for the categorical metrics; predictions are expected to be
    integers already and are rounded the same way if not.

    Which items each entry counts:

    * ``n``: all items. ``n_valid``: items with a prediction.
      ``coverage``: n_valid / n.
    * ``exact``: share of **all** items whose prediction equals the rounded
      gold; an invalid item counts as a miss.
    * ``within1``: share of **all** items whose prediction is at most 1 from
      the rounded gold; an invalid item counts as a miss.
    * ``mae``: mean absolute error over **valid** items, against the unrounded gold.
    * ``pearson``, ``spearman``: correlation over **valid** items between the
      prediction and the unrounded gold (Spearman uses average ranks for ties).
    * ``qwk``: quadratic weighted kappa over **valid** items between the
      prediction and the rounded gold, on integer categories (any range lo..hi
      holding the values gives the same kappa).

    Undefined metrics are None, with the reason in ``report["undefined"]``.

    Raises:
        ValueError: when the sequences differ in length, or a value is not a
            finite number (None is allowed in ``preds`` only).
    """
    if len(preds) != len(golds):
        raise ValueError(f"preds and golds differ in length: {len(preds)} vs {len(golds)}")
    for pred in preds:
        if pred is not None and not is_finite_number(pred):
            raise ValueError(f"predictions must be finite numbers or None, got {pred!r}")
    for gold in golds:
        if not is_finite_number(gold):
            raise ValueError(f"gold labels must be finite numbers, got {gold!r}")

    n = len(golds)
    valid = [(float(p), float(g)) for p, g in zip(preds, golds) if p is not None]
    vp = [p for p, _ in valid]
    vg = [g for _, g in valid]
    pairs = Counter(zip(map(round_half_up, vp), map(round_half_up, vg)))
    return _pointwise_report(n, len(valid), [(p, g, c) for (p, g), c in pairs.items()], vp, vg,
                             lambda: math.fsum(abs(p - g) for p, g in valid) / len(valid))


def _pointwise_report(n: int, m: int, pairs: list, vp, vg, mae) -> dict:
    """The `pointwise_metrics` report of n items, m of them valid (`vp`, `vg`: their predictions and golds;
    `pairs`: their distinct (rounded prediction, rounded gold, how many) integer pairs); the list way and the
    array way each give their own `mae()`, with the same exact sums."""
    hits = sum(c for p, g, c in pairs if p == g)
    near = sum(c for p, g, c in pairs if abs(p - g) <= 1)
    nothing = "no items" if n == 0 else "no valid items"
    reasons = {key: "no items" for key in ("coverage", "exact", "within1")}
    reasons.update({key: nothing for key in ("mae", "pearson", "spearman", "qwk")})
    pearson_r = spearman_r = qwk = None
    if m:
        constant = _undefined_if_constant(vp, vg)
        if constant:
            reasons["pearson"] = reasons["spearman"] = constant
        else:
            pearson_r = _pearson(vp, vg)
            spearman_r = _pearson(average_ranks(vp), average_ranks(vg))
        qwk, problem = _qwk(pairs, m)
        if problem:
            reasons["qwk"] = problem
    report = {"mode": "pointwise", "n": n, "n_valid": m, "coverage": _share(m, n), "exact": _share(hits, n),
              "within1": _share(near, n), "mae": mae() if m else None, "pearson": pearson_r, "spearman": spearman_r,
              "qwk": qwk}
    return _finalize(report, reasons)


_EXACT = 2.0 ** 50  # values within this are integers exactly after rounding, and their differences too
_SUM_CHUNK = 65536


def _fsum(values: np.ndarray) -> float:
    """`math.fsum` of an array, a chunk of Python floats at a time (fsum is exact: the order does not matter)."""
    return math.fsum(itertools.chain.from_iterable(values[k:k + _SUM_CHUNK].tolist()
                                                    for k in range(0, len(values), _SUM_CHUNK)))


def _pointwise_of_arrays(preds: np.ndarray, golds: np.ndarray) -> tuple:
    """(preds, golds, the `pointwise_metrics` report) of float64 arrays (NaN: an invalid prediction), bit for bit
    that of the lists of their values. Values that are not finite (a gold), or so large that rounding them is not
    exact, go the list way: then preds and golds are those lists."""
    preds, golds = np.asarray(preds, np.float64), np.asarray(golds, np.float64)
    valid = ~np.isnan(preds)
    vp, vg = (preds[valid], golds[valid]) if len(preds) == len(golds) else (preds, golds)
    if len(preds) != len(golds) or not np.isfinite(golds).all() or not np.isfinite(vp).all() \
            or (np.abs(vp) > _EXACT).any() or (np.abs(golds) > _EXACT).any():
        preds = [None if p != p else p for p in preds.tolist()]
        golds = golds.tolist()
        return preds, golds, pointwise_metrics(preds, golds)
    n, m = len(golds), len(vp)
    vp_int, vg_int = np.floor(vp + 0.5), np.floor(vg + 0.5)  # round_half_up
    pairs, _, counts = unique_rows(np.stack([vp_int, vg_int], axis=1)) if m else (np.zeros((0, 2)), None, [])
    pairs = [(int(p), int(g), int(c)) for (p, g), c in zip(pairs.tolist(), list(counts))]
    return preds, golds, _pointwise_report(n, m, pairs, vp, vg, lambda: _fsum(np.abs(vp - vg)) / m)


# --------------------------------------------------------------------------- pairwise


def pairwise_metrics(preds: Sequence[str | None], golds: Sequence[str]) -> dict:
    """Agreement of pairwise verdicts with gold preferences.

    ``preds[i]`` is ``"first"``, ``"second"``, ``"tie"``, ``"abstain"``, or
    None when the judge's output was invalid; ``golds[i]`` is ``"first"``,
    ``"second"`` or ``"tie"``. A prediction is *decisive* when it is first or
    second.

    Which items each entry counts:

    * ``n``: all items. ``n_decisive``: items with a decisive prediction.
    * ``accuracy``: share of **all** items whose prediction equals the gold.
      End to end: a tie, an abstention or an invalid output is an error,
      except that a tie is right when the gold is a tie.
    * ``valid_only_accuracy``: share of **decisive** predictions that equal the gold.
    * ``coverage``: n_decisive / n.
    * ``invalid_rate``, ``tie_rate``, ``abstain_rate``: share of **all** items
      predicted None, ``"tie"`` and ``"abstain"`` respectively.

    Raises:
        ValueError: when the sequences differ in length or hold an unknown value.
    """
    if len(preds) != len(golds):
        raise ValueError(f"preds and golds differ in length: {len(preds)} vs {len(golds)}")
    for pred in preds:
        if pred is not None and pred not in PAIRWISE_PREDICTIONS:
            raise ValueError(f"pairwise predictions must be one of {PAIRWISE_PREDICTIONS} or None, got {pred!r}")
    for gold in golds:
        if gold not in PAIRWISE_LABELS:
            raise ValueError(f"pairwise gold labels must be one of {PAIRWISE_LABELS}, got {gold!r}")

    n = len(golds)
    counts = Counter(preds)
    decisive = [(p, g) for p, g in zip(preds, golds) if p in ("first", "second")]
    correct = sum(p == g for p, g in zip(preds, golds))
    reasons = {key: "no items" for key in ("accuracy", "coverage", "invalid_rate", "tie_rate", "abstain_rate")}
    reasons["valid_only_accuracy"] = "no items" if n == 0 else "no decisive (first/second) predictions"
    report = {"mode": "pairwise", "n": n, "n_decisive": len(decisive), "accuracy": _share(correct, n),
              "valid_only_accuracy": _share(sum(p == g for p, g in decisive), len(decisive)),
              "coverage": _share(len(decisive), n), "invalid_rate": _share(counts[None], n),
              "tie_rate": _share(counts["tie"], n), "abstain_rate": _share(counts["abstain"], n)}
    return _finalize(report, reasons)


# --------------------------------------------------------------------------- bootstrap


def _resamples(columns: Sequence[Sequence], n_resamples: int, seed: int) -> Iterator[list[list]]:
    """Bootstrap resamples of parallel columns: the same item indices in every column.

    The indices are those :func:`gsrlang.analysis.resampling.draws` gives, so this one-at-a-time
    path and the vectorised one (:func:`metrics_with_confidence`) see the same resamples."""
    if not columns:
        raise ValueError("at least one data column is needed")
    n = len(columns[0])
    if any(len(column) != n for column in columns):
        raise ValueError(f"columns differ in length: {[len(c) for c in columns]}")
    for block in draws(n, n_resamples, seed):
        for indices in block.tolist():
            yield [[column[i] for i in indices] for column in columns]


def _interval(values: list[float], n_resamples: int, alpha: float, min_defined: float) -> list[float] | None:
    return percentile_interval(np.asarray(values, dtype=np.float64), n_resamples, alpha, min_defined)


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")


def bootstrap_ci(metric_fn: Callable[..., float | None], *columns: Sequence, n_resamples: int = 1000, seed: int = 0,
                 alpha: float = 0.05, min_defined: float = 0.5) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval for one metric.

    ``metric_fn(*columns)`` must return a float, or None when undefined. Each
    resample draws item indices with replacement and applies the same indices
    to every column, so paired data stay paired. Resamples on which the metric
    is undefined are skipped; if fewer than ``min_defined`` (a share of
    ``n_resamples``) remain, or there are no items, the result is None.

    The interval is the ``alpha/2`` and ``1 - alpha/2`` quantiles of the
    resampled values (linear interpolation). Results are reproducible for a
    given ``seed``, and match the intervals :func:`with_confidence` gives for
    the same data and seed.
    """
    _check_alpha(alpha)
    values = [v for v in (metric_fn(*sample) for sample in _resamples(columns, n_resamples, seed)) if v is not None]
    interval = _interval(values, n_resamples, alpha, min_defined)
    return None if interval is None else (interval[0], interval[1])


def metric_keys(report: Mapping) -> list[str]:
    """The metric entries of a flat report: float or None values (ints are counts)."""
    return [key for key, value in report.items()
            if key not in _NOT_METRICS and (value is None or isinstance(value, float))]


def with_confidence(report_fn: Callable[..., dict], *columns: Sequence, keys: Sequence[str] | None = None,
                    n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05, min_defined: float = 0.5) -> dict:
    """A flat report with a bootstrap confidence interval on each metric.

    ``report_fn(*columns)`` must return a flat report such as
    :func:`pointwise_metrics` or :func:`pairwise_metrics` give (bind extra
    arguments with ``functools.partial``). It is run once on the data, then
    once per resample. In the result every metric named in ``keys`` (default:
    every float-or-None entry of the report) becomes::

        {"value": 0.41, "ci95": [0.35, 0.47]}

    where the interval key is ``"ci95"`` for the default ``alpha=0.05`` and in
    general ``f"ci{100 * (1 - alpha):g}"`` (``"ci90"``, ``"ci99"``). The
    interval is None when the metric is undefined on the data, when
    ``n_resamples`` is 0, or when it is undefined on too many resamples (see
    :func:`bootstrap_ci`, whose intervals these match for the same seed).
    Counts, ``mode`` and ``undefined`` are copied unchanged, and
    ``report["bootstrap"]`` records ``n_resamples``, ``seed`` and ``alpha``.
    """
    _check_alpha(alpha)
    point = report_fn(*columns)
    chosen = metric_keys(point) if keys is None else list(keys)
    for key in chosen:
        if key not in point:
            raise KeyError(f"the report has no metric {key!r} (it has: {', '.join(point)})")
    wanted = [key for key in chosen if point[key] is not None]
    samples: dict[str, list[float]] = {key: [] for key in wanted}
    if wanted and n_resamples > 0:
        for sample in _resamples(columns, n_resamples, seed):
            resampled = report_fn(*sample)
            for key in wanted:
                if resampled[key] is not None:
                    samples[key].append(resampled[key])
    return _with_intervals(point, chosen, samples, n_resamples, seed, alpha, min_defined)


def metrics_with_confidence(mode: str, preds: Sequence, golds: Sequence, n_resamples: int = 1000, seed: int = 0,
                            alpha: float = 0.05, min_defined: float = 0.5, groups: Sequence | None = None) -> dict:
    """:func:`pointwise_metrics` or :func:`pairwise_metrics`, with a bootstrap interval on each metric: what
    :func:`with_confidence` gives for that report function and seed, computed over all resamples at once (numpy,
    :mod:`gsrlang.analysis.resampling`) instead of one report per resample. With ``groups`` (each item's group), a
    cluster bootstrap over the groups.

    Pointwise ``preds`` and ``golds`` may be float64 arrays, NaN for an invalid prediction: the same report, bit
    for bit, with no Python object made per item (a replay of a million items hands them so)."""
    _check_alpha(alpha)
    if mode == "pointwise" and isinstance(preds, np.ndarray):
        preds, golds, point = _pointwise_of_arrays(preds, golds)
    elif mode == "pointwise":
        point = pointwise_metrics(preds, golds)
    elif mode == "pairwise":
        point = pairwise_metrics(preds, golds)
    else:
        raise ValueError(f"mode must be 'pointwise' or 'pairwise', got {mode!r}")
    sample = (PointwiseSample if mode == "pointwise" else PairwiseSample)(preds, golds)
    (values,) = resampled([sample], n_resamples, seed, groups)
    return _with_intervals(point, metric_keys(point), values, n_resamples, seed, alpha, min_defined)


def _with_intervals(point: dict, keys: Sequence[str], samples: Mapping, n_resamples: int, seed: int, alpha: float,
                    min_defined: float) -> dict:
    """The report with each metric in ``keys`` as ``{"value": ..., "ci95": ...}``, the interval from the metric's
    resampled values ``samples[key]`` (None where the metric is undefined on the data or nothing was resampled),
    and the bootstrap's settings in ``bootstrap``."""
    ci_key = f"ci{100 * (1 - alpha):.10g}"
    result = dict(point)
    for key in keys:
        defined = point[key] is not None and n_resamples > 0
        result[key] = {"value": point[key], ci_key: _interval(samples[key], n_resamples, alpha, min_defined) if defined
                       else None}
    result["bootstrap"] = {"n_resamples": n_resamples, "seed": seed, "alpha": alpha}
    return result


def _plain_value(value: object) -> object:
    """The number behind a report entry, whether flat or ``{"value": ..., "ci95": ...}``."""
    return value["value"] if isinstance(value, Mapping) and "value" in value else value


def summarize_runs(reports: Sequence[Mapping]) -> dict:
    """Mean and spread of each metric over several runs of the same evaluation.

    Accepts flat reports or :func:`with_confidence` reports. For every numeric
    entry (counts included) the result holds::

        {"mean": 0.41, "sd": 0.02, "n": 3}

    where ``n`` is the number of runs in which the entry was defined (None
    values are left out), ``mean`` is None when it was defined in none, and
    ``sd`` is the sample standard deviation (n - 1 denominator), None when
    fewer than two runs defined it.
    """
    import statistics  # (here: with fractions and decimal, it is a cost to every command's start-up)

    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    keys = dict.fromkeys(key for report in reports for key, value in report.items()
                         if key not in _NOT_METRICS and (_plain_value(value) is None or number(_plain_value(value))))
    summary = {}
    for key in keys:
        defined = [float(v) for v in map(_plain_value, (r.get(key) for r in reports)) if number(v)]
        summary[key] = {"mean": statistics.fmean(defined) if defined else None,
                        "sd": statistics.stdev(defined) if len(defined) >= 2 else None, "n": len(defined)}
    return summary


# --------------------------------------------------------------------------- results files


def read_results(path: str | Path) -> Iterator[dict]:
    """Stream the JSON objects of a results JSONL file, skipping blank lines.

    Raises:
        DataError: when the file is missing or not UTF-8, or a line is not a
            JSON object (the message gives the line number).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    return (record for _, record in numbered_results(path))


def numbered_results(path: Path, ends: dict | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each result line of a results file (its end-of-run line skipped).

    `ends[path]` becomes True when the file ends with an end-of-run line saying its run
    completed (`{"kind": "run_summary", "complete": true, ...}`), False otherwise."""
    for line, record in read_jsonl(path, DataError):
        if ends is not None:
            ends[path] = record.get("kind") == "run_summary" and record.get("complete") is True
        if record.get("kind") != "run_summary":
            problem = recorded_label_problem(record.get("label"), result_mode(record), record.get("scale"))
            if problem:
                raise DataError(f"{path}: line {line}: {problem} (was the file edited?)")
            yield line, record


def result_mode(record: Mapping) -> str | None:
    mode = record.get("mode")
    if mode is not None:
        return mode
    return "pairwise" if "winner" in record else "pointwise" if "score" in record else None


def metrics_from_results(path: str | Path | Sequence[str | Path], bootstrap: int = 1000, seed: int = 0,
                         groups: Mapping | None = None) -> dict:
    """Agreement metrics, with bootstrap intervals, for a results JSONL file (or several: one per run).

    Several files are several runs of the same items (e.g. the same program judged
    by a model with different seeds): each file is a run, named by its file name
    (and, when its lines carry ``run``, by that too), and ``summary`` gives means
    and standard deviations over them.

    Each line describes one judged item: ``status`` (``"ok"``, ``"invalid"``
    or ``"failed"``), ``mode``, the prediction (``score`` for pointwise,
    ``winner`` for pairwise) and the gold ``label``; optionally ``run`` (an int)
    and ``scale`` (``[lo, hi]``). The mode is read from the lines (or, where a
    line lacks it, inferred from whether it has ``winner`` or ``score``), and
    all lines must agree on it and on the scale.

    * A line whose status is not ``"ok"``, or whose prediction is null, counts
      as an invalid prediction (None).
    * A line whose label is null is left out and counted in ``n_unlabeled``.
    * Lines with the same ``id`` in the same run: the later line wins (a resumed
      run rewrites the item); they are counted in ``n_superseded``.
    * Lines are grouped by ``run``; all lines must have one, or none.

    * A file's last line ``{"kind": "run_summary", "complete": true, ...}`` says its
      run went to the end of its data; a file without it (a killed run, a run still
      going, an older gsr) is listed in ``incomplete``.

    Returns a dict with ``path``, ``mode``, ``scale``, ``n_lines``, ``incomplete``,
    ``n_unlabeled``, ``n_superseded``, ``status_counts``, ``bootstrap``, and
    ``runs`` (run id -> :func:`with_confidence` report; the id is None when the
    lines carry no run). With one run, ``metrics`` is that run's report; with
    several runs of one program, ``summary`` is :func:`summarize_runs` over them; several files of
    *different* programs are not repeats, so there is no summary: ``side_by_side`` is true and each
    file's report stands in ``runs`` (shown in columns by :func:`format_report`). ``groups`` ({item id:
    group}, None or a missing id: a group of its own) makes each interval a cluster bootstrap over groups.

    Raises:
        DataError: for an unreadable file, a file with no result lines, mixed
            modes, scales or run fields, or a malformed prediction or label.
    """
    paths = [Path(p) for p in path] if isinstance(path, (list, tuple)) else [Path(path)]
    several = len(paths) > 1
    mode: str | None = None
    scale: tuple[float, float] | None = None
    statuses: Counter[str] = Counter()
    runs: dict[object, dict[object, tuple[object, object]]] = {}
    n_lines = n_unlabeled = n_superseded = 0
    has_run: bool | None = None
    programs: dict[str, set] = {}  # file -> the program hashes its lines name

    ends: dict = {}
    for path, line, record in ((p, n, r) for p in paths for n, r in numbered_results(p, ends)):
        n_lines += 1
        source = record.get("program")
        programs.setdefault(str(path), set()).add(
            (source.get("name"), source.get("hash")) if isinstance(source, Mapping) else (None, None))
        where = f"{path}: line {line}"
        line_mode = result_mode(record)
        if line_mode not in ("pointwise", "pairwise"):
            raise DataError(f"{where}: cannot tell the mode (expected 'pointwise' or 'pairwise', got {line_mode!r})")
        if mode is None:
            mode = line_mode
        elif line_mode != mode:
            raise DataError(f"{where}: mode {line_mode!r} differs from earlier lines ({mode!r})")
        if record.get("scale") is not None:
            line_scale = _read_scale(record["scale"], where)
            if scale is None:
                scale = line_scale
            elif line_scale != scale:
                raise DataError(f"{where}: scale {list(line_scale)} differs from earlier lines ({list(scale)})")
        if several:  # each file is a run
            run_id = path.name if "run" not in record else f"{path.name}#{record['run']}"
        else:
            if has_run is None:
                has_run = "run" in record
            elif has_run != ("run" in record):
                raise DataError(f"{where}: some lines have a 'run' field and some do not")
            run_id = record.get("run")

        status = str(record.get("status"))
        statuses[status] += 1
        items = runs.setdefault(run_id, {})
        if record.get("label") is None:
            n_unlabeled += 1
            continue
        gold, pred = (pointwise_line if mode == "pointwise" else pairwise_line)(record, status, where)
        key = record.get("id", ("line", line))
        if key in items:
            n_superseded += 1
            del items[key]  # keep the order of the latest write
        items[key] = (pred, gold)

    if mode is None:
        raise DataError(f"{', '.join(map(str, paths))}: no result lines")

    per_run = {}
    for run_id in _sorted_runs(runs):
        pairs = list(runs[run_id].values())
        item_groups = None if groups is None else [groups.get(str(k)) for k in runs[run_id]]
        per_run[run_id] = metrics_with_confidence(mode, [p for p, _ in pairs], [g for _, g in pairs],
                                                  n_resamples=bootstrap, seed=seed, groups=item_groups)

    result = {"path": ", ".join(str(p) for p in paths), "mode": mode,
              "scale": list(scale) if scale is not None else None, "n_lines": n_lines, "n_unlabeled": n_unlabeled,
              "n_superseded": n_superseded, "status_counts": dict(statuses),
              "bootstrap": {"n_resamples": bootstrap, "seed": seed, "alpha": 0.05}, "runs": per_run,
              "incomplete": [str(p) for p in paths if not ends.get(p)]}
    if several:
        result["programs"] = {p: [{"name": n, "hash": h} for n, h in sorted(v, key=str)] for p, v in programs.items()}
        named = {h for v in programs.values() for _, h in v}
        result["same_program"] = None if None in named else len(named) == 1
    if len(per_run) == 1:
        result["metrics"] = next(iter(per_run.values()))
    elif several and result["same_program"] is False:
        result["side_by_side"] = True  # different programs: not repeats, so no mean over them
    else:
        result["summary"] = summarize_runs(list(per_run.values()))
    return result


def _sorted_runs(runs: Mapping) -> list:
    try:
        return sorted(runs)
    except TypeError:
        return list(runs)


def _read_scale(value: object, where: str) -> tuple[float, float]:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(map(is_finite_number, value)) \
            and value[0] <= value[1]:
        return (value[0], value[1])
    raise DataError(f"{where}: 'scale' must be [lo, hi] with lo <= hi, got {value!r}")


def pointwise_line(record: Mapping, status: str, where: str) -> tuple[float, float | None]:
    try:
        gold = parse_pointwise_label(record["label"])
    except ValueError as error:
        raise DataError(f"{where}: {error}") from None
    score = record.get("score")
    if status != "ok" or score is None:
        return gold, None
    if not is_finite_number(score):
        raise DataError(f"{where}: 'score' must be a number or null, got {score!r}")
    return gold, score


def pairwise_line(record: Mapping, status: str, where: str) -> tuple[str, str | None]:
    gold = record["label"]
    if gold not in PAIRWISE_LABELS:
        raise DataError(f"{where}: a pairwise 'label' must be one of {PAIRWISE_LABELS} or null, got {gold!r}")
    winner = record.get("winner")
    if status != "ok" or winner is None:
        return gold, None
    if winner not in PAIRWISE_PREDICTIONS:
        raise DataError(f"{where}: 'winner' must be one of {PAIRWISE_PREDICTIONS} or null, got {winner!r}")
    return gold, winner


# --------------------------------------------------------------------------- formatting


def _format_number(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _metric_rows(report: Mapping) -> tuple[list[tuple[str, str, str]], str]:
    """(metric, value, interval) rows of a flat or with_confidence report, and the CI header."""
    undefined = report.get("undefined", {})
    ci_header = "95% CI"
    rows = []
    for key, entry in report.items():
        if key in _NOT_METRICS:
            continue
        interval: object = ""
        value = entry
        if isinstance(entry, Mapping):
            if "value" not in entry:
                continue
            value = entry["value"]
            ci_keys = [k for k in entry if k.startswith("ci")]
            if ci_keys:
                ci_header = f"{ci_keys[0][2:]}% CI"
                bounds = entry[ci_keys[0]]
                interval = "-" if bounds is None else f"[{bounds[0]:.3f}, {bounds[1]:.3f}]"
        if value is None:
            reason = undefined.get(key)
            rows.append((key, f"undefined ({reason})" if reason else "undefined", ""))
        elif isinstance(value, (int, float)):
            rows.append((key, _format_number(value), str(interval)))
    return rows, ci_header


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Left-aligned first column, other columns right-aligned; long cells may overflow."""
    short_rows = [row for row in rows if not row[1].startswith("undefined")]
    widths = [max(len(str(cells[i])) for cells in [header, *short_rows]) for i in range(len(header))]
    lines = []
    for cells in [header, *rows]:
        if cells[1].startswith("undefined"):
            lines.append(f"{indent}{cells[0]:<{widths[0]}}  {cells[1]}")
            continue
        parts = [f"{cells[0]:<{widths[0]}}"] + [f"{cell:>{width}}" for cell, width in zip(cells[1:], widths[1:])]
        lines.append(indent + "  ".join(parts).rstrip())
    return lines


def _format_flat(report: Mapping, indent: str = "") -> list[str]:
    rows, ci_header = _metric_rows(report)
    if any(row[2] for row in rows):
        return _table(("metric", "value", ci_header), rows, indent)
    return _table(("metric", "value"), [row[:2] for row in rows], indent)


def _side_by_side(runs: Mapping) -> list[str]:
    """One row per metric, one column per run (value and interval), for runs of different programs."""
    tables = {run_id: {row[0]: row for row in _metric_rows(r)[0]} for run_id, r in runs.items()}
    keys = dict.fromkeys(k for rows in tables.values() for k in rows)
    header = ["metric"] + [str(run_id) for run_id in runs]
    def cell(row) -> str:
        return "-" if row is None else row[1] if not row[2] or row[2] == "-" else f"{row[1]} {row[2]}"

    body = [[key] + [cell(rows.get(key)) for rows in tables.values()] for key in keys]
    width = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return ["  " + "  ".join(c.ljust(width[0]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(r)).rstrip()
            for r in [header, *body]]


def format_report(report: Mapping) -> str:
    """Render a report as a compact, aligned plain-text table.

    Accepts a flat report (:func:`pointwise_metrics`, :func:`pairwise_metrics`),
    a :func:`with_confidence` report, or a :func:`metrics_from_results` report
    (header line, then the single run's table, or a mean/sd summary over runs
    followed by one table per run). Floats are shown with three decimals; an
    undefined metric is shown as ``undefined (reason)``.
    """
    if "runs" not in report:
        return "\n".join(([f"{report['mode']}"] if report.get("mode") else []) + _format_flat(report))

    lines = [f"{report['mode']} results: {report['path']}"]
    details = [f"{report['n_lines']} lines"]
    if report.get("n_unlabeled"):
        details.append(f"{report['n_unlabeled']} without a label excluded")
    if report.get("n_superseded"):
        details.append(f"{report['n_superseded']} superseded by a later line")
    statuses = report.get("status_counts") or {}
    if statuses:
        details.append("status " + ", ".join(f"{name} {count}" for name, count in sorted(statuses.items())))
    if report.get("scale"):
        lo, hi = report["scale"]
        details.append(f"scale {_format_number(lo)}..{_format_number(hi)}")
    lines.append("; ".join(details))

    if "metrics" in report:
        return "\n".join(lines + _format_flat(report["metrics"]))

    runs = report["runs"]
    if report.get("same_program") is True:
        (first,) = {e["hash"] for v in report["programs"].values() for e in v}
        lines.append(f"several runs of one program ({first.split(':')[-1][:12]})")
    elif report.get("same_program") is False:
        lines.append("different programs: not repeats of one program, so side by side (no mean over them)")
        for path, entries in report["programs"].items():
            lines.append(f"  {path}: " + ", ".join(f"{e['name']} ({(e['hash'] or '?').split(':')[-1][:12]})"
                                                   for e in entries))
    if report.get("side_by_side"):
        return "\n".join(lines + _side_by_side(runs))
    lines.append(f"summary over {len(runs)} runs")
    summary_rows = [(key, "n/a" if stats["mean"] is None else _format_number(stats["mean"]),
                     "-" if stats["sd"] is None else _format_number(stats["sd"]), str(stats["n"]))
                    for key, stats in report["summary"].items()]
    lines += _table(("metric", "mean", "sd", "runs"), summary_rows, indent="  ")
    for run_id, run_report in runs.items():
        lines.append(f"run {run_id}")
        lines += _format_flat(run_report, indent="  ")
    return "\n".join(lines)
