"""Hardening (issue 11): crashes per 10,000 fuzzed inputs per entry point, alias chains, the regex worst case.

    .venv/bin/python benchmarks/bench_hardening.py [N [ENTRY...]]  # N fuzzed inputs per entry point (default
                                                                  # 2000); ENTRY: only those (check, import, ...)

1. Fuzz: N random mutants per entry point (2,000 by default, so that `make bench` stays within
   minutes: a check input takes about 0.1 s and a language-server one 0.4 s on a loaded 2-core
   machine; pass 10000 for a full count) (tests/fuzzing.py: `gsr check` on mutants of the
   example programs, `gsr import` on mutants of their JSON forms, the row readers on JSONL and
   CSV files with spiced rows, the language server's features on edited documents). A crash
   is an exception that escapes or an internal error (exit 2). Printed: crashes per 10,000
   (target 0), with the first crash of each entry point.
2. Check time for chains of 1,000, 2,000 and 4,000 aliases (`node n1 = n0`), min/median/max of
   5 runs, and the ratios 2k/1k and 4k/2k (linear: about 2; the cubic cycle check gave 6.6
   and 3.3). The anchor is a bare `import lark` process, measured in the same run. Then the
   language server on the same documents (one run each).
3. The worst time of `rule.regex(pattern: "^(a+)+$")` over subjects of 31 characters to 1 MB
   that almost match (Python's `re` took 36 s on 31 characters).
4. Coverage-guided fuzzing (issue 24; benchmarks/fuzz_coverage.py, atheris/libFuzzer over gsrlang's
   instrumented modules): the parser and checker, the JSON form (`gsr import`) and the JSONL row reader,
   N inputs each (default 1,000 here: ~50 ms an input for the parser; GSR_FUZZ_RUNS=10000 for a full
   count). Printed: crashes per 10,000 per entry point (target 0). Skipped without atheris.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import fuzzing  # noqa: E402  (tests/fuzzing.py)


def _ops(rnd: random.Random, names) -> list[tuple[str, int]]:
    return [(rnd.choice(names), rnd.randrange(2**32)) for _ in range(rnd.randint(1, 4))]


def fuzz(n: int, seed: int = 2026, only: list[str] | None = None) -> None:
    rnd = random.Random(seed)
    texts, forms = fuzzing.example_texts(), fuzzing.example_forms()
    text_ops, json_ops = sorted(fuzzing.TEXT_MUTATIONS), sorted(fuzzing.JSON_MUTATIONS) + ["delete", "truncate"]
    with fuzzing.scratch() as tmp:
        folder = Path(tmp)
        targets = {
            "check": lambda: fuzzing.check_target(fuzzing.mutate_text(rnd.choice(texts), _ops(rnd, text_ops)), folder),
            "import": lambda: fuzzing.import_target(fuzzing.mutate_json(rnd.choice(forms), _ops(rnd, json_ops)),
                                                    folder),
            "rows (jsonl)": lambda: fuzzing.rows_target(fuzzing.row_file(_ops(rnd, ["row", "truncate"]), ".jsonl"),
                                                        ".jsonl", folder),
            "rows (csv)": lambda: fuzzing.rows_target(fuzzing.row_file(_ops(rnd, ["row", "truncate"]), ".csv"),
                                                      ".csv", folder),
            "language server": lambda: fuzzing.lsp_target(
                fuzzing.mutate_text(rnd.choice(texts), _ops(rnd, text_ops)), rnd.randrange(2**32)),
        }
        print(f"fuzz: {n:,} inputs per entry point (seed {seed})")
        for name, target in targets.items():
            if only and not any(name.startswith(o) for o in only):
                continue
            crashes, first = 0, None
            t0 = time.perf_counter()
            for _ in range(n):
                problem = target()
                if problem is not None:
                    crashes += 1
                    first = first or problem
            took = time.perf_counter() - t0
            print(f"  {name:16s} {crashes * 10_000 / n:8.1f} crashes per 10,000   ({crashes} of {n:,}, "
                  f"{took / n * 1000:.2f} ms per input)" + (f"\n    first: {first}" if first else ""))


def coverage_fuzz(runs: int) -> None:
    import json
    import os

    try:
        import atheris  # noqa: F401
    except ImportError:
        print("coverage-guided fuzzing: skipped (pip install atheris)")
        return
    print(f"coverage-guided fuzzing (atheris): {runs:,} inputs per entry point")
    for entry in ("parser", "json", "jsonl"):
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_coverage.py"), entry, str(runs)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if not lines:
            print(f"  {entry:8s} did not report (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
            continue
        r = json.loads(lines[-1])
        print(f"  {entry:8s} {r['crashes'] * 10_000 / max(1, r['runs']):8.1f} crashes per 10,000   "
              f"({r['crashes']} of {r['runs']:,}, {r['seconds']:.0f} s)" + (f"\n    first: {r['first']}" if r['first'] else ""))


def _alias_program(n: int) -> str:
    lines = ['rubric chain "aliases"', "task pointwise { scale = 1..5 }",
             'criterion c: Bool = rule.word_count(above: 3)', "node n0 = normalize(c)"]
    lines += [f"node n{i} = n{i - 1}" for i in range(1, n)]
    return "\n".join([*lines, f"sink n{n - 1}", ""])


def _anchor() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import lark"], check=True)
    return time.perf_counter() - t0


def aliases(repeats: int = 5) -> None:
    from gsrlang.lang.check.driver import analyze

    analyze(_alias_program(10))  # warm: parser tables, catalogue
    anchor = statistics.median(_anchor() for _ in range(3))
    print(f"alias chains: check time, {repeats} runs each (anchor: bare `import lark` process, "
          f"median {anchor * 1000:.0f} ms)")
    medians = {}
    for n in (1000, 2000, 4000):
        text = _alias_program(n)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = analyze(text)
            times.append(time.perf_counter() - t0)
            assert result.ok, [d.message for d in result.diagnostics][:3]
        medians[n] = statistics.median(times)
        print(f"  {n:5d} aliases: min {min(times) * 1000:7.1f}  median {medians[n] * 1000:7.1f}  "
              f"max {max(times) * 1000:7.1f} ms  ({medians[n] / anchor:.2f}x the anchor)")
    print(f"  ratios (linear: ~2): 2000/1000 = {medians[2000] / medians[1000]:.2f}, "
          f"4000/2000 = {medians[4000] / medians[2000]:.2f}")
    lsp = {n: _lsp_time(_alias_program(n), n) for n in (1000, 2000, 4000)}
    print("  language server, a fresh document: check, diagnostics, hover and completion on the last alias "
          "(2,000 took 43 s before): " + ", ".join(f"{n}: {t * 1000:.0f} ms" for n, t in lsp.items())
          + f"; ratios {lsp[2000] / lsp[1000]:.2f}, {lsp[4000] / lsp[2000]:.2f}")


def _lsp_time(text: str, n: int) -> float:
    from gsrlang.lsp import completion, diagnostics, hover
    from gsrlang.lsp.model import DocumentModel, Files
    from gsrlang.lsp.positions import PositionMap

    t0 = time.perf_counter()
    model, positions, files = DocumentModel("file:///tmp/aliases.gsr", text, 1, None), PositionMap(text), Files()
    diagnostics.to_lsp(model, positions, files)
    offset = text.index(f"n{n - 1} = ")
    assert hover.hover(model, offset, positions, files) is not None
    completion.complete(model, offset, positions, snippets=True)
    return time.perf_counter() - t0


def regex() -> None:
    from gsrlang.judges.rules import run_rule

    run_rule("regex", "warm", {"pattern": "^(a+)+$"})  # import RE2 and compile once: matching is what is timed
    worst, where = 0.0, 0
    for size in (31, 1_000, 100_000, 1_000_000):
        subject = "a" * (size - 1) + "!"
        t0 = time.perf_counter()
        assert run_rule("regex", subject, {"pattern": "^(a+)+$"}) == (False, "no match")
        took = time.perf_counter() - t0
        if took > worst:
            worst, where = took, size
    print(f'regex: worst time of rule.regex(pattern: "^(a+)+$") over 31 characters to 1 MB: {worst * 1000:.3f} ms '
          f"(at {where:,} characters; Python's re: 36 s at 31)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not (sys.argv[1].isdigit() and int(sys.argv[1]) > 0):
        sys.exit("usage: bench_hardening.py [CASES] [ENTRY ...] (CASES a whole number above 0)")
    fuzz(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000, only=sys.argv[2:])
    if len(sys.argv) <= 2:
        aliases()
        regex()
        import os

        coverage_fuzz(int(os.environ.get("GSR_FUZZ_RUNS", "1000")))
