"""gsr run: evaluate a program over a data file; write results and traces; report agreement."""

from __future__ import annotations

import sys

from gsrlang.commands import UsageError, usage_errors
from gsrlang.judges.rules import DEFAULT_TIME_LIMIT
from gsrlang.lang.tasks import MODES

HELP = "run a program over a data file (JSONL, CSV, JSON) and write results and traces"
DESCRIPTION = """\
Run a .gsr program over every row of a data file: judge each criterion for each
candidate, compose the graph, read out a native score (pointwise) or a verdict
(pairwise). One result line per item goes to --out, one trace record per item to
--trace (replay it with `gsr replay`). Bad rows are reported with their line and
reason and the run carries on. With --label-field, agreement with the labels is
printed at the end (as `gsr metrics` would).

With --programs INDEX instead of PROGRAM, each item runs under its own program: the
`index.jsonl` of a batch `gsr compile --data ... --out-dir DIR`, matched by item id
(--id-field, else the row's `id`, else the row number, as the compile numbered them).
An item without a usable program (its compile failed, its id is not in the index, its
program does not check or declares another task or scale) is invalid, with the reason.

Only the columns the program reads are asked of the data: `llm` criteria read the
input, the response(s) and the reference (when --reference-field names one); `rule`
criteria read the response(s); `human(field: F)` reads column F ({candidate} is A, B);
`verifier` criteria read the input and the response(s). A program of human and rule
criteria needs no input column; one of human criteria alone needs no response column
(pairwise: two candidates A and B all the same). When the first row lacks a column the
program reads, the run stops with one message listing what it needs and what the file has.

A completed run ends its trace with a run-summary record (counts, wall time, model
calls, cache hits, tokens by kind and dollars); `gsr replay` skips it and reports it.

Model calls cost money: --dry-run prints what the run would ask for and cost, making
no call (with --trace PREVIOUS, from a previous run's rates); --budget USD stops buying
calls before the spend would pass USD and writes a resumable prefix (docs/judges.md,
"Frontier models and cost").

output, on standard output (standard error with --out -): the summary line (`NAME (HASH), pointwise:
240 items: 240 ok, 0 invalid, 0 failed in 0.06 s`), which column gave the ids (`ids: the data's `id`
column`, or `ids: line numbers`), the files written, the model judges' calls, tokens and cost when a
model judged, and with --label-field the agreement table (not with -q). Each bad row (its line and
reason; not with -q), each model judge's server and what chose it (`gsr run: judge: model M at URL
(server chosen by ...)`), warnings and the progress bar (on a terminal) go to standard error.

exit status: 0 every item ok; 1 some item failed (a bad row), was invalid, or had
an unusable label; 2 the program, the data file or the options cannot be used.

examples:
  gsr run examples/topical_chat/overall.gsr --data examples/topical_chat/data/dev.jsonl \\
      --input-field context --reference-field fact --id-field id --label-field scores.overall \\
      --out out/results.jsonl --trace out/trace.jsonl
  gsr run rubric.gsr --data pairs.json --mode pairwise --responses output_1,output_2 --label-field label
  gsr run --programs programs/index.jsonl --data items.jsonl --id-field id --label-field human_score"""

MAX_REPORTED = 20


def add_arguments(p) -> None:
    p.add_argument("program", metavar="PROGRAM", nargs="?", help="the .gsr program (or --programs)")
    p.add_argument("--programs", metavar="INDEX",
                   help="per-item programs instead of PROGRAM: the index.jsonl of a batch `gsr compile`")
    p.add_argument("--data", required=True, metavar="FILE", help="items: .jsonl, .csv, .tsv or .json (an array)")
    p.add_argument("--mode", choices=tuple(MODES),
                   help="which task to run (default: the program's only task; with --programs, the first "
                        "program's)")
    g = p.add_argument_group("columns (dotted paths into JSON objects are allowed: scores.overall)")
    g.add_argument("--input-field", default="input", metavar="NAME", help="the task input (default: input)")
    g.add_argument("--response-field", default="response", metavar="NAME",
                   help="the response to judge, pointwise (default: response)")
    g.add_argument("--responses", metavar="A,B", help="the responses to compare, pairwise: two columns, comma-separated")
    g.add_argument("--id-field", metavar="NAME",
                   help="the item id (default: the data's `id` column when it has one, else the line number; "
                        "the run's summary says which)")
    g.add_argument("--label-field", metavar="NAME", help="the human label (a score on the scale, or 1/2/A/B/tie)")
    g.add_argument("--reference-field", metavar="NAME", help="a fixed reference shown to model judges")
    p.add_argument("--out", metavar="FILE", help="write one result line per item here (`-`: standard output)")
    p.add_argument("--trace", metavar="FILE", help="write one trace record per item here")
    p.add_argument("--concurrency", type=int, default=None, metavar="N",
                   help="judge calls in flight (default: the model judges' `concurrency` setting, else 8)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N rows")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
                   help=f"for each rule and verifier judgment; one that overruns it is invalid (default: "
                        f"{DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--no-short-circuit", dest="short_circuit", action="store_false",
                   help="judge every criterion of every item, even those that cannot change the result "
                        "(by default a judgment that cannot is skipped, and the trace says why)")
    p.add_argument("--model", metavar="MODEL", help="the model for `llm` criteria (default: $GSR_MODEL)")
    p.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server for `llm` criteria")
    from gsrlang.commands.common import add_bootstrap_argument

    add_bootstrap_argument(p, " for the metrics' confidence intervals")
    c = p.add_argument_group("cost (model judges; docs/judges.md, \"Frontier models and cost\")")
    c.add_argument("--dry-run", action="store_true",
                   help="make no model call: print, per criterion and in total, the judgments the program needs, the "
                        "calls after merging identical ones and answering from the cache, the prompt tokens "
                        "(estimated), the expected completion tokens and the dollars; with --trace PREVIOUS, a "
                        "previous run's trace gives the short-circuit rates, re-asks and answer lengths")
    c.add_argument("--budget", metavar="USD",
                   help="stop buying model calls when the dollars spent plus the calls in flight would pass USD; the "
                        "answers in flight are kept, the results written are a prefix that a later run (with a "
                        "larger budget) resumes from the cache, buying only what is missing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    p.add_argument("-q", "--quiet", action="store_true", help="only the summary: counts, ids and files written (no bad rows, no agreement table)")
    from gsrlang.execution.engines import ENGINES

    e = p.add_argument_group("engine")
    e.add_argument("--engine", choices=tuple(ENGINES), default="local",
                   help="local: this process (default); ray: blocks of items on a pool of Ray actors, "
                        "resumable (pip install 'gsrlang[ray]'; docs/scale.md)")
    e.add_argument("--ray-address", metavar="ADDR",
                   help="the Ray cluster to use (e.g. ray://head:10001, or `auto`; default: $RAY_ADDRESS, else a "
                        "new local Ray instance)")
    e.add_argument("--actors", type=int, metavar="N", help="ray: actors in the pool (default: the cluster's CPUs)")
    e.add_argument("--block-size", type=int, metavar="N", help="ray: items per block (default 500)")
    e.add_argument("--work-dir", metavar="DIR",
                   help="ray: the folder in which gsr makes its work folder OUT.gsr-ray, where finished blocks "
                        "wait for the end of the run, for resuming (default: --out's folder, else --trace's); only "
                        "gsr's own files are ever removed")
    from gsrlang.commands.config import add_llm_arguments

    add_llm_arguments(p)  # --role, --cache, --fewshot, --seed, ... (the flags above are kept)
    from gsrlang.commands.batch import add_run_arguments

    add_run_arguments(p)  # --batch, --batch-export, --batch-import, ...


def load_program(path: str):
    """The checked program, or None after printing its diagnostics."""
    from gsrlang.commands.common import DiagnosticPrinter
    from gsrlang.lang.check.driver import analyze_file

    try:
        analysis = analyze_file(path)
    except OSError as exc:
        raise UsageError(f"cannot read `{path}`: {exc.strerror or exc}") from None
    if analysis.program is None:
        printer = DiagnosticPrinter("full", "auto", to_stderr=True)
        printer.add(path, analysis.text, analysis.errors)
        print(f"gsr: `{path}` has {len(analysis.errors)} error{'s' if len(analysis.errors) != 1 else ''}; "
              "fix them first (`gsr check`)", file=sys.stderr)
        return None
    return analysis.program


def choose_mode(program, mode: str | None) -> str:
    from gsrlang.execution.executor import default_mode

    available = [m for m, r in (("pointwise", program.readout.pointwise), ("pairwise", program.readout.pairwise)) if r]
    if mode is None:
        if (mode := default_mode(program)) is None:
            raise UsageError("the program declares both a pointwise and a pairwise task: choose one with --mode")
    elif mode not in available:
        raise UsageError(f"the program declares no {mode} task (it has: {', '.join(available)})")
    return mode


def build_registry(program, args):
    """(the judges for `program`, the resolved model settings: None when no criterion needs a model)."""
    from gsrlang.judges.base import JudgeConfigError
    from gsrlang.judges.registry import default_registry

    llm = settings = None
    try:
        if any(n.criterion.procedure.kind == "llm" for n in program.criteria):
            llm, settings = run_llm_judge(args)
        registry = default_registry(llm, time_limit=args.time_limit)
        registry.check(program)
    except JudgeConfigError as exc:
        raise UsageError("the judges cannot serve this program:\n  " + "\n  ".join(exc.problems)) from None
    return registry, settings


class Reporter:
    """Progress (a bar on a terminal) and the bad rows, on standard error."""

    def __init__(self, data: str, enabled: bool, quiet: bool, judge=None):
        self.quiet = quiet
        self.reported = 0
        self.progress = None
        self.judge = judge if callable(getattr(judge, "pace", None)) else None  # the model judge: tokens/s, deadline
        self.total = _count_rows(data)
        self.done = 0
        self.warned = False
        if enabled and sys.stderr.isatty() and not quiet:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(TextColumn("running"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                     TextColumn("{task.fields[pace]}"), console=Console(stderr=True), transient=True)
            self.task = self.progress.add_task("run", total=self.total, pace="")
            self.progress.start()

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr)

    def item(self, run, line) -> None:
        problems = []
        if run.status == "failed":
            problems.append(f"failed row: {run.reason}")
        elif run.status == "invalid":
            problems.append(f"invalid item {run.id!r} (line {run.line}): {run.reason}")
        if run.label_error:
            problems.append(f"unusable label, item {run.id!r}: {run.label_error}")
        for problem in problems if not self.quiet else ():
            self.reported += 1
            if self.reported <= MAX_REPORTED:
                self.say(problem)
            elif self.reported == MAX_REPORTED + 1:
                self.say("... more problems: see the `reason` and `label_error` fields of the results")
        self.done += 1
        pace = self.judge.pace() if self.judge is not None else None
        if pace is not None:
            self._check_deadline(pace)
        if self.progress is not None:
            shown = f"{pace['tokens_per_s']:.1f} tokens/s" if pace and pace["tokens_per_s"] else ""
            self.progress.update(self.task, advance=1, pace=shown)

    def _check_deadline(self, pace: dict) -> None:
        """Say once, as soon as the pace shows it (3 items in), that the run cannot finish by --deadline."""
        deadline, elapsed = pace["deadline_s"], pace["elapsed_s"]
        if self.warned or deadline is None or not self.total or self.done < min(3, self.total):
            return
        needed = elapsed / self.done * self.total
        if needed > deadline:
            self.warned = True
            self.say(f"gsr run: at this pace ({elapsed / self.done:.1f} s per item, {pace['tokens_per_s']:.1f} "
                     f"tokens/s) the {self.total} items need about {needed:.0f} s, past the --deadline of "
                     f"{deadline:g} s; calls not started by then are not made and their items will be invalid "
                     "(raise --deadline, use --limit, or a faster server)")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _count_rows(path: str) -> int | None:
    try:
        if not path.lower().endswith((".jsonl", ".ndjson", ".csv", ".tsv")):
            return None
        with open(path, "rb") as f:
            n = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        return n - (1 if path.lower().endswith((".csv", ".tsv")) else 0)
    except OSError:
        return None


def print_summary(summary, program, args, stream) -> None:
    short = summary.hash.split(":")[-1][:12]
    print(f"{program.name} ({short}), {summary.mode}: {summary.line()} in {summary.seconds:.2f} s", file=stream)
    if getattr(args, "ids", None):
        print(f"  {args.ids}", file=stream)
    _print_label_problems(summary, stream)
    if summary.skipped:
        total = summary.judgments + summary.skipped
        print(f"  short-circuit: {summary.skipped} of {total} judgments skipped: they could not change the result "
              "(the trace says why; --no-short-circuit judges everything)", file=stream)
    _print_written(summary, args, stream)


def _print_label_problems(summary, stream) -> None:
    """The line of a run's summary (one program or per-item programs) on the labels that could not be used."""
    if summary.label_problems:
        print(f"  {summary.label_problems} label{'s' if summary.label_problems != 1 else ''} could not be used "
              "(left out of the metrics; see `label_error` in the results)", file=stream)


def _print_written(summary, args, stream) -> None:
    """The end of a run's summary: the files written, then the agreement with the labels (unless --quiet)."""
    written = [f"results {args.out}" if getattr(args, "out", None) else None,
               f"trace {args.trace}" if getattr(args, "trace", None) else None]
    written = [w for w in written if w]
    if written:
        print("  wrote " + ", ".join(written), file=stream)
    if getattr(args, "label_field", True) and not args.quiet:
        print_agreement(summary, args.bootstrap, stream)


def print_agreement(summary, bootstrap: int, stream) -> None:
    """The agreement of a run (gsr run, gsr replay) with its labels, if any."""
    from gsrlang.analysis.metrics import format_report

    if (report := summary.metrics(bootstrap)) is not None:
        print(f"\nagreement with the labels ({summary.labelled} labelled items):", file=stream)
        print(format_report(report), file=stream)


def _columns(args, mode: str, program=None, default_ids: bool = True):
    """The columns to read; with `program`, only those its criteria read (gsrlang.files.needs)."""
    from gsrlang.commands.config import response_columns
    from gsrlang.files.needs import column_map

    responses = response_columns(args, mode, program)
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must not be negative")
    if not args.time_limit > 0:
        raise UsageError("--time-limit must be a positive number of seconds")
    id_field = args.id_field
    if id_field is None and default_ids and getattr(args, "data", None):
        from gsrlang.files.dataset import DataError, default_id_field

        try:
            id_field = default_id_field(args.data)
        except DataError:
            id_field = None  # the data's own error is reported where it is read
    args.ids = None if not default_ids else (
        f"ids: column `{args.id_field}` (--id-field)" if args.id_field is not None else
        "ids: the data's `id` column (--id-field NAME for another)" if id_field is not None else
        "ids: line numbers (the data has no `id` column; --id-field NAME names one)")
    with usage_errors(ValueError):
        return column_map(program, mode, args.input_field, responses, id_field, args.label_field,
                          args.reference_field)


def run(args) -> int:
    if args.program is None and args.programs is None:
        raise UsageError("name the program to run (PROGRAM), or per-item programs with --programs INDEX")
    if args.program is not None and args.programs is not None:
        raise UsageError("PROGRAM and --programs exclude each other: run one program over every item, or each "
                         "item under its own program from a compile index")
    _check_engine_options(args)
    _check_cost_options(args)
    check_paths(args)
    from gsrlang.commands import batch

    batch.check_run_arguments(args)
    if args.programs is not None:
        if args.engine != "local":
            raise UsageError("--programs runs on the local engine only; --engine ray runs one PROGRAM")
        return run_per_item(args)
    if (program := load_program(args.program)) is None:
        return 1
    mode = choose_mode(program, args.mode)
    columns = _columns(args, mode, program)
    from gsrlang.files.dataset import DataError, check_columns

    with usage_errors(DataError):  # one usage error when the data's first row lacks what the program reads
        check_columns(args.data, columns)
    if args.dry_run:
        return dry_run(args, program, mode, columns)
    registry, settings = build_registry(program, args)
    if args.budget_usd is not None:
        _check_priced(program, registry)
    if batch.wanted(args):
        return batch.run_with_batches(args, program, mode, columns, registry, settings, local=run_local,
                                      progress=_with_progress, summarize=print_summary, finish=_finish)
    return run_local(args, program, mode, columns, registry, settings)


def run_local(args, program, mode: str, columns, registry, settings) -> int:
    """Run one checked program on the chosen engine, online; print the summary; the exit status."""
    from gsrlang.commands.config import engine_options, run_config
    from gsrlang.execution.engines import RunJob, engine
    from gsrlang.judges.replica import JudgeRecipe

    job = RunJob(program, args.data, columns, mode, run_config(args, run_concurrency(args, settings)),
                 engine_options(args), JudgeRecipe.of(registry),
                 inputs=(("--fewshot", getattr(args, "fewshot", None)),
                         ("--judge-config", getattr(args, "judge_config", None))))
    run_job = engine(args.engine)
    summary = _with_progress(args, lambda on_item: run_job(job, registry, on_item), registry)
    stream = sys.stderr if args.out == "-" else sys.stdout
    print_summary(summary, program, args, stream)
    return _finish(args, registry, summary, stream)


def _check_cost_options(args) -> None:
    """--budget's value and where --dry-run / --budget apply, as one-line usage errors before anything runs."""
    import math

    args.budget_usd = None
    if args.budget is not None:
        try:
            value = float(args.budget.strip().lstrip("$"))
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value <= 0:
            raise UsageError(f"--budget must be a positive number of US dollars (e.g. --budget 5 or 0.50), got "
                             f"{args.budget!r}")
        args.budget_usd = value
    given = [f for f, on in (("--dry-run", args.dry_run), ("--budget", args.budget is not None)) if on]
    if given and args.engine != "local":
        raise UsageError(f"{' and '.join(given)} work with the local engine only (the ray engine's actors spend "
                         "apart); drop --engine ray")
    if given and args.programs is not None:
        raise UsageError(f"{' and '.join(given)} work with one PROGRAM, not --programs")
    if args.budget is not None and args.out and args.out.lower().endswith(".parquet"):
        raise UsageError("--budget may stop a run part way, and a Parquet results file cannot say it holds only a "
                         "prefix: write a .jsonl --out")
    if args.dry_run and args.budget is not None:
        raise UsageError("--dry-run makes no call, so it needs no --budget (its plan shows the dollars)")
    if args.dry_run and args.out:
        raise UsageError("--dry-run writes nothing: drop --out (with --dry-run, --trace names a previous run's "
                         "trace to learn from)")


def _model_roles(program) -> set:
    """The judge roles (None: the default) of the program's model-judged criteria, ensembles included."""
    roles = set()
    for node in program.criteria:
        spec = node.criterion
        procs = spec.ensemble.judges if spec.ensemble is not None else (spec.procedure,)
        roles.update(p.args.get("role") for p in procs if p.kind == "llm")
    return roles


def _check_priced(program, registry) -> None:
    """--budget needs a price for every model the program calls: one line naming the first without one."""
    if (llm := registry.get("llm")) is None:
        return
    for role in sorted(_model_roles(program), key=lambda r: r or ""):
        client = llm.pool.for_role(role)
        if llm.price(client) is None:
            raise UsageError(f"--budget needs the price of model {client.config.model!r}, which the price library "
                             f"(genai-prices) does not know: set [prices.\"{client.config.model}\"] input and output "
                             "(US dollars per million tokens) in gsr.toml, or run without --budget")


def dry_run(args, program, mode, columns) -> int:
    """`gsr run --dry-run`: the plan of the run's model calls (gsrlang.judges.llm.plan), no call made."""
    import os

    from gsrlang.commands.config import run_config
    from gsrlang.execution.runs import run_file
    from gsrlang.files.dataset import DataError
    from gsrlang.judges.llm.options import DEFAULT_CACHE
    from gsrlang.judges.llm.plan import CallPlan, TraceRates, forecast

    rates = None
    if args.trace:
        try:
            rates = TraceRates.read(args.trace)
        except OSError as exc:
            raise UsageError(f"--trace {args.trace}: cannot read it ({exc.strerror or exc})") from None
        except DataError as exc:
            raise UsageError(f"--trace {args.trace}: {exc}") from None
    if not args.no_cache and not os.path.exists(args.cache or DEFAULT_CACHE):
        args.no_cache = True  # nothing is cached yet: a dry run creates no cache
    args.plan = CallPlan()
    registry, settings = build_registry(program, args)
    llm = registry.get("llm")
    if llm is not None and getattr(args, "batch", False):
        llm.batch_pricing = True  # the plan of a --batch run: the Batch API's price
    with usage_errors(DataError):
        run_file(program, args.data, columns, registry, mode,
                 run_config(args, run_concurrency(args, settings), out=None, trace=None, short_circuit=False,
                            columnar=False))
    if llm is None:
        print(f"{program.name}: no criterion is judged by a model: the run makes no model call and costs $0")
        return 0
    print_plan(program, mode, forecast(args.plan, rates, llm.price), args)
    return 0


def print_plan(program, mode: str, fc: dict, args) -> None:
    """The dry run's table: per criterion and in total."""
    from gsrlang.judges.llm.prices import dollars

    short = program.content_hash.split(":")[-1][:12]
    print(f"plan for {program.name} ({short}), {mode}: no model call made")
    head = ("criterion", "judgments", "calls", "cached", "merged", "expected calls", "prompt tokens",
            "completion tokens", "dollars")
    rows = [(name, f"{r['judgments']:,}", f"{r['calls']:,}", f"{r['cached']:,}", f"{r['merged']:,}",
             f"{r['expected_calls']:,.0f}", f"{r['prompt_tokens']:,.0f}", f"{r['completion_tokens']:,.0f}",
             dollars(r["cost_usd"])) for name, r in [*fc["criteria"].items(), ("total", fc["total"])]]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    print(line(head))
    for row in rows:
        print(line(row))
    print("  judgments: what the program needs, every criterion of every item; calls: after answering from the "
          "judgment cache (cached) and merging identical requests (merged)")
    if fc["previous_items"] is not None:
        print(f"  expected calls and tokens use the {fc['previous_items']} items of --trace {args.trace}: the share "
              "short-circuit judging skipped, re-asks, answer lengths and cached prompt tokens per criterion")
    else:
        print("  expected calls: every judgment asked (short-circuit judging may skip some; --trace PREVIOUS uses a "
              "previous run's rates)")
    print("  prompt tokens: estimated at about 4 characters a token (no offline tokenizer for hosted models)")
    if fc["guessed_completion"]:
        print("  completion tokens: guessed where no previous run measured them (60 a call, plus a guess for a "
              "--reasoning-effort); --trace PREVIOUS uses measured lengths")
    sources = sorted({r["price"] or f"no price for {r['model']}" for r in fc["criteria"].values()})
    print("  dollars: " + "; ".join(sources) + ("" if fc["total"]["cost_usd"] is not None else
                                                 " (unknown: [prices] in gsr.toml sets one)"))
    if getattr(args, "batch", False):
        print("  --batch: at the Batch API's price (the price library's batch price, else half the online one); "
              "the first call of each model, which negotiates structured output, and lines retried online cost "
              "the online price")


def _check_engine_options(args) -> None:
    """Engine flags that cannot work, and a Parquet output without pyarrow, before any item runs."""
    from gsrlang.files.parquet import ParquetMissing, is_parquet, pyarrow_parquet

    for flag in ("actors", "block_size"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.engine == "local":
        given = [f"--{f.replace('_', '-')}" for f in ("ray_address", "actors", "block_size", "work_dir")
                 if getattr(args, f) is not None]
        if given:
            raise UsageError(f"{', '.join(given)} only apply to --engine ray")
    elif getattr(args, "deadline", None) is not None:
        raise UsageError("--deadline is not supported by --engine ray (each actor would count it from its own "
                         "start); run locally, or bound the run with --limit")
    if args.out and is_parquet(args.out):
        try:
            pyarrow_parquet()
        except ParquetMissing as exc:
            raise UsageError(f"--out {args.out}: {exc}") from None


def check_paths(args) -> None:
    """Refuse (PathClash) a --out, --trace or --cache that is an input of the run or another of its outputs."""
    from gsrlang.commands.config import cache_path
    from gsrlang.files.safeio import check_outputs

    check_outputs([("PROGRAM", args.program), ("--programs", args.programs), ("--data", args.data),
                   ("--fewshot", getattr(args, "fewshot", None)),
                   ("--judge-config", getattr(args, "judge_config", None))],
                  [("--out", args.out), ("--trace", args.trace), ("--cache", cache_path(args))])


def _with_progress(args, run_items, registry=None):
    """Run `run_items(on_item)` with the progress display; a data file that cannot be read is a usage error."""
    from gsrlang.execution.engines import EngineError
    from gsrlang.files.dataset import DataError

    judge = registry.get("llm") if registry is not None else None
    _announce_judges(args, judge)
    reporter = Reporter(args.data, not args.no_progress, args.quiet, judge)
    try:
        with usage_errors(DataError, EngineError):
            return run_items(reporter.item)
    finally:
        reporter.close()


def _finish(args, registry, summary, stream) -> int:
    judge_failed = _llm_report(registry, summary, stream, args)
    if getattr(summary, "stopped", None) == "budget":
        from gsrlang.judges.llm.prices import dollars

        llm = registry.get("llm")
        print(f"gsr run: stopped by the budget: spent {dollars(llm.spent_usd)} of the --budget of "
              f"{dollars(llm.budget_usd)}; {summary.items} items written, {summary.unwritten} not (the results are "
              "a prefix: run again with a larger --budget to buy only what is missing)", file=sys.stderr)
        return 1
    if summary.duplicate_ids:
        print(duplicate_warning("gsr run", summary), file=sys.stderr)
    if not args.out and not args.trace and not args.quiet:
        sys.stdout.flush()
        print("  (nothing was written: use --out results.jsonl and --trace trace.jsonl to keep the results)",
              file=sys.stderr)
    return 1 if summary.problems or judge_failed else 0


def duplicate_warning(command: str, summary) -> str:
    """The warning for items that share an id (the policy is in docs/running.md, "Duplicate ids")."""
    # an id is shown up to 60 characters: a text column given as --id-field can hold a whole conversation
    n, first = summary.duplicate_ids, ", ".join(r if len(r := repr(i)) <= 60 else f"{r[:56]}...{r[-1]}"
                                                for i in summary.duplicate_examples)
    return (f"{command}: warning: {n} item{'s' if n != 1 else ''} had an id an earlier item already had "
            f"(first: {first}): every row was run and written, but `gsr metrics` keeps only the last line of "
            "an id, and `gsr replay --show` / `gsr render --item` pick its first record; give the rows unique "
            "ids (--id-field)")


def run_per_item(args) -> int:
    """`gsr run --programs INDEX`: each item under its own program from a batch compile's index."""
    from gsrlang.commands.config import run_config
    from gsrlang.execution.peritem import IndexedPrograms
    from gsrlang.execution.runs import run_index_file
    from gsrlang.files.dataset import DataError  # the index's own problems
    from gsrlang.judges.base import JudgeConfigError
    from gsrlang.judges.registry import default_registry

    two = bool(args.responses) and len([r for r in args.responses.split(",") if r.strip()]) == 2
    with usage_errors(DataError, ValueError):
        programs = IndexedPrograms(args.programs)
        mode = programs.choose_mode(args.mode, fallback="pairwise" if two else "pointwise")
    columns = _columns(args, mode, default_ids=False)  # the compile index numbers its own ids
    try:  # a model judge when one is configured: which programs need it is known only as they are checked
        llm, settings = run_llm_judge(args)
        registry = default_registry(llm, time_limit=args.time_limit)
    except JudgeConfigError as exc:
        raise UsageError("the judges cannot start:\n  " + "\n  ".join(exc.problems)) from None
    programs.start(mode, columns, registry)
    config = run_config(args, run_concurrency(args, settings), program_path=None)
    summary = _with_progress(args, lambda on_item: run_index_file(
        programs, args.data, programs.columns, registry, config, on_item=on_item,
        compile_ids=args.id_field is None), registry)
    stream = sys.stderr if args.out == "-" else sys.stdout
    print_index_summary(summary, programs, args, stream)
    return _finish(args, registry, summary, stream)


def print_index_summary(summary, programs, args, stream) -> None:
    """The end-of-run summary of a per-item run: counts, the programs, metrics."""
    print(f"per-item programs of {programs.index}, {summary.mode}: {summary.line()} in {summary.seconds:.2f} s",
          file=stream)
    checked = f"{programs.checked} program file{'s' if programs.checked != 1 else ''} checked"
    bad = f", {programs.unusable} did not check" if programs.unusable else ""
    none = (f"; {programs.no_program} item{'s' if programs.no_program != 1 else ''} had no usable program "
            "(invalid; see `reason` in the results)") if programs.no_program else ""
    print(f"  {checked}{bad}{none}", file=stream)
    _print_label_problems(summary, stream)
    _print_written(summary, args, stream)


def run_llm_judge(args):
    """(the LLM judge, its model settings from the flags, then environment, then gsr.toml), resolved once per
    run; (None, None) without a model."""
    from gsrlang.commands.config import build_llm_judge, model_settings
    from gsrlang.judges.base import JudgeConfigError
    from gsrlang.judges.llm.config import LLMError

    try:
        settings = model_settings(args)
        return (None if settings is None else build_llm_judge(args, settings)), settings
    except LLMError as exc:
        raise JudgeConfigError([f"the LLM judge cannot start: {exc}"]) from None


def run_concurrency(args, settings) -> int:
    """Judge calls in flight: the resolved model settings' (--concurrency, then environment, then gsr.toml)
    when a model judges, else --concurrency, else 8."""
    return settings.default.concurrency if settings is not None else (args.concurrency or 8)


def _announce_judges(args, llm) -> None:
    """The run's header, on standard error: each model judge's server and what chose it (a flag, a variable, a
    config file), and the judgment cache whose answers may decide verdicts with no call."""
    settings = getattr(llm, "settings", None)
    if settings is None or getattr(args, "quiet", False):
        return
    sources = getattr(settings, "server_sources", {}) or {}
    shown = set()
    for role, cfg in [("default", settings.default), *sorted(settings.roles.items())]:
        if (cfg.model, cfg.origin) in shown:
            continue
        shown.add((cfg.model, cfg.origin))
        who = "judge" if role == "default" else f"judge role {role!r}"
        source = sources.get(role) or sources.get("default") or "the default (the OpenAI API)"
        print(f"gsr run: {who}: model {cfg.model!r} at {cfg.origin} (server chosen by {source})", file=sys.stderr)
    cache = getattr(llm, "cache", None)
    if cache is not None and getattr(cache, "path", None) is not None:
        n = len(cache)
        print(f"gsr run: judgment cache {cache.path} ({n} stored answer{'s' if n != 1 else ''}; a stored answer "
              "decides its judgment with no call)", file=sys.stderr)


def _llm_report(registry, summary, stream, args_quiet=None) -> bool:
    """Print the model judges' cost (calls, cache hits, tokens, wall time) and, loudly, any judge that failed.

    True when some judge failed every call it made."""
    from gsrlang.judges.llm.prices import usage_text

    llm = registry.get("llm")
    if llm is None or not hasattr(llm, "usage"):
        return False
    u = summary.judges["llm"] if summary.judges else llm.usage()
    if u["calls"]:
        counters = ("cache_hits", "merged", "http_requests", "retries", "reasks")
        print(f"  {usage_text(u, counters)}, {u['call_failures']} failed calls; wall time {summary.seconds:.1f} s",
              file=stream)
        path = getattr(getattr(llm, "cache", None), "path", None)
        if u["cache_hits"] and path is not None:
            print(f"  {u['cache_hits']} answers came from the judgment cache {path}, not from the model", file=stream)
        for who, mode in (u.get("structured") or {}).items():
            print(f"  structured output of {who}: {mode}", file=stream)
        if u.get("rate_limited"):
            low = u.get("lowest_concurrency")
            print(f"  rate limited: {u['rate_limited']} answers were HTTP 429; requests in flight were lowered"
                  + (f" to {low}" if low else "") + " and raised again as calls succeeded (--rpm / --tpm cap them "
                  "ahead of the server)", file=stream)
        for who, changes in (u.get("adapted") or {}).items():
            print(f"  adapted for {who}: {'; '.join(changes)}", file=stream)
        rows = u.get("by_criterion") or {}
        if len(rows) > 1 and not getattr(args_quiet, "quiet", False):
            print("  by criterion: " + "; ".join(usage_text(r, who=name, tokens="") for name, r in rows.items()),
                  file=stream)
    for line in llm.report():
        print(f"gsr run: WARNING: {line}", file=sys.stderr)
    return bool(getattr(llm, "failed_every_call", False))
