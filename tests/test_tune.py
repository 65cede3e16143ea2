"""gsr tune: recovery of known parameters, no leakage across folds, the written program, bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from gsrlang.analysis.rewrite import HEADER_PREFIX
from gsrlang.analysis.tune import FitSettings, Space, cross_validate, fit, knobs, predict
from gsrlang.cli import main
from gsrlang.execution.tracetable import table_from_cells
from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.semantics.evaluate import Evaluator, with_parameters

pytest.importorskip("scipy")

SYNTH = """rubric synth "known parameters"
task pointwise { scale = 1..5  quantize = none }
criterion a: Score = human(field: "a")
criterion b: Score = human(field: "b")
node body = weighted_mean(items: [a, b], weights: [0.5 in 0..1, 0.5 in 0..1])
sink cap(base: body, trigger: not(threshold(b, at: 0.5 in 0.1..0.9)), at: 0.5 in 0..1)
"""
TRUE_SHARE, TRUE_AT, TRUE_CAP = 0.8, 0.3, 0.25


def synthetic(n: int, seed: int = 1):
    """Items with a, b uniform and the label given by the program at the true parameters (no noise)."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(size=n), rng.uniform(size=n)
    s = TRUE_SHARE * a + (1 - TRUE_SHARE) * b
    s = np.where(b < TRUE_AT, np.minimum(s, TRUE_CAP), s)
    return [{"id": f"x{i}", "input": "q", "response": "r", "a": float(x), "b": float(y), "label": float(1 + 4 * v)}
            for i, (x, y, v) in enumerate(zip(a, b, s))]


def table_of(program, rows):
    return table_from_cells(program, "pointwise", [(r["id"], r.get("label"), {"a": [("ok", r["a"])],
                                                                             "b": [("ok", r["b"])]}) for r in rows])


def test_tuning_recovers_known_parameters():
    """Tolerance: the weight share within 0.02, both gate levels within 0.03 (400 noiseless items)."""
    program = analyze(SYNTH).program
    ks = knobs(program)
    theta = fit(program, ks, table_of(program, synthetic(400)), FitSettings(shrink=0.0, seed=0))
    got = dict(zip([k.name for k in ks], theta))
    share = got["body.weights[0]"] / (got["body.weights[0]"] + got["body.weights[1]"])
    assert abs(share - TRUE_SHARE) <= 0.02, got
    assert abs(got["sink.trigger.x.at"] - TRUE_AT) <= 0.03, got
    assert abs(got["sink.at"] - TRUE_CAP) <= 0.03, got


def test_cross_validation_never_sees_the_held_out_labels():
    program = analyze(SYNTH).program
    ks = knobs(program)
    rows = synthetic(60)
    table = table_of(program, rows)
    seen = []

    def spy(prog, knobs_, train, settings):
        seen.append(set(train.ids))
        assert all(label is not None for label in train.labels)
        return fit(prog, knobs_, train, settings)

    settings = FitSettings(seed=3, maxiter=5, popsize=5)
    cv = cross_validate(program, ks, table, 4, settings, fitter=spy)
    assert len(seen) == 4
    for f, ids in enumerate(seen):
        held_out = {i for i, fold in zip(cv.ids, cv.fold_of) if fold == f}
        assert held_out and not ids & held_out
    # scrambling one fold's labels leaves that fold's predictions unchanged
    fold0 = {i for i, fold in zip(cv.ids, cv.fold_of) if fold == 0}
    scrambled = [dict(r, label=(1.0 if r["id"] in fold0 else r["label"])) for r in rows]
    again = cross_validate(program, ks, table_of(program, scrambled), 4, settings)
    for i, fold, p, q in zip(cv.ids, cv.fold_of, cv.tuned, again.tuned):
        if fold == 0:
            assert p == q
    assert cv.golds != again.golds


def test_too_few_labels_for_the_folds():
    program = analyze(SYNTH).program
    from gsrlang.analysis.tune import TuneError

    with pytest.raises(TuneError, match="too few for 5 folds"):
        cross_validate(program, knobs(program), table_of(program, synthetic(7)), 5, FitSettings())


def _write_data(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_gsr_tune_writes_a_checked_program_with_its_provenance(tmp_path, capsys):
    prog = tmp_path / "synth.gsr"
    prog.write_text(SYNTH)
    rows = synthetic(80)
    rows[3]["label"] = "excellent"  # unparsable: counted, left out
    del rows[5]["label"]  # missing
    data = tmp_path / "d.jsonl"
    _write_data(data, rows)
    out = tmp_path / "synth.tuned.gsr"
    code = main(["tune", str(prog), "--data", str(data), "--id-field", "id", "--label-field", "label",
                 "--folds", "3", "--bootstrap", "100"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "78 labelled item" in text and "1 unusable label, 1 missing" in text
    assert "3-fold cross-validation" in text and "exact" in text
    written = out.read_text()
    assert written.startswith(HEADER_PREFIX + "tuned from") and "CV exact: tuned" in written
    assert analyze_file(str(out)).program is not None  # gsr check accepts the header unchanged
    assert main(["fmt", "--check", str(out)]) == 0  # canonical layout
    tuned = analyze_file(str(out)).program
    assert tuned.content_hash != analyze_file(str(prog)).program.content_hash
    # tuned again, the header is replaced, not repeated
    assert main(["tune", str(out), "--data", str(data), "--id-field", "id", "--label-field", "label", "--folds", "3",
                 "--bootstrap", "10", "--out", str(tmp_path / "again.gsr")]) == 0
    assert (tmp_path / "again.gsr").read_text().count("tuned from") == 1


def test_gsr_tune_bad_input(tmp_path, capsys):
    prog = tmp_path / "fixed.gsr"
    prog.write_text(SYNTH.replace(" in 0..1", "").replace(" in 0.1..0.9", ""))
    data = tmp_path / "d.jsonl"
    _write_data(data, synthetic(20))
    assert main(["tune", str(prog), "--data", str(data), "--label-field", "label"]) == 2
    assert "nothing to tune" in capsys.readouterr().err
    # --all finds the written numbers
    assert knobs(analyze_file(str(prog)).program, every=True)
    # too few labelled items
    _write_data(data, synthetic(6))
    assert main(["tune", str(prog), "--all", "--data", str(data), "--label-field", "label"]) == 2
    assert "too few for 5 folds" in capsys.readouterr().err
    # never overwrite an input
    assert main(["tune", str(prog), "--all", "--data", str(data), "--label-field", "label", "--out", str(prog)]) == 2
    assert "refusing to overwrite an input" in capsys.readouterr().err
    # as many response columns as a pointwise item has
    assert main(["tune", str(prog), "--all", "--data", str(data), "--label-field", "label",
                 "--responses", "a,b,c"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gsr tune: error: a pointwise run judges 1 response column; got 3 (a, b, c)"


def test_a_program_with_both_tasks_is_tuned_for_the_one_named_by_mode(tmp_path, capsys):
    prog = tmp_path / "both.gsr"
    prog.write_text(SYNTH.replace("task pointwise {", "task pairwise { epsilon = 0  on_tie = tie }\ntask pointwise {"))
    data = tmp_path / "d.jsonl"
    _write_data(data, synthetic(40))
    assert main(["tune", str(prog), "--data", str(data), "--label-field", "label", "--folds", "2"]) == 2
    assert "both a pointwise and a pairwise task: choose one with --mode" in capsys.readouterr().err
    assert main(["tune", str(prog), "--data", str(data), "--label-field", "label", "--folds", "2", "--bootstrap", "10",
                 "--mode", "pointwise"]) == 0
    assert "2-fold cross-validation" in capsys.readouterr().out


def test_a_trace_from_another_program_is_refused(tmp_path, capsys):
    from gsrlang.execution.planner import RunConfig
    from gsrlang.execution.runs import run_file
    from gsrlang.files.dataset import ColumnMap
    from gsrlang.judges.registry import default_registry

    other = analyze('rubric o\ntask pointwise { scale = 1..5 }\ncriterion c: Score = human(field: "a")\nsink c\n',
                    ).program
    data = tmp_path / "d.jsonl"
    _write_data(data, synthetic(12))
    trace = tmp_path / "t.jsonl"
    run_file(other, data, ColumnMap("input", ("response",), "id", "label"), default_registry(), "pointwise",
             RunConfig(trace=str(trace)))
    prog = tmp_path / "synth.gsr"
    prog.write_text(SYNTH)
    assert main(["tune", str(prog), "--trace", str(trace)]) == 1
    assert "cannot feed" in capsys.readouterr().err


def test_predictions_use_the_exact_readout():
    program = analyze(SYNTH).program
    ks = knobs(program)
    table = table_of(program, synthetic(30))
    preds = predict(program, ks, [k.start for k in ks], table)
    from gsrlang.semantics.evaluate import Evaluator

    assert preds == Evaluator(program).run(table).predictions()


def test_a_weight_moves_by_its_share_not_its_scale():
    from gsrlang.analysis.tune import Space

    program = analyze(SYNTH).program
    ks = knobs(program)
    space = Space(program, ks)
    names = [k.name for k in ks]
    w0, w1 = names.index("body.weights[0]"), names.index("body.weights[1]")
    theta = space.start.copy()
    theta[[w0, w1]] *= 1.7  # the same shares: no move
    assert np.allclose(space.moves(theta), 0)
    theta[w0], theta[w1] = 0.75, 0.25  # shares 3/4 and 1/4 from 1/2 each: moves of +-1/2 equal share
    assert np.allclose(space.moves(theta)[[w0, w1]], [0.5, -0.5])


@pytest.mark.slow  # a whole tuning run of many folds: the slow tier (docs/testing.md)
def test_auto_shrinkage_is_chosen_inside_each_fold_without_leakage():
    from gsrlang.analysis.tune import choose_shrink

    program = analyze(SYNTH).program
    ks = knobs(program)
    rng = np.random.default_rng(5)
    rows = [dict(r, label=float(min(5, max(1, r["label"] + rng.normal(0, 0.4))))) for r in synthetic(60)]
    settings = FitSettings(shrink=None, shrink_grid=(0.0, 10.0), inner_folds=3, maxiter=4, popsize=4, seed=1)
    chosen, scores = choose_shrink(program, ks, table_of(program, rows), settings)
    assert set(scores) == {0.0, 10.0} and chosen in scores
    assert scores[chosen] == max(scores.values())
    cv = cross_validate(program, ks, table_of(program, rows), 3, settings)
    # the outer held-out fold's labels reach neither the inner choice nor the fit: scrambling them leaves
    # that fold's predictions unchanged (nested CV)
    fold0 = {i for i, fold in zip(cv.ids, cv.fold_of) if fold == 0}
    scrambled = [dict(r, label=(5.0 if r["id"] in fold0 else r["label"])) for r in rows]
    again = cross_validate(program, ks, table_of(program, scrambled), 3, settings)
    assert [p for p, f in zip(cv.tuned, cv.fold_of) if f == 0] == [p for p, f in zip(again.tuned, again.fold_of)
                                                                   if f == 0]


def test_gsr_tune_shrink_auto_reports_its_choice(tmp_path, capsys, monkeypatch):
    import functools

    import gsrlang.analysis.tune as tune

    # a small search, so that the 2 x (2 x 2 + 1) + 2 x 2 + 1 fits stay quick
    monkeypatch.setattr(tune, "FitSettings", functools.partial(tune.FitSettings, maxiter=3, popsize=4,
                                                               shrink_grid=(0.0, 1.0), inner_folds=2))
    prog = tmp_path / "synth.gsr"
    prog.write_text(SYNTH)
    data = tmp_path / "d.jsonl"
    _write_data(data, synthetic(40))
    out = tmp_path / "auto.gsr"
    assert main(["tune", str(prog), "--data", str(data), "--label-field", "label", "--folds", "2",
                 "--shrink", "auto", "--bootstrap", "10", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "shrinkage: auto (" in text and "inner 2-fold CV exact: 0: " in text and "(nested)" in text
    assert "shrink: auto (" in out.read_text() and "2-fold CV (nested), seed 0" in out.read_text()
    for bad in ("-1", "lots", "nan"):
        assert main(["tune", str(prog), "--data", str(data), "--label-field", "label", "--shrink", bad]) == 2
        assert "--shrink must be" in capsys.readouterr().err


def _tune_argv(prog, data, *extra):
    return ["tune", str(prog), "--data", str(data), "--id-field", "id", "--label-field", "label", "--folds", "2",
            "--bootstrap", "10", *map(str, extra)]


@pytest.mark.parametrize("what", ["data", "program"])
def test_tune_out_onto_a_hard_link_of_an_input_is_refused(tmp_path, capsys, what):
    # issue 24 item 4: tune compared only resolved paths, so --out onto a hard link of its data or program
    # overwrote it; it now uses safeio's check (same path or same inode), as every other writer
    prog, data = tmp_path / "synth.gsr", tmp_path / "d.jsonl"
    prog.write_text(SYNTH)
    _write_data(data, synthetic(40))
    link = tmp_path / "link"
    link.hardlink_to(data if what == "data" else prog)
    before = (data if what == "data" else prog).read_bytes()
    assert main(_tune_argv(prog, data, "--out", link)) == 2
    err = capsys.readouterr().err
    assert "is the same file as" in err and "refusing to overwrite an input" in err
    assert (data if what == "data" else prog).read_bytes() == before


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\r"])
def test_text_hidden_after_a_line_separator_in_an_old_header_stays_a_comment(tmp_path, capsys, sep):
    # issue 24 item 12: str.splitlines() also splits at these, where the lexer's comment does not end: text
    # hidden after one in an old header comment became code (a `task pairwise` appeared)
    prog, data, out = tmp_path / "synth.gsr", tmp_path / "d.jsonl", tmp_path / "out.gsr"
    hidden = "task pairwise { epsilon = 0.05  on_tie = tie }"
    prog.write_text(f"{HEADER_PREFIX}tuned from x{sep}{hidden}\n" + SYNTH)
    assert analyze_file(str(prog)).program.readout.pairwise is None  # the lexer reads it as one comment
    _write_data(data, synthetic(40))
    assert main(_tune_argv(prog, data, "--out", out)) == 0, capsys.readouterr().err
    capsys.readouterr()
    written = analyze_file(str(out)).program
    assert written is not None and written.readout.pairwise is None
    assert hidden not in out.read_text()  # the old header went whole, as one comment line


def test_a_newline_in_a_file_name_stays_in_the_header_comment(tmp_path, capsys):
    # the header names the data file: a name with a newline in it must not end the comment
    prog = tmp_path / "synth.gsr"
    prog.write_text(SYNTH)
    data = tmp_path / "d\ntask pairwise { epsilon = 0.05  on_tie = tie }\n.jsonl"
    _write_data(data, synthetic(40))
    out = tmp_path / "out.gsr"
    assert main(_tune_argv(prog, data, "--out", out)) == 0
    capsys.readouterr()
    written = analyze_file(str(out)).program
    assert written is not None and written.readout.pairwise is None


def test_a_search_evaluates_repeated_items_once_with_the_same_outcome():
    """Ratings take few values, so items repeat: the search evaluates the distinct ones and gives every item its
    twin's outcome, which is the outcome of evaluating it, bit for bit, under any parameter set."""
    program = analyze(SYNTH).program
    rng = np.random.default_rng(5)
    rows = [{"id": f"x{i}", "a": float(a), "b": float(b), "label": 3.0}
            for i, (a, b) in enumerate(rng.integers(0, 5, size=(400, 2)) / 4)]
    table = table_of(program, rows)
    ks = knobs(program)
    space = Space(program, ks)
    assert len(table.distinct()[0]) == 25
    for theta in [space.start, space.lower, space.upper, rng.uniform(space.lower, space.upper)]:
        got = space.run(table, theta)
        params, cuts = space.overrides(theta)
        want = Evaluator(with_parameters(program, params, cuts)).run(table)
        assert (got.sink.tobytes(), got.ok.tolist(), got.score.tobytes()) == \
            (want.sink.tobytes(), want.ok.tolist(), want.score.tobytes())


def test_the_link_of_many_items_does_not_depend_on_the_blas_threads():
    """Tuning's line fit (the cut points of a thresholds readout) gives the same bits with one BLAS thread as
    with two: a BLAS dot product of more than ~10,000 items splits its sum between the threads."""
    import subprocess
    import sys

    code = ("import numpy as np; from gsrlang.analysis.tune import _link; r = np.random.default_rng(0); "
            "s = r.random(60000); print([v.hex() for v in _link(s, 2 * s + r.normal(0, 0.3, 60000))])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "OPENBLAS_NUM_THREADS": threads}).stdout for threads in ("1", "2")}
    assert len(outs) == 1, outs
