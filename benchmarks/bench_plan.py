"""How well `gsr run --dry-run` predicts what a run then uses: calls and tokens, plan / actual.

    python benchmarks/bench_plan.py          # the examples against the fake server
    GSR_REAL_BASE_URL=http://127.0.0.1:PORT/v1 GSR_REAL_MODEL=smollm2 python benchmarks/bench_plan.py

For each example program with model-judged criteria (HelpSteer2 and SummEval pointwise, MT-Bench
pairwise), 24 items of the same kind are split in two halves A and B (their responses alternate
between a good and a bad one, so short-circuit judging skips some questions). Two predictions:

1. **no history**: `--dry-run` over B, then the run of B with `--no-short-circuit` (the plan counts
   every judgment the program needs);
2. **from a previous trace**: the run of A (short-circuit judging, the default) writes a trace; the
   plan of B with `--trace A` applies A's skip shares, re-asks and answer lengths; then B is run.

Reported: the ratio plan / actual for calls (HTTP requests, adaptations aside), prompt tokens and
completion tokens (the goal: within 10% for calls, 25% for tokens). The fake server counts a token
per 4 characters, as the plan estimates them, so its prompt ratio mostly measures what the plan
leaves out or adds (the chat template, the schema); the llama.cpp tier's real tokenizer measures the
estimate itself. With GSR_REAL_BASE_URL set, the same over the real-model tier's every-type program
(6 items, 3 and 3) against that server. The figures are deterministic for the fake server (one run);
the real model's answer lengths vary, so it is repeated (GSR_BENCH_REPEATS, default 2) with
min/median/max.

Last measured (2026-12-01): fake server, all three examples: calls 1.000 (both ways), prompt tokens
1.07-1.10, completion 1.000 from a previous trace (6.67 with the 60-token guess). llama.cpp tier
(SmolLM2-135M): calls 1.000 / 1.118, prompt tokens 0.836 / 0.986, completion 4.02 / 1.24 (no
history / from a previous trace; both repeats alike).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

EXAMPLES = [
    ("helpsteer2", ROOT / "examples" / "helpsteer2" / "helpfulness.gsr", "pointwise"),
    ("summeval", ROOT / "examples" / "summeval" / "relevance.gsr", "pointwise"),
    ("mtbench", ROOT / "examples" / "mtbench" / "pairwise.gsr", "pairwise"),
]
N = 24


def rows(kind: str, start: int, n: int) -> list[dict]:
    out = []
    for k in range(start, start + n):
        good = k % 3 != 0
        question = f"Question {k}: explain, in a few sentences, how {['tides', 'rainbows', 'vaccines'][k % 3]} work."
        if kind == "pairwise":
            a, b = ("GOOD answer with the facts.", "BAD answer.") if good else ("BAD answer.", "GOOD answer, right.")
            out.append({"id": f"p{k}", "input": question, "a": a, "b": b})
        else:
            text = ("GOOD: a clear explanation that covers the key points in order. " * 3 if good
                    else "BAD: wrong and off the topic.")
            out.append({"id": f"p{k}", "input": question, "response": text})
    return out


def gsr(argv: list[str]) -> tuple[int, str]:
    from gsrlang.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, buf.getvalue()


def plan_total(text: str) -> tuple[float, float, float]:
    """(expected calls, prompt tokens, completion tokens) of a plan's total row."""
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0] == "total":
            return tuple(float(c.replace(",", "")) for c in cells[5:8])  # type: ignore[return-value]
    raise RuntimeError(f"no total row in the plan:\n{text}")


def used(trace: Path) -> tuple[float, float, float]:
    from gsrlang.trace.read import read_trace
    from gsrlang.trace.schema import is_summary

    summary = [r for _, r in read_trace(trace, summaries=True) if is_summary(r)][-1]
    llm = summary["judges"]["llm"]
    # every call the plan predicts is a chat completion asked for: http requests less the requests re-sent
    # for a refused parameter or a structured-output fallback, which no plan can foresee
    return float(llm["calls"] - llm["cache_hits"]), float(llm["prompt_tokens"]), float(llm["completion_tokens"])


def compare(program: Path, mode: str, kind: str, model: str, base_url: str, items_a: list, items_b: list,
            extra: list[str]) -> dict[str, tuple[float, float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        a, b = here / "a.jsonl", here / "b.jsonl"
        a.write_text("".join(json.dumps(r) + "\n" for r in items_a))
        b.write_text("".join(json.dumps(r) + "\n" for r in items_b))
        common = ["--mode", mode, "--model", model, "--base-url", base_url, "--no-progress", "--bootstrap", "0",
                  *extra, *(["--responses", "a,b"] if kind == "pairwise" else [])]
        out = {}
        code, text = gsr(["run", program, "--data", b, "--dry-run", "--cache", here / "c1.sqlite", *common])
        assert code == 0, text
        predicted = plan_total(text)
        code, _ = gsr(["run", program, "--data", b, "--no-short-circuit", "--trace", here / "tb.jsonl", "--cache",
                       here / "c1.sqlite", *common])
        out["no history"] = tuple(p / u for p, u in zip(predicted, used(here / "tb.jsonl")))
        code, _ = gsr(["run", program, "--data", a, "--trace", here / "ta.jsonl", "--cache", here / "c2.sqlite",
                       *common])
        code, text = gsr(["run", program, "--data", b, "--dry-run", "--trace", here / "ta.jsonl", "--cache",
                          here / "c2.sqlite", *common])
        assert code == 0, text
        predicted = plan_total(text)
        code, _ = gsr(["run", program, "--data", b, "--trace", here / "tb2.jsonl", "--cache", here / "c2.sqlite",
                       *common])
        out["from a previous trace"] = tuple(p / u for p, u in zip(predicted, used(here / "tb2.jsonl")))
        return out


def show(name: str, ratios: dict[str, list[tuple[float, float, float]]]) -> None:
    for how, runs in ratios.items():
        cells = []
        for i, what in enumerate(("calls", "prompt tokens", "completion tokens")):
            xs = [r[i] for r in runs]
            spread = f" (min {min(xs):.3f}, max {max(xs):.3f})" if len(xs) > 1 else ""
            cells.append(f"{what} {statistics.median(xs):.3f}{spread}")
        print(f"  {name:<11} {how:<22} plan/actual: " + ", ".join(cells))


def fake_examples() -> None:
    from fakeserver import FakeOpenAI
    from test_llm_run import fake_model

    os.environ.pop("OPENAI_API_KEY", None)
    print(f"the examples against the fake server ({N} items: {N // 2} to learn from, {N // 2} planned and run):")
    with FakeOpenAI(responder=fake_model) as server:
        for name, program, mode in EXAMPLES:
            kind = "pairwise" if mode == "pairwise" else "pointwise"
            items = rows(kind, 0, N)
            result = compare(program, mode, kind, "gpt-4.1-mini", server.base_url, items[: N // 2], items[N // 2:],
                             ["--input-field", "input"])
            show(name, {k: [v] for k, v in result.items()})


def real_model() -> None:
    base = os.environ.get("GSR_REAL_BASE_URL")
    if not base:
        print("the llama.cpp tier: skipped (set GSR_REAL_BASE_URL, or run scripts/realmodel.sh --bench)")
        return
    sys.path.insert(0, str(ROOT / "tests" / "realmodel"))
    from test_realmodel import TYPES_PROGRAM
    from bench_realmodel import BENCH_ITEMS

    model = os.environ.get("GSR_REAL_MODEL", "smollm2")
    repeats = int(os.environ.get("GSR_BENCH_REPEATS", "2"))
    items = [{"id": f"r{i}", "input": q, "response": r} for i, (q, r) in enumerate(BENCH_ITEMS)]
    ratios: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "types.gsr"
        program.write_text(TYPES_PROGRAM)
        for _ in range(repeats):
            for how, r in compare(program, "pointwise", "pointwise", model, base, items[:3], items[3:],
                                  ["--concurrency", "1"]).items():
                ratios.setdefault(how, []).append(r)
    print(f"the llama.cpp tier ({model} at {base}, {len(items)} items, {repeats} repeats):")
    show("types", ratios)


if __name__ == "__main__":
    fake_examples()
    real_model()
