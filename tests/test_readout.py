"""The readout: quantization onto the native scale, pairwise verdicts, and the checks made first."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsrlang.lang.program import PairwiseReadout, PointwiseReadout, Readout
from gsrlang.semantics.readout import quantize, read, read_pairwise, read_pointwise


def pw(q="round", lo=1.0, hi=5.0, thresholds=()):
    return PointwiseReadout(lo, hi, q, tuple(thresholds))


@pytest.mark.parametrize("s, expected", [(0.0, 1), (0.125, 2), (0.375, 3), (0.5, 3), (0.625, 4), (0.99, 5), (1.0, 5)])
def test_round_is_half_up(s, expected):
    assert quantize(pw("round"), s)[1] == expected


def test_floor_ceil_none():
    assert quantize(pw("floor"), 0.6)[1] == 3  # raw 3.4
    assert quantize(pw("ceil"), 0.6)[1] == 4
    assert quantize(pw("ceil"), 0.5)[1] == 3  # exactly 3, not 4
    raw, score = quantize(pw("none"), 0.6)
    assert raw == score == pytest.approx(3.4)


def test_last_bit_errors_do_not_flip_halves_or_integers():
    s = (2.4999999999999996 - 1) / 4  # a half that floating point put just below
    assert quantize(pw("round"), s)[1] == 3
    assert quantize(pw("ceil"), 0.5 + 1e-16)[1] == 3
    assert quantize(pw("floor"), 0.7499999999999999)[1] == 4


def test_thresholds_count_cut_points_at_or_below_the_score():
    r = pw("thresholds", thresholds=(0.2, 0.4, 0.6, 0.8))
    assert [quantize(r, s)[1] for s in (0.0, 0.19, 0.2, 0.5, 0.8, 1.0)] == [1, 1, 2, 3, 5, 5]


def test_pointwise_result_carries_raw_and_sink():
    r = read_pointwise(pw(), ["A"], {"A": 0.6})
    assert r.status == "ok" and r.score == 3 and r.raw == pytest.approx(3.4) and r.sink == {"A": 0.6}


@pytest.mark.parametrize("candidates, sink, message", [
    (["A"], {}, "no score for candidate A"),
    (["A"], {"A": 0.5, "B": 0.2}, "unknown candidate B"),
    (["A", "B"], {"A": 0.5, "B": 0.2}, "needs 1 candidate"),
    (["A"], {"A": math.nan}, "not finite"),
    (["A"], {"A": math.inf}, "not finite"),
    (["A"], {"A": 1.5}, "outside [0, 1]"),
    (["A"], {"A": -0.1}, "outside [0, 1]"),
    (["A"], {"A": "0.5"}, "not a number"),
    (["A"], {"A": True}, "not a number"),
])
def test_pointwise_checks_come_first(candidates, sink, message):
    r = read_pointwise(pw(), candidates, sink)
    assert r.status == "invalid" and message in r.reason and r.score is None


def test_pairwise_epsilon_and_policies():
    for policy in ("tie", "abstain", "first", "second"):
        r = PairwiseReadout(0.05, policy)
        assert read_pairwise(r, ["A", "B"], {"A": 0.8, "B": 0.7}).winner == "first"
        assert read_pairwise(r, ["A", "B"], {"A": 0.7, "B": 0.8}).winner == "second"
        assert read_pairwise(r, ["A", "B"], {"A": 0.72, "B": 0.7}).winner == policy
        assert read_pairwise(r, ["A", "B"], {"A": 0.7, "B": 0.7}).winner == policy


def test_pairwise_checks():
    r = PairwiseReadout()
    assert "needs 2 candidates" in read_pairwise(r, ["A"], {"A": 0.5}).reason
    assert "repeat" in read_pairwise(r, ["A", "A"], {"A": 0.5}).reason
    assert "no score for candidate B" in read_pairwise(r, ["A", "B"], {"A": 0.5}).reason
    assert "not finite" in read_pairwise(r, ["A", "B"], {"A": 0.5, "B": math.nan}).reason


def test_read_needs_the_task():
    with pytest.raises(ValueError, match="no pairwise task"):
        read(Readout(pointwise=pw()), "pairwise", ["A", "B"], {"A": 0.1, "B": 0.2})


SWAP = {"first": "second", "second": "first", "tie": "tie", "abstain": "abstain"}
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=500, deadline=None)
@given(unit, unit, st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3]), st.sampled_from(["tie", "abstain"]))
def test_pairwise_readout_is_antisymmetric(a, b, eps, policy):
    r = PairwiseReadout(eps, policy)
    forward = read_pairwise(r, ["A", "B"], {"A": a, "B": b}).winner
    backward = read_pairwise(r, ["A", "B"], {"A": b, "B": a}).winner
    assert backward == SWAP[forward]


@settings(max_examples=300, deadline=None)
@given(unit, unit, st.sampled_from(["first", "second"]))
def test_pairwise_decisive_verdicts_swap_under_positional_tie_policies(a, b, policy):
    r = PairwiseReadout(0.05, policy)
    forward = read_pairwise(r, ["A", "B"], {"A": a, "B": b}).winner
    backward = read_pairwise(r, ["A", "B"], {"A": b, "B": a}).winner
    if abs(a - b) > 0.05 + 1e-12:
        assert backward == SWAP[forward]
    elif abs(a - b) < 0.05 - 1e-12:
        assert forward == backward == policy


@settings(max_examples=300, deadline=None)
@given(unit, st.sampled_from(["round", "floor", "ceil", "none"]))
def test_pointwise_scores_stay_on_the_scale(s, q):
    raw, score = quantize(pw(q), s)
    assert 1.0 <= raw <= 5.0 and 1 <= score <= 5


def _python_quantize(r, s):
    """The readout's definition in plain Python: what `quantize_column` must give, row by row."""
    raw = r.lo + s * (r.hi - r.lo)
    snapped = round(raw, 9)
    if r.quantize == "round":
        return raw, math.floor(snapped + 0.5)
    if r.quantize == "floor":
        return raw, math.floor(snapped)
    if r.quantize == "ceil":
        return raw, math.ceil(snapped)
    if r.quantize == "thresholds":
        return raw, int(r.lo) + sum(1 for t in r.thresholds if t <= round(s, 9))
    return raw, raw


def _near_boundaries(rng, n):
    """Sink scores whose raw score lies within a few ulps of a half, an integer or a 9-decimal half."""
    k = rng.integers(0, 8 * 10**9, n)
    base = (k + rng.choice([0.0, 0.5], n)) / 1e9 / 4.0  # raw = 1 + 4 s near k / 10^9 (a half at 9 decimals)
    halves = (rng.integers(0, 9, n) + 0.5 - 1.0) / 4.0  # raw exactly at a half
    s = np.concatenate([base, halves, rng.uniform(0, 1, n)])
    steps = rng.integers(-3, 4, len(s))
    out = s.copy()
    for _ in range(3):  # a few ulps either way
        out = np.where(steps > 0, np.nextafter(out, 2.0), np.where(steps < 0, np.nextafter(out, -1.0), out))
        steps = steps - np.sign(steps)
    return np.clip(out, 0.0, 1.0)


@pytest.mark.parametrize("q", ["round", "floor", "ceil", "thresholds", "none"])
def test_the_column_readout_is_pythons_rounding_at_every_boundary(q):
    from gsrlang.semantics.readout import quantize_column, snap

    rng = np.random.default_rng(3)
    r = pw(q, thresholds=(0.125, 0.375, 0.5, 0.6250000005) if q == "thresholds" else ())
    s = _near_boundaries(rng, 4000)
    raw, score = quantize_column(r, s)
    expected = [_python_quantize(r, v) for v in s.tolist()]
    assert raw.tolist() == [e[0] for e in expected]
    assert score.tolist() == [float(e[1]) for e in expected]
    assert [quantize(r, v) for v in s[:200].tolist()] == expected[:200]
    assert snap(raw).tolist() == [round(v, 9) for v in raw.tolist()]
    assert not np.array_equal(np.round(raw, 9), snap(raw)) or q == "none"  # numpy's rounding alone is not it


_SNAPPED_RULE = {"round": lambda v: math.floor(v + 0.5), "floor": math.floor, "ceil": math.ceil}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["round", "floor", "ceil"]),
       st.lists(st.tuples(st.integers(-1000, 1000) | st.integers(-65_000, 65_000), st.sampled_from([0.0, 0.5]),
                          st.integers(-40, 40), st.integers(-3, 3)), min_size=17, max_size=60),
       st.floats(-100.0, 100.0) | st.sampled_from([2.0 ** 16, -1e300, math.nan, -0.0]))
def test_whole_column_is_the_rule_of_the_snapped_value_near_every_boundary(how, near, extra):
    """`whole_column` (two shifted floors, snap only where they differ) against the rule on Python's `round`,
    on rows within a few 1e-10 and ulps of an integer or a half (where snap moves across, onto, or not quite
    onto a boundary), and one more value, perhaps past 2^16, NaN or -0.0 (the whole column snapped then)."""
    from gsrlang.semantics.readout import snap, whole_column

    raw = []
    for base, half, tenths, ulps in near:
        v = base + half + tenths * 1e-10
        for _ in range(abs(ulps)):
            v = math.nextafter(v, math.copysign(math.inf, ulps))
        raw.append(v)
    x = np.array(raw + [extra, -0.0, -0.3, 0.3])
    got = whole_column(x, how)
    snapped = snap(x)
    reference = np.floor(snapped + 0.5) if how == "round" else np.floor(snapped) if how == "floor" else np.ceil(snapped)
    assert got.tobytes() == reference.tobytes()  # the same bits, the sign of a zero too
    assert [g for g in got.tolist() if g == g] == [float(_SNAPPED_RULE[how](round(v, 9))) for v in x.tolist() if v == v]
