"""Every `gsr` subcommand's --help says where its output goes and what its exit status means, and the cheap
ones print what their help says (stdout or stderr, the summary and ids lines, the exit status)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gsrlang.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"
DEV = TC / "data" / "dev.jsonl"


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    io = capsys.readouterr()
    assert exc.value.code == 0 and io.err == ""
    return " ".join(io.out.split())


def test_gsr_help_lists_every_command_and_the_exit_status(capsys):
    text = _help(["--help"], capsys)
    assert all(f" {name} " in text for name in COMMANDS)
    assert "exit status: 0 clean, 1 problems found" in text


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_help_exits_0_and_says_its_outputs_and_exit_status(command, capsys):
    text = _help([command, "--help"], capsys)
    assert text.startswith(f"usage: gsr {command}")
    assert "exit status: 0" in text, f"gsr {command} --help does not say its exit status"
    assert "standard output" in text or "standard error" in text or "stdout" in text, \
        f"gsr {command} --help does not say where its output goes"


def test_check_prints_only_its_summary_line_on_stderr_when_clean(capsys):
    assert main(["check", str(TC / "overall.gsr")]) == 0
    io = capsys.readouterr()
    assert io.out == "" and io.err == "checked 1 file: 0 errors, 0 warnings (ok)\n"
    assert main(["check", "-q", str(TC / "overall.gsr")]) == 0
    assert capsys.readouterr() == ("", "")


def test_run_prints_the_summary_and_which_ids_on_stdout_and_on_stderr_with_out_dash(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["run", str(TC / "overall.gsr"), "--data", str(DEV), "--limit", "4", "--out", str(out), "-q"]) == 0
    io = capsys.readouterr()
    lines = io.out.splitlines()
    assert lines[0].startswith("topical_chat_overall (") and ", pointwise: 4 items: 4 ok, 0 invalid, 0 failed" in lines[0]
    assert lines[1] == "  ids: the data's `id` column (--id-field NAME for another)"
    assert lines[2] == f"  wrote results {out}" and io.err == ""

    # a process of its own: the results go to the real standard output's bytes
    r = subprocess.run([sys.executable, "-m", "gsrlang.cli", "run", str(TC / "overall.gsr"), "--data", str(DEV),
                        "--limit", "2", "--out", "-"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]  # standard output is the results alone
    assert [r.get("id") for r in rows] == ["tc-000", "tc-001", None] and rows[-1]["kind"] == "run_summary"
    assert ", pointwise: 2 items: 2 ok" in r.stderr and "ids: the data's `id` column" in r.stderr
    # in-process too (an API caller, a notebook): whatever stands for standard output takes the results
    assert main(["run", str(TC / "overall.gsr"), "--data", str(DEV), "--limit", "2", "--out", "-"]) == 0
    io = capsys.readouterr()
    assert [json.loads(line).get("id") for line in io.out.splitlines()] == ["tc-000", "tc-001", None]
    assert ", pointwise: 2 items: 2 ok" in io.err

    data = tmp_path / "d.jsonl"
    data.write_text("".join(line for line in DEV.read_text(encoding="utf-8").splitlines(True)[:2]) + "{bad\n",
                    encoding="utf-8")
    assert main(["run", str(TC / "overall.gsr"), "--data", str(data), "--out", str(out), "--no-progress"]) == 1
    io = capsys.readouterr()
    assert "3 items: 2 ok, 0 invalid, 1 failed" in io.out
    assert io.err.startswith("failed row: line 3: invalid JSON")
    assert main(["run", str(TC / "overall.gsr"), "--data", str(data), "--out", str(out), "-q"]) == 1
    io = capsys.readouterr()
    assert "3 items: 2 ok, 0 invalid, 1 failed" in io.out and io.err == ""  # -q: the summary alone


def test_render_says_wrote_on_stderr_and_report_on_stdout(tmp_path, capsys):
    svg = tmp_path / "g.dot"
    assert main(["render", str(TC / "overall.gsr"), "-o", str(svg)]) == 0
    assert capsys.readouterr() == ("", f"wrote {svg}\n")
    assert main(["render", str(TC / "overall.gsr"), "-o", str(tmp_path / "g.bogus")]) == 2
    assert main(["render", str(TC / "overall.gsr")]) == 0
    assert capsys.readouterr().out.startswith("digraph ")


def test_metrics_exits_2_on_a_file_that_is_not_a_results_file(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{bad\n", encoding="utf-8")
    for command in (["metrics", str(bad)], ["compare", str(bad), str(bad)]):
        assert main(command) == 2
        io = capsys.readouterr()
        assert io.out == "" and io.err.startswith(f"gsr {command[0]}: error: {bad}: line 1: invalid JSON")


def test_a_duplicate_id_warning_shows_a_long_id_cut_short(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    row = json.loads(DEV.read_text(encoding="utf-8").splitlines()[0])
    data.write_text((json.dumps(row) + "\n") * 2, encoding="utf-8")  # the same 900-character context twice
    assert main(["run", str(TC / "overall.gsr"), "--data", str(data), "--id-field", "context", "-q"]) == 0
    warning = capsys.readouterr().err
    assert "1 item had an id an earlier item already had (first: 'so , i " in warning
    assert len(row["context"]) > 500 and len(warning) < 400
