"""Probability-weighted verdicts (G-Eval style): a Score read from the answer token's probabilities.

A criterion ``Score[lo..hi] = llm(weighted: true)`` with whole-number bounds one digit each
(``0 <= lo < hi <= 9``; levels may anchor the points, so an Ordinal-like scale becomes a Score)
is asked for a whole number, with ``logprobs`` on. The verdict is not the number the model wrote but
the expected value over the scale's points, weighted by the probabilities the model gave each
point's token at the place it wrote the answer::

    value = sum(k * p(k)) / sum(p(k))    over the points k among that position's top tokens

So a model torn between 3 and 4 gives 3.5, not a coin flip. The probabilities are kept in the
judgment's provenance (``weighted``: per point, and the share of probability mass that fell on
points), and the value is in the trace, so replay is exact without logprobs. A server that
returns no logprobs is refused with one line (``gsr probe`` says whether a server returns them).
"""

from __future__ import annotations

import math
import re
from typing import Sequence

__all__ = ["TOP_LOGPROBS", "eligible", "read_weighted"]

TOP_LOGPROBS = 10
_ANSWER_KEY = re.compile(r'"answer"\s*:\s*"?\s*$')


def eligible(t) -> str | None:
    """None when a criterion of type ``t`` can be weighted, else why not."""
    if t.kind != "score" or t.lo is None or t.hi is None:
        return "llm(weighted: true) reads a Score[lo..hi] criterion's number from its token probabilities"
    if not (float(t.lo).is_integer() and float(t.hi).is_integer() and 0 <= t.lo < t.hi <= 9):
        return (f"llm(weighted: true) needs whole-number bounds of one digit each (0 <= lo < hi <= 9), "
                f"not {t.lo:g}..{t.hi:g}")
    return None


def read_weighted(t, tokens: Sequence[tuple[str, Sequence[tuple[str, float]]]]) -> dict | None:
    """The weighted verdict from a completion's ``[(token, [(candidate, logprob), ...]), ...]``, or None
    when no answer position (a digit token right after ``"answer":``) or no point among its candidates
    is found."""
    text = ""
    points = range(int(t.lo), int(t.hi) + 1)
    for token, top in tokens:
        if _ANSWER_KEY.search(text) and token.strip()[:1].isdigit():
            probs: dict[int, float] = {}
            for cand, logprob in top:
                if (s := cand.strip()).isdigit() and int(s) in points:
                    probs[int(s)] = probs.get(int(s), 0.0) + math.exp(logprob)
            if not (mass := sum(probs.values())):
                return None
            expected = sum(k * p for k, p in probs.items()) / mass
            return {"expected": expected, "probs": {str(k): round(p / mass, 6) for k, p in sorted(probs.items())},
                    "mass": round(min(mass, 1.0), 6), "token": token}
        text += token
    return None
