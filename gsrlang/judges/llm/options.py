"""The one place a model client is configured: command-line flags, environment and ``gsr.toml``.

    add_model_arguments(parser)        # the model's flags, the same for `gsr run` and `gsr compile`
    settings = model_settings(args)    # JudgeSettings, or None when no model is configured anywhere
    add_llm_arguments(parser)          # the model's flags and the judge's own (cache, few-shot, ...)
    judge = build_llm_judge(args)      # an LLMJudge, or None when no model is configured anywhere

Settings are resolved flags > environment > ``gsr.toml`` (see
:mod:`gsrlang.judges.llm.config`); the concurrency a command schedules with is
``settings.default.concurrency`` (the `--concurrency` flag, else the environment or
``gsr.toml``, else 8), read from the resolved settings and passed on explicitly. This
module imports nothing heavy: the ``openai`` package is loaded only when a client is built.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from gsrlang.catalog import default_catalog

__all__ = ["DEFAULT_CACHE", "add_llm_arguments", "add_model_arguments", "build_llm_judge", "create_from_settings",
           "create_judge", "judge_flags", "model_settings", "parse_role", "price_overrides"]

DEFAULT_CACHE = os.path.join(".gsr-cache", "judgments.sqlite")


def _has(parser: argparse.ArgumentParser, flag: str) -> bool:
    return flag in parser._option_string_actions  # noqa: SLF001 - argparse has no public lookup


def _adder(parser: argparse.ArgumentParser, title: str):
    group = parser.add_argument_group(title)

    def add(flag: str, **kw: Any) -> None:
        if not _has(parser, flag):
            group.add_argument(flag, **kw)
    return add


def add_model_arguments(parser: argparse.ArgumentParser,
                        title: str = "the model; settings come from these flags, then the environment "
                                     "(OPENAI_API_KEY, OPENAI_BASE_URL, GSR_MODEL, ...), then gsr.toml") -> None:
    """Add the model's flags to ``parser`` (a flag the parser already defines is left as it is)."""
    add = _adder(parser, title)
    add("--model", metavar="MODEL", help="the judge model (default: $GSR_MODEL or [judge] model in gsr.toml)")
    add("--base-url", metavar="URL",
        help="an OpenAI-compatible server, e.g. http://localhost:8000/v1 (default: $OPENAI_BASE_URL, else OpenAI)")
    add("--api-key-env", metavar="VAR",
        help="the environment variable holding the API key (default: OPENAI_API_KEY)")
    add("--api-key", metavar="KEY",
        help="the API key itself; other users of the machine can read command lines, so prefer "
             "--api-key-env or OPENAI_API_KEY. Keys are never written to results, traces, caches or logs")
    add("--role", action="append", default=None, metavar="NAME=MODEL[@URL]",
        help="bind a judge role used by `llm(role: \"NAME\")` to a model (and server); repeatable. "
             "The key of a role on another server comes from $GSR_ROLE_<NAME>_API_KEY")
    add("--judge-config", metavar="FILE", help="the project file with [judge] settings (default: the nearest gsr.toml)")
    add("--temperature", type=float, metavar="T", help="sampling temperature (default 0)")
    add("--max-tokens", type=int, metavar="N", help="answer length limit")
    add("--timeout", type=float, metavar="SECONDS",
        help="the limit on each model request, from sending it to the answer's last byte (default 60)")
    add("--max-answer-bytes", type=int, metavar="N",
        help="the most bytes of one model answer gsr reads (default 4194304, 4 MiB); a larger answer fails its "
             "call, and is not retried")
    add("--weighted", action="store_true",
        help="read every Score criterion with one-digit whole-number bounds (e.g. Score[1..5]) as the expected value "
             "over the answer token's probabilities (G-Eval); needs a server that returns logprobs")
    add("--deadline", type=float, metavar="SECONDS",
        help="the whole run's time budget for model calls: calls not started by then are not made (their "
             "judgments are invalid, saying so), and a run whose pace cannot meet it says so early")
    add("--max-retries", type=int, metavar="N",
        help="retries on 429, 5xx, timeouts and dropped connections (default 5)")
    add("--concurrency", type=int, metavar="N", help="model requests in flight per judge model (default 8)")
    add("--seed", type=int, metavar="N",
        help="makes the run reproducible: option order, few-shot draws and the model's sampling seed are "
             "derived from it per call")
    add("--structured", choices=("auto", "json_schema", "json_object", "grammar", "off"),
        help="how JSON answers are asked for (default auto: JSON Schema, falling back where unsupported)")
    add("--rpm", type=int, metavar="N",
        help="at most N model requests a minute per judge model (your rate limit; also [judge] rpm); 429s lower "
             "the requests in flight by themselves, whatever this says")
    add("--tpm", type=int, metavar="N",
        help="at most N tokens a minute per judge model (prompt, estimated, plus the answer's allowance; also "
             "[judge] tpm)")
    add("--reasoning-effort", choices=("minimal", "low", "medium", "high"), default=None,
        help="a reasoning model's effort, sent as `reasoning_effort` (default: not sent, the model's own); "
             "also [judge] reasoning_effort in gsr.toml, per role in [judge.roles.NAME]; part of the cache key")


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the model's flags and the model judge's own to ``parser`` (existing flags are left as they are)."""
    add_model_arguments(parser, "model judges (llm criteria); settings come from these flags, then the "
                                "environment (OPENAI_API_KEY, OPENAI_BASE_URL, GSR_MODEL, ...), then gsr.toml")
    add = _adder(parser, "model judges: the judge's own options")
    add("--cache", metavar="FILE", default=None,
        help=f"the judgment cache (SQLite; default {DEFAULT_CACHE}); a rerun or a resumed run costs no calls "
             "for anything stored")
    add("--no-cache", action="store_true", help="neither read nor write the judgment cache")
    add("--fewshot", metavar="FILE",
        help="labelled examples (columns criterion, text, verdict, reason?; .jsonl/.csv/.json), sampled "
             "balanced across verdicts per criterion")
    add("--fewshot-k", type=int, default=4, metavar="N", help="few-shot examples per criterion (default 4)")
    add("--max-reasks", type=int, default=2, metavar="N",
        help="re-asks when an answer is outside the criterion's type (default 2); then abstained (T?) or invalid")
    add("--joint-disagreement", choices=default_catalog().enums["Disagreement"].members, default="mean",
        help="joint judging asks in both orders (A/B, B/A); when they disagree: mean (average, for ordinal and "
             "score; else abstain), first, abstain (T?, else invalid) or invalid (default mean)")


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


def judge_flags(args: argparse.Namespace, env: dict | None = None) -> dict:
    """The flags layer for :func:`resolve_settings` from parsed arguments."""
    env = os.environ if env is None else env
    get = lambda name: getattr(args, name, None)  # noqa: E731
    flags: dict = {
        "model": get("model"),
        "base_url": get("base_url"),
        "temperature": get("temperature"),
        "max_tokens": get("max_tokens"),
        "timeout_s": get("timeout"),
        "max_retries": get("max_retries"),
        "concurrency": get("concurrency"),
        "seed": get("seed"),
        "structured": get("structured"),
        "max_answer_bytes": get("max_answer_bytes"),
        "reasoning_effort": get("reasoning_effort"),
        "rpm": get("rpm"),
        "tpm": get("tpm"),
    }
    var = get("api_key_env")
    if get("api_key"):
        flags["api_key"] = get("api_key")
    elif var:
        key = env.get(var)
        if not key:
            from gsrlang.judges.llm.config import ConfigError

            raise ConfigError(f"--api-key-env {var}: that environment variable is not set")
        flags["api_key"] = key
    roles: dict = {}
    for text in get("role") or ():
        name, over = parse_role(text)
        roles.setdefault(name, {}).update(over)
    if roles:
        flags["roles"] = roles
    return {k: v for k, v in flags.items() if v is not None}


def model_settings(args: argparse.Namespace):
    """The model settings the flags (then environment, then gsr.toml) describe, or None when no model is set.

    Raises :class:`gsrlang.judges.llm.config.ConfigError` (an ``LLMError``) for an unusable
    configuration; the message never contains a key.
    """
    from gsrlang.judges.llm.config import NO_MODEL_MESSAGE, ConfigError, resolve_settings

    try:
        flags = judge_flags(args)
        config_path = getattr(args, "judge_config", None)
        return resolve_settings(flags, config_path=Path(config_path) if config_path else None)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    except ConfigError as exc:
        if str(exc) == NO_MODEL_MESSAGE:
            return None
        raise


def build_llm_judge(args: argparse.Namespace, settings=None, **judge_kwargs: Any):
    """The LLM judge for `settings` (default: :func:`model_settings` of the flags), or None without a model.

    Raises :class:`gsrlang.judges.llm.config.ConfigError` (an ``LLMError``) for an unusable
    configuration, a few-shot file that cannot be read or a cache that cannot be opened;
    the message never contains a key.
    """
    settings = settings if settings is not None else model_settings(args)
    if settings is None:
        return None
    return create_from_settings(
        settings,
        cache=None if getattr(args, "no_cache", False) else (getattr(args, "cache", None) or DEFAULT_CACHE),
        fewshot=getattr(args, "fewshot", None),
        fewshot_k=getattr(args, "fewshot_k", 4),
        max_reasks=getattr(args, "max_reasks", 2),
        joint_disagreement=getattr(args, "joint_disagreement", "mean") or "mean",
        deadline_s=getattr(args, "deadline", None),
        weighted=bool(getattr(args, "weighted", False)),
        budget_usd=getattr(args, "budget_usd", None),
        plan=getattr(args, "plan", None),
        **judge_kwargs,
    )


def create_from_settings(settings, *, cache: str | None = DEFAULT_CACHE, fewshot: str | None = None,
                         fewshot_k: int = 4, max_reasks: int = 2, joint_disagreement: str = "mean",
                         **judge_kwargs: Any):
    """An LLMJudge from resolved settings and the judge's own options (paths are opened here)."""
    from gsrlang.judges.llm.cache import JudgmentCache
    from gsrlang.judges.llm.config import ConfigError
    from gsrlang.judges.llm.fewshot import FewShotBank
    from gsrlang.judges.llm.judge import LLMJudge

    if fewshot_k is not None and fewshot_k < 0:
        raise ConfigError(f"--fewshot-k must be >= 0, got {fewshot_k}")
    seed = settings.default.seed or 0
    bank = FewShotBank.load(fewshot, k=fewshot_k, seed=seed) if fewshot else None
    judge_kwargs.setdefault("price_overrides", price_overrides(settings))
    store = JudgmentCache(cache) if cache else None
    return LLMJudge(settings, cache=store, fewshot=bank, max_reasks=max_reasks,
                    joint_disagreement=joint_disagreement, owns_cache=True, **judge_kwargs)


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
    return create_from_settings(settings, cache=cache, **own)
