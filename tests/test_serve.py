"""`gsr serve`: the reward server over real HTTP (uvicorn on 127.0.0.1, a free port), judging with the fake
OpenAI-compatible server; its rewards against the in-process `gsrlang.reward_function` on the same items."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import gsrlang
from gsrlang.cli import main
from gsrlang.trace.read import read_trace

from fakeserver import FakeOpenAI
from servehelp import MODEL_PROGRAM, RULES_PROGRAM, model_answer, no_model_settings, save, serving, wait_for  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def fake():
    with FakeOpenAI(responder=model_answer) as s:
        yield s


@pytest.fixture
def model_program(tmp_path) -> Path:
    path = tmp_path / "served.gsr"
    path.write_text(MODEL_PROGRAM, encoding="utf-8")
    return path


@pytest.fixture
def rules_program(tmp_path) -> Path:
    path = tmp_path / "rules.gsr"
    path.write_text(RULES_PROGRAM, encoding="utf-8")
    return path


def model_args(fake, *more):
    return ("--model", "judge", "--base-url", fake.base_url, "--api-key", "k", "--no-cache", *more)


def in_process(program, fake, responses, prompt="Say something."):
    """The in-process reward function's rewards for the same items (its own judges: no shared cache)."""
    with gsrlang.Judges(model="judge", base_url=fake.base_url, api_key="k") as judges:
        reward = gsrlang.reward_function(str(program), judges)
        return reward(prompts=[prompt] * len(responses), completions=list(responses))


RESPONSES = [f"answer q={q} with some words" for q in (1, 2, 3, 4, 5, 2, 4, 1)]


# ---- the routes --------------------------------------------------------------------------------------------
def test_score_gives_the_in_process_rewards_and_names_the_program(fake, model_program):
    expected = in_process(model_program, fake, RESPONSES)
    with serving(model_program, *model_args(fake)) as s:
        status, answer = s.post("/score", {"items": [{"input": "Say something.", "response": r} for r in RESPONSES],
                                           "step": 7})
        one_status, one = s.post("/score", {"input": "Say something.", "response": RESPONSES[3]})
    assert status == 200 and answer["rewards"] == expected
    assert len(set(expected)) > 3  # the fake model's answers vary with the response
    program = gsrlang.load(model_program)
    assert answer["program"] == {"name": "served", "hash": program.hash}
    assert [r["id"] for r in answer["results"]] == [f"7/r1/{i}" for i in range(8)]
    assert all(r["status"] == "ok" for r in answer["results"]) and answer["unfinished"] == []
    assert one_status == 200 and one["rewards"] == [expected[3]]


def test_score_takes_conversations_and_native_scale(fake, model_program):
    with serving(model_program, *model_args(fake)) as s:
        status, answer = s.post("/score", {"items": [{"input": [{"role": "user", "content": "Hi"}],
                                                      "response": [{"role": "assistant", "content": "q=5 yes"}]}],
                                           "scale": "native"})
    assert status == 200 and answer["rewards"] == [answer["results"][0]["raw"]] and answer["rewards"][0] == 5.0


def test_compare_judges_pairs(fake, model_program):
    with serving(model_program, *model_args(fake)) as s:
        status, answer = s.post("/compare", {"pairs": [{"input": "q", "responses": ["q=5 a", "q=1 b"]},
                                                       {"input": "q", "responses": ["q=1 a", "q=4 b"]},
                                                       {"input": "q", "responses": ["q=3 a", "q=3 b"]}]})
    assert status == 200 and answer["winners"] == ["first", "second", "tie"]
    assert answer["values"][0] > 0.5 > answer["values"][1]


def test_a_group_of_8_raw_rank_and_zscore(fake, model_program):
    import statistics

    expected = in_process(model_program, fake, RESPONSES)
    with serving(model_program, *model_args(fake)) as s:
        got = {}
        for how in ("raw", "rank", "zscore"):
            status, got[how] = s.post("/group", {"input": "Say something.", "responses": RESPONSES,
                                                 "normalize": how})
            assert status == 200, got[how]
    assert got["raw"]["rewards"] == expected
    # rank: the order of the raw rewards, scaled to [0, 1], ties sharing their average rank
    # (q = 1, 2, 3, 4, 5, 2, 4, 1: the two q=1 share ranks 0 and 1, and so on)
    assert got["rank"]["rewards"] == pytest.approx([r / 7 for r in (0.5, 2.5, 4, 5.5, 7, 2.5, 5.5, 0.5)])
    mean, sd = statistics.mean(expected), statistics.stdev(expected)
    assert got["zscore"]["rewards"] == pytest.approx([(x - mean) / sd for x in expected])
    assert got["zscore"]["raw"] == expected


def test_a_pairwise_group_is_a_round_robin(fake, model_program):
    with serving(model_program, *model_args(fake)) as s:
        status, answer = s.post("/group", {"input": "q", "responses": RESPONSES, "by": "pairwise"})
        both_status, both = s.post("/group", {"input": "q", "responses": RESPONSES[:4], "by": "pairwise",
                                              "both_orders": True, "normalize": "rank"})
    assert status == 200 and len(answer["results"]) == 28  # 8 * 7 / 2 pairs
    points = [0.0] * 8
    for r in answer["results"]:
        a, b = r["pair"]
        points[a] += {"first": 1.0, "second": 0.0, "tie": 0.5}[r["winner"]]
        points[b] += {"first": 0.0, "second": 1.0, "tie": 0.5}[r["winner"]]
    assert answer["rewards"] == pytest.approx([p / 7 for p in points])
    assert answer["rewards"][4] == 1.0  # q=5 wins every game
    assert both_status == 200 and len(both["results"]) == 12 and both["rewards"][3] == 1.0


def test_several_groups_in_one_request(rules_program):
    with serving(rules_program) as s:
        status, answer = s.post("/group", {"groups": [{"input": "a", "responses": ["x", "one two three four"]},
                                                      {"input": "b", "responses": ["thanks a lot you all", "no"]}],
                                           "normalize": "rank"})
    assert status == 200 and answer["rewards"] == [0.0, 1.0, 1.0, 0.0]
    assert [g["raw"] for g in answer["groups"]] == [[0.0, 2 / 3], [1.0, 0.0]]


def test_openrlhf_request_and_response_shapes(fake, model_program):
    """OpenRLHF's remote reward model: it posts {"query", "prompts", "labels"} (the query is the prompt and the
    response decoded together) and reads `rewards` (and `scores`, `extra_logs`) from the answer."""
    expected = in_process(model_program, fake, ["q=4 fine", "q=2 meh"], prompt="<|im_start|>user\nHi<|im_end|>")
    with serving(model_program, *model_args(fake)) as s:
        prompt = "<|im_start|>user\nHi<|im_end|>"
        body = {"query": [prompt + "q=4 fine<|im_end|>", prompt + "q=2 meh<|endoftext|>"],
                "prompts": [prompt, prompt], "labels": ["", None]}
        status, answer = s.post("/openrlhf", body)
        alias_status, alias = s.post("/get_reward", body)
    assert status == 200 and answer["rewards"] == expected == answer["scores"]
    assert answer["extra_logs"] == {"gsr_ok": [1.0, 1.0]} and alias_status == 200 and alias["rewards"] == expected
    prompts = [r["messages"][-1]["content"] for r in fake.requests]
    assert not any("<|im_end|>\n<<<END RESPONSE" in p for p in prompts)  # the end marker was taken off


def test_healthz_and_metrics(fake, model_program):
    with serving(model_program, *model_args(fake)) as s:
        s.post("/score", {"items": [{"input": "q", "response": r} for r in RESPONSES[:3]]})
        s.post("/score", {"items": [{"input": "q", "response": 3}]})
        status, health = s.get("/healthz")
        mstatus, text = s.get("/metrics")
        calls = s.engine.judges.usage()["llm"]["calls"]
    assert status == 200 and health["status"] == "ok" and health["program"]["name"] == "served"
    assert mstatus == 200
    lines = text.splitlines()
    assert 'gsr_requests_total{code="200",route="score"} 1.0' in lines
    assert 'gsr_requests_total{code="400",route="score"} 1.0' in lines
    assert any(line.startswith('gsr_request_latency_seconds{quantile="0.99",route="score"}') for line in lines)
    assert 'gsr_rewards_total{status="ok"} 3.0' in lines
    assert f'gsr_judge_calls_total{{judge="llm"}} {float(calls)}' in lines and calls == 6
    assert any(line.startswith('gsr_judge_tokens_total{judge="llm",kind="prompt"}') for line in lines)
    assert 'gsr_judge_cache_hits_total{judge="llm"} 0.0' in lines


def test_metrics_count_the_dollars_spent(model_program):
    with FakeOpenAI(responder=model_answer) as fake:  # a model with a published price
        with serving(model_program, "--model", "gpt-4o-mini", "--base-url", fake.base_url, "--api-key", "k",
                     "--no-cache") as s:
            s.post("/score", {"items": [{"input": "q", "response": "q=3"}]})
            spent = s.engine.judges.usage()["llm"]["cost_usd"]
            text = s.get("/metrics")[1]
    assert spent > 0 and f'gsr_judge_spend_usd_total{{judge="llm"}} {spent}' in text.splitlines()


# ---- judging -----------------------------------------------------------------------------------------------
def test_concurrent_clients_each_get_their_own_rewards(fake, model_program):
    expected = dict(zip(RESPONSES, in_process(model_program, fake, RESPONSES)))
    with serving(model_program, *model_args(fake)) as s:
        answers: dict = {}
        barrier = threading.Barrier(8)

        def client(k: int):
            mine = [RESPONSES[(k + i) % 8] for i in range(5)]
            barrier.wait()
            for _ in range(3):
                status, answer = s.post("/score", {"items": [{"input": "Say something.", "response": r}
                                                             for r in mine]})
                answers.setdefault(k, []).append((status, mine, answer["rewards"]))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        usage = s.engine.judges.usage()["llm"]
    assert len(answers) == 8 and all(len(v) == 3 for v in answers.values())
    for runs in answers.values():
        for status, mine, rewards in runs:
            assert status == 200 and rewards == [expected[r] for r in mine]
    # 120 items, 2 criteria each, through the one set of judges: each call sent, or merged into an identical
    # one in flight (how many are merged depends on timing: the batch-and-merge test below pins it)
    assert usage["calls"] == 240 and usage["http_requests"] + usage["merged"] == 240


def test_concurrent_requests_are_judged_in_one_batch_and_merged(fake, model_program):
    """Two requests submitted in the same moment land in one micro-batch, and their identical judge calls
    are made once (merged in flight)."""
    from gsrlang.serve.engine import Engine
    from gsrlang.serve.metrics import Metrics

    program = gsrlang.load(model_program)
    # room for all 12 calls at once: a call waiting for a free slot could start after its twin has finished
    with gsrlang.Judges(model="judge", base_url=fake.base_url, api_key="k", concurrency=16) as judges:
        metrics = Metrics(lambda: (("served", program.hash), 0, judges.usage()))
        engine = Engine(program, judges, metrics=metrics)

        async def go():
            await engine.start()
            items = [program.item("q", f"q={q} x", id=str(q))[1] for q in (1, 2, 3)]
            a, b = await asyncio.gather(engine.run(engine.current, "pointwise", items, None),
                                        engine.run(engine.current, "pointwise", items, None))
            await engine.stop()
            return a, b

        a, b = asyncio.run(go())
        assert [r.value for r in a] == [r.value for r in b]
        text = metrics.text().decode()
        assert "gsr_batch_items_count 1.0" in text and "gsr_batch_items_sum 6.0" in text
        assert len(fake.requests) == 6 and judges.usage()["llm"]["merged"] == 6


def test_a_deadline_that_passes(model_program, tmp_path):
    # the slow item's calls are held until both requests have been answered, so the deadline (generous for
    # the fast items on a loaded machine) always passes with exactly that item unfinished
    release = threading.Event()
    def slow(body):
        if "q=1" not in body["messages"][-1]["content"]:
            release.wait(60)
        return 0.0
    with FakeOpenAI(responder=model_answer, latency=slow) as fake:
        with serving(model_program, *model_args(fake, "--trace", str(tmp_path / "t.jsonl"))) as s:
            items = [{"input": "q", "response": r} for r in ("q=1 fast", "q=2 slow", "q=1 fast too")]
            status, failed = s.post("/score", {"items": items, "deadline_s": 3, "id": "late"})
            dstatus, defaulted = s.post("/score", {"items": items, "deadline_s": 3, "on_deadline": "default",
                                                   "default_reward": -1.0})
            release.set()
            wait_for(lambda: s.engine.in_flight == 0, "the slow items to finish")
    assert status == 504
    assert failed["error"]["field"] == "deadline_s" and "1 of 3 items unfinished: late/1" in failed["error"]["message"]
    assert failed["error"]["unfinished"] == [{"index": 1, "id": "late/1"}]
    assert dstatus == 200 and defaulted["rewards"][1] == -1.0 and defaulted["rewards"][0] == defaulted["rewards"][2]
    assert defaulted["results"][1]["status"] == "unfinished" and defaulted["unfinished"][0]["index"] == 1
    # the unfinished items were not abandoned: they finished, and their records are in the trace
    ids = [r["item"]["id"] for _, r in read_trace(tmp_path / "t.jsonl")]
    assert "late/1" in ids and len(ids) == 6


def test_failures_get_the_failure_value(model_program):
    with FakeOpenAI(responder=lambda body: "not json at all") as fake:
        with serving(model_program, *model_args(fake, "--max-reasks", "0", "--max-retries", "0")) as s:
            status, answer = s.post("/score", {"items": [{"input": "q", "response": "x"}]})
            nstatus, none = s.post("/score", {"items": [{"input": "q", "response": "x"}], "failure_value": None})
    assert status == 200 and answer["rewards"] == [0.0] and answer["results"][0]["status"] == "invalid"
    assert answer["results"][0]["reason"]
    assert nstatus == 200 and none["rewards"] == [None]


# ---- bad requests and security -----------------------------------------------------------------------------
@pytest.mark.parametrize("body, field, words", [
    (b"{not json", None, "not JSON"),
    (b"[1, 2]", None, "must be a JSON object"),
    (json.dumps({"itemz": []}).encode(), "itemz", "unknown field"),
    (json.dumps({"items": {}}).encode(), "items", "must be an array"),
    (json.dumps({"items": [{"input": "q", "response": 3}]}).encode(), "items[0].response", "must be a string"),
    (json.dumps({"items": [{"input": "q"}]}).encode(), "items[0].response", "1 response, got 0"),
    (json.dumps({"items": [{"input": "q", "response": "r", "path": "/etc/passwd"}]}).encode(), "items[0].path",
     "unknown field"),
    (json.dumps({"items": [], "trace": "x.jsonl"}).encode(), "trace", "unknown field"),
    (json.dumps({"items": [], "deadline_s": -1}).encode(), "deadline_s", "greater than 0"),
    (json.dumps({"items": [], "on_deadline": "wait"}).encode(), "on_deadline", "must be one of"),
    (json.dumps({"items": [], "step": "300"}).encode(), "step", "non-negative integer"),
])
def test_a_bad_body_gets_400_naming_the_field(rules_program, body, field, words):
    with serving(rules_program) as s:
        status, answer = s.post("/score", raw=body)
    assert status == 400 and answer["error"]["field"] == field and words in answer["error"]["message"]
    assert answer["program"]["name"] == "rules"


def test_bad_group_and_compare_bodies(rules_program):
    with serving(rules_program) as s:
        cases = [s.post("/group", {"input": "q", "responses": []}),
                 s.post("/group", {"input": "q", "responses": ["a"], "normalize": "softmax"}),
                 s.post("/group", {"groups": [{"responses": ["a"], "nope": 1}]}),
                 s.post("/compare", {"pairs": [{"responses": ["only one"]}]}),
                 s.post("/openrlhf", {"query": ["a", "b"], "prompts": ["a"]}),
                 s.post("/openrlhf", {"query": [1]})]
        missing = s.get("/nope")
    fields = [answer["error"]["field"] for _, answer in cases]
    assert [status for status, _ in cases] == [400] * 6
    assert fields == ["responses", "normalize", "groups[0].nope", "pairs[0].responses", "prompts", "query[0]"]
    assert missing[0] == 404 and "no such route" in missing[1]["error"]["message"]


def test_an_oversized_body_gets_413(rules_program):
    with serving(rules_program, "--max-body-mb", "0.01") as s:  # 10,485 bytes
        big = {"items": [{"input": "q", "response": "word " * 4000}]}
        status, answer = s.post("/score", big)
        # no Content-Length: the body is counted as it arrives
        conn = http.client.HTTPConnection(s.host, s.port, timeout=30)
        conn.request("POST", "/score", body=iter([b'{"items": [{"response": "', b"x" * 20000, b'"}]}']),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        chunked = conn.getresponse()
        chunked_answer = json.loads(chunked.read())
        conn.close()
        ok, _ = s.post("/score", {"items": [{"input": "q", "response": "small"}]})
    assert status == 413 and "at most 10485" in answer["error"]["message"]
    assert chunked.status == 413 and "larger than 10485" in chunked_answer["error"]["message"]
    assert ok == 200


def test_a_wrong_token_gets_401(rules_program, monkeypatch):
    monkeypatch.setenv("REWARD_TOKEN", "s3cret-token")
    with serving(rules_program, "--token-env", "REWARD_TOKEN") as s:
        body = {"items": [{"input": "q", "response": "thanks"}]}
        none = s.post("/score", body)
        wrong = s.post("/score", body, headers={"Authorization": "Bearer s3cret-tokeN"})
        right = s.post("/score", body, headers={"Authorization": "Bearer s3cret-token"})
        metrics = s.get("/metrics")
        health = s.get("/healthz")
    assert none[0] == 401 and wrong[0] == 401 and "token" in wrong[1]["error"]["message"]
    assert right[0] == 200 and metrics[0] == 401 and health[0] == 200


def test_another_host_needs_a_token(rules_program, capsys, monkeypatch):
    assert main(["serve", str(rules_program), "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "not a loopback address" in capsys.readouterr().err
    assert main(["serve", str(rules_program), "--host", "0.0.0.0", "--token-env", "NOT_SET_HERE"]) == 2
    assert "NOT_SET_HERE: that environment variable is not set" in capsys.readouterr().err


def test_the_command_refuses_bad_options(rules_program, tmp_path, capsys):
    assert main(["serve", str(rules_program), "--trace", str(rules_program)]) == 2
    assert "refusing to overwrite an input" in capsys.readouterr().err
    assert main(["serve", str(rules_program), "--trace", str(tmp_path / "no" / "t.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["serve", str(rules_program), "--deadline", "0"]) == 2
    broken = tmp_path / "broken.gsr"
    broken.write_text("rubric r \"r\"\ntask pointwise { scale = 1..5 }\nsink normalize(missing)\n", encoding="utf-8")
    assert main(["serve", str(broken)]) == 1
    assert "GSR101" in capsys.readouterr().err


def test_no_request_reads_or_writes_a_file(rules_program, tmp_path):
    before = sorted(p.name for p in tmp_path.iterdir())
    with serving(rules_program) as s:
        for body in ({"items": [{"input": "../../etc/passwd", "response": "/etc/shadow",
                                 "record": {"file": "/etc/passwd", "trace": "x.jsonl"}}]},
                     {"input": "q", "responses": ["a", "b"], "normalize": "raw"}):
            assert s.post("/score" if "items" in body else "/group", body)[0] == 200
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# ---- reload ------------------------------------------------------------------------------------------------
def test_reload_refuses_a_broken_program_and_keeps_serving(rules_program, caplog):
    caplog.set_level(logging.INFO, logger="gsrlang.serve")
    old = gsrlang.load(rules_program).hash
    with serving(rules_program, "--watch", "--watch-interval", "0.05") as s:
        body = {"items": [{"input": "q", "response": "one two three four thanks"}]}
        assert s.post("/score", body)[1]["program"]["hash"] == old
        save(rules_program, RULES_PROGRAM.replace("sink total", "sink normalize(missing)"))
        wait_for(lambda: "is refused" in caplog.text, "the refusal")
        status, answer = s.post("/score", body)
        assert status == 200 and answer["program"]["hash"] == old and answer["rewards"] == [1.0]
        assert "GSR101" in caplog.text
        save(rules_program, RULES_PROGRAM.replace("weights: [2, 1]", "weights: [1, 3]"))
        new = wait_for(lambda: (h := s.post("/score", body)[1]["program"]["hash"]) != old and h, "the reload")
        status, answer = s.post("/score", body)
        metrics = s.get("/metrics")[1]
    assert new == gsrlang.load(rules_program).hash and answer["rewards"] == [1.0]
    assert answer["program"]["hash"] == new
    assert 'gsr_reloads_total{outcome="refused"} 1.0' in metrics and 'gsr_reloads_total{outcome="loaded"} 1.0' in metrics


def test_a_file_caught_half_written_is_read_once_it_settles(rules_program):
    """A program saved in place (truncated, then written) is not checked while it changes: a look that finds
    a new size and time waits for the next look to find the same before reloading."""
    from gsrlang.serve.watch import Watcher

    class Engine:
        def __init__(self):
            self.current = type("Current", (), {"program": gsrlang.load(rules_program)})()
            self.swapped = []

        def swap(self, program):
            self.swapped.append(program)
            self.current.program = program

    engine = Engine()
    watcher = Watcher(str(rules_program), engine, interval=0.0)

    async def looks():
        out = []
        rules_program.write_text("", encoding="utf-8")  # the editor truncated it ...
        out.append(await watcher.look())
        changed = RULES_PROGRAM.replace("weights: [2, 1]", "weights: [1, 3]")
        rules_program.write_text(changed, encoding="utf-8")  # ... and wrote the new version
        os.utime(rules_program, ns=(1, 2))  # a stamp surely unlike the empty file's
        out.append(await watcher.look())
        out.append(await watcher.look())
        out.append(await watcher.look())
        return out

    assert asyncio.run(looks()) == [None, None, True, None]
    assert [p.hash for p in engine.swapped] == [gsrlang.load(rules_program).hash]


# ---- traces ------------------------------------------------------------------------------------------------
def test_replaying_a_served_trace_gives_the_same_rewards(fake, model_program, tmp_path, capsys):
    trace = tmp_path / "rewards.jsonl"
    with serving(model_program, *model_args(fake, "--trace", str(trace))) as s:
        status, answer = s.post("/score", {"items": [{"input": "Say something.", "response": r} for r in RESPONSES],
                                           "step": 300})
        assert status == 200
    calls = len(fake.requests)
    assert main(["replay", str(trace)]) == 0
    assert "every node output, readout and result reproduced exactly" in capsys.readouterr().out
    out = tmp_path / "replayed.jsonl"
    assert main(["replay", str(trace), "--program", str(model_program), "--out", str(out), "-q"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines() if '"kind"' not in x]
    # records are appended as items finish (concurrent judging), so they are matched by id, not by place
    replayed = {line["id"]: line["sink"]["A"] for line in lines}
    assert sorted(replayed) == [f"300/r1/{i}" for i in range(8)] and len(lines) == 8
    assert [replayed[f"300/r1/{i}"] for i in range(8)] == answer["rewards"]
    # the what-if: the rewards step 300 would have had under an edited program, with no model call
    edited = tmp_path / "edited.gsr"
    edited.write_text(MODEL_PROGRAM.replace("weights: [1, 1]", "weights: [3, 1]"), encoding="utf-8")
    whatif = tmp_path / "whatif.jsonl"
    assert main(["replay", str(trace), "--program", str(edited), "--out", str(whatif), "-q"]) == 0
    got = {line["id"]: line["sink"]["A"] for line in map(json.loads, whatif.read_text().splitlines())
           if "kind" not in line}
    got = [got[f"300/r1/{i}"] for i in range(8)]
    assert len(fake.requests) == calls
    with gsrlang.Judges(model="judge", base_url=fake.base_url, api_key="k") as judges:
        want = gsrlang.reward_function(str(edited), judges)(prompts=["Say something."] * 8, completions=RESPONSES)
    assert got == pytest.approx(want) and got != answer["rewards"]
    summary = [r for _, r in read_trace(trace, summaries=True) if r.get("kind") == "run_summary"]
    assert summary[0]["items"] == 8 and summary[0]["judges"]["llm"]["calls"] == 16


def test_the_trace_rotates_by_size_and_every_segment_replays(rules_program, tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    with serving(rules_program, "--trace", str(trace), "--trace-max-mb", "0.004") as s:
        for k in range(6):
            s.post("/score", {"items": [{"input": "q", "response": f"word {i} " * (k + 1)} for i in range(10)]})
    segments = sorted(tmp_path.glob("t*.jsonl"))
    assert len(segments) > 2 and segments[0].name == "t.1.jsonl" and trace in segments
    total = 0
    for segment in segments:
        assert main(["replay", str(segment), "-q"]) == 0, capsys.readouterr().err
        records = [r for _, r in read_trace(segment, summaries=True)]
        assert records[-1]["kind"] == "run_summary"
        total += records[-1]["items"]
    assert total == 60 and "warning" not in capsys.readouterr().err


def test_a_reload_starts_a_new_segment(rules_program, tmp_path):
    trace = tmp_path / "t.jsonl"
    with serving(rules_program, "--trace", str(trace), "--watch", "--watch-interval", "0.05") as s:
        body = {"items": [{"input": "q", "response": "one two three four"}]}
        old = s.post("/score", body)[1]["program"]["hash"]
        save(rules_program, RULES_PROGRAM.replace("weights: [2, 1]", "weights: [1, 1]"))
        wait_for(lambda: s.post("/score", body)[1]["program"]["hash"] != old, "the reload")
        wait_for(lambda: len(list(tmp_path.glob("t*.jsonl"))) == 2, "the second segment")
    first = [r for _, r in read_trace(trace)]
    second = [r for _, r in read_trace(tmp_path / "t.1.jsonl")]
    assert {r["program"]["hash"] for r in first} == {old} and {r["program"]["hash"] for r in second} != {old}


def test_gsr_serve_runs_as_a_command(rules_program, tmp_path):
    """The command itself: it prints where it listens, serves, and stops on SIGTERM (exit 0), its trace closed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "gsrlang.cli", "serve", str(rules_program), "--port", "0",
                             "--trace", str(tmp_path / "t.jsonl")], stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        assert "serving rules" in line, line
        port = int(line.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/score", body=json.dumps({"items": [{"response": "one two three four thanks"}]}))
        answer = json.loads(conn.getresponse().read())
        conn.close()
        assert answer["rewards"] == [1.0]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0
    records = [r for _, r in read_trace(tmp_path / "t.jsonl", summaries=True)]
    assert records[-1]["kind"] == "run_summary" and records[-1]["items"] == 1
