"""gsr tune: learn a program's numbers from labelled items, keeping its structure; report them cross-validated."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors

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

Items that share a conversation, prompt or source are not independent: with
--group-field each group stays in one fold, outer and inner, and the intervals
are a cluster bootstrap over groups (without it, tune warns of a field that
looks like a group). --holdout-field / --holdout keep items tuning never sees
and report the tuned program on them. --baseline cross-validates an ordered
logit and a linear fit on the same criteria values and folds, beside the
graph. The tuned program is named NAME_tuned (or --name) and its header names
the group field and the held-out result. On a terminal a progress bar shows
the folds, the candidates evaluated and the score so far; --jobs N tunes the
folds in N processes.

output: the tuning report on standard output (the cross-validated figures, each number's start and
tuned value, the held-out figures); the tuned program to --out; the progress bar (on a terminal) and
warnings on standard error.

exit status: 0 tuned and written; 1 the program does not check, or the trace
cannot feed it; 2 bad usage (nothing to tune, too few labels, unreadable files).

examples:
  gsr tune examples/topical_chat/overall.tunable.gsr --data examples/topical_chat/data/dev.jsonl \\
      --id-field id --label-field scores.overall --group-field context --shrink auto --baseline
  gsr tune rubric.gsr --trace out/trace.jsonl --all --metric qwk --out rubric.tuned.gsr"""


def add_arguments(p) -> None:
    from gsrlang.analysis.tune import METRICS, OBJECTIVES

    p.add_argument("program", metavar="PROGRAM", help="the .gsr program to tune")
    from gsrlang.commands.config import add_table_arguments

    add_table_arguments(p, "a trace recorded by `gsr run --trace` (with labels)")
    p.add_argument("--all", dest="every", action="store_true",
                   help="tune every numeric parameter written in the program, not only those marked `in LO..HI`")
    p.add_argument("--metric", choices=METRICS, help="what to report and select on (default: exact for a pointwise "
                   "program, accuracy of the winner for a pairwise one)")
    p.add_argument("--objective", choices=OBJECTIVES, default="surrogate",
                   help="surrogate: least squares of the continuous score against the labels, then cut points "
                        "(default); ordinal: the labels' likelihood under an ordered logit of the sink score, "
                        "the readout's cut points learned with it; metric: search the metric itself")
    p.add_argument("--mode", choices=("pointwise", "pairwise"),
                   help="the task to tune, for a program that declares both (default: its only task)")
    p.add_argument("--folds", type=int, default=5, metavar="K", help="cross-validation folds (default: 5)")
    from gsrlang.commands.common import add_bootstrap_argument, add_seed_argument

    add_seed_argument(p, "seed of the folds and the search")
    p.add_argument("--shrink", default="0.01", metavar="L",
                   help="pull towards the written numbers: L x mean squared relative move (default: 0.01); "
                        "`auto`: choose L from 0.01, 0.03, 0.1, 0.3, 1 by an inner CV of the items tuned on "
                        "(nested inside the reported CV)")
    add_bootstrap_argument(p, " for CIs")
    p.add_argument("--out", metavar="FILE", help="where to write the tuned program (default: PROGRAM.tuned.gsr)")
    p.add_argument("--name", metavar="NAME", help="the tuned program's rubric name (default: the program's, "
                   "without a `_tunable` suffix, with `_tuned`)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="tune the cross-validation folds in N "
                   "processes (default: 1)")
    p.add_argument("--baseline", action="store_true", help="also cross-validate an ordered logit and a linear fit "
                   "on the same criteria values and folds, printed beside the graph (pointwise)")
    g = p.add_argument_group("groups and held-out items")
    g.add_argument("--group-field", metavar="FIELD", help="the data's field naming each item's group (a "
                   "conversation, a prompt, a source): every group stays in one fold, outer and inner, and the "
                   "intervals are a cluster bootstrap over groups")
    g.add_argument("--group-data", metavar="FILE", help="with --trace: the data file holding --group-field and "
                   "--holdout-field (joined by id)")
    h = g.add_mutually_exclusive_group()
    h.add_argument("--holdout-field", metavar="FIELD", help="a true/false field: rows marked true are held out, "
                   "never seen by tuning, and the tuned program's agreement on them is reported")
    h.add_argument("--holdout", metavar="FILE", help="held-out items in a file of their own (the same kind and "
                   "columns as --data / --trace), never seen by tuning")


def load_table(program, args, mode: str, label: str, path: str | None = None):
    """The columnar table of the items (from --trace or --data, or `path` of the same kind), the way the planner
    routes it (gsrlang.execution.planner.table_route); usage errors for what cannot be read."""
    from gsrlang.commands.config import table_config
    from gsrlang.execution.replay import ReplayError
    from gsrlang.execution.runs import load_table as read_table
    from gsrlang.files.dataset import DataError

    try:
        return read_table(program, table_config(args, program, mode, label, path))
    except ReplayError as exc:
        raise TraceRefused(str(exc)) from None
    except (DataError, ValueError) as exc:
        raise UsageError(str(exc)) from None


class TraceRefused(Exception):
    """The trace's judgments cannot feed the program (exit 1, as gsr replay)."""


def run(args) -> int:
    from gsrlang.analysis.tune import METRICS, PAIRWISE_METRICS
    from gsrlang.commands.run import choose_mode, load_program

    if (program := load_program(args.program)) is None:
        return 1
    mode = choose_mode(program, args.mode)
    args.metric = args.metric or ("exact" if mode == "pointwise" else "accuracy")
    if (args.metric in PAIRWISE_METRICS) != (mode == "pairwise"):
        raise UsageError(f"--metric {args.metric} is not a metric of a {mode} program: choose one of "
                         + ", ".join(m for m in METRICS if (m in PAIRWISE_METRICS) == (mode == "pairwise")))
    if args.folds < 2:
        raise UsageError("--folds must be at least 2")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.name):
        raise UsageError(f"--name must be a name (letters, digits, _; not starting with a digit), not `{args.name}`")
    if args.baseline and mode != "pointwise":
        raise UsageError("--baseline fits pointwise models: it needs a pointwise program")
    if args.group_data and not args.trace:
        raise UsageError("--group-data is for --trace; with --data the groups are read from the data itself")
    if args.trace and (args.group_field or args.holdout_field) and not args.group_data:
        raise UsageError(f"with --trace, {'--group-field' if args.group_field else '--holdout-field'} needs "
                         "--group-data FILE (the data file the run read, joined by id)")
    args.shrink = _shrink(args.shrink)
    out = args.out or str(Path(args.program).with_suffix("")) + ".tuned.gsr"
    source = args.trace or args.data
    from gsrlang.files.safeio import check_outputs  # the same path or the same inode (a hard link), as every writer

    inputs = [("PROGRAM", args.program), ("--trace" if args.trace else "--data", source)]
    inputs += [(flag, path) for flag, path in (("--holdout", args.holdout), ("--group-data", args.group_data)) if path]
    check_outputs(inputs, [("--out", out)])
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise UsageError("gsr tune needs scipy: pip install 'gsrlang[learn]'") from None
    from gsrlang.analysis.tune import knobs

    ks = knobs(program, args.every)
    if not ks:
        raise UsageError(f"nothing to tune in `{args.program}`: mark numbers with `VALUE in LO..HI` "
                         "(e.g. `at: 0.25 in 0.1..0.5`), or pass --all to tune every numeric parameter")
    try:
        table = load_table(program, args, mode, f"`{args.program}`")
        holdout = load_table(program, args, mode, f"`{args.program}`", args.holdout) if args.holdout else None
    except TraceRefused as exc:
        print(f"gsr tune: {exc}", file=sys.stderr)
        return 1
    from gsrlang.commands.common import warn_repeated_ids

    warn_repeated_ids("gsr tune", table.ids, source, "each is tuned on, and may fall in two folds")
    return _tune(args, program, ks, table, out, source, holdout)


def _rows_of(args, table) -> list | None:
    """Each table row's data record (for --group-field, --holdout-field and the group warning): the data
    file's rows in order, or with --trace the --group-data rows joined by id; None where a row has none.
    Each record comes with the place messages name (`line 17`)."""
    from gsrlang.files.dataset import DataError, read_rows

    if (path := args.data or args.group_data) is None:
        return None
    with usage_errors(DataError):
        rows = [(r.record, r.where) for r in read_rows(path)]
    if args.data and len(rows) == len(table):
        return rows
    by_id = {}
    for i, (record, where) in enumerate(rows):
        key = (record.get(args.id_field) if args.id_field else str(i + 1)) if isinstance(record, dict) else None
        by_id.setdefault(str(key), (record, where))
    return [by_id.get(str(i), (None, None)) for i in table.ids]


def _groups(args, rows) -> tuple[list | None, int]:
    """(each row's group or None, rows without the field)."""
    from gsrlang.analysis.groups import group_key
    from gsrlang.files.dataset import MissingFieldError, get_path

    if not args.group_field:
        return None, 0
    out = []
    for record, _ in rows:
        try:
            out.append(group_key(get_path(record, args.group_field)) if isinstance(record, dict) else None)
        except MissingFieldError:
            out.append(None)
    return out, sum(g is None for g in out)


_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def _holdout_mask(args, rows) -> list[bool]:
    """Per row: held out (--holdout-field true) or not; a UsageError names the first value that is neither."""
    from gsrlang.files.dataset import MissingFieldError, get_path

    out = []
    for record, where in rows:
        try:
            value = get_path(record, args.holdout_field) if isinstance(record, dict) else None
        except MissingFieldError:
            value = None
        if isinstance(value, bool):
            out.append(value)
        elif isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            out.append(value.strip().lower() in _TRUE)
        else:
            shown = "no value" if value is None else f"`{value!r}`" if not isinstance(value, str) else f"`{value}`"
            raise UsageError(f"--holdout-field {args.holdout_field}: {where or 'a row'} has {shown}, not true or "
                             "false (every row must say whether it is held out)")
    return out


def _tune(args, program, ks, table, out: str, source: str, holdout=None) -> int:
    import attrs
    import numpy as np

    from gsrlang.analysis.groups import groups_note
    from gsrlang.analysis.rewrite import file_hash, number_text, tuned_name, tuned_source
    from gsrlang.analysis.stats import paired_report
    from gsrlang.analysis.tune import (FitSettings, TuneError, choose_shrink, cross_validate, fit, labelled_index,
                                       subset)
    from gsrlang.lang.check.driver import analyze

    rows = _rows_of(args, table) if (args.group_field or args.holdout_field or args.data) else None
    groups, no_group = _groups(args, rows) if rows is not None else (None, 0)
    if args.holdout_field:
        held = np.array(_holdout_mask(args, rows), bool)
        keep = np.flatnonzero(~held)
        holdout, holdout_groups = table.take(np.flatnonzero(held)), subset(groups, np.flatnonzero(held))
        table, groups = table.take(keep), subset(groups, keep)
    else:
        holdout_groups = None
    n = len(table)
    labelled = len(labelled_index(table))
    missing = n - labelled - table.label_errors
    print(f"tuning {len(ks)} number{'s' if len(ks) != 1 else ''} of {program.name} on {labelled} labelled "
          f"item{'s' if labelled != 1 else ''} of {n} ({source})")
    if labelled < n:
        print(f"  left out: {table.label_errors} unusable label{'s' if table.label_errors != 1 else ''}, "
              f"{missing} missing")
    if holdout is not None:
        where = f"`{args.holdout_field}` true" if args.holdout_field else args.holdout
        print(f"  held out ({where}): {len(labelled_index(holdout))} labelled items, never seen by tuning")
    if groups is not None:
        index = labelled_index(table)
        print(f"  groups (`{args.group_field}`): {groups_note([groups[i] for i in index])}; each stays in one fold")
        if no_group:
            print(f"gsr tune: warning: {no_group} row{'s' if no_group != 1 else ''} without `{args.group_field}`: "
                  "each is a group of its own", file=sys.stderr)
    elif args.data:
        _warn_group_candidates(args, rows)
    settings = FitSettings(metric=args.metric, objective=args.objective, shrink=args.shrink, seed=args.seed)
    progress = _progress(args.folds, args.metric, table)
    with usage_errors(TuneError), progress:
        cv = cross_validate(program, ks, table, args.folds, settings, groups=groups, jobs=args.jobs,
                            progress=progress)
        index = labelled_index(table)
        shrink_text = str(args.shrink)
        if args.shrink is None:
            progress.stage("choosing the shrinkage on all items")
            picked, scores = choose_shrink(program, ks, table.take(index), settings, subset(groups, index),
                                           progress)
            settings = attrs.evolve(settings, shrink=picked)
            shrink_text = (f"auto ({picked:g}, chosen on all items by inner {settings.inner_folds}-fold CV "
                           f"{args.metric}: " + ", ".join(f"{k:g}: {v:.3f}" for k, v in scores.items()) + ")")
        progress.stage("tuning on all items")
        theta = fit(program, ks, table.take(index), settings, progress=progress)
    report = paired_report(table.mode, cv.untuned, cv.tuned, cv.golds, args.bootstrap, args.seed, groups=cv.groups)
    nested = ", each fold choosing its shrinkage on its own training items (nested)" if args.shrink is None else ""
    by = f", folds by `{args.group_field}`" if groups is not None else ""
    print(f"\n{args.folds}-fold cross-validation (seed {args.seed}{by}){nested}, on the held-out folds:")
    shown = (("exact", "within1", "qwk", "mae", "spearman", "pearson") if table.mode == "pointwise"
             else ("accuracy", "valid_only_accuracy", "coverage"))
    extra = {}
    if args.baseline:
        from gsrlang.analysis.baseline import baseline_predictions

        models = baseline_predictions(program, table.take(index), cv.golds, cv.fold_of)
        extra = {name: paired_report("pointwise", preds, cv.tuned, cv.golds, args.bootstrap, args.seed,
                                     groups=cv.groups) for name, preds in models.items()}
    _print_table(shown, report, extra)
    if cv.shrinks:
        print("  shrinkage chosen per fold: " + ", ".join(f"{x:g}" for x in cv.shrinks))
    if args.shrink is None:
        print(f"\nshrinkage: {shrink_text}")

    values = [min(k.hi, max(k.lo, float(number_text(v)))) for k, v in zip(ks, theta)]
    tuned_program_name = args.name or tuned_name(program.name)
    header = [
        f"tuned from {args.program} ({program.content_hash}) as {tuned_program_name}",
        f"data: {source} ({file_hash(source)}), {labelled} labelled items of {n}",
        f"metric: {args.metric}; objective: {args.objective}; shrink: {shrink_text}; "
        f"{args.folds}-fold CV{' (nested)' if nested else ''}, seed {args.seed}"
        + (f"; groups: `{args.group_field}` ({groups_note(cv.groups)}), each in one fold" if groups is not None
           else "; folds by item (no --group-field)"),
        f"CV {args.metric}: {_versus(report[args.metric])} ({args.bootstrap} bootstrap resamples"
        + (" over groups)" if groups is not None else ")"),
    ]
    if extra:
        header.append("baseline CV " + args.metric + ": " + "; ".join(
            f"{name} {format_ci(r[args.metric]['a'], r[args.metric]['a_ci95'])}" for name, r in extra.items()))
    if holdout is not None:
        line = _report_holdout(args, program, ks, theta, holdout, holdout_groups)
        if line:
            header.append(line)
    from gsrlang.lang.syntax.parser import decode_source

    # the text exactly as the checker read it (no newline translation: the knobs' spans are offsets into it)
    text, _ = decode_source(Path(args.program).read_bytes())
    tuned_text = tuned_source(text, ks, values, header, name=tuned_program_name)
    analysis = analyze(tuned_text, out)
    if analysis.program is None:  # pragma: no cover - a bug: the tuned numbers stay within checked bounds
        raise RuntimeError("the tuned program does not check: " + "; ".join(d.message for d in analysis.errors))
    from gsrlang.files.safeio import write_atomic

    write_atomic(out, tuned_text)  # an old tuned file stays whole until the new one is (a full disk: the old)
    print(f"\nwrote {out} ({tuned_program_name}, tuned on all {labelled} labelled items):")
    width = max(len(k.name) for k in ks)
    for k, v in zip(ks, values):
        print(f"  {k.name:<{width}}  {number_text(k.start):>7} -> {number_text(v):<7} (in {number_text(k.lo)}.."
              f"{number_text(k.hi)})")
    return 0


def _print_table(shown, report, extra: dict) -> None:
    """The CV metrics: untuned, tuned and their paired difference; then each baseline model and tuned - model."""
    w = max(len(k) for k in shown) + 2
    head = f"  {'metric':<{w}}{'untuned':>24}{'tuned':>24}{'paired difference':>27}"
    for name in extra:
        head += f"{name:>24}{'tuned - ' + name:>27}"
    print(head)
    for key in shown:
        r = report[key]
        line = (f"  {key:<{w}}{format_ci(r['a'], r['a_ci95']):>24}{format_ci(r['b'], r['b_ci95']):>24}"
                f"{format_ci(r['diff'], r['ci95'], True):>27}")
        for e in extra.values():
            line += f"{format_ci(e[key]['a'], e[key]['a_ci95']):>24}{format_ci(e[key]['diff'], e[key]['ci95'], True):>27}"
        print(line)


def _report_holdout(args, program, ks, theta, holdout, groups) -> str | None:
    """Print the tuned and untuned program's agreement on the held-out items; the header's line for it."""
    from gsrlang.analysis.stats import paired_report
    from gsrlang.analysis.tune import labelled_index, predict, subset
    from gsrlang.semantics.evaluate import Evaluator

    index = labelled_index(holdout)
    if not len(index):
        print("\nheld out: no labelled items", file=sys.stderr)
        return None
    items = holdout.take(index)
    tuned = predict(program, ks, theta, items)
    untuned = Evaluator(program).run(items).predictions()
    report = paired_report(items.mode, untuned, tuned, list(items.labels), args.bootstrap, args.seed,
                           groups=subset(groups, index))
    versus = _versus(report[args.metric])
    where = f"`{args.holdout_field}` true" if args.holdout_field else args.holdout
    print(f"\nheld out ({where}, {len(index)} labelled items never seen by tuning): {args.metric} {versus}")
    return f"held out ({where}, {len(index)} items): {args.metric} {versus}"


def _versus(r: dict) -> str:
    """One metric's paired report as `tuned X, untuned Y, paired difference Z`, each with its CI."""
    return (f"tuned {format_ci(r['b'], r['b_ci95'])}, untuned {format_ci(r['a'], r['a_ci95'])}, "
            f"paired difference {format_ci(r['diff'], r['ci95'], True)}")


def _warn_group_candidates(args, rows) -> None:
    """Warn when the data has a field that looks like a group (many rows share one value) and none was given."""
    from gsrlang.analysis.groups import group_candidates

    records = [r for r, _ in rows or () if isinstance(r, dict)]
    found = group_candidates(records, args.folds, exclude=[f for f in (args.id_field, args.label_field,
                                                                       args.response_field) if f])
    if found:
        name, distinct, total = found[0]
        also = f" (also: {', '.join(f'`{f}`' for f, _, _ in found[1:4])})" if len(found) > 1 else ""
        print(f"gsr tune: warning: rows share values of `{name}` ({distinct} values over {total} rows){also}: if "
              f"rows that share one are not independent (one conversation, prompt or source), pass --group-field "
              f"{name} so that each group stays in one fold; folds by row are optimistic", file=sys.stderr)


def _progress(folds: int, metric: str, table):
    """A progress bar on stderr when it is a terminal (rich): fold i of k, candidates evaluated, best so far;
    otherwise a silent counter."""
    from gsrlang.analysis.tune import Progress

    if hasattr(sys.stderr, "isatty") and sys.stderr.isatty():
        return _Bar(folds, metric, table)
    return Progress()


def _Bar(folds: int, metric: str, table):
    import threading

    from rich.console import Console
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    from gsrlang.analysis.tune import Progress, labelled_index, score_of

    golds = [table.labels[i] for i in labelled_index(table)]

    class Bar(Progress):
        def __init__(self):
            super().__init__()
            self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                    TextColumn("folds {task.completed:.0f}/{task.total:.0f}"),
                                    TextColumn("{task.fields[evals]:,} candidates"), TextColumn("{task.fields[best]}"),
                                    TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task("tuning", total=folds, evals=0, best="")
            self.done: dict = {}
            self.shared = None
            self.stop = threading.Event()

        def __enter__(self):
            self.bar.start()
            threading.Thread(target=self._poll, daemon=True).start()
            return self

        def __exit__(self, *exc):
            self.stop.set()
            self.bar.stop()
            return False

        def _total(self) -> int:
            return self.evaluated + (self.shared[0].value if self.shared else 0)

        def _poll(self):
            while not self.stop.wait(0.25):
                self.bar.update(self.task, evals=self._total())

        def stage(self, text):
            self.bar.update(self.task, description=text)

        def watch(self, count, best):
            self.shared = (count, best)

        def fold_done(self, fold, total, predictions):
            self.done.update(predictions)
            keys = sorted(self.done)
            value = score_of(table.mode, metric, [self.done[i] for i in keys], [golds[i] for i in keys])
            value = -value if metric == "mae" else value
            self.bar.update(self.task, advance=1, evals=self._total(),
                            best=f"{metric} so far {value:.3f} ({len(self.done)} items)")

    return Bar()


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


def format_ci(value, ci, signed: bool = False) -> str:
    if value is None:
        return "undefined"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f.format(value) + (f" [{f.format(ci[0])}, {f.format(ci[1])}]" if ci else "")
