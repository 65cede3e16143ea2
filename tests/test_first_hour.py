"""A new user's first hour: the demo's suggested commands, help texts that tell the truth, replay from
anywhere, and a project that cites no file outside itself."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gsrlang.cli import main

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"


def test_the_demo_prints_commands_that_work_as_printed(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GSR_MODEL", "OPENAI_BASE_URL")}
    demo = subprocess.run([sys.executable, "-m", "gsrlang.demo"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    tail = demo.stdout.split("Next, try:\n", 1)[1]
    commands = [line.strip() for line in tail.splitlines() if line.startswith("  ")]
    assert len(commands) >= 6 and any(" replay " in c for c in commands) and any(" report " in c for c in commands)
    for command in commands:
        r = subprocess.run(shlex.split(command), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (command, r.stdout[-2000:], r.stderr[-2000:])


def test_readme_says_how_to_get_gsr_on_path():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in text and "pipx install ." in text


def test_nothing_cites_files_outside_the_repository():
    pattern = re.compile(r"(\.\./)?\bshared/(LANGUAGE|data)|\.\./shared\b")
    offenders = []
    for folder in ("docs", "gsrlang", "examples", "stdlib", "grammar", "benchmarks", "editors"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".md", ".py", ".gsr", ".lark", ".txt", ".json", ".toml"):
                if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
                    offenders.append(str(path.relative_to(ROOT)))
    for name in ("README.md", "Makefile", "pyproject.toml"):
        if pattern.search((ROOT / name).read_text(encoding="utf-8")):
            offenders.append(name)
    assert offenders == []


def test_the_compile_prompt_cites_no_outside_file():
    from gsrlang.compiler.prompt import system_message

    text = system_message()
    assert "shared/" not in text and "LANGUAGE.md" not in text


def _help(command: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_render_help_names_the_real_format_flag(capsys):
    text = _help("render", capsys)
    assert "or -T/--type" in text and "extension (.svg, .png, .pdf, .dot) or --format" not in text
    assert main(["render", str(TC / "overall.gsr"), "-T", "dot"]) == 0


def test_replay_help_names_the_real_trace_flag(capsys):
    text = _help("replay", capsys)
    assert "a new trace with --trace-out" in text


def test_replay_from_another_directory(tmp_path, monkeypatch, capsys):
    trace = tmp_path / "trace.jsonl"
    monkeypatch.chdir(ROOT)
    assert main(["run", "examples/topical_chat/overall.gsr", "--data", "examples/topical_chat/data/dev.jsonl",
                 "--id-field", "id", "--limit", "20", "--trace", str(trace), "-q"]) == 0
    header = json.loads(trace.read_text(encoding="utf-8").splitlines()[0])["program"]
    assert header["path"] == "examples/topical_chat/overall.gsr"
    assert header["abs_path"] == str(TC / "overall.gsr") and header["hash"].startswith("sha256:")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    assert "reproduced exactly" in capsys.readouterr().out


def test_replay_passes_over_a_same_named_file_of_another_version(tmp_path, monkeypatch, capsys):
    """From a directory holding another `examples/topical_chat/overall.gsr`, replay finds the recorded one by
    its hash."""
    trace = tmp_path / "trace.jsonl"
    monkeypatch.chdir(ROOT)
    assert main(["run", "examples/topical_chat/overall.gsr", "--data", "examples/topical_chat/data/dev.jsonl",
                 "--id-field", "id", "--limit", "5", "--trace", str(trace), "-q"]) == 0
    other = tmp_path / "examples" / "topical_chat"
    other.mkdir(parents=True)
    (other / "overall.gsr").write_text((TC / "flat.gsr").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    assert "reproduced exactly" in capsys.readouterr().out
