"""TraceView: the one answer to "value of node N", "did gate G fire" and "what changed the score"."""

from __future__ import annotations

from pathlib import Path

from gsrlang.cli import main
from gsrlang.trace.read import read_trace
from gsrlang.trace import TraceView

ROOT = Path(__file__).resolve().parents[1]


def _record(trigger, base, out):
    return {"nodes": [
        {"id": "t", "kind": "criterion", "output": trigger},
        {"id": "q", "kind": "criterion", "output": base},
        {"id": "g", "kind": "gate", "op": "cap", "inputs": {"base": ["q"], "trigger": ["t"]}, "output": out},
    ]}


def test_a_gate_that_fired_and_changed_the_value():
    view = TraceView.of_record(_record([True], [0.9], [0.2]))
    assert view.value("g", 0) == 0.2 and view.value("q", 0) == 0.9
    assert view.fired("g") and view.fired("g", 0) and view.changed("g", 0)
    assert view.fired_gates() == ["g"] and view.score_changes() == ["g"]


def test_a_gate_that_fired_without_changing_anything_and_one_that_did_not_fire():
    view = TraceView.of_record(_record([True, False], [0.1, 0.9], [0.1, 0.9]))
    assert view.fired("g") and view.fired("g", 0) and not view.fired("g", 1)
    assert not view.changed("g") and view.score_changes() == []


def test_pairwise_the_candidate_matters_and_missing_outputs_answer_nothing():
    view = TraceView.of_record(_record([False, True], [0.5, 0.8], [0.5, 0.3]))
    assert not view.changed("g", 0) and view.changed("g", 1)
    empty = TraceView.of_record(_record(None, None, None))
    assert empty.values("g") == () and empty.value("g", 0) is None
    assert not empty.fired("g") and not empty.changed("g") and empty.trigger("g") == ()


def test_a_tolerant_comparison_is_the_caller_s():
    view = TraceView({"t": (True,), "q": (0.3,), "g": (0.3 + 1e-16,)}, {"g": {"base": ["q"], "trigger": ["t"]}},
                     {"g": "gate"}, same=lambda a, b: abs(a - b) < 1e-12)
    assert view.fired("g") and not view.changed("g")


def test_explain_and_the_trace_agree_on_every_fired_gate(tmp_path, capsys):
    """Every gate `gsr replay --show` calls FIRED is one the view says changed the score, and back."""
    tc = ROOT / "examples/topical_chat"
    trace = tmp_path / "t.jsonl"
    assert main(["run", str(tc / "overall.gsr"), "--data", str(tc / "data/dev.jsonl"), "--id-field", "id",
                 "--input-field", "context", "-q", "--no-progress", "--trace", str(trace)]) == 0
    changed = [r for _, r in read_trace(str(trace)) if TraceView.of_record(r).score_changes()]
    assert changed, "the example has items whose gate fired"
    capsys.readouterr()
    for r in changed[:3]:
        assert main(["replay", str(trace), "--show", r["item"]["id"]]) in (0, 1)
        assert "FIRED" in capsys.readouterr().out


def test_the_view_gives_the_record_s_nodes_and_judgments():
    record = {"nodes": [
        {"id": "a", "kind": "criterion", "output": [0.5, None],
         "judgments": [{"value": 0.5, "status": "ok"}, {"value": None, "status": "abstained"}]},
        {"id": "b", "kind": "criterion", "output": [0.25, 0.75],
         "judgments": [{"value": 0.25, "status": "ok"}, {"value": 0.75, "status": "ok"}]},
        {"id": "m", "kind": "reduce", "op": "mean", "inputs": {"items": ["a", "b"]}, "output": [0.375, 0.75]},
    ]}
    view = TraceView.of_record(record)
    assert view.computed and list(view.nodes) == ["a", "b", "m"]
    assert [n["id"] for n in view.criteria()] == ["a", "b"]
    assert view.node("m")["op"] == "mean" and view.node("zz") is None
    assert [j["status"] for j in view.judgments("a")] == ["ok", "abstained"] and view.judgments("m") == []
    assert view.judged().keys() == {"a", "b"} and view.abstained()
    record["nodes"][0]["judgments"][1]["status"] = "ok"
    assert not TraceView.of_record(record).abstained()
    failed = TraceView.of_record({"status": "failed", "nodes": []})
    assert not failed.computed and failed.criteria() == [] and failed.judged() == {} and not failed.abstained()
