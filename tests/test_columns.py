"""`gsr run` asks the data only for the columns the program reads (gsrlang.files.needs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runfiles import records

from gsrlang.cli import main
from gsrlang.files.needs import program_needs
from gsrlang.lang.check.driver import analyze

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"
TC_DATA = TC / "data" / "dev.jsonl"
LLMBAR = ROOT / "examples" / "llmbar"


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    monkeypatch.delenv("GSR_MODEL", raising=False)


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def results(path: Path) -> list[dict]:
    return records(path)  # the item lines (a results file ends with its completion line)


def program(text: str):
    analysis = analyze(text, "p.gsr")
    assert analysis.program is not None, analysis.errors
    return analysis.program


def test_needs_by_judge_kind():
    p = program('''rubric r "r"
task pointwise { scale = 1..5 }
criterion a: Bool = human(field: "ann.{candidate}")
criterion b: Bool = rule.word_count(above: 3)
criterion c: Bool { ask "ok?" }
node n = all(items: [a, b, c])
sink normalize(n)
''')
    needs = program_needs(p)
    assert needs.input == ("c",) and needs.responses == ("b", "c")
    assert needs.fields == (("ann.{candidate}", "a"),)
    assert needs.field_columns(2) == (("ann.A", "a"), ("ann.B", "a"))


def test_human_only_program_needs_no_input_or_response(tmp_path, capsys):
    rows = [json.loads(line) for line in TC_DATA.read_text(encoding="utf-8").splitlines()[:12]]
    for r in rows:
        del r["context"], r["response"]
    data = write_jsonl(tmp_path / "ann.jsonl", rows)
    out = tmp_path / "r.jsonl"
    code = main(["run", str(TC / "overall.gsr"), "--data", str(data), "--id-field", "id",
                 "--label-field", "scores.overall", "--out", str(out), "--bootstrap", "0"])
    assert code == 0, capsys.readouterr().err
    got = results(out)
    assert len(got) == 12 and all(r["status"] == "ok" for r in got)


def test_rule_only_pairwise_program_needs_no_input(tmp_path, capsys):
    rows = json.loads((LLMBAR / "data" / "natural.json").read_text(encoding="utf-8"))[:10]
    for r in rows:
        r.pop("input", None)
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "r.jsonl"
    code = main(["run", str(LLMBAR / "rules_only.gsr"), "--data", str(data), "--responses", "output_1,output_2",
                 "--label-field", "label", "--out", str(out), "--bootstrap", "0"])
    assert code == 0, capsys.readouterr().err
    assert [r["status"] for r in results(out)] == ["ok"] * 10


def test_human_only_pairwise_program_needs_no_response_columns(tmp_path, capsys):
    gsr = tmp_path / "p.gsr"
    gsr.write_text('''rubric pref "which is better, by the annotators"
task pairwise { epsilon = 0.0  on_tie = tie }
criterion quality: Ordinal[1..5] = human(field: "rating.{candidate}")
sink normalize(quality)
''', encoding="utf-8")
    data = write_jsonl(tmp_path / "d.jsonl", [{"rating": {"A": 4, "B": 2}, "gold": "A"},
                                              {"rating": {"A": 1, "B": 5}, "gold": "B"}])
    out = tmp_path / "r.jsonl"
    code = main(["run", str(gsr), "--data", str(data), "--label-field", "gold", "--out", str(out),
                 "--bootstrap", "0"])
    assert code == 0, capsys.readouterr().err
    assert [r["winner"] for r in results(out)] == ["first", "second"]


def test_pointwise_model_program_still_needs_input_and_response(tmp_path, capsys):
    gsr = tmp_path / "p.gsr"
    gsr.write_text('''rubric r "r"
task pointwise { scale = 1..5 }
criterion good: Bool { ask "Is it good?" }
sink normalize(good)
''', encoding="utf-8")
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": 1, "thesis": "t", "short": "s"}])
    code = main(["run", str(gsr), "--data", str(data), "--model", "m", "--base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 2
    line = [ln for ln in err.splitlines() if "lacks columns" in ln]
    assert len(line) == 1, err
    assert "'input' (the input (--input-field))" in line[0] and "'response' (a response" in line[0]
    assert "has: id, thesis, short" in line[0]


def test_missing_human_field_is_one_message_naming_the_criterion(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "x", "thesis": "t", "scores": {"overall": 3}}] * 3)
    code = main(["run", str(TC / "overall.gsr"), "--data", str(data)])
    err = capsys.readouterr().err
    assert code == 2
    assert "'scores.naturalness' (criterion `natural" in err and "has: id, thesis, scores" in err
    assert err.count("\n") == 1  # one line, not one per row


def test_help_says_what_each_judge_kind_reads(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for kind, reads in (("`llm`", "input, the response(s) and the reference"), ("`rule`", "read the response(s)"),
                        ("human(field: F)", "reads column F"), ("`verifier`", "read the input and the response(s)")):
        assert kind in text and reads in text
