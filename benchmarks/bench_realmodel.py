"""The real-model tier's figures: a real llama.cpp server (scripts/realmodel.sh --bench starts it).

    GSR_REAL_BASE_URL=http://127.0.0.1:PORT/v1 GSR_REAL_MODEL=smollm2 python benchmarks/bench_realmodel.py

Skipped (exit 0, one line) when GSR_REAL_BASE_URL is not set. Figures, all measured here:

1. **Judgments per second**: the tier's every-type program (Bool, Ordinal, Nominal, Score, Bool?, and a
   3-vote ensemble: 8 model calls per item, every criterion judged: --no-short-circuit) over 6 items,
   pointwise, concurrency 1 (llama-cpp-python
   serves one request at a time), a fresh cache each repeat; min/median/max over 3 repeats, and the
   ratio to an anchor measured in the same run: bare openai SDK chat requests (a 1-token answer to a
   short prompt) per second against the same server.
2. **Valid-format share per criterion type**: of all judgments of the repeats, the share that were a
   value of the criterion's type (ok or abstained) rather than invalid.
3. **Compile rates per round**: each single-rubric file of examples/rubrics/ compiled with 2 repair
   rounds, unconstrained and under the GBNF program grammar (--constrain grammar); per round, how many
   answers parse and how many check clean.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the tier's test module imports a fake-server test's program
sys.path.insert(0, str(ROOT / "tests" / "realmodel"))

BASE_URL = os.environ.get("GSR_REAL_BASE_URL")
MODEL = os.environ.get("GSR_REAL_MODEL", "smollm2")
REPEATS = int(os.environ.get("GSR_BENCH_REPEATS", "3"))
RUBRICS = (("helpsteer2_helpfulness.md", "pointwise", "1..5"), ("mtbench_pairwise.md", "pairwise", None),
           ("checklist_recipe.md", "pointwise", "1..10"))
TYPE_OF = {"polite": "Bool", "clarity": "Ordinal", "tone": "Nominal", "length_fit": "Score", "unsafe": "Bool?",
           "correct": "Bool (ensemble vote)"}


def anchor_requests_per_s(n: int = 10) -> float:
    import openai

    client = openai.OpenAI(base_url=BASE_URL, api_key="not-needed", max_retries=0)
    t0 = time.perf_counter()
    for _ in range(n):
        client.chat.completions.create(model=MODEL, max_tokens=1, messages=[{"role": "user", "content": "Hi"}])
    return n / (time.perf_counter() - t0)


# six pointwise items (the tier's two, and four more of the same kind: a right and a wrong answer each)
BENCH_ITEMS = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many legs does a spider have?", "Six."),
    ("What is 12 times 12?", "12 times 12 is 144."),
    ("Which planet is closest to the sun?", "Venus is the closest planet to the sun."),
    ("How do I boil an egg?", "Put the egg in boiling water for about nine minutes, then cool it in cold water."),
    ("Who wrote Hamlet?", "Hamlet was written by Charles Dickens."),
]


def judging() -> None:
    from gsrlang.cli import main
    from test_realmodel import TYPES_PROGRAM, judgments

    rates, shares = [], defaultdict(Counter)
    anchors = []
    for _ in range(REPEATS):
        anchors.append(anchor_requests_per_s())
        with tempfile.TemporaryDirectory() as tmp:
            here = Path(tmp)
            (here / "p.gsr").write_text(TYPES_PROGRAM)
            data = here / "items.jsonl"
            data.write_text("".join(json.dumps({"id": f"b{i}", "input": q, "response": a}) + "\n"
                                    for i, (q, a) in enumerate(BENCH_ITEMS)))
            t0 = time.perf_counter()
            main(["run", str(here / "p.gsr"), "--data", str(data), "--mode", "pointwise", "--model", MODEL,
                  "--base-url", BASE_URL, "--cache", str(here / "c.sqlite"), "--trace", str(here / "t.jsonl"),
                  "--concurrency", "1", "--timeout", "900", "--max-tokens", "160", "--no-short-circuit",
                  "--no-progress", "--quiet"])
            wall = time.perf_counter() - t0
            js = judgments(here / "t.jsonl")
            rates.append(len(js) / wall)
            for crit, j in js:
                for v in j.get("provenance", {}).get("votes") or [j]:  # an ensemble's every vote counts
                    shares[TYPE_OF[crit]][v["status"]] += 1
    ratio = [r / a for r, a in zip(rates, anchors)]
    print(f"judgments/s over {len(BENCH_ITEMS)} items x 6 criteria (8 calls per item), {REPEATS} repeats: "
          f"min {min(rates):.3f}, median {statistics.median(rates):.3f}, max {max(rates):.3f}")
    print(f"anchor, bare openai SDK 1-token requests/s: min {min(anchors):.2f}, median "
          f"{statistics.median(anchors):.2f}, max {max(anchors):.2f}; judgments per anchor request: median "
          f"{statistics.median(ratio):.3f}")
    print("valid-format share per criterion type (ok or abstained, of all judgments):")
    for t, c in shares.items():
        total = sum(c.values())
        print(f"  {t:<22} {(c['ok'] + c['abstained']) / total:6.1%}  ({dict(c)})")


async def compiling() -> None:
    from gsrlang.compiler.prompt import fit_prompt
    from gsrlang.compiler.spec import CompileSpec, Pairwise, Pointwise
    from gsrlang.compiler.synthesize import CompilerClient, compile_rubric
    from gsrlang.judges.llm import JudgeConfig
    from gsrlang.lang.syntax.parser import parse

    context = int(os.environ.get("GSR_REAL_N_CTX", "4096"))
    config = JudgeConfig(model=MODEL, base_url=BASE_URL, max_tokens=700, timeout_s=600, max_retries=1)
    for constrain in ("none", "grammar"):
        per_round: dict[int, Counter] = defaultdict(Counter)
        t0 = time.perf_counter()
        async with CompilerClient(config) as client:
            for name, task, scale in RUBRICS:
                rubric = (ROOT / "examples" / "rubrics" / name).read_text()
                contract = Pointwise(scale=scale, quantize="round") if task == "pointwise" else Pairwise()
                spec = CompileSpec(rubric=rubric, contract=contract)
                prompt, _ = fit_prompt(spec, context, 2 * config.max_tokens)
                result = await compile_rubric(spec, client, repairs=2, constrain=constrain, grammar_field="grammar",
                                              prompt=prompt)
                for r in result.rounds:
                    c = per_round[r.index]
                    c["answers"] += 1
                    c["parse"] += r.program is not None and not parse(r.program).diagnostics
                    c["check clean"] += r.accepted
        wall = time.perf_counter() - t0
        print(f"compile, --constrain {constrain} ({len(RUBRICS)} rubrics, 2 repairs, {wall:.0f} s):")
        for index, c in sorted(per_round.items()):
            print(f"  round {index}: {c['parse']}/{c['answers']} parse, {c['check clean']}/{c['answers']} check clean")


def main() -> int:
    if not BASE_URL:
        print("bench_realmodel: skipped (no real model server; scripts/realmodel.sh --bench starts one)")
        return 0
    print(f"server {BASE_URL}, model {MODEL}")
    judging()
    asyncio.run(compiling())
    return 0


if __name__ == "__main__":
    sys.exit(main())
