"""Bounded work on hostile input: the paths whose tests count operations instead of timing them (docs/testing.md).

    python benchmarks/bench_bounds.py

For each path, the time at input size n and at 10n, and their ratio (the anchor is the same path at n, timed in the
same run): about 10 is linear, about 100 quadratic. Figures are min / median / max over 5 repeats.

- `extract_json` on n unbalanced opening braces (its brace matcher tries at most 200 openings);
- `rule.regex` with `^(a+)+$` on n `a`s and a `!` (RE2; Python's `re` takes 36 s at n = 31);
- `rule.repeats_phrase` (5 words) on n distinct words (one pass and one set).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REPEATS = 5


def _time(fn, arg) -> float:
    t0 = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t0


def _extract(text: str) -> None:
    from gsrlang.judges.llm.jsonparse import AnswerFormatError, extract_json

    try:
        extract_json(text)
    except AnswerFormatError:
        pass


def main() -> int:
    from gsrlang.judges.rules import run_rule

    cases = [
        ("extract_json, n unbalanced braces", 20_000, lambda n: "{" * n, _extract),
        ("rule.regex ^(a+)+$, n characters", 1_000_000, lambda n: "a" * n + "!",
         lambda t: run_rule("regex", t, {"pattern": "^(a+)+$"})),
        ("rule.repeats_phrase, n words", 100_000, lambda n: " ".join(f"w{i}" for i in range(n)),
         lambda t: run_rule("repeats_phrase", t, {"words": 5})),
    ]
    print(f"{'path':38} {'n':>8} {'t(n) ms min/med/max':>24} {'t(10n) / t(n) min/med/max':>28}")
    for name, n, make, fn in cases:
        small, large = make(n), make(10 * n)
        fn(small)  # warm: compiled patterns, imports
        base, ratio = [], []
        for _ in range(REPEATS):
            a = _time(fn, small)
            b = _time(fn, large)
            base.append(a * 1000)
            ratio.append(b / a)
        print(f"{name:38} {n:>8,} {min(base):7.2f} {statistics.median(base):7.2f} {max(base):7.2f}   "
              f"{min(ratio):7.1f} {statistics.median(ratio):7.1f} {max(ratio):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
