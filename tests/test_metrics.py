"""Tests for gsrlang.analysis.metrics: hand-computed cases, properties, results files, real data."""

from __future__ import annotations

import json
import math
import random
import statistics
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_datasets import LLMBAR, TOPICAL_CHAT, needs_llmbar, needs_topical_chat  # noqa: E402

from gsrlang.analysis.metrics import (
    bootstrap_ci,
    format_report,
    metrics_from_results,
    metrics_with_confidence,
    pairwise_metrics,
    pearson,
    pointwise_metrics,
    quadratic_weighted_kappa,
    read_results,
    round_half_up,
    spearman,
    summarize_runs,
    with_confidence,
)
from gsrlang.files.dataset import ColumnMap, DataError, parse_pairwise_label, parse_pointwise_label, read_items

POINTWISE_KEYS = ("coverage", "exact", "within1", "mae", "pearson", "spearman", "qwk")
PAIRWISE_KEYS = ("accuracy", "valid_only_accuracy", "coverage", "invalid_rate", "tie_rate", "abstain_rate")


def write_results(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- building blocks


@pytest.mark.parametrize("x, expected", [(2.5, 3), (3.5, 4), (2.49, 2), (4.6666666667, 5), (1.3333333333, 1), (-0.5, 0)])
def test_round_half_up(x, expected):
    assert round_half_up(x) == expected


def test_qwk_hand_computed():
    # preds [1,2,3,3] vs golds [1,2,2,3], categories 1..3, weights (i-j)^2/(3-1)^2.
    # Observed: one disagreement, (3,2), weight 1/4 -> weighted disagreement 0.25.
    # Marginals: preds (1,1,2), golds (1,2,1), N = 4; E[i][j] = p_i g_j / 4.
    # Sum p_i g_j (i-j)^2 = (1*2*1 + 1*1*4) + (1*1*1 + 1*1*1) + (2*1*4 + 2*2*1) = 6 + 2 + 12 = 20,
    # so expected weighted disagreement = 20 / 4 / 4 = 1.25 and kappa = 1 - 0.25 / 1.25 = 0.8.
    assert quadratic_weighted_kappa([1, 2, 3, 3], [1, 2, 2, 3]) == pytest.approx(0.8)
    assert pointwise_metrics([1, 2, 3, 3], [1, 2, 2, 3])["qwk"] == pytest.approx(0.8)


def test_qwk_perfect_and_chance_and_undefined():
    assert quadratic_weighted_kappa([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    # One rater constant: observed disagreement equals what chance predicts.
    assert quadratic_weighted_kappa([3, 3, 3], [1, 2, 3]) == pytest.approx(0.0)
    assert quadratic_weighted_kappa([2, 2], [2, 2]) is None
    assert quadratic_weighted_kappa([], []) is None


def test_qwk_does_not_depend_on_empty_outer_categories():
    # Quadratic weights are normalised by (k-1)^2, which cancels in the ratio;
    # categories nobody used add nothing to either sum.
    preds, golds = [1, 2, 3, 3, 2], [1, 3, 2, 3, 2]
    assert quadratic_weighted_kappa(preds, golds, 1, 5) == pytest.approx(quadratic_weighted_kappa(preds, golds))


def test_spearman_with_ties_hand_computed():
    # x ranks: [1, 2.5, 2.5, 4]; y ranks: [1, 3, 2, 4]; both means 2.5.
    # Deviations x: [-1.5, 0, 0, 1.5], y: [-1.5, .5, -.5, 1.5].
    # cov = 2.25 + 2.25 = 4.5; Sxx = 4.5; Syy = 2.25 + .25 + .25 + 2.25 = 5.
    # rho = 4.5 / sqrt(4.5 * 5) = sqrt(0.9).
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(0.9))


def test_pearson_hand_computed_and_undefined():
    # x = [1,2,3], y = [2,4,7]: dx = [-1,0,1], dy = [-7/3,-1/3,8/3]; cov = 15/3 = 5, Sxx = 2,
    # Syy = (49 + 1 + 64) / 9 = 114/9, so r = 5 / sqrt(2 * 114/9).
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 114 / 9))
    assert pearson([3, 3, 3], [1, 2, 3]) is None
    assert pearson([1, 2, 3], [0.1, 0.1, 0.1]) is None
    assert pearson([1], [2]) is None


# --------------------------------------------------------------------------- pointwise


def test_pointwise_hand_computed_with_an_invalid_item():
    preds = [4, None, 2, 5]
    golds = [4.33, 3.0, 2.5, 2.67]  # rounded half up: 4, 3, 3, 3
    report = pointwise_metrics(preds, golds)
    assert report["n"] == 4 and report["n_valid"] == 3
    assert report["coverage"] == pytest.approx(0.75)
    assert report["exact"] == pytest.approx(1 / 4)  # item 1 only; the invalid item is a miss
    assert report["within1"] == pytest.approx(2 / 4)  # items 1 and 3 (2 vs 3)
    assert report["mae"] == pytest.approx((0.33 + 0.5 + 2.33) / 3)  # valid only, unrounded golds
    assert report["undefined"] == {}


def test_pointwise_rounds_golds_half_up_not_to_even():
    report = pointwise_metrics([3, 4], [2.5, 4.5])
    assert report["exact"] == 0.5  # 2.5 -> 3 (a hit); 4.5 -> 5 (a miss)


def test_pointwise_zero_variance_is_undefined_not_zero():
    report = pointwise_metrics([3, 3, 3], [1.0, 2.0, 4.0])
    assert report["pearson"] is None and report["spearman"] is None
    assert report["undefined"]["pearson"] == "zero variance in the predictions"
    report = pointwise_metrics([1, 2, 3], [2.0, 2.0, 2.0])
    assert report["undefined"]["spearman"] == "zero variance in the gold labels"


def test_pointwise_empty_and_all_invalid():
    empty = pointwise_metrics([], [])
    assert empty["n"] == 0
    for key in POINTWISE_KEYS:
        assert empty[key] is None
        assert empty["undefined"][key] == "no items"
    invalid = pointwise_metrics([None, None], [3.0, 4.0])
    assert invalid["coverage"] == 0.0 and invalid["exact"] == 0.0 and invalid["within1"] == 0.0
    for key in ("mae", "pearson", "spearman", "qwk"):
        assert invalid[key] is None
        assert invalid["undefined"][key] == "no valid items"


def test_pointwise_single_category_qwk_undefined():
    report = pointwise_metrics([3, 3], [3.0, 3.2])
    assert report["qwk"] is None
    assert "one category" in report["undefined"]["qwk"]
    assert report["exact"] == 1.0


def test_pointwise_rejects_bad_input():
    with pytest.raises(ValueError, match="differ in length"):
        pointwise_metrics([1], [1, 2])
    with pytest.raises(ValueError, match="gold labels must be finite"):
        pointwise_metrics([1], [None])
    with pytest.raises(ValueError, match="predictions must be finite"):
        pointwise_metrics([float("nan")], [1])
    with pytest.raises(ValueError, match="predictions must be finite"):
        pointwise_metrics(["4"], [1])


scores = st.integers(1, 5)
thirds = st.integers(3, 15).map(lambda k: k / 3)  # means of three 1..5 ratings


@st.composite
def pointwise_samples(draw):
    golds = draw(st.lists(thirds, min_size=1, max_size=30))
    preds = draw(st.lists(st.one_of(st.none(), scores), min_size=len(golds), max_size=len(golds)))
    return preds, golds


@settings(max_examples=60, deadline=None)
@given(pointwise_samples(), st.randoms(use_true_random=False))
def test_pointwise_properties(sample, rnd):
    preds, golds = sample
    report = pointwise_metrics(preds, golds)
    assert report["exact"] <= report["within1"] <= report["coverage"] <= 1
    for key in ("pearson", "spearman", "qwk"):
        value = report[key]
        assert (value is None) == (key in report["undefined"])
        if value is not None:
            assert -1 - 1e-9 <= value <= 1 + 1e-9
    order = list(range(len(golds)))
    rnd.shuffle(order)
    shuffled = pointwise_metrics([preds[i] for i in order], [golds[i] for i in order])
    for key in ("n", "n_valid", *POINTWISE_KEYS):
        assert shuffled[key] == pytest.approx(report[key])
    assert shuffled["undefined"] == report["undefined"]


# --------------------------------------------------------------------------- pairwise


def test_pairwise_hand_computed():
    preds = ["first", "second", "tie", "abstain", None, "tie", "first"]
    golds = ["first", "first", "first", "second", "second", "tie", "second"]
    report = pairwise_metrics(preds, golds)
    assert report["n"] == 7 and report["n_decisive"] == 3
    assert report["accuracy"] == pytest.approx(2 / 7)  # item 1, and item 6 (tie on a tie)
    assert report["valid_only_accuracy"] == pytest.approx(1 / 3)  # items 1, 2, 7 are decisive
    assert report["coverage"] == pytest.approx(3 / 7)
    assert report["invalid_rate"] == pytest.approx(1 / 7)
    assert report["tie_rate"] == pytest.approx(2 / 7)
    assert report["abstain_rate"] == pytest.approx(1 / 7)
    assert report["undefined"] == {}


def test_pairwise_without_decisive_predictions():
    report = pairwise_metrics(["tie", None], ["first", "tie"])
    assert report["accuracy"] == 0.0
    assert report["valid_only_accuracy"] is None
    assert report["undefined"] == {"valid_only_accuracy": "no decisive (first/second) predictions"}
    empty = pairwise_metrics([], [])
    assert all(empty[key] is None for key in PAIRWISE_KEYS)
    assert set(empty["undefined"]) == set(PAIRWISE_KEYS)


def test_pairwise_rejects_unknown_values():
    with pytest.raises(ValueError, match="pairwise predictions"):
        pairwise_metrics(["A"], ["first"])
    with pytest.raises(ValueError, match="pairwise gold labels"):
        pairwise_metrics(["first"], ["abstain"])
    with pytest.raises(ValueError, match="differ in length"):
        pairwise_metrics([], ["first"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["first", "second", "tie", "abstain", None]), st.sampled_from(["first", "second", "tie"])),
        min_size=1,
        max_size=30,
    ),
    st.randoms(use_true_random=False),
)
def test_pairwise_properties(pairs, rnd):
    preds = [p for p, _ in pairs]
    golds = [g for _, g in pairs]
    report = pairwise_metrics(preds, golds)
    rates = report["coverage"] + report["invalid_rate"] + report["tie_rate"] + report["abstain_rate"]
    assert rates == pytest.approx(1.0)
    assert report["accuracy"] <= report["coverage"] + report["tie_rate"] + 1e-12
    rnd.shuffle(pairs)
    shuffled = pairwise_metrics([p for p, _ in pairs], [g for _, g in pairs])
    for key in PAIRWISE_KEYS:
        assert shuffled[key] == pytest.approx(report[key])


# --------------------------------------------------------------------------- bootstrap


def _sample_pointwise(n: int = 120, seed: int = 3) -> tuple[list, list]:
    rng = random.Random(seed)
    golds = [rng.randint(3, 15) / 3 for _ in range(n)]
    preds = [None if rng.random() < 0.05 else min(5, max(1, round(g + rng.gauss(0, 0.8)))) for g in golds]
    return preds, golds


def test_bootstrap_ci_is_reproducible_and_contains_the_estimate():
    preds, golds = _sample_pointwise()
    exact = lambda p, g: pointwise_metrics(p, g)["exact"]  # noqa: E731
    first = bootstrap_ci(exact, preds, golds, n_resamples=300, seed=7)
    assert first == bootstrap_ci(exact, preds, golds, n_resamples=300, seed=7)
    assert first != bootstrap_ci(exact, preds, golds, n_resamples=300, seed=8)
    low, high = first
    assert low <= exact(preds, golds) <= high
    narrow = bootstrap_ci(exact, preds, golds, n_resamples=300, seed=7, alpha=0.5)
    assert low <= narrow[0] <= narrow[1] <= high


def test_bootstrap_ci_keeps_columns_paired():
    # Only paired resampling keeps every resampled pair equal.
    xs = list(range(50))
    agree = lambda a, b: float(all(x == y for x, y in zip(a, b)))  # noqa: E731
    assert bootstrap_ci(agree, xs, list(xs), n_resamples=50) == (1.0, 1.0)


def test_bootstrap_ci_undefined_cases():
    assert bootstrap_ci(lambda xs: None, [1, 2, 3], n_resamples=50) is None
    assert bootstrap_ci(lambda xs: 1.0, [], n_resamples=50) is None
    assert bootstrap_ci(lambda xs: 1.0, [1], n_resamples=0) is None
    # Defined on roughly 10% of resamples: too few by default, enough with a lower threshold.
    rare = lambda xs: 1.0 if xs[0] == 0 else None  # noqa: E731
    column = [0] + [1] * 9
    assert bootstrap_ci(rare, column, n_resamples=200) is None
    assert bootstrap_ci(rare, column, n_resamples=200, min_defined=0.02) == (1.0, 1.0)
    with pytest.raises(ValueError, match="columns differ in length"):
        bootstrap_ci(lambda a, b: 1.0, [1], [1, 2])
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci(lambda a: 1.0, [1], alpha=1.5)


def test_with_confidence_shape_and_agreement_with_bootstrap_ci():
    preds, golds = _sample_pointwise()
    report = with_confidence(pointwise_metrics, preds, golds, n_resamples=200, seed=1)
    assert report["n"] == 120 and report["mode"] == "pointwise"
    assert report["bootstrap"] == {"n_resamples": 200, "seed": 1, "alpha": 0.05}
    for key in POINTWISE_KEYS:
        entry = report[key]
        assert set(entry) == {"value", "ci95"}
        low, high = entry["ci95"]
        assert low <= entry["value"] <= high, key
    mae = lambda p, g: pointwise_metrics(p, g)["mae"]  # noqa: E731
    assert tuple(report["mae"]["ci95"]) == bootstrap_ci(mae, preds, golds, n_resamples=200, seed=1)


def _same_intervals(fast: dict, slow: dict, keys) -> None:
    for key in keys:
        assert fast[key]["value"] == slow[key]["value"], key
        a, b = fast[key]["ci95"], slow[key]["ci95"]
        assert (a is None) == (b is None), (key, a, b)
        if a is not None:
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12), key


def test_vectorised_bootstrap_matches_one_report_per_resample():
    """metrics_with_confidence (all resamples at once, numpy) gives what with_confidence gives by running
    pointwise_metrics / pairwise_metrics on each resample in turn, for the same seed."""
    preds, golds = _sample_pointwise(150)
    fast = metrics_with_confidence("pointwise", preds, golds, n_resamples=300, seed=4)
    slow = with_confidence(pointwise_metrics, preds, golds, n_resamples=300, seed=4)
    assert fast == {**slow, **{k: fast[k] for k in POINTWISE_KEYS}}  # counts, undefined and bootstrap alike
    _same_intervals(fast, slow, POINTWISE_KEYS)
    rng = random.Random(2)
    verdicts = [rng.choice(["first", "second", "tie", "abstain", None]) for _ in range(150)]
    gold = [rng.choice(["first", "second", "tie"]) for _ in range(150)]
    _same_intervals(metrics_with_confidence("pairwise", verdicts, gold, n_resamples=300, seed=4),
                    with_confidence(pairwise_metrics, verdicts, gold, n_resamples=300, seed=4), PAIRWISE_KEYS)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(1, 4)), st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0 / 3])),
                max_size=7), st.integers(0, 5))
def test_vectorised_bootstrap_agrees_on_small_and_degenerate_samples(pairs, seed):
    # few items: many resamples leave a metric undefined (constant sides, no valid item, all in one category)
    preds, golds = [p for p, _ in pairs], [g for _, g in pairs]
    fast = metrics_with_confidence("pointwise", preds, golds, n_resamples=40, seed=seed, min_defined=0.2)
    slow = with_confidence(pointwise_metrics, preds, golds, n_resamples=40, seed=seed, min_defined=0.2)
    _same_intervals(fast, slow, POINTWISE_KEYS)


def test_bootstrap_intervals_match_scipy():
    """An independent check: scipy.stats.bootstrap (percentile method, same seed: the same resampled indices)
    with the metrics computed by numpy and scipy.stats gives the same intervals."""
    np = pytest.importorskip("numpy")
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(5)
    golds = [rng.randint(3, 15) / 3 for _ in range(90)]
    preds = [min(5, max(1, round(g + rng.gauss(0, 0.8)))) for g in golds]
    p, g = np.array(preds, dtype=float), np.array(golds, dtype=float)

    def qwk(a, b):  # textbook: observed and expected confusion matrices over categories 1..5
        a, b = np.floor(a + 0.5).astype(int) - 1, np.floor(b + 0.5).astype(int) - 1
        observed = np.zeros((5, 5))
        np.add.at(observed, (a, b), 1)
        expected = np.outer(observed.sum(1), observed.sum(0)) / len(a)
        weights = (np.subtract.outer(np.arange(5), np.arange(5)) / 4.0) ** 2
        return 1 - (weights * observed).sum() / (weights * expected).sum()

    independent = {"exact": lambda a, b: np.mean(np.floor(a + 0.5) == np.floor(b + 0.5)),
                   "within1": lambda a, b: np.mean(np.abs(np.floor(a + 0.5) - np.floor(b + 0.5)) <= 1),
                   "mae": lambda a, b: np.mean(np.abs(a - b)),
                   "pearson": lambda a, b: stats.pearsonr(a, b).statistic,
                   "spearman": lambda a, b: stats.spearmanr(a, b).statistic,
                   "qwk": qwk}
    ours = metrics_with_confidence("pointwise", preds, golds, n_resamples=400, seed=11)
    for key, statistic in independent.items():
        theirs = stats.bootstrap((np.arange(len(g)),), lambda i: statistic(p[i], g[i]), n_resamples=400,
                                 method="percentile", vectorized=False, rng=np.random.default_rng(11))
        ci = theirs.confidence_interval
        assert ours[key]["ci95"] == pytest.approx([ci.low, ci.high], rel=1e-9), key
        assert ours[key]["value"] == pytest.approx(statistic(p, g), rel=1e-9), key


def test_paired_intervals_match_scipy():
    """gsr compare's paired intervals: the difference B - A on the same resamples, checked against scipy."""
    np = pytest.importorskip("numpy")
    stats = pytest.importorskip("scipy.stats")
    from gsrlang.analysis.stats import paired_report

    a, golds = _sample_pointwise(100, seed=8)
    a = [3 if x is None else x for x in a]
    b = [min(5, x + 1) if i % 4 == 0 else x for i, x in enumerate(a)]
    pa, pb, g = (np.array(x, dtype=float) for x in (a, b, golds))
    report = paired_report("pointwise", a, b, golds, n_resamples=300, seed=2)

    def mae_diff(i):
        return np.mean(np.abs(pb[i] - g[i])) - np.mean(np.abs(pa[i] - g[i]))

    ci = stats.bootstrap((np.arange(len(g)),), mae_diff, n_resamples=300, method="percentile", vectorized=False,
                         rng=np.random.default_rng(2)).confidence_interval
    assert report["mae"]["diff"] == pytest.approx(mae_diff(np.arange(len(g))))
    assert report["mae"]["ci95"] == pytest.approx([ci.low, ci.high], rel=1e-9)
    assert report["mae"]["ci95"][0] <= report["mae"]["diff"] <= report["mae"]["ci95"][1]


def test_with_confidence_options():
    preds, golds = _sample_pointwise(40)
    report = with_confidence(pointwise_metrics, preds, golds, keys=("exact",), n_resamples=100, alpha=0.1)
    assert set(report["exact"]) == {"value", "ci90"}
    assert isinstance(report["mae"], float)  # not asked for: left as is
    no_ci = with_confidence(pointwise_metrics, preds, golds, n_resamples=0)
    assert all(no_ci[key]["ci95"] is None for key in POINTWISE_KEYS)
    constant = with_confidence(pointwise_metrics, [3] * 10, [1.0, 2.0] * 5, n_resamples=50)
    assert constant["pearson"] == {"value": None, "ci95": None}
    assert constant["undefined"]["pearson"] == "zero variance in the predictions"
    with pytest.raises(KeyError, match="no metric 'kappa'"):
        with_confidence(pointwise_metrics, preds, golds, keys=("kappa",), n_resamples=10)


def test_with_confidence_with_extra_arguments_and_pairwise():
    preds, golds = _sample_pointwise(40)
    report = with_confidence(pointwise_metrics, preds, golds, n_resamples=50)
    assert report["qwk"]["value"] == pointwise_metrics(preds, golds)["qwk"]
    pair = with_confidence(pairwise_metrics, ["first", "second"] * 10, ["first"] * 20, n_resamples=50)
    assert pair["accuracy"]["value"] == 0.5 and pair["n_decisive"] == 20


# --------------------------------------------------------------------------- runs


def test_summarize_runs_hand_computed():
    runs = [
        {"mode": "pointwise", "n": 10, "exact": 0.4, "pearson": None, "undefined": {"pearson": "zero variance"}},
        {"mode": "pointwise", "n": 10, "exact": 0.5, "pearson": 0.2, "undefined": {}},
        {"mode": "pointwise", "n": 10, "exact": {"value": 0.6, "ci95": [0.5, 0.7]}, "pearson": 0.4, "undefined": {}},
    ]
    summary = summarize_runs(runs)
    assert set(summary) == {"n", "exact", "pearson"}
    assert summary["exact"]["mean"] == pytest.approx(0.5)
    assert summary["exact"]["sd"] == pytest.approx(0.1)  # sqrt(((-.1)^2 + 0 + .1^2) / 2)
    assert summary["exact"]["n"] == 3
    assert summary["pearson"] == {"mean": pytest.approx(0.3), "sd": pytest.approx(math.sqrt(0.02)), "n": 2}
    assert summary["n"] == {"mean": 10.0, "sd": 0.0, "n": 3}


def test_summarize_runs_with_too_few_values():
    summary = summarize_runs([{"exact": 0.5, "qwk": None}])
    assert summary["exact"] == {"mean": 0.5, "sd": None, "n": 1}
    assert summary["qwk"] == {"mean": None, "sd": None, "n": 0}
    assert summarize_runs([]) == {}


# --------------------------------------------------------------------------- results files


def _pointwise_lines() -> list[dict]:
    base = {"mode": "pointwise", "scale": [1, 5], "reason": None}
    return [
        {**base, "id": "a", "status": "ok", "score": 4, "raw": 3.7, "label": 4.33},
        {**base, "id": "b", "status": "ok", "score": 2, "raw": 2.1, "label": 2.5},
        {**base, "id": "c", "status": "invalid", "score": None, "raw": None, "label": 3.0},
        {**base, "id": "d", "status": "failed", "score": None, "raw": None, "label": 2.67, "reason": "timeout"},
        {**base, "id": "e", "status": "ok", "score": 5, "raw": 5.0, "label": None},
        {**base, "id": "f", "status": "ok", "score": 5, "raw": 4.9, "label": 1.0},
    ]


def test_metrics_from_pointwise_results(tmp_path):
    path = write_results(tmp_path / "results.jsonl", _pointwise_lines())
    report = metrics_from_results(path, bootstrap=100)
    assert report["mode"] == "pointwise" and report["scale"] == [1, 5]
    assert report["n_lines"] == 6 and report["n_unlabeled"] == 1
    assert report["status_counts"] == {"ok": 4, "invalid": 1, "failed": 1}
    assert list(report["runs"]) == [None] and "summary" not in report
    metrics = report["metrics"]
    expected = pointwise_metrics([4, 2, None, None, 5], [4.33, 2.5, 3.0, 2.67, 1.0])
    for key in POINTWISE_KEYS:
        assert metrics[key]["value"] == pytest.approx(expected[key])
    assert metrics["n"] == 5 and metrics["n_valid"] == 3


def test_metrics_from_pairwise_results_with_runs(tmp_path):
    lines = []
    winners = {1: ["first", "second", "tie", None], 2: ["first", "first", "abstain", "second"]}
    golds = ["first", "second", "tie", "second"]
    for run, run_winners in winners.items():
        for index, (winner, gold) in enumerate(zip(run_winners, golds)):
            status = "ok" if winner is not None else "invalid"
            lines.append({"id": str(index), "run": run, "status": status, "mode": "pairwise", "winner": winner, "label": gold})
    lines.append({"id": "9", "run": 2, "status": "ok", "mode": "pairwise", "winner": "first", "label": None})
    report = metrics_from_results(write_results(tmp_path / "r.jsonl", lines), bootstrap=50)
    assert sorted(report["runs"]) == [1, 2] and "metrics" not in report
    assert report["runs"][1]["accuracy"]["value"] == pytest.approx(3 / 4)
    assert report["runs"][2]["accuracy"]["value"] == pytest.approx(2 / 4)
    assert report["summary"]["accuracy"]["mean"] == pytest.approx(0.625)
    assert report["summary"]["accuracy"]["n"] == 2
    assert report["n_unlabeled"] == 1


def test_results_later_lines_supersede_earlier_ones(tmp_path):
    lines = [
        {"id": "a", "status": "failed", "mode": "pairwise", "winner": None, "label": "first"},
        {"id": "b", "status": "ok", "mode": "pairwise", "winner": "second", "label": "second"},
        {"id": "a", "status": "ok", "mode": "pairwise", "winner": "first", "label": "first"},
    ]
    report = metrics_from_results(write_results(tmp_path / "r.jsonl", lines), bootstrap=0)
    assert report["n_superseded"] == 1
    assert report["metrics"]["n"] == 2 and report["metrics"]["accuracy"]["value"] == 1.0


def test_results_mode_is_inferred_when_absent(tmp_path):
    lines = [{"id": "a", "status": "ok", "score": 3, "label": 3}]
    report = metrics_from_results(write_results(tmp_path / "r.jsonl", lines), bootstrap=0)
    assert report["mode"] == "pointwise" and report["metrics"]["exact"]["value"] == 1.0


def test_results_all_unlabeled(tmp_path):
    lines = [{"id": "a", "status": "ok", "mode": "pointwise", "score": 3, "label": None}]
    report = metrics_from_results(write_results(tmp_path / "r.jsonl", lines), bootstrap=10)
    assert report["n_unlabeled"] == 1
    assert report["metrics"]["n"] == 0
    assert report["metrics"]["exact"] == {"value": None, "ci95": None}
    assert "undefined (no items)" in format_report(report)


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], "no result lines"),
        (
            [
                {"id": "a", "status": "ok", "mode": "pointwise", "score": 3, "label": 3},
                {"id": "b", "status": "ok", "mode": "pairwise", "winner": "first", "label": "first"},
            ],
            "line 2: mode 'pairwise' differs",
        ),
        (
            [
                {"id": "a", "status": "ok", "mode": "pointwise", "score": 3, "label": 3, "scale": [1, 5]},
                {"id": "b", "status": "ok", "mode": "pointwise", "score": 3, "label": 3, "scale": [1, 3]},
            ],
            r"line 2: scale \[1, 3\] differs",
        ),
        (
            [
                {"id": "a", "status": "ok", "mode": "pointwise", "score": 3, "label": 3, "run": 1},
                {"id": "b", "status": "ok", "mode": "pointwise", "score": 3, "label": 3},
            ],
            "some lines have a 'run' field",
        ),
        ([{"id": "a", "status": "ok", "mode": "pointwise", "score": "high", "label": 3}], "'score' must be a number"),
        ([{"id": "a", "status": "ok", "mode": "pointwise", "score": 3, "label": "good"}], "pointwise label"),
        ([{"id": "a", "status": "ok", "mode": "pairwise", "winner": "A", "label": "first"}], "'winner' must be one of"),
        ([{"id": "a", "status": "ok", "mode": "pairwise", "winner": "first", "label": 1}], "pairwise 'label' must be"),
        ([{"id": "a", "status": "ok", "mode": "ranking"}], "cannot tell the mode"),
        ([{"id": "a", "status": "ok", "score": 3, "label": 3, "scale": [5, 1]}], "'scale' must be"),
    ],
)
def test_results_errors(tmp_path, lines, message):
    path = write_results(tmp_path / "r.jsonl", lines)
    with pytest.raises(DataError, match=message):
        metrics_from_results(path, bootstrap=0)


def test_read_results_streams_objects_and_reports_bad_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a"}\n\n{"id": "b"}\n', encoding="utf-8")
    assert [r["id"] for r in read_results(path)] == ["a", "b"]
    path.write_text('{"id": "a"}\n{"id": "b", "sta\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2: truncated JSON"):
        list(read_results(path))
    path.write_text('{"id": "a"}\n[1]\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2: expected a JSON object"):
        list(read_results(path))
    with pytest.raises(DataError, match="no such file"):
        read_results(tmp_path / "missing.jsonl")


# --------------------------------------------------------------------------- formatting


def test_format_flat_report_shows_reasons():
    text = format_report(pointwise_metrics([3, 3, 3], [1.0, 2.0, 4.0]))
    assert "pearson   undefined (zero variance in the predictions)" in text
    assert "within1   0.667" in text
    assert "CI" not in text


def test_format_report_aligns_values_and_intervals():
    preds, golds = _sample_pointwise(60)
    text = format_report(with_confidence(pointwise_metrics, preds, golds, n_resamples=50))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split() == ["metric", "value", "95%", "CI"]
    rows = [line for line in lines if line.split()[0] in POINTWISE_KEYS]
    assert len(rows) == len(POINTWISE_KEYS)
    assert len({line.index("[") for line in rows}) == 1  # intervals start in one column
    assert len({len(line) for line in rows}) == 1  # and end in one column
    assert all(line.endswith("]") for line in rows)


def test_format_results_report_with_runs(tmp_path):
    lines = [
        {"id": str(i), "run": run, "status": "ok", "mode": "pointwise", "score": s, "label": g, "scale": [1, 5]}
        for run in (1, 2)
        for i, (s, g) in enumerate([(1, 1.0), (3, 2.67), (5, 4.33), (2, 2.0)])
    ]
    text = format_report(metrics_from_results(write_results(tmp_path / "r.jsonl", lines), bootstrap=30))
    assert text.splitlines()[0] == f"pointwise results: {tmp_path / 'r.jsonl'}"
    assert "8 lines; status ok 8; scale 1..5" in text
    assert "summary over 2 runs" in text and "run 1" in text and "run 2" in text


# --------------------------------------------------------------------------- real data


def _half_up(x: float) -> int:
    """An independent half-up rounding, to check round_half_up against."""
    return int(Decimal(repr(x)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


@needs_topical_chat
def test_topical_chat_agreement_with_simple_judges(tmp_path):
    columns = ColumnMap(
        input_field="context", response_fields=("response",), id_field="id", label_field="scores.overall", reference_field="fact"
    )
    items = list(read_items(TOPICAL_CHAT, columns))
    golds = [parse_pointwise_label(item.label) for item in items]
    rounded = [_half_up(g) for g in golds]
    assert [round_half_up(g) for g in golds] == rounded

    # A judge that returns the rounded human score agrees perfectly.
    perfect = pointwise_metrics(rounded, golds)
    assert perfect["exact"] == perfect["within1"] == perfect["qwk"] == 1.0
    assert perfect["pearson"] > 0.95

    # A judge that always says 3 hits the items whose gold rounds to 3; correlations are undefined.
    constant = pointwise_metrics([3] * len(golds), golds)
    assert constant["exact"] == pytest.approx(rounded.count(3) / 240)
    assert constant["within1"] == pytest.approx(sum(abs(r - 3) <= 1 for r in rounded) / 240)
    assert constant["pearson"] is None and constant["spearman"] is None
    assert constant["qwk"] == pytest.approx(0.0)

    # The same numbers come back through a results file, with an invalid item and an unlabeled one.
    lines = [
        {"id": item.id, "status": "ok", "mode": "pointwise", "score": 3, "raw": 3.0, "label": g, "scale": [1, 5]}
        for item, g in zip(items, golds)
    ]
    lines[0] = {**lines[0], "status": "invalid", "score": None}
    lines[1] = {**lines[1], "label": None}
    report = metrics_from_results(write_results(tmp_path / "tc.jsonl", lines), bootstrap=100)
    assert report["n_unlabeled"] == 1 and report["metrics"]["n"] == 239 and report["metrics"]["n_valid"] == 238
    assert "undefined (zero variance in the predictions)" in format_report(report)


@needs_llmbar
def test_llmbar_agreement_with_simple_judges():
    columns = ColumnMap(input_field="input", response_fields=("output_1", "output_2"), label_field="label")
    items = list(read_items(LLMBAR, columns))
    golds = [parse_pairwise_label(item.label, columns.response_fields) for item in items]
    always_first = pairwise_metrics(["first"] * len(golds), golds)
    assert always_first["accuracy"] == pytest.approx(sum(item.record["label"] == 1 for item in items) / 100)
    assert always_first["coverage"] == 1.0

    # "The longer answer wins", ties on equal length.
    def longer(item):
        a, b = (len(c.text) for c in item.candidates)
        return "first" if a > b else "second" if b > a else "tie"

    preds = [longer(item) for item in items]
    expected = sum(p == g for p, g in zip(preds, golds)) / 100
    report = with_confidence(pairwise_metrics, preds, golds, n_resamples=200)
    assert report["accuracy"]["value"] == pytest.approx(expected)
    low, high = report["accuracy"]["ci95"]
    assert low <= expected <= high


def test_several_result_files_are_several_runs(tmp_path, capsys):
    """`gsr metrics a.jsonl b.jsonl`: each file is a run; the summary holds the mean and sd over runs."""
    from gsrlang.cli import main

    def run_file(name, preds):
        lines = [{"id": str(i), "status": "ok", "mode": "pointwise", "score": p, "label": g, "scale": [1, 5]}
                 for i, (p, g) in enumerate(zip(preds, [1, 2, 3, 4, 5]))]
        return write_results(tmp_path / name, lines)

    a = run_file("a.jsonl", [1, 2, 3, 4, 5])  # exact 1.0
    b = run_file("b.jsonl", [1, 2, 3, 4, 4])  # exact 0.8
    report = metrics_from_results([a, b], bootstrap=0)
    assert set(report["runs"]) == {"a.jsonl", "b.jsonl"}
    assert report["summary"]["exact"]["mean"] == pytest.approx(0.9)
    assert report["summary"]["exact"]["sd"] == pytest.approx(statistics.stdev([1.0, 0.8]))
    assert report["summary"]["exact"]["n"] == 2
    assert main(["metrics", str(a), str(b), "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "0.900" in out


def _qwk_by_table(preds, golds, lo, hi):
    """The kappa from its definition: the k x k table of observed and expected counts (small k only)."""
    k = hi - lo + 1
    n = len(preds)
    obs = [[0] * k for _ in range(k)]
    for p, g in zip(preds, golds):
        obs[p - lo][g - lo] += 1
    pt = [sum(r) for r in obs]
    gt = [sum(obs[i][j] for i in range(k)) for j in range(k)]
    w = [[(i - j) ** 2 / (k - 1) ** 2 for j in range(k)] for i in range(k)]
    dis = sum(w[i][j] * obs[i][j] for i in range(k) for j in range(k))
    exp = sum(w[i][j] * pt[i] * gt[j] / n for i in range(k) for j in range(k))
    return None if exp == 0 else 1 - dis / exp


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=30))
def test_closed_form_qwk_equals_the_tables(pairs):
    preds, golds = [p for p, _ in pairs], [g for _, g in pairs]
    want = _qwk_by_table(preds, golds, 0, 6)
    got = quadratic_weighted_kappa(preds, golds, 0, 6)
    assert (got is None) == (want is None) and (got is None or got == pytest.approx(want, abs=1e-12))


def test_qwk_on_a_huge_scale_builds_no_table(tmp_path, capsys):
    # issue 24 item 11: `scale = 0..100000` checked clean, then gsr run and gsr metrics built a scale x scale
    # table for QWK (~80 GB) and died with MemoryError
    from gsrlang.cli import main

    assert quadratic_weighted_kappa([0, 100000, 5], [0, 100000, 7], 0, 100000) == pytest.approx(
        1 - 3 * 4 / (3 * (0 + 100000**2 + 25) + 3 * (0 + 100000**2 + 49) - 2 * 100005 * 100007))
    prog = tmp_path / "wide.gsr"
    prog.write_text('rubric wide "a wide scale"\ntask pointwise { scale = 0..100000 }\n'
                    'criterion a: Score = human(field: "a")\nsink a\n')
    rows = [{"id": str(i), "input": "q", "response": "r", "a": ((i * 37) % 11) / 10, "label": i * 9000} for i in range(12)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o.jsonl"
    assert main(["run", str(prog), "--data", str(data), "--id-field", "id", "--label-field", "label", "--out", str(out),
                 "--no-progress", "--bootstrap", "50"]) == 0
    assert "qwk" in capsys.readouterr().out
    assert main(["metrics", str(out), "--bootstrap", "50"]) == 0
    assert "qwk" in capsys.readouterr().out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(-3, 7), st.floats(-3, 7), st.sampled_from([-0.0, 2.5])),
                          st.one_of(st.integers(1, 5), st.floats(-2, 8), st.sampled_from([1.0, 4.0 / 3, 2.5]))),
                max_size=40),
       st.integers(0, 3), st.sampled_from([0, 7]))
def test_pointwise_arrays_give_the_lists_report_bit_for_bit(pairs, seed, resamples):
    import numpy as np

    preds, golds = [p for p, _ in pairs], [g for _, g in pairs]
    arrays = (np.array([np.nan if p is None else p for p in preds], np.float64), np.array(golds, np.float64))

    def outcome(p, g):
        try:
            return repr(metrics_with_confidence("pointwise", p, g, n_resamples=resamples, seed=seed))
        except ZeroDivisionError as exc:  # a correlation whose squares underflow to 0: both ways alike
            return repr(exc)

    assert outcome(*arrays) == outcome(preds, golds)


def test_pointwise_arrays_that_the_lists_refuse_are_refused_alike():
    import numpy as np

    for preds, golds in (([1.0], [np.inf]), ([np.inf], [1.0]), ([1.0, 2.0], [1.0])):
        with pytest.raises(ValueError) as from_lists:
            metrics_with_confidence("pointwise", [None if p != p else p for p in preds], golds)
        with pytest.raises(ValueError, match=str(from_lists.value).replace("(", r"\(").replace(")", r"\)")):
            metrics_with_confidence("pointwise", np.array(preds), np.array(golds))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e300, 4.0 / 3, math.nan]), min_size=3,
                         max_size=3), max_size=30))
def test_unique_rows_is_numpys_unique_over_rows(rows):
    """The bootstrap's sample codes its distinct (valid, prediction, gold) rows column by column: the same rows,
    in the same order, with the same codes and counts as np.unique(axis=0) (a NaN: np.unique itself)."""
    import numpy as np

    from gsrlang.analysis.resampling import unique_rows

    a = np.array(rows, np.float64).reshape(-1, 3)
    ours, theirs = unique_rows(a), np.unique(a, axis=0, return_inverse=True, return_counts=True)
    assert np.array_equal(ours[0], theirs[0], equal_nan=True)  # (-0.0 == 0.0: a zero's sign is not compared)
    assert ours[1].tolist() == theirs[1].reshape(-1).tolist() and ours[2].tolist() == theirs[2].tolist()


def test_unique_rows_whose_codes_would_not_fit_in_an_integer_are_numpys():
    import numpy as np

    from gsrlang.analysis.resampling import unique_rows

    a = np.random.default_rng(0).random((10_000, 5)).round(2)  # 101 values a column at most: 101^5 < 2^62
    wide = np.random.default_rng(1).random((10_000, 5))  # 10,000 a column: 10,000^5 >= 2^62
    for x in (a, wide, np.vstack([a, a[:100]])):
        ours, theirs = unique_rows(x), np.unique(x, axis=0, return_inverse=True, return_counts=True)
        assert np.array_equal(ours[0], theirs[0])
        assert ours[1].tolist() == theirs[1].reshape(-1).tolist() and ours[2].tolist() == theirs[2].tolist()
