"""Groups of items: group folds, the cluster bootstrap, McNemar without scipy, metrics of different programs."""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from gsrlang.analysis.groups import GroupError, group_candidates, group_folds, groups_note
from gsrlang.analysis.metrics import metrics_with_confidence
from gsrlang.analysis.resampling import group_codes, group_weights
from gsrlang.analysis.stats import binomial_two_sided, mcnemar, paired_report
from gsrlang.cli import main

TC = Path(__file__).resolve().parent.parent / "examples" / "topical_chat"
DEV = TC / "data" / "dev.jsonl"


def _exact_two_sided(k: int, n: int) -> float:
    """The two-sided binomial p-value at 1/2 by exact rational arithmetic: the sum of the outcomes' probabilities
    no larger than that of k (the definition scipy.stats.binomtest uses)."""
    pmf = [Fraction(math.comb(n, i), 2 ** n) for i in range(n + 1)]
    return float(min(Fraction(1), sum(p for p in pmf if p <= pmf[k])))


@pytest.mark.parametrize("k,n", [(0, 0), (0, 1), (1, 1), (3, 10), (5, 10), (0, 12), (21, 47), (26, 47), (7, 60),
                                 (30, 61), (100, 250)])
def test_binomial_two_sided_is_the_exact_test(k, n):
    expected = 1.0 if n == 0 else _exact_two_sided(k, n)
    assert binomial_two_sided(k, n) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_binomial_two_sided_matches_scipy_where_installed():
    stats = pytest.importorskip("scipy.stats")
    for n in (1, 2, 9, 40, 333, 5000):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            assert binomial_two_sided(k, n) == pytest.approx(stats.binomtest(k, n, 0.5).pvalue, rel=1e-9)


def test_mcnemar_counts_the_discordant_items():
    golds = [1.0, 2.0, 3.0, 4.0, 5.0, 3.0]
    a = [1, 2, 3, 1, 1, 3]
    b = [1, 5, 5, 4, 5, 3]
    m = mcnemar("pointwise", a, b, golds)
    assert (m["only_a"], m["only_b"]) == (2, 2) and m["p_value"] == 1.0


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    out = []
    for name in ("flat", "overall"):
        path = tmp_path / f"{name}.jsonl"
        assert main(["run", str(TC / f"{name}.gsr"), "--data", str(DEV), "--input-field", "context",
                     "--reference-field", "fact", "--id-field", "id", "--label-field", "scores.overall",
                     "--out", str(path)]) == 0
        out.append(path)
    return out[0], out[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _runs(tmp_path_factory.mktemp("runs"))


def test_compare_runs_without_scipy(runs, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "scipy" or m.startswith("scipy.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "scipy", None)  # `import scipy` now raises ImportError
    capsys.readouterr()
    assert main(["compare", str(runs[0]), str(runs[1]), "--bootstrap", "200", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["mcnemar"]["only_a"], result["mcnemar"]["only_b"]) == (21, 26)
    assert result["mcnemar"]["p_value"] == pytest.approx(_exact_two_sided(21, 47), rel=1e-9)
    assert not any(m.startswith("scipy.") for m in sys.modules)


def test_compare_cluster_bootstrap_over_a_group_field(runs, capsys):
    a, b = map(str, runs)
    assert main(["compare", a, b, "--json", "--data", str(DEV), "--id-field", "id", "--group-field", "context"]) == 0
    captured = capsys.readouterr()
    grouped = json.loads(captured.out)
    assert "40 groups (6 items each)" in captured.err
    assert grouped["bootstrap"]["group_field"] == "context"
    assert main(["compare", a, b, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert grouped["metrics"]["exact"]["diff"] == plain["metrics"]["exact"]["diff"]
    assert grouped["metrics"]["exact"]["ci95"] != plain["metrics"]["exact"]["ci95"]
    assert main(["compare", a, b, "--group-field", "context"]) == 2
    assert "--group-field needs --data" in capsys.readouterr().err


def test_metrics_of_different_programs_side_by_side_with_no_mean(runs, capsys):
    assert main(["metrics", str(runs[0]), str(runs[1]), "--bootstrap", "50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["side_by_side"] is True and "summary" not in report and report["same_program"] is False
    assert main(["metrics", str(runs[0]), str(runs[1]), "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert "side by side" in out and "summary over" not in out and " sd " not in out
    header = next(line for line in out.splitlines() if line.strip().startswith("metric"))
    assert "flat.jsonl" in header and "overall.jsonl" in header
    exact = next(line for line in out.splitlines() if line.strip().startswith("exact"))
    assert "0.688" in exact and "0.708" in exact  # flat, then the graph, in one row


def test_metrics_cluster_bootstrap(runs, capsys):
    assert main(["metrics", str(runs[1]), "--json", "--data", str(DEV), "--id-field", "id",
                 "--group-field", "context"]) == 0
    grouped = json.loads(capsys.readouterr().out)
    assert main(["metrics", str(runs[1]), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert grouped["metrics"]["exact"]["value"] == plain["metrics"]["exact"]["value"]
    assert grouped["metrics"]["exact"]["ci95"] != plain["metrics"]["exact"]["ci95"]


def test_group_weights_draw_whole_groups():
    codes = group_codes(["a", "a", "b", None, "c", "c", "c", None])
    assert codes.tolist() == [0, 0, 1, 2, 3, 3, 3, 4]  # a row without a group is a group of its own
    (block,) = list(group_weights(codes, 300, seed=1))
    assert block.shape == (300, 8)
    for g in range(5):
        members = np.flatnonzero(codes == g)
        assert (block[:, members] == block[:, members[:1]]).all()  # a group's items are drawn together
    per_group = np.stack([block[:, np.flatnonzero(codes == g)[0]] for g in range(5)], axis=1)
    assert (per_group.sum(axis=1) == 5).all()  # as many groups as there are, with replacement


def test_each_cluster_resample_is_the_report_of_its_drawn_items():
    """A cluster bootstrap's resample, counted over (group, pair) combinations, gives the report of its items
    listed out: each item as often as its group was drawn (`group_weights`), through pointwise_metrics and
    pairwise_metrics themselves."""
    from gsrlang.analysis.metrics import pairwise_metrics, pointwise_metrics
    from gsrlang.analysis.resampling import PairwiseSample, PointwiseSample, resampled

    rng = np.random.default_rng(11)
    n = 60
    groups = [None if g == 0 else f"g{g}" for g in rng.integers(0, 16, n)]
    preds = [None if v == 0 else float(v) for v in rng.integers(0, 6, n)]
    golds = [float(v) for v in rng.integers(1, 6, n)]
    verdicts = [["first", "second", "tie", "abstain", None][v] for v in rng.integers(0, 5, n)]
    prefs = [["first", "second", "tie"][v] for v in rng.integers(0, 3, n)]
    point, pair = resampled([PointwiseSample(preds, golds), PairwiseSample(verdicts, prefs)], 40, 5, groups)
    (weights,) = list(group_weights(group_codes(groups), 40, seed=5))
    for r, w in enumerate(weights.astype(int).tolist()):
        def drawn(column):
            return [v for v, times in zip(column, w) for _ in range(times)]
        for report, got, keys in ((pointwise_metrics(drawn(preds), drawn(golds)), point, PointwiseSample.keys),
                                  (pairwise_metrics(drawn(verdicts), drawn(prefs)), pair, PairwiseSample.keys)):
            for key in keys:
                want = math.nan if report[key] is None else report[key]
                assert got[key][r] == pytest.approx(want, rel=1e-9, abs=1e-12, nan_ok=True), (r, key)


def test_cluster_bootstrap_widens_the_interval_of_correlated_items():
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(30), 8)
    effect = rng.normal(size=30)[groups]  # items of a group share a latent effect: hit together or miss together
    golds = np.full(len(groups), 3.0)
    preds = np.where(effect + 0.3 * rng.normal(size=len(groups)) > 0, 3, 1)
    plain = metrics_with_confidence("pointwise", preds.tolist(), golds.tolist(), n_resamples=2000)
    grouped = metrics_with_confidence("pointwise", preds.tolist(), golds.tolist(), n_resamples=2000,
                                      groups=groups.tolist())
    width = {k: r["exact"]["ci95"][1] - r["exact"]["ci95"][0] for k, r in (("plain", plain), ("grouped", grouped))}
    assert width["grouped"] > 2 * width["plain"]
    diff = paired_report("pointwise", [3] * len(preds), preds.tolist(), golds.tolist(), 2000, 0,
                         groups=groups.tolist())
    assert diff["exact"]["ci95"][1] - diff["exact"]["ci95"][0] > 2 * width["plain"]


def test_group_folds_keep_each_group_whole():
    groups = [f"g{i // 6}" for i in range(240)]
    fold = group_folds(groups, 5, seed=0)
    for g in set(groups):
        assert len({fold[i] for i in range(240) if groups[i] == g}) == 1
    assert np.bincount(fold).tolist() == [48] * 5
    assert not (group_folds(groups, 5, seed=1) == fold).all()  # the seed moves groups between folds
    with pytest.raises(GroupError, match=r"3 groups are too few for 5 folds"):
        group_folds(["a", "b", "c", "a"], 5, 0)


def test_group_candidates_find_the_conversation():
    rows = [json.loads(line) for line in DEV.read_text().splitlines()]
    found = [name for name, _, _ in group_candidates(rows, 5, exclude=("id",))]
    assert found and found[0] == "context"
    assert "system" not in found  # 6 values: a condition of the design, too few to be the groups of 5 folds
    assert "id" not in found and "response" not in found
    assert groups_note([1, 1, 2, 2, None]) == "3 groups of 1-2 items (median 2), 1 of them single items"
