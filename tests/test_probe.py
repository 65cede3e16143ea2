"""`gsr probe` against the fake server (the real llama.cpp server is probed in tests/realmodel/)."""

from __future__ import annotations

import json
import re

from gsrlang.cli import main
from gsrlang.judges.llm.server import KnowledgeStore

from fakeserver import FakeOpenAI, Reply


def test_probe_of_a_llamacpp_like_server_reports_and_remembers(tmp_path, capsys):
    cache = tmp_path / "c" / "judgments.sqlite"
    with FakeOpenAI(models=["smol"]) as server:
        server.llamacpp = True
        server.context_length = 4096
        code = main(["probe", "--model", "smol", "--base-url", server.base_url, "--cache", str(cache), "--json"])
        report = json.loads(capsys.readouterr().out)
        url = server.base_url
    assert code == 0
    assert report["reachable"] and report["models"] == ["smol"] and report["model_listed"] is True
    assert report["context_length"] == 4096 and report["context_source"] == "overflow error"
    assert report["structured"] == {"json_schema": "rejected", "json_object": "enforced", "grammar": "ignored"}
    assert report["grammar_dialect"] is None and report["logprobs"] is False
    assert report["judgment_mode"] == "json_object" and report["judgment_parsed"] is True
    known = KnowledgeStore(cache.with_name("servers.json")).get(url, "smol")
    assert known["structured"] == "json_object" and known["context_length"] == 4096


def test_probe_table_and_unknown_model(capsys):
    with FakeOpenAI(models=["smol"]) as server:
        code = main(["probe", "--model", "nope", "--base-url", server.base_url, "--no-cache"])
    io = capsys.readouterr()
    assert code == 1
    assert re.search(r"^model served +no$", io.out, re.M) and re.search(r"^structured json_schema +enforced$", io.out, re.M)
    (line,) = io.err.strip().splitlines()
    assert "does not serve model 'nope'" in line and "--model" in line


def test_probe_of_a_server_that_is_down(capsys):
    with FakeOpenAI() as server:
        url = server.base_url
    code = main(["probe", "--model", "m", "--base-url", url, "--no-cache", "--timeout", "2"])
    io = capsys.readouterr()
    assert code == 1 and re.search(r"^reachable +no$", io.out, re.M)
    (line,) = io.err.strip().splitlines()
    assert "cannot reach" in line and "is the server running" in line


def test_probe_of_a_model_that_answers_nothing_says_so(capsys):
    """A model that answers free-text prompts with an empty message (Gemma 3 270M under llama-cpp-python's
    default chat template does) gives no token to read logprobs or a speed from: "unknown", not "no"."""
    def responder(body):
        return Reply(content="", logprobs={"content": []}, usage={"prompt_tokens": 9, "completion_tokens": 0})

    with FakeOpenAI(responder, models=["silent"]) as server:
        code = main(["probe", "--model", "silent", "--base-url", server.base_url, "--no-cache", "--overflow", "no"])
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"^logprobs +unknown: the model answered with no text$", out, re.M), out
    assert re.search(r"^tokens/s +unknown: the model answered with no text$", out, re.M), out
