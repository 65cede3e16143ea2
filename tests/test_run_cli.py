"""`gsr run`, `gsr replay` and `gsr metrics` end to end on the shared data sets (through the CLI entry point)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from runfiles import records

from gsrlang.analysis.metrics import metrics_from_results
from gsrlang.cli import main

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"
TC_DATA = TC / "data" / "dev.jsonl"
LLMBAR = ROOT / "examples" / "llmbar"
LLMBAR_DATA = LLMBAR / "data" / "natural.json"
TC_COLUMNS = ["--input-field", "context", "--reference-field", "fact", "--id-field", "id",
              "--label-field", "scores.overall"]


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    monkeypatch.delenv("GSR_MODEL", raising=False)


def lines(path: Path) -> list[dict]:
    """The lines of a results file, or the records of a trace as `read_trace` gives them (summary included)."""
    rows = records(path)
    if rows and "trace_version" in rows[0]:
        from gsrlang.trace.read import read_trace

        return [r for _, r in read_trace(path, summaries=True)]
    return rows


def gsr(*argv, capsys=None):
    code = main([str(a) for a in argv])
    out = capsys.readouterr() if capsys else None
    return code, out


def test_run_topical_chat_graph_program(tmp_path, capsys):
    out, trace = tmp_path / "results.jsonl", tmp_path / "trace.jsonl"
    code, io = gsr("run", TC / "overall.gsr", "--data", TC_DATA, *TC_COLUMNS, "--out", out, "--trace", trace,
                   "--bootstrap", "50", capsys=capsys)
    assert code == 0, io.err
    results = lines(out)
    assert len(results) == 240 and all(r["status"] == "ok" for r in results)
    first = results[0]
    assert set(first) == {"id", "line", "status", "mode", "program", "score", "raw", "scale", "sink", "label",
                          "reason"}
    from gsrlang.lang.check.driver import analyze_file

    assert first["program"] == {"name": "topical_chat_overall",
                                "hash": analyze_file(str(TC / "overall.gsr")).program.content_hash}
    assert first["id"] == "tc-000" and first["mode"] == "pointwise" and first["scale"] == [1.0, 5.0]
    assert isinstance(first["score"], int) and 1 <= first["score"] <= 5
    assert "240 items: 240 ok, 0 invalid, 0 failed" in io.out and "qwk" in io.out
    records = lines(trace)
    assert len(records) == 241  # one record per item, then the run summary
    assert all("kind" not in r for r in records[:240])
    summary = records[-1]
    assert summary["kind"] == "run_summary" and summary["trace_version"] == 2
    assert (summary["items"], summary["ok"], summary["invalid"], summary["failed"]) == (240, 240, 0, 0)
    assert summary["program"]["name"] == "topical_chat_overall" and summary["judges"] == {}
    assert summary["wall_s"] >= 0 and summary["labelled"] == 240
    # the results file is what gsr metrics reads
    report = metrics_from_results(out, bootstrap=0)
    assert report["metrics"]["n"] == 240 and report["metrics"]["exact"]["value"] is not None

    code, io = gsr("replay", trace, capsys=capsys)
    assert code == 0 and "replayed 240 items" in io.out and "reproduced exactly" in io.out
    assert "recorded run: 240 items (240 ok, 0 invalid, 0 failed) in" in io.out and "no model judge" in io.out

    code, io = gsr("metrics", out, "--bootstrap", "20", capsys=capsys)
    assert code == 0 and "pointwise results" in io.out and "exact" in io.out
    code, io = gsr("metrics", out, "--json", "--bootstrap", "0", capsys=capsys)
    assert code == 0 and json.loads(io.out)["mode"] == "pointwise"


def test_replay_under_the_flat_program_equals_running_it(tmp_path, capsys):
    trace, flat_run, flat_replay = tmp_path / "t.jsonl", tmp_path / "flat.jsonl", tmp_path / "flat2.jsonl"
    assert gsr("run", TC / "overall.gsr", "--data", TC_DATA, *TC_COLUMNS, "--trace", trace, "-q")[0] == 0
    assert gsr("run", TC / "flat.gsr", "--data", TC_DATA, *TC_COLUMNS, "--out", flat_run, "-q")[0] == 0
    code, io = gsr("replay", trace, "--program", TC / "flat.gsr", "--out", flat_replay, "--bootstrap", "20",
                   capsys=capsys)
    assert code == 0
    assert "re-composing the judgments recorded under 'topical_chat_overall'" in io.out
    assert "agreement with the labels" in io.out
    assert flat_replay.read_bytes() == flat_run.read_bytes()


def test_replay_show_prints_a_decision_path(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert gsr("run", TC / "overall.gsr", "--data", TC_DATA, *TC_COLUMNS, "--trace", trace, "--limit", "5", "-q")[0] == 0
    capsys.readouterr()
    code, io = gsr("replay", trace, "--show", "tc-002", "-q", capsys=capsys)
    assert code == 0
    assert "item tc-002" in io.out and "FIRED" in io.out and "understandable" in io.out


@pytest.mark.parametrize("flags", [[], ["--program", str(TC / "flat.gsr")], ["--trace-out", "again.jsonl"]],
                         ids=["verify", "what-if", "item-by-item"])
def test_replay_show_of_an_unknown_item_is_an_error_that_names_some(tmp_path, capsys, monkeypatch, flags):
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "t.jsonl"
    assert gsr("run", TC / "overall.gsr", "--data", TC_DATA, *TC_COLUMNS, "--trace", trace, "--limit", "8", "-q")[0] == 0
    capsys.readouterr()
    code, io = gsr("replay", trace, "--show", "tc-999", "-q", *flags, capsys=capsys)
    assert code == 2
    assert f"item 'tc-999' is not in trace `{trace}` (items: tc-000, tc-001, tc-002, tc-003, tc-004, ...)" in io.err
    assert "Traceback" not in io.err


def test_a_tampered_trace_exits_1_with_a_pointer(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert gsr("run", TC / "overall.gsr", "--data", TC_DATA, *TC_COLUMNS, "--trace", trace, "--limit", "20", "-q")[0] == 0
    records = lines(trace)
    node = next(n for n in records[7]["nodes"] if n["id"] == "quality")
    node["output"][0] = node["output"][0] / 2
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    capsys.readouterr()
    code, io = gsr("replay", trace, capsys=capsys)
    assert code == 1
    assert "NOT reproduced: 1 of 20 items differ" in io.err
    assert "item 'tc-007' (trace line 8), node `quality`, candidate A: recorded" in io.err


def test_a_trace_from_another_program_version_says_so(tmp_path, capsys):
    prog = tmp_path / "overall.gsr"
    shutil.copy(TC / "overall.gsr", prog)
    trace = tmp_path / "t.jsonl"
    assert gsr("run", prog, "--data", TC_DATA, *TC_COLUMNS, "--trace", trace, "--limit", "10", "-q")[0] == 0
    prog.write_text(prog.read_text().replace("at: 0.25)", "at: 0.3)"))
    capsys.readouterr()
    code, io = gsr("replay", trace, capsys=capsys)
    assert code == 1
    assert "has changed since the trace was recorded" in io.err and "--program" in io.err
    # naming the edited program explicitly is the "what if"
    code, io = gsr("replay", trace, "--program", prog, capsys=capsys)
    assert code == 0 and "re-composing" in io.out


def test_replay_under_a_program_with_other_criteria_is_refused_precisely(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert gsr("run", TC / "overall.gsr", "--data", TC_DATA, *TC_COLUMNS, "--trace", trace, "--limit", "3", "-q")[0] == 0
    capsys.readouterr()
    code, io = gsr("replay", trace, "--program", TC / "direct.gsr", capsys=capsys)
    assert code == 1
    assert "criterion `overall` of" in io.err and "is not in the trace" in io.err


def bad_rows_file(tmp_path: Path) -> Path:
    rows = [json.loads(line) for line in TC_DATA.read_text().splitlines()[:7]]
    out = []
    out.append(json.dumps(rows[0]))                                  # 1 ok
    r = dict(rows[1]); del r["id"]; out.append(json.dumps(r))  # 2 missing column (the program reads no response)
    r = dict(rows[2]); r["id"] = ["not", "text"]; out.append(json.dumps(r))  # 3 wrong type
    out.append("")                                                   # 4 blank line
    r = json.loads(json.dumps(rows[3])); r["scores"]["overall"] = 7; out.append(json.dumps(r))  # 5 label off the scale
    r = json.loads(json.dumps(rows[4])); r["scores"]["naturalness"] = 4.5; out.append(json.dumps(r))  # 6 bad annotation
    out.append(json.dumps(rows[5]))                                  # 7 ok
    out.append(json.dumps(rows[6])[:80])                             # 8 truncated last line (no newline)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(out))
    return path


def test_bad_rows_are_reported_counted_and_nothing_is_lost(tmp_path, capsys):
    data = bad_rows_file(tmp_path)
    out, trace = tmp_path / "r.jsonl", tmp_path / "t.jsonl"
    code, io = gsr("run", TC / "overall.gsr", "--data", data, *TC_COLUMNS, "--out", out, "--trace", trace,
                   "--bootstrap", "0", capsys=capsys)
    assert code == 1
    results = lines(out)
    assert [r["line"] for r in results] == [1, 2, 3, 5, 6, 7, 8]  # every non-blank line has a result
    status = {r["line"]: r["status"] for r in results}
    assert status == {1: "ok", 2: "failed", 3: "failed", 5: "ok", 6: "invalid", 7: "ok", 8: "failed"}
    by_line = {r["line"]: r for r in results}
    assert "missing column 'id'" in by_line[2]["reason"]
    assert "column 'id' must be text" in by_line[3]["reason"]
    assert "truncated JSON" in by_line[8]["reason"]
    assert "4.5 is outside Score[1..3]" in by_line[6]["reason"]
    assert by_line[5]["score"] is not None and by_line[5]["label"] is None  # scored, but not used in metrics
    assert "outside the scale 1..5" in by_line[5]["label_error"]
    assert "7 items: 3 ok, 1 invalid, 3 failed" in io.out
    assert "1 label could not be used" in io.out
    for needle in ("line 2: missing column 'id'", "line 3: column 'id' must be text",
                   "line 8: truncated JSON", "label 7 is outside the scale 1..5", "4.5 is outside Score[1..3]"):
        assert needle in io.err
    records = lines(trace)
    assert len(records) == 8 and records[-1]["kind"] == "run_summary"
    assert (records[-1]["ok"], records[-1]["invalid"], records[-1]["failed"], records[-1]["label_problems"]) == \
        (3, 1, 3, 1)
    code, io = gsr("replay", trace, capsys=capsys)
    assert code == 0 and "3 failed rows carried over" in io.out


def test_csv_input(tmp_path, capsys):
    rows = [json.loads(line) for line in TC_DATA.read_text().splitlines()[:5]]
    import csv

    path = tmp_path / "d.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "context", "response", "scores.naturalness", "scores.coherence", "scores.engagingness",
                    "scores.groundedness", "scores.understandability", "scores.overall"])
        for r in rows:
            s = r["scores"]
            w.writerow([r["id"], r["context"], r["response"], s["naturalness"], s["coherence"], s["engagingness"],
                        s["groundedness"], s["understandability"], s["overall"]])
    out = tmp_path / "r.jsonl"
    code, io = gsr("run", TC / "overall.gsr", "--data", path, "--input-field", "context", "--id-field", "id",
                   "--label-field", "scores.overall", "--out", out, "--bootstrap", "0", capsys=capsys)
    assert code == 0, io.err
    jsonl = tmp_path / "r2.jsonl"
    gsr("run", TC / "overall.gsr", "--data", TC_DATA, *TC_COLUMNS, "--out", jsonl, "--limit", "5", "-q")
    assert [r["sink"] for r in lines(out)] == [r["sink"] for r in lines(jsonl)]


def test_pairwise_rules_only_on_llmbar(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    code, io = gsr("run", LLMBAR / "rules_only.gsr", "--data", LLMBAR_DATA, "--responses", "output_1,output_2",
                   "--label-field", "label", "--out", out, "--bootstrap", "20", capsys=capsys)
    assert code == 0, io.err
    results = lines(out)
    assert len(results) == 100
    assert all(r["mode"] == "pairwise" and r["winner"] in ("first", "second", "tie") for r in results)
    assert all(r["label"] in ("first", "second") for r in results)
    assert set(results[0]["sink"]) == {"A", "B"}
    assert "valid_only_accuracy" in io.out


def test_pairwise_needs_two_response_columns(capsys):
    code, io = gsr("run", LLMBAR / "rules_only.gsr", "--data", LLMBAR_DATA, capsys=capsys)
    assert code == 2 and "--responses" in io.err


def test_direct_program_without_a_model_is_refused_before_any_item(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    code, io = gsr("run", TC / "direct.gsr", "--data", TC_DATA, *TC_COLUMNS, "--out", out, capsys=capsys)
    assert code == 2
    assert "criterion `overall` is judged by a model" in io.err and "--model" in io.err
    assert not out.exists()


def test_both_tasks_need_a_mode_and_errors_in_the_program_exit_1(tmp_path, capsys):
    prog = tmp_path / "both.gsr"
    prog.write_text((LLMBAR / "rules_only.gsr").read_text().replace(
        "task pairwise {", "task pointwise { scale = 1..5 }\ntask pairwise {"))
    code, io = gsr("run", prog, "--data", LLMBAR_DATA, capsys=capsys)
    assert code == 2 and "--mode" in io.err
    broken = tmp_path / "broken.gsr"
    broken.write_text("rubric x\ntask pointwise { scale = 1..5 }\nsink nothing_here\n")
    code, io = gsr("run", broken, "--data", TC_DATA, capsys=capsys)
    assert code == 1 and "error" in io.err


def test_missing_data_file_is_a_usage_error(tmp_path, capsys):
    code, io = gsr("run", TC / "overall.gsr", "--data", tmp_path / "nope.jsonl", capsys=capsys)
    assert code == 2 and "no such file" in io.err


def test_an_id_column_is_the_id_unless_id_field_says_otherwise(tmp_path, capsys):
    """Issue 26: `gsr run` numbered lines even when the data has an `id` column; the summary says which it used."""
    rows = [json.loads(x) for x in (TC / "data" / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:4]]
    for k, r in enumerate(rows):
        r["conv"] = f"c{k}"
    with_id = tmp_path / "with_id.jsonl"
    with_id.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    without = tmp_path / "without.jsonl"
    without.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "id"}) + "\n" for r in rows),
                       encoding="utf-8")
    program = str(TC / "overall.gsr")
    cases = ((with_id, [], [r["id"] for r in rows], "ids: the data's `id` column"),
             (with_id, ["--id-field", "conv"], ["c0", "c1", "c2", "c3"], "ids: column `conv` (--id-field)"),
             (without, [], ["1", "2", "3", "4"], "ids: line numbers (the data has no `id` column"))
    for data, extra, ids, said in cases:
        out = tmp_path / "r.jsonl"
        capsys.readouterr()
        assert main(["run", program, "--data", str(data), "--out", str(out), "-q", "--bootstrap", "0"] + extra) == 0
        assert said in capsys.readouterr().out
        assert [r["id"] for r in records(out)] == ids
    # a CSV file's header counts as its first row
    csv = tmp_path / "d.csv"
    csv.write_text("id,scores.overall\nx1,3\nx2,4\n", encoding="utf-8")
    from gsrlang.files.dataset import default_id_field

    assert default_id_field(csv) == "id" and default_id_field(without) is None
