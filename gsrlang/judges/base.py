"""The judge interface: how a criterion node gets its judgment for a candidate.

Every procedure (`rule.NAME`, `human(field: ...)`, `verifier("name")`, `llm`) is
served by a `Judge`. The executor calls it once per (criterion, candidate)::

    judgment = await judge.judge(node, item, candidate)

where `node` is the criterion's `gsrlang.lang.program.Node` (its declared type is
`node.type`, its procedure, question, levels and examples are `node.criterion`),
`item` is the `gsrlang.files.dataset.Item` (task input, reference, every candidate, the raw
row in `item.record`) and `candidate` is the `gsrlang.files.dataset.Candidate` to judge.

A judge returns a `Judgment`; it should not raise for a bad answer (return
`Judgment.invalid(reason)` instead). If it raises anyway (a network failure after
retries, a bug), the executor records the exception as an invalid judgment and
the item becomes invalid with that reason; the run goes on.

Optional parts of the protocol (looked up with `getattr`):

- `async judge_joint(node, item) -> tuple[Judgment, ...]`: judge every candidate
  of the item in one call (pairwise joint judging), one Judgment per candidate in
  `item.candidates` order. The executor uses it only for criteria whose procedure
  asks for it (`llm(joint: true)`) and items with more than one candidate.
- `validate(node) -> str | None`: called once per criterion before any item runs;
  return a sentence saying why this judge cannot serve the node (an unknown
  verifier, a missing field mapping), or None.
- `inline: bool`: True for judges that do no I/O and answer at once (rules, human
  annotations): the executor awaits them in sequence instead of scheduling a task
  per call, which makes runs over 100k items several times faster.
- `judge_many(node, items, c) -> list[Judgment]`: an inline judge's answers for
  candidate `c` (an index) of every item of a list, in one plain call: what `judge`
  would give each, in order. `gsr run` then judges a program whose judges all have
  it a chunk of items at a time (gsrlang.execution.inlinerun). Only for judges whose
  answers do not depend on the order of the calls; if it raises, the chunk's
  judgments of that criterion are asked of `judge` one by one.
- `async aclose()`: called once when the run ends (close HTTP clients, caches).

Values: a `Judgment.value` is a Python value of the criterion's declared type:
`bool` for Bool, `float` for Score[lo..hi] (within the interval), the level's or
label's `str` for Ordinal / Nominal (numbered ordinals use "1", "2", ...), and
`ABSTAIN` when the judge could not assess (status "abstained"). The executor checks
every value against the declared type; a value that does not fit makes the
judgment invalid.

Provenance is free-form JSON (it goes into the trace as is). Keys the trace and
the decision path know: `procedure` (e.g. "rule.word_count(above: 600)"), `model`,
`seed`, `tokens` ({"prompt": n, "completion": n}), `latency_s`, `cached`, `votes`
(an ensemble's individual answers), `field` (human annotations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gsrlang.semantics.judgment import ABSTAIN, STATUSES, Judgment

if TYPE_CHECKING:
    from gsrlang.files.dataset import Candidate, Item
    from gsrlang.lang.program import Node

__all__ = ["ABSTAIN", "Judge", "JudgeConfigError", "Judgment", "STATUSES"]


@runtime_checkable
class Judge(Protocol):
    """Serves one procedure kind: one async call per (criterion, candidate)."""

    async def judge(self, node: "Node", item: "Item", candidate: "Candidate") -> Judgment:
        ...


class JudgeConfigError(Exception):
    """The judges cannot serve the program (no model configured, an unknown verifier).

    Raised before any item runs; `problems` holds one sentence per criterion.
    """

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)
