"""attrs classes that are cheaper to create: `frozen` and `define` give every class one shared `__repr__`.

attrs writes a class's methods as Python source and compiles them when the class is created, which is most of
what `gsr check` spends on the ~70 classes it defines before it reads a file (the AST, the program, the
catalogue, the diagnostics). The `__repr__` is about a third of that compiling (0.15 of 0.43 ms per class,
measured on this project's AST classes): one shared function instead took ~11 ms off a ~150 ms `gsr check`.
It writes what attrs' own does: `Name(field=value, ...)` with each field's `repr` (its `repr=` callable where
it has one, none where `repr=False`), and `...` for an instance already being written (a cycle).
A class that defines its own `__repr__`, or passes `repr=`, is left to attrs.
"""

from __future__ import annotations

import threading

import attrs

_writing = threading.local()  # ids of the instances whose repr this thread is writing


def frozen(maybe_cls=None, **options):
    """`attrs.frozen`, with the shared `__repr__`."""
    return _decorate(attrs.frozen, maybe_cls, options)


def define(maybe_cls=None, **options):
    """`attrs.define`, with the shared `__repr__`."""
    return _decorate(attrs.define, maybe_cls, options)


def _decorate(make, maybe_cls, options):
    def wrap(cls):
        if "repr" in options or "__repr__" in cls.__dict__:
            return make(cls, **options)
        made = make(cls, repr=False, **options)
        made.__repr__ = _repr
        return made
    return wrap if maybe_cls is None else wrap(maybe_cls)


def _repr(self) -> str:
    seen = getattr(_writing, "ids", None)
    if seen is None:
        seen = _writing.ids = set()
    if id(self) in seen:
        return "..."
    seen.add(id(self))
    try:
        fields = ", ".join(f"{a.name}={(repr if a.repr is True else a.repr)(getattr(self, a.name, attrs.NOTHING))}"
                           for a in self.__attrs_attrs__ if a.repr is not False)
        return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({fields})"
    finally:
        seen.discard(id(self))
