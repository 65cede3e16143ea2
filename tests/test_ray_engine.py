"""`gsr run --engine ray` against a local Ray instance (2 CPUs) and the fake OpenAI-compatible server.

One Ray session serves the whole module (Ray takes seconds to start on 2 cores) and is shut
down at its end. The three Ray tests: results and trace equal to the local engine's; an
actor killed mid-block (its block is retried by Ray, nothing lost or duplicated, nothing
stored bought again); a driver killed mid-run and started again (finished blocks are not
redone, stored judgments are not bought again, the same results file byte for byte).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gsrlang.judges.llm.cache import JudgmentCache

ray = pytest.importorskip("ray")

from gsrlang.cli import main  # noqa: E402

try:
    from fakeserver import FakeOpenAI
    from test_llm_run import HELPSTEER, KEY, _request_key, fake_model, read_jsonl, write_jsonl
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI
    from tests.test_llm_run import HELPSTEER, KEY, _request_key, fake_model, read_jsonl, write_jsonl

CRITERIA = 5  # model calls per item of the HelpSteer2 program


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_", "RAY_ADDRESS")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def _own(out: str) -> str:
    """gsr's output, less the lines Ray's processes print to the driver (`(raylet) ...`, `(pid=...) ...`)."""
    return "\n".join(line for line in out.splitlines() if not re.match(r"(\x1b\[[0-9;]*m)?\(", line))


def _items(n: int, bad_row_at: int | None = None) -> list:
    rows = [{"id": f"i{i:03d}", "input": f"Question {i}?", "response": ("GOOD " if i % 3 else "BAD ") + f"answer {i}",
             "score": (i % 5) / 1.0} for i in range(n)]
    if bad_row_at is not None:
        rows[bad_row_at] = {"id": "broken", "input": "no response column"}
    return rows


def _cmd(data: Path, out: Path, cache: Path, *extra) -> list[str]:
    # full judging (--no-short-circuit): the call counts below are every criterion's
    return ["run", str(HELPSTEER), "--no-short-circuit", "--data", str(data), "--mode", "pointwise", "--id-field", "id",
            "--model", "fake-judge", "--out", str(out), "--cache", str(cache), "--concurrency", "4", "--no-progress",
            *map(str, extra)]


def _stored(cache: Path) -> set[str]:
    with sqlite3.connect(cache) as conn:
        return {k for (k,) in conn.execute("SELECT key FROM judgments") if not k.startswith("unit:")}


def _gsr_actors() -> list:
    found = []
    for a in ray.util.list_named_actors(all_namespaces=True):
        if "-actor-" in a["name"]:
            try:
                found.append(ray.get_actor(a["name"], namespace=a["namespace"]))
            except ValueError:  # it died since it was listed
                pass
    return found


def _item_records(path: Path) -> list[dict]:
    """Trace item records without what a call's cost and timing change (a cached answer costs no tokens)."""
    from gsrlang.trace.read import read_trace

    out = []
    for _, record in read_trace(path):
        for node in record["nodes"]:
            for j in node.get("judgments") or ():
                for key in ("latency_s", "cached", "tokens", "attempts"):
                    j["provenance"].pop(key, None)
        out.append(record)
    return out


def test_ray_results_and_trace_equal_the_local_engines(ray_session, tmp_path, monkeypatch, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", _items(23, bad_row_at=5))
    with FakeOpenAI(responder=fake_model) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        local = tmp_path / "local.jsonl"
        assert main(_cmd(data, local, tmp_path / "a.sqlite", "--label-field", "score", "--trace",
                         tmp_path / "local.trace.jsonl", "--seed", 7)) == 1  # the bad row fails
        local_io = capsys.readouterr().out
        distributed = tmp_path / "ray.jsonl"
        assert main(_cmd(data, distributed, tmp_path / "b.sqlite", "--label-field", "score", "--trace",
                         tmp_path / "ray.trace.jsonl", "--seed", 7, "--engine", "ray", "--actors", 2,
                         "--block-size", 4, "--ray-address", ray_session)) == 1
        ray_io = capsys.readouterr().out
        stored = len(JudgmentCache(tmp_path / "b.sqlite"))
        parquet = tmp_path / "ray.parquet"
        assert main(_cmd(data, parquet, tmp_path / "b.sqlite", "--label-field", "score", "--seed", 7,
                         "--engine", "ray", "--block-size", 10)) == 1
        capsys.readouterr()
    assert distributed.read_bytes() == local.read_bytes()
    results = read_jsonl(distributed)
    assert [r["id"] for r in results] == [f"i{i:03d}" if i != 5 else "broken" for i in range(23)]
    assert [r["status"] for r in results].count("failed") == 1
    assert _item_records(tmp_path / "ray.trace.jsonl") == _item_records(tmp_path / "local.trace.jsonl")
    summary = read_jsonl(tmp_path / "ray.trace.jsonl")[-1]
    assert summary["kind"] == "run_summary" and summary["engine"]["blocks"] == 6
    assert summary["judges"]["llm"]["calls"] == 22 * CRITERIA  # the actors' usage, summed
    local_summary = read_jsonl(tmp_path / "local.trace.jsonl")[-1]  # by criterion, in program order
    assert list(summary["judges"]["llm"]["by_criterion"]) == list(local_summary["judges"]["llm"]["by_criterion"])
    # every answer bought is in the driver's cache: the actors' puts are stored before their blocks count
    # as done (the cache server is killed at the end of the run, with whatever it had not yet stored)
    assert stored == len(JudgmentCache(tmp_path / "a.sqlite")) > 0  # as many as the local run stored
    # the same counts and agreement report (Ray may print lines of its own to the driver's stdout)
    assert _own(ray_io).split(" in ")[0] == _own(local_io).split(" in ")[0]
    assert local_io[local_io.index("agreement"):local_io.index("model judges")] == \
        ray_io[ray_io.index("agreement"):ray_io.index("model judges")]
    # the Parquet output holds the same results
    import pyarrow.parquet as pq

    rows = pq.read_table(parquet).to_pylist()
    for row, line in zip(rows, read_jsonl(local), strict=True):
        # a Parquet struct has every field of its schema: the program's path is null for a one-program run
        row["program"] = {k: v for k, v in row["program"].items() if k in line["program"]}
        assert {k: (json.loads(v) if k == "sink" and v is not None else v) for k, v in row.items()
                if v is not None or k in line} == {k: v for k, v in line.items()}
    assert not list(tmp_path.glob("*.gsr-ray"))  # the work directories are gone once the runs complete


def test_ray_actors_take_the_planners_column_path(ray_session, tmp_path, monkeypatch, capsys):
    """A program of human fields: the actors evaluate their blocks on the path the planner chooses from the job's
    config (by columns; item by item with GSR_COLUMNAR_RUN=0), and both write the local engine's bytes."""
    from gsrlang.execution import runs

    root = Path(__file__).resolve().parents[1] / "examples" / "topical_chat"
    cmd = ["run", str(root / "flat.gsr"), "--data", str(root / "data" / "dev.jsonl"), "--input-field", "context",
           "--reference-field", "fact", "--id-field", "id", "--label-field", "scores.overall", "--limit", "30",
           "--no-progress", "-q"]
    taken = []
    real = runs.run_route
    monkeypatch.setattr(runs, "run_route", lambda *a, **k: taken.append(real(*a, **k).evaluate) or real(*a, **k))
    assert main([*cmd, "--out", str(tmp_path / "local.jsonl"), "--trace", str(tmp_path / "local.t.jsonl")]) == 0
    outs = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("GSR_COLUMNAR_RUN", flag)
        out = tmp_path / f"ray{flag}.jsonl"
        assert main([*cmd, "--out", str(out), "--trace", str(tmp_path / f"ray{flag}.t.jsonl"), "--engine", "ray",
                     "--actors", "2", "--block-size", "7", "--ray-address", ray_session]) == 0
        outs[flag] = out.read_bytes()
        assert _item_records(tmp_path / f"ray{flag}.t.jsonl") == _item_records(tmp_path / "local.t.jsonl")
    capsys.readouterr()
    assert outs["1"] == outs["0"] == (tmp_path / "local.jsonl").read_bytes()
    assert taken == ["columns"]  # the local run's (the actors decide in their own processes, from the job)


@pytest.mark.slow  # kill and resume: the slow tier
def test_an_actor_killed_mid_block_has_its_block_retried(ray_session, tmp_path, monkeypatch, capsys):
    n = 40
    data = write_jsonl(tmp_path / "items.jsonl", _items(n))
    with FakeOpenAI(responder=fake_model, latency=0.05) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        ref = tmp_path / "ref.jsonl"
        assert main(_cmd(data, ref, tmp_path / "ref.sqlite")) == 0
        server.reset()
        _wait_for_no_actors()  # the earlier runs' actors are gone (killing is asynchronous)
        out, cache = tmp_path / "out.jsonl", tmp_path / "run.sqlite"
        status = {}
        driver = threading.Thread(target=lambda: status.update(code=main(_cmd(
            data, out, cache, "--engine", "ray", "--actors", 2, "--block-size", 10))))
        driver.start()
        deadline = time.monotonic() + 120
        while len(server.requests) < 30 and time.monotonic() < deadline:
            time.sleep(0.01)
        actors = _gsr_actors()
        assert len(actors) == 2
        victim = actors[0]
        pid = ray.get(victim.pid.remote(), timeout=30)
        asked_before_kill = len(server.requests)
        os.kill(pid, signal.SIGKILL)
        driver.join(timeout=240)
        assert not driver.is_alive()
        keys = _keys(server.requests, server.base_url)
    capsys.readouterr()
    assert status["code"] == 0
    assert 0 < asked_before_kill < n * CRITERIA  # killed mid-run
    assert out.read_bytes() == ref.read_bytes()  # no item lost or duplicated, in input order
    # bought at most once, but for the calls in flight in the killed actor (answered, never stored)
    assert len(set(keys)) == n * CRITERIA
    assert len(keys) - len(set(keys)) <= 4 + 1


def _keys(requests, base_url: str) -> list[str]:
    """The cache keys of the judge requests (not the empty body of a request cut short by a kill)."""
    return [_request_key(body, base_url) for body in requests if "model" in body]


def _wait_for_no_actors(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _gsr_actors() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _gsr_actors(), "the killed driver's actors outlived it"


@pytest.mark.slow  # kill and resume: the slow tier
def test_a_killed_driver_resumes_without_redoing_blocks_or_buying_judgments_again(ray_session, tmp_path,
                                                                                   monkeypatch, capsys):
    n = 48
    data = write_jsonl(tmp_path / "items.jsonl", _items(n))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSR_", "OPENAI_"))}
    with FakeOpenAI(responder=fake_model, latency=0.05) as server:
        env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        ref = tmp_path / "ref.jsonl"
        assert main(_cmd(data, ref, tmp_path / "ref.sqlite", "--trace", tmp_path / "ref.trace.jsonl")) == 0
        capsys.readouterr()
        needed = n * CRITERIA
        server.reset()

        out, cache, trace = tmp_path / "out.jsonl", tmp_path / "run.sqlite", tmp_path / "trace.jsonl"
        work = Path(str(out) + ".gsr-ray")
        cmd = [sys.executable, "-m", "gsrlang.cli", *_cmd(data, out, cache, "--trace", trace, "--engine", "ray",
                                                          "--actors", 2, "--block-size", 6,
                                                          "--ray-address", ray_session)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while len(list(work.glob("*.done.json"))) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
        _wait_for_no_actors()  # Ray ends a dead driver's actors; none may still be asking the server
        done_before = {p.name for p in work.glob("*.done.json")}
        stored = _stored(cache)
        assert 2 <= len(done_before) < n / 6 and 0 < len(stored) < needed
        first = len(server.requests)

        resumed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        assert resumed.returncode == 0, resumed.stderr
        again = _keys(server.requests[first:], server.base_url)
        assert not server.errors, server.errors[0]

    assert out.read_bytes() == ref.read_bytes()  # nothing lost or duplicated
    assert _item_records(trace) == _item_records(tmp_path / "ref.trace.jsonl")
    summary = read_jsonl(trace)[-1]
    assert summary["engine"]["blocks_resumed"] == len(done_before)  # finished blocks were not run again
    assert not set(again) & stored  # nothing stored was bought again
    assert len(set(again)) == needed - len(stored)  # exactly what was missing (an HTTP retry may repeat one)
    assert not work.exists()


def _project(root: Path) -> dict[str, bytes]:
    """A project folder as a user has it (a git folder, the program, the data, notes), by relative path."""
    tc = Path(__file__).resolve().parents[1] / "examples" / "topical_chat"
    files = {".git/HEAD": b"ref: refs/heads/main\n", ".git/config": b"[core]\n", "overall.gsr": (tc / "overall.gsr").read_bytes(),
             "dev.jsonl": b"".join((tc / "data" / "dev.jsonl").read_bytes().splitlines(keepends=True)[:30]),
             "notes.txt": b"mine\n",
             # named like gsr's own block files, but not in a folder gsr made: never gsr's to remove
             "block-000000.results.jsonl": b"{}\n", "run.json": b"{}\n"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


TC_COLUMNS = ["--input-field", "context", "--reference-field", "fact", "--id-field", "id", "--label-field",
              "scores.overall", "--no-progress", "-q", "--engine", "ray", "--block-size", "7"]


def test_work_dir_dot_leaves_the_project_folder_as_it_was(ray_session, tmp_path, monkeypatch, capsys):
    # issue 24 item 1: `--work-dir .` removed the whole project folder (.git, program, data, outputs), exit 0
    project = tmp_path / "project"
    project.mkdir()
    files = _project(project)
    monkeypatch.chdir(project)
    assert main(["run", "overall.gsr", "--data", "dev.jsonl", *TC_COLUMNS, "--ray-address", ray_session,
                 "--work-dir", ".", "--out", "o.jsonl", "--trace", "t.jsonl"]) == 0
    capsys.readouterr()
    for rel, data in files.items():
        assert (project / rel).read_bytes() == data, rel
    assert len(read_jsonl(project / "o.jsonl")) == 30 and read_jsonl(project / "t.jsonl")[-1]["kind"] == "run_summary"
    # gsr's own subfolder (o.jsonl.gsr-ray) came and went; nothing else was added or removed
    assert sorted(p.name for p in project.iterdir()) == sorted({*(r.split("/")[0] for r in files), "o.jsonl", "t.jsonl"})


def test_a_work_folder_keeps_what_gsr_did_not_write(ray_session, tmp_path, monkeypatch, capsys):
    # a resumable work folder that also holds a file of the user's: the run ends, gsr removes its block files
    # and its run.json, and leaves the folder with the user's file in it
    files = _project(tmp_path)
    args = ["run", "overall.gsr", "--data", "dev.jsonl", *TC_COLUMNS, "--ray-address", ray_session,
            "--out", "o.jsonl"]
    monkeypatch.chdir(tmp_path)
    from gsrlang.execution.engines import ray_engine

    real = ray_engine._Run._merge

    def merge_after_a_user_file(self, wall_s):
        (self.work / "keep.txt").write_text("the user's")
        (self.work / "block-000999.results.jsonl").write_text("not one of this run's blocks")
        return real(self, wall_s)

    monkeypatch.setattr(ray_engine._Run, "_merge", merge_after_a_user_file)
    assert main(args) == 0
    capsys.readouterr()
    work = tmp_path / "o.jsonl.gsr-ray"
    assert sorted(p.name for p in work.iterdir()) == ["block-000999.results.jsonl", "keep.txt"]
    assert all((tmp_path / rel).read_bytes() == data for rel, data in files.items())
