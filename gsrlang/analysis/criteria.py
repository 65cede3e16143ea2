"""Per-criterion agreement: a criterion's recorded judgments against a human label for that criterion.

Where the data holds a person's answer to the same question a criterion asks
(e.g. an annotated "maintains context" score next to the model's judgment of
`maintains_context`), `gsr metrics RESULTS --trace T --data D --criterion
maintains_context=scores.coherence` reports that criterion's agreement, with the
same metrics and intervals as the overall score (as Autorubric does). The
judgments come from the trace (the first candidate of each pointwise item), the
labels from the data file, joined by item id (`--id-field`, as the run was given it).
A Bool counts as 1 / 0; an Ordinal whose levels are numbers as that number; other
labels cannot be compared numerically and are refused.
"""

from __future__ import annotations

import math
from typing import Sequence

from gsrlang.analysis.metrics import metrics_with_confidence
from gsrlang.files.dataset import DataError, MissingFieldError, get_path, id_records
from gsrlang.trace import TraceView
from gsrlang.trace.read import read_trace

__all__ = ["criterion_agreement", "parse_pairs"]


def parse_pairs(texts: Sequence[str]) -> list[tuple[str, str]]:
    """`NAME=FIELD` arguments as (criterion, field); ValueError for a malformed one."""
    out = []
    for t in texts:
        name, sep, field = t.partition("=")
        if not sep or not name.strip() or not field.strip():
            raise ValueError(f"--criterion takes NAME=FIELD (a criterion and the data field with its human label), "
                             f"got {t!r}")
        out.append((name.strip(), field.strip()))
    return out


def _number(value) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float, str)):  # a number, or a number written as text
        try:
            x = float(value)
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def _numeric(node: dict) -> bool:
    """Whether a criterion's recorded type is a number or a numeric range (`Score[1..3]`, `Ordinal[1..5]`, `Bool`)."""
    t = node.get("type", "").rstrip("?")
    if t == "Bool" or t == "Score":
        return True
    if "[" in t and ".." in t:
        lo, hi = t[t.index("[") + 1:t.rindex("]")].split("..")
        try:
            float(lo), float(hi)
        except ValueError:
            return False
        return True
    return False


def criterion_agreement(trace: str, data: str, pairs: Sequence[tuple[str, str]], id_field: str | None = None,
                        bootstrap: int = 1000, seed: int = 0) -> dict:
    """{criterion: report} with `field`, `n_unusable` (labels that are not numbers) and the metrics with CIs."""
    labels: dict[str, dict] = {field: {} for _, field in pairs}
    for key, record in id_records(data, id_field):
        for field in labels:
            try:
                labels[field][key] = get_path(record, field)
            except MissingFieldError:
                labels[field][key] = None
    judged: dict[str, dict] = {name: {} for name, _ in pairs}
    types: dict[str, dict] = {}
    for _, record in read_trace(trace):
        key = str((record.get("item") or {}).get("id"))
        for node in TraceView.of_record(record).criteria():
            if node.get("id") in judged:
                types.setdefault(node["id"], node)
                out = node.get("output")
                judged[node["id"]][key] = out[0] if out else None
    missing = [name for name, _ in pairs if name not in types]
    if missing:
        raise DataError(f"{trace}: no criterion {', '.join(f'`{m}`' for m in missing)} in the trace")
    reports = {}
    for name, field in pairs:
        if not _numeric(types[name]):
            raise DataError(f"criterion `{name}` is a {types[name].get('type')}: its judgments are not numbers, so "
                            "they cannot be compared with a numeric label")
        preds, golds, unusable = [], [], 0
        for key, value in judged[name].items():
            label = labels[field].get(key)
            if label is None:
                continue
            gold = _number(label)
            if gold is None:
                unusable += 1
                continue
            preds.append(_number(value) if value is not None else None)
            golds.append(gold)
        report = metrics_with_confidence("pointwise", preds, golds, n_resamples=bootstrap, seed=seed)
        reports[name] = {"field": field, "n_unusable": unusable, **report}
    return reports
