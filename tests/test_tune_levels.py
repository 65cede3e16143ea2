"""Tunable level values (`level ok "..." = 0.5 in 0.2..0.8`): checked, kept by fmt and the JSON form, tuned."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gsrlang.analysis.tune import FitSettings, Space, fit, knobs, predict, with_levels
from gsrlang.cli import main
from gsrlang.execution.tracetable import table_from_cells
from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.lang.jsonform import JsonFormError, json_to_source, program_to_json
from gsrlang.lang.syntax.formatter import format_source
from gsrlang.semantics.evaluate import Evaluator, with_parameters

LEVELS = """rubric levels "a level's value is learned"
task pointwise { scale = 1..5  quantize = none }
criterion q: Ordinal{bad, ok, good}? = human(field: "q") {
  level bad "Bad"
  level ok "Fine" = 0.5 in 0.05..0.95
  level good "Good"
}
criterion c: Score = human(field: "c")
sink weighted_mean(items: [normalize(default(q, value: ok)), c], weights: [0.5 in 0..1, 0.5 in 0..1])
"""
TRUE_OK, TRUE_SHARE = 0.8, 0.6


def program(text=LEVELS):
    result = analyze(text)
    assert result.program is not None, [(d.code, d.message) for d in result.diagnostics]
    return result.program


def synthetic(n: int, seed: int = 0):
    """q's level (a fifth abstain, read as `ok` by the default), c uniform; label from the true numbers."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 4, n)  # 3: abstains
    c = rng.uniform(size=n)
    value = np.array([0.0, TRUE_OK, 1.0, TRUE_OK])[q]
    y = 1 + 4 * (TRUE_SHARE * value + (1 - TRUE_SHARE) * c)
    return [{"id": f"i{i}", "input": "x", "response": "r", "q": ["bad", "ok", "good", None][q[i]],
             "c": float(c[i]), "label": float(y[i])} for i in range(n)]


def table_of(p, rows):
    return table_from_cells(p, "pointwise", [
        (r["id"], r["label"], {"q": [("abstain", None) if r["q"] is None else ("ok", r["q"])],
                               "c": [("ok", r["c"])]}) for r in rows])


def test_a_level_value_range_reaches_the_program():
    p = program()
    assert p.node("q").tune == {"values[ok]": (0.05, 0.95)}
    assert p.node("q").type.values == (0.0, 0.5, 1.0)
    bare = program(LEVELS.replace(" in 0.05..0.95", ""))
    assert bare.content_hash == p.content_hash and not bare.node("q").tune
    assert [k.name for k in knobs(p)] == ["q.values[ok]", "sink.weights[0]", "sink.weights[1]"]
    # --all: every explicit level value, within [0, 1]
    assert [(k.name, k.lo, k.hi) for k in knobs(bare, every=True)][0] == ("q.values[ok]", 0.0, 1.0)


def test_fmt_and_json_keep_a_level_value_range():
    formatted = format_source(LEVELS)
    assert 'level ok "Fine" = 0.5 in 0.05..0.95' in formatted
    assert program(formatted).to_json() == program().to_json()
    doc = program_to_json(program())
    assert program(json_to_source(doc)).to_json() == program().to_json()
    doc = json.loads(json.dumps(doc))
    next(n for n in doc["nodes"] if n["id"] == "q")["tune"] = {"values[good]": [0.5, 1]}
    with pytest.raises(JsonFormError, match="names no level value"):
        json_to_source(doc)


@pytest.mark.parametrize("change, code, words", [
    (("0.5 in 0.05..0.95", "0.5 in 0.6..0.9"), "GSR305", "outside its tuning range"),
    (("0.5 in 0.05..0.95", "0.5 in 0.2..1.5"), "GSR305", "the value of level `ok` leaves [0, 1]"),
    (("0.5 in 0.05..0.95", "0.5 in 0.9..0.1"), "GSR305", "empty"),
    (("sink ", 'criterion flag: Bool = human(field: "f") {\n  level true "yes" = 0.5 in 0..1\n}\nsink '),
     "GSR306", "only ordinal levels take a value"),
])
def test_bad_level_value_ranges_are_diagnosed(change, code, words):
    result = analyze(LEVELS.replace(*change))
    assert result.program is None
    found = [(d.code, d.message) for d in result.diagnostics]
    assert any(c == code and words in m for c, m in found), found
    assert not any(c == "GSR320" for c, _ in found), found  # the real problem, said once


@pytest.mark.slow  # a whole tuning run of many folds: the slow tier (docs/testing.md)
def test_tuning_recovers_a_known_level_value():
    """Tolerance: the level value and the weight share each within 0.02 (400 noiseless items)."""
    p = program()
    ks = knobs(p)
    theta = fit(p, ks, table_of(p, synthetic(400)), FitSettings(shrink=0.0))
    got = dict(zip([k.name for k in ks], theta))
    assert abs(got["q.values[ok]"] - TRUE_OK) <= 0.02, got
    assert abs(got["sink.weights[0]"] / (got["sink.weights[0]"] + got["sink.weights[1]"]) - TRUE_SHARE) <= 0.02, got
    # the tuned program, rebuilt, predicts what the tuning evaluated (the level value reaches `normalize`
    # through `default`, which carries its input's values)
    space = Space(p, ks)
    tuned = with_parameters(with_levels(p, space.levels(theta)), *space.overrides(theta))
    assert tuned.node("q").type.values[1] == pytest.approx(got["q.values[ok]"])
    rows = synthetic(50, seed=3)
    assert predict(p, ks, theta, table_of(p, rows)) == Evaluator(tuned).run(table_of(tuned, rows)).predictions()


def test_gsr_tune_writes_the_tuned_level_value(tmp_path, capsys):
    prog = tmp_path / "levels.gsr"
    prog.write_text(LEVELS)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in synthetic(120)))
    out = tmp_path / "levels.tuned.gsr"
    assert main(["tune", str(prog), "--data", str(data), "--id-field", "id", "--label-field", "label",
                 "--folds", "3", "--bootstrap", "50", "--shrink", "0"]) == 0, capsys.readouterr()
    assert "q.values[ok]" in capsys.readouterr().out
    tuned = analyze_file(str(out)).program
    assert tuned is not None and tuned.node("q").tune == {"values[ok]": (0.05, 0.95)}
    assert abs(tuned.node("q").type.values[1] - TRUE_OK) <= 0.02
