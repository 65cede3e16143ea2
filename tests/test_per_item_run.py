"""`gsr run --programs INDEX`: each item under its own program (a batch compile's index), and its replay.

The programs and the index are written by hand here, as `gsr compile --data ... --out-dir`
writes them (docs/compiling.md); human and rule judges only, so no model is needed. One
test compiles the programs with `gsr compile` against the fake server and runs them.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from runfiles import records

from gsrlang.analysis.metrics import metrics_from_results
from gsrlang.cli import main
from gsrlang.lang.check.driver import analyze_file

try:
    from fakeserver import FakeOpenAI
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI

GOOD_A = """\
rubric item_a "Is the answer good, and not a one-word reply?"
task pointwise { scale = 1..5  quantize = round }
criterion good: Score[1..5] = human(field: "ann.good")
criterion terse: Bool = rule.word_count(below: 3)
node final = cap(base: scale(good), trigger: terse, at: 0.25)
sink final
"""

GOOD_B = """\
rubric item_b "Is it polite, and does it say please?"
task pointwise { scale = 1..5  quantize = round }
criterion polite: Bool = human(field: "ann.polite")
criterion please: Bool = rule.contains(text: "please")
node final = fraction(items: [polite, please])
sink final
"""

BROKEN = """\
rubric item_c "broken"
task pointwise { scale = 1..5 }
node final = no_such_operator(x: 1)
sink final
"""

PAIRWISE = """\
rubric item_p "The shorter answer wins."
task pairwise { epsilon = 0.0 }
criterion terse: Bool = rule.word_count(below: 3)
node final = normalize(terse)
sink final
"""

TEN = GOOD_B.replace("rubric item_b", "rubric item_t").replace("1..5", "1..10")

INDEX = [
    {"id": "a", "line": 1, "status": "compiled", "program": "a.gsr"},
    {"id": "b", "line": 2, "status": "repaired", "program": "b.gsr", "repairs": 1, "codes": ["GSR301"]},
    {"id": "c", "line": 3, "status": "compiled", "program": "c.gsr"},
    {"id": "d", "line": 4, "status": "failed", "program": None, "failed_program": "d.gsr.failed",
     "codes": ["GSR102", "GSR102", "GSR301"]},
    {"id": "a2", "line": 6, "status": "compiled", "program": "a.gsr"},
    {"id": "p", "line": 7, "status": "compiled", "program": "p.gsr"},
    {"id": "t", "line": 8, "status": "compiled", "program": "t.gsr"},
    {"id": "x", "line": 9, "status": "error", "program": None, "error": "model call failed: HTTP 500",
     "error_kind": "model"},
    {"id": "bad", "line": 10, "status": "compiled", "program": "a.gsr"},
]

ROWS = [
    {"id": "a", "input": "q", "response": "a fine long answer", "ann": {"good": 4}, "label": 4},
    {"id": "b", "input": "q", "response": "please do", "ann": {"polite": False}, "label": 3},
    {"id": "c", "input": "q", "response": "x", "label": 3},
    {"id": "d", "input": "q", "response": "y", "label": 2},
    {"id": "e", "input": "q", "response": "z", "label": 2},  # not in the index
    {"id": "a2", "input": "q", "response": "no", "ann": {"good": 5}, "label": 2},
    {"id": "p", "input": "q", "response": "z", "label": 1},
    {"id": "t", "input": "q", "response": "please", "ann": {"polite": True}, "label": 5},
    {"id": "x", "input": "q", "response": "z", "label": 5},
    {"id": "bad", "input": "q", "ann": {"good": 5}, "label": 5},  # no response: a failed row
]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def lines(path: Path) -> list[dict]:
    """The lines of a results file, or the records of a trace as `read_trace` gives them (summary included)."""
    rows = records(path)
    if rows and "trace_version" in rows[0]:
        from gsrlang.trace.read import read_trace

        return [r for _, r in read_trace(path, summaries=True)]
    return rows


def gsr(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr()


@pytest.fixture(autouse=True)
def no_model(monkeypatch, tmp_path):
    for var in ("GSR_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # paths in the trace are relative to here, as in a real run


@pytest.fixture
def workspace(tmp_path):
    programs = tmp_path / "programs"
    programs.mkdir()
    for name, text in (("a", GOOD_A), ("b", GOOD_B), ("c", BROKEN), ("p", PAIRWISE), ("t", TEN)):
        (programs / f"{name}.gsr").write_text(text, encoding="utf-8")
    (programs / "d.gsr.failed").write_text("# failed\n", encoding="utf-8")
    write_jsonl(programs / "index.jsonl", INDEX)
    write_jsonl(tmp_path / "items.jsonl", ROWS)
    return tmp_path


RUN = ["run", "--programs", "programs/index.jsonl", "--data", "items.jsonl", "--label-field", "label",
       "--bootstrap", "0"]


def test_each_item_runs_under_its_own_program(workspace, capsys):
    code, io = gsr(capsys, *RUN, "--out", "r.jsonl", "--trace", "t.jsonl")
    assert code == 1, io.err  # some items are invalid, one row failed
    results = {r["id"]: r for r in lines(workspace / "r.jsonl")}
    # a row that cannot become an item keeps the reader's id: its line number
    assert list(results) == [r["id"] for r in ROWS[:-1]] + ["10"]
    status = {k: r["status"] for k, r in results.items()}
    assert status == {"a": "ok", "b": "ok", "c": "invalid", "d": "invalid", "e": "invalid", "a2": "ok",
                      "p": "invalid", "t": "invalid", "x": "invalid", "10": "failed"}
    # scores computed by hand: a: scale(4 on 1..5) = 0.75 -> 4; b: fraction(false, true) = 0.5 -> 3;
    # a2: a one-word answer, capped at 0.25 -> 2 (the same program as `a`, another item)
    assert (results["a"]["score"], results["a"]["sink"]) == (4, {"A": 0.75})
    assert (results["b"]["score"], results["b"]["sink"]) == (3, {"A": 0.5})
    assert (results["a2"]["score"], results["a2"]["sink"]) == (2, {"A": 0.25})
    # every result names its program
    a_hash = analyze_file(workspace / "programs" / "a.gsr").program.content_hash
    assert results["a"]["program"] == {"name": "item_a", "hash": a_hash, "path": "programs/a.gsr"}
    assert results["a2"]["program"] == results["a"]["program"]
    assert results["b"]["program"]["name"] == "item_b" and results["b"]["program"]["path"] == "programs/b.gsr"
    assert results["c"]["program"] == {"name": None, "hash": None, "path": "programs/c.gsr"}
    assert results["e"]["program"] == {"name": None, "hash": None, "path": None}
    # clear reasons
    reason = {k: r["reason"] for k, r in results.items()}
    assert reason["c"].startswith("program `programs/c.gsr` does not check: GSR102 unknown operator")
    assert "(line 3)" in reason["c"] and "gsr check programs/c.gsr" in reason["c"]
    assert reason["d"] == ("no compiled program: its compile failed (GSR102, GSR301); "
                           "see programs/d.gsr.failed")
    assert reason["e"] == "no compiled program: item 'e' is not in programs/index.jsonl"
    assert reason["p"] == ("program `programs/p.gsr` declares no pointwise task (it has a pairwise one); "
                           "this run is pointwise")
    assert "scores on 1..10, but this run's scale is 1..5 (from `programs/a.gsr`)" in reason["t"]
    assert reason["x"] == "no compiled program: model call failed: HTTP 500"
    assert "missing column 'response'" in reason["10"] and results["10"]["program"]["path"] is None
    assert results["p"]["program"]["name"] == "item_p"  # loaded and checked, but not run: named all the same
    # invalid items keep their labels (they count as misses in the metrics); scales agree for `gsr metrics`
    assert results["c"]["label"] == 3.0 and "scale" not in results["c"]
    report = metrics_from_results(workspace / "r.jsonl", bootstrap=0)
    assert report["metrics"]["n"] == 9 and report["metrics"]["n_valid"] == 3

    # the summary: counts, programs checked once each (a.gsr serves two items), the agreement
    assert "per-item programs of programs/index.jsonl, pointwise: 10 items: 3 ok, 6 invalid, 1 failed" in io.out
    assert "5 program files checked, 1 did not check; 6 items had no usable program" in io.out
    assert "agreement with the labels" in io.out
    assert "invalid item 'c' (line 3): program `programs/c.gsr` does not check" in io.err

    # the trace: every record names its own program; the last line is the run summary
    records = lines(workspace / "t.jsonl")
    items, summary = records[:-1], records[-1]
    assert [r["item"]["id"] for r in items] == list(results)
    by_id = {r["item"]["id"]: r for r in items}
    assert by_id["a"]["program"] == {"name": "item_a", "hash": a_hash, "path": "programs/a.gsr", "sink": "final",
                                     "index": "programs/index.jsonl"}
    assert by_id["b"]["program"]["name"] == "item_b" and by_id["a2"]["program"]["hash"] == a_hash
    assert {n["id"] for n in by_id["b"]["nodes"]} == {"polite", "please", "final"}
    assert by_id["c"]["nodes"] == [] and by_id["c"]["program"]["path"] == "programs/c.gsr"
    assert all(r["result"] == results[r["item"]["id"]] for r in items)
    assert summary["kind"] == "run_summary" and summary["mode"] == "pointwise"
    assert summary["programs"] == {"index": "programs/index.jsonl", "checked": 5, "did_not_check": 1,
                                   "items_without_program": 6}
    assert (summary["items"], summary["ok"], summary["invalid"], summary["failed"]) == (10, 3, 6, 1)

    # replay: each record re-checked under its own program (by the recorded path, same hash), exactly
    code, io = gsr(capsys, "replay", "t.jsonl", "--bootstrap", "0")
    assert code == 0, io.err
    assert "replayed 10 items of t.jsonl under each record's own program" in io.out
    assert "reproduced exactly (1 failed rows carried over)" in io.out
    assert "recorded run: 10 items (3 ok, 6 invalid, 1 failed)" in io.out
    # ... writing the same results again
    code, io = gsr(capsys, "replay", "t.jsonl", "--out", "again.jsonl", "-q")
    assert code == 0 and (workspace / "again.jsonl").read_bytes() == (workspace / "r.jsonl").read_bytes()
    # ... and one item's decision path under its own program
    code, io = gsr(capsys, "replay", "t.jsonl", "--show", "b", "-q")
    assert code == 0 and "item b" in io.out and "please" in io.out and "polite" in io.out


def test_per_item_results_equal_running_each_program_alone(workspace, capsys):
    assert gsr(capsys, *RUN, "--out", "r.jsonl")[0] == 1
    per_item = {r["id"]: r for r in lines(workspace / "r.jsonl")}
    for item_id, program in (("a", "a.gsr"), ("b", "b.gsr"), ("a2", "a.gsr")):
        write_jsonl(workspace / "one.jsonl", [r for r in ROWS if r["id"] == item_id])
        code, io = gsr(capsys, "run", f"programs/{program}", "--data", "one.jsonl", "--id-field", "id",
                       "--label-field", "label", "--out", "one_r.jsonl")
        assert code == 0, io.err
        [alone] = lines(workspace / "one_r.jsonl")
        mine = dict(per_item[item_id])
        source = mine.pop("program")
        assert source["path"] == f"programs/{program}"
        assert alone.pop("program") == {"name": source["name"], "hash": source["hash"]}
        assert {k: v for k, v in mine.items() if k != "line"} == {k: v for k, v in alone.items() if k != "line"}


def test_replay_says_which_program_changed_or_went_missing(workspace, capsys):
    assert gsr(capsys, *RUN, "--trace", "t.jsonl")[0] == 1
    b = workspace / "programs" / "b.gsr"
    b.write_text(GOOD_B.replace("fraction(items: [polite, please])", "fraction(items: [please, polite])"))
    code, io = gsr(capsys, "replay", "t.jsonl")
    assert code == 1
    assert "trace line 4 (item 'b'): `programs/b.gsr` has changed since the trace was recorded" in io.err
    # reformatting does not count (the hash ignores layout and comments)
    b.write_text("# a comment\n" + GOOD_B.replace("  ", " "))
    assert gsr(capsys, "replay", "t.jsonl")[0] == 0
    b.unlink()
    code, io = gsr(capsys, "replay", "t.jsonl")
    assert code == 1 and "trace line 4 (item 'b'): the program `programs/b.gsr` is not there any more" in io.err


def test_replay_of_a_moved_run_finds_programs_beside_the_trace(workspace, capsys, monkeypatch):
    assert gsr(capsys, *RUN, "--trace", "t.jsonl")[0] == 1
    elsewhere = workspace / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the recorded paths are relative to the run's folder: found beside the trace
    code, io = gsr(capsys, "replay", workspace / "t.jsonl", "-q")
    assert code == 0, io.err


def test_a_tampered_per_item_trace_is_pointed_at(workspace, capsys):
    assert gsr(capsys, *RUN, "--trace", "t.jsonl")[0] == 1
    path = workspace / "t.jsonl"
    records = lines(path)
    node = next(n for n in records[1]["nodes"] if n["id"] == "final")
    node["output"] = [0.75]
    records[3]["result"]["status"] = "ok"  # an item run under no program: its result line is compared
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, io = gsr(capsys, "replay", "t.jsonl")
    assert code == 1
    assert "NOT reproduced: 2 of 10 items differ" in io.err
    assert "item 'b' (trace line 2), node `final`, candidate A: recorded 0.75, recomputed 0.5" in io.err


def test_what_if_under_one_program_recomposes_the_items_that_have_its_criteria(workspace, capsys):
    assert gsr(capsys, *RUN, "--trace", "t.jsonl")[0] == 1
    # every item whose recorded program has the criteria: only a, a2 here; b's records lack `good` and `terse`
    edited = workspace / "edited.gsr"
    edited.write_text(GOOD_A.replace("at: 0.25", "at: 0.5"))
    code, io = gsr(capsys, "replay", "t.jsonl", "--program", edited)
    assert code == 1 and "criterion `good` of" in io.err and "is not in the trace" in io.err


def test_the_mode_is_the_first_programs_and_ids_follow_the_compile_rule(tmp_path, capsys):
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "p.gsr").write_text(PAIRWISE)
    (programs / "a.gsr").write_text(GOOD_A)
    (programs / "c.gsr").write_text(BROKEN)
    # no id column: the compile numbered the rows; the first program that checks is pairwise
    write_jsonl(programs / "index.jsonl", [
        {"id": "1", "line": 1, "status": "compiled", "program": "c.gsr"},
        {"id": "2", "line": 2, "status": "compiled", "program": "p.gsr"},
        {"id": "3", "line": 3, "status": "compiled", "program": "a.gsr"},
        {"id": "4", "line": 4, "status": "compiled", "program": "p.gsr"}])
    write_jsonl(tmp_path / "pairs.jsonl", [{"input": "q", "x": "one", "y": "two words here", "ann": {"good": 5}}] * 4)
    code, io = gsr(capsys, "run", "--programs", programs / "index.jsonl", "--data", "pairs.jsonl",
                   "--responses", "x,y", "--out", "r.jsonl", "--trace", "t.jsonl")
    assert code == 1
    results = lines(tmp_path / "r.jsonl")
    assert [r["id"] for r in results] == ["1", "2", "3", "4"]
    assert [(r["mode"], r["status"], r.get("winner")) for r in results] == [
        ("pairwise", "invalid", None), ("pairwise", "ok", "first"), ("pairwise", "invalid", None),
        ("pairwise", "ok", "first")]
    assert "declares no pairwise task (it has a pointwise one); this run is pairwise" in results[2]["reason"]
    assert gsr(capsys, "replay", "t.jsonl")[0] == 0
    # --mode overrides the first program: now the pointwise program runs
    code, io = gsr(capsys, "run", "--programs", programs / "index.jsonl", "--data", "pairs.jsonl",
                   "--response-field", "x", "--mode", "pointwise", "--out", "r.jsonl")
    assert [r["status"] for r in lines(tmp_path / "r.jsonl")] == ["invalid", "invalid", "ok", "invalid"]
    # an `id` column is the item id without --id-field, as in the compile
    write_jsonl(tmp_path / "ided.jsonl", [{"id": k, "input": "q", "x": "a", "y": "b c d"} for k in ("4", "2")])
    code, io = gsr(capsys, "run", "--programs", programs / "index.jsonl", "--data", "ided.jsonl",
                   "--responses", "x,y", "--out", "r.jsonl")
    assert code == 0, io.err
    assert [(r["id"], r["line"], r["winner"]) for r in lines(tmp_path / "r.jsonl")] == [("4", 1, "first"),
                                                                                        ("2", 2, "first")]


def test_a_repeated_id_gets_the_program_of_its_first_row_only(tmp_path, capsys):
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "a.gsr").write_text(GOOD_A)
    write_jsonl(programs / "index.jsonl", [
        {"id": "k", "line": 1, "status": "compiled", "program": "a.gsr"},
        {"id": "k", "line": 2, "status": "error", "program": None, "error": "line 2: duplicate id 'k'",
         "error_kind": "row"}])
    row = {"id": "k", "input": "q", "response": "long enough answer", "ann": {"good": 5}}
    write_jsonl(tmp_path / "d.jsonl", [row, row])
    code, io = gsr(capsys, "run", "--programs", programs / "index.jsonl", "--data", "d.jsonl", "--out", "r.jsonl")
    first, second = lines(tmp_path / "r.jsonl")
    assert first["status"] == "ok" and second["status"] == "invalid"
    assert "the id 'k' is repeated; the index gives a program only to its first row (line 1)" in second["reason"]


def test_usage_errors(workspace, capsys):
    code, io = gsr(capsys, "run", "--data", "items.jsonl")
    assert code == 2 and "name the program to run (PROGRAM), or per-item programs with --programs INDEX" in io.err
    code, io = gsr(capsys, "run", "programs/a.gsr", "--programs", "programs/index.jsonl", "--data", "items.jsonl")
    assert code == 2 and "PROGRAM and --programs exclude each other" in io.err
    code, io = gsr(capsys, "run", "--programs", "nope/index.jsonl", "--data", "items.jsonl")
    assert code == 2 and "no such file" in io.err
    (workspace / "junk.jsonl").write_text('{"no": "index"}\n')
    code, io = gsr(capsys, "run", "--programs", "junk.jsonl", "--data", "items.jsonl")
    assert code == 2 and "not a compile index" in io.err
    both = workspace / "programs" / "both.gsr"
    both.write_text(GOOD_A.replace("task pointwise", "task pairwise { epsilon = 0.1 }\ntask pointwise"))
    write_jsonl(workspace / "programs" / "both.jsonl", [{"id": "a", "status": "compiled", "program": "both.gsr"}])
    code, io = gsr(capsys, "run", "--programs", "programs/both.jsonl", "--data", "items.jsonl")
    assert code == 2 and "declares both a pointwise and a pairwise task: choose one with --mode" in io.err
    code, io = gsr(capsys, "run", "--programs", "programs/index.jsonl", "--data", "items.jsonl", "--mode",
                   "pairwise")
    assert code == 2 and "--responses" in io.err


def test_programs_are_kept_in_a_bounded_cache(workspace, capsys):
    from gsrlang.execution.peritem import IndexedPrograms
    from gsrlang.files.dataset import ColumnMap, read_items
    from gsrlang.judges.registry import default_registry

    programs = IndexedPrograms(workspace / "programs" / "index.jsonl", cache_size=2)
    programs.start(programs.choose_mode(None), ColumnMap(id_field="id"), default_registry())
    items = [it for it in read_items(workspace / "items.jsonl", ColumnMap(id_field="id")) if hasattr(it, "record")]
    by_id = {it.id: it for it in items}
    first = programs.resolve(by_id["a"])
    assert programs.resolve(by_id["a2"]) is first  # one check for both items
    checked = programs.checked
    programs.resolve(by_id["b"])
    programs.resolve(by_id["c"])  # a, evicted ...
    assert len(programs._cache.data) == 2
    again = programs.resolve(by_id["a"])  # ... is checked again when needed
    assert programs.checked == checked + 3 and again.plan is not None and again is not first


def test_items_with_slow_judges_come_out_in_order_under_their_programs(workspace):
    """The concurrent path (judges that are not inline): results in input order, each with its own program."""
    from gsrlang.execution.executor import run_items_each
    from gsrlang.execution.limit import CallLimit
    from gsrlang.execution.peritem import IndexedPrograms
    from gsrlang.files.dataset import ColumnMap, read_items
    from gsrlang.judges.registry import default_registry
    from gsrlang.judges.verifier import register_verifier, unregister_verifier

    rng = random.Random(3)

    async def slow(candidate, item):
        await asyncio.sleep(rng.random() / 200)
        return len(candidate.text.split()) > 1, "slow"

    register_verifier("slow_check", slow)
    try:
        folder = workspace / "slow"
        folder.mkdir()
        entries, rows = [], []
        for k in range(40):
            text = GOOD_B.replace('human(field: "ann.polite")', 'verifier("slow_check")').replace(
                "rubric item_b", f"rubric item_{k % 7}")
            if k % 7 == 3:
                text = text.replace("fraction(items: [polite, please])", "mean(items: [polite])")  # broken
            (folder / f"p{k % 7}.gsr").write_text(text)
            entries.append({"id": f"i{k}", "line": k + 1, "status": "compiled", "program": f"p{k % 7}.gsr"})
            rows.append({"id": f"i{k}", "input": "q", "response": "please " * (k % 3)})
        write_jsonl(folder / "index.jsonl", entries)
        write_jsonl(folder / "items.jsonl", rows)
        columns = ColumnMap(id_field="id")
        registry = default_registry()
        programs = IndexedPrograms(folder / "index.jsonl", registry)
        programs.start("pointwise", columns)

        async def go():
            return [(run, ref) async for run, ref in run_items_each(
                programs.resolve, read_items(folder / "items.jsonl", columns), registry, "pointwise",
                CallLimit(3))]

        out = asyncio.run(go())
    finally:
        unregister_verifier("slow_check")
    assert [run.id for run, _ in out] == [f"i{k}" for k in range(40)]
    for k, (run, ref) in enumerate(out):
        if k % 7 == 3:
            assert run.status == "invalid" and ref.plan is None and "does not check" in run.reason
        else:
            assert run.status == "ok" and ref.program.name == f"item_{k % 7}"
            words = k % 3
            assert run.readout.sink["A"] == ((words > 1) + (words > 0)) / 2


def test_compiled_by_gsr_compile_then_run(tmp_path, capsys, monkeypatch):
    """The whole path: `gsr compile --data` against the fake server writes the index, `gsr run --programs`
    runs it."""
    rubrics = write_jsonl(tmp_path / "rubrics.jsonl", [
        {"id": "one", "rubric": "Is it long?"}, {"id": "two", "rubric": "Is it polite?"},
        {"id": "three", "rubric": "never compiles"}])

    def responder(body):
        prompt = body["messages"][-1]["content"]
        if "never compiles" in prompt:
            return "```gsr\nrubric x\nsink nothing\n```"
        program = GOOD_A if "long" in prompt else GOOD_B
        return "```gsr\n" + program.replace("1..5", "1..5") + "```"

    with FakeOpenAI(responder=responder) as server:
        code, io = gsr(capsys, "compile", "--data", rubrics, "--rubric-field", "rubric", "--task", "pointwise",
                       "--scale", "1..5", "--repairs", "0", "--out-dir", tmp_path / "programs", "--model", "m",
                       "--base-url", server.base_url, "--cache", tmp_path / "c.sqlite", "-q")
    assert code == 1, io.err  # one item did not compile
    write_jsonl(tmp_path / "items.jsonl", [
        {"id": "one", "input": "q", "response": "a long enough answer", "ann": {"good": 3}},
        {"id": "two", "input": "q", "response": "please", "ann": {"polite": True}},
        {"id": "three", "input": "q", "response": "x"}])
    code, io = gsr(capsys, "run", "--programs", tmp_path / "programs" / "index.jsonl", "--data", "items.jsonl",
                   "--out", "r.jsonl", "--trace", "t.jsonl")
    assert code == 1
    results = lines(tmp_path / "r.jsonl")
    assert [(r["id"], r["status"], r["score"]) for r in results] == [("one", "ok", 3), ("two", "ok", 5),
                                                                     ("three", "invalid", None)]
    assert results[2]["reason"].startswith("no compiled program: its compile failed (")
    assert gsr(capsys, "replay", "t.jsonl")[0] == 0


LLM_PROGRAM = """\
rubric item_m "Is it helpful?"
task pointwise { scale = 1..5  quantize = round }
criterion helpful: Bool { ask "Is the response helpful?" }
criterion terse: Bool = rule.word_count(below: 3)
node final = cap(base: normalize(helpful), trigger: terse, at: 0.25)
sink final
"""


def test_model_judged_programs_per_item(tmp_path, capsys, monkeypatch):
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "m.gsr").write_text(LLM_PROGRAM)
    (programs / "a.gsr").write_text(GOOD_A)
    write_jsonl(programs / "index.jsonl", [
        {"id": str(k), "line": k, "status": "compiled", "program": "m.gsr" if k % 2 else "a.gsr"}
        for k in range(1, 7)])
    write_jsonl(tmp_path / "items.jsonl", [{"id": str(k), "input": "q", "response": f"answer number {k}",
                                            "ann": {"good": 5}} for k in range(1, 7)])
    argv = ["run", "--programs", programs / "index.jsonl", "--data", "items.jsonl", "--out", "r.jsonl",
            "--trace", "t.jsonl", "--concurrency", "2"]
    # no model configured: the model-judged programs cannot run their items; the others do
    code, io = gsr(capsys, *argv)
    assert code == 1
    results = lines(tmp_path / "r.jsonl")
    assert [r["status"] for r in results] == ["invalid", "ok"] * 3
    assert "the judges cannot serve program `" in results[0]["reason"] and "--model" in results[0]["reason"]
    with FakeOpenAI(responder=lambda body: {"reason": "fine", "answer": "yes"}) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        code, io = gsr(capsys, *argv, "--model", "fake", "--base-url", server.base_url, "--no-cache")
        assert code == 0, io.err
        n_requests = len(server.requests)
    results = lines(tmp_path / "r.jsonl")
    assert [(r["status"], r["score"], r["program"]["name"]) for r in results] == [
        ("ok", 5, "item_m"), ("ok", 5, "item_a")] * 3
    records = lines(tmp_path / "t.jsonl")
    llm = records[-1]["judges"]["llm"]
    assert llm["calls"] == llm["http_requests"] == n_requests == 3  # one model criterion, three items
    assert llm["prompt_tokens"] == sum(n["judgments"][0]["provenance"]["tokens"]["prompt"]
                                       for r in records[:-1] for n in r["nodes"] if n["id"] == "helpful")
    assert gsr(capsys, "replay", "t.jsonl")[0] == 0
