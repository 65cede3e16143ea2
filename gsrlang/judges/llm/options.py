"""The one place a model judge is built from typed settings (no command line here: see gsrlang.commands.config).

    settings = model_settings(flags, config_path)   # JudgeSettings, or None when no model is configured anywhere
    judge = build_llm_judge(settings, JudgeOptions(cache=..., fewshot=...))   # an LLMJudge

`flags` is the flags layer of :func:`gsrlang.judges.llm.config.resolve_settings` (a dict; the
command line's flags are turned into it by ``gsrlang.commands.config.judge_flags``). Settings are
resolved flags > environment > ``gsr.toml``; the concurrency a command schedules with is
``settings.default.concurrency``. This module imports nothing heavy: the ``openai`` package is
loaded only when a client is built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

__all__ = ["DEFAULT_CACHE", "JudgeOptions", "build_llm_judge", "create_judge", "model_settings", "parse_role",
           "price_overrides"]

DEFAULT_CACHE = os.path.join(".gsr-cache", "judgments.sqlite")


@attrs.frozen(kw_only=True)
class JudgeOptions:
    """The model judge's own options, beside the model client's settings (`JudgeSettings`).

    `cache` is the judgment cache's path (None: no cache); `plan` a `CallPlan` a dry run fills in."""

    cache: str | None = DEFAULT_CACHE
    fewshot: str | None = None
    fewshot_k: int = 4
    max_reasks: int = 2
    joint_disagreement: str = "mean"
    deadline_s: float | None = None
    weighted: bool = False
    budget_usd: float | None = None
    plan: object = None


def parse_role(text: str) -> tuple[str, dict]:
    """``NAME=MODEL[@URL]`` -> (name, {"model": ..., "base_url": ...})."""
    name, sep, rest = text.partition("=")
    name, rest = name.strip(), rest.strip()
    if not sep or not name or not rest:
        raise ValueError(f"--role {text!r}: write NAME=MODEL or NAME=MODEL@URL")
    model, at, url = rest.partition("@http")
    over: dict = {"model": model.strip()}
    if at:
        over["base_url"] = "http" + url.strip()
    return name, over


def model_settings(flags: dict, config_path: str | Path | None = None):
    """The model settings `flags` (then environment, then gsr.toml) describe, or None when no model is set.

    Raises :class:`gsrlang.judges.llm.config.ConfigError` (an ``LLMError``) for an unusable
    configuration; the message never contains a key.
    """
    from gsrlang.judges.llm.config import NO_MODEL_MESSAGE, ConfigError, resolve_settings

    try:
        return resolve_settings(flags, config_path=Path(config_path) if config_path else None)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    except ConfigError as exc:
        if str(exc) == NO_MODEL_MESSAGE:
            return None
        raise


def build_llm_judge(settings, options: JudgeOptions = JudgeOptions(), **judge_kwargs: Any):
    """The LLM judge for resolved `settings` and the judge's own `options` (paths are opened here).

    Raises :class:`gsrlang.judges.llm.config.ConfigError` (an ``LLMError``) for an unusable
    configuration, a few-shot file that cannot be read or a cache that cannot be opened;
    the message never contains a key.
    """
    from gsrlang.judges.llm.config import ConfigError
    from gsrlang.judges.llm.fewshot import FewShotBank
    from gsrlang.judges.llm.cache import open_judgment_cache
    from gsrlang.judges.llm.judge import LLMJudge

    if options.fewshot_k is not None and options.fewshot_k < 0:
        raise ConfigError(f"--fewshot-k must be >= 0, got {options.fewshot_k}")
    seed = settings.default.seed or 0
    bank = FewShotBank.load(options.fewshot, k=options.fewshot_k, seed=seed) if options.fewshot else None
    judge_kwargs.setdefault("price_overrides", price_overrides(settings))
    store = open_judgment_cache(Path(options.cache)) if options.cache else None
    return LLMJudge(settings, cache=store, fewshot=bank, max_reasks=options.max_reasks,
                    joint_disagreement=options.joint_disagreement, owns_cache=True, deadline_s=options.deadline_s,
                    weighted=options.weighted, budget_usd=options.budget_usd, plan=options.plan, **judge_kwargs)


def price_overrides(settings) -> dict:
    """The `[prices]` of the settings' project file, then the user's config.toml (gsrlang.judges.llm.prices)."""
    from gsrlang.judges.llm.config import ConfigError
    from gsrlang.judges.llm.prices import PriceError, load_overrides
    from gsrlang.judges.llm.trust import USER_CONFIG, config_dir

    try:
        return load_overrides(getattr(settings, "config_file", None), config_dir() / USER_CONFIG)
    except PriceError as exc:
        raise ConfigError(str(exc)) from None


def create_judge(options: dict | None = None):
    """An LLMJudge from a dict of settings (what :func:`gsrlang.judges.registry.load_llm_judge` calls).

    ``options`` holds :func:`resolve_settings` flags (``model``, ``base_url``, ``concurrency``, ...) and
    optionally the judge's own options: ``cache`` (a path; default ``.gsr-cache/judgments.sqlite``),
    ``no_cache``, ``fewshot`` (a path), ``fewshot_k``, ``max_reasks``, ``joint_disagreement``.
    """
    from gsrlang.judges.llm.config import resolve_settings

    options = {k: v for k, v in (options or {}).items() if v is not None}
    own = {k: options.pop(k) for k in ("cache", "no_cache", "fewshot", "fewshot_k", "max_reasks",
                                       "joint_disagreement") if k in options}
    settings = resolve_settings(options)
    cache = None if own.pop("no_cache", False) else own.pop("cache", DEFAULT_CACHE)
    own.pop("cache", None)
    return build_llm_judge(settings, JudgeOptions(cache=cache, **own))
