"""The kernel table (gsrlang/semantics/kernels.py): one definition per operator, equal to the oracle.

`tests/oracle_operators.py` is kept as an independent oracle, used by tests only: each kernel,
run over one row, must give its value (bit for bit) or fail with its sentence.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import oracle_operators as oracle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsrlang.lang.catalog import default_catalog
from gsrlang.lang.types import BOOL, JType, ordinal
from gsrlang.semantics import kernels
from gsrlang.semantics.kernels import KERNELS, decode, encode, exact_sum, kernel
from gsrlang.semantics.values import ABSTAIN, RuntimeFailure

ROOT = Path(__file__).resolve().parents[1]
SCORE = JType("score", lo=0.0, hi=1.0)
SCORE_OPT = JType("score", lo=0.0, hi=1.0, optional=True)


def test_the_registry_holds_exactly_the_declared_operators_with_their_ports():
    catalog = default_catalog().operators
    assert set(KERNELS) == set(catalog)
    for name, sig in catalog.items():
        k = KERNELS[name]
        assert k.kind == sig.kind, name
        assert k.ports == tuple(p.name for p in sig.ports), name
        assert set(k.params) <= {p.name for p in sig.params} | {"out_type"}, name


def test_each_operator_is_defined_once_in_the_package():
    """One `@kernel("NAME", ...)` per operator in gsrlang/, and no other operator table in the package."""
    found: dict[str, int] = {}
    for path in (ROOT / "gsrlang").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r'^@kernel\("([a-z_]+)"', text, re.M):
            found[name] = found.get(name, 0) + 1
        assert not re.search(r'^@operator\(', text, re.M), path  # the oracle's registry lives in tests/
    assert found == {name: 1 for name in default_catalog().operators}
    with pytest.raises(ValueError, match="two kernels"):
        kernel("mean", "reduce")(lambda x, counted: None)


def test_semantics_is_a_leaf_without_io():
    allowed = {"__future__", "functools", "math", "inspect", "itertools", "threading", "typing", "weakref", "attrs",
               "numpy", "gsrlang.lang.types", "gsrlang.lang.program", "gsrlang.lang.catalog"}
    for path in (ROOT / "gsrlang/semantics").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module] if isinstance(n, ast.ImportFrom) else []
            for name in names:
                assert name in allowed or name.startswith("gsrlang.semantics."), f"{path.name} imports {name}"
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                assert n.func.id not in ("open", "print", "input"), path


# ---- exact sums --------------------------------------------------------------------------------------------------
_floats = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([0.0, -0.0, 1.0, 0.1, 0.2, 0.3, 1e-16,
                                                                              -1e-16, 2.0 ** -60, 1 - 2.0 ** -53]))


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 9).flatmap(lambda k: st.lists(st.lists(_floats, min_size=k, max_size=k), min_size=1,
                                                    max_size=20)))
def test_exact_sum_is_fsum_bit_for_bit(rows):
    x = np.array(rows, np.float64)
    got = exact_sum(x)
    expected = np.array([math.fsum(r) for r in rows])
    assert got.tobytes() == expected.tobytes(), (rows, got, expected)


def test_exact_sum_on_cancellations_and_halfway_cases():
    rows = [[1.0, 1e100, 1.0, -1e100], [1.0, 2.0 ** -53, 2.0 ** -106, 0.0], [0.1, 0.2, 0.3, -0.6],
            [-0.0, -0.0, -0.0], [1.0, -1.0, 2.0 ** -1074], [3.0, 2.0 ** -52, 2.0 ** -105]]
    for row in rows:
        assert exact_sum(np.array([row])).tobytes() == np.array([math.fsum(row)]).tobytes(), row


# Adversarial slots for the vectorised path (17 rows or more): any magnitude (sums kept finite), subnormals,
# halfway cases, binary and decimal grids (the ties the remainders land on exactly), exact cancellations.
_wild = st.one_of(st.floats(-1e300, 1e300, allow_nan=False), st.integers(-2 ** 20, 2 ** 20).map(lambda i: i / 1024),
                  st.integers(-1000, 1000).map(lambda i: i / 1000),
                  st.sampled_from([0.0, -0.0, 1.0, -1.0, 3.0, 0.1, 0.3, -0.6, 2.0 ** -53, -2.0 ** -53, 2.0 ** -54,
                                   1 + 2.0 ** -52, 2.0 ** -106, 2.0 ** -1074, -2.0 ** -1022, 1e300, -1e300,
                                   # about the grid below which remainders may not sum exactly, for slots near 1
                                   2.0 ** -44, -2.0 ** -45, 2.0 ** -46, 3 * 2.0 ** -47, (1 - 2.0 ** -53) * 2.0 ** -44]))


@st.composite
def _column(draw):
    k = draw(st.integers(3, 9))
    rows = draw(st.lists(st.lists(_wild, min_size=k, max_size=k), min_size=17, max_size=60))
    for row in rows:  # a slot cancelled exactly by another
        i, j = draw(st.integers(0, k - 1)), draw(st.integers(0, k - 1))
        if i != j and draw(st.booleans()):
            row[j] = -row[i]
    weights = draw(st.none() | st.lists(st.one_of(st.floats(-1e3, 1e3, allow_nan=False),
                                                  st.sampled_from([0.1, 0.25, -0.5, 2.0 ** -60])),
                                        min_size=k, max_size=k))
    return rows, weights


@settings(max_examples=300, deadline=None)
@given(_column())
def test_exact_sum_of_a_column_is_fsum_bit_for_bit(column):
    rows, weights = column
    x = np.array(rows, np.float64)
    products = x if weights is None else x * np.array(weights)
    expected = np.array([math.fsum(r) for r in products.tolist()])
    for layout in (np.asfortranarray, np.ascontiguousarray):
        assert exact_sum(layout(x), weights).tobytes() == expected.tobytes(), (rows, weights)
    columns = [c.copy() for c in x.T]
    for _ in range(2):  # the second time with the columns' magnitudes known
        assert exact_sum(columns, weights).tobytes() == expected.tobytes(), (rows, weights)


def test_exact_sum_proves_tuning_columns_without_falling_back(monkeypatch):
    """Decimal and quarter-step scores, booleans and zero rows, times positive or signed weights, over three
    blocks: every row is proven by the offset sum (ties included); a near-tie with a tiny remainder is not."""
    fell = []
    fallback = kernels._two_sum_sum
    monkeypatch.setattr(kernels, "_two_sum_sum", lambda y: fell.append(len(y)) or fallback(y))
    rng = np.random.default_rng(9)
    n = 40_000
    for x in (rng.random((n, 4)).round(3), rng.integers(0, 5, (n, 5)) / 4, rng.integers(0, 2, (n, 3)) * 1.0):
        x[rng.random(n) < 0.2] = 0.0
        for w in (rng.random(x.shape[1]).round(3), rng.random(x.shape[1]) - 0.5):
            expected = np.array([math.fsum(r) for r in (x * w).tolist()])
            assert exact_sum(x, w.tolist()).tobytes() == expected.tobytes()
    assert fell == []
    x = np.tile([1.0, 2.0 ** -53, 2.0 ** -200], (20, 1))  # just above a tie: 1 + 2^-52
    assert exact_sum(x).tolist() == [1 + 2.0 ** -52] * 20
    assert fell == [20]


def test_exact_sum_of_columns_seen_before_needs_no_doubt_test(monkeypatch):
    """Columns passed again (as tuning passes the criteria for every candidate) have known magnitudes: every
    block is proven exact without the interval test, and a new column is not taken for an old one."""
    exact = []
    offset_sum = kernels._offset_sum
    monkeypatch.setattr(kernels, "_offset_sum", lambda *a: exact.append(a[3]) or offset_sum(*a))
    rng = np.random.default_rng(4)
    columns = [rng.random(40_000).round(3) for _ in range(4)]
    for weights in ([0.4, 0.3, 0.2, 0.1], [0.1, 0.7, 0.05, 0.15]):
        expected = np.array([math.fsum(r) for r in (np.array(columns).T * weights).tolist()])
        assert exact_sum(columns, weights).tobytes() == expected.tobytes()
    blocks = -(-40_000 // kernels.BLOCK)
    assert exact == [False] * blocks + [True] * blocks
    exact.clear()
    columns[2] = columns[2] * 2.0 ** -60  # a new array: magnitudes unknown, and far below the others'
    expected = np.array([math.fsum(r) for r in np.array(columns).T.tolist()])
    assert exact_sum(columns).tobytes() == expected.tobytes()
    assert exact_sum(columns).tobytes() == expected.tobytes()
    assert exact == [False] * 2 * blocks


def test_exact_sum_remembers_a_bounded_number_of_columns():
    rng = np.random.default_rng(6)
    columns = [rng.random(20) for _ in range(900)]  # all alive: none of them can be dropped as dead
    for i in range(0, 900, 3):
        expected = np.array([math.fsum(r) for r in np.array(columns[i:i + 3]).T.tolist()])
        assert exact_sum(columns[i:i + 3]).tobytes() == expected.tobytes()
        assert len(kernels._KNOWN) <= 256


# ---- kernels over one row equal the oracle -----------------------------------------------------------------------
FIVE = ordinal([str(i) for i in range(1, 6)], numbered=True)
TONE = JType("nominal", labels=("polite", "neutral", "rude"))


def _one(op, ports, types, **params):
    """(value or ABSTAIN, or the failure sentence) of the kernel over one row."""
    k = KERNELS[op]
    args = []
    for p, t in zip(ports, types):
        args.append([encode(ti, [v]) for v, ti in zip(p, t)] if isinstance(p, list) else encode(t, [p]))
    out_type = params.pop("out_type")
    kw = {**params, **{f"{name}_type": (t[0] if isinstance(t, list) else t) for name, t in zip(k.ports, types)},
          "out_type": out_type}
    out = k.fn(*args, **kw)
    if out.failed is not None and out.failed[0]:
        return "fails: " + k.why(0, *args, **kw)
    return decode(out_type, out.values, out.abstain)[0]


def _oracle(op, ports, types, **params):
    params.pop("out_type")
    impl = oracle.OPERATORS[op]
    for port in impl.typed_ports:
        params[f"{port}_type"] = types[0]
    try:
        return impl.fn(*ports, **params)
    except RuntimeFailure as exc:
        return f"fails: {exc}"


def _same(a, b) -> bool:
    if type(a) is float and type(b) is float:
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b or (a is ABSTAIN and b is ABSTAIN)


scores = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.5, 0.1, 1 / 3]), st.just(ABSTAIN))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["mean", "weighted_mean", "min", "max", "median", "product"]),
       st.lists(scores, min_size=1, max_size=6), st.sampled_from(["skip", "zero", "partial", "fail"]), st.data())
def test_score_reducers_equal_the_oracle(op, items, policy, data):
    params = {"on_abstain": policy, "out_type": SCORE}
    if op == "weighted_mean" and data.draw(st.booleans()):
        params["weights"] = data.draw(st.lists(st.sampled_from([1.0, 2.0, 0.5, -0.5, 0.0, 3.25, -1.0]),
                                               min_size=len(items), max_size=len(items)))
    types = [[SCORE_OPT] * len(items)]
    got, expected = _one(op, [items], types, **dict(params)), _oracle(op, [items], types, **dict(params))
    assert _same(got, expected), (op, items, params, got, expected)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["all", "any", "fraction"]), st.lists(st.sampled_from([True, False, ABSTAIN]), min_size=1,
                                                              max_size=6), st.sampled_from(["skip", "zero", "fail"]))
def test_bool_reducers_equal_the_oracle(op, items, policy):
    out = SCORE if op == "fraction" else BOOL
    types = [[JType("bool", optional=True)] * len(items)]
    got = _one(op, [items], types, on_abstain=policy, out_type=out)
    expected = _oracle(op, [items], types, on_abstain=policy, out_type=out)
    assert _same(got, expected), (op, items, policy, got, expected)


@pytest.mark.parametrize("case", [
    ("normalize", [True], [BOOL], {}, SCORE), ("normalize", ["4"], [FIVE], {}, SCORE),
    ("normalize", [ABSTAIN], [FIVE], {}, SCORE), ("scale", [7.5], [JType("score", lo=5.0, hi=10.0)], {}, SCORE),
    ("threshold", [0.5], [SCORE], {"at": 0.5}, BOOL), ("not", [True], [BOOL], {}, BOOL),
    ("invert", [0.25], [SCORE], {}, SCORE), ("map", ["rude"], [TONE], {"to": {"rude": 0.0, "polite": 1.0}}, SCORE),
    ("map", ["neutral"], [TONE], {"to": {"rude": 0.0, "polite": 1.0}}, SCORE),
    ("default", [ABSTAIN], [SCORE_OPT], {"value": 0.5}, SCORE), ("default", ["2"], [FIVE], {"value": "3"}, FIVE),
    ("default", [ABSTAIN], [FIVE], {"value": "3"}, FIVE), ("at_most", ["2"], [FIVE], {"level": "2"}, BOOL),
    ("at_least", ["2"], [FIVE], {"level": "3"}, BOOL), ("is", ["rude"], [TONE], {"level": "rude"}, BOOL),
    ("is", [False], [BOOL], {"level": False}, BOOL), ("cap", [0.9, True], [SCORE, BOOL], {"at": 0.2}, SCORE),
    ("cap", [0.1, True], [SCORE, BOOL], {"at": 0.2}, SCORE), ("floor", [0.1, True], [SCORE, BOOL], {"at": 0.8}, SCORE),
    ("floor", [0.1, False], [SCORE, BOOL], {"at": 0.8}, SCORE), ("veto", [0.7, True], [SCORE, BOOL], {}, SCORE),
    ("mask", [0.7, True], [SCORE, BOOL], {}, SCORE_OPT), ("mask", [0.7, False], [SCORE, BOOL], {}, SCORE_OPT),
], ids=lambda c: f"{c[0]}-{c[1]}")
def test_transforms_and_gates_equal_the_oracle(case):
    op, ports, types, params, out = case
    got = _one(op, ports, types, **params, out_type=out)
    expected = _oracle(op, ports, types, **params, out_type=out)
    assert _same(got, expected), (case, got, expected)


def test_exact_sum_over_a_large_column_is_fsum_bit_for_bit():
    """Weighted sums of the kind tuning makes, 20,000 rows of 3 to 9 slots: the vectorised path, not fsum's."""
    rng = np.random.default_rng(5)
    for k in (3, 4, 5, 9):
        x = rng.random((20_000, k)) * np.array([0.35, 0.25, -0.25, 0.15, 1.0, 2.0, -1.0, 0.5, 3.25][:k])
        x[::7] = np.round(x[::7], 3)
        got = exact_sum(x)
        expected = np.array([math.fsum(r) for r in x.tolist()])
        assert got.tobytes() == expected.tobytes()


def test_exact_sum_and_snap_over_several_blocks(monkeypatch):
    """Blocks of 1,000 rows (the last one short), in the buffers `scratch` keeps: every row as fsum and round."""
    from gsrlang.semantics.readout import snap

    monkeypatch.setattr(kernels, "BLOCK", 1000)
    rng = np.random.default_rng(8)
    columns = [rng.random(2_500).round(3) * v for v in (0.5, 0.25, 2.0, 1e-3)]
    for _ in range(2):  # the second time: the columns' magnitudes are known
        expected = np.array([math.fsum(r) for r in (np.array(columns).T * [0.4, 0.3, 0.2, 0.1]).tolist()])
        assert exact_sum(columns, [0.4, 0.3, 0.2, 0.1]).tobytes() == expected.tobytes()
    assert len(kernels.scratch("exact_sum", 5)[0]) == 1000
    x = np.concatenate([rng.random(1_500) * 4 + 1, (rng.integers(0, 8, 1_000) + 0.5) / 2 + 2.0 ** -50])
    assert snap(x).tolist() == [round(v, 9) for v in x.tolist()]


def test_a_clamped_kernels_unit_output_skips_the_range_check_and_nothing_else():
    """`unfit` trusts a clamped kernel's values to lie in [0, 1] only where the node's type holds [0, 1]; its
    abstentions are still checked, and every kernel that says it is clamped gives values in [0, 1]."""
    from gsrlang.semantics.settle import unfit

    assert {name for name, k in KERNELS.items() if k.clamped} == {"mean", "weighted_mean"}
    values, none = np.array([0.0, 0.5, 1.0] * 10), np.zeros(30, bool)
    assert unfit(SCORE, True)(values + 2.0, none) is None  # not looked at
    assert unfit(SCORE)(values + 2.0, none).all()
    narrow = unfit(JType("score", lo=0.25, hi=1.0), True)(values, none)
    assert narrow is not None and narrow.tolist() == [True, False, False] * 10
    abstained = none.copy()
    abstained[4] = True
    assert unfit(SCORE, True)(values, abstained).tolist() == abstained.tolist()
    assert unfit(SCORE_OPT, True)(values, abstained) is None
    rng = np.random.default_rng(5)
    items = [kernels.NodeValues(v, np.zeros(40, bool), np.zeros(40, bool))
             for v in (rng.normal(0.5, 2.0, 40), np.full(40, np.nan), rng.normal(0.5, 2.0, 40))]
    for name in ("mean", "weighted_mean"):
        kw = {"weights": [0.5, -0.2, 0.7]} if name == "weighted_mean" else {}
        out = KERNELS[name].fn(items, **kw).values
        assert ((out >= 0.0) & (out <= 1.0)).all() and not np.signbit(out).any()
