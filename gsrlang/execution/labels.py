"""Reading an item's gold label, shared by whole-file runs (runs.py) and per-item programs (peritem.py)."""

from __future__ import annotations

from typing import Callable

import attrs

from gsrlang.files.dataset import ColumnMap, Item, parse_pairwise_label, parse_pointwise_label
from gsrlang.lang.program import CheckedProgram

__all__ = ["label_reader"]


def label_reader(program: CheckedProgram | None, mode: str, columns: ColumnMap,
                 scale: tuple[float, float] | None = None) -> Callable[[Item], tuple[object, str | None]]:
    """Reads an item's gold label: a number within the pointwise scale, or first / second / tie.

    The scale is the program's, else `scale` (an item that ran under no program), else unchecked."""
    if mode == "pointwise":
        r = program.readout.pointwise if program is not None else None
        if r is None and scale is not None:
            r = _Scale(*scale)

        def read(item: Item):
            if item.label is None:
                return None, None
            try:
                x = parse_pointwise_label(item.label)
            except ValueError as exc:
                return None, f"line {item.line}: {exc}"
            if r is not None and not r.lo <= x <= r.hi:
                return None, (f"line {item.line}: label {x:g} is outside the scale {r.lo:g}..{r.hi:g} "
                              "(the item is scored, but left out of the metrics)")
            return x, None
        return read

    def read_pair(item: Item):
        if item.label is None:
            return None, None
        try:
            return parse_pairwise_label(item.label, columns.response_fields), None
        except ValueError as exc:
            return None, f"line {item.line}: {exc}"
    return read_pair


@attrs.frozen
class _Scale:
    lo: float
    hi: float
