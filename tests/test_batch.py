"""`gsr run --batch` against the fake server's Files and Batch APIs (tests/fakebatch.py), over real HTTP.

The batch run writes the online run's results (byte for byte), trace and cache entries (but for
latencies and the run summary's transport counts), for every example with model judges; it buys
exactly the requests the online run buys, round by round; per-line errors, expired, failed and
cancelled batches are handled and reported; size limits split batches; a server without the Batch
API is one line before anything is uploaded; export and import run a program with no server.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from gsrlang.cli import main

try:
    from fakeserver import FakeOpenAI, Fault, prompt_text
    from test_llm_run import clean_env, fake_model  # noqa: F401 - clean_env: no GSR_/OPENAI_ variable, a fresh cwd
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI, Fault, prompt_text
    from tests.test_llm_run import clean_env, fake_model  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
KEY = "sk-gsr-batch-test-5d1e"
VOLATILE = {"latency_s", "wall_s", "model_latency_s"}


@pytest.fixture
def server(monkeypatch):
    with FakeOpenAI(responder=fake_model) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        for role in ("FAST", "STRONG"):
            monkeypatch.setenv(f"GSR_ROLE_{role}_BASE_URL", s.base_url)
            monkeypatch.setenv(f"GSR_ROLE_{role}_API_KEY", KEY)
        yield s


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def gsr(*argv) -> int:
    return main([str(a) for a in argv])


def items(n: int = 6) -> list[dict]:
    return [{"id": f"i{k}", "input": f"Question {k}?", "response": ("GOOD " if k % 3 else "BAD ") + f"answer {k}.",
             "a": ("GOOD " if k % 2 else "BAD ") + f"first {k}.", "b": ("BAD " if k % 2 else "GOOD ") + f"second {k}."}
            for k in range(n)]


def strip(value):
    """A trace or cache value less what no two runs share (latencies, wall times)."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def trace_lines(path: Path) -> list:
    """The trace's records, less latencies; the run summary less its transport counts (HTTP requests, which a
    batch run makes none of, and the batch block, which an online run has not)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = strip(json.loads(line))
        if isinstance(record, dict) and record.get("kind") == "run_summary":
            record.pop("batch", None)
            for usage in (record.get("judges") or {}).values():
                if isinstance(usage, dict):
                    usage.pop("http_requests", None)
                    usage.pop("structured", None)  # "negotiated" in one cache folder, "remembered" in the other
        out.append(record)
    return out


def pop_costs(value, out: list) -> list:
    """Take every `cost_usd` out of a record (in order), into `out`."""
    if isinstance(value, dict):
        if "cost_usd" in value:
            out.append(value.pop("cost_usd"))
        for v in value.values():
            pop_costs(v, out)
    elif isinstance(value, list):
        for v in value:
            pop_costs(v, out)
    return out


def cache_entries(path: Path) -> dict:
    with sqlite3.connect(path) as conn:
        return {k: strip(json.loads(v)) for k, v in conn.execute("SELECT key, value FROM judgments")}


EXAMPLES = [  # (program, mode, extra flags) for every example whose criteria a model judges
    ("helpsteer2/helpfulness.gsr", "pointwise", []),
    ("mtbench/pairwise.gsr", "pairwise", ["--responses", "a,b"]),
    ("biggen/instance.gsr", "pointwise", []),
    ("checklist/checklist.gsr", "pointwise", []),
    ("summeval/relevance.gsr", "pointwise", []),
    ("judges/ensemble.gsr", "pointwise", ["--judge-config", EX / "judges" / "gsr.toml"]),
    ("judges/ensemble.gsr", "pairwise", ["--responses", "a,b", "--judge-config", EX / "judges" / "gsr.toml"]),
]


def run_pair(server, tmp_path, program, mode, extra, *batch_flags, data=None):
    """Run online, then with --batch (each with its own cache folder); return both folders."""
    data = data or write_jsonl(tmp_path / "items.jsonl", items())
    folders = []
    for name, flags in (("online", []), ("batch", ["--batch", "--batch-poll", "0.01", *batch_flags])):
        folder = tmp_path / name
        folder.mkdir()
        code = gsr("run", EX / program, "--data", data, "--mode", mode, "--id-field", "id", "--model", "fake-judge",
                   "--out", folder / "r.jsonl", "--trace", folder / "t.jsonl", "--cache", folder / "c.sqlite",
                   "-q", *extra, *flags)
        assert code in (0, 1)
        folders.append(folder)
        if name == "online":
            online_bodies = list(server.requests)
            server.reset()
    return folders[0], folders[1], online_bodies


@pytest.mark.parametrize("program,mode,extra", EXAMPLES, ids=[f"{p}:{m}" for p, m, _ in EXAMPLES])
def test_a_batch_run_writes_what_the_online_run_writes(server, tmp_path, capsys, program, mode, extra):
    online, batch, bought_online = run_pair(server, tmp_path, program, mode, extra)
    capsys.readouterr()
    assert (batch / "r.jsonl").read_bytes() == (online / "r.jsonl").read_bytes()
    batch_trace, online_trace = trace_lines(batch / "t.jsonl"), trace_lines(online / "t.jsonl")
    # dollars: the batch price, half the online one for these models (None where the price is unknown)
    batch_costs, online_costs = pop_costs(batch_trace, []), pop_costs(online_trace, [])
    assert [c is None for c in batch_costs] == [c is None for c in online_costs]
    assert [c for c in batch_costs if c is not None] == pytest.approx(
        [c / 2 for c in online_costs if c is not None])
    assert batch_trace == online_trace
    assert cache_entries(batch / "c.sqlite") == cache_entries(online / "c.sqlite")
    # the same requests were bought: online, one per model to negotiate structured output; the rest in batches
    negotiated = len({r["model"] for r in bought_online})
    assert len(server.requests) == negotiated
    bodies = lambda rs: sorted(json.dumps({k: v for k, v in r.items() if k != "custom_id"}, sort_keys=True)  # noqa: E731
                               for r in rs)
    assert bodies(list(server.requests) + server.batch.lines) == bodies(bought_online)
    # every line of a batch is for one model (OpenAI's rule)
    for bid, st in server.batch._state.items():
        assert len({line["body"]["model"] for line in st["lines"] or []}) == 1


def test_rounds_a_gated_program_is_sent_round_by_round(server, tmp_path, capsys):
    """helpsteer2: `unsafe` (a gate's trigger) first; the four other questions only for the items it does not cap."""
    data = write_jsonl(tmp_path / "items.jsonl", items(9))  # 3 BAD responses: `safe` caps them at 0
    online, batch, bought = run_pair(server, tmp_path, "helpsteer2/helpfulness.gsr", "pointwise", [], data=data)
    out = capsys.readouterr().out
    batches = [server.batch._state[b]["lines"] for b in server.batch.order]
    prompts = [[prompt_text(line["body"]) for line in lines] for lines in batches]
    assert len(batches) == 2
    assert all("harm" in p.lower() for p in prompts[0])  # round 1: the gate's trigger (one asked online)
    assert len(prompts[0]) == 9 - 1
    assert len(prompts[1]) == 6 * 4  # round 2: 4 criteria of the 6 GOOD items; the capped 3 are never asked
    assert len(bought) == 9 + 6 * 4
    assert "short-circuit: 12 of 54 judgments skipped" in out


def test_per_line_errors_are_retried_online_or_in_the_next_batch(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", items(6))
    seen = set()

    def fault(cid, body):  # the first time a request is batched: 500, or 429, or a 400 for one of them
        if cid in seen:
            return None
        seen.add(cid)
        return Fault.status(500 if len(seen) % 2 else 429) if len(seen) <= 4 else None

    server.batch.line_fault = fault
    online, batch, _ = run_pair(server, tmp_path, "helpsteer2/helpfulness.gsr", "pointwise", [])
    out = capsys.readouterr().out
    assert (batch / "r.jsonl").read_bytes() == (online / "r.jsonl").read_bytes()
    assert len(server.requests) == 1 + 4  # negotiation, then the 4 failed lines online
    assert cache_entries(batch / "c.sqlite") == cache_entries(online / "c.sqlite")

    seen.clear()
    server.reset()
    server.batch.order.clear()
    again = tmp_path / "again"
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id", "--model", "fake-judge",
               "--out", again / "r.jsonl", "--cache", again / "c.sqlite", "--batch", "--batch-poll", "0.01",
               "--batch-retry", "batch")
    io = capsys.readouterr()
    out = io.out
    assert code == 0, io.err
    assert (again / "r.jsonl").read_bytes() == (online / "r.jsonl").read_bytes()
    assert len(server.requests) == 1  # only the negotiation: the failed lines went into later batches
    assert "4 retried in a later batch" in out and "4 lines failed" in out


def test_a_line_that_fails_for_good_makes_its_judgment_invalid_saying_so(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", items(3)[1:])  # two GOOD items
    server.batch.line_fault = lambda cid, body: Fault.status(400, message="bad request line")
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id", "--model", "fake-judge",
               "--out", "r.jsonl", "--trace", "t.jsonl", "--batch", "--batch-poll", "0.01", "--batch-retry", "batch")
    io = capsys.readouterr()
    assert code == 1
    results = [json.loads(line) for line in Path("r.jsonl").read_text().splitlines()[:-1]]
    assert {r["status"] for r in results} == {"invalid"}
    assert "failed in a batch: HTTP 400: bad request line" in Path("t.jsonl").read_text()
    assert "failed" in io.err  # the judge's loud report
    first = server.batch.lines[0]["custom_id"]  # batched once, then again twice (BATCH_RETRIES), then given up
    assert sum(line["custom_id"] == first for line in server.batch.lines) == 3


def test_expired_and_failed_batches(server, tmp_path, capsys):
    server.batch.expire_after = 1  # half the lines answered, the rest expire
    online, batch, _ = run_pair(server, tmp_path, "helpsteer2/helpfulness.gsr", "pointwise", [])
    err = capsys.readouterr().err
    assert (batch / "r.jsonl").read_bytes() == (online / "r.jsonl").read_bytes()
    assert "expired with" in err
    assert len(server.requests) > 1  # the expired lines were retried online

    server.reset()
    server.batch.expire_after = None
    server.batch.fail_validation = "this file is broken"
    folder = tmp_path / "failed"
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", tmp_path / "items.jsonl", "--mode", "pointwise", "--id-field", "id",
               "--model", "fake-judge", "--out", folder / "r.jsonl", "--cache", folder / "c.sqlite", "--batch",
               "--batch-poll", "0.01")
    io = capsys.readouterr()
    assert code == 0, io.err
    assert "failed: invalid_request: this file is broken" in io.err
    assert (folder / "r.jsonl").read_bytes() == (online / "r.jsonl").read_bytes()  # retried online


def test_size_limits_split_a_round_into_several_batches(server, tmp_path, capsys):
    online, batch, _ = run_pair(server, tmp_path, "helpsteer2/helpfulness.gsr", "pointwise", [],
                                "--batch-max-requests", "5")
    capsys.readouterr()
    assert (batch / "r.jsonl").read_bytes() == (online / "r.jsonl").read_bytes()
    sizes = [len(server.batch._state[b]["lines"]) for b in server.batch.order]
    assert max(sizes) <= 5 and sum(sizes) == 5 + 4 * 4 and len(sizes) == 1 + 4
    server.batch.order.clear()
    folder = tmp_path / "bytes"
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", tmp_path / "items.jsonl", "--mode", "pointwise", "--id-field", "id",
               "--model", "fake-judge", "--out", folder / "r.jsonl", "--cache", folder / "c.sqlite", "--batch",
               "--batch-poll", "0.01", "--batch-max-bytes", "12K")
    capsys.readouterr()
    assert code == 0 and (folder / "r.jsonl").read_bytes() == (online / "r.jsonl").read_bytes()
    for bid in server.batch.order:
        assert server.batch.files[server.batch.batches[bid]["input_file_id"]]["bytes"] <= 12 * 1024
    assert len(server.batch.order) > 2


def test_a_server_without_the_batch_api_is_one_line_before_anything_is_uploaded(server, tmp_path, capsys):
    server.batch.enabled = False  # answers as llama.cpp's server does: 404 {"detail": "Not Found"}
    data = write_jsonl(tmp_path / "items.jsonl", items(2))
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id", "--model", "fake-judge",
               "--out", "r.jsonl", "--batch")
    io = capsys.readouterr()
    assert code == 2
    lines = io.err.strip().splitlines()
    assert len(lines) == 1 and "has no Batch API (GET /v1/batches answered HTTP 404)" in lines[0]
    assert "run without --batch" in lines[0]
    assert server.batch.calls == [("GET", "/v1/batches")] and not server.requests
    assert not Path("r.jsonl").exists()


def test_an_unreachable_batch_server_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    import socket
    with socket.socket() as probe:  # a port on this machine that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = write_jsonl(tmp_path / "items.jsonl", items(2))
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id",
               "--model", "fake-judge", "--base-url", f"http://127.0.0.1:{port}/v1", "--max-retries", "0",
               "--out", "r.jsonl", "--batch")
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(lines) == 1 and "internal error" not in lines[0] and "connection error" in lines[0], lines
    assert not Path("r.jsonl").exists()


def test_a_cancelled_batch_is_reported_and_its_judgments_are_invalid(server, tmp_path, capsys):
    def cancel(event, info):  # someone cancels the batch as soon as it is in progress
        if event == "batch_retrieved" and info["status"] == "in_progress":
            server.batch.batches[info["batch_id"]]["status"] = "cancelling"

    server.batch.on_event = cancel
    data = write_jsonl(tmp_path / "items.jsonl", items(4))
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id", "--model", "fake-judge",
               "--out", "r.jsonl", "--trace", "t.jsonl", "--batch", "--batch-poll", "0.01")
    io = capsys.readouterr()
    assert code == 1
    assert "cancelled with 0 of 3 requests answered" in io.err
    assert "not answered (cancelled)" in io.out
    assert "was cancelled; run again to submit it anew" in Path("t.jsonl").read_text()
    # run again: the cancelled requests are submitted anew, and the run completes
    server.batch.on_event = None
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id", "--model", "fake-judge",
               "--out", "r.jsonl", "--batch", "--batch-poll", "0.01")
    assert code == 0, capsys.readouterr().err


def test_batch_status_and_cancel(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", items(3))
    assert gsr("run", EX / "mtbench/pairwise.gsr", "--data", data, "--responses", "a,b", "--id-field", "id",
               "--model", "fake-judge", "--out", "r.jsonl", "--batch", "--batch-poll", "0.01") == 0
    capsys.readouterr()
    assert gsr("batch", "status", "r.jsonl", "--model", "fake-judge") == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(server.batch.order) and all(
        line.startswith("batch_fake") and " completed " in line and "requests done" in line for line in out)
    assert gsr("batch", "status", "r.jsonl.gsr-batch", "--offline") == 0
    assert "completed" in capsys.readouterr().out
    # a batch still running can be cancelled
    bid = server.batch.order[0]
    server.batch.batches[bid]["status"] = "in_progress"
    assert gsr("batch", "cancel", "r.jsonl", "--model", "fake-judge") == 0
    assert "cancelling" in capsys.readouterr().out and server.batch.batches[bid]["status"] == "cancelling"
    assert gsr("batch", "status", "nowhere.jsonl") == 2
    assert "no batch state at nowhere.jsonl" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--batch-retry", "batch"], "--batch-retry only applies with --batch"),
    (["--batch", "--batch-export", "x.jsonl"], "--batch and --batch-export exclude each other"),
    (["--batch", "--no-cache"], "drop --no-cache"),
    (["--batch", "--batch-max-requests", "0"], "--batch-max-requests must be at least 1"),
    (["--batch", "--batch-max-bytes", "lots"], "--batch-max-bytes: not a size"),
    (["--batch-import", "missing.jsonl"], "--batch-import missing.jsonl: no such file"),
])
def test_bad_batch_flags_are_one_line_usage_errors(tmp_path, capsys, argv, message):
    data = write_jsonl(tmp_path / "items.jsonl", items(1))
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--model", "m", "--out", "r.jsonl", *argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_batch_run_needs_somewhere_to_keep_its_state(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", items(1))
    assert gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--model", "m", "--batch") == 2
    assert "give one of them (a file), or --batch-state DIR" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- export and import


def answer_file(server, requests: Path, results: Path, *, spoil=None) -> int:
    """What an offline runner (vllm run-batch) does: answer every line of `requests` (by the fake server's own
    logic), writing OpenAI's output format in another order. `spoil(n, text)` may damage a line."""
    from fakebatch import _Capture

    lines = [json.loads(x) for x in requests.read_text(encoding="utf-8").splitlines()]
    out = []
    for n, line in enumerate(reversed(lines)):
        cap = _Capture()
        server._answer(cap, line["body"], {}, None)
        text = json.dumps({"id": f"vllm-{n}", "custom_id": line["custom_id"],
                           "response": {"status_code": cap.status, "request_id": f"r{n}", "body": cap.payload},
                           "error": None})
        out.append(spoil(n, text) if spoil else text)
    results.write_text("".join(x + "\n" for x in out if x is not None), encoding="utf-8")
    return len(lines)


def offline(program, data, *flags):
    mode = [] if "--responses" in flags else ["--mode", "pointwise"]
    return gsr("run", EX / program, "--data", data, *mode, "--id-field", "id", "--model", "fake-judge", "--out", "r.jsonl",
               "--trace", "t.jsonl", "--cache", "c.sqlite", "--structured", "json_schema", "-q", *flags)


def test_export_and_import_run_a_program_with_no_server(server, tmp_path, capsys, monkeypatch):
    data = write_jsonl(tmp_path / "items.jsonl", items(6))
    ref = tmp_path / "ref"
    assert gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id", "--model", "fake-judge",
               "--out", ref / "r.jsonl", "--cache", ref / "c.sqlite", "--structured", "json_schema", "-q") == 0
    bought = len(server.requests)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there: no call can succeed
    capsys.readouterr()
    assert offline("helpsteer2/helpfulness.gsr", data, "--batch-export", "req1.jsonl") == 0
    out = capsys.readouterr().out
    assert "wrote the 6 requests the next round needs to req1.jsonl" in out and not Path("r.jsonl").exists()
    first = [json.loads(x) for x in Path("req1.jsonl").read_text().splitlines()]
    assert all(set(x) == {"custom_id", "method", "url", "body"} and x["url"] == "/v1/chat/completions" and
               x["method"] == "POST" and len(x["custom_id"]) == 64 for x in first)
    n1 = answer_file(server, Path("req1.jsonl"), Path("res1.jsonl"))
    assert offline("helpsteer2/helpfulness.gsr", data, "--batch-import", "res1.jsonl", "--batch-export",
                   "req2.jsonl") == 0
    assert "wrote the 16 requests" in capsys.readouterr().out
    n2 = answer_file(server, Path("req2.jsonl"), Path("res2.jsonl"))
    assert offline("helpsteer2/helpfulness.gsr", data, "--batch-import", "res2.jsonl", "--batch-export",
                   "req3.jsonl") == 0
    out = capsys.readouterr().out
    assert "nothing left to export: the run is complete" in out and not Path("req3.jsonl").exists()
    assert Path("r.jsonl").read_bytes() == (ref / "r.jsonl").read_bytes()
    assert n1 + n2 == bought


def test_an_import_from_another_program_is_refused_naming_the_first_unknown_custom_id(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", items(3))
    assert offline("mtbench/pairwise.gsr", data, "--responses", "a,b", "--batch-export", "other.jsonl") == 0
    answer_file(server, Path("other.jsonl"), Path("other-results.jsonl"))
    first = json.loads(Path("other-results.jsonl").read_text().splitlines()[0])["custom_id"]
    os.rename("r.jsonl.gsr-batch", "mtbench-state")  # the helpsteer2 run's own state
    capsys.readouterr()
    assert offline("helpsteer2/helpfulness.gsr", data, "--batch-export", "mine.jsonl") == 0
    capsys.readouterr()
    code = offline("helpsteer2/helpfulness.gsr", data, "--batch-import", "other-results.jsonl")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"line 1: custom_id {first!r} is not a request this run exported" in err
    with sqlite3.connect("c.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM judgments").fetchone()[0] == 0  # nothing stored


def test_a_truncated_or_garbled_results_file_stores_the_good_lines_and_asks_the_bad_again(server, tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", items(6))
    assert offline("helpsteer2/helpfulness.gsr", data, "--batch-export", "req.jsonl") == 0

    bad = []

    def spoil(n, text):
        if n in (1, 2, 5):
            bad.append(json.loads(text)["custom_id"])
        if n == 1:
            return "{not json"
        if n == 2:
            return json.dumps({"custom_id": json.loads(text)["custom_id"]})  # neither response nor error
        if n == 5:
            return text[: len(text) // 2]  # cut short (the last line)
        return text

    answer_file(server, Path("req.jsonl"), Path("res.jsonl"), spoil=spoil)
    res = Path("res.jsonl").read_text()
    Path("res.jsonl").write_text(res[:-1])  # the cut line has no newline either
    capsys.readouterr()
    assert offline("helpsteer2/helpfulness.gsr", data, "--batch-import", "res.jsonl", "--batch-export",
                   "again.jsonl") == 0
    io = capsys.readouterr()
    assert "line 2: not JSON; its request is asked again" in io.err
    assert "line 3 (custom_id" in io.err and "neither a response nor an error" in io.err
    assert "line 6: not JSON (cut short?)" in io.err
    again = {json.loads(x)["custom_id"] for x in Path("again.jsonl").read_text().splitlines()}
    assert set(bad) <= again  # the three bad lines are asked again (with the next round of the good ones)
    with sqlite3.connect("c.sqlite") as conn:  # the three good lines are stored
        assert conn.execute("SELECT count(*) FROM judgments WHERE key NOT LIKE 'unit:%'").fetchone()[0] == 3


# ------------------------------------------------------------------------------------- kill -9 and resume


def answer_stored(info) -> bool:
    """Hold the download's second half until the killed run has stored an answer of its first half (the run
    then resumes with some answers of the round in its cache and the others in a finished batch)."""
    import time

    for _ in range(12_000):  # the run stores the first half's answers as it reads them, then waits on the rest
        if stored_answers():
            break
        time.sleep(0.01)
    return True  # (the test checks that one was stored)


def stored_answers() -> int:
    """How many model answers the killed run's cache (c.sqlite) holds."""
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect("file:c.sqlite?mode=ro",
                                                                                uri=True)) as db:
        return db.execute("SELECT count(*) FROM judgments WHERE key NOT LIKE 'unit:%'").fetchone()[0]
    return 0


STEPS = {  # the moment the run is killed: (fake server event, a condition on its info)
    "after upload": ("file_uploaded", lambda info: True),
    "after create": ("batch_created", lambda info: True),
    "while polling": ("batch_retrieved", lambda info: info["retrieves"] == 2),
    "while downloading": ("content_started", lambda info: True),  # no whole line received: no answer stored
    "after an answer is stored": ("content_half_sent", answer_stored),
}


BATCH_RUN = [str(EX / "helpsteer2/helpfulness.gsr"), "--mode", "pointwise", "--id-field", "id", "--model",
             "fake-judge", "--structured", "json_schema", "-q", "--no-progress"]


@pytest.fixture(scope="module")
def online_reference(tmp_path_factory):
    """The items, and the online run's results and request count: one run (in this process) for every step below."""
    folder = tmp_path_factory.mktemp("batch-reference")
    data = write_jsonl(folder / "items.jsonl", items(6))
    with pytest.MonkeyPatch.context() as mp, FakeOpenAI(responder=fake_model) as server:
        for var in list(os.environ):
            if var.startswith(("GSR_", "OPENAI_")):
                mp.delenv(var)
        mp.setenv("OPENAI_BASE_URL", server.base_url)
        mp.setenv("OPENAI_API_KEY", KEY)
        mp.chdir(folder)
        assert gsr("run", BATCH_RUN[0], "--data", data, *BATCH_RUN[1:], "--out", "ref.jsonl", "--cache",
                   "ref.sqlite") == 0
        return data, (folder / "ref.jsonl").read_bytes(), len(server.requests)


@pytest.mark.parametrize("step", list(STEPS))
def test_a_run_killed_at_any_step_resumes_its_batches_and_submits_nothing_twice(tmp_path, monkeypatch, capsys, step,
                                                                               online_reference):
    import signal
    import subprocess
    import sys
    import threading

    data, ref, online = online_reference
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSR_", "OPENAI_"))}
    with FakeOpenAI(responder=fake_model) as server:
        env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=KEY)
        event, when = STEPS[step]
        proc = None
        killed = threading.Event()

        def kill(name, info):
            if name == event and when(info) and not killed.is_set() and proc is not None:
                killed.set()
                os.kill(proc.pid, signal.SIGKILL)

        server.batch.on_event = kill
        run = ["run", BATCH_RUN[0], "--data", str(data), *BATCH_RUN[1:], "--out", "out.jsonl", "--trace", "t.jsonl",
               "--cache", "c.sqlite", "--batch", "--batch-poll", "0.05"]
        # the run that is killed is a process of its own (SIGKILL: nothing of it runs after); the resumed run is
        # this process's (what it reads is only what the killed one left on disk)
        proc = subprocess.Popen([sys.executable, "-m", "gsrlang.cli", *run], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        proc.wait(timeout=120)
        assert killed.is_set() and proc.returncode == -signal.SIGKILL, f"the run was not killed {step}"
        state = json.loads(Path("out.jsonl.gsr-batch/state.json").read_text())
        assert state["parts"]  # recorded before the step it protects
        assert step != "after an answer is stored" or stored_answers(), "no answer was stored before the kill"
        assert step != "while downloading" or not stored_answers(), "an answer was stored before the kill"
        server.batch.on_event = None
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        assert gsr(*run) == 0, capsys.readouterr().err

    assert Path("out.jsonl").read_bytes() == ref
    assert not server.requests  # nothing online
    sent = [line["custom_id"] for line in server.batch.lines]
    assert len(sent) == len(set(sent)) == online  # every request answered once, in one batch
    assert len(server.batch.batches) == 2  # the two rounds: no second batch of either
    uploads = [f for f in server.batch.files.values() if f["purpose"] == "batch"]
    assert len(uploads) == 2  # nor a second upload of either input file


# ------------------------------------------------------------------------------------- generated programs


def hashed_answer(body: dict):
    """A deterministic answer to any judge request: each choice of the answer schema taken by a hash of the
    prompt, so gates fire for some items and not others, and a batch line gets the answer the online call does."""
    import hashlib

    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    seed = int(hashlib.sha256(prompt_text(body).encode()).hexdigest(), 16)

    def fill(s, salt):
        h = (seed >> (salt % 200)) ^ salt
        if "enum" in s:
            return s["enum"][h % len(s["enum"])]
        for key in ("anyOf", "oneOf"):
            if s.get(key):
                return fill(s[key][h % len(s[key])], salt + 1)
        t = s.get("type")
        t = next((x for x in t if x != "null"), "null") if isinstance(t, list) else t
        if t == "object" or "properties" in s:
            return {k: fill(v, salt + 7 * i + 1) for i, (k, v) in enumerate((s.get("properties") or {}).items())}
        if t == "boolean":
            return bool(h % 2)
        if t in ("number", "integer"):
            lo, hi = s.get("minimum", 0), s.get("maximum", 10)
            v = lo + (h % 1000) / 999 * (hi - lo)
            return int(round(v)) if t == "integer" else round(v, 3)
        if t == "array":
            return []
        return "because" if t == "string" else None

    return fill(schema, 0)


def test_a_batch_run_never_buys_a_judgment_short_circuiting_skips():
    import tempfile

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from test_properties import checkable_programs, draw_checked

    tally = {"examples": 0, "skipping": 0, "skipped": 0}
    with FakeOpenAI(responder=hashed_answer) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY}
        env.update({f"GSR_ROLE_{r}_MODEL": f"fake-{r.lower()}" for r in ("A", "B", "STRONG")})

        # derandomized: the tally below asks that some generated programs skip judgments, which a random draw
        # of 12 programs does not always give (1 of 10 in one run)
        @settings(max_examples=12, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(checkable_programs(), st.data())
        def check(generated, data):
            program, mode = draw_checked(generated, data)
            if not any(n.criterion.procedure.kind == "llm" for n in program.criteria):
                return
            with tempfile.TemporaryDirectory() as tmp:
                tmp = Path(tmp)
                (tmp / "p.gsr").write_text(generated[0], encoding="utf-8")
                rows = [{"id": f"i{k}", "input": f"Q{k}", "response": f"answer {k} " * (k + 1), "a": f"first {k}",
                         "b": f"second {k} " * k, "notes": {"ok": [True, False, None][k % 3]}} for k in range(3)]
                write_jsonl(tmp / "d.jsonl", rows)
                extra = ["--responses", "a,b"] if mode == "pairwise" else []
                bought = {}
                for name, flags in (("online", []), ("batch", ["--batch", "--batch-poll", "0.005"])):
                    server.reset()
                    server.batch.lines.clear()
                    code = gsr("run", tmp / "p.gsr", "--data", tmp / "d.jsonl", "--mode", mode, "--id-field", "id",
                               "--model", "fake", "--out", tmp / f"{name}.jsonl", "--cache", tmp / f"{name}.sqlite",
                               "--trace", tmp / f"{name}.trace.jsonl",
                               "--structured", "json_schema", "-q", "--no-progress", *extra, *flags)
                    assert code in (0, 1)
                    if not (tmp / f"{name}.jsonl").exists():
                        return  # a text `analyze` takes but a file may not hold (a NUL): nothing ran
                    asked = [*server.requests, *server.batch.lines]
                    bought[name] = sorted(json.dumps({k: v for k, v in r.items() if k != "custom_id"},
                                                     sort_keys=True) for r in asked)
                    if name == "batch":
                        assert not server.requests  # all in batches
                    else:
                        import re

                        skipped = len(re.findall(r'"status":\s*"skipped"',
                                                 (tmp / "online.trace.jsonl").read_text(encoding="utf-8")))
                        tally["examples"] += 1
                        tally["skipping"] += skipped > 0
                        tally["skipped"] += skipped
                assert bought["batch"] == bought["online"]  # exactly what the online short-circuit run bought
                assert (tmp / "batch.jsonl").read_bytes() == (tmp / "online.jsonl").read_bytes()

        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            check()
            # not vacuous: in some programs short-circuiting skipped judgments, and those were never batched
            assert tally["skipping"] >= 2, tally
            print(f"generated programs: {tally}")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def test_the_plan_and_the_spend_of_a_batch_run_use_the_batch_price(server, tmp_path, capsys, monkeypatch):
    import re

    data = write_jsonl(tmp_path / "items.jsonl", items(3))
    totals = {}
    for name, flags in (("online", []), ("batch", ["--batch"])):
        code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--model",
                   "gpt-4o-mini", "--dry-run", *flags)
        out = capsys.readouterr().out
        assert code == 0
        totals[name] = float(re.search(r"^total .*\$([0-9.]+)\s*$", out, re.M).group(1))
    assert "--batch: at the Batch API's price" in out and not server.requests and not server.batch.calls
    assert totals["batch"] == pytest.approx(totals["online"] / 2, abs=0.0001)  # gpt-4o-mini: half, in genai-prices
    # the run's own spend: the judge prices its calls at the batch price
    from gsrlang.judges.llm.prices import price_of

    assert price_of("gpt-4o-mini", None, batch=True).input == price_of("gpt-4o-mini", None).input / 2
    code = gsr("run", EX / "helpsteer2/helpfulness.gsr", "--data", data, "--mode", "pointwise", "--id-field", "id",
               "--model", "gpt-4o-mini", "--out", "r.jsonl", "--trace", "t.jsonl", "--batch", "--batch-poll", "0.01",
               "--structured", "json_schema", "--budget", "10")
    assert code == 0, capsys.readouterr().err
    usage = json.loads(Path("t.jsonl").read_text().splitlines()[-1])["judges"]["llm"]
    price = price_of("gpt-4o-mini", None, batch=True)
    assert usage["http_requests"] == 0 and usage["calls"] > 0
    assert usage["cost_usd"] == pytest.approx(price.cost(usage["prompt_tokens"], usage["cached_tokens"],
                                                         usage["completion_tokens"]))
