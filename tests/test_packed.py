"""A run summary's packed ids and (prediction, label) pairs (gsrlang.execution.packed) against a plain set and list."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

import gsrlang.execution.packed as packed
from gsrlang.execution.packed import PackedColumn, PackedIds, id_key
from gsrlang.execution.runs import RunSummary

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class SetModel:
    """What RunSummary counted with a Python set of the ids."""

    def __init__(self):
        self.ids, self.duplicates, self.examples = set(), 0, []

    def add(self, item_id):
        if item_id in self.ids:
            self.duplicates += 1
            if len(self.examples) < 5 and item_id not in self.examples:
                self.examples.append(item_id)
        else:
            self.ids.add(item_id)

    def add_distinct(self, ids) -> bool:
        if not self.ids.isdisjoint(ids):
            return False
        self.ids.update(ids)
        return True

    def sample(self, k):
        return sorted(str(i) for i in self.ids if i is not None)[:k]


def same(packed_ids: PackedIds, model: SetModel, k: int = 50) -> None:
    assert packed_ids.duplicates == model.duplicates
    assert list(map(repr, packed_ids.examples)) == list(map(repr, model.examples))  # the very ids, types kept
    assert packed_ids.sample(k) == model.sample(k)
    assert len(packed_ids) == len({i for i in model.ids if i is not None})


@pytest.fixture
def small_folds(monkeypatch):
    monkeypatch.setattr(packed, "FOLD", 3)


def test_the_same_id_in_two_folds_is_a_repeat(small_folds):
    ids = PackedIds()
    for i in ["a", "b", "c", "d", "a", "e", "b"]:  # "a" and "b" come back after the first fold
        ids.add(i)
    assert ids.duplicates == 2 and ids.examples == ["a", "b"]
    assert ids.sample(3) == ["a", "b", "c"]


def test_numbers_are_one_id_when_equal_and_never_a_str(small_folds):
    summary, model = RunSummary("p", "h", "pointwise"), SetModel()
    for i in [1, "1", 1.0, True, 0, -0.0, False, 2.5, 2.5, "2.5", 2 ** 60, float(2 ** 60), 2 ** 60 + 1, 1e300,
              int(1e300), math.inf, math.inf, None, None, "x"]:
        summary.count_id(i)
        if i is not None:
            model.add(i)
    assert summary.duplicate_ids == model.duplicates == 8
    assert list(map(repr, summary.duplicate_examples)) == list(map(repr, [1.0, -0.0, 2.5, float(2 ** 60), int(1e300)]))
    assert summary.id_sample(40) == model.sample(40)  # the first of equal ids is the one kept: "1", not "1.0"


def test_texts_that_end_in_nul_or_are_empty_keep_their_bytes(small_folds):
    ids, model = PackedIds(), SetModel()
    for i in ["", "a", "a\x00", "a\x00\x00", "", "a\x00", "\ud800", "\ud800", "é", "\x00"]:
        ids.add(i)
        model.add(i)
    same(ids, model)
    assert ids.duplicates == 3


def test_ids_noted_all_at_once_only_when_none_was_noted_before():
    ids = PackedIds()
    assert ids.add_distinct({"a", "b", 1, None})
    assert not ids.add_distinct({"c", 1.0})  # 1.0 is 1
    assert ids.sample(10) == ["1", "a", "b"]  # nothing of the refused ones noted
    assert ids.add_distinct({"c", "1"})
    ids.add("c")
    assert ids.duplicates == 1 and ids.examples == ["c"]


def test_an_id_that_a_set_cannot_hold_fails_at_once():
    ids = PackedIds()
    with pytest.raises(TypeError, match="unhashable"):
        ids.add(["a"])


def test_nan_ids_are_repeats_only_of_themselves(small_folds):
    nan = float("nan")
    ids, model = PackedIds(), SetModel()
    for i in [nan, float("nan"), nan, "a", nan]:
        ids.add(i)
        model.add(i)
    assert ids.duplicates == model.duplicates == 2
    assert ids.sample(5) == model.sample(5)


def test_keys_are_equal_exactly_when_the_ids_are():
    values = [0, 1, -1, True, False, 0.0, -0.0, 1.0, 0.5, "0", "1", "", 2 ** 53 + 1, float(2 ** 53), math.inf,
              -math.inf, 1e-300]
    for a in values:
        for b in values:
            assert (id_key(a) == id_key(b)) == (a == b), (a, b)


ID = st.one_of(st.integers(-3, 3), st.booleans(), st.sampled_from([0.0, -0.0, 1.0, 2.5, -1.5, 1e20, math.inf]),
               st.floats(allow_nan=True), st.text(alphabet="ab\x00é\ud800", max_size=3), st.none())
STEP = st.one_of(ID.map(lambda i: ("one", i)), st.frozensets(ID, max_size=4).map(lambda s: ("all", s)))


@settings(max_examples=examples(300), **SETTINGS)
@given(steps=st.lists(STEP, max_size=40), fold=st.integers(1, 6), k=st.integers(0, 8))
def test_packed_ids_count_as_a_set_does(monkeypatch, steps, fold, k):
    monkeypatch.setattr(packed, "FOLD", fold)
    ids, model = PackedIds(), SetModel()
    for kind, value in steps:
        if kind == "one":
            if value is not None:
                ids.add(value)
                model.add(value)
        else:
            assert ids.add_distinct(value) == model.add_distinct(value)
        assert ids.sample(k) == model.sample(k)
    same(ids, model)


SMALL_FLOATS = st.sampled_from([-0.0, 0.0, 1.0, 5.0, -64.0, 63.0, 64.0, -65.0, 2.5])  # kept in the tag, or not
VALUE = st.one_of(st.none(), st.integers(-2 ** 60, 2 ** 60), st.integers(-60, 70), st.floats(), SMALL_FLOATS,
                  st.booleans(), st.sampled_from(["first", "second", "tie", "abstain", "other"]))


@settings(max_examples=examples(300), **SETTINGS)
@given(chunks=st.lists(st.one_of(VALUE.map(lambda v: [v]), st.lists(VALUE, max_size=5),
                                 st.lists(st.integers(1, 5), max_size=5), st.lists(st.floats(0, 5), max_size=5),
                                 st.lists(SMALL_FLOATS, max_size=5),
                                 st.lists(st.sampled_from(["first", "second", "tie"]), max_size=5)), max_size=8),
       one_by_one=st.booleans())
def test_a_packed_column_gives_back_what_it_was_given(chunks, one_by_one):
    column, plain = PackedColumn(), []
    for chunk in chunks:
        if one_by_one or len(chunk) == 1:
            for v in chunk:
                column.append(v)
        else:
            column.extend(chunk)
        plain.extend(chunk)
    got = column.tolist()
    assert len(column) == len(plain) and list(map(repr, got)) == list(map(repr, plain))
    assert list(map(type, got)) == list(map(type, plain))
    numbers = column.numbers()
    if all(v is None or type(v) is int and abs(v) <= 2 ** 53 or type(v) is float and math.isfinite(v) for v in plain):
        want = np.array([math.nan if v is None else float(v) for v in plain], np.float64)
        assert numbers is not None and np.array_equal(numbers, want, equal_nan=True)
    else:
        assert numbers is None
