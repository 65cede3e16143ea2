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
(`1 + 0.375 * 4` is 2.5, but a weighted mean may give 2.4999999999999996). That
rounding is Python's `round(x, 9)` exactly, for a whole column at once (`snap`).

Pairwise: the first candidate wins if `s_A > s_B + epsilon`, the second if
`s_B > s_A + epsilon`; otherwise `on_tie` decides (`tie`, `abstain`, `first`,
`second`). Swapping the candidates swaps first and second and keeps ties.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import attrs
import numpy as np

from gsrlang.lang.program import PairwiseReadout, PointwiseReadout, Readout
from gsrlang.semantics.kernels import scratch

__all__ = ["READOUT_REASON", "ReadoutResult", "SNAP_DECIMALS", "as_read", "quantize", "quantize_column", "read",
           "read_columns", "read_pairwise", "read_pointwise", "refused_repeats", "snap", "verdict", "verdict_column",
           "whole_column"]

SNAP_DECIMALS = 9
EXPECTED_CANDIDATES = {"pointwise": 1, "pairwise": 2}
READOUT_REASON = "readout: "  # how an item's result reason begins when the readout refused its sink


@attrs.frozen
class ReadoutResult:
    mode: str  # "pointwise" | "pairwise"
    status: str  # "ok" | "invalid"
    sink: dict  # candidate id -> the sink's Score (as given, even when invalid)
    reason: str | None = None
    raw: float | None = None  # pointwise: lo + s * (hi - lo)
    score: float | int | None = None  # pointwise: the quantized native score
    winner: str | None = None  # pairwise: "first" | "second" | "tie" | "abstain"

    @property
    def item_reason(self) -> str | None:
        """The reason an item's result gives when this readout refused its sink (`READOUT_REASON` and the
        readout's own); None when it is ok."""
        return None if self.status == "ok" else READOUT_REASON + str(self.reason)

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


def snap(x: np.ndarray) -> np.ndarray:
    """Each value rounded to SNAP_DECIMALS places exactly as Python's `round(v, SNAP_DECIMALS)` (a fresh array).

    Python rounds the exact binary value to the nearest 9-decimal number n / 10^9 (ties to
    even) and returns the double nearest to it. Here y = x * 10^9 is rounded once (an
    error of at most 2^-53 |y|); where y is farther from a half-integer than that, rint(y)
    is n, and n / 10^9 (both exact, one correctly rounded division) is Python's double.
    The rows that cannot be told that way (within a few ulps of a half) take `round`
    itself: about one in 10^5 of uniform values; a huge or non-finite column, all rows."""
    if not len(x):
        return x.astype(np.float64)
    big = max(float(x.max()), -float(x.min())) * 1e9
    if not big < 2.0 ** 52:  # (NaN too)
        return np.array([round(v, SNAP_DECIMALS) for v in x.tolist()], np.float64)
    rows, half = len(x), 0.5 - big * 2.0 ** -50
    out, doubt = np.empty(rows), np.empty(rows, bool)
    (y,) = scratch("snap", 1)
    for start in range(0, rows, len(y)):  # a block at a time, y in a buffer reused by every call (see `scratch`)
        stop = min(rows, start + len(y))
        yb, ob = y[:stop - start], out[start:stop]
        np.multiply(x[start:stop], 1e9, out=yb)
        np.rint(yb, out=ob)
        np.subtract(yb, ob, out=yb)
        np.abs(yb, out=yb)
        np.greater_equal(yb, half, out=doubt[start:stop])
        ob /= 1e9
    if doubt.any():
        rows = np.flatnonzero(doubt)
        out[rows] = [round(v, SNAP_DECIMALS) for v in x[rows].tolist()]
    return out


def _whole(snapped, how: str, floor, ceil):
    """The integer rules on a snapped value (a float or a column, with that kind's floor and ceil): `round`
    halves up, `floor`, `ceil`."""
    return floor(snapped + 0.5) if how == "round" else floor(snapped) if how == "floor" else ceil(snapped)


_NEAR = 2e-9  # beyond snap's reach (5e-10, and an ulp below 2^16) from a rule's boundary, with room to spare


def whole_column(raw: np.ndarray, how: str) -> np.ndarray:
    """`_whole` of every row of `raw` snapped (`how`: round, floor or ceil), bit for bit; a fresh array.

    snap moves a value by at most 5e-10 and an ulp, so it can change the integer only
    within that of a boundary (a half-integer for `round`, an integer for `floor` and
    `ceil`). Each row is taken twice, shifted by the rule's offset (0.5 for `round`) plus
    and minus _NEAR, and floored (ceiled); where the two agree (both monotone), no
    boundary lies within _NEAR - an ulp of the row, so snapped, it gives that integer,
    and the shift on the side away from the boundary it would cross (up for floor, down
    for ceil) gives the snapped value's sign of zero too. The rows where they differ,
    and a column with a value of 2^16 or more (or NaN), are snapped first. A block of
    rows at a time (in `scratch`'s buffer: see kernels.scratch)."""
    rows = len(raw)
    if not rows or not max(float(raw.max()), -float(raw.min())) < 2.0 ** 16:  # (NaN too)
        return _whole(snap(raw), how, np.floor, np.ceil)
    offset = 0.5 if how == "round" else 0.0
    rule = np.ceil if how == "ceil" else np.floor
    near = -_NEAR if how == "ceil" else _NEAR
    out, doubt = np.empty(rows), np.empty(rows, bool)
    (y,) = scratch("whole", 1)
    for start in range(0, rows, len(y)):
        stop = min(rows, start + len(y))
        xb, yb, ob = raw[start:stop], y[:stop - start], out[start:stop]
        np.add(xb, offset + near, out=ob)
        rule(ob, out=ob)
        np.add(xb, offset - near, out=yb)
        rule(yb, out=yb)
        np.not_equal(ob, yb, out=doubt[start:stop])
    if doubt.any():
        at = np.flatnonzero(doubt)
        out[at] = _whole(snap(raw[at]), how, np.floor, np.ceil)
    return out


class _Scalar:
    """The readout's primitives on one Python float (the item path: no array for one or two rows)."""

    snap = staticmethod(lambda x: round(x, SNAP_DECIMALS))
    whole = staticmethod(lambda x, how: _whole(round(x, SNAP_DECIMALS), how, math.floor, math.ceil))
    affine = staticmethod(lambda lo, s, span: lo + s * span)
    count = staticmethod(lambda cuts, x: sum(1 for t in cuts if t <= x))
    where = staticmethod(lambda c, x, y: x if c else y)


class _Columns:
    """The same primitives over float64 columns, bit for bit (`snap` is Python's `round`; the rest IEEE)."""

    snap = staticmethod(snap)
    whole = staticmethod(whole_column)
    where = staticmethod(np.where)

    @staticmethod
    def affine(lo, s, span):
        raw = s * span
        raw += lo  # (IEEE addition commutes: the bits of lo + s * span)
        return raw

    @staticmethod
    def count(cuts, x):
        cuts = np.asarray(cuts, np.float64)
        if np.all(cuts[1:] >= cuts[:-1]):  # increasing: the count of cuts at or below is a binary search
            return np.searchsorted(cuts, x, side="right").astype(np.float64)
        return (x[:, None] >= cuts[None, :]).sum(axis=1).astype(np.float64)


def _quantize(r: PointwiseReadout, s, cuts, ops) -> tuple:
    """The quantization rule, written once: (raw, score) for `s`, a float or a column (`ops` says which)."""
    raw = ops.affine(r.lo, s, r.hi - r.lo)  # lo + s (hi - lo)
    q = r.quantize
    if q in ("round", "floor", "ceil"):
        return raw, ops.whole(raw, q)
    if q == "thresholds":
        return raw, int(r.lo) + ops.count(cuts, ops.snap(s))
    if q == "none":
        return raw, raw
    raise ValueError(f"unknown quantization {q!r}")


def _verdict(r: PairwiseReadout, a, b, ops):
    """The pairwise rule, written once: for floats or columns."""
    return ops.where(a > b + r.epsilon, "first", ops.where(b > a + r.epsilon, "second", r.on_tie))


def quantize(r: PointwiseReadout, s: float) -> tuple[float, float | int]:
    """(raw, score) for a sink score `s` already checked to lie in [0, 1]."""
    return _quantize(r, s, r.thresholds, _Scalar)


def quantize_column(r: PointwiseReadout, s: np.ndarray, thresholds: Sequence[float] | None = None) -> tuple:
    """(raw, score) columns (float64, fresh) for sink scores `s`; `thresholds` replaces the readout's cut points."""
    raw, score = _quantize(r, s, r.thresholds if thresholds is None else thresholds, _Columns)
    return raw, score.copy() if score is raw else score


def verdict(r: PairwiseReadout, a: float, b: float) -> str:
    """The winner for checked sink scores `a` (first) and `b` (second)."""
    return _verdict(r, a, b, _Scalar)


def verdict_column(r: PairwiseReadout, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The winners (an object array of "first" | "second" | on_tie) for sink scores `a` (first) and `b`."""
    return _verdict(r, a, b, _Columns).astype(object)


def read_columns(readout: Readout, mode: str, s: np.ndarray, ok: np.ndarray, thresholds=None) -> tuple:
    """(raw, score, winner) of N items from their sink scores `s` (N, m); NaN / None where not `ok`."""
    if mode == "pointwise":
        raw, score = quantize_column(readout.pointwise, s[:, 0], thresholds)
        if not ok.all():
            score[~ok] = np.nan
        return raw, score, None
    winner = verdict_column(readout.pairwise, s[:, 0], s[:, 1])
    winner[~ok] = None
    return None, None, winner


def as_read(r: PointwiseReadout | None, raw, score, winner) -> list:
    """Per item, `read_columns`'s readout as `quantize` / `verdict` give it: (raw, score), a score an int
    unless `quantize = none` and None where the item is not ok; or, with no pointwise readout, the winner."""
    if r is None:
        return winner.tolist()
    whole = r.quantize != "none"
    return [(x, None if s != s else int(s) if whole else s) for x, s in zip(raw.tolist(), score.tolist())]


def read_pointwise(r: PointwiseReadout, candidates: Sequence[str], sink: Mapping[str, float]) -> ReadoutResult:
    problem = _check_sink("pointwise", candidates, sink)
    if problem:
        return ReadoutResult("pointwise", "invalid", dict(sink), problem)
    raw, score = quantize(r, float(sink[candidates[0]]))
    return ReadoutResult("pointwise", "ok", dict(sink), None, raw, score)


def read_pairwise(r: PairwiseReadout, candidates: Sequence[str], sink: Mapping[str, float]) -> ReadoutResult:
    problem = _check_sink("pairwise", candidates, sink)
    if problem:
        return ReadoutResult("pairwise", "invalid", dict(sink), problem)
    a, b = float(sink[candidates[0]]), float(sink[candidates[1]])
    return ReadoutResult("pairwise", "ok", dict(sink), None, winner=verdict(r, a, b))


def read(readout: Readout, mode: str, candidates: Sequence[str], sink: Mapping[str, float]) -> ReadoutResult:
    """The readout of `mode` ("pointwise" | "pairwise"); raises ValueError if the program lacks that task."""
    if mode == "pointwise" and readout.pointwise is not None:
        return read_pointwise(readout.pointwise, candidates, sink)
    if mode == "pairwise" and readout.pairwise is not None:
        return read_pairwise(readout.pairwise, candidates, sink)
    raise ValueError(f"the program declares no {mode} task")


def refused_repeats(readout: Readout, mode: str, candidates: Sequence[str], sink: Sequence[float]
                    ) -> ReadoutResult | None:
    """`read`'s refusal of an item whose candidate ids repeat, its sink scores `sink` (one per candidate), or
    None when no id repeats: the columns read a sink out without its ids, so every columnar path asks this of
    an item they leave valid."""
    if len(set(candidates)) == len(candidates):
        return None
    return read(readout, mode, candidates, dict(zip(candidates, sink)))
