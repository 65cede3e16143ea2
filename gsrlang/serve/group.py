"""Rewards within a group of responses to one prompt (GRPO's unit): normalisation and round-robin wins.

- `raw`: the rewards as scored;
- `rank`: each reward's rank in the group scaled to [0, 1] (lowest 0, highest 1; tied rewards share their
  average rank; a group of one gets 0.5);
- `zscore`: (reward - the group's mean) / the group's standard deviation, the sample one (n - 1), as GRPO
  computes its advantages (TRL's `std` of a group); a group whose rewards are all equal gets 0.0 for each.

A reward that is None (an item that is not ok under `failure_value=None`) is left out of the normalisation
and stays None.
"""

from __future__ import annotations

import math

from gsrlang.analysis.metrics import average_ranks

NORMALIZE = ("raw", "rank", "zscore")


def normalize(values: list, how: str) -> list:
    """`values` (floats or None) normalised within the group as `how` (one of NORMALIZE) says."""
    if how not in NORMALIZE:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZE)}, got {how!r}")
    if how == "raw":
        return list(values)
    where = [i for i, v in enumerate(values) if v is not None]
    xs = [float(values[i]) for i in where]
    out: list = [None] * len(values)
    if not xs:
        return out
    if how == "rank":
        scaled = ranks01(xs)
    else:
        n = len(xs)
        mean = math.fsum(xs) / n
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        scaled = [0.0 if std == 0.0 else (x - mean) / std for x in xs]
    for i, v in zip(where, scaled):
        out[i] = v
    return out


def ranks01(xs: list[float]) -> list[float]:
    """Average ranks (0-based) scaled to [0, 1]; one value gets 0.5."""
    n = len(xs)
    return [0.5] if n == 1 else ((average_ranks(xs) - 1) / (n - 1)).tolist()


def round_robin(n: int, both_orders: bool = False) -> list[tuple[int, int]]:
    """The pairs (first, second) a round robin of `n` responses judges: each unordered pair once (i < j), or
    in both orders (to cancel a judge's position bias)."""
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    return pairs + [(j, i) for i, j in pairs] if both_orders else pairs


def win_rates(n: int, pairs: list[tuple[int, int]], winners: list) -> list[float]:
    """Each response's share of the points it could win: a win 1, a tie 0.5, a loss 0; a pair without a
    verdict (`winners` entry None: invalid, or past the deadline under the `default` policy) counts as a tie.
    A group of one gets 0.5."""
    points = [0.0] * n
    games = [0] * n
    for (a, b), w in zip(pairs, winners):
        games[a] += 1
        games[b] += 1
        if w == "first":
            points[a] += 1.0
        elif w == "second":
            points[b] += 1.0
        else:
            points[a] += 0.5
            points[b] += 0.5
    return [p / g if g else 0.5 for p, g in zip(points, games)]
