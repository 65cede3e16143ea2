"""Spending less: model calls saved by short-circuit judging, calls merged in flight, and start-up.

(1) Short-circuit judging on every model-judged example, with a gate-heavy data set (good responses mixed
    with bad ones, which the fake model finds unsafe, wrong or off topic): the calls a full run makes
    (`--no-short-circuit`) and a short-circuited one, against the fake server (tests/fakeserver.py), and
    that the two results files are identical.
(2) Identical requests merged in flight: a program that asks one question under two names (compiled
    rubrics do), no judgment cache: calls merged out of the calls made.
(3) `gsr check` start-up, cold (a fresh temp folder: no Lark grammar cache, as on a new CI container) and
    warm, against a bare `python -c "import lark"` process, alternating, median / min / max of 5.

Prints the figures; it asserts nothing. Run: python benchmarks/bench_spend.py
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fakeserver import FakeOpenAI  # noqa: E402
from test_llm_run import KEY, fake_model  # noqa: E402
from test_short_circuit import PAIRWISE, POINTWISE, _gate_heavy_rows  # noqa: E402

from gsrlang.cli import main as gsr  # noqa: E402

EXAMPLES = ROOT / "examples"


def run(program: Path, mode: str, data: Path, out: Path, *flags: str) -> tuple[int, dict]:
    """(HTTP requests the fake server got, the trace's run summary) of one quiet `gsr run`."""
    columns = ["--responses", "a,b"] if mode == "pairwise" else []
    config = ["--judge-config", str(program.parent / "gsr.toml")] if (program.parent / "gsr.toml").is_file() \
        else ["--model", "fake"]
    trace = out.with_suffix(".trace.jsonl")
    with FakeOpenAI(responder=fake_model) as server:
        os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=KEY)
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            gsr(["run", str(program), "--data", str(data), "--mode", mode, "--input-field", "prompt", *columns,
                 *config, "--id-field", "id", "--cache", "off", "--out", str(out), "--trace", str(trace), "-q",
                 "--no-progress", *flags])
        requests = len(server.requests)
    summary = json.loads(trace.read_text().splitlines()[-1])
    return requests, summary


def short_circuit(tmp: Path) -> None:
    print("short-circuit judging, gate-heavy data (24 items, 2 of 3 responses bad), fake server:")
    data = tmp / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _gate_heavy_rows(24)))
    total_full = total_short = 0
    for example, mode in [(p, "pointwise") for p in POINTWISE] + [(p, "pairwise") for p in PAIRWISE]:
        full, _ = run(EXAMPLES / example, mode, data, tmp / "full.jsonl", "--no-short-circuit")
        short, summary = run(EXAMPLES / example, mode, data, tmp / "short.jsonl")
        same = (tmp / "full.jsonl").read_bytes() == (tmp / "short.jsonl").read_bytes()
        sc = summary.get("short_circuit") or {}
        total_full, total_short = total_full + full, total_short + short
        print(f"  {example:28s} {mode:9s}: {full:4d} calls in full, {short:4d} short-circuited: "
              f"{short / full:.2f}x the calls ({1 - short / full:5.1%} saved; {sc.get('skipped', 0)} judgments "
              f"skipped); results {'identical' if same else 'DIFFERENT'}")
    print(f"  every example: {total_short / total_full:.2f}x the calls of full judging "
          f"({1 - total_short / total_full:.1%} saved)")


MERGE_PROGRAM = """
rubric twice "A compiled rubric that asks one question twice (under two names), in a fixed option order"
task pointwise { scale = 1..5  quantize = round }
criterion clear: Bool = llm(shuffle: false) { ask "Is the response clear?" }
criterion readable: Bool = llm(shuffle: false) { ask "Is the response clear?" }
criterion correct: Ordinal[1..5] = llm(shuffle: false) { ask "How correct is the response?" }
sink mean(items: [normalize(clear), normalize(readable), normalize(correct)])
"""


def merged(tmp: Path) -> None:
    data = tmp / "twice.jsonl"  # (item ids are part of every prompt: only requests of one item can be identical)
    data.write_text("".join(json.dumps(r) + "\n" for r in _gate_heavy_rows(12)))
    program = tmp / "twice.gsr"
    program.write_text(MERGE_PROGRAM)
    requests, summary = run(program, "pointwise", data, tmp / "m.jsonl", "--no-short-circuit")
    llm = (summary.get("judges") or {}).get("llm") or {}
    calls, merges = llm.get("calls", 0), llm.get("merged", 0)
    print(f"identical requests in flight (12 items, a program asking one question twice; no cache): {merges} of "
          f"{calls} calls merged "
          f"({merges / max(calls, 1):.2f}), {requests} HTTP requests")


def startup() -> None:
    example = ROOT / "examples" / "helpsteer2" / "helpfulness.gsr"
    gsr_exe = Path(sys.executable).parent / "gsr"
    check = [str(gsr_exe), "check", "-q", str(example)] if gsr_exe.exists() else \
        [sys.executable, "-m", "gsrlang.cli", "check", "-q", str(example)]
    anchor = [sys.executable, "-c", "import lark"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def timed(cmd, tmpdir=None) -> float:
        e = dict(env, TMPDIR=tmpdir) if tmpdir else env
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=e)
        return time.perf_counter() - t0

    timed(check), timed(anchor)  # warm the OS cache, the bytecode and Lark's grammar cache
    cold, warm = [], []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as fresh:
            a = timed(anchor)
            cold.append(timed(check, fresh) / a)
            warm.append(timed(check) / timed(anchor))
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"gsr check {name} / python -c 'import lark': median {statistics.median(r):.2f}x "
              f"(min {min(r):.2f}, max {max(r):.2f}, 5 runs; target <= 1.8x)")


def main() -> int:
    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="gsr-spend-") as tmp:
        os.chdir(tmp)
        try:
            short_circuit(Path(tmp))
            merged(Path(tmp))
        finally:
            os.chdir(cwd)
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    startup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
