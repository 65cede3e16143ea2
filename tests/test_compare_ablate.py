"""gsr compare, gsr ablate, and results lines that name their program (gsr metrics over several files)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from runfiles import records

from gsrlang.analysis.ablate import variants
from gsrlang.analysis.metrics import pointwise_metrics
from gsrlang.cli import main
from gsrlang.execution.planner import RunConfig
from gsrlang.execution.replay import replay_records
from gsrlang.execution.runs import run_file
from gsrlang.execution.tracetable import table_from_trace
from gsrlang.files.dataset import ColumnMap
from gsrlang.judges.registry import default_registry
from gsrlang.lang.check.driver import analyze_file
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.evaluate import Evaluator
from gsrlang.trace.read import read_trace

pytest.importorskip("scipy")

TC = Path(__file__).resolve().parent.parent / "examples" / "topical_chat"
COLUMNS = ColumnMap("context", ("response",), "id", "scores.overall", "fact")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    for name in ("overall", "flat"):
        program = analyze_file(str(TC / f"{name}.gsr")).program
        run_file(program, TC / "data" / "dev.jsonl", COLUMNS, default_registry(), "pointwise",
                 RunConfig(out=str(d / f"{name}.jsonl"), trace=str(d / f"{name}.trace.jsonl")))
    return d


def _lines(path):
    return records(path)  # the item lines (a results file ends with its completion line)


def test_compare_gives_paired_differences_wins_and_mcnemar(runs, capsys):
    a, b = runs / "flat.jsonl", runs / "overall.jsonl"
    assert main(["compare", str(a), str(b), "--bootstrap", "200", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    la, lb = _lines(a), _lines(b)
    golds = [x["label"] for x in la]
    ma = pointwise_metrics([x["score"] for x in la], golds)
    mb = pointwise_metrics([x["score"] for x in lb], golds)
    exact = result["metrics"]["exact"]
    assert exact["a"] == ma["exact"] and exact["b"] == mb["exact"]
    assert exact["diff"] == pytest.approx(mb["exact"] - ma["exact"])
    assert exact["ci95"][0] <= exact["diff"] <= exact["ci95"][1]
    only_a = sum(x["score"] == round(g + 1e-9) and y["score"] != round(g + 1e-9) for x, y, g in zip(la, lb, golds))
    assert result["mcnemar"]["only_a"] == only_a and 0 < result["mcnemar"]["p_value"] <= 1
    assert sum(result["wins"].values()) == 240
    assert result["programs"]["a"][0][0] == "topical_chat_flat"
    assert main(["compare", str(a), str(b), "--bootstrap", "50"]) == 0
    assert "McNemar" in capsys.readouterr().out


def test_compare_refuses_different_items(runs, tmp_path, capsys):
    a = runs / "flat.jsonl"
    lines = a.read_text().splitlines()
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(lines[:100]) + "\n")
    assert main(["compare", str(a), str(short)]) == 1
    assert "140 only in" in capsys.readouterr().err
    relabelled = tmp_path / "relabelled.jsonl"
    first = json.loads(lines[0])
    first["label"] = 1.0 if first["label"] != 1.0 else 2.0
    relabelled.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert main(["compare", str(a), str(relabelled)]) == 1
    assert "labels differ on 1 item" in capsys.readouterr().err


def test_metrics_over_several_files_tells_one_program_from_several(runs, tmp_path, capsys):
    again = tmp_path / "again.jsonl"
    again.write_text((runs / "overall.jsonl").read_text())
    assert main(["metrics", str(runs / "overall.jsonl"), str(again), "--bootstrap", "10"]) == 0
    assert "several runs of one program" in capsys.readouterr().out
    assert main(["metrics", str(runs / "overall.jsonl"), str(runs / "flat.jsonl"), "--bootstrap", "10"]) == 0
    out = capsys.readouterr().out
    assert "different programs" in out and "topical_chat_flat" in out


def test_ablation_variants_replay_like_the_interpreter(runs):
    program = analyze_file(str(TC / "overall.gsr")).program
    names = [v.name for v in variants(program)]
    assert "bypass understood (cap)" in names and "bypass final (cap)" in names
    assert "mean at quality (weighted_mean)" in names and "flat mean of all criteria" in names
    assert {f"drop {c.id}" for c in program.criteria} <= set(names)
    trace = str(runs / "overall.trace.jsonl")
    table = table_from_trace(program, trace)
    for v in variants(program):
        columnar = Evaluator(v.program).run(table).predictions()
        item_at_a_time = [run.readout.score if run.status == "ok" else None
                          for _, _, run, _, _ in replay_records(Plan(v.program), read_trace(trace), verify=False)]
        assert columnar == item_at_a_time, v.name
    drop = next(v for v in variants(program) if v.name == "drop understandable").program
    assert "understandable" not in drop and "not_understood" not in drop  # unused nodes leave the variant


def test_flat_variant_is_the_equal_weight_mean(runs):
    program = analyze_file(str(TC / "overall.gsr")).program
    flat = next(v for v in variants(program) if v.name == "flat mean of all criteria").program
    rows = [json.loads(x) for x in (TC / "data" / "dev.jsonl").read_text().splitlines()]
    expected = []
    for r in rows:
        s = r["scores"]
        m = (s["understandability"] + (s["naturalness"] - 1) / 2 + (s["coherence"] - 1) / 2 +
             (s["engagingness"] - 1) / 2 + s["groundedness"]) / 5
        expected.append(math.floor(round(1 + 4 * m, 9) + 0.5))  # the readout: round halves up
    got = Evaluator(flat).run(table_from_trace(flat, str(runs / "overall.trace.jsonl"))).predictions()
    assert got == expected


def test_gsr_ablate_prints_the_table(runs, capsys):
    assert main(["ablate", str(TC / "overall.gsr"), "--trace", str(runs / "overall.trace.jsonl"),
                 "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert "flat mean of all criteria" in out and "difference" in out and "drop engaging" in out
    assert main(["ablate", str(TC / "direct.gsr"), "--trace", str(runs / "overall.trace.jsonl")]) == 1
    assert "cannot feed" in capsys.readouterr().err


def test_per_criterion_agreement_in_gsr_metrics(runs, tmp_path, capsys):
    rows = [json.loads(x) for x in (TC / "data" / "dev.jsonl").read_text().splitlines()]
    for i, r in enumerate(rows):  # another annotator: some coherence labels moved, one unreadable
        r["human"] = {"coherence": r["scores"]["coherence"] + (1.0 if i % 7 == 0 else 0.0)}
    rows[1]["human"]["coherence"] = "n/a"
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["metrics", str(runs / "overall.jsonl"), "--trace", str(runs / "overall.trace.jsonl"), "--data", str(data),
            "--id-field", "id", "--bootstrap", "20"]
    assert main(base + ["--criterion", "maintains_context=human.coherence", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["criteria"]["maintains_context"]
    preds = [r["scores"]["coherence"] for i, r in enumerate(rows) if i != 1]
    golds = [r["human"]["coherence"] for i, r in enumerate(rows) if i != 1]
    expected = pointwise_metrics(preds, golds)
    assert report["n_unusable"] == 1 and report["n"] == 239
    assert report["exact"]["value"] == expected["exact"] < 1.0
    assert report["mae"]["value"] == pytest.approx(expected["mae"])
    assert main(base + ["--criterion", "nonexistent=scores.coherence"]) == 2
    assert "no criterion `nonexistent`" in capsys.readouterr().err
    assert main(base + ["--criterion", "oops"]) == 2
    assert "NAME=FIELD" in capsys.readouterr().err


def test_gsr_ablate_reads_labelled_data_as_it_reads_the_trace(runs, capsys):
    """--data judges the file with the program's inline judges: the same table, so the same ablation, as the
    trace of a run over that file."""
    data = str(TC / "data" / "dev.jsonl")
    common = ["--bootstrap", "50", "--seed", "3", "--json"]
    assert main(["ablate", str(TC / "flat.gsr"), "--data", data, "--label-field", "scores.overall", *common]) == 0
    by_data = json.loads(capsys.readouterr().out)
    assert main(["ablate", str(TC / "flat.gsr"), "--trace", str(runs / "flat.trace.jsonl"), *common]) == 0
    by_trace = json.loads(capsys.readouterr().out)
    assert by_data["data"] == data and "trace" not in by_data and by_trace["trace"] == str(runs / "flat.trace.jsonl")
    assert by_data["n"] == by_trace["n"] > 12 and by_data["variants"] == by_trace["variants"]
    assert main(["ablate", str(TC / "flat.gsr"), "--data", data, "--label-field", "scores.overall",
                 "--bootstrap", "20"]) == 0
    assert f"labelled items of {data}" in capsys.readouterr().out


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors
        return exc.code


@pytest.mark.parametrize("program, data, args, words", [
    ("flat", "dev", [], "--data needs --label-field"),
    ("flat", "dev", ["--label-field", "nope"], "no item has a label in --label-field nope"),
    ("flat", "dev", ["--label-field", "scores.overall", "--mode", "pairwise"], "declares no pairwise task"),
    ("direct", "dev", ["--label-field", "scores.overall"], "needs criteria that only read the data"),
    ("flat", "missing", ["--label-field", "scores.overall"], "no such file"),
    ("flat", "dev", ["--label-field", "scores.overall", "--trace", "t.jsonl"], "not allowed with argument --data"),
    ("flat", "dev", ["--label-field", "scores.overall", "--responses", "a,b,c"],
     "a pointwise run judges 1 response column; got 3 (a, b, c)"),
])
def test_gsr_ablate_refuses_bad_data_in_one_line(tmp_path, capsys, program, data, args, words):
    data = str(TC / "data" / "dev.jsonl") if data == "dev" else str(tmp_path / f"{data}.jsonl")
    assert _exit_code(["ablate", str(TC / f"{program}.gsr"), "--data", data, *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and "internal error" not in err
    assert err.strip().splitlines()[-1].startswith("gsr ablate: error:")


def test_gsr_ablate_mode_is_for_data(runs, capsys):
    assert _exit_code(["ablate", str(TC / "flat.gsr"), "--trace", str(runs / "flat.trace.jsonl"), "--mode",
                       "pointwise"]) == 2
    assert "--mode is for --data" in capsys.readouterr().err
