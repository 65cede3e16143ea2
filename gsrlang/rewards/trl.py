"""TRL: a `gsr serve` as a reward function of `GRPOTrainer(reward_funcs=[...])` (also RLOO and the others
that call reward functions the same way).

TRL calls `fn(prompts=[...], completions=[...], completion_ids=[...], trainer_state=..., log_extra=...,
log_metric=..., **columns)` where every column is a list with one entry per completion, and takes one float
(or None: no reward from this function here) per completion; a coroutine function is awaited, concurrently
with the other async reward functions.

    from gsrlang.rewards import trl_reward
    trainer = GRPOTrainer(..., reward_funcs=[trl_reward("http://127.0.0.1:8080")])

Here prompts and completions are strings or conversations; the columns that are lists of one entry per
completion become each item's further fields (`record`), `reference_column` names the one shown to model
judges as the reference; `trainer_state.global_step` becomes the request's `step` (in the trace's item ids,
for replaying a step later). With `group="rank"` (or "zscore", "raw") the completions of each prompt (TRL
repeats a prompt `num_generations` times) are sent as one group to `/group`, and each gets its reward
within its group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gsrlang.reward import TRL_OWN  # TRL's own keywords: not data set columns
from gsrlang.rewards.client import RewardClient

__all__ = ["trl_reward"]


def _columns(kwargs: dict, n: int) -> dict:
    """The data set's columns among TRL's keyword arguments: lists of one value per completion."""
    return {k: list(v) for k, v in kwargs.items() if k not in TRL_OWN and isinstance(v, Sequence)
            and not isinstance(v, (str, bytes)) and len(v) == n}


def _step(kwargs: dict) -> int | None:
    step = getattr(kwargs.get("trainer_state"), "global_step", None)
    return step if isinstance(step, int) and step >= 0 else None


def _plain(value):
    """A prompt or completion as JSON: a string or a list of {"role", "content"} messages."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return [dict(value)]
    return [dict(m) if isinstance(m, Mapping) else m for m in value]


def trl_reward(url: str, *, group: str | None = None, reference_column: str | None = None,
               asynchronous: bool = False, name: str = "gsr", token_env: str | None = None,
               timeout: float = 600.0, **options):
    """A TRL reward function scoring through the `gsr serve` at `url`.

    `group`: None (each completion scored on its own, `/score`) or "raw", "rank", "zscore" (the completions of
    a prompt as one group, `/group`). `asynchronous=True` makes it a coroutine function (TRL awaits it
    concurrently with the other async reward functions). `options` go into every request: `deadline_s`,
    `on_deadline`, `default_reward`, `failure_value`, `scale`, and for groups `by` and `both_orders`."""
    client = RewardClient(url, token_env=token_env, timeout=timeout)
    if group is not None and group not in ("raw", "rank", "zscore"):
        raise ValueError(f"group must be None, 'raw', 'rank' or 'zscore', got {group!r}")

    def request(prompts, completions, kwargs) -> tuple[str, dict, list]:
        n = len(completions)
        if prompts is not None and len(prompts) != n:
            raise ValueError(f"{len(prompts)} prompts for {n} completions")
        columns = _columns(kwargs, n)
        if reference_column is not None and reference_column not in columns:
            raise ValueError(f"reference column {reference_column!r} was not passed (columns: "
                             f"{', '.join(columns) or 'none'})")
        body = dict(options)
        if (step := _step(kwargs)) is not None:
            body["step"] = step

        def fields(i):
            record = {k: v[i] for k, v in columns.items()}
            out = {"input": _plain(prompts[i]) if prompts is not None else ""}
            if reference_column is not None and columns[reference_column][i] is not None:
                out["reference"] = str(columns[reference_column][i])
            if record:
                out["record"] = record
            return out

        if group is None:
            body["items"] = [{**fields(i), "response": _plain(c)} for i, c in enumerate(completions)]
            return "/score", body, []
        groups: dict = {}
        for i in range(n):
            key = repr(_plain(prompts[i])) if prompts is not None else ""
            groups.setdefault(key, []).append(i)
        order = list(groups.values())
        body["normalize"] = group
        body["groups"] = [{**fields(ix[0]), "responses": [_plain(completions[i]) for i in ix]} for ix in order]
        return "/group", body, order

    def rewards_of(answer: dict, order: list, n: int) -> list:
        if not order:
            return list(answer["rewards"])
        out: list = [None] * n
        for ix, g in zip(order, answer["groups"]):
            for i, r in zip(ix, g["rewards"]):
                out[i] = r
        return out

    if asynchronous:
        async def reward(prompts=None, completions=None, **kwargs):
            path, body, order = request(prompts, list(completions), kwargs)
            return rewards_of(await client.apost(path, body), order, len(completions))
    else:
        def reward(prompts=None, completions=None, **kwargs):
            path, body, order = request(prompts, list(completions), kwargs)
            return rewards_of(client.post(path, body), order, len(completions))

    reward.__name__ = reward.__qualname__ = name  # TRL logs each reward function under its name
    reward.client = client
    return reward
