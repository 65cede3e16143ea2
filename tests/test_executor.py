"""The executor: judging, checking, composing and reading out items; streaming many in order."""

from __future__ import annotations

import asyncio
import random

import pytest

from gsrlang.execution.executor import execute, run_items
from gsrlang.execution.limit import CallLimit
from gsrlang.files.dataset import Candidate, Item, ItemError
from gsrlang.judges.registry import JudgeRegistry, default_registry
from gsrlang.lang.check.driver import analyze
from gsrlang.semantics.judgment import ABSTAIN, Judgment

POINTWISE = """
rubric chat
task pointwise { scale = 1..5  quantize = round }
criterion natural: Score[1..3] = human(field: "scores.natural")
criterion relevant: Score[1..3]? = human(field: "scores.relevant")
criterion rambling: Bool = rule.word_count(above: 5)
node body = weighted_mean(items: [scale(natural), scale(relevant)], weights: [1, 3], on_abstain: skip)
node final = cap(base: body, trigger: rambling, at: 0.25)
sink final
"""


def program(text: str):
    analysis = analyze(text)
    assert analysis.program is not None, [d.message for d in analysis.errors]
    return analysis.program


def item(scores: dict, *texts: str, item_id: str = "x") -> Item:
    texts = texts or ("short reply",)
    return Item(item_id, 1, "input", tuple(Candidate(chr(65 + i), t) for i, t in enumerate(texts)), None, None,
                {"scores": scores})


async def test_pointwise_item_with_rule_and_human_judges():
    run = await execute(program(POINTWISE), item({"natural": 3, "relevant": 2}), default_registry())
    assert run.status == "ok" and run.reason is None
    # (1 * 1.0 + 3 * 0.5) / 4 = 0.625 -> 1 + 0.625 * 4 = 3.5 -> 4 (halves up)
    assert run.readout.sink == {"A": 0.625} and run.readout.score == 4
    assert run.judgments["rambling"][0].reason == "2 words"


async def test_a_gate_fires():
    run = await execute(program(POINTWISE), item({"natural": 3, "relevant": 3}, "one two three four five six"),
                        default_registry())
    assert run.readout.sink == {"A": 0.25} and run.readout.score == 2


async def test_an_abstention_is_skipped_by_policy():
    run = await execute(program(POINTWISE), item({"natural": 2, "relevant": None}), default_registry())
    assert run.status == "ok" and run.readout.sink == {"A": 0.5}
    assert run.judgments["relevant"][0].status == "abstained"


async def test_every_item_skipped_makes_the_item_invalid_with_a_pointer():
    p = program(POINTWISE.replace('Score[1..3] = human(field: "scores.natural")',
                                  'Score[1..3]? = human(field: "scores.natural")'))
    run = await execute(p, item({"natural": None, "relevant": None}), default_registry())
    assert run.status == "invalid" and run.failed_node == "body"
    assert run.reason.startswith("node `body`: every item of `weighted_mean` abstained")
    assert run.values[[n.id for n in p.nodes].index("natural")] == (ABSTAIN,)


async def test_an_invalid_annotation_makes_the_item_invalid_and_the_run_goes_on():
    run = await execute(program(POINTWISE), item({"natural": 4.5, "relevant": 2}), default_registry())
    assert run.status == "invalid"
    assert run.reason == "criterion `natural`: field 'scores.natural' = 4.5 is outside Score[1..3]"
    assert run.readout is None


class Scripted:
    """A fake judge: answers from a function of (node id, candidate id), after an optional delay."""

    inline = False

    def __init__(self, answer, delay=0.0):
        self.answer, self.delay = answer, delay
        self.in_flight = self.peak = self.calls = 0

    async def judge(self, node, item, candidate):
        self.in_flight += 1
        self.calls += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay * random.random())
            return self.answer(node.id, candidate.id, item)
        finally:
            self.in_flight -= 1


LLM = """
rubric pair
task pairwise { epsilon = 0.1  on_tie = tie }
criterion good: Ordinal[1..5] { ask "How good is it?" }
criterion unsafe: Bool? { ask "Is it unsafe?" }
sink veto(base: normalize(good), trigger: default(unsafe, value: false))
"""


async def test_pairwise_with_a_scripted_model_judge():
    answers = {("good", "A"): "5", ("good", "B"): "2", ("unsafe", "A"): False, ("unsafe", "B"): ABSTAIN}

    def answer(node_id, cid, _):
        v = answers[(node_id, cid)]
        return Judgment.abstained("cannot tell") if v is ABSTAIN else Judgment.ok(v, "because", model="fake")

    run = await execute(program(LLM), item({}, "first", "second"), default_registry(Scripted(answer)))
    assert run.status == "ok" and run.readout.winner == "first"
    assert run.readout.sink == {"A": 1.0, "B": 0.25}


async def test_answers_outside_the_type_and_abstentions_without_question_mark_are_invalid():
    def answer(node_id, cid, _):
        if node_id == "good":
            return Judgment.ok("7") if cid == "A" else Judgment.abstained("no idea")
        return Judgment.ok(False)

    run = await execute(program(LLM), item({}, "first", "second"), default_registry(Scripted(answer)))
    assert run.status == "invalid"
    assert run.reason.startswith("criterion `good` (candidate A): the answer does not fit: `7` is not a label")
    assert "and 1 more invalid judgment" in run.reason
    b = run.judgments["good"][1]
    assert b.status == "invalid" and "cannot abstain" in b.reason


async def test_a_judge_that_raises_makes_the_item_invalid():
    def answer(node_id, cid, _):
        raise TimeoutError("the server did not answer")

    run = await execute(program(LLM), item({}, "a", "b"), default_registry(Scripted(answer)))
    assert run.status == "invalid" and "the judge failed: TimeoutError: the server did not answer" in run.reason


async def test_joint_judging_is_used_when_the_procedure_asks_for_it():
    class Joint(Scripted):
        async def judge_joint(self, node, item):
            self.joint_calls = getattr(self, "joint_calls", 0) + 1
            return (Judgment.ok("2"), Judgment.ok("4"))

    text = LLM.replace('criterion good: Ordinal[1..5] {', 'criterion good: Ordinal[1..5] = llm(joint: true) {')
    judge = Joint(lambda n, c, i: Judgment.ok(False))
    run = await execute(program(text), item({}, "a", "b"), default_registry(judge))
    assert run.readout.winner == "second" and judge.joint_calls == 1
    assert judge.calls == 2  # `unsafe` per candidate


async def test_wrong_number_of_candidates_fails_the_item():
    run = await execute(program(LLM), item({}, "only one"), default_registry(Scripted(lambda *a: Judgment.ok(True))))
    assert run.status == "failed" and "needs 2 candidates" in run.reason


async def test_run_items_keeps_input_order_and_bounds_concurrency():
    judge = Scripted(lambda n, c, it: Judgment.ok(str(int(it.id) % 5 + 1)) if n == "good" else Judgment.ok(False),
                     delay=0.003)
    items = []
    for k in range(60):
        items.append(item({}, "a", "b", item_id=str(k)))
        if k % 17 == 0:
            items.append(ItemError(None, 1000 + k, f"line {1000 + k}: truncated JSON"))
    runs = [r async for r in run_items(program(LLM), items, default_registry(judge), None, CallLimit(4))]
    assert len(runs) == len(items)
    ids = [r.id for r in runs if r.status != "failed"]
    assert ids == [str(k) for k in range(60)]
    assert [r.line for r in runs if r.status == "failed"] == [1000, 1017, 1034, 1051]
    assert judge.peak <= 4


async def test_run_items_with_inline_judges():
    items = [item({"natural": 1 + k % 3, "relevant": 2}, item_id=str(k)) for k in range(30)]
    runs = [r async for r in run_items(program(POINTWISE), items, default_registry(), None, CallLimit(8))]
    assert [r.id for r in runs] == [str(k) for k in range(30)]
    assert all(r.status == "ok" for r in runs)


async def test_a_missing_judge_kind_is_a_configuration_error():
    with pytest.raises(Exception, match="judged by a model"):
        await execute(program(LLM), item({}, "a", "b"), JudgeRegistry({}))
