"""Spending less: model calls saved by short-circuit judging, calls merged in flight, and start-up.

(1) Short-circuit judging on every model-judged example, with a gate-heavy data set (good responses mixed
    with bad ones, which the fake model finds unsafe, wrong or off topic): the calls a full run makes
    (`--no-short-circuit`) and a short-circuited one, against the fake server (tests/fakeserver.py), and
    that the two results files are identical.
(2) Identical requests merged in flight: a program that asks one question under two names (compiled
    rubrics do), no judgment cache: calls merged out of the calls made.
(3) `gsr check` start-up, cold (fresh temp and cache folders, as on a new CI container; `gsr check` keeps
    nothing in them any more, so this guards against a cache coming back) and warm (the same process again),
    against a bare `python -c "import lark"` process, alternating,
    median / min / max of 5.
(4) `analyze` (parse and check) of a generated 10,000-node program, against Lark's bare LALR parse of the
    same text (a parse tree, no positions, no AST), alternating, CPU time, median / min / max of 5.

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
sys.path.insert(0, str(ROOT / "benchmarks"))

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


def startup(repeats: int = 7) -> None:
    """Wall time (what a user waits) and CPU time (user + system: less disturbed by other jobs on the machine) of
    `gsr check` cold and warm, and of a language server's start: `gsr lsp` from its launch to the diagnostics of
    the document it was opened with (wall), and the whole session's CPU (it then shuts down)."""
    import resource

    example = ROOT / "examples" / "helpsteer2" / "helpfulness.gsr"
    gsr_exe = Path(sys.executable).parent / "gsr"
    gsr_cmd = [str(gsr_exe)] if gsr_exe.exists() else [sys.executable, "-m", "gsrlang.cli"]
    check = [*gsr_cmd, "check", "-q", str(example)]
    anchor = [sys.executable, "-c", "import lark"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def timed(cmd, fresh=None) -> tuple[float, float]:
        e = dict(env, TMPDIR=fresh, XDG_CACHE_HOME=fresh) if fresh else env
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=e)
        r1, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        return t1 - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime

    def lsp() -> tuple[float, float]:
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        first = _lsp_first_diagnostics([*gsr_cmd, "lsp", "--debounce-ms", "0"], example, env)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return first - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime

    timed(check), timed(anchor), lsp()  # warm the OS cache and the bytecode
    names = {"cold": "gsr check cold", "warm": "gsr check warm", "lsp": "gsr lsp, to a document's diagnostics"}
    ratios: dict = {(name, k): [] for name in names for k in (0, 1)}
    times: dict = {name: [] for name in (*names, "anchor")}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as fresh:
            a = timed(anchor)
            c = timed(check, fresh)
            w = timed(check)
            b = timed(anchor)
            s = lsp()
            d = timed(anchor)
        for k in (0, 1):
            ratios["cold", k].append(c[k] / a[k])
            ratios["warm", k].append(w[k] / b[k])
            ratios["lsp", k].append(s[k] / d[k])
        for name, t in (("cold", c), ("warm", w), ("lsp", s), ("anchor", a), ("anchor", b), ("anchor", d)):
            times[name].append(t[1] * 1000)
    for (name, k), r in ratios.items():
        target = "; target <= 1.8x" if name != "lsp" else ""
        print(f"{names[name]} / python -c 'import lark', {('wall', 'CPU')[k]} time: median "
              f"{statistics.median(r):.2f}x (min {min(r):.2f}, max {max(r):.2f}, {repeats} runs{target})")
    print("  CPU ms, median (min-max): " + ", ".join(
        f"{name} {statistics.median(t):.0f} ({min(t):.0f}-{max(t):.0f})" for name, t in times.items()))


def _lsp_first_diagnostics(cmd: list[str], document: Path, env: dict) -> float:
    """Start a language server, open `document` in it, and return the perf_counter() time its diagnostics arrived
    at; then shut it down and wait for it to exit. JSON-RPC over stdio, framed as LSP frames it."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def send(message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()

    def receive() -> dict:
        length = 0
        while (line := proc.stdout.readline().strip()):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(proc.stdout.read(length))

    def until(test) -> dict:
        while not test(message := receive()):
            pass
        return message

    try:
        send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        until(lambda m: m.get("id") == 1)
        send({"method": "initialized", "params": {}})
        uri = document.resolve().as_uri()
        send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "gsr", "version": 1, "text": document.read_text(encoding="utf-8")}}})
        until(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)
        first = time.perf_counter()
        send({"id": 2, "method": "shutdown"})
        until(lambda m: m.get("id") == 2)
        send({"method": "exit"})
        proc.wait(timeout=30)
        return first
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def analyze_speed(n: int = 10_000, repeats: int = 5) -> None:
    import lark

    from generate import generate_program
    from gsrlang.lang.check.driver import analyze
    from gsrlang.lang.resources import grammar_path

    text = generate_program(n)
    bare = lark.Lark(grammar_path().read_text(encoding="utf-8"), parser="lalr", maybe_placeholders=True)
    assert analyze(text).ok
    bare.parse(text)

    def timed(f) -> float:  # CPU time of this process: other jobs on the machine barely move it
        t0 = time.process_time()
        f(text)
        return time.process_time() - t0

    ours, anchor = [], []
    for _ in range(repeats):
        anchor.append(timed(bare.parse))
        ours.append(timed(analyze))
    ratios = [o / a for o, a in zip(ours, anchor)]
    print(f"analyze at {n:,} nodes: median {statistics.median(ours):.2f} s CPU (min {min(ours):.2f}, max "
          f"{max(ours):.2f}); / Lark's bare parse of the same text: median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {repeats} runs)")


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
    analyze_speed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
