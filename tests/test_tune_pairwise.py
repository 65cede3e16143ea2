"""gsr tune on a pairwise program: winner labels, accuracy of the winner; known parameters recovered."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gsrlang.analysis.tune import FitSettings, cross_validate, fit, knobs, predict
from gsrlang.cli import main
from gsrlang.execution.tracetable import table_from_cells
from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.semantics.evaluate import Evaluator

pytest.importorskip("scipy")

PAIRWISE = """rubric synth_pairs "known parameters, pairwise"
task pairwise { epsilon = 0  on_tie = tie }
criterion a: Score = human(field: "a.{candidate}")
criterion b: Score = human(field: "b.{candidate}")
node body = weighted_mean(items: [a, b], weights: [0.5 in 0..1, 0.5 in 0..1])
sink cap(base: body, trigger: not(threshold(b, at: 0.5 in 0.1..0.9)), at: 0.5 in 0..1)
"""
TRUE_SHARE, TRUE_AT, TRUE_CAP = 0.8, 0.3, 0.25


def true_score(a, b):
    s = TRUE_SHARE * a + (1 - TRUE_SHARE) * b
    return np.where(b < TRUE_AT, np.minimum(s, TRUE_CAP), s)


def synthetic_pairs(n: int, seed: int = 1):
    """Pairs of candidates with a, b uniform; the label is the winner under the true parameters (no noise)."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(size=(n, 2)), rng.uniform(size=(n, 2))
    s = true_score(a, b)
    labels = np.where(s[:, 0] > s[:, 1], "first", np.where(s[:, 1] > s[:, 0], "second", "tie"))  # both capped
    return [{"id": f"p{i}", "input": "q", "A": "ra", "B": "rb", "a": {"A": float(a[i, 0]), "B": float(a[i, 1])},
             "b": {"A": float(b[i, 0]), "B": float(b[i, 1])}, "label": str(labels[i])} for i in range(n)]


def table_of(program, rows):
    return table_from_cells(program, "pairwise", [
        (r["id"], r.get("label"), {"a": [("ok", r["a"]["A"]), ("ok", r["a"]["B"])],
                                   "b": [("ok", r["b"]["A"]), ("ok", r["b"]["B"])]}) for r in rows])


def test_pairwise_tuning_recovers_known_parameters():
    """Tolerance: the weight share, the threshold and the cap each within 0.03 (600 noiseless pairs); the
    tuned winners agree with the labels on at least 97% of 600 fresh pairs."""
    program = analyze(PAIRWISE).program
    ks = knobs(program)
    theta = fit(program, ks, table_of(program, synthetic_pairs(600)), FitSettings(metric="accuracy", shrink=0.0))
    got = dict(zip([k.name for k in ks], theta))
    share = got["body.weights[0]"] / (got["body.weights[0]"] + got["body.weights[1]"])
    assert abs(share - TRUE_SHARE) <= 0.03, got
    assert abs(got["sink.trigger.x.at"] - TRUE_AT) <= 0.03, got
    assert abs(got["sink.at"] - TRUE_CAP) <= 0.03, got
    fresh = synthetic_pairs(600, seed=7)
    preds = predict(program, ks, theta, table_of(program, fresh))
    accuracy = np.mean([p == r["label"] for p, r in zip(preds, fresh)])
    untuned = np.mean([p == r["label"] for p, r in zip(Evaluator(program).run(table_of(program, fresh))
                                                           .predictions(), fresh)])
    assert accuracy >= 0.97 and accuracy > untuned + 0.05, (accuracy, untuned)


def test_pairwise_metric_objective_searches_the_accuracy():
    program = analyze(PAIRWISE).program
    ks = knobs(program)
    train = table_of(program, synthetic_pairs(300))
    settings = FitSettings(metric="accuracy", objective="metric", shrink=0.0, maxiter=30)
    theta = fit(program, ks, train, settings)
    preds = predict(program, ks, theta, train)
    assert np.mean([p == g for p, g in zip(preds, train.labels)]) >= 0.97


@pytest.mark.slow  # a whole tuning run of many folds: the slow tier (docs/testing.md)
def test_pairwise_cross_validation_never_sees_the_held_out_labels():
    program = analyze(PAIRWISE).program
    ks = knobs(program)
    rows = synthetic_pairs(60)
    seen = []

    def spy(prog, knobs_, train, settings):
        seen.append(set(train.ids))
        return fit(prog, knobs_, train, settings)

    settings = FitSettings(metric="accuracy", seed=2, maxiter=5, popsize=5)
    cv = cross_validate(program, ks, table_of(program, rows), 3, settings, fitter=spy)
    for f, ids in enumerate(seen):
        held_out = {i for i, fold in zip(cv.ids, cv.fold_of) if fold == f}
        assert held_out and not ids & held_out
    fold0 = {i for i, fold in zip(cv.ids, cv.fold_of) if fold == 0}
    flipped = [dict(r, label={"first": "second", "second": "first", "tie": "first"}[r["label"]]) if r["id"] in fold0
               else r
               for r in rows]
    again = cross_validate(program, ks, table_of(program, flipped), 3, settings)
    assert [p for p, f in zip(cv.tuned, cv.fold_of) if f == 0] == [p for p, f in zip(again.tuned, again.fold_of)
                                                                   if f == 0]
    assert cv.golds != again.golds


@pytest.mark.slow  # a whole tuning run of many folds: the slow tier (docs/testing.md)
def test_gsr_tune_on_a_pairwise_program(tmp_path, capsys):
    prog = tmp_path / "pairs.gsr"
    prog.write_text(PAIRWISE)
    rows = synthetic_pairs(90)
    rows[4]["label"] = "both"  # unusable: counted, left out
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "pairs.tuned.gsr"
    args = ["tune", str(prog), "--data", str(data), "--id-field", "id", "--label-field", "label",
            "--responses", "A,B", "--folds", "3", "--bootstrap", "100"]
    code = main(args)
    text = capsys.readouterr().out
    assert code == 0, text
    assert "89 labelled items of 90" in text and "1 unusable label" in text
    assert "accuracy" in text and "valid_only_accuracy" in text
    written = out.read_text()
    assert "metric: accuracy" in written and "CV accuracy: tuned" in written
    tuned = analyze_file(str(out)).program
    assert tuned is not None and tuned.content_hash != analyze_file(str(prog)).program.content_hash
    # a pointwise metric on a pairwise program is a usage error, with the metrics that fit
    assert main(args + ["--metric", "exact", "--out", str(tmp_path / "x.gsr")]) == 2
    assert "choose one of accuracy" in capsys.readouterr().err
