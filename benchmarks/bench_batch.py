"""Batch runs (`gsr run --batch`) against the fake server's Batch API: what is bought, and gsr's own cost.

    python benchmarks/bench_batch.py            # everything (a few minutes on two cores)
    python benchmarks/bench_batch.py --quick    # smaller runs

1. **Requests bought**, per example with gates (60 items, the fake model of the tests,
   which calls a third of the responses unsafe): what a transparent batcher buys (every
   judgment: `--no-short-circuit`), what the online run buys (short-circuit judging), and
   what `--batch` buys, in how many batches (its rounds). The batch run's requests must
   equal the online run's; the price column counts an online request as 1 and a batched
   one as 0.5 (OpenAI's batch discount).
2. **Overhead per judgment**: 10,000 judgments (2,000 items x 5 model criteria of the
   HelpSteer2 example, `--no-short-circuit`) online and with `--batch`, against the fake
   server in its own process (no latency); gsr's CPU time (the `gsr run` child alone,
   os.wait4) less that of a one-item run, per judgment: build, parse, store. Reported as
   the ratio batch / online (the anchor, measured in the same repeat), min / median / max
   of 3 repeats.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

QUICK = "--quick" in sys.argv
EX = ROOT / "examples"
GATED = ["helpsteer2/helpfulness.gsr", "biggen/instance.gsr", "checklist/checklist.gsr", "summeval/relevance.gsr",
         "judges/ensemble.gsr"]

SERVER_CODE = """
import sys
sys.path.insert(0, {tests!r})
from fakeserver import FakeOpenAI
from test_llm_run import fake_model
server = FakeOpenAI(responder=fake_model).start()
server.batch.steps = 1
print(server.base_url, flush=True)
sys.stdin.read()
print(len(server.requests), len(server.batch.lines), flush=True)
server.close()
"""


def rows(n: int) -> list[dict]:
    return [{"id": f"i{k}", "input": f"Question {k}?", "response": ("BAD " if k % 3 == 0 else "GOOD ") + f"answer {k}."}
            for k in range(n)]


def bought(tmp: Path) -> None:
    from fakeserver import FakeOpenAI
    from test_llm_run import fake_model

    from gsrlang.cli import main

    n = 20 if QUICK else 60
    data = tmp / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(n)))
    print(f"1. requests bought, {n} items per example (price: online 1, batched 0.5 per request)")
    print(f"   {'example':28} {'every judgment':>14} {'online':>7} {'batch':>6} {'batches':>8} {'price online':>12} "
          f"{'price batch':>11} {'vs transparent batcher':>22}")
    with FakeOpenAI(responder=fake_model) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-bench"}
        for role in ("FAST", "STRONG"):
            env[f"GSR_ROLE_{role}_BASE_URL"] = server.base_url
            env[f"GSR_ROLE_{role}_API_KEY"] = "sk-bench"
        os.environ.update(env)
        for program in GATED:
            counts = {}
            for name, flags in (("all", ["--no-short-circuit"]), ("online", []),
                                ("batch", ["--batch", "--batch-poll", "0.01"])):
                server.reset()
                server.batch.lines.clear()
                server.batch.order.clear()
                folder = tmp / program.replace("/", "_") / name
                extra = ["--judge-config", str(EX / "judges" / "gsr.toml")] if "judges/" in program else []
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    code = main(["run", str(EX / program), "--data", str(data), "--mode", "pointwise", "--id-field", "id",
                                 "--model", "fake-judge", "--out", str(folder / "r.jsonl"), "--cache",
                                 str(folder / "c.sqlite"), "--structured", "json_schema", "-q", "--no-progress",
                                 *extra, *flags])
                assert code in (0, 1), (program, name, code)
                counts[name] = (len(server.requests), len(server.batch.lines), len(server.batch.order))
            every, online = counts["all"][0], counts["online"][0]
            b_online, b_lines, b_batches = counts["batch"]
            assert b_online == 0 and b_lines == online, (program, counts)
            price_batch = 0.5 * b_lines
            print(f"   {program:28} {every:>14} {online:>7} {b_lines:>6} {b_batches:>8} {online:>12.1f} "
                  f"{price_batch:>11.1f} {price_batch / (0.5 * every):>21.2f}x")
        for k in env:
            os.environ.pop(k, None)


def cpu_of(cmd: list[str], env: dict) -> float:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd[3:6])} failed: {proc.stderr.read().decode()[-500:]}")
    return usage.ru_utime + usage.ru_stime


def overhead(tmp: Path) -> None:
    items = 400 if QUICK else 2000
    judgments = items * 5
    data, one = tmp / "many.jsonl", tmp / "one.jsonl"
    data.write_text("".join(json.dumps({**r, "response": "GOOD " + r["response"]}) + "\n" for r in rows(items)))
    one.write_text(json.dumps({**rows(1)[0], "response": "GOOD answer."}) + "\n")
    server = subprocess.Popen([sys.executable, "-c", SERVER_CODE.format(tests=str(ROOT / "tests"))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base_url = server.stdout.readline().strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GSR_", "OPENAI_"))}
    env.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY="sk-bench", PYTHONPATH=str(ROOT))
    ratios, per = [], {"online": [], "batch": []}
    try:
        for rep in range(3):
            got = {}
            for name, flags in (("online", ["--concurrency", "32"]), ("batch", ["--batch", "--batch-poll", "0.05"])):
                cpu = {}
                for which, path in (("one", one), ("many", data)):
                    folder = tmp / f"o{rep}" / name / which
                    cmd = [sys.executable, "-m", "gsrlang.cli", "run", str(EX / "helpsteer2/helpfulness.gsr"),
                           "--data", str(path), "--mode", "pointwise", "--id-field", "id", "--model", "fake-judge",
                           "--no-short-circuit", "--structured", "json_schema", "--out", str(folder / "r.jsonl"),
                           "--trace", str(folder / "t.jsonl"), "--cache", str(folder / "c.sqlite"), "-q",
                           "--no-progress", *flags]
                    cpu[which] = cpu_of(cmd, env)
                got[name] = (cpu["many"] - cpu["one"]) / (judgments - 5)
                per[name].append(got[name])
            ratios.append(got["batch"] / got["online"])
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    ms = lambda xs: f"{1000 * min(xs):.3f}/{1000 * statistics.median(xs):.3f}/{1000 * max(xs):.3f}"  # noqa: E731
    print(f"\n2. gsr's CPU per judgment, {judgments:,} judgments (ms, min/median/max of 3): online {ms(per['online'])}, "
          f"batch {ms(per['batch'])}")
    print(f"   batch / online: {min(ratios):.2f}x min, {statistics.median(ratios):.2f}x median, "
          f"{max(ratios):.2f}x max")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        bought(Path(tmp))
        overhead(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
