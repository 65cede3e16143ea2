"""The columnar run path writes what the item-at-a-time path writes, byte for byte.

`gsr run` of a program whose judges all answer a column at once (rules, human fields)
goes a chunk of items at a time (gsrlang.execution.inlinerun). Both paths run here on the
same program and data, and must agree exactly: the results file, the trace (its run
summary but for the wall time), the run summary's counts, and what `on_item` sees of
every item (the interpreter's values, judgments and readout included).

(1) Generated programs (tests/test_properties.checkable_programs: every criterion type,
    reducers with every abstention policy, gates) judged by a table of generated
    judgments (values at the edges, -0.0, numbers of the wrong type, abstentions a type
    can or cannot take, invalid answers, reasons, raw text, provenance), over data with
    unreadable rows, duplicate ids and good, bad and missing labels, in chunks of a few
    items, with and without --limit.
(2) The real judges (human fields, rules) over generated messy data, pointwise and
    pairwise; `judge_many` of each equals its `judge` cell by cell.
(3) Every example that runs without a model.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_columnar import EXAMPLE_DATA, _examples_without_a_model
from test_properties import SETTINGS, checkable_programs, draw_checked
from tiers import examples

from gsrlang.execution import inlinerun
from gsrlang.execution.executor import default_mode
from gsrlang.execution.inlinerun import columnar_judges
from gsrlang.execution.planner import RunConfig
from gsrlang.execution.runs import run_file
from gsrlang.files.dataset import Candidate, ColumnMap, Item
from gsrlang.judges.human import HumanJudge
from gsrlang.judges.registry import JudgeRegistry, default_registry
from gsrlang.judges.rules import RuleJudge
from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.judgment import ABSTAIN, Judgment

SUMMARY_FIELDS = ("items", "ok", "invalid", "failed", "label_problems", "labelled", "preds", "golds", "duplicate_ids",
                  "duplicate_examples", "judgments", "skipped")


def run_both(program, data: Path, columns: ColumnMap, registry, mode: str, folder: Path, limit=None) -> dict:
    """Run on both paths; assert that everything written and seen is the same; return the columnar run's."""
    got = []
    for columnar in (False, True):
        seen = []

        def on_item(run, line):
            seen.append((run.id, run.line, run.mode, run.candidates, run.status, run.reason, run.label,
                         run.label_error, repr(run.values), repr(run.judgments), repr(run.readout), run.failed_node,
                         json.dumps(line)))

        out, trace = folder / f"r{columnar}.jsonl", folder / f"t{columnar}.jsonl"
        summary = run_file(program, data, columns, registry(), mode,
                           RunConfig(out=str(out), trace=str(trace), limit=limit, columnar=columnar), on_item=on_item)
        lines = trace.read_bytes().splitlines()
        end = json.loads(lines[-1])
        assert end["kind"] == "run_summary"
        del end["wall_s"]
        got.append({"results": out.read_bytes(), "trace": lines[:-1], "end": end, "seen": seen,
                    "summary": [getattr(summary, f) for f in SUMMARY_FIELDS]})
    item_path, columnar_path = got
    for key in item_path:
        assert item_path[key] == columnar_path[key], key
    # without a trace the columns make no trace records: the same results, runs and counts
    seen = []
    untraced = folder / "untraced.jsonl"
    summary = run_file(program, data, columns, registry(), mode, RunConfig(out=str(untraced), limit=limit),
                       on_item=lambda run, line: seen.append((run.id, run.status, run.reason, json.dumps(line))))
    assert untraced.read_bytes() == columnar_path["results"]
    assert seen == [(s[0], s[4], s[5], s[-1]) for s in columnar_path["seen"]]
    assert [getattr(summary, f) for f in SUMMARY_FIELDS] == columnar_path["summary"]
    return columnar_path


class TableJudge:
    """An inline judge for every kind that answers from a table {(row key, criterion, candidate): Judgment};
    `judge_many` is counted; for the criteria in `refuse` it raises, or answers what is not a Judgment (then
    `judge` answers one by one)."""

    inline = True

    def __init__(self, answers: dict, refuse=()):
        self.answers, self.refuse, self.columns = answers, set(refuse), 0

    async def judge(self, node, item, candidate):
        return self.answers[(item.record["k"], node.id, candidate.id)]

    def judge_many(self, node, items, c):
        if node.id in self.refuse:
            if node.id[-1] in "13579":
                return [(True, "a tuple")] * len(items)
            raise RuntimeError("not as a column")
        self.columns += 1
        return [self.answers[(item.record["k"], node.id, item.candidates[c].id)] for item in items]


def answer_pool(t) -> list:
    """Judgments for a criterion of type `t`: values at the edges and inside, values of the wrong type or sign,
    abstentions, invalid answers, reasons, raw text and provenance (each object shared by the items it answers)."""
    if t.kind == "bool":
        values = [True, False]
    elif t.kind == "score":
        values = [float(t.lo), float(t.hi), (t.lo + t.hi) / 2, t.lo + (t.hi - t.lo) / 3, int(t.lo), True]
        if t.lo <= 0:
            values.append(-0.0)
    else:
        values = list(t.labels) + ["not a label"]
    pool = [Judgment.ok(v) for v in values]
    pool += [Judgment.ok(values[0], "because", "RAW", model="m", tokens={"prompt": 3}),
             Judgment.abstained("cannot tell", "?"), Judgment.invalid("no answer", "garbage"), Judgment.ok(ABSTAIN),
             Judgment(values[-1], "abstained", "odd"), Judgment.ok(float("nan")), Judgment.ok(None)]
    return pool


def write_rows(path: Path, rows: list, pairwise: bool) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(row if isinstance(row, str) else json.dumps(row) + "\n")


LABELS = [None, 1, 3, 4.5, 99, "x", "first", "second", "tie", "A", "B", True]


@pytest.mark.examples
@settings(max_examples=examples(120), **SETTINGS)
@given(checkable_programs(), st.data())
def test_the_columnar_path_writes_what_the_item_path_writes_on_generated_programs(generated, data):
    program, mode = draw_checked(generated, data)
    pairwise = mode == "pairwise"
    n = data.draw(st.integers(1, 14))
    rows, answers = [], {}
    pools = {node.id: answer_pool(node.type) for node in program.criteria}
    for k in range(n):
        kind = data.draw(st.sampled_from(["ok"] * 8 + ["unreadable", "no response"]))
        if kind == "unreadable":
            rows.append('{"k": %d, "id": \n' % k)
            continue
        row = {"k": k, "id": f"i{data.draw(st.integers(0, n))}", "input": "q", "a": "first text", "b": "second"}
        if kind == "no response":
            del row["a"]
        row["label"] = data.draw(st.sampled_from(LABELS))
        rows.append(row)
        for node in program.criteria:
            for cand in ("A", "B"):
                answers[(k, node.id, cand)] = data.draw(st.sampled_from(pools[node.id]))
    refuse = data.draw(st.sets(st.sampled_from([node.id for node in program.criteria])))
    limit = data.draw(st.sampled_from([None, None, 0, 1, n // 2]))
    columns = ColumnMap("input", ("a", "b") if pairwise else ("a",), "id", "label")
    judges = []

    def registry():
        judges.append(TableJudge(answers, refuse))
        return JudgeRegistry({kind: judges[-1] for kind in ("llm", "rule", "human", "verifier")})

    assert columnar_judges(Plan(program), registry())
    with tempfile.TemporaryDirectory() as tmp, patch.object(inlinerun, "CHUNK", data.draw(st.integers(1, 5))):
        folder = Path(tmp)
        write_rows(folder / "data.jsonl", rows, pairwise)
        run_both(program, folder / "data.jsonl", columns, registry, mode, folder, limit)
    judged = any(isinstance(r, dict) and "a" in r for r in rows[:limit])
    if judged and refuse != {node.id for node in program.criteria}:  # the columnar run asked for columns
        assert judges[-2].columns and not judges[-3].columns  # (the last run: columns again, with no trace)


HUMAN_POINTWISE = r"""
rubric h "Every kind of human field, and rules"
task pointwise { scale = 1..5  quantize = round }
criterion q: Score[1..3] = human(field: "ann.q")
criterion p: Bool? = human(field: "ann.p")
criterion lvl: Ordinal[1..4]? = human(field: "lvl")
criterion tone: Nominal{formal, casual, rude} = human(field: "tone")
criterion na: Score[1..10]? = human(field: "na", missing: [0, "N/A"])
criterion flag: Bool = human(field: "flag")
criterion long: Bool = rule.word_count(above: 5)
criterion cites: Bool = rule.regex(pattern: "\\[[0-9]+\\]")
node body = weighted_mean(items: [scale(q), normalize(default(lvl, value: 1)), map(tone, to: {formal: 1, casual: 0.5, rude: 0}), scale(default(na, value: 5))], weights: [1, 1, 0.5, 0.5])
node capped = cap(base: body, trigger: any(items: [long, cites]), at: 0.6)
node vetoed = veto(base: capped, trigger: flag)
sink floor(base: vetoed, trigger: default(p, value: false), at: 0.2)
"""

HUMAN_PAIRWISE = r"""
rubric hp "Human fields per candidate, and rules"
task pairwise { epsilon = 0.05  on_tie = tie }
criterion q: Score[1..3] = human(field: "ann.{candidate}")
criterion sorry: Bool = rule.contains(text: "sorry")
criterion j: Bool = rule.json_valid()
sink mean(items: [scale(q), normalize(sorry), normalize(j)])
"""

CELLS = [None, "", 1, 2, 3, 2.5, 1.0000001, 0, 0.0, -0.0, 4, -1, True, False, "yes", "no", "2", " 3 ", "N/A", "formal",
         "casual", "rude", "x", [1], {"a": 1}, 1e308, 10]
TEXTS = ["", "sorry about that", "one two three four five six seven", "see [3] and [12]", '{"a": 1}',
         "```json\n[1, 2]\n```", "Sorry", "naïve café [x]"]


def _cell(draw):
    return draw(st.sampled_from(CELLS))


@pytest.mark.examples
@settings(max_examples=examples(60), **SETTINGS)
@given(st.data())
def test_the_real_judges_give_the_same_files_on_both_paths(data):
    pairwise = data.draw(st.booleans())
    program = analyze(HUMAN_PAIRWISE if pairwise else HUMAN_POINTWISE).program
    assert program is not None
    mode = "pairwise" if pairwise else "pointwise"
    rows = []
    for k in range(data.draw(st.integers(1, 16))):
        row = {"id": f"i{k % 5}", "input": "q", "a": data.draw(st.sampled_from(TEXTS)),
               "b": data.draw(st.sampled_from(TEXTS)), "label": data.draw(st.sampled_from(LABELS))}
        ann = {key: _cell(data.draw) for key in data.draw(st.sets(st.sampled_from(["q", "p", "A", "B"])))}
        row["ann"] = ann if data.draw(st.integers(0, 9)) else data.draw(st.sampled_from([3, "x", None]))
        for key in data.draw(st.sets(st.sampled_from(["lvl", "tone", "na", "flag"]))):
            row[key] = _cell(data.draw)
        rows.append(row)
    columns = ColumnMap("input", ("a", "b") if pairwise else ("a",), "id", "label")
    assert columnar_judges(Plan(program), default_registry())
    with tempfile.TemporaryDirectory() as tmp, patch.object(inlinerun, "CHUNK", data.draw(st.integers(1, 6))):
        folder = Path(tmp)
        write_rows(folder / "data.jsonl", rows, pairwise)
        run_both(program, folder / "data.jsonl", columns, default_registry, mode, folder)


@pytest.mark.parametrize("text", [HUMAN_POINTWISE, HUMAN_PAIRWISE], ids=["pointwise", "pairwise"])
def test_judge_many_is_judge_cell_by_cell(text):
    """The short ways `judge_many` takes for common cells give what `judge` gives, for every cell of the pool
    in every field."""
    program = analyze(text).program
    items = []
    for k, cell in enumerate(CELLS):
        record = {"ann": {"q": cell, "p": cell, "A": cell, "B": cell}, "lvl": cell, "tone": cell, "na": cell,
                  "flag": cell, "ann.q": cell} if k % 2 else {"ann": {"q": cell, "p": cell, "A": cell, "B": cell},
                                                                "lvl": cell, "tone": cell, "na": cell, "flag": cell}
        text_ = TEXTS[k % len(TEXTS)]
        items.append(Item(f"i{k}", k + 1, "q", (Candidate("A", text_), Candidate("B", text_[::-1])), None, None,
                          record))
    items.append(Item("none", 99, "q", (Candidate("A", ""), Candidate("B", "")), None, None, {}))
    for node in program.criteria:
        judge = HumanJudge() if node.criterion.procedure.kind == "human" else RuleJudge()
        for c in range(2 if "pairwise" in text else 1):
            one_by_one = [asyncio.run(judge.judge(node, item, item.candidates[c])) for item in items]
            assert list(map(repr, judge.judge_many(node, items, c))) == list(map(repr, one_by_one)), node.id


@pytest.mark.parametrize("path", _examples_without_a_model(), ids=lambda p: p.name)
def test_every_example_without_a_model_gives_the_same_files_on_both_paths(path, tmp_path):
    data, cols = EXAMPLE_DATA[path.parent.name]
    program = analyze_file(str(path)).program
    assert columnar_judges(Plan(program), default_registry())
    got = run_both(program, path.parent / data, ColumnMap(**cols), default_registry, default_mode(program),
                   tmp_path)
    assert got["seen"]


def test_gsr_columnar_run_0_takes_the_item_path(tmp_path, monkeypatch):
    """The environment variable that keeps the item path reachable (docs/running.md)."""
    from gsrlang.commands.config import columnar_wanted

    monkeypatch.setenv("GSR_COLUMNAR_RUN", "0")
    assert not columnar_wanted()
    assert columnar_wanted({"GSR_COLUMNAR_RUN": "1"}) and not columnar_wanted({"GSR_COLUMNAR_RUN": " 0 "})
    monkeypatch.delenv("GSR_COLUMNAR_RUN")
    assert columnar_wanted()


GATED = r"""
rubric g "A cap over an invalid base, a reducer that can fail, both tasks"
task pointwise { scale = 1..5  quantize = round }
task pairwise { epsilon = 0.05  on_tie = tie }
criterion q: Score[0..3]? = human(field: "q")
criterion extra: Score[0..3]? = human(field: "extra")
criterion bad: Bool = human(field: "bad")
node body = mean(items: [scale(q), scale(extra)], on_abstain: skip)
sink cap(base: body, trigger: bad, at: 0.0)
"""


@pytest.mark.parametrize("mode", ["pointwise", "pairwise"])
def test_items_the_columns_leave_invalid_are_written_from_the_evaluation(mode, monkeypatch):
    """Invalid, skipped and unfit judgments, -0.0, a failed reducer and (pairwise) repeated candidate ids: each
    item's result line, trace record, status, reason and counts are the item path's, and no item is finished
    by the interpreter (`on_item` reads none of its values)."""
    from gsrlang.execution.executor import execute
    from gsrlang.trace.jsonio import dumps_line
    from gsrlang.trace.schema import result_line
    from gsrlang.trace.write import Static, item_record

    program = analyze(GATED).program
    plan = Plan(program)
    pools = {"q": [Judgment.ok(2.0), Judgment.invalid("no answer", "garbage"), Judgment.ok(7.0), Judgment.ok(-0.0),
                   Judgment.abstained("cannot tell"), Judgment.ok(1), Judgment(None, "skipped", "moot")],
             "extra": [Judgment.abstained("n/a"), Judgment.ok(3.0), Judgment.ok(-0.0), Judgment.invalid("timeout")],
             "bad": [Judgment.ok(False), Judgment.ok(True), Judgment.invalid("no answer"), Judgment.ok("yes"),
                    Judgment.abstained("unsure")]}
    answers, items = {}, []
    for k in range(40):
        ids = ("A", "A") if mode == "pairwise" and k % 6 == 5 else ("A", "B")
        cands = tuple(Candidate(cid, f"text {k}") for cid in ids[:1 if mode == "pointwise" else 2])
        items.append(Item(f"i{k}", k + 1, "q", cands, None, None, {"k": k}))
        for c, cid in enumerate(ids):
            for n, (name, pool) in enumerate(pools.items()):
                answers[(k, name, cid)] = pool[(k // (1 + n) + c * 3) % len(pool)]
    registry = JudgeRegistry({kind: TableJudge(answers) for kind in ("llm", "rule", "human", "verifier")})
    static = Static(plan, None)
    finished = []
    real = inlinerun.finish
    monkeypatch.setattr(inlinerun, "finish", lambda *a, **k: finished.append(a) or real(*a, **k))
    got = asyncio.run(inlinerun.ColumnRunner(plan, registry, mode, None, static).run(items))
    assert finished == []
    statuses = set()
    for item, (run, line, record) in zip(items, got):
        want = asyncio.run(execute(plan, item, registry, mode))
        statuses.add((want.status, want.reason.split(":")[0] if want.reason else None))
        assert (run.status, run.reason, run.judgment_counts()) == (want.status, want.reason, want.judgment_counts())
        assert line == result_line(want, program)
        record["p"] = 0
        assert dumps_line(record) == dumps_line(item_record(want, static, 0))
    assert {s for s, _ in statuses} == {"ok", "invalid"} and len(statuses) > 3
    assert ("invalid", "readout" if mode == "pairwise" else "node `body`") in statuses
