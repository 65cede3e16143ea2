"""Reading an item's gold label, shared by whole-file runs (runs.py) and per-item programs (peritem.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

from gsrlang.files.dataset import ColumnMap, Item, parse_pairwise_label, parse_pointwise_label
from gsrlang.lang.program import CheckedProgram

__all__ = ["label_reader"]


def label_reader(program: CheckedProgram | None, mode: str, columns: ColumnMap,
                 scale: tuple[float, float] | None = None) -> Callable[[Item], tuple[object, str | None]]:
    """Reads an item's gold label: a number within the pointwise scale, or first / second / tie.

    The scale is the program's, else `scale` (an item that ran under no program), else unchecked."""
    r = None
    if mode == "pointwise":
        r = program.readout.pointwise if program is not None else None
        if r is None and scale is not None:
            r = SimpleNamespace(lo=scale[0], hi=scale[1])
        parse = parse_pointwise_label
    else:
        parse = lambda label: parse_pairwise_label(label, columns.response_fields)  # noqa: E731

    def read(item: Item):
        if item.label is None:
            return None, None
        try:
            x = parse(item.label)
        except ValueError as exc:
            return None, f"line {item.line}: {exc}"
        if r is not None and not r.lo <= x <= r.hi:
            return None, (f"line {item.line}: label {x:g} is outside the scale {r.lo:g}..{r.hi:g} "
                          "(the item is scored, but left out of the metrics)")
        return x, None
    return read
