"""Operator semantics against hand-computed cases, the catalogue parity, and interval properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle_operators import OPERATORS, apply, param_names, port_names

from gsrlang.lang.catalog import default_catalog
from gsrlang.lang.check.driver import analyze
from gsrlang.lang.types import BOOL, JType, ordinal
from gsrlang.semantics.compose import Plan
from gsrlang.semantics.values import ABSTAIN, RuntimeFailure

A = ABSTAIN


# ---- the catalogue and the implementations agree --------------------------------------------------------
def test_every_catalogue_operator_has_an_implementation_and_vice_versa():
    assert set(default_catalog().operators) == set(OPERATORS)


@pytest.mark.parametrize("name", sorted(default_catalog().operators))
def test_implementation_signature_matches_the_catalogue(name):
    sig = default_catalog().operator(name)
    impl = OPERATORS[name]
    assert impl.kind == sig.kind
    assert port_names(impl.fn) == tuple(p.name for p in sig.ports)
    declared = {p.name for p in sig.params} | {f"{port}_type" for port in impl.typed_ports}
    assert set(param_names(impl.fn)) == declared


# ---- TRANSFORM ---------------------------------------------------------------------------------------------------
def test_normalize_bool_and_ordinal_levels():
    assert apply("normalize", True, x_type=BOOL) == 1.0
    assert apply("normalize", False, x_type=BOOL) == 0.0
    five = ordinal([str(i) for i in range(1, 6)], numbered=True)
    assert [apply("normalize", str(k), x_type=five) for k in range(1, 6)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert apply("normalize", A, x_type=five) is A


def test_normalize_uses_explicit_level_values():
    program = analyze("""
rubric r
task pointwise { scale = 1..5 }
criterion c: Ordinal{poor, fair, good} = human(field: "c") { level fair "so so" = 0.8 }
sink normalize(c)
""").program
    t = program.node("c").type
    assert apply("normalize", "fair", x_type=t) == 0.8
    assert apply("normalize", "good", x_type=t) == 1.0


def test_scale_maps_an_interval_onto_unit():
    t = JType("score", 1.0, 3.0)
    assert apply("scale", 1.0, x_type=t) == 0.0
    assert apply("scale", 2.0, x_type=t) == 0.5
    assert apply("scale", 3.0, x_type=t) == 1.0
    assert apply("scale", A, x_type=t) is A


def test_threshold_not_invert():
    assert apply("threshold", 0.5, at=0.5) is True
    assert apply("threshold", 0.49, at=0.5) is False
    assert apply("threshold", A, at=0.5) is A
    assert apply("not", True) is False and apply("not", A) is A
    assert apply("invert", 0.25) == 0.75 and apply("invert", A) is A


def test_map_and_default():
    assert apply("map", "b", to={"a": 0, "b": 0.7}) == 0.7
    assert apply("map", A, to={"a": 0}) is A
    with pytest.raises(RuntimeFailure):
        apply("map", "zz", to={"a": 0})
    assert apply("default", A, value=False) is False
    assert apply("default", True, value=False) is True
    assert apply("default", A, value=0) == 0.0 and isinstance(apply("default", A, value=0), float)


# ---- REDUCE: scores -------------------------------------------------------------------------------------------
def test_mean_and_every_abstention_policy():
    assert apply("mean", [0.2, 0.4, 0.9]) == pytest.approx(0.5)
    assert apply("mean", [1.0, A], on_abstain="skip") == 1.0
    assert apply("mean", [1.0, A], on_abstain="zero") == 0.5
    assert apply("mean", [1.0, A], on_abstain="partial") == 0.75
    assert apply("mean", [1.0, A], on_abstain="fail") == 0.5
    with pytest.raises(RuntimeFailure, match="every item of `mean` abstained"):
        apply("mean", [A, A], on_abstain="skip")


def test_weighted_mean_positive_weights():
    assert apply("weighted_mean", [1.0, 0.5], weights=[0.7, 0.3]) == pytest.approx(0.85)
    assert apply("weighted_mean", [1.0, 0.5], weights=[7, 3]) == pytest.approx(0.85)  # not normalised
    assert apply("weighted_mean", [1.0, 0.0, 0.5], weights="equal") == 0.5


def test_weighted_mean_negative_weights_divide_by_positive_sum_and_clamp():
    # (1*0.8 - 1*0.2) / 1
    assert apply("weighted_mean", [0.8, 0.2], weights=[1, -1]) == pytest.approx(0.6)
    # (2*1.0 + 1*0.5 - 1*1.0) / 3 = 0.5
    assert apply("weighted_mean", [1.0, 0.5, 1.0], weights=[2, 1, -1]) == pytest.approx(0.5)
    # (0.2 - 1.0) / 1 < 0 -> clamped to 0
    assert apply("weighted_mean", [0.2, 1.0], weights=[1, -1]) == 0.0


def test_weighted_mean_only_penalties_start_at_one():
    assert apply("weighted_mean", [0.5], weights=[-1]) == 0.5
    # 1 + (-2*1.0 - 1*0.0) / 3
    assert apply("weighted_mean", [1.0, 0.0], weights=[-2, -1]) == pytest.approx(1 / 3)
    assert apply("weighted_mean", [0.0, 0.0], weights=[-2, -1]) == 1.0


def test_weighted_mean_abstention_policies_with_penalties():
    items, weights = [1.0, A], [1, -1]
    assert apply("weighted_mean", items, weights=weights, on_abstain="skip") == 1.0  # penalty left out
    assert apply("weighted_mean", items, weights=weights, on_abstain="zero") == 1.0  # penalty of 0
    assert apply("weighted_mean", items, weights=weights, on_abstain="partial") == 0.5
    assert apply("weighted_mean", items, weights=weights, on_abstain="fail") == 0.0  # worst case: full penalty
    items, weights = [A, 1.0], [1, 1]
    assert apply("weighted_mean", items, weights=weights, on_abstain="fail") == 0.5  # worst case: 0 credit
    assert apply("weighted_mean", items, weights=weights, on_abstain="skip") == 1.0
    assert apply("weighted_mean", [A, 0.5], weights=[2, 2], on_abstain="partial") == 0.5


def test_weighted_mean_all_skipped_or_zero_weights_fail_clearly():
    with pytest.raises(RuntimeFailure, match="abstained"):
        apply("weighted_mean", [A, A], weights=[1, 2], on_abstain="skip")
    with pytest.raises(RuntimeFailure, match="zero"):
        apply("weighted_mean", [0.5, 0.5], weights=[0, 0])


def test_min_max_median_product():
    assert apply("min", [0.3, 0.9, 0.5]) == 0.3
    assert apply("max", [0.3, 0.9, 0.5]) == 0.9
    assert apply("median", [0.3, 0.9, 0.5]) == 0.5
    assert apply("median", [0.2, 0.9, 0.4, 1.0]) == pytest.approx(0.65)
    assert apply("product", [0.5, 0.5, 0.8]) == pytest.approx(0.2)
    assert apply("min", [0.3, A], on_abstain="skip") == 0.3
    assert apply("min", [0.3, A], on_abstain="partial") == 0.3
    assert apply("min", [0.8, A], on_abstain="partial") == 0.5
    assert apply("max", [0.3, A], on_abstain="fail") == 0.3
    assert apply("max", [0.3, A], on_abstain="zero") == 0.3
    assert apply("median", [0.2, A, 0.6], on_abstain="skip") == pytest.approx(0.4)
    assert apply("product", [0.5, A], on_abstain="partial") == 0.25
    assert apply("product", [0.5, A], on_abstain="fail") == 0.0
    for op in ("min", "max", "median", "product"):
        with pytest.raises(RuntimeFailure):
            apply(op, [A], on_abstain="skip")


# ---- REDUCE: booleans --------------------------------------------------------------------------------------------
def test_all_any_fraction():
    assert apply("all", [True, True]) is True and apply("all", [True, False]) is False
    assert apply("any", [False, True]) is True and apply("any", [False, False]) is False
    assert apply("fraction", [True, False, True, True]) == 0.75


@pytest.mark.parametrize("op, policy, expected", [
    ("all", "skip", True), ("all", "zero", False), ("all", "fail", False),
    ("any", "skip", False), ("any", "zero", False), ("any", "fail", True),
    ("fraction", "skip", 0.0), ("fraction", "zero", 0.0), ("fraction", "fail", 0.0),
])
def test_boolean_abstention_policies(op, policy, expected):
    items = [True, A] if op == "all" else [False, A]
    assert apply(op, items, on_abstain=policy) == expected


def test_fraction_policies_change_the_denominator():
    assert apply("fraction", [True, A], on_abstain="skip") == 1.0
    assert apply("fraction", [True, A], on_abstain="zero") == 0.5
    with pytest.raises(RuntimeFailure):
        apply("any", [A, A], on_abstain="skip")


# ---- GATE ------------------------------------------------------------------------------------------------------
def test_gates():
    assert apply("cap", 0.9, True, at=0.25) == 0.25
    assert apply("cap", 0.1, True, at=0.25) == 0.1
    assert apply("cap", 0.9, False, at=0.25) == 0.9
    assert apply("floor", 0.1, True, at=0.4) == 0.4
    assert apply("floor", 0.9, True, at=0.4) == 0.9
    assert apply("floor", 0.1, False, at=0.4) == 0.1
    assert apply("veto", 0.9, True) == 0.0
    assert apply("veto", 0.9, False) == 0.9
    assert apply("mask", "good", True) is A
    assert apply("mask", "good", False) == "good"


def test_a_cap_outside_the_sink_interval_is_rejected_at_check_time():
    analysis = analyze("""
rubric r
task pointwise { scale = 1..5 }
criterion a: Score = human(field: "a")
criterion b: Bool = rule.word_count(above: 3)
sink cap(base: a, trigger: b, at: 1.5)
""")
    assert analysis.program is None
    assert any(d.is_error and "1.5" in d.message for d in analysis.diagnostics)


# ---- properties: every Score output stays in its interval -----------------------------------------------------------
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
maybe_unit = st.one_of(unit, st.just(A))
policies = st.sampled_from(["skip", "zero", "partial", "fail"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(maybe_unit, st.floats(min_value=-5, max_value=5, allow_nan=False)), min_size=1,
                max_size=6), policies)
def test_weighted_mean_stays_in_unit_interval(pairs, policy):
    items = [x for x, _ in pairs]
    weights = [w for _, w in pairs]
    try:
        s = apply("weighted_mean", items, weights=weights, on_abstain=policy)
    except RuntimeFailure:
        return  # every item skipped, or no weight left: the item becomes invalid
    assert isinstance(s, float) and 0.0 <= s <= 1.0 and math.copysign(1, s) == 1


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["mean", "min", "max", "median", "product"]), st.lists(maybe_unit, min_size=1, max_size=6),
       policies)
def test_score_reducers_stay_in_unit_interval(op, items, policy):
    try:
        s = apply(op, items, on_abstain=policy)
    except RuntimeFailure:
        return
    assert isinstance(s, float) and 0.0 <= s <= 1.0


PROGRAM = """
rubric p
task pointwise { scale = 1..5 }
criterion a: Score[1..3]? = human(field: "a")
criterion b: Ordinal[1..4] = human(field: "b")
criterion c: Bool = human(field: "c")
criterion d: Score = human(field: "d")
node body = weighted_mean(items: [scale(a), normalize(b), d, invert(d)], weights: [0.5, 2, -1, 0.25], on_abstain: skip)
node gated = cap(base: body, trigger: c, at: 0.4)
node low = floor(base: min(items: [gated, median(items: [d, normalize(b)])]), trigger: not(c), at: 0.1)
sink veto(base: low, trigger: threshold(product(items: [d, normalize(c)]), at: 0.99))
"""


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(min_value=1, max_value=3, allow_nan=False), st.just(A)),
       st.sampled_from(["1", "2", "3", "4"]), st.booleans(), unit)
def test_every_operator_output_of_a_program_fits_its_declared_type(a, b, c, d):
    plan = Plan(analyze(PROGRAM).program)
    values = plan.new_values()
    for i, node in plan.criteria:
        values[i] = ({"a": a, "b": b, "c": c, "d": d}[node.id],)
    plan.compose(values, 1)  # raises CompositionError if any value left its type
    for step in plan.steps:
        (v,) = values[step.index]
        if step.node.type.kind == "score":
            assert v is A or step.node.type.lo <= v <= step.node.type.hi
