"""`gsr compile` end to end, in process, against the fake OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from fakeserver import FakeOpenAI, Fault, scripted

from gsrlang.cli import build_parser, main
from gsrlang.lang.check.driver import analyze

GOOD = (EXAMPLES / "summeval" / "relevance.gsr").read_text(encoding="utf-8")
BAD = GOOD.replace("normalize(coverage)", "normalise(coverage)")
PAIRWISE = (EXAMPLES / "mtbench" / "pairwise.gsr").read_text(encoding="utf-8")
RUBRIC = "RUBRIC-SUMMARY: rate the relevance of the summary from 1 to 5."


def block(program: str) -> str:
    return "Here is the program.\n```gsr\n" + program + "```\n"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GSR_MODEL", "GSR_TIMEOUT_S", "GSR_MAX_RETRIES", "GSR_STRUCTURED"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # the default compile cache (.gsr-cache/) and no gsr.toml


def gsr(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def compile_args(server, *extra):
    return ("compile", *extra, "--model", "fake-model", "--base-url", server.base_url, "--timeout", "5")


@pytest.fixture
def rubric(tmp_path) -> Path:
    path = tmp_path / "rubric.md"
    path.write_text(RUBRIC + "\n", encoding="utf-8")
    return path


# ---- one rubric ------------------------------------------------------------------------------------------
def test_compile_writes_a_program_that_gsr_check_accepts_unchanged(capsys, tmp_path, rubric):
    out = tmp_path / "out" / "relevance.gsr"
    with FakeOpenAI(responder=scripted({RUBRIC: [block(BAD), block(GOOD)]})) as server:
        code, stdout, err = gsr(capsys, *compile_args(server, rubric, "--task", "pointwise", "--scale", "1..5",
                                                      "-o", out))
    assert code == 0, err
    assert "round 0 (synthesis): rejected, 1 error" in err
    before = BAD[:BAD.index("normalise(coverage)")]
    line, col = before.count("\n") + 1, len(before) - before.rfind("\n")
    assert f"relevance.gsr:{line}:{col}: GSR102 unknown operator `normalise`" in err  # diagnostics as they come
    assert "round 1 (repair 1): accepted" in err and "compiled" in err
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# compiled by gsr compile") and text.endswith(GOOD)
    assert "# repair-rounds: 1\n" in text and "# model: fake-model\n" in text
    assert "# contract: task pointwise { scale = 1..5  quantize = round }\n" in text
    code, stdout, err = gsr(capsys, "check", out, "--color", "never")
    assert code == 0 and "0 errors, 0 warnings" in err


def test_compile_to_stdout_and_the_cache(capsys, rubric):
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        args = compile_args(server, rubric, "--task", "pointwise", "--scale", "1..5")
        code, stdout, err = gsr(capsys, *args)
        assert code == 0 and stdout.endswith(GOOD) and len(server.requests) == 1
        code, again, err = gsr(capsys, *args)  # recompiling costs no model call
        assert code == 0 and again == stdout and "from the cache" in err and len(server.requests) == 1
        code, _, _ = gsr(capsys, *args, "--no-cache")
        assert code == 0 and len(server.requests) == 2


def test_pairwise_with_input_and_reference(capsys, tmp_path, rubric):
    task = tmp_path / "prompt.txt"
    task.write_text("INPUT-FROM-FILE: which is the better answer?", encoding="utf-8")
    with FakeOpenAI(responder=scripted({RUBRIC: block(PAIRWISE)})) as server:
        code, stdout, err = gsr(capsys, *compile_args(server, rubric, "--task", "pairwise", "--epsilon", "0.04",
                                                      "--on-tie", "tie", "--input", task,
                                                      "--reference", "REFERENCE-AS-TEXT"))
    assert code == 0, err
    user = server.requests[0]["messages"][1]["content"]
    assert "INPUT-FROM-FILE" in user and "REFERENCE-AS-TEXT" in user
    assert "task pairwise { epsilon = 0.04  on_tie = tie }" in user


def test_compile_failure_is_recorded_not_crashed(capsys, tmp_path, rubric):
    out = tmp_path / "out.gsr"
    with FakeOpenAI(responder=scripted({RUBRIC: block(BAD)})) as server:
        code, stdout, err = gsr(capsys, *compile_args(server, rubric, "--task", "pointwise", "--scale", "1..5",
                                                      "--repairs", "2", "-o", out))
    assert code == 1 and len(server.requests) == 3
    assert "compile failed: no valid program after 3 rounds" in err
    assert not out.exists()
    failed = Path(str(out) + ".failed").read_text(encoding="utf-8")
    assert "GSR102 unknown operator `normalise`" in failed and failed.endswith(BAD)


# ---- clear errors, never a traceback --------------------------------------------------------------------
def test_timeout_is_a_clear_error(capsys, rubric):
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        server.enqueue(Fault.timeout(5), Fault.timeout(5))
        code, _, err = gsr(capsys, "compile", rubric, "--task", "pointwise", "--scale", "1..5", "--model", "m",
                           "--base-url", server.base_url, "--timeout", "0.3", "--max-retries", "1")
    assert code == 2 and "gsr compile: error: model call failed" in err and "timed out after 0.3s" in err


def test_unreachable_server(capsys, rubric):
    with FakeOpenAI() as server:
        url = server.base_url
    code, _, err = gsr(capsys, "compile", rubric, "--task", "pointwise", "--scale", "1..5", "--model", "m",
                       "--base-url", url, "--max-retries", "0")
    assert code == 2 and "connection error" in err and "is the server running" in err


@pytest.mark.parametrize("argv, message", [
    (["missing.md", "--task", "pointwise", "--scale", "1..5"], "rubric file not found: missing.md"),
    (["RUBRIC", "--task", "pointwise", "--scale", "5..1"], "bad --scale: a scale needs LO < HI"),
    (["RUBRIC", "--task", "pointwise", "--scale", "one..five"], "bad --scale"),
    (["RUBRIC", "--task", "pointwise"], "--task pointwise needs --scale"),
    (["RUBRIC", "--task", "pairwise", "--epsilon", "1.5"], "bad --epsilon"),
    (["RUBRIC", "--task", "pairwise", "--scale", "1..5"], "--scale and --quantize are for --task pointwise"),
    (["RUBRIC", "--task", "pointwise", "--scale", "1..5", "--repairs", "-1"], "--repairs must be 0 or more"),
    (["RUBRIC", "--task", "pointwise", "--scale", "1..5", "--out-dir", "x"], "--out-dir needs --data"),
    (["--task", "pointwise", "--scale", "1..5"], "give a RUBRIC file"),
    (["RUBRIC", "--task", "pointwise", "--scale", "1..5"], "no judge model configured"),
])
def test_usage_errors(capsys, rubric, argv, message):
    argv = [str(rubric) if a == "RUBRIC" else a for a in argv]
    code, _, err = gsr(capsys, "compile", *argv)
    assert code == 2 and message in err


def test_a_model_answer_with_no_program(capsys, rubric):
    with FakeOpenAI(responder=scripted({RUBRIC: ""})) as server:
        code, _, err = gsr(capsys, *compile_args(server, rubric, "--task", "pointwise", "--scale", "1..5",
                                                 "--repairs", "1"))
    assert code == 1 and "GSR900 the model's answer holds no program: the answer was empty" in err
    assert "the model's last answer held none" in err


def test_print_prompt_makes_no_call(capsys, rubric):
    code, out, _ = gsr(capsys, "compile", rubric, "--task", "pointwise", "--scale", "1..5", "--print-prompt")
    assert code == 0 and "=== system" in out and out.rstrip().endswith(RUBRIC)


# ---- candidates and labels cannot be passed ------------------------------------------------------------
def test_the_cli_has_no_option_for_a_response_or_a_label(capsys, rubric):
    parser = build_parser()
    compile_parser = parser._subparsers._group_actions[0].choices["compile"]
    options = [s for action in compile_parser._actions for s in action.option_strings]
    assert not [o for o in options if any(w in o for w in ("response", "candidate", "label", "gold"))]
    for flag in ("--response", "--responses", "--candidates", "--label", "--label-field", "--response-field"):
        with pytest.raises(SystemExit) as info:
            main(["compile", str(rubric), "--task", "pointwise", "--scale", "1..5", flag, "x"])
        assert info.value.code == 2


@pytest.mark.parametrize("flag, column", [("--rubric-field", "response"), ("--input-field", "label"),
                                          ("--reference-field", "response_b"), ("--rubric-field", "human_score")])
def test_batch_refuses_response_and_label_columns(capsys, tmp_path, flag, column):
    data = tmp_path / "items.jsonl"
    data.write_text(json.dumps({"id": "1", "rubric": "r", "response": "x", "label": 1}) + "\n", encoding="utf-8")
    fields = {"--rubric-field": "rubric", flag: column}
    argv = ["compile", "--data", data, "--task", "pointwise", "--scale", "1..5", "--out-dir", tmp_path / "p",
            "--model", "m", "--base-url", "http://127.0.0.1:9/v1", *[x for kv in fields.items() for x in kv]]
    code, _, err = gsr(capsys, *argv)
    assert code == 2 and f"refusing to read column {column!r}" in err


# ---- batch mode --------------------------------------------------------------------------------------------
ITEMS = [
    {"id": "a/1", "input": "TASK-A", "rubric": "RUBRIC-A: fine at once", "response": "RESPONSE-A", "label": 4},
    {"id": "b", "input": "TASK-B", "rubric": "RUBRIC-B: needs a repair", "response": "RESPONSE-B", "label": 2},
    {"id": "c", "input": "TASK-C", "rubric": "RUBRIC-C: never compiles", "response": "RESPONSE-C", "label": 5},
]


def batch_server() -> FakeOpenAI:
    return FakeOpenAI(responder=scripted({
        "RUBRIC-A": block(GOOD),
        "RUBRIC-B": [block(BAD), block(GOOD)],
        "RUBRIC-C": block(BAD),
    }))


def test_batch_compiles_one_program_per_item_with_index_report_and_cache(capsys, tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(i) + "\n" for i in ITEMS) + "not json\n", encoding="utf-8")
    out_dir, report_path = tmp_path / "programs", tmp_path / "report.json"
    with batch_server() as server:
        argv = compile_args(server, "--data", data, "--rubric-field", "rubric", "--input-field", "input",
                            "--task", "pointwise", "--scale", "1..5", "--repairs", "1", "--out-dir", out_dir,
                            "--report", report_path)
        code, _, err = gsr(capsys, *argv)
        assert code == 1, err  # a compile failure and a bad row: problems in the input
        assert len(server.requests) == 1 + 2 + 2
        # only the named columns reach the model: never a response or a label
        prompts = "\n".join(r.prompt for r in server.requests)
        assert "TASK-A" in prompts and "RESPONSE" not in prompts
        assert "b: round 0 (synthesis): rejected, 1 error" in err and "compile report: 4 items" in err

        index = [json.loads(line) for line in (out_dir / "index.jsonl").read_text().splitlines()]
        assert [e["id"] for e in index] == ["a/1", "b", "c", "4"]
        assert [e["status"] for e in index] == ["compiled", "repaired", "failed", "error"]
        a, b, c, bad = index
        assert a["program"] == "a_1.gsr" and b["program"] == "b.gsr" and c["program"] is None
        assert c["failed_program"] == "c.gsr.failed" and c["codes"] == ["GSR102"] * 2
        assert b["repairs"] == 1 and b["codes"] == ["GSR102"] and len(a["spec_sha256"]) == 64
        assert bad["error_kind"] == "row" and "invalid JSON" in bad["error"]
        for e in (a, b):
            program = (out_dir / e["program"]).read_text(encoding="utf-8")
            assert program.endswith(GOOD) and analyze(program).ok
        assert (out_dir / "c.gsr.failed").read_text(encoding="utf-8").endswith(BAD)
        code, _, err = gsr(capsys, "check", out_dir, "--color", "never")  # failed programs are not .gsr files
        assert code == 0 and "checked 2 files" in err, err

        report = json.loads(report_path.read_text())
        assert (report["items"], report["compiled_first_try"], report["compiled_after_repair"],
                report["failed"], report["errors"]) == (4, 1, 1, 1, 1)
        assert report["shares"] == {"first_try": 0.25, "after_repair": 0.25, "failed": 0.25, "errors": 0.25}
        assert report["top_codes"] == [{"code": "GSR102", "count": 3, "items": 2, "title": "unknown operator"}]
        assert report["model_calls"] == 5 and report["cached"] == 0

        # recompiling costs no model call: every result comes from the cache (by the hash of S)
        before = (out_dir / "a_1.gsr").read_text(encoding="utf-8")
        code, _, err = gsr(capsys, *argv)
        assert code == 1 and len(server.requests) == 5
        again = json.loads(report_path.read_text())
        assert again["model_calls"] == 0 and again["cached"] == 3
        assert (out_dir / "a_1.gsr").read_text(encoding="utf-8") == before  # the same file, same date
        # --retry-failed compiles only the failure again
        code, _, _ = gsr(capsys, *argv, "--retry-failed")
        assert len(server.requests) == 7


def test_batch_program_index_for_gsr_run(capsys, tmp_path):
    from gsrlang.compiler import ProgramIndex

    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(i) + "\n" for i in ITEMS), encoding="utf-8")
    with batch_server() as server:
        gsr(capsys, *compile_args(server, "--data", data, "--rubric-field", "rubric", "--task", "pointwise",
                                  "--scale", "1..5", "--repairs", "0", "--out-dir", tmp_path / "p", "-q"))
    index = ProgramIndex(tmp_path / "p" / "index.jsonl")
    assert index.program("a/1").readout.pointwise.hi == 5
    with pytest.raises(LookupError, match="has no compiled program"):
        index.program("b")
    with pytest.raises(KeyError):
        index.program("zzz")


def test_batch_csv_and_the_example_data(capsys, tmp_path):
    with FakeOpenAI(responder=lambda body: block(GOOD.replace("1..5", "1..10"))) as server:
        code, _, err = gsr(capsys, *compile_args(
            server, "--data", EXAMPLES / "rubrics" / "checklist_items.csv", "--rubric-field", "rubric",
            "--input-field", "task", "--task", "pointwise", "--scale", "1..10", "--out-dir", tmp_path / "p"))
        assert code == 0, err
        prompts = "\n".join(r.prompt for r in server.requests)
        assert "vegan pasta recipe" in prompts and "Boil 200 g spaghetti" not in prompts
        code, _, err = gsr(capsys, *compile_args(
            server, "--data", EXAMPLES / "rubrics" / "biggen_items.jsonl", "--rubric-field", "rubric",
            "--input-field", "input", "--reference-field", "reference", "--task", "pointwise", "--scale", "1..10",
            "--out-dir", tmp_path / "q"))
        assert code == 0, err
        prompts = "\n".join(r.prompt for r in server.requests)
        assert "sky reflects the ocean" in prompts  # the rubric's own words reach the model...
        assert "The sky is blue because it reflects the ocean." not in prompts  # ...the response never does
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == [
        "haiku_rain.gsr", "index.jsonl", "sky_blue.gsr", "sql_join.gsr"]


def test_batch_stops_when_the_server_is_unreachable(capsys, tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(i) + "\n" for i in ITEMS), encoding="utf-8")
    with FakeOpenAI() as server:
        url = server.base_url
    code, _, err = gsr(capsys, "compile", "--data", data, "--rubric-field", "rubric", "--task", "pointwise",
                       "--scale", "1..5", "--out-dir", tmp_path / "p", "--model", "m", "--base-url", url,
                       "--max-retries", "0", "--concurrency", "1")
    assert code == 2 and "connection error" in err
    index = [json.loads(line) for line in (tmp_path / "p" / "index.jsonl").read_text().splitlines()]
    assert [e["status"] for e in index] == ["error"] * 3
    assert "the batch stopped" in index[2]["error"]


def test_the_key_is_never_printed(capsys, monkeypatch, rubric):
    secret = "sk-test-SECRET-4242"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with FakeOpenAI() as server:
        server.enqueue(Fault.status(401, message=f"Incorrect API key provided: {secret}."))
        code, out, err = gsr(capsys, *compile_args(server, rubric, "--task", "pointwise", "--scale", "1..5"))
        assert server.requests[0].headers["authorization"] == f"Bearer {secret}"  # read from the environment
    assert code == 2 and "HTTP 401" in err and "check the API key" in err
    assert secret not in err and secret not in out


def _model_flags(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {flag for action in sub._actions for flag in action.option_strings}


def test_compile_and_run_name_the_model_flags_alike():
    import argparse

    from gsrlang.commands.config import add_model_arguments

    shared = argparse.ArgumentParser()
    add_model_arguments(shared)
    model = {f for a in shared._actions for f in a.option_strings} - {"-h", "--help"}
    assert model <= _model_flags("compile") and model <= _model_flags("run")
    assert "--judge-config" in model and "--config" not in _model_flags("compile")


def test_compile_reads_the_model_from_judge_config(capsys, tmp_path, rubric):
    with FakeOpenAI(responder=scripted({RUBRIC: block(GOOD)})) as server:
        config = tmp_path / "elsewhere" / "gsr.toml"
        config.parent.mkdir()
        config.write_text(f'[judge]\nmodel = "toml-model"\nbase_url = "{server.base_url}"\n', encoding="utf-8")
        code, stdout, err = gsr(capsys, "compile", rubric, "--task", "pointwise", "--scale", "1..5",
                                "--judge-config", config, "--no-cache")
        assert code == 0, err
        assert server.requests[0]["model"] == "toml-model"
