"""Rewards from a `gsr serve` for RL trainers: thin clients, one line in a trainer's config (docs/rewards.md).

- TRL: `reward_funcs=[gsrlang.rewards.trl_reward("http://127.0.0.1:8080")]` (sync or async, pointwise or
  within groups);
- veRL: `custom_reward_function.path=$(python -m gsrlang.rewards.verl)`, `name=compute_score`, and the URL in
  `reward_kwargs.url`;
- OpenRLHF: no client: `--remote_rm_url http://127.0.0.1:8080/openrlhf`.

They use the standard library only (no web framework in the trainer's process); the scoring, the judges,
the cache and the traces are the server's.
"""

from __future__ import annotations

from gsrlang.rewards.client import RewardClient, ServerError
from gsrlang.rewards.trl import trl_reward
from gsrlang.rewards.verl import acompute_score, compute_score, compute_score_batch

__all__ = ["RewardClient", "ServerError", "acompute_score", "compute_score", "compute_score_batch", "trl_reward"]
