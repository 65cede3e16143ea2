"""Columnar evaluation equals the item-at-a-time interpreter.

Statuses, quantized scores and pairwise winners must be equal; sink values within
SINK_TOLERANCE (1e-12). Shown on generated programs with generated judgments
(hypothesis: every criterion type, abstentions, invalid judgments, every
abstention policy, every quantizer), on every shipped example that runs without
a model, and from a trace.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runfiles import records
from test_properties import SETTINGS, checkable_programs, modes
from tiers import examples

from gsrlang.execution.executor import check_judgments, default_mode, finish
from gsrlang.execution.planner import RunConfig
from gsrlang.execution.runs import label_reader, run_file
from gsrlang.execution.tracetable import table_from_cells, table_from_data, table_from_trace
from gsrlang.files.dataset import ColumnMap
from gsrlang.judges.base import Judgment
from gsrlang.judges.registry import default_registry
from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.evaluate import SINK_TOLERANCE, Evaluator
from gsrlang.semantics.values import ABSTAIN

ROOT = Path(__file__).resolve().parent.parent


def _value(draw, t):
    if t.kind == "bool":
        return draw(st.booleans())
    if t.kind == "score":
        return draw(st.one_of(st.sampled_from([t.lo, t.hi, (t.lo + t.hi) / 2]),
                              st.floats(t.lo, t.hi, allow_nan=False)))
    return draw(st.sampled_from(t.labels))


def _judgment(draw, t):
    kind = draw(st.sampled_from(["ok"] * 8 + ["abstained"] * (3 if t.optional else 0) + ["invalid"]))
    if kind == "ok":
        return Judgment.ok(_value(draw, t))
    return Judgment.abstained() if kind == "abstained" else Judgment.invalid("no answer")


def interpreter(plan, mode, items):
    """(status, score or winner, sink vector) per item, by the item-at-a-time path."""
    cands = ("A",) if mode == "pointwise" else ("A", "B")
    out = []
    for judged in items:
        values, checked = check_judgments(plan, judged, cands)
        run = finish(plan, mode, None, 0, cands, values, checked)
        result = None
        if run.status == "ok":
            result = run.readout.score if mode == "pointwise" else run.readout.winner
        sink = [run.readout.sink[c] for c in cands] if run.status == "ok" else None
        out.append((run.status, result, sink))
    return out


def columnar(program, mode, items):
    table = table_from_cells(program, mode, [
        (i, None, {k: [(j.status, j.value) for j in v] for k, v in judged.items()}) for i, judged in enumerate(items)])
    return Evaluator(program).run(table)


def assert_same(program, mode, items):
    """Statuses equal; sinks, scores and winners equal bit for bit."""
    expected = interpreter(Plan(program), mode, items)
    ev = columnar(program, mode, items)
    preds = ev.predictions()
    for i, (status, result, sink) in enumerate(expected):
        assert bool(ev.ok[i]) == (status == "ok"), (i, status)
        if status != "ok":
            continue
        assert type(result) in (int, float, str), result
        assert preds[i] == result and ev.sink[i].tolist() == sink, (i, preds[i], result, ev.sink[i], sink)


@pytest.mark.examples
@settings(max_examples=examples(150), **SETTINGS)
@given(st.data())
def test_columnar_equals_the_interpreter_on_generated_programs(data):
    text, _ = data.draw(checkable_programs())
    program = analyze(text).program
    assert program is not None
    for mode in modes(program):
        m = 1 if mode == "pointwise" else 2
        items = [{n.id: tuple(_judgment(data.draw, n.type) for _ in range(m)) for n in program.criteria}
                 for _ in range(data.draw(st.integers(1, 12)))]
        assert_same(program, mode, items)


def _parameter_set(draw, program) -> dict:
    """New weights, gate levels and cut points for some of a program's nodes."""
    params = {}
    for n in program.nodes:
        if not draw(st.booleans()):
            continue
        if n.op == "weighted_mean":
            k = len(n.port_inputs("items"))
            params[n.id] = {"weights": [draw(st.sampled_from([1.0, 0.0, 0.5, -0.5, 2.0, 0.3])) for _ in range(k)]}
        elif n.op in ("cap", "floor"):
            params[n.id] = {"at": draw(st.sampled_from([0.0, 0.25, 0.7, 1.0, 0.1 + 0.2]))}
    return params


@pytest.mark.examples
@settings(max_examples=examples(100), **SETTINGS)
@given(st.data())
def test_parameter_sets_in_turn_on_one_evaluator_equal_the_interpreter_on_the_rebuilt_program(data):
    """What one evaluator keeps between parameter sets (the columns upstream of no changed parameter, per
    table) never leaks into the next set: each equals the interpreter on the program rebuilt with it."""
    from gsrlang.semantics.evaluate import with_parameters

    text, _ = data.draw(checkable_programs())
    program = analyze(text).program
    mode = modes(program)[0]
    m = 1 if mode == "pointwise" else 2
    tables = []
    for _ in range(2):  # two tables, used alternately, as tuning alternates between folds
        items = [{n.id: tuple(_judgment(data.draw, n.type) for _ in range(m)) for n in program.criteria}
                 for _ in range(data.draw(st.integers(1, 10)))]
        tables.append((items, table_from_cells(program, mode, [
            (i, None, {k: [(j.status, j.value) for j in v] for k, v in judged.items()})
            for i, judged in enumerate(items)])))
    evaluator = Evaluator(program)
    for turn in range(4):
        items, table = tables[turn % 2]
        params = _parameter_set(data.draw, program)
        cuts = None
        if mode == "pointwise" and program.readout.pointwise.quantize == "thresholds" and data.draw(st.booleans()):
            cuts = sorted(data.draw(st.lists(st.sampled_from([0.1, 0.3, 0.5, 0.9]), min_size=2, max_size=2)))
        ev = evaluator.run(table, params=params, thresholds=cuts)
        rebuilt = with_parameters(program, params, cuts)
        preds = ev.predictions()
        for i, (status, result, sink) in enumerate(interpreter(Plan(rebuilt), mode, items)):
            assert bool(ev.ok[i]) == (status == "ok"), (turn, i, status)
            if status == "ok":
                if type(result) is float:  # an unquantized score: the sink on the scale, as close as the sinks
                    assert abs(preds[i] - result) <= 8 * SINK_TOLERANCE, (turn, i, preds[i], result)
                else:
                    assert preds[i] == result, (turn, i, preds[i], result)
                assert np.max(np.abs(ev.sink[i] - np.array(sink))) <= SINK_TOLERANCE


@pytest.mark.parametrize("policy", ["skip", "zero", "partial", "fail"])
@pytest.mark.parametrize("op", ["mean", "weighted_mean", "min", "max", "median", "product", "all", "any",
                                "fraction"])
def test_every_abstention_policy(policy, op):
    boolean = op in ("all", "any", "fraction")
    if boolean and policy == "partial":
        pytest.skip("`partial` is not a policy of the Bool reducers")
    items = "[a, b, c]" if boolean else "[normalize(a), normalize(b), normalize(c)]"
    weights = ", weights: [1, -0.5, 2]" if op == "weighted_mean" else ""
    body = f"{op}(items: {items}{weights}, on_abstain: {policy})"
    sink = f"fraction(items: [{body}, true])" if op in ("all", "any") else body
    text = ("rubric r\ntask pointwise { scale = 1..5  quantize = none }\n"
            + "".join(f'criterion {c}: Bool? = human(field: "{c}")\n' for c in "abc") + f"sink {sink}\n")
    result = analyze(text)
    assert result.program is not None, [d.message for d in result.diagnostics]
    values = [True, False, ABSTAIN]
    items = []
    for x in values:
        for y in values:
            for z in values:
                items.append({n: (Judgment.abstained() if v is ABSTAIN else Judgment.ok(v),)
                              for n, v in zip("abc", (x, y, z))})
    assert_same(result.program, "pointwise", items)


def _examples_without_a_model():
    from gsrlang.judges.registry import llm_judge_available  # noqa: F401  (the registry loads lazily)

    out = []
    for path in sorted((ROOT / "examples").rglob("*.gsr")):
        program = analyze_file(str(path)).program
        if program is not None and all(n.criterion.procedure.kind in ("human", "rule") for n in program.criteria):
            out.append(path)
    return out


EXAMPLE_DATA = {
    "topical_chat": ("data/dev.jsonl", dict(input_field="context", reference_field="fact", id_field="id",
                                            label_field="scores.overall")),
    "llmbar": ("data/natural.json", dict(input_field="input", response_fields=("output_1", "output_2"),
                                         label_field="label")),
}


@pytest.mark.parametrize("path", _examples_without_a_model(), ids=lambda p: p.name)
def test_columnar_equals_the_interpreter_on_every_example(path, tmp_path):
    """Every example that runs without a model: gsr run's own results vs the columnar evaluation of its trace."""
    data, cols = EXAMPLE_DATA[path.parent.name]
    program = analyze_file(str(path)).program
    mode = default_mode(program)
    trace = tmp_path / "t.jsonl"
    out = tmp_path / "r.jsonl"
    run_file(program, path.parent / data, ColumnMap(**cols), default_registry(), mode,
             RunConfig(out=str(out), trace=str(trace)))
    lines = records(out)  # the item lines, without the results file's end line
    for table in (table_from_trace(program, str(trace)),
                  table_from_data(program, path.parent / data, ColumnMap(**cols), default_registry(), mode,
                                  label_reader(program, mode, ColumnMap(**cols)))):
        ev = Evaluator(program).run(table)
        preds = ev.predictions()
        assert len(preds) == len(lines) > 0
        for line, pred, ok, sink in zip(lines, preds, ev.ok, ev.sink):
            assert (line["status"] == "ok") == bool(ok)
            assert pred == line["score" if mode == "pointwise" else "winner"]
            if ok:
                assert np.max(np.abs(sink - np.array(list(line["sink"].values())))) <= SINK_TOLERANCE
        assert [x["label"] for x in lines] == table.labels


def test_parameters_can_be_overridden_without_rebuilding():
    text = ("rubric r\ntask pointwise { scale = 1..5  quantize = thresholds(0.2, 0.4, 0.6, 0.8) }\n"
            'criterion a: Score = human(field: "a")\ncriterion b: Score = human(field: "b")\n'
            "node m = weighted_mean(items: [a, b], weights: [1, 1])\nsink cap(base: m, trigger: threshold(a, at: 0.1), "
            "at: 0.9)\n")
    program = analyze(text).program
    items = [{"a": (Judgment.ok(x),), "b": (Judgment.ok(y),)} for x in (0.0, 0.3, 1.0) for y in (0.0, 0.5, 1.0)]
    table = table_from_cells(program, "pointwise", [(i, None, {k: [(j.status, j.value) for j in v]
                                                              for k, v in it.items()}) for i, it in enumerate(items)])
    ev = Evaluator(program)
    wm = next(n.id for n in program.nodes if n.op == "weighted_mean")
    moved = ev.run(table, params={wm: {"weights": [1.0, 0.0]}}, thresholds=[0.1, 0.2, 0.3, 0.4])
    from gsrlang.semantics.evaluate import with_parameters

    rebuilt = with_parameters(program, {wm: {"weights": [1.0, 0.0]}}, [0.1, 0.2, 0.3, 0.4])
    assert moved.predictions() == Evaluator(rebuilt).run(table).predictions()
    assert moved.predictions() != ev.run(table).predictions()


def test_gsr_replay_what_if_uses_the_columnar_path_with_the_same_figures(tmp_path, capsys):
    from gsrlang.cli import main

    tc = ROOT / "examples" / "topical_chat"
    trace = tmp_path / "t.jsonl"
    assert main(["run", str(tc / "overall.gsr"), "--data", str(tc / "data" / "dev.jsonl"), "--input-field", "context",
                 "--reference-field", "fact", "--id-field", "id", "--label-field", "scores.overall",
                 "--trace", str(trace), "-q"]) == 0
    capsys.readouterr()
    flat = str(tc / "flat.gsr")
    assert main(["replay", str(trace), "--program", flat, "--bootstrap", "50"]) == 0  # columnar
    fast = capsys.readouterr().out
    assert main(["replay", str(trace), "--program", flat, "--bootstrap", "50", "--out", str(tmp_path / "o.jsonl")]) == 0
    slow = capsys.readouterr().out

    def figures(text):
        return [line for line in text.splitlines() if line.strip().startswith(("exact", "qwk", "mae", "spearman"))
                or "items:" in line]

    assert figures(fast) and figures(fast) == figures(slow)


def test_level_comparisons_equal_the_interpreter():
    text = ("rubric r\ntask pointwise { scale = 1..5  quantize = none }\n"
            'criterion q: Ordinal[1..5]? = human(field: "q")\ncriterion b: Bool = human(field: "b")\n'
            'criterion tone: Nominal{polite, rude} = human(field: "t")\n'
            "sink fraction(items: [at_most(q, 2), at_least(q, 4), is(tone, rude), is(b, true)], on_abstain: skip)\n")
    result = analyze(text)
    assert result.program is not None, [d.message for d in result.diagnostics]
    items = [{"q": (Judgment.abstained() if q is None else Judgment.ok(q),), "b": (Judgment.ok(b),),
              "tone": (Judgment.ok(t),)}
             for q in (None, "1", "2", "3", "4", "5") for b in (True, False) for t in ("polite", "rude")]
    assert_same(result.program, "pointwise", items)


@pytest.mark.parametrize("at", [0.0, -0.0, 0.3, 1.0, 1e-300, np.inf, -np.inf, np.nan])
def test_cap_and_floor_columns_are_the_elementwise_gate_bit_for_bit(at):
    """The gates build their bound from an infinity's bit pattern (gsrlang/semantics/kernels.py `_bound`): it must
    equal where(trigger, min(v, at), v) (max for floor) bit for bit, for odd levels and odd base values too."""
    from gsrlang.semantics.kernels import KERNELS, NodeValues

    v = np.array([0.0, -0.0, 0.2, 0.3, 1.0, np.nan, 5e-324, 0.7] * 3)
    t = np.array([True, False, True] * 8)
    zero = np.zeros(len(v), bool)
    for op, pick in (("cap", np.minimum), ("floor", np.maximum)):
        got = KERNELS[op].fn(NodeValues(v, zero, zero), NodeValues(t, zero, zero), at=at).values
        expected = np.where(t, pick(v, at), v)
        assert got.tobytes() == expected.tobytes(), (op, at, got, expected)


def _columns_of(ev):
    """Every per-item column of an evaluation, as bytes (NaN and -0.0 compared by their bits) or lists."""
    return [ev.sink.tobytes(), ev.ok.tobytes(), ev.failed.tobytes(),
            None if ev.raw is None else ev.raw.tobytes(), None if ev.score is None else ev.score.tobytes(),
            None if ev.winner is None else ev.winner.tolist()]


@pytest.mark.examples
@settings(max_examples=examples(100), **SETTINGS)
@given(st.data())
def test_the_distinct_items_evaluated_and_taken_back_are_the_whole_table_bit_for_bit(data):
    """`Table.distinct` + `Evaluation.at` (what tuning evaluates) against every item evaluated: items drawn from
    a few kinds (a failed one among them), so that most repeat."""
    text, _ = data.draw(checkable_programs())
    program = analyze(text).program
    for mode in modes(program):
        m = 1 if mode == "pointwise" else 2
        kinds = [{n.id: [(j.status, j.value) for j in (_judgment(data.draw, n.type) for _ in range(m))]
                  for n in program.criteria} for _ in range(data.draw(st.integers(1, 4)))] + [None]
        picks = data.draw(st.lists(st.integers(0, len(kinds) - 1), min_size=1, max_size=30))
        table = table_from_cells(program, mode, [(f"i{k}", None, kinds[p]) for k, p in enumerate(picks)])
        small, at = table.distinct()
        assert len(small) <= len(set(picks)) and at.shape == (len(table),)
        twins = [int(small.ids[a][1:]) for a in at.tolist()]  # the item each is evaluated as
        assert all(kinds[picks[t]] == kinds[p] for t, p in zip(twins, picks))
        evaluator = Evaluator(program)
        whole = _columns_of(evaluator.run(table))
        assert _columns_of(evaluator.run(small).at(at)) == whole
        # without the readout (what a surrogate search reads): the same sink and validity, no results
        assert _columns_of(evaluator.run(small, read=False).at(at)) == whole[:3] + [None, None, None]


def test_distinct_items_are_told_apart_by_every_column_and_mask():
    program = analyze('rubric d "d"\n'
                      'task pairwise { epsilon = 0  on_tie = tie }\n'
                      'criterion a: Score? = human(field: "a")\n'
                      'criterion b: Bool = human(field: "b")\n'
                      'sink cap(base: mean(items: [a], on_abstain: zero), trigger: b, at: 0.5)\n').program
    cells = [{"a": [("ok", 0.5), ("ok", 1.0)], "b": [("ok", True), ("ok", False)]},
             {"a": [("ok", 0.5), ("ok", 1.0)], "b": [("ok", True), ("ok", True)]},  # b differs, second candidate
             {"a": [("ok", 1.0), ("ok", 0.5)], "b": [("ok", True), ("ok", False)]},  # candidates swapped
             {"a": [("abstained", None), ("ok", 1.0)], "b": [("ok", True), ("ok", False)]},
             {"a": [("invalid", None), ("ok", 1.0)], "b": [("ok", True), ("ok", False)]},
             {"a": [("ok", 0.0), ("ok", 1.0)], "b": [("ok", True), ("ok", False)]},
             None]
    table = table_from_cells(program, "pairwise", [(f"i{k}", None, c) for k, c in enumerate(cells * 3)])
    small, at = table.distinct()
    assert small.ids == [f"i{k}" for k in range(len(cells))]
    assert at.tolist() == list(range(len(cells))) * 3
    empty = table.take(np.zeros(0, np.intp))
    assert empty.distinct()[0] is empty and empty.distinct()[1].shape == (0,)
