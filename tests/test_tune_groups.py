"""gsr tune with groups, held-out items, the ordinal objective, baselines, progress, jobs and the columns it reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gsrlang.analysis.metrics import pointwise_metrics
from gsrlang.analysis.rewrite import tuned_name
from gsrlang.cli import main
from gsrlang.execution.labels import label_reader
from gsrlang.execution.tracetable import table_from_cells, table_from_data
from gsrlang.files.needs import column_map
from gsrlang.judges.registry import default_registry
from gsrlang.lang.check.driver import analyze, analyze_file

pytest.importorskip("scipy")

from gsrlang.analysis.baseline import baseline_predictions  # noqa: E402
from gsrlang.analysis.tune import (  # noqa: E402
    FitSettings,
    Progress,
    cross_validate,
    fit,
    knobs,
    labelled_index,
    ordinal_nll,
    predict,
)

TC = Path(__file__).resolve().parent.parent / "examples" / "topical_chat"
TUNABLE = TC / "overall.tunable.gsr"


def _annotations(tmp_path: Path, **extra) -> Path:
    """The Topical-Chat dev annotations without their text: id, the conversation's number, the scores."""
    rows = [json.loads(line) for line in (TC / "data" / "dev.jsonl").read_text().splitlines()]
    conversations = list(dict.fromkeys(r["context"] for r in rows))
    path = tmp_path / "annotations.jsonl"
    with path.open("w") as f:
        for i, r in enumerate(rows):
            row = {"id": r["id"], "conversation": conversations.index(r["context"]), "scores": r["scores"]}
            for key, fn in extra.items():
                value = fn(i, row)
                if value is not None:
                    row[key] = value
            f.write(json.dumps(row) + "\n")
    return path


def _tune(tmp_path, data, *more, out="t.tuned.gsr"):
    return main(["tune", str(TUNABLE), "--data", str(data), "--id-field", "id", "--label-field", "scores.overall",
                 "--folds", "2", "--shrink", "0.1", "--bootstrap", "100", "--out", str(tmp_path / out), *more])


def test_tune_reads_only_the_columns_the_program_reads_and_warns_of_a_group_field(tmp_path, capsys):
    data = _annotations(tmp_path)  # no input, no response, no fact: the criteria read only the scores
    assert _tune(tmp_path, data) == 0
    captured = capsys.readouterr()
    assert "on 240 labelled items of 240" in captured.out
    assert "--group-field conversation" in captured.err and "40 values over 240 rows" in captured.err
    written = (tmp_path / "t.tuned.gsr").read_text()
    assert "rubric topical_chat_overall_tuned " in written  # `_tunable` becomes `_tuned`
    assert "folds by item (no --group-field)" in written
    assert analyze_file(str(tmp_path / "t.tuned.gsr")).program.name == "topical_chat_overall_tuned"


def test_tune_group_field_keeps_conversations_in_one_fold_and_says_so(tmp_path, capsys):
    data = _annotations(tmp_path)
    assert _tune(tmp_path, data, "--group-field", "conversation", "--name", "tc_overall_v2") == 0
    captured = capsys.readouterr()
    assert "40 groups (6 items each); each stays in one fold" in captured.out
    assert "folds by `conversation`" in captured.out and "--group-field" not in captured.err
    written = (tmp_path / "t.tuned.gsr").read_text()
    assert "rubric tc_overall_v2 " in written
    assert "groups: `conversation` (40 groups (6 items each)), each in one fold" in written
    assert "bootstrap resamples over groups" in written


def test_rows_without_the_group_field_are_counted_and_stand_alone(tmp_path, capsys):
    data = _annotations(tmp_path)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    for r in rows[:3]:
        del r["conversation"]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _tune(tmp_path, data, "--group-field", "conversation") == 0
    captured = capsys.readouterr()
    assert "3 rows without `conversation`: each is a group of its own" in captured.err
    assert "43 groups of 1-6 items (median 6), 3 of them single items" in captured.out


def test_fewer_groups_than_folds_is_an_error_naming_both(tmp_path, capsys):
    data = _annotations(tmp_path, site=lambda i, row: f"site{row['conversation'] % 3}")
    code = main(["tune", str(TUNABLE), "--data", str(data), "--id-field", "id", "--label-field", "scores.overall",
                 "--group-field", "site", "--folds", "5", "--out", str(tmp_path / "x.gsr")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3 groups are too few for 5 folds" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "x.gsr").exists()


@pytest.mark.parametrize("bad,shown", [("maybe", "`maybe`"), (2, "`2`"), (None, "no value")])
def test_bad_holdout_values_name_the_first_and_its_line(tmp_path, capsys, bad, shown):
    def split(i, row):
        if i == 6:
            return bad
        return i % 4 == 0
    data = _annotations(tmp_path, split=split)
    assert _tune(tmp_path, data, "--holdout-field", "split") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 7" in err[0] and shown in err[0] and "not true or false" in err[0]


def test_holdout_field_is_never_seen_and_is_reported(tmp_path, capsys):
    data = _annotations(tmp_path, split=lambda i, row: "true" if row["conversation"] % 4 == 0 else "false")
    assert _tune(tmp_path, data, "--holdout-field", "split", "--group-field", "conversation") == 0
    out = capsys.readouterr().out
    assert "on 180 labelled items of 180" in out and "held out (`split` true): 60 labelled items" in out
    assert "held out (`split` true, 60 labelled items never seen by tuning): exact tuned" in out
    assert "# gsr tune: held out (`split` true, 60 items): exact tuned" in (tmp_path / "t.tuned.gsr").read_text()


def test_holdout_file(tmp_path, capsys):
    data = _annotations(tmp_path)
    rows = data.read_text().splitlines(keepends=True)
    train, held = tmp_path / "train.jsonl", tmp_path / "held.jsonl"
    train.write_text("".join(rows[:180]))
    held.write_text("".join(rows[180:]))
    assert _tune(tmp_path, train, "--holdout", str(held), "--baseline") == 0
    out = capsys.readouterr().out
    assert f"held out ({held}, 60 labelled items never seen by tuning)" in out
    assert "ordered logit" in out and "tuned - linear" in out
    assert "# gsr tune: baseline CV exact: ordered logit" in (tmp_path / "t.tuned.gsr").read_text()


def test_tuned_name():
    assert tuned_name("topical_chat_overall_tunable") == "topical_chat_overall_tuned"
    assert tuned_name("rubric_tuned") == "rubric_tuned"  # tuned again: one suffix
    assert tuned_name("quality") == "quality_tuned"


def test_ordinal_likelihood_is_a_distribution_over_the_categories():
    s = np.linspace(0, 1, 11)
    cuts = np.array([0.2, 0.4, 0.6, 0.8])
    total = sum(np.exp(-ordinal_nll(s, np.full(11, k), cuts, 12.0)) for k in range(5))
    assert np.allclose(total, 1.0)
    near = ordinal_nll(np.array([0.5]), np.array([2]), cuts, 30.0)[0]
    far = ordinal_nll(np.array([0.5]), np.array([4]), cuts, 30.0)[0]
    assert near < far


# ---- a synthetic data set whose rows share a latent effect per group -------------------------------------------
K = 12  # criteria whose values are constant within a group and unrelated to the label: they can only memorise


def _synthetic_program():
    crit = "\n".join(f'criterion c{j}: Score = human(field: "c{j}")' for j in range(K))
    items = ", ".join(["x"] + [f"c{j}" for j in range(K)])
    src = f'''rubric synthetic "a label that depends on x and on its group's latent effect"
task pointwise {{
  scale = 1..5
  quantize = thresholds(0.125 in 0..0.5, 0.375 in 0.1..0.7, 0.625 in 0.3..0.9, 0.875 in 0.5..1)
}}
criterion x: Score = human(field: "x")
{crit}
node m = weighted_mean(items: [{items}], weights: [{", ".join(["0.5 in 0..1"] * (K + 1))}])
sink m
'''
    return analyze(src).program


def _synthetic_table(program, path: Path, groups: int, per: int, seed: int):
    rng = np.random.default_rng(seed)
    names = []
    with path.open("w") as f:
        for g in range(groups):
            u, c = rng.uniform(), rng.uniform(size=K)  # the group's latent effect, and its constant criteria
            for r in range(per):
                x = rng.uniform()
                row = {"id": f"{g}-{r}", "x": float(x), "label": float(1 + 4 * (0.2 * x + 0.8 * u)),
                       **{f"c{j}": float(c[j]) for j in range(K)}}
                names.append(f"g{g}")
                f.write(json.dumps(row) + "\n")
    cols = column_map(program, "pointwise", id_field="id", label_field="label")
    table = table_from_data(program, path, cols, default_registry(), "pointwise",
                            label_reader(program, "pointwise", cols))
    return table, names


def test_row_folds_overestimate_and_group_folds_do_not(tmp_path):
    """Rows of a group share a latent effect; twelve criteria are constant within a group and say nothing of the
    label. Folds by row let the weights memorise each group through them, so their estimate beats what the same
    fold models do on fresh groups; folds by group do not."""
    program = _synthetic_program()
    table, groups = _synthetic_table(program, tmp_path / "train.jsonl", 24, 10, seed=2)
    fresh, _ = _synthetic_table(program, tmp_path / "fresh.jsonl", 400, 2, seed=999)
    ks = knobs(program)
    settings = FitSettings(shrink=0.0, maxiter=20, popsize=6)

    def mae(preds, golds):
        return pointwise_metrics(preds, golds)["mae"]

    def estimate(groups):
        """(the CV estimate of the MAE, the mean MAE of the same fold models on fresh groups)"""
        on_fresh = []

        def fitter(program, ks, train, settings):
            theta = fit(program, ks, train, settings)
            on_fresh.append(mae(predict(program, ks, theta, fresh), list(fresh.labels)))
            return theta
        cv = cross_validate(program, ks, table, 5, settings, fitter=fitter, groups=groups)
        if groups is not None:
            assert len({(f, g) for f, g in zip(cv.fold_of, groups)}) == 24  # every group in one fold
        return mae(cv.tuned, cv.golds), float(np.mean(on_fresh))

    row, row_fresh = estimate(None)
    group, group_fresh = estimate(groups)
    assert row < group  # the row folds' error is the smaller
    assert row < row_fresh - 0.1  # ... and optimistic: the fold models do worse on fresh groups, by over 0.1
    assert abs(group - group_fresh) < 0.05  # the group folds' estimate is what their models do on fresh groups
    # Seeds 1 and 3, measured: row folds 0.789 / 0.636 against 0.875 / 0.876 on fresh groups (optimistic both
    # times), group folds 1.019 / 0.772 against 0.916 / 0.917 (24 groups make a noisy estimate, either way).


# ---- baselines, jobs and progress -------------------------------------------------------------------------------
def test_baselines_fit_a_linear_label():
    program = _synthetic_program()
    rng = np.random.default_rng(4)
    n = 300
    x = rng.uniform(size=n)
    cells = []
    for i in range(n):
        values = {"x": [("ok", float(x[i]))], **{f"c{j}": [("ok", float(rng.uniform()))] for j in range(K)}}
        cells.append((str(i), float(np.floor(1 + 4 * x[i] + 0.5)), values))
    table = table_from_cells(program, "pointwise", cells)
    golds = list(table.labels)
    fold = (np.arange(n) % 5).tolist()
    models = baseline_predictions(program, table, golds, fold)
    assert pointwise_metrics(models["linear"], golds)["exact"] > 0.85
    assert pointwise_metrics(models["ordered logit"], golds)["exact"] > 0.9


class Recording(Progress):
    def __init__(self):
        super().__init__()
        self.stages, self.folds = [], []

    def stage(self, text):
        self.stages.append(text)

    def fold_done(self, fold, folds, predictions):
        self.folds.append((fold, len(predictions)))


def test_jobs_give_the_same_predictions_and_progress_counts(tmp_path):
    program = analyze_file(str(TUNABLE)).program
    data = _annotations(tmp_path)
    cols = column_map(program, "pointwise", id_field="id", label_field="scores.overall")
    table = table_from_data(program, data, cols, default_registry(), "pointwise",
                            label_reader(program, "pointwise", cols))
    groups = [json.loads(line)["conversation"] for line in data.read_text().splitlines()]
    settings = FitSettings(shrink=0.1, maxiter=10, popsize=5)
    progress = Recording()
    one = cross_validate(program, knobs(program), table, 3, settings, groups=groups, progress=progress)
    two = cross_validate(program, knobs(program), table, 3, settings, groups=groups, jobs=2)
    assert one.tuned == two.tuned and one.fold_of == two.fold_of
    assert progress.stages == ["fold 1 of 3", "fold 2 of 3", "fold 3 of 3"]
    assert sorted(f for f, _ in progress.folds) == [0, 1, 2] and sum(n for _, n in progress.folds) == 240
    assert progress.evaluated > 100 and progress.lowest < np.inf
    assert len(labelled_index(table)) == 240


def test_progress_bar_counts_folds_candidates_and_workers(tmp_path):
    import multiprocessing
    import time

    from gsrlang.commands import tune as command

    program = _synthetic_program()
    table, _ = _synthetic_table(program, tmp_path / "items.jsonl", 4, 3, seed=0)
    bar = command._Bar(2, "mae", table)
    count, best = multiprocessing.Value("q", 0), multiprocessing.Value("d", np.inf)
    with bar:
        bar.stage("fold 1 of 2")
        for v in range(40):
            bar.evaluation(1.0 / (v + 1))
        bar.watch(count, best)
        count.value = 100  # what worker processes counted
        bar.fold_done(0, 2, {i: float(table.labels[i]) for i in range(6)})
        time.sleep(0.6)  # the poller refreshes the count
    task = bar.bar.tasks[0]
    assert task.completed == 1 and task.description == "fold 1 of 2"
    assert task.fields["evals"] == 140 and task.fields["best"] == "mae so far 0.000 (6 items)"
