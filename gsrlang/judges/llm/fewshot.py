"""Few-shot examples from a labelled file, sampled balanced across verdicts with a seed.

The file (``--fewshot FILE``) is JSONL, CSV/TSV or a JSON array with the columns
``criterion`` (the criterion's name), ``text`` (a response), ``verdict`` (a value
of the criterion's type: ``true``/``false``/``yes``/``no`` for Bool, a level or a
label, a number for Score) and optionally ``reason``.

For each criterion, :meth:`FewShotBank.examples_for` draws ``k`` examples
*verdict-balanced*: the examples are grouped by verdict, each group is shuffled,
and groups are visited round-robin (in an order drawn from the seed) taking one
example each, until ``k`` are taken or the examples run out; the chosen examples
are then shuffled so that their verdicts come in no fixed pattern. A judge shown
three "true" examples and one "false" learns a prior of 75% true; a balanced
sample shows none. The draw depends only on the seed and the criterion's name,
so every item of a run sees the same examples (and cached prompts stay valid).
An example whose text equals the response being judged is left out of its prompt.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Iterable

import attrs

from gsrlang.judges.llm.config import LLMError
from gsrlang.judges.llm.prompts import Example
from gsrlang.lang.types import JType

__all__ = ["FewShotBank", "FewShotError", "FewShotRow", "balanced_sample", "parse_verdict"]


class FewShotError(LLMError):
    """The few-shot file cannot be used."""


@attrs.frozen
class FewShotRow:
    criterion: str
    text: str
    verdict: object  # as written in the file
    reason: str | None
    line: int


_TRUE = {"true", "yes", "1", "met", "pass"}
_FALSE = {"false", "no", "0", "unmet", "fail"}


def parse_verdict(raw, t: JType):
    """A file's verdict as a value of ``t`` (bool / float / label str); raises ValueError with a sentence."""
    if isinstance(raw, str):
        raw = raw.strip()
    if t.kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, (int, float)) and raw in (0, 1):
            return bool(raw)
        if isinstance(raw, str) and raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise ValueError(f"verdict {raw!r} is not a Bool (true/false, yes/no)")
    if t.kind == "score":
        try:
            x = float(raw) if not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            x = None
        if x is None or not t.lo <= x <= t.hi:
            raise ValueError(f"verdict {raw!r} is not a number in {t.required()}")
        return x
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and float(raw).is_integer():
        raw = str(int(raw))
    if isinstance(raw, str) and raw in t.labels:
        return raw
    raise ValueError(f"verdict {raw!r} is not a label of {t.required()}")


def balanced_sample(examples: list[Example], k: int, rng: random.Random) -> list[Example]:
    """Up to ``k`` examples, as equal across verdicts as the supply allows (see the module docstring)."""
    if k <= 0 or not examples:
        return []
    groups: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        groups[json.dumps(ex.verdict)].append(ex)
    keys = sorted(groups)
    for key in keys:
        rng.shuffle(groups[key])
    rng.shuffle(keys)
    deepest = max(len(group) for group in groups.values())  # round-robin over the verdicts, then the first k
    chosen = [groups[key][depth] for depth in range(deepest) for key in keys if depth < len(groups[key])][:k]
    rng.shuffle(chosen)
    return chosen


def _read_rows(path: Path) -> Iterable[tuple[int, dict]]:
    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            from gsrlang.files.jsonl import read_jsonl

            yield from read_jsonl(path, FewShotError, "a labelled example (a JSON object)")
        elif suffix in (".csv", ".tsv"):
            with path.open(encoding="utf-8", newline="") as fh:
                reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")
                yield from ((reader.line_num, row) for row in reader)
        elif suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise FewShotError(f"{path}: a .json few-shot file holds an array of objects")
            yield from enumerate(data, 1)
        else:
            raise FewShotError(f"{path}: unsupported few-shot file type {suffix!r} (use .jsonl, .csv, .tsv or .json)")
    except OSError as exc:
        raise FewShotError(f"{path}: cannot read the few-shot file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FewShotError(f"{path}: the few-shot file is not UTF-8 text") from None
    except ValueError as exc:
        raise FewShotError(f"{path}: {exc}") from None


class FewShotBank:
    """Labelled examples per criterion name, and a seeded, verdict-balanced draw from them."""

    def __init__(self, rows: Iterable[FewShotRow], *, k: int = 4, seed: int = 0, source: str = "<rows>") -> None:
        self.k = k
        self.seed = seed
        self.source = source
        self.rows: dict[str, list[FewShotRow]] = defaultdict(list)
        for row in rows:
            self.rows[row.criterion].append(row)
        self._drawn: dict[tuple[str, JType], list[Example]] = {}

    @classmethod
    def load(cls, path: str | Path, *, k: int = 4, seed: int = 0) -> "FewShotBank":
        path = Path(path)
        rows = []
        for line, raw in _read_rows(path):
            if not isinstance(raw, dict):
                raise FewShotError(f"{path}:{line}: each row is an object with criterion, text, verdict")
            if missing := [c for c in ("criterion", "text", "verdict") if raw.get(c) in (None, "")]:
                raise FewShotError(f"{path}:{line}: missing {', '.join(missing)} (columns: criterion, text, "
                                   f"verdict, reason)")
            reason = raw.get("reason")
            rows.append(FewShotRow(str(raw["criterion"]).strip(), str(raw["text"]), raw["verdict"],
                                   str(reason) if reason not in (None, "") else None, line))
        return cls(rows, k=k, seed=seed, source=str(path))

    def criteria(self) -> set[str]:
        return set(self.rows)

    def problem(self, name: str, t: JType) -> str | None:
        """Why the file's examples for criterion ``name`` do not fit its type (None when they do)."""
        for row in self.rows.get(name, ()):
            try:
                parse_verdict(row.verdict, t)
            except ValueError as exc:
                return f"few-shot file {self.source}, line {row.line}: criterion `{name}`: {exc}"
        return None

    def examples_for(self, name: str, t: JType) -> list[Example]:
        """The seeded, balanced draw of up to ``k`` examples for criterion ``name`` (memoised)."""
        key = (name, t)
        if (drawn := self._drawn.get(key)) is None:
            pool = []
            for row in self.rows.get(name, ()):
                try:
                    pool.append(Example(row.text, parse_verdict(row.verdict, t), row.reason))
                except ValueError:
                    continue  # reported by problem() before the run
            digest = hashlib.sha256(f"fewshot|{self.seed}|{name}".encode()).hexdigest()
            drawn = balanced_sample(pool, self.k, random.Random(int(digest[:16], 16)))
            self._drawn[key] = drawn
        return drawn
