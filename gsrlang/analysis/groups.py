"""Groups of items that are not independent: the same prompt, conversation or source.

Items of one group share what a judge and a label depend on (a conversation's context
and fact, a prompt), so they are alike in ways a new group will not be. Folds drawn by
row put one group's rows in both the training and the test folds, and a bootstrap over
rows treats a group's rows as independent draws: both make a figure look better and
surer than it will be on unseen groups. So:

- `group_folds` keeps every group in one fold (tune's outer and inner CV);
- `gsrlang.analysis.resampling` draws groups, not items, for a cluster bootstrap (compare,
  metrics, tune's intervals);
- `group_candidates` finds the fields that look like a group (many rows share one
  value), so tune can warn when none was given.

A row without the field is a group of its own (a singleton); callers count and
report such rows.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from gsrlang.files.dataset import MissingFieldError, get_path, id_records

__all__ = ["GroupError", "data_groups", "group_candidates", "group_folds", "group_key", "groups_note"]

#: Field names that usually name a group (a hint for the warning's order, never a requirement).
HINTS = ("conversation", "dialog", "dialogue", "context", "prompt", "question", "instruction", "source", "topic",
         "document", "doc", "group", "session", "thread", "task", "query", "article", "passage")


class GroupError(ValueError):
    """Fewer groups than folds, or another group problem a user can fix (a one-line message)."""


def group_key(value) -> object:
    """A hashable key for a group value (a JSON object or array by its canonical JSON text); None: no group."""
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return int(value) if isinstance(value, float) and value.is_integer() else value


def data_groups(path, field: str, id_field: str | None = None) -> tuple[dict, int]:
    """({item id: group key or None}, rows without the field) of a data file, ids as `gsr run` gives them
    (`id_field`, else the data's `id` column, else the row's position)."""
    out: dict = {}
    missing = 0
    for key, record in id_records(path, id_field):
        try:
            value = group_key(get_path(record, field))
        except MissingFieldError:
            value = None
        if value is None:
            missing += 1
        out[key] = value
    return out, missing


def group_folds(groups: Sequence, folds: int, seed: int) -> np.ndarray:
    """Each item's fold (0..folds-1), every group in one fold: groups in a seeded random order, the largest
    first, each to the fold with the fewest items so far (near-equal folds). None: a group of its own.

    GroupError when there are fewer groups than folds."""
    from gsrlang.analysis.resampling import group_codes

    codes = group_codes(groups)
    k = int(codes.max()) + 1 if len(codes) else 0
    if k < folds:
        raise GroupError(f"{k} group{'s' if k != 1 else ''} are too few for {folds} folds: every group stays in one "
                         f"fold, so at least {folds} groups are needed (pass fewer --folds)")
    sizes = np.bincount(codes, minlength=k)
    order = np.random.default_rng(seed).permutation(k)
    order = order[np.argsort(-sizes[order], kind="stable")]
    filled = np.zeros(folds, int)
    fold_of_group = np.empty(k, int)
    for g in order:
        f = int(np.argmin(filled))
        fold_of_group[g] = f
        filled[f] += sizes[g]
    return fold_of_group[codes]


def group_candidates(records: Iterable[dict], folds: int, exclude: Sequence[str] = ()) -> list[tuple[str, int, int]]:
    """[(field, distinct values, rows)] of the top-level fields that look like a group: text or integer values,
    at least 2 x folds distinct ones but at most half as many as rows, and most rows (3 in 4) sharing their value
    with another row. The most likely first (a name that usually names a group, then more distinct values)."""
    values: dict[str, Counter] = {}
    n = 0
    for record in records:
        n += 1
        for key, value in record.items():
            if key in exclude or isinstance(value, bool) or not isinstance(value, (str, int)):
                continue
            values.setdefault(key, Counter())[value] += 1
    out = []
    for key, counts in values.items():
        shared = sum(c for c in counts.values() if c > 1)
        if 2 * folds <= len(counts) <= n / 2 and shared >= 0.75 * n:
            out.append((key, len(counts), n))
    out.sort(key=lambda c: (not any(h in c[0].lower() for h in HINTS), -c[1], c[0]))
    return out


def groups_note(groups: Sequence) -> str:
    """`40 groups (6 items each)` or `38 groups of 1-9 items (median 6), 3 of them single rows`."""
    sizes = sorted(Counter(("row", i) if g is None else ("g", g) for i, g in enumerate(groups)).values())
    if not sizes:
        return "no groups"
    k = len(sizes)
    if sizes[0] == sizes[-1]:
        return f"{k} group{'s' if k != 1 else ''} ({sizes[0]} item{'s' if sizes[0] != 1 else ''} each)"
    single = sum(s == 1 for s in sizes)
    tail = f", {single} of them single items" if single else ""
    return f"{k} groups of {sizes[0]}-{sizes[-1]} items (median {sizes[len(sizes) // 2]}){tail}"

