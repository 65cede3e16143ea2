"""Imports read `.gsr` files only, with a size limit checked before reading; no diagnostic ever quotes a file
that is not .gsr (issue 11: `import ".env"` echoed the key in check, SARIF, GitHub, LSP and compile prompts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from fakeserver import FakeOpenAI, scripted

from gsrlang.cli import main
from gsrlang.lang.check.driver import analyze_file
from gsrlang.lang.check.imports import MAX_IMPORT_BYTES
from gsrlang.lsp import diagnostics, hover
from gsrlang.lsp.model import DocumentModel, Files
from gsrlang.lsp.positions import PositionMap

SECRET = "sk-LEAK-7c0ffee"
PROGRAM = '''\
rubric r "Is it helpful?"
import "IMPORTED"

task pointwise { scale = 1..5  quantize = round }

criterion helpful: Ordinal[1..5] { ask "How helpful is it?" }

sink normalize(helpful)
'''


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={SECRET}\nOTHER=1\n")
    (tmp_path / "sneaky.gsr").symlink_to(tmp_path / ".env")
    return tmp_path


def program(folder: Path, target: str, name: str = "main.gsr") -> Path:
    path = folder / name
    path.write_text(PROGRAM.replace("IMPORTED", target))
    return path


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "sarif", "github"])
@pytest.mark.parametrize("target", [".env", "sneaky.gsr"])
def test_check_refuses_a_non_gsr_import_without_quoting_it(folder, capsys, fmt, target):
    path = program(folder, target)
    assert main(["check", str(path), "--format", fmt, "--color", "never"]) == 1
    io = capsys.readouterr()
    assert SECRET not in io.out + io.err and "OPENAI_API_KEY" not in io.out + io.err
    assert "only .gsr files can be imported" in io.out
    if fmt in ("json", "sarif"):
        json.loads(io.out)


def test_an_import_over_the_size_limit_is_refused_before_it_is_read(folder, monkeypatch):
    big = folder / "big.gsr"
    with big.open("wb") as f:  # a sparse file: its size is known without writing it
        f.truncate(MAX_IMPORT_BYTES + 1)
    opened = []
    real_open = Path.open

    def spy(self, *a, **kw):
        handle = real_open(self, *a, **kw)
        if self.name == "big.gsr":
            opened.append(handle)
            handle.read = lambda *_: pytest.fail("the oversized import was read")
        return handle

    monkeypatch.setattr(Path, "open", spy)
    analysis = analyze_file(str(program(folder, "big.gsr")))
    (d,) = [d for d in analysis.errors if d.code == "GSR010"]
    assert f"{MAX_IMPORT_BYTES + 1:,} bytes, over the 4 MiB limit" in d.message and opened


def test_the_language_server_never_quotes_a_non_gsr_import(folder):
    path = program(folder, ".env")
    text = path.read_text()
    model = DocumentModel(path.as_uri(), text, 1, str(path))
    pm, files = PositionMap(text), Files()
    published = diagnostics.to_lsp(model, pm, files)
    assert any("only .gsr files can be imported" in d.message for d in published)
    shown = json.dumps([str(d) for d in published])
    offset = text.index(".env")
    shown += str(hover.hover(model, offset, pm, files))
    assert SECRET not in shown and "OPENAI_API_KEY" not in shown
    assert files.text(folder / ".env") is None  # the editor's file reader refuses it too


def test_compile_repair_prompts_never_carry_a_non_gsr_file(folder, capsys, monkeypatch):
    good = (EXAMPLES / "summeval" / "relevance.gsr").read_text(encoding="utf-8")
    bad = good.replace("\n", '\nimport ".env"\n', 1)
    rubric = folder / "rubric.md"
    rubric.write_text("RUBRIC-X: rate the relevance of the summary from 1 to 5.\n")
    block = "```gsr\n{}```\n".format
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI(responder=scripted({"RUBRIC-X": [block(bad), block(good)]})) as server:
        code = main(["compile", str(rubric), "--task", "pointwise", "--scale", "1..5", "-o", "out.gsr",
                     "--model", "m", "--base-url", server.base_url, "--no-cache"])
        prompts = [json.dumps(r.body) for r in server.requests]
    io = capsys.readouterr()
    assert code == 0, io.err
    assert len(prompts) == 2 and "only .gsr files can be imported" in prompts[1]
    assert not any(SECRET in p or "OPENAI_API_KEY=" in p for p in prompts)
    assert SECRET not in io.out + io.err
