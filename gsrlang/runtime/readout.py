"""The readout contract: from the sink's Score per candidate to a native score or a pairwise verdict.

No model is called here. Before anything is read, the sink vector is checked:
every candidate id has exactly one value, and every value is a finite number in
[0, 1]. A vector that fails a check gives an *invalid* result with its reason;
the readout never guesses.

Pointwise: `raw = lo + s * (hi - lo)`, then
- `round`: to the nearest integer, **halves up** (2.5 -> 3, 3.5 -> 4), as the
  metrics round human labels (Python's `round` would send halves to even);
- `floor` / `ceil`: down / up to an integer;
- `thresholds(t1, ..., tk)`: `lo` plus the number of cut points at or below `s`;
- `none`: the raw score itself.
Before quantizing, `raw` (and `s`, for thresholds) is rounded to 9 decimal places,
so that a value that is a half (or an integer, or a cut point) in exact arithmetic
is not pushed to the other side by a last-bit floating-point error
(`1 + 0.375 * 4` is 2.5, but a weighted mean may give 2.4999999999999996).

Pairwise: the first candidate wins if `s_A > s_B + epsilon`, the second if
`s_B > s_A + epsilon`; otherwise `on_tie` decides (`tie`, `abstain`, `first`,
`second`). Swapping the candidates swaps first and second and keeps ties.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import attrs

from gsrlang.program import PairwiseReadout, PointwiseReadout, Readout

__all__ = ["ReadoutResult", "SNAP_DECIMALS", "quantize", "read", "read_pairwise", "read_pointwise", "verdict"]

SNAP_DECIMALS = 9
EXPECTED_CANDIDATES = {"pointwise": 1, "pairwise": 2}


@attrs.frozen
class ReadoutResult:
    mode: str  # "pointwise" | "pairwise"
    status: str  # "ok" | "invalid"
    sink: dict  # candidate id -> the sink's Score (as given, even when invalid)
    reason: str | None = None
    raw: float | None = None  # pointwise: lo + s * (hi - lo)
    score: float | int | None = None  # pointwise: the quantized native score
    winner: str | None = None  # pairwise: "first" | "second" | "tie" | "abstain"

    def to_json(self) -> dict:
        out = {"mode": self.mode, "status": self.status, "sink": dict(self.sink)}
        if self.mode == "pointwise":
            out.update(raw=self.raw, score=self.score)
        else:
            out["winner"] = self.winner
        out["reason"] = self.reason
        return out


def _check_sink(mode: str, candidates: Sequence[str], sink: Mapping[str, object]) -> str | None:
    need = EXPECTED_CANDIDATES[mode]
    if len(candidates) != need:
        return f"a {mode} readout needs {need} candidate{'s' if need > 1 else ''}, got {len(candidates)}"
    if len(set(candidates)) != len(candidates):
        return f"candidate ids repeat: {', '.join(candidates)}"
    missing = [c for c in candidates if c not in sink]
    if missing:
        return f"the sink has no score for candidate {', '.join(missing)}"
    extra = [c for c in sink if c not in candidates]
    if extra:
        return f"the sink has a score for unknown candidate {', '.join(map(str, extra))}"
    for c in candidates:
        s = sink[c]
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            return f"the sink score of candidate {c} is not a number: {s!r}"
        if not math.isfinite(s):
            return f"the sink score of candidate {c} is not finite: {s!r}"
        if not 0.0 <= s <= 1.0:
            return f"the sink score of candidate {c} is outside [0, 1]: {s!r}"
    return None


def quantize(r: PointwiseReadout, s: float) -> tuple[float, float | int]:
    """(raw, score) for a sink score `s` already checked to lie in [0, 1]."""
    raw = r.lo + s * (r.hi - r.lo)
    snapped = round(raw, SNAP_DECIMALS)
    q = r.quantize
    if q == "round":
        return raw, math.floor(snapped + 0.5)
    if q == "floor":
        return raw, math.floor(snapped)
    if q == "ceil":
        return raw, math.ceil(snapped)
    if q == "thresholds":
        s_snapped = round(s, SNAP_DECIMALS)
        return raw, int(r.lo) + sum(1 for t in r.thresholds if t <= s_snapped)
    if q == "none":
        return raw, raw
    raise ValueError(f"unknown quantization {q!r}")


def read_pointwise(r: PointwiseReadout, candidates: Sequence[str], sink: Mapping[str, float]) -> ReadoutResult:
    problem = _check_sink("pointwise", candidates, sink)
    if problem:
        return ReadoutResult("pointwise", "invalid", dict(sink), problem)
    s = float(sink[candidates[0]])
    raw, score = quantize(r, s)
    return ReadoutResult("pointwise", "ok", dict(sink), None, raw, score)


def read_pairwise(r: PairwiseReadout, candidates: Sequence[str], sink: Mapping[str, float]) -> ReadoutResult:
    problem = _check_sink("pairwise", candidates, sink)
    if problem:
        return ReadoutResult("pairwise", "invalid", dict(sink), problem)
    a, b = float(sink[candidates[0]]), float(sink[candidates[1]])
    return ReadoutResult("pairwise", "ok", dict(sink), None, winner=verdict(r, a, b))


def verdict(r: PairwiseReadout, a: float, b: float) -> str:
    """The winner for checked sink scores `a` (first) and `b` (second)."""
    if a > b + r.epsilon:
        return "first"
    if b > a + r.epsilon:
        return "second"
    return r.on_tie  # "tie" | "abstain" | "first" | "second"


def read(readout: Readout, mode: str, candidates: Sequence[str], sink: Mapping[str, float]) -> ReadoutResult:
    """The readout of `mode` ("pointwise" | "pairwise"); raises ValueError if the program lacks that task."""
    if mode == "pointwise" and readout.pointwise is not None:
        return read_pointwise(readout.pointwise, candidates, sink)
    if mode == "pairwise" and readout.pairwise is not None:
        return read_pairwise(readout.pairwise, candidates, sink)
    raise ValueError(f"the program declares no {mode} task")
