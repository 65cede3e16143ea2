"""gsr tune: learn a program's numbers from labelled items, keeping its structure; report them cross-validated."""

from __future__ import annotations

import sys
from pathlib import Path

from gsrlang.commands import UsageError

HELP = "learn a program's weights, gate levels and cut points from labelled items (cross-validated)"
DESCRIPTION = """\
Learn the numbers of PROGRAM from labelled items and write the tuned program.
The structure stays; only the numbers marked `VALUE in LO..HI` move (or, with
--all, every numeric parameter written in the program, within its type's
bounds). The judgments come from a trace (--trace, recorded by `gsr run
--trace`; no judge is called) or from a data file whose criteria only read the
data (--data: human(), rule.*).

The tuned program is cross-validated first: the labelled items are split into
--folds folds (with --seed), the program is tuned on all folds but one and
predicts the held-out one, and the chosen --metric of these held-out
predictions is printed with a bootstrap CI, next to the untuned program's on
the same items and the paired difference. Then the program is tuned on every
labelled item and written (default: PROGRAM.tuned.gsr) in canonical layout,
under a provenance header (data hash, metric, folds, seed, CV result) that
`gsr check` reads as comments. A pairwise program (labels first / second / tie)
is tuned for the accuracy of its winner. --shrink auto chooses the pull towards
the written numbers by an inner CV inside each fold (nested, so the reported
figure stays honest). See docs/learning.md.

exit status: 0 tuned and written; 1 the program does not check, or the trace
cannot feed it; 2 bad usage (nothing to tune, too few labels, unreadable files).

examples:
  gsr tune examples/topical_chat/overall.tunable.gsr --data examples/topical_chat/data/dev.jsonl \\
      --id-field id --label-field scores.overall --input-field context
  gsr tune rubric.gsr --trace out/trace.jsonl --all --metric qwk --out rubric.tuned.gsr"""


def add_arguments(p) -> None:
    from gsrlang.learn.tune import METRICS

    p.add_argument("program", metavar="PROGRAM", help="the .gsr program to tune")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="FILE", help="a trace recorded by `gsr run --trace` (with labels)")
    src.add_argument("--data", metavar="FILE", help="labelled items, for programs whose criteria read the data")
    add_column_arguments(p)
    p.add_argument("--all", dest="every", action="store_true",
                   help="tune every numeric parameter written in the program, not only those marked `in LO..HI`")
    p.add_argument("--metric", choices=METRICS, help="what to report and select on (default: exact for a pointwise "
                   "program, accuracy of the winner for a pairwise one)")
    p.add_argument("--objective", choices=("surrogate", "metric"), default="surrogate",
                   help="surrogate: least squares of the continuous score against the labels, then cut points "
                        "(default); metric: search the metric itself")
    p.add_argument("--mode", choices=("pointwise", "pairwise"),
                   help="the task to tune, for a program that declares both (default: its only task)")
    p.add_argument("--folds", type=int, default=5, metavar="K", help="cross-validation folds (default: 5)")
    from gsrlang.commands.common import add_seed_argument

    add_seed_argument(p, "seed of the folds and the search")
    p.add_argument("--shrink", default="0.01", metavar="L",
                   help="pull towards the written numbers: L x mean squared relative move (default: 0.01); "
                        "`auto`: choose L from 0.01, 0.03, 0.1, 0.3, 1 by an inner CV of the items tuned on "
                        "(nested inside the reported CV)")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap resamples for CIs (default: 1000)")
    p.add_argument("--out", metavar="FILE", help="where to write the tuned program (default: PROGRAM.tuned.gsr)")


def add_column_arguments(p) -> None:
    g = p.add_argument_group("columns of --data (as for gsr run)")
    g.add_argument("--input-field", default="input", metavar="NAME", help="the task input (default: input)")
    g.add_argument("--response-field", default="response", metavar="NAME", help="the response (default: response)")
    g.add_argument("--responses", metavar="A,B", help="the two responses of a pairwise item")
    g.add_argument("--id-field", metavar="NAME", help="the item id (default: the data's `id` column when it has one, else the line number)")
    g.add_argument("--label-field", metavar="NAME", help="the human label")
    g.add_argument("--reference-field", metavar="NAME", help="a fixed reference")


def load_table(program, args, mode: str, label: str):
    """The columnar table of the items (from --trace or --data); usage errors for what cannot be read."""
    from gsrlang.data import ColumnMap, DataError
    from gsrlang.judges.registry import default_registry
    from gsrlang.runtime.columnar import Table
    from gsrlang.runtime.labels import label_reader
    from gsrlang.runtime.replay import ReplayError

    try:
        if args.trace:
            return Table.from_trace(program, args.trace, label)
        if not args.label_field:
            raise UsageError("--data needs --label-field (the human label to learn from)")
        responses = tuple(r.strip() for r in args.responses.split(",")) if args.responses else (args.response_field,)
        try:
            from gsrlang.data import default_id_field

            id_field = args.id_field if args.id_field is not None else default_id_field(args.data)
            columns = ColumnMap(args.input_field, responses, id_field, args.label_field, args.reference_field)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        try:
            return Table.from_data(program, args.data, columns, default_registry(), mode,
                                   label_reader(program, mode, columns))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    except ReplayError as exc:
        raise TraceRefused(str(exc)) from None
    except DataError as exc:
        raise UsageError(str(exc)) from None


class TraceRefused(Exception):
    """The trace's judgments cannot feed the program (exit 1, as gsr replay)."""


def run(args) -> int:
    from gsrlang.commands.run import choose_mode, load_program
    from gsrlang.learn.tune import METRICS, PAIRWISE_METRICS

    program = load_program(args.program)
    if program is None:
        return 1
    mode = choose_mode(program, args.mode)
    args.metric = args.metric or ("exact" if mode == "pointwise" else "accuracy")
    if (args.metric in PAIRWISE_METRICS) != (mode == "pairwise"):
        raise UsageError(f"--metric {args.metric} is not a metric of a {mode} program: choose one of "
                         + ", ".join(m for m in METRICS if (m in PAIRWISE_METRICS) == (mode == "pairwise")))
    if args.folds < 2:
        raise UsageError("--folds must be at least 2")
    args.shrink = _shrink(args.shrink)
    out = args.out or str(Path(args.program).with_suffix("")) + ".tuned.gsr"
    source = args.trace or args.data
    from gsrlang.safeio import check_outputs  # the same path or the same inode (a hard link), as every writer

    check_outputs([("PROGRAM", args.program), ("--trace" if args.trace else "--data", source)], [("--out", out)])
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise UsageError("gsr tune needs scipy: pip install 'gsrlang[learn]'") from None
    from gsrlang.learn.tune import knobs

    ks = knobs(program, args.every)
    if not ks:
        raise UsageError(f"nothing to tune in `{args.program}`: mark numbers with `VALUE in LO..HI` "
                         "(e.g. `at: 0.25 in 0.1..0.5`), or pass --all to tune every numeric parameter")
    try:
        table = load_table(program, args, mode, f"`{args.program}`")
    except TraceRefused as exc:
        print(f"gsr tune: {exc}", file=sys.stderr)
        return 1
    return _tune(args, program, ks, table, out, source)


def _tune(args, program, ks, table, out: str, source: str) -> int:
    from gsrlang.check.driver import analyze
    from gsrlang.learn.rewrite import file_hash, number_text, tuned_source
    from gsrlang.learn.stats import paired_report
    import attrs

    from gsrlang.learn.tune import FitSettings, TuneError, choose_shrink, cross_validate, fit, labelled_index

    n = len(table)
    labelled = len(labelled_index(table))
    missing = n - labelled - table.label_errors
    print(f"tuning {len(ks)} number{'s' if len(ks) != 1 else ''} of {program.name} on {labelled} labelled "
          f"item{'s' if labelled != 1 else ''} of {n} ({source})")
    if labelled < n:
        print(f"  left out: {table.label_errors} unusable label{'s' if table.label_errors != 1 else ''}, "
              f"{missing} missing")
    settings = FitSettings(metric=args.metric, objective=args.objective, shrink=args.shrink, seed=args.seed)
    p = program.readout.pointwise
    scale = (p.lo, p.hi) if p is not None else None
    try:
        cv = cross_validate(program, ks, table, args.folds, settings)
    except TuneError as exc:
        raise UsageError(str(exc)) from None
    report = paired_report(table.mode, cv.untuned, cv.tuned, cv.golds, scale, args.bootstrap, args.seed)
    nested = ", each fold choosing its shrinkage on its own training items (nested)" if args.shrink is None else ""
    print(f"\n{args.folds}-fold cross-validation (seed {args.seed}){nested}, on the held-out folds:")
    shown = (("exact", "within1", "qwk", "mae", "spearman", "pearson") if table.mode == "pointwise"
             else ("accuracy", "valid_only_accuracy", "coverage"))
    w = max(len(k) for k in shown) + 2
    print(f"  {'metric':<{w}}{'untuned':>24}{'tuned':>24}{'paired difference':>27}")
    for key in shown:
        r = report[key]
        print(f"  {key:<{w}}{_ci(r['a'], r['a_ci95']):>24}{_ci(r['b'], r['b_ci95']):>24}"
              f"{_ci(r['diff'], r['ci95'], True):>27}")
    chosen = report[args.metric]

    index = labelled_index(table)
    shrink_text = str(args.shrink)
    if args.shrink is None:
        try:
            picked, scores = choose_shrink(program, ks, table.take(index), settings)
        except TuneError as exc:
            raise UsageError(str(exc)) from None
        settings = attrs.evolve(settings, shrink=picked)
        shrink_text = (f"auto ({picked:g}, chosen on all items by inner {settings.inner_folds}-fold CV {args.metric}: "
                       + ", ".join(f"{k:g}: {v:.3f}" for k, v in scores.items()) + ")")
        print(f"\nshrinkage: {shrink_text}")
    theta = fit(program, ks, table.take(index), settings)
    values = [min(k.hi, max(k.lo, float(number_text(v)))) for k, v in zip(ks, theta)]
    header = [
        f"tuned from {args.program} ({program.content_hash})",
        f"data: {source} ({file_hash(source)}), {labelled} labelled items of {n}",
        f"metric: {args.metric}; objective: {args.objective}; shrink: {shrink_text}; "
        f"{args.folds}-fold CV{' (nested)' if nested else ''}, seed {args.seed}",
        f"CV {args.metric}: tuned {_ci(chosen['b'], chosen['b_ci95'])}, untuned {_ci(chosen['a'], chosen['a_ci95'])}, "
        f"paired difference {_ci(chosen['diff'], chosen['ci95'], True)} ({args.bootstrap} bootstrap resamples)",
    ]
    from gsrlang.syntax.parser import decode_source

    # the text exactly as the checker read it (no newline translation: the knobs' spans are offsets into it)
    text, _ = decode_source(Path(args.program).read_bytes())
    tuned_text = tuned_source(text, ks, values, header)
    analysis = analyze(tuned_text, out)
    if analysis.program is None:  # pragma: no cover - a bug: the tuned numbers stay within checked bounds
        raise RuntimeError("the tuned program does not check: " + "; ".join(d.message for d in analysis.errors))
    from gsrlang.safeio import write_atomic

    write_atomic(out, tuned_text)  # an old tuned file stays whole until the new one is (a full disk: the old)
    print(f"\nwrote {out} (tuned on all {labelled} labelled items):")
    width = max(len(k.name) for k in ks)
    for k, v in zip(ks, values):
        print(f"  {k.name:<{width}}  {number_text(k.start):>7} -> {number_text(v):<7} (in {number_text(k.lo)}.."
              f"{number_text(k.hi)})")
    return 0


def _shrink(text: str) -> float | None:
    """--shrink: a non-negative number, or `auto` (None: chosen by inner CV)."""
    if text.strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--shrink must be a number or `auto`, not `{text}`") from None
    if not value >= 0 or value == float("inf"):
        raise UsageError(f"--shrink must be a finite number, not negative: `{text}`")
    return value


def _ci(value, ci, signed: bool = False) -> str:
    if value is None:
        return "undefined"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f.format(value) + (f" [{f.format(ci[0])}, {f.format(ci[1])}]" if ci else "")
