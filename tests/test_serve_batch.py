"""`gsr serve`'s micro-batches of a program whose judges all answer at once (rules, human fields): each batch's
items of one served program and mode go through the API's `score_batch` route together (the planner's column
path), and every answer, trace record and metric is the one the item path gives."""

from __future__ import annotations

import asyncio
import json

import pytest

import gsrlang
from gsrlang.serve.engine import Engine

from servehelp import RULES_PROGRAM, no_model_settings, serving  # noqa: F401

# Both tasks; human fields per candidate (an invalid cell: missing, out of range, not a number), optional
# fields that abstain (null), and a rule.
MIXED = r'''
rubric mixed "Human fields and rules, both tasks"
task pointwise { scale = 1..5 }
task pairwise { epsilon = 0.0  on_tie = tie }
criterion q: Score[1..3] = human(field: "q.{candidate}")
criterion r: Score[1..3]? = human(field: "r")
criterion p: Bool? = human(field: "p")
criterion long: Bool = rule.word_count(above: 3)
node body = mean(items: [scale(q), scale(r), normalize(long)], on_abstain: skip)
sink floor(base: body, trigger: default(p, value: false), at: 0.2)
'''

ITEMS = [
    {"input": "q", "response": "one two three four", "record": {"q": {"A": 3}, "r": 2, "p": True}},  # ok
    {"input": "q", "response": "short", "record": {"q": {"A": 1}, "r": None, "p": None}},  # ok, two abstain
    {"input": "q", "response": "x", "record": {"q": {"A": 9}, "r": 1}},  # invalid: out of range
    {"input": "q", "response": "x y z w v", "record": {"q": {}, "r": 3}},  # invalid: missing
    {"input": "q", "response": "a b c d e", "record": {"q": {"A": 2}, "r": 2, "p": False}},  # ok
    {"input": "q", "response": "abc", "record": {"q": {"A": "two"}, "r": 1}},  # invalid: not a number
]
PAIRS = [
    {"input": "q", "responses": ["one two three four", "b"], "record": {"q": {"A": 3, "B": 1}, "r": 1, "p": True}},
    {"input": "q", "responses": ["a", "b"], "record": {"q": {"A": 2}, "r": 2}},  # invalid: B missing
    {"input": "q", "responses": ["a", "b c d e f"], "record": {"q": {"A": 2, "B": 2}, "r": None}},
    {"input": "q", "responses": ["same", "same"], "record": {"q": {"A": 1, "B": 1}, "r": None, "p": None}},
]


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)


def item_by_item(monkeypatch):
    """The engine as it was: every item of a batch through `Program.execute` alone (the item path)."""
    async def one_at_a_time(self, batch):
        for entry in batch:
            await self._run_each(entry.served, entry.mode, [entry])
    monkeypatch.setattr(Engine, "_run_here", one_at_a_time)


def spy(monkeypatch, owner, name: str, calls: list, *, asyncgen: bool = False):
    real = getattr(owner, name)
    if asyncgen:
        def wrapped(*args, **kwargs):
            calls.append(args)
            return real(*args, **kwargs)
    else:
        async def wrapped(*args, **kwargs):
            calls.append(args)
            return await real(*args, **kwargs)
    monkeypatch.setattr(owner, name, wrapped)


def test_a_batch_goes_through_the_column_route_once_per_program_and_mode(monkeypatch):
    """Two requests (pointwise and pairwise) in one micro-batch: one column pass per mode, no item run."""
    import gsrlang.execution.executor as executor
    from gsrlang.execution.inlinerun import ColumnRunner

    program = gsrlang.loads(RULES_PROGRAM)
    item_runs: list = []
    column_runs: list = []
    alone: list = []
    spy(monkeypatch, executor, "run_items", item_runs, asyncgen=True)
    spy(monkeypatch, ColumnRunner, "run", column_runs)
    spy(monkeypatch, gsrlang.Program, "execute", alone)
    with gsrlang.Judges() as judges:
        engine = Engine(program, judges)

        async def go():
            await engine.start()
            points = [program.item("q", text, id=f"p{k}")[1]
                      for k, text in enumerate(["no", "please answer me now", "thanks", "a b c d e", "x"])]
            pairs = [program.item("q", responses=(a, b), id=f"c{k}", mode="pairwise")[1]
                     for k, (a, b) in enumerate([("no", "one two three four"), ("thanks a lot", "hm"), ("a", "a")])]
            got = await asyncio.gather(engine.run(engine.current, "pointwise", points, None),
                                       engine.run(engine.current, "pairwise", pairs, None))
            await engine.stop()
            return got

        scored, compared = asyncio.run(go())
    assert [r.status for r in scored + compared] == ["ok"] * 8
    assert item_runs == [] and alone == []  # the old engine ran each of the 8 items alone
    assert sorted(len(args[1]) for args in column_runs) == [3, 5]
    assert [r.winner for r in compared] == ["second", "first", "tie"]


def served(program, tmp_path, tag: str):
    """What the server answers to /score, /compare and /group with MIXED's items (elapsed times left out), the
    lines of its trace (its run summaries without their wall time) and its item counts."""
    trace = tmp_path / f"{tag}.jsonl"
    with serving(program, "--trace", str(trace)) as s:
        answers = [s.post("/score", {"items": ITEMS, "id": "s"}),
                   s.post("/compare", {"pairs": PAIRS, "id": "c"}),
                   s.post("/group", {"input": "q", "responses": ["one two three four", "a", "b c d e f"],
                                     "record": {"q": {"A": 2, "B": 3}, "r": 1}, "by": "pairwise", "id": "g"}),
                   s.post("/score", {"input": "q", "response": "alone", "record": {"q": {"A": 2}, "r": 2}, "id": "a"})]
        _, metrics = s.get("/metrics")
    for _, body in answers:
        body.pop("elapsed_s", None)
    lines = []
    for path in sorted(tmp_path.glob(f"{tag}*.jsonl")):
        for text in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(text)
            if record.get("kind") == "run_summary":
                record.pop("wall_s", None)
                record = {k: v for k, v in record.items() if "second" not in k and not k.endswith("_s")}
            lines.append(record if record.get("kind") == "run_summary" else text)
    counts = sorted(line for line in metrics.splitlines() if line.startswith(("gsr_rewards_total", "gsr_batch_items_")))
    return answers, lines, counts


def test_every_answer_record_and_count_is_the_item_paths(tmp_path, monkeypatch):
    program = tmp_path / "mixed.gsr"
    program.write_text(MIXED, encoding="utf-8")
    by_columns = served(program, tmp_path, "columns")
    with monkeypatch.context() as m:
        item_by_item(m)
        by_items = served(program, tmp_path, "items")
    assert by_columns == by_items
    answers, lines, counts = by_columns
    assert [status for status, _ in answers] == [200] * 4
    assert [r["status"] for r in answers[0][1]["results"]] == ["ok", "ok", "invalid", "invalid", "ok", "invalid"]
    assert [r["status"] for r in answers[1][1]["results"]] == ["ok", "invalid", "ok", "ok"]
    assert answers[0][1]["rewards"][2] == 0.0 and answers[0][1]["results"][2]["reason"]
    assert len([line for line in lines if isinstance(line, str) and '"p":' in line]) == 6 + 4 + 3 + 1
    assert 'gsr_rewards_total{status="invalid"} 5.0' in counts


def test_a_bug_answers_500_for_its_own_request_only(monkeypatch):
    """A bug that raises for one item (on the column path and alone): that item's request fails, the other
    request of the same micro-batch gets its rewards."""
    program = gsrlang.loads(RULES_PROGRAM)
    real = gsrlang.Program.execute_all

    async def buggy(self, items, registry, limit):
        if any(item.id == "bad" for _, item in items):
            raise RuntimeError("a bug")
        return await real(self, items, registry, limit)
    monkeypatch.setattr(gsrlang.Program, "execute_all", buggy)
    with gsrlang.Judges() as judges:
        engine = Engine(program, judges)

        async def go():
            await engine.start()
            good = [program.item("q", text, id=f"g{k}")[1] for k, text in enumerate(["no", "thanks a lot", "x"])]
            bad = [program.item("q", "fine", id="ok")[1], program.item("q", "boom", id="bad")[1]]
            got = await asyncio.gather(engine.run(engine.current, "pointwise", good, None),
                                       engine.run(engine.current, "pointwise", bad, None), return_exceptions=True)
            pending = engine.in_flight
            await engine.stop()
            return got, pending

        (good, bad), pending = asyncio.run(go())
    assert [r.status for r in good] == ["ok"] * 3 and [r.line["id"] for r in good] == ["g0", "g1", "g2"]
    assert isinstance(bad, RuntimeError) and pending == 0


def test_the_served_trace_replays(tmp_path, capsys):
    """The column path's trace records replay (verify) like any trace."""
    from gsrlang.cli import main

    program = tmp_path / "mixed.gsr"
    program.write_text(MIXED, encoding="utf-8")
    served(program, tmp_path, "t")
    segments = sorted(tmp_path.glob("t*.jsonl"))
    assert len(segments) == 2  # pointwise and pairwise
    for segment in segments:
        assert main(["replay", str(segment), "-q"]) == 0, capsys.readouterr().err
