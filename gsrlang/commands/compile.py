"""gsr compile: an LLM writes the .gsr program for a prose rubric; the checker's diagnostics drive repairs."""

from __future__ import annotations

import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors
from gsrlang.lang.tasks import MODES, ON_TIE, QUANTIZE

HELP = "compile a natural-language rubric into a checked .gsr program with an LLM"
DESCRIPTION = """\
Compile a rubric written in prose into a .gsr program, before any response is seen.
The compile sees S = (task input, rubric, optional reference, task contract) and
nothing else: there is no option for a response or a gold label. One model call
writes the program; the checker (the same one as `gsr check`) reads it, and its
diagnostics go back to the model for repair, up to --repairs times. The first
program without errors is written as it is, under a provenance header. Each round's
diagnostics are printed to standard error as they come.

Batch mode (--data) compiles one program per row from a per-item rubric column
(BiGGen-style instance rubrics) into --out-dir, with an index.jsonl that maps item
ids to programs and a compile report. Results are cached by the hash of S: running
the same compile again makes no model call.

The model: --model (or $GSR_MODEL, or [judge] model in gsr.toml) on the OpenAI API
or any OpenAI-compatible server (--base-url); the key is read from $OPENAI_API_KEY.

exit status: 0 compiled; 1 a rubric did not compile within the repair budget;
2 the tool failed (no server, timeout, bad options, missing files).

examples:
  gsr compile rubric.md --task pointwise --scale 1..5 -o rubric.gsr
  gsr compile rubric.md --task pairwise --epsilon 0.05 --on-tie tie -o pairwise.gsr
  gsr compile rubric.md --task pointwise --scale 1..5 --input prompt.txt --repairs 5 \\
      --model qwen2.5-7b --base-url http://localhost:8000/v1 --constrain grammar -o out.gsr
  gsr compile --data items.jsonl --rubric-field rubric --input-field input \\
      --task pointwise --scale 1..5 --out-dir programs/ --report report.json"""


def add_arguments(p) -> None:
    p.add_argument("rubric", nargs="?", metavar="RUBRIC", help="the rubric text file (`-`: standard input)")
    t = p.add_argument_group("task contract")
    t.add_argument("--task", choices=tuple(MODES), required=True,
                   help="the readout the program must have")
    t.add_argument("--scale", metavar="LO..HI", help="pointwise: the native scale, e.g. 1..5 (required)")
    t.add_argument("--quantize", choices=QUANTIZE,
                   help="pointwise: how the score is quantized (default: round; thresholds: the model picks "
                        "the cut points)")
    t.add_argument("--epsilon", metavar="E", help="pairwise: the tie margin in [0, 1) (default: 0)")
    t.add_argument("--on-tie", choices=ON_TIE,
                   help="pairwise: tie policy (default: tie)")
    s = p.add_argument_group("the rest of S (single rubric)")
    s.add_argument("--input", metavar="FILE_OR_TEXT", help="the task input the responses will answer (a file, or text)")
    s.add_argument("--reference", metavar="FILE_OR_TEXT", help="a fixed reference answer (a file, or text)")
    s.add_argument("-o", "--output", metavar="OUT.gsr", help="write the program here (default: standard output)")
    b = p.add_argument_group("batch mode (a per-item rubric column)")
    b.add_argument("--data", metavar="FILE", help="items: .jsonl, .csv, .tsv or .json (an array)")
    b.add_argument("--rubric-field", metavar="NAME", help="the column holding each item's rubric")
    b.add_argument("--input-field", metavar="NAME", help="the column holding each item's task input")
    b.add_argument("--reference-field", metavar="NAME", help="the column holding each item's reference")
    b.add_argument("--id-field", metavar="NAME", help="the item id (default: `id` when present, else the row number)")
    b.add_argument("--out-dir", metavar="DIR", help="write one program per item and index.jsonl here")
    b.add_argument("--report", metavar="FILE", help="write the compile report as JSON here")
    b.add_argument("--concurrency", type=int, metavar="N", help="items compiled at once (default: the model's)")
    c = p.add_argument_group("compiling")
    c.add_argument("--repairs", type=int, default=3, metavar="K", help="repair rounds after the first (default: 3)")
    c.add_argument("--constrain", choices=("none", "grammar", "json"), default="none",
                   help="grammar: send the .gsr grammar for constrained decoding (vLLM); json: ask for the JSON form "
                        "under a JSON Schema (structured outputs). The checker decides either way")
    c.add_argument("--grammar-field", choices=("auto", "structured_outputs", "guided_grammar", "grammar"),
                   default="auto",
                   help="how the grammar is sent: structured_outputs (vLLM >= 0.10.2), guided_grammar (older vLLM), "
                        "grammar (llama.cpp: the grammar in GBNF); auto (the default): what `gsr probe` found the "
                        "server obeys, else structured_outputs")
    c.add_argument("--context", type=int, metavar="TOKENS",
                   help="the server's context length; a small one gets a smaller prompt (a compact catalogue, one "
                        "example). Default: what `gsr probe` found, else unknown (the full prompt)")
    c.add_argument("--json-form", choices=("auto", "project", "sketch"), default="auto",
                   help="with --constrain json: the declarative JSON form of `gsr export` (project), a smaller "
                        "declaration sketch (sketch), or the project form when installed (auto, the default)")
    c.add_argument("--cache", metavar="FILE", help="the compile cache (default: .gsr-cache/compile.sqlite)")
    c.add_argument("--no-cache", action="store_true", help="neither read nor write the compile cache")
    c.add_argument("--retry-failed", action="store_true", help="compile again the rubrics whose cached result failed")
    c.add_argument("--print-prompt", action="store_true", help="print the prompt for the first rubric and stop")
    from gsrlang.commands.config import add_model_arguments

    add_model_arguments(p)  # the same flags as `gsr run`'s (--model, --base-url, --judge-config, ...)
    p.add_argument("--format", choices=("full", "concise"), default="concise",
                   help="how each round's diagnostics are printed to standard error (default: concise)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the outcome")


# ---- S from the options ---------------------------------------------------------------------------------
def _contract(args):
    from gsrlang.compiler.spec import Pairwise, Pointwise, SpecError

    try:
        if args.task == "pointwise":
            if args.epsilon is not None or args.on_tie is not None:
                raise UsageError("--epsilon and --on-tie are for --task pairwise")
            if not args.scale:
                raise UsageError("--task pointwise needs --scale LO..HI (for example --scale 1..5)")
            return Pointwise(scale=args.scale, quantize=args.quantize or "round")
        if args.scale is not None or args.quantize is not None:
            raise UsageError("--scale and --quantize are for --task pointwise")
        epsilon = 0.0
        if args.epsilon is not None:
            try:
                epsilon = float(args.epsilon)
            except ValueError:
                raise UsageError(f"--epsilon must be a number in [0, 1), got {args.epsilon!r}") from None
        return Pairwise(epsilon=epsilon, on_tie=args.on_tie or "tie")
    except SpecError as exc:
        flag = "--scale" if args.task == "pointwise" else "--epsilon"
        raise UsageError(f"bad {flag}: {exc}") from None


def _read_text(path: str, what: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{what} file not found: {path}")
    if p.is_dir():
        raise UsageError(f"{what} file is a folder: {path}")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} file is not UTF-8 text: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None


def _file_or_text(value: str | None, what: str) -> str | None:
    if value is not None and len(value) < 4096 and "\n" not in value and Path(value).is_file():
        return _read_text(value, what)
    return value


def _check_mode(args) -> bool:
    """True for batch mode; raises UsageError for options that do not go together."""
    batch = args.data is not None
    if batch:
        if args.rubric:
            raise UsageError("give either a RUBRIC file or --data, not both")
        if not args.rubric_field:
            raise UsageError("--data needs --rubric-field (the column holding each item's rubric)")
        if not args.out_dir and not args.print_prompt:
            raise UsageError("--data needs --out-dir (where the programs and index.jsonl go)")
        if args.output or args.input is not None or args.reference is not None:
            raise UsageError("-o, --input and --reference are for a single rubric; in batch mode use "
                             "--out-dir, --input-field and --reference-field")
    else:
        if not args.rubric:
            raise UsageError("give a RUBRIC file (or --data with --rubric-field for batch mode)")
        extra = [f for f, v in (("--rubric-field", args.rubric_field), ("--input-field", args.input_field),
                                ("--reference-field", args.reference_field), ("--id-field", args.id_field),
                                ("--out-dir", args.out_dir), ("--report", args.report)) if v]
        if extra:
            raise UsageError(f"{', '.join(extra)} need{'s' if len(extra) == 1 else ''} --data (batch mode)")
    if args.repairs < 0:
        raise UsageError(f"--repairs must be 0 or more, got {args.repairs}")
    if args.context is not None and args.context < 256:
        raise UsageError(f"--context must be at least 256 tokens, got {args.context}")
    _check_paths(args)
    return batch


def _check_paths(args) -> None:
    """Refuse (PathClash) an output that is an input (the rubric, data, input or reference file) or another output."""
    from gsrlang.compiler.batch import INDEX_NAME
    from gsrlang.compiler.cache import DEFAULT_CACHE
    from gsrlang.files.safeio import check_outputs

    files = [(flag, v) for flag, v in (("--input", args.input), ("--reference", args.reference))
             if v is not None and Path(v).is_file()]
    index = str(Path(args.out_dir) / INDEX_NAME) if args.out_dir else None
    check_outputs([("RUBRIC", args.rubric), ("--data", args.data),
                   ("--judge-config", getattr(args, "judge_config", None)), *files],
                  [("-o", args.output), ("the failed-program file", args.output and args.output + ".failed"),
                   ("the index", index), ("--report", args.report),
                   ("--cache", None if args.no_cache else (args.cache or DEFAULT_CACHE))])


def _settings(args):
    """The compiler model's settings, built by the one model-client builder that `gsr run` uses too."""
    from gsrlang.commands.config import model_settings
    from gsrlang.judges.llm import ConfigError
    from gsrlang.judges.llm.config import NO_MODEL_MESSAGE

    with usage_errors(ConfigError):
        settings = model_settings(args)
    if settings is None:
        raise UsageError(NO_MODEL_MESSAGE)
    return settings.default


# ---- printing -----------------------------------------------------------------------------------------
class _Printer:
    def __init__(self, args, display: str):
        self.fmt, self.quiet, self.display = args.format, args.quiet, display

    def round(self, r, prefix: str = "") -> None:
        if self.quiet:
            return
        from gsrlang.compiler.prompt import render_feedback
        from gsrlang.compiler.synthesize import diagnostics_concise

        what = "synthesis" if r.index == 0 else f"repair {r.index}"
        if r.accepted:
            w = len(r.warnings)
            note = f" ({w} warning{'s' if w != 1 else ''})" if w else ""
            print(f"{prefix}round {r.index} ({what}): accepted{note}", file=sys.stderr)
            return
        n = len(r.diagnostics)
        print(f"{prefix}round {r.index} ({what}): rejected, {n} error{'s' if n != 1 else ''}", file=sys.stderr)
        render = render_feedback if self.fmt == "full" and r.program is not None else diagnostics_concise
        for line in render(r.program, r.diagnostics, self.display).rstrip("\n").splitlines():
            print(f"{prefix}  {line}", file=sys.stderr)


# ---- run ----------------------------------------------------------------------------------------------
def run(args) -> int:
    batch = _check_mode(args)
    contract = _contract(args)
    return _run_batch(args, contract) if batch else _run_one(args, contract)


def _with_cache(args, compile_with):
    """asyncio.run(compile_with(cache)) with the compile cache open (None under --no-cache), closed after; the
    cache is seen through a _CacheView (--retry-failed)."""
    import asyncio

    from gsrlang.compiler.cache import DEFAULT_CACHE, CompileCache
    from gsrlang.judges.llm import CacheError

    if args.no_cache:
        return asyncio.run(compile_with(None))
    with usage_errors(CacheError):
        cache = CompileCache(args.cache or DEFAULT_CACHE)
    with cache:
        return asyncio.run(compile_with(_CacheView(cache, args.retry_failed)))


def _print_prompt(spec) -> int:
    """--print-prompt: the compile prompt for `spec` on standard output."""
    from gsrlang.compiler.prompt import PromptError, build_prompt

    with usage_errors(PromptError):
        prompt = build_prompt(spec)
    sys.stdout.write(f"=== system\n{prompt.system}\n=== user\n{prompt.user}")
    return 0


def _run_one(args, contract) -> int:
    from gsrlang.compiler.spec import CompileSpec, SpecError

    rubric = _read_text(args.rubric, "rubric")
    try:
        spec = CompileSpec(rubric=rubric, contract=contract, task_input=_file_or_text(args.input, "input"),
                           reference=_file_or_text(args.reference, "reference"))
    except SpecError as exc:
        raise UsageError(f"{args.rubric}: {exc}") from None
    if args.print_prompt:
        return _print_prompt(spec)
    out = Path(args.output) if args.output else None
    if out is not None and out.is_dir():
        raise UsageError(f"-o {args.output} is a folder; give a file name")
    config = _settings(args)
    printer = _Printer(args, out.name if out else "program.gsr")
    result = _with_cache(args, lambda cache: _compile_one(spec, config, args, cache, out, printer.round))
    return _report_one(args, result, out)


def _knowledge(args):
    """The store of what `gsr probe` (or a run's negotiation) found about servers, beside the compile cache
    (None under --no-cache)."""
    from gsrlang.compiler.cache import DEFAULT_CACHE
    from gsrlang.judges.llm.server import KnowledgeStore, knowledge_path

    return None if args.no_cache else KnowledgeStore(knowledge_path(args.cache or DEFAULT_CACHE))


def _server_facts(store, config) -> dict:
    """What `store` (or nothing, None) recorded for this server and model."""
    return {} if store is None else store.get(config.effective_base_url, config.model)


def _fitted_prompt(spec, args, config, facts, announce: bool = True):
    """The compile prompt sized to the server's context (--context, else the probed one); says what was cut."""
    from gsrlang.compiler.prompt import fit_prompt

    context = args.context or facts.get("context_length")
    reserve = 2 * (config.max_tokens or 1024)
    prompt, cut = fit_prompt(spec, context, reserve)
    if cut != "nothing" and announce and not args.quiet:
        source = "--context" if args.context else "the server"
        print(f"gsr compile: the prompt is fitted to a {context}-token context (from {source}), keeping "
              f"{reserve} tokens for answers and repairs; cut: {cut}", file=sys.stderr)
    return prompt


def _grammar_field(args, facts) -> str:
    if args.grammar_field != "auto":
        return args.grammar_field
    return {"gbnf": "grammar"}.get(facts.get("grammar_dialect"), facts.get("grammar_dialect") or "structured_outputs")


async def _compile_one(spec, config, args, cache, out, on_round):
    from gsrlang.compiler.prompt import PromptError
    from gsrlang.compiler.synthesize import CompilerClient, compile_rubric
    from gsrlang.judges.llm import LLMError
    from gsrlang.judges.llm.server import context_from_error

    try:
        store = _knowledge(args)
        facts = _server_facts(store, config)
        async with CompilerClient(config) as client:
            for attempt in range(2):
                prompt = _fitted_prompt(spec, args, config, facts)
                try:
                    return await compile_rubric(spec, client, repairs=args.repairs, constrain=args.constrain,
                                                grammar_field=_grammar_field(args, facts), json_form=args.json_form,
                                                path=out, on_round=on_round, prompt=prompt, cache=cache)
                except LLMError as exc:  # a context overflow names the context: fit the prompt to it, once
                    context = context_from_error(getattr(exc, "server_message", None) or "")
                    if attempt or context is None or args.context or facts.get("context_length"):
                        raise
                    facts = {**facts, "context_length": context}
                    if store is not None:
                        store.update(config.effective_base_url, config.model, context_length=context)
    except PromptError as exc:
        raise UsageError(str(exc)) from None
    except LLMError as exc:
        raise UsageError(f"model call failed: {exc}") from None


class _CacheView:
    """The cache, optionally ignoring cached failures (--retry-failed)."""

    def __init__(self, cache, retry_failed: bool):
        self.cache, self.retry_failed = cache, retry_failed
        self.key, self.store = cache.key, cache.store

    def load(self, key, spec, **kw):
        result = self.cache.load(key, spec, **kw)
        return None if result is not None and self.retry_failed and not result.ok else result


def _report_one(args, result, out: Path | None) -> int:
    from gsrlang.compiler.prompt import render_feedback

    where = args.rubric if args.rubric != "-" else "<stdin>"
    cached = " (from the cache, no model call)" if result.cached else ""
    if result.ok:
        if out is None:
            sys.stdout.write(result.source)
        else:
            _write(out, result.source)
            Path(str(out) + ".failed").unlink(missing_ok=True)
        rounds = f"{result.repairs} repair round{'s' if result.repairs != 1 else ''}"
        print(f"compiled {where} -> {out or '<stdout>'}: {result.status}, {rounds}, model {result.model}{cached}",
              file=sys.stderr)
        return 0
    print(f"gsr compile: {where}: compile failed: {result.reason}{cached}", file=sys.stderr)
    if result.last_program is not None:
        if args.quiet or args.format == "full":
            sys.stderr.write(render_feedback(result.last_program, result.diagnostics,
                                             out.name if out else "program.gsr"))
        if out is not None:
            from gsrlang.compiler.batch import failed_text

            failed = Path(str(out) + ".failed")
            _write(failed, failed_text(result, out.name))
            print(f"the last program and its diagnostics are in {failed}", file=sys.stderr)
    return 1


def _write(path: Path | str, text: str, what: str = "") -> None:
    from gsrlang.files.safeio import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write {what}{path}: {exc.strerror or exc}") from None


# ---- batch --------------------------------------------------------------------------------------------
def _run_batch(args, contract) -> int:
    import json

    from gsrlang.compiler.batch import CompileFields, CompileItem, RefusedField, read_compile_items
    from gsrlang.files.dataset import DataError

    with usage_errors(RefusedField, ValueError):
        fields = CompileFields(rubric=args.rubric_field, input=args.input_field, reference=args.reference_field,
                               id=args.id_field)
    with usage_errors(DataError):
        items = list(read_compile_items(args.data, fields, contract))
    if args.print_prompt:
        if (first := next((i for i in items if isinstance(i, CompileItem)), None)) is None:
            raise UsageError(f"{args.data}: no usable item")
        return _print_prompt(first.spec)
    config = _settings(args)
    out_dir = Path(args.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out-dir {args.out_dir} is not a folder")
    report = _with_cache(args, lambda cache: _compile_batch(items, config, args, cache, out_dir))
    sys.stderr.write(report.summary())
    print(f"programs and {out_dir / 'index.jsonl'} written", file=sys.stderr)
    if args.report:
        _write(args.report, json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", "the report ")
    if any(e.error_kind == "model" for e in report.entries):
        return 2
    return 1 if report.count("failed") or report.count("error") else 0


async def _compile_batch(items, config, args, cache, out_dir):
    from gsrlang.compiler.batch import compile_batch
    from gsrlang.compiler.prompt import PromptError
    from gsrlang.compiler.synthesize import CompilerClient, compile_rubric

    total = len(items)
    done = [0]
    printer = _Printer(args, "program.gsr")

    facts = _server_facts(_knowledge(args), config)
    announced = []

    async with CompilerClient(config) as client:
        async def one(spec, path):
            def on_round(r):
                printer.display = path.name
                printer.round(r, prefix=f"{path.stem}: ")
            with usage_errors(PromptError):
                prompt = _fitted_prompt(spec, args, config, facts, announce=not announced)
                announced.append(True)
                return await compile_rubric(spec, client, repairs=args.repairs, constrain=args.constrain,
                                            grammar_field=_grammar_field(args, facts), json_form=args.json_form,
                                            path=path, on_round=on_round, prompt=prompt, cache=cache)

        def on_item(item, result):
            done[0] += 1
            if args.quiet:
                return
            if isinstance(result, Exception):
                print(f"[{done[0]}/{total}] {item.id}: model call failed: {result}", file=sys.stderr)
            else:
                if result.status == "compiled":
                    how = "compiled on the first try"
                elif result.status == "repaired":
                    how = f"compiled after {result.repairs} repair{'s' if result.repairs != 1 else ''}"
                else:
                    how = f"failed: {result.reason}"
                cached = " (cached)" if result.cached else ""
                print(f"[{done[0]}/{total}] {item.id}: {how}{cached}", file=sys.stderr)

        return await compile_batch(items, one, out_dir, concurrency=config.concurrency,
                                   model=config.model, on_item=on_item)
