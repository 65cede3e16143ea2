"""gsr probe: what a model server supports, asked once and remembered for gsr run and gsr compile."""

from __future__ import annotations

import asyncio
import json
import sys

from gsrlang.commands import usage_errors

HELP = "ask a model server what it supports (structured output, grammar, context, logprobs, speed)"
DESCRIPTION = """\
Ask an OpenAI-compatible server what it supports, with a few small requests, and print it:
whether it is reachable, the models it lists (and whether --model is among them), its
context length where it tells it (vLLM's /v1/models, llama.cpp's /props; for a server on
this machine, read from the error to one over-long prompt), which structured-output modes
it enforces (json_schema; json_object with a schema; a GBNF grammar), which grammar field
it obeys (gbnf: llama.cpp's `grammar`; structured_outputs or guided_grammar: vLLM's Lark),
whether it returns logprobs, whether it caches prompts (cached tokens reported on a
repeated prefix of about 1,300 tokens), its generation speed in tokens/s and the latency of
one short judgment. Parameters the model refuses (OpenAI's reasoning models refuse
`temperature`, `max_tokens`, `logprobs`) are adapted once each, as `gsr run` adapts them,
and listed.

What it learns is written to servers.json beside the judgment cache (--cache), where
`gsr run` takes its structured-output mode and the refused parameters from (no negotiation
needed) and `gsr compile` its context length and grammar field.

output: the report on standard output (a table; --json: one JSON document), also when the server cannot
be reached; why not, on standard error.
exit status: 0 the server answered and serves the model; 1 it is unreachable or does not
serve the model; 2 bad options.

examples:
  gsr probe --model smollm2 --base-url http://127.0.0.1:8080/v1
  gsr probe --model gpt-4o-mini --json"""


def add_arguments(p) -> None:
    from gsrlang.judges.llm.options import DEFAULT_CACHE

    p.add_argument("--model", metavar="MODEL", help="the model (default: $GSR_MODEL or gsr.toml)")
    p.add_argument("--base-url", metavar="URL", help="the server, e.g. http://127.0.0.1:8080/v1 (default: "
                                                     "$OPENAI_BASE_URL, else OpenAI)")
    p.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the key")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="per-request timeout (default 60)")
    p.add_argument("--cache", metavar="FILE", default=DEFAULT_CACHE,
                   help=f"the judgment cache whose servers.json keeps what is learnt (default {DEFAULT_CACHE})")
    p.add_argument("--no-cache", action="store_true", help="remember nothing")
    p.add_argument("--overflow", choices=("auto", "yes", "no"), default="auto",
                   help="read the context length from an over-long prompt's error (auto: for local servers)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")


def _table(report: dict) -> str:
    def show(value) -> str:
        if value is None:
            return "not told"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, list):
            return ", ".join(value) or "none"
        return str(value)

    rows = [("server", report["server"]), ("model", report["model"]), ("reachable", show(report["reachable"]))]
    if "models" in report:
        rows.append(("models listed", show(report["models"])))
        rows.append(("model served", show(report.get("model_listed"))))
    if "context_length" in report:
        ctx = show(report["context_length"])
        rows.append(("context length", ctx + (f" (from the {report['context_source']})"
                                               if report.get("context_source") else "")))
    rows.extend((f"structured {mode}", verdict) for mode, verdict in (report.get("structured") or {}).items())
    if "grammar_dialect" in report:
        rows.append(("grammar dialect", report["grammar_dialect"] or "none obeyed"))
    silent = "unknown: the model answered with no text"
    if "logprobs" in report:
        rows.append(("logprobs", silent if report["logprobs"] is None else show(report["logprobs"])))
    if "prompt_cache" in report:
        rows.append(("prompt cache", {True: "yes (cached tokens on a repeated prefix)",
                                      False: "no (0 cached tokens on a repeated prefix)",
                                      None: "not told (no cached_tokens in the usage)"}[report["prompt_cache"]]))
    if report.get("adapted"):
        rows.append(("refused parameters", "; ".join(report["adapted"])))
    if "tokens_per_s" in report:
        empty = report["tokens_per_s"] is None and report.get("speed_answer_empty")
        rows.append(("tokens/s", silent if empty else show(report["tokens_per_s"])))
        parsed = "" if report.get("judgment_parsed") else ", answer not JSON"
        rows.append(("one judgment", f"{report['judgment_latency_s']} s ({report['judgment_mode']}{parsed})"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def run(args) -> int:
    from gsrlang.judges.llm.config import ConfigError, LLMError, resolve_settings
    from gsrlang.commands.config import judge_flags
    from gsrlang.judges.llm.probe import probe
    from gsrlang.judges.llm.server import KnowledgeStore, knowledge_path

    with usage_errors(ConfigError, ValueError):
        settings = resolve_settings(judge_flags(args))
    store = None if args.no_cache else KnowledgeStore(knowledge_path(args.cache))
    overflow = {"auto": None, "yes": True, "no": False}[args.overflow]
    with usage_errors(LLMError):
        report = asyncio.run(probe(settings.default, knowledge=store, overflow=overflow))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_table(report))
    if report.get("error"):
        print(f"gsr probe: {report['error']}", file=sys.stderr)
        return 1
    return 0
