"""gsrlang.lang.records: attrs classes with one shared `__repr__`, which writes what attrs' own repr writes."""

from __future__ import annotations

import attrs

from gsrlang.lang import records
from gsrlang.lang.diagnostics import error
from gsrlang.lang.span import Span
from gsrlang.lang.syntax.parser import parse


def _both(make, body: dict, **options):
    """The class made by attrs and by records, from the same body."""
    return make[0](type("Rec", (), dict(body)), **options), make[1](type("Rec", (), dict(body)), **options)


FIELDS = {
    "__annotations__": {"a": "int", "b": "str", "hidden": "int", "shown": "list", "later": "int"},
    "hidden": attrs.field(default=0, repr=False),
    "shown": attrs.field(factory=list, repr=lambda v: f"<{len(v)} items>"),
    "later": attrs.field(init=False),  # never set: attrs writes NOTHING
}


def test_the_shared_repr_writes_what_attrs_writes():
    for makers in ((attrs.frozen, records.frozen), (attrs.define, records.define)):
        theirs, ours = _both(makers, FIELDS)
        for args in ((1, "x"), (2, 'quote " and \n newline', 5, [1, 2])):
            assert repr(ours(*args)) == repr(theirs(*args))
        assert ours.__repr__ is not theirs.__repr__


def test_a_cycle_is_written_as_three_dots_as_attrs_does():
    body = {"__annotations__": {"items": "list"}}
    theirs, ours = _both((attrs.define, records.define), body)
    a, b = theirs([]), ours([])
    a.items.append(a)
    b.items.append(b)
    assert repr(b) == repr(a) == "Rec(items=[...])"


def test_a_class_with_its_own_repr_or_repr_option_is_left_to_attrs():
    own = records.frozen(type("Own", (), {"__annotations__": {"a": "int"}, "__repr__": lambda self: "mine"}))
    assert repr(own(1)) == "mine"
    plain = records.frozen(repr=False)(type("Plain", (), {"__annotations__": {"a": "int"}}))
    assert repr(plain(1)).startswith("<")


def test_the_project_s_records_repr_as_before():
    module = parse('rubric r "d"\ncriterion c: Bool { ask "q?" }\nsink c\n').module
    assert repr(module.items[0]) == "Header(kind='rubric', name=Ident(name='r'), description=String(value='d'))"
    assert repr(Span(1, 2)) == "Span(start=1, end=2)"
    assert repr(error("GSR001", "m", Span(0, 1))).startswith("Diagnostic(code='GSR001', ")
