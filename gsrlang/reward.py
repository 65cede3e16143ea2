"""Rubric programs as reward functions for RL trainers (TRL's GRPOTrainer and anything of its shape).

    reward = gsrlang.reward_function("rubric.gsr", judges=gsrlang.Judges(model="judge", base_url=...))
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], ...)

TRL calls a reward function as `fn(prompts=[...], completions=[...], **columns)`, every
keyword a list with one entry per completion (the data set's other columns, plus TRL's
own such as `completion_ids`), and wants one float per completion back. Here:

- prompts and completions may be plain strings or conversations (lists of
  `{"role", "content"}` messages, TRL's conversational format): a completion's text is
  its messages' contents; a prompt's text is its messages as `role: content` lines;
- `reference_column` names the column holding the reference, if any; the other columns
  are the item's further fields (for `human(field: ...)` criteria and verifiers);
- the batch runs concurrently, through one `Judges` (one model client, one judgment
  cache, one concurrency limit) for every call the trainer makes;
- the reward is the sink's Score in [0, 1] (`scale="unit"`, the default) or the
  readout's unquantized native score (`scale="native"`);
- an item that is not ok (an invalid judgment, a failed judge call, a readout that
  cannot read the sink) gets `failure_value`: 0.0 by default, or None, which TRL
  treats as "no reward from this function" (NaN, ignored when several are combined).

`last_results` keeps the batch's `Result`s (reasons, traces) for logging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["RewardFunction", "reward_function"]

SCALES = ("unit", "native")
# what TRL passes besides the data set's columns (`trainer_state`, `log_extra`, `log_metric` and `environments`
# are not lists of one value per completion; `completion_ids` is TRL's tokens)
TRL_OWN = ("completion_ids", "trainer_state", "log_extra", "log_metric", "environments")


def text_field(value, what: str, index: int) -> str:
    """A prompt or completion as text: a str, or a conversation (a list of messages, or one message)."""
    from gsrlang.api import InputError

    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        value = [value]
    if isinstance(value, Sequence) and all(isinstance(m, Mapping) and "content" in m for m in value):
        if what == "completion":
            return "\n".join(str(m["content"]) for m in value)
        return "\n".join(f"{m.get('role', 'user')}: {m['content']}" for m in value)
    raise InputError(f"{what} {index}: expected a str or a list of {{'role', 'content'}} messages, got "
                     f"{type(value).__name__}")


class RewardFunction:
    """A callable `(prompts, completions, **columns) -> list[float | None]` scoring with a pointwise program."""

    def __init__(self, program, judges=None, *, reference_column: str | None = None, scale: str = "unit",
                 failure_value: float | None = 0.0, name: str | None = None):
        from gsrlang.api import InputError, Program, default_judges, load

        self.program = program if isinstance(program, Program) else load(program)
        if "pointwise" not in self.program.modes:
            raise InputError(f"program {self.program.name!r} has no pointwise task: a reward scores one "
                             "completion at a time")
        if scale not in SCALES:
            raise InputError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
        self.judges = judges or default_judges()
        self.reference_column = reference_column
        self.scale = scale
        self.failure_value = failure_value
        self.__name__ = name or f"gsr_{self.program.name}"  # TRL logs each reward under its function's name
        self.last_results: list = []
        self.judges.check(self.program.checked)  # a program the judges cannot serve fails here, not mid-training

    def _rows(self, prompts, completions, columns: dict) -> list[dict]:
        from gsrlang.api import InputError

        n = len(completions)
        # TRL's own keywords are not data set columns: the trainer's state, its logging callbacks, ...
        columns = {k: v for k, v in columns.items() if k not in TRL_OWN}
        if prompts is not None and len(prompts) != n:
            raise InputError(f"{len(prompts)} prompts for {n} completions")
        for key, values in columns.items():
            if not isinstance(values, Sequence) or isinstance(values, str) or len(values) != n:
                raise InputError(f"column {key!r}: expected a list of {n} values (one per completion)")
        if self.reference_column is not None and self.reference_column not in columns:
            raise InputError(f"reference column {self.reference_column!r} was not passed (columns: "
                             f"{', '.join(columns) or 'none'})")
        rows = []
        for i in range(n):
            record = {k: v[i] for k, v in columns.items()}
            ref = record.get(self.reference_column) if self.reference_column else None
            rows.append({"id": str(i), "input": text_field(prompts[i], "prompt", i) if prompts is not None else "",
                         "response": text_field(completions[i], "completion", i),
                         "reference": None if ref is None else str(ref), "record": record})
        return rows

    def _reward(self, result) -> float | None:
        return float(result.raw if self.scale == "native" else result.value) if result.ok else self.failure_value

    def __call__(self, prompts=None, completions=None, **columns) -> list[float | None]:
        if completions is None:
            from gsrlang.api import InputError

            raise InputError("a reward function is called with completions=[...] (and prompts=[...])")
        rows = self._rows(prompts, list(completions), columns)
        results = self.last_results = self.program.score_batch(rows, judges=self.judges, mode="pointwise")
        return [self._reward(r) for r in results]

    async def acall(self, prompts=None, completions=None, **columns) -> list[float | None]:
        """The same, awaitable (for trainers with async reward functions)."""
        rows = self._rows(prompts, list(completions or ()), columns)
        results = self.last_results = await self.program.ascore_batch(rows, judges=self.judges, mode="pointwise")
        return [self._reward(r) for r in results]


def reward_function(program: str | Path, judges=None, **options) -> RewardFunction:
    """`RewardFunction(program, judges, **options)`: `program` a path or a loaded `gsrlang.Program`."""
    return RewardFunction(program, judges, **options)
