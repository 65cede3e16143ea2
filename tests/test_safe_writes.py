"""Writes that cannot destroy input: every data-loss case of issue 11 is refused (exit 2, nothing written),
whole-file writes are atomic, and a results file says whether its run completed."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from test_run_cli import (
    TC,
    no_model,  # noqa: F401 - the autouse fixture: no model judge from the environment
)
from test_run_cli import TC_COLUMNS as COLUMNS

from gsrlang.cli import main
from gsrlang.files.safeio import PathClash, check_outputs, same_file, write_atomic


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A folder with a program, a 5-row data file, and a completed run's results and trace."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(TC / "overall.gsr", tmp_path / "p.gsr")
    rows = (TC / "data" / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:5]
    (tmp_path / "d.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(["run", "p.gsr", "--data", "d.jsonl", *COLUMNS, "--out", "r.jsonl", "--trace", "t.jsonl",
                 "--no-progress", "-q"]) == 0
    return tmp_path


def snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def refused(capsys, folder: Path, *argv) -> str:
    """Run gsr; assert exit 2, one error line, and no file in `folder` created or changed."""
    before = snapshot(folder)
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert snapshot(folder) == before
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "is the same file as" in lines[0] and "nothing was written" in lines[0], err
    return lines[0]


def run(*extra):
    return ("run", "p.gsr", "--data", "d.jsonl", *COLUMNS, "--no-progress", *extra)


def test_run_out_onto_data_is_refused(work, capsys):
    line = refused(capsys, work, *run("--out", "d.jsonl"))
    assert "--out `d.jsonl`" in line and "--data `d.jsonl`" in line and "refusing to overwrite an input" in line


def test_run_trace_onto_data_is_refused(work, capsys):
    line = refused(capsys, work, *run("--trace", "d.jsonl"))
    assert "--trace `d.jsonl`" in line and "--data" in line


def test_run_out_and_trace_on_one_file_is_refused(work, capsys):
    line = refused(capsys, work, *run("--out", "x.jsonl", "--trace", "./x.jsonl"))
    assert "two outputs cannot share a file" in line
    assert not (work / "x.jsonl").exists()


def test_run_out_onto_the_program_is_refused(work, capsys):
    refused(capsys, work, *run("--out", "p.gsr"))


def test_run_out_through_a_symlink_to_the_data_is_refused(work, capsys):
    (work / "link.jsonl").symlink_to(work / "d.jsonl")
    line = refused(capsys, work, *run("--out", "link.jsonl"))
    assert "--out `link.jsonl`" in line and "--data `d.jsonl`" in line


def test_run_out_onto_a_hard_link_of_the_data_is_refused(work, capsys):
    os.link(work / "d.jsonl", work / "hard.jsonl")
    refused(capsys, work, *run("--out", "hard.jsonl"))


def test_run_data_given_by_another_path_is_refused(work, capsys):
    refused(capsys, work, *run("--out", str(work / "sub" / ".." / "d.jsonl")))


def test_run_out_onto_the_cache_is_refused(work, capsys):
    refused(capsys, work, *run("--out", "c.sqlite", "--cache", "c.sqlite"))


def test_replay_out_onto_the_trace_is_refused(work, capsys):
    line = refused(capsys, work, "replay", "t.jsonl", "--out", "t.jsonl")
    assert "--out `t.jsonl`" in line and "TRACE `t.jsonl`" in line
    assert main(["replay", "t.jsonl"]) == 0  # the trace is intact
    assert "reproduced exactly" in capsys.readouterr().out


def test_report_onto_its_results_trace_or_program_is_refused(work, capsys):
    assert "RESULTS `r.jsonl`" in refused(capsys, work, "report", "r.jsonl", "--trace", "t.jsonl", "-o", "r.jsonl")
    os.symlink("t.jsonl", work / "link.html")
    assert "--trace `t.jsonl`" in refused(capsys, work, "report", "r.jsonl", "--trace", "t.jsonl", "-o", "link.html")
    assert "--program `p.gsr`" in refused(capsys, work, "report", "r.jsonl", "--trace", "t.jsonl", "--program",
                                          "p.gsr", "-o", "p.gsr")


def test_replay_trace_out_onto_the_trace_or_the_program_is_refused(work, capsys):
    refused(capsys, work, "replay", "t.jsonl", "--trace-out", "t.jsonl")
    line = refused(capsys, work, "replay", "t.jsonl", "--trace-out", "p.gsr")  # the program the trace names
    assert "the trace's program `p.gsr`" in line
    refused(capsys, work, "replay", "t.jsonl", "--out", "o.jsonl", "--trace-out", "o.jsonl")


def test_export_import_render_onto_their_input_are_refused(work, capsys):
    refused(capsys, work, "export", "p.gsr", "-o", "p.gsr")
    assert main(["export", "p.gsr", "-o", "p.json"]) == 0
    refused(capsys, work, "import", "p.json", "-o", "p.json")
    refused(capsys, work, "render", "p.gsr", "-o", "p.gsr", "--type", "dot")
    refused(capsys, work, "render", "p.gsr", "--trace", "t.jsonl", "--item", "tc-000", "-o", "t.jsonl",
            "--type", "dot")


def test_compile_outputs_onto_inputs_are_refused(work, capsys):
    (work / "rubric.txt").write_text("Is the answer helpful?\n", encoding="utf-8")
    contract = ["--task", "pointwise", "--scale", "1..5"]
    refused(capsys, work, "compile", "rubric.txt", *contract, "-o", "rubric.txt")
    refused(capsys, work, "compile", "rubric.txt", *contract, "--input", "d.jsonl", "-o", "d.jsonl")
    (work / "batch").mkdir()
    shutil.copy(work / "d.jsonl", work / "batch" / "index.jsonl")
    refused(capsys, work / "batch", "compile", "--data", "batch/index.jsonl", "--rubric-field", "context",
            *contract, "--out-dir", "batch")
    refused(capsys, work, "compile", "--data", "d.jsonl", "--rubric-field", "context", *contract,
            "--out-dir", "progs", "--report", "d.jsonl")


def test_check_outputs_names_both_paths_and_skips_stdout(tmp_path):
    a = tmp_path / "a"
    a.write_text("x")
    check_outputs([("--data", a)], [("--out", "-"), ("--trace", None), ("--other", tmp_path / "b")])
    with pytest.raises(PathClash, match=r"--out `.*a` is the same file as --data `.*a`"):
        check_outputs([("--data", a)], [("--out", str(a))])
    assert same_file(a, tmp_path / "." / "a") and not same_file(a, tmp_path / "b")


# ---- atomic whole-file writes ----------------------------------------------------------------------------
def test_write_atomic_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    target = tmp_path / "f.gsr"
    target.write_text("old\n")

    def fail(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.gsr"]  # no temporary file left behind


def test_write_atomic_keeps_permissions_and_writes_through_symlinks(tmp_path):
    real = tmp_path / "real.gsr"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "link.gsr"
    link.symlink_to(real)
    write_atomic(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_write_atomic_writes_a_pipe_as_it_is(tmp_path):
    """A pipe (`--out /dev/stdout` under a pipe, a process substitution) cannot be replaced: it is written as it
    is, and no temporary file is made beside it."""
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, b"line\n")
    reader.join(30)
    assert got == [b"line\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_fmt_rewrites_in_place_atomically(work, capsys):
    messy = work / "messy.gsr"
    messy.write_text((work / "p.gsr").read_text().replace("\n", "\n\n\n"))
    messy.chmod(0o600)
    assert main(["fmt", "messy.gsr"]) == 0
    assert "\n\n\n" not in messy.read_text() and main(["fmt", "--check", "messy.gsr"]) == 0
    assert stat.S_IMODE(messy.stat().st_mode) == 0o600
    assert not [p for p in work.iterdir() if p.name.endswith(".tmp")]


# ---- a results file says whether its run completed -------------------------------------------------------
def test_results_file_ends_with_a_completion_line(work):
    lines = [json.loads(x) for x in (work / "r.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and all("kind" not in x for x in lines[:5])
    assert lines[-1] == {"kind": "run_summary", "complete": True, "mode": "pointwise", "items": 5, "ok": 5,
                         "invalid": 0, "failed": 0, "duplicate_ids": 0}


def test_metrics_and_replay_say_when_a_file_is_a_killed_runs_prefix(work, capsys):
    results = (work / "r.jsonl").read_text().splitlines()
    (work / "cut.jsonl").write_text("\n".join(results[:3]) + "\n")  # what kill -9 leaves
    assert main(["metrics", "cut.jsonl", "--bootstrap", "0"]) == 0
    io = capsys.readouterr()
    assert "cut.jsonl does not end with a completed run's end line" in io.err and "3 lines" in io.out
    assert main(["metrics", "r.jsonl", "--bootstrap", "0"]) == 0
    assert "warning" not in capsys.readouterr().err
    trace = (work / "t.jsonl").read_text().splitlines()
    (work / "tcut.jsonl").write_text("\n".join(trace[:3]) + "\n")  # the header and two items
    assert main(["replay", "tcut.jsonl", "--out", "rr.jsonl"]) == 0
    io = capsys.readouterr()
    assert "reproduced exactly" in io.out and "holds only 2 of its items" in io.err
    end = json.loads((work / "rr.jsonl").read_text().splitlines()[-1])
    assert end["kind"] == "run_summary" and end["complete"] is False and end["items"] == 2
    assert main(["replay", "t.jsonl", "--out", "rr.jsonl"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert json.loads((work / "rr.jsonl").read_text().splitlines()[-1])["complete"] is True


# ---- duplicate item ids (docs/running.md, "Duplicate ids") ------------------------------------------------
def test_duplicate_ids_are_run_written_and_warned_about(work, capsys):
    rows = [json.loads(x) for x in (work / "d.jsonl").read_text().splitlines()]
    for row, rid in zip(rows, ["a", "b", "a", "c", "a"]):
        row["id"] = rid
    (work / "dup.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["run", "p.gsr", "--data", "dup.jsonl", *COLUMNS, "--out", "dr.jsonl", "--trace", "dt.jsonl",
                 "--no-progress", "-q"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "gsr run: warning: 2 items had an id an earlier item already had (first: 'a')" in err
    lines = [json.loads(x) for x in (work / "dr.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines[:-1]] == ["a", "b", "a", "c", "a"]  # every row is run and written
    assert lines[-1]["duplicate_ids"] == 2
    assert main(["replay", "dt.jsonl", "--show", "a"]) == 0
    err = capsys.readouterr().err
    assert "3 records have id 'a'; showing the first (line 1)" in err and "gsr replay: warning: 2 items" in err
    assert main(["metrics", "dr.jsonl", "--json", "--bootstrap", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["n_superseded"] == 2  # the later line of an id wins


@pytest.mark.parametrize("columnar", ["1", "0"])
def test_rows_that_could_not_be_read_are_not_repeated_ids(work, capsys, monkeypatch, columnar):
    """Unreadable rows have no id: two of them are not a repeat (in the columnar run and the item path)."""
    monkeypatch.setenv("GSR_COLUMNAR_RUN", columnar)
    good = (work / "d.jsonl").read_text().splitlines()[:2]
    (work / "bad.jsonl").write_text("\n".join(["not json", good[0], "[1, 2]", good[1], "{"]) + "\n")
    code = main(["run", "p.gsr", "--data", "bad.jsonl", *COLUMNS, "--out", "br.jsonl", "--trace", "bt.jsonl",
                 "--no-progress", "-q"])
    err = capsys.readouterr().err
    assert code == 1, err  # three rows failed
    assert "had an id an earlier item already had" not in err
    lines = [json.loads(x) for x in (work / "br.jsonl").read_text().splitlines()]
    assert [x["status"] for x in lines[:-1]].count("failed") == 3 and lines[-1]["duplicate_ids"] == 0
    assert main(["replay", "bt.jsonl"]) == 0
    assert "already had" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, named, says", [
    (("--out", "r.jsonl/x.jsonl"), "r.jsonl", "a file is in the way of this folder"),
    (("--out", "."), ".", "this is a folder, not a file"),
    (("--trace", "r.jsonl/sub/t.jsonl"), "r.jsonl/sub", "a part of this path is a file, not a folder"),
])
def test_an_output_path_that_cannot_be_opened_is_one_error_line(work, capsys, argv, named, says):
    """An output under a file, or onto a folder: the machine's state as the user gave it, said in one line that
    names the path (not gsr's internal error), and nothing in the folder changed."""
    before = snapshot(work)
    assert main(list(run(*argv))) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines == [f"gsr run: error: `{named}`: {says}"]
    assert snapshot(work) == before
