"""The typed configuration of a command, built once here from argparse, the environment and gsr.toml.

Nothing below gsrlang.commands sees an argparse namespace (tests/test_layering.py): a command turns
its parsed flags into typed values here and passes those down.

    add_model_arguments(parser)         # the model's flags, the same for `gsr run` and `gsr compile`
    add_llm_arguments(parser)           # the model's flags and the judge's own (cache, few-shot, ...)
    settings = model_settings(args)     # JudgeSettings (flags > environment > gsr.toml), or None without a model
    options = judge_options(args)       # JudgeOptions: the model judge's own options
    judge = build_llm_judge(args, settings)   # an LLMJudge, or None without a model
    engine = engine_options(args)       # EngineOptions: the Ray engine's flags
    config = run_config(args, ...)      # RunConfig: how one run goes (sinks, bounds, the evaluator path)
    add_table_arguments(parser, ...)    # --trace or --data, and the data's columns: gsr tune's and gsr ablate's
    table = table_config(args, ...)     # TableConfig: where gsr tune / gsr ablate read their labelled items
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from gsrlang.judges.llm.options import DEFAULT_CACHE, JudgeOptions, parse_role
from gsrlang.lang.catalog import default_catalog

__all__ = ["add_llm_arguments", "add_model_arguments", "add_table_arguments", "build_llm_judge", "cache_path",
           "columnar_wanted", "engine_options", "judge_flags", "judge_options", "model_settings", "response_columns",
           "run_config", "table_config"]


def _adder(parser: argparse.ArgumentParser, title: str):
    group = parser.add_argument_group(title)

    def add(flag: str, **kw: Any) -> None:
        if flag not in parser._option_string_actions:  # noqa: SLF001 - argparse has no public lookup
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


def judge_flags(args: argparse.Namespace) -> dict:
    """The flags layer of :func:`gsrlang.judges.llm.config.resolve_settings` from parsed arguments."""
    get = lambda name: getattr(args, name, None)  # noqa: E731
    flags: dict = {("timeout_s" if name == "timeout" else name): get(name) for name in (
        "model", "base_url", "temperature", "max_tokens", "timeout", "max_retries", "concurrency", "seed",
        "structured", "max_answer_bytes", "reasoning_effort", "rpm", "tpm")}
    var = get("api_key_env")
    if get("api_key"):
        flags["api_key"] = get("api_key")
    elif var:
        if not (key := os.environ.get(var)):
            from gsrlang.judges.llm.config import ConfigError

            raise ConfigError(f"--api-key-env {var}: that environment variable is not set")
        flags["api_key"] = key
    roles: dict = {}
    for text in get("role") or ():
        name, over = parse_role(text)
        roles.setdefault(name, {}).update(over)
    flags["roles"] = roles or None  # no --role: left out below
    return {k: v for k, v in flags.items() if v is not None}


def model_settings(args: argparse.Namespace):
    """The model settings the flags (then environment, then gsr.toml) describe, or None when no model is set.

    Raises :class:`gsrlang.judges.llm.config.ConfigError` (an ``LLMError``) for an unusable
    configuration; the message never contains a key.
    """
    from gsrlang.judges.llm.config import ConfigError
    from gsrlang.judges.llm.options import model_settings as resolve

    try:
        flags = judge_flags(args)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return resolve(flags, getattr(args, "judge_config", None))


def cache_path(args: argparse.Namespace) -> str | None:
    """The judgment cache the flags name (--cache, else the default), or None with --no-cache."""
    return None if getattr(args, "no_cache", False) else (getattr(args, "cache", None) or DEFAULT_CACHE)


def judge_options(args: argparse.Namespace) -> JudgeOptions:
    """The model judge's own options from the flags (those a command does not define keep their defaults)."""
    get = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    return JudgeOptions(cache=cache_path(args), fewshot=get("fewshot"), fewshot_k=get("fewshot_k", 4),
                        max_reasks=get("max_reasks", 2), joint_disagreement=get("joint_disagreement") or "mean",
                        deadline_s=get("deadline"), weighted=bool(get("weighted", False)),
                        budget_usd=get("budget_usd"), plan=get("plan"))


def build_llm_judge(args: argparse.Namespace, settings=None, **judge_kwargs: Any):
    """The LLM judge for `settings` (default: :func:`model_settings` of the flags), or None without a model.

    Raises :class:`gsrlang.judges.llm.config.ConfigError` (an ``LLMError``), as
    :func:`gsrlang.judges.llm.options.build_llm_judge` does.
    """
    from gsrlang.judges.llm.options import build_llm_judge as build

    settings = settings if settings is not None else model_settings(args)
    return None if settings is None else build(settings, judge_options(args), **judge_kwargs)


def engine_options(args: argparse.Namespace):
    """The engine's own flags (`gsr run --engine ray`'s) as typed options."""
    from gsrlang.execution.engines import EngineOptions

    get = lambda name: getattr(args, name, None)  # noqa: E731
    return EngineOptions(ray_address=get("ray_address"), actors=get("actors"), block_size=get("block_size"),
                         work_dir=get("work_dir"))


def columnar_wanted(env=None) -> bool:
    """Whether runs take the column path where they can: unless the environment variable GSR_COLUMNAR_RUN is
    0 (every program item by item, for comparison; see docs/running.md). Read here and nowhere else."""
    return (os.environ if env is None else env).get("GSR_COLUMNAR_RUN", "1").strip() != "0"


def run_config(args: argparse.Namespace, concurrency: int, **over: Any):
    """The run's typed configuration from `gsr run`'s flags: sinks, bounds and the path; `over` replaces fields
    (a dry run writes nothing; a batch run has its own sinks and window)."""
    from gsrlang.execution.planner import RunConfig

    get = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    values = dict(out=get("out"), trace=get("trace"), concurrency=concurrency, limit=get("limit"),
                  program_path=get("program"), short_circuit=get("short_circuit", True), columnar=columnar_wanted())
    return RunConfig(**values | over)


def add_table_arguments(parser: argparse.ArgumentParser, trace_help: str) -> None:
    """Where `gsr tune` and `gsr ablate` read their labelled items (what `table_config` reads): --trace FILE
    or --data FILE, one of them required, and the columns of --data as `gsr run` names them."""
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="FILE", help=trace_help)
    src.add_argument("--data", metavar="FILE",
                     help="labelled items, for programs whose criteria read the data (human(), rule.*)")
    g = parser.add_argument_group("columns of --data (as for gsr run)")
    g.add_argument("--input-field", default="input", metavar="NAME", help="the task input (default: input)")
    g.add_argument("--response-field", default="response", metavar="NAME", help="the response (default: response)")
    g.add_argument("--responses", metavar="A,B", help="the two responses of a pairwise item")
    g.add_argument("--id-field", metavar="NAME",
                   help="the item id (default: the data's `id` column when it has one, else the line number)")
    g.add_argument("--label-field", metavar="NAME", help="the human label")
    g.add_argument("--reference-field", metavar="NAME", help="a fixed reference")


def response_columns(args: argparse.Namespace, mode: str, program=None) -> tuple[str, ...]:
    """The response columns that --responses or --response-field name, for `gsr run` and for `gsr tune` and
    `gsr ablate` with --data: a pairwise `program` whose criteria read no response gets two that are only named.
    A UsageError unless there are as many as a `mode` item has."""
    from gsrlang.commands import UsageError
    from gsrlang.files.needs import program_needs

    if args.responses:
        responses = tuple(r.strip() for r in args.responses.split(",") if r.strip())
    elif mode == "pairwise" and program is not None and not program_needs(program).responses:
        responses = ("A", "B")  # never read: the candidates are only named
    else:
        responses = (args.response_field,)
    need = 1 if mode == "pointwise" else 2
    if len(responses) != need:
        raise UsageError(f"a {mode} run judges {need} response column{'s' if need > 1 else ''}; got "
                         f"{len(responses)} ({', '.join(responses)})" +
                         (": name them with --responses A,B" if mode == "pairwise" else ""))
    return responses


def table_config(args: argparse.Namespace, program, mode: str | None, label: str, path: str | None = None):
    """Where `gsr tune` or `gsr ablate` reads its labelled items, from the flags: --trace, or --data with its
    columns (only those the program reads, as `gsr run` asks for them); `path`: another file of the same
    kind (--holdout). `label` names the program in messages. A UsageError for columns that cannot be."""
    from gsrlang.commands import UsageError, usage_errors
    from gsrlang.execution.planner import TableConfig

    get = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    if get("trace"):
        return TableConfig(trace=path or args.trace, program_label=label)
    from gsrlang.files.dataset import default_id_field
    from gsrlang.files.needs import column_map

    if not args.label_field:
        raise UsageError("--data needs --label-field (the human label to learn from)")
    responses = response_columns(args, mode, program)
    id_field = args.id_field if args.id_field is not None else default_id_field(args.data)
    with usage_errors(ValueError):
        columns = column_map(program, mode, args.input_field, responses, id_field, args.label_field,
                             args.reference_field)
    return TableConfig(data=path or args.data, columns=columns, mode=mode, program_label=label)
