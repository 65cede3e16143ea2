"""Trace and replay: exact reproduction, tampering, other program versions, and re-composition ("what if")."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from gsrlang.execution.executor import execute
from gsrlang.execution.replay import ReplayError, compatibility_problems, replay_records
from gsrlang.files.dataset import Candidate, Item
from gsrlang.judges.registry import default_registry
from gsrlang.lang.check.driver import analyze
from gsrlang.semantics.compose import Plan
from gsrlang.trace.schema import dumps, result_line
from gsrlang.trace.write import trace_record

TEXT = """
rubric chat
task pointwise { scale = 1..5  quantize = round }
task pairwise { epsilon = 0.02 }
criterion natural: Score[1..3] = human(field: "s.natural")
criterion relevant: Score[1..3]? = human(field: "s.relevant")
criterion level: Ordinal{poor, fair, good} = human(field: "s.level") { level fair "ok" = 0.6 }
criterion rambling: Bool = rule.word_count(above: 5)
node body = weighted_mean(items: [scale(natural), scale(relevant), normalize(level)], weights: [1, 2, -0.5], on_abstain: partial)
node final = cap(base: body, trigger: rambling, at: 0.4)
sink final
"""


def program(text: str = TEXT):
    analysis = analyze(text, "chat.gsr")
    assert analysis.program is not None, [d.message for d in analysis.errors]
    return analysis.program


def make_item(k: int, natural, relevant, level, words: int) -> Item:
    return Item(f"i{k}", k + 1, "input", (Candidate("A", " ".join(["w"] * words)),), None, None,
                {"s": {"natural": natural, "relevant": relevant, "level": level}})


def record_for(prog, it: Item, mode="pointwise") -> dict:
    plan = Plan(prog)
    run = asyncio.run(execute(plan, it, default_registry(), mode))
    return json.loads(dumps(trace_record(run, plan, "chat.gsr")))  # through JSON, as on disk


def replay(prog, records, verify=True):
    return list(replay_records(Plan(prog), list(enumerate(records, start=1)), verify))


ITEMS = [make_item(0, 3, 2, "fair", 2), make_item(1, 1.5, None, "good", 9), make_item(2, 4.5, 2, "poor", 1),
         make_item(3, 2.25, 1, "poor", 3)]


def test_replay_reproduces_every_record_exactly():
    prog = program()
    records = [record_for(prog, it) for it in ITEMS]
    assert [r["status"] for r in records] == ["ok", "ok", "invalid", "ok"]
    out = replay(prog, records)
    assert [d for *_, d in out] == [None] * 4
    assert [result_line(run, prog) for _, _, run, _, _ in out] == [r["result"] for r in records]


unit = st.floats(min_value=1, max_value=3, allow_nan=False)


@pytest.mark.examples
@settings(max_examples=examples(150), deadline=None)
@given(unit, st.one_of(unit, st.none()), st.sampled_from(["poor", "fair", "good"]), st.integers(0, 8))
def test_replay_reproduces_random_items(natural, relevant, level, words):
    prog = program()
    record = record_for(prog, make_item(0, natural, relevant, level, words))
    [(_, _, run, _, difference)] = replay(prog, [record])
    assert difference is None
    assert json.loads(dumps(trace_record(run, Plan(prog), "chat.gsr"))) == record


def _node(record, node_id):
    return next(n for n in record["nodes"] if n["id"] == node_id)


def test_a_tampered_operator_output_is_pointed_at():
    prog = program()
    records = [record_for(prog, it) for it in ITEMS]
    tampered = copy.deepcopy(records)
    _node(tampered[1], "body")["output"][0] += 1e-12
    out = replay(prog, tampered)
    diffs = [d for *_, d in out if d is not None]
    assert len(diffs) == 1
    d = diffs[0]
    assert (d.item_id, d.trace_line, d.node, d.candidate) == ("i1", 2, "body", "A")
    assert "node `body`, candidate A: recorded" in d.describe()


def test_a_tampered_criterion_output_is_caught_at_the_criterion():
    prog = program()
    record = record_for(prog, ITEMS[0])
    _node(record, "natural")["output"] = [2.0]
    [(*_, d)] = replay(prog, [record])
    assert d.node == "natural" and "differs from its recorded judgment" in d.detail


def test_tampered_parameters_and_results_are_caught():
    prog = program()
    record = record_for(prog, ITEMS[0])
    bad = copy.deepcopy(record)
    _node(bad, "final")["params"]["at"] = 0.5
    [(*_, d)] = replay(prog, [bad])
    assert d.node == "final" and "`params`" in d.detail
    bad = copy.deepcopy(record)
    bad["result"]["score"] = 5
    [(*_, d)] = replay(prog, [bad])
    assert d.node == "result" and d.recorded == 5
    bad = copy.deepcopy(record)
    bad["readout"]["raw"] = 1.0
    [(*_, d)] = replay(prog, [bad])
    assert d.node == "readout"


def test_a_trace_from_another_program_version_is_refused():
    prog = program()
    records = [record_for(prog, it) for it in ITEMS]
    edited = program(TEXT.replace("at: 0.4", "at: 0.3"))
    with pytest.raises(ReplayError, match="another version of the program"):
        replay(edited, records)


def test_what_if_recomposes_under_an_edited_program():
    prog = program()
    edited = program(TEXT.replace("weights: [1, 2, -0.5]", "weights: [1, 1, 0]").replace("at: 0.4", "at: 0.3"))
    records = [record_for(prog, it) for it in ITEMS]
    out = replay(edited, records, verify=False)
    direct = [record_for(edited, it) for it in ITEMS]
    assert [result_line(run, edited) for _, _, run, _, _ in out] == [r["result"] for r in direct]


def test_what_if_may_drop_criteria_and_change_level_values():
    prog = program()
    edited = program(TEXT.replace('= 0.6 }', '= 0.9 }').replace("criterion rambling: Bool = rule.word_count(above: 5)\n", "")
                     .replace("node final = cap(base: body, trigger: rambling, at: 0.4)", "node final = body"))
    records = [record_for(prog, it) for it in ITEMS]
    out = replay(edited, records, verify=False)
    assert [r.readout.sink for _, _, r, _, _ in out if r.readout] == [
        record_for(edited, it)["readout"]["sink"] for it in ITEMS if record_for(edited, it)["readout"]]


def test_what_if_reports_missing_and_changed_criteria_precisely():
    prog = program()
    record = record_for(prog, ITEMS[0])
    other = program(TEXT.replace("criterion natural: Score[1..3]", "criterion natural: Score[1..5]")
                    .replace('criterion rambling: Bool = rule.word_count(above: 5)',
                             'criterion rambling: Bool = rule.word_count(above: 5)\ncriterion polite: Bool = human(field: "p")')
                    .replace("trigger: rambling", "trigger: any(items: [rambling, polite])"))
    problems = compatibility_problems(other, record, "`other.gsr`")
    assert "criterion `natural` was recorded as `Score[1..3]` but is `Score[1..5]` in `other.gsr`" in problems
    assert "criterion `polite` of `other.gsr` is not in the trace: its judgments were never recorded" in problems
    with pytest.raises(ReplayError, match="polite"):
        replay(other, [record], verify=False)


def test_widening_a_criterion_to_optional_is_compatible():
    prog = program()
    record = record_for(prog, ITEMS[0])
    wider = program(TEXT.replace("criterion natural: Score[1..3] =", "criterion natural: Score[1..3]? =")
                    .replace("weights: [1, 2, -0.5], on_abstain: partial", "weights: [1, 2, -0.5], on_abstain: skip"))
    assert compatibility_problems(wider, record) == []


def test_pairwise_records_replay():
    prog = program()
    it = Item("p1", 1, "in", (Candidate("A", "a b"), Candidate("B", "a b c d e f g")), None, "A",
              {"s": {"natural": 3, "relevant": 3, "level": "good"}})
    record = record_for(prog, it, "pairwise")
    assert record["result"]["winner"] == "first"
    [(*_, d)] = replay(prog, [record])
    assert d is None


def test_the_run_summary_record_is_kept_apart_from_the_items(tmp_path):
    from gsrlang.execution.runs import replay_file
    from gsrlang.trace.read import read_trace
    from gsrlang.trace.schema import is_summary, summary_record
    from gsrlang.trace.write import TraceWriter
    from gsrlang.views.render import read_trace_item

    prog = program()
    plan = Plan(prog)
    path = tmp_path / "t.jsonl"
    with path.open("w") as handle:
        writer = TraceWriter(handle, plan, "chat.gsr")
        for it in ITEMS:
            writer.write(asyncio.run(execute(plan, it, default_registry(), "pointwise")))
        writer.write_summary(summary_record(items=4, ok=3, invalid=1, failed=0, wall_s=0.5, judges={}))
    assert [r["item"]["id"] for _, r in read_trace(path)] == ["i0", "i1", "i2", "i3"]
    everything = list(read_trace(path, summaries=True))
    assert len(everything) == 5 and is_summary(everything[-1][1]) and everything[-1][0] == 6  # line 1 is the header
    assert not any(is_summary(r) for _, r in everything[:-1])
    summary = replay_file(path, prog, verify=True)
    assert summary.items == 4 and summary.first_difference is None
    assert summary.recorded == everything[-1][1]
    assert read_trace_item(path, "i2").item_id == "i2"  # the overlay reader skips it too
