"""Time budgets for slow servers: --deadline stops calling, and a run that cannot meet it says so early."""

from __future__ import annotations

import json

import pytest

from gsrlang.cli import main

from fakeserver import FakeOpenAI
from runfiles import records

PROGRAM = '''\
rubric budget "One Bool criterion"
task pointwise { scale = 1..5  quantize = round }
criterion polite: Bool { ask "Is the response polite?" }
sink normalize(polite)
'''


@pytest.fixture(autouse=True)
def clean_env(model_env):
    """The model settings of conftest.model_env: none from the caller's shell, the test's folder as cwd."""


def test_deadline_warns_early_and_marks_uncalled_items_invalid(tmp_path, capsys):
    (tmp_path / "p.gsr").write_text(PROGRAM)
    rows = "".join(json.dumps({"id": f"i{k}", "input": "q", "response": f"r{k}"}) + "\n" for k in range(12))
    (tmp_path / "d.jsonl").write_text(rows)
    with FakeOpenAI(latency=0.25) as server:
        code = main(["run", "p.gsr", "--data", "d.jsonl", "--mode", "pointwise", "--model", "fake-model",
                     "--base-url", server.base_url, "--concurrency", "1", "--deadline", "1.2", "--out", "r.jsonl",
                     "--no-progress"])
        calls = len(server.requests)
    err = capsys.readouterr().err
    assert code == 1
    warnings = [line for line in err.splitlines() if "past the --deadline of 1.2 s" in line]
    assert len(warnings) == 1 and "tokens/s" in warnings[0] and "12 items need about" in warnings[0]
    results = records(tmp_path / "r.jsonl")
    assert len(results) == 12  # every item accounted for
    late = [r for r in results if r["status"] == "invalid"]
    assert late and all("--deadline" in r["reason"] for r in late)
    not_called = [r for r in late if "--deadline of 1.2 s had passed" in r["reason"]]
    cut = [r for r in late if "cut at the run's --deadline" in r["reason"]]  # in flight then: cut, not waited for
    assert len(cut) <= 1 and len(not_called) + len(cut) == len(late)
    assert calls >= 12 - len(not_called) - len(cut) and 1 <= calls <= 8


def test_a_bad_deadline_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "p.gsr").write_text(PROGRAM)
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "input": "q", "response": "r"}) + "\n")
    code = main(["run", "p.gsr", "--data", "d.jsonl", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                 "--deadline", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "--deadline must be a positive number of seconds, got 0" in err and "Traceback" not in err
