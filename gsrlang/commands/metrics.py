"""gsr metrics: agreement between a results file and its human labels."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors

HELP = "agreement metrics (with bootstrap 95% intervals) for results files"
DESCRIPTION = """\
Read a results file written by `gsr run --out` (or `gsr replay --out`) and print how
well its predictions agree with the labels it holds.

pointwise: exact agreement and within-1 accuracy (the gold label rounded half up;
an invalid item is a miss), MAE, Pearson, Spearman and quadratic-weighted kappa
(over valid items). pairwise: accuracy (ties, abstentions and invalid items are
errors unless the gold is a tie), valid-only accuracy, coverage, invalid, tie and
abstain rates. Several files are several runs of the same items (each file a run),
as are lines with a `run` field; then means and standard deviations over the runs
are shown. Files of different programs (their lines name the program and its
content hash) are not repeats: they are shown side by side, one column each, with
no mean over them. An undefined metric is shown as undefined, never as 0.

--group-field F with --data FILE (the data the run read, items joined by id as
--id-field names them) makes each interval a cluster bootstrap over the groups:
honest when items share a prompt, a conversation or a source.

output: the report on standard output (--json: one JSON document); warnings (a file that is a killed
run's prefix) on standard error.
exit status: 0 reported; 2 a file that cannot be read or is not a results file, or bad usage.

examples:
  gsr metrics out/results.jsonl
  gsr metrics out/seed1.jsonl out/seed2.jsonl out/seed3.jsonl   # mean and sd over three runs
  gsr metrics out/flat.jsonl out/overall.jsonl                   # two programs, side by side
  gsr metrics out/results.jsonl --data dev.jsonl --id-field id --group-field context
  gsr metrics out/results.jsonl --json > metrics.json"""


def add_arguments(p) -> None:
    p.add_argument("results", metavar="RESULTS", nargs="+", help="results files (JSONL); several are several runs")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON; with --trace, `cost` holds the model judges' tokens (prompt, "
                        "cached, completion, reasoning; per judge and criterion) and dollars from its run record")
    from gsrlang.commands.common import add_bootstrap_argument, add_seed_argument

    add_bootstrap_argument(p)
    add_seed_argument(p)
    g = add_criterion_arguments(p)
    g.add_argument("--trace", metavar="FILE", help="the run's trace (the criteria's judgments)")
    from gsrlang.commands.compare import add_group_arguments

    add_group_arguments(p)


def add_criterion_arguments(p):
    """--criterion, --data and --id-field (shared with `gsr report`); returns their group."""
    g = p.add_argument_group("per-criterion agreement (where the data holds a human label for a criterion)")
    g.add_argument("--criterion", action="append", default=[], metavar="NAME=FIELD",
                   help="compare criterion NAME's recorded judgments with the data's FIELD (repeatable)")
    g.add_argument("--data", metavar="FILE", help="the data file with the criteria's human labels")
    g.add_argument("--id-field", metavar="NAME", help="the item id column, as given to gsr run")
    return g


def run(args) -> int:
    from gsrlang.analysis.metrics import format_report, metrics_from_results
    from gsrlang.files.dataset import DataError

    for path in args.results:
        if not Path(path).is_file():
            raise UsageError(f"{path}: no such file")
    groups = None
    if args.group_field:
        from gsrlang.analysis.metrics import read_results
        from gsrlang.commands.compare import read_groups

        with usage_errors(DataError):  # a file that is not a results file: exit 2, as compare, report and replay
            ids = list(dict.fromkeys(r.get("id") for p in args.results for r in read_results(p)
                                     if "kind" not in r and r.get("label") is not None))
        groups = dict(zip(map(str, ids), read_groups(args, ids, "gsr metrics")))
    with usage_errors(DataError):
        report = metrics_from_results(args.results, bootstrap=args.bootstrap, seed=args.seed, groups=groups)
    if args.criterion:
        report["criteria"] = criteria_agreement(args)
    if args.trace:
        report["cost"] = trace_cost(args.trace)
    for path in report["incomplete"]:
        print(f"gsr metrics: warning: {path} does not end with a completed run's end line: its run was killed, "
              "failed or is still going, so these metrics cover only the items it holds", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report))
        for name, r in report.get("criteria", {}).items():
            unusable = f"; {r['n_unusable']} unusable labels left out" if r["n_unusable"] else ""
            print(f"\ncriterion {name} against {r['field']}{unusable}:")
            print(format_report(r))
        if report.get("cost"):
            from gsrlang.judges.llm.prices import usage_text

            print("\n" + usage_text(report["cost"]))
    return 0


def trace_cost(path: str) -> dict | None:
    """The model judges' tokens (prompt, cached, completion, reasoning; per judge and criterion) and dollars,
    from the trace's run-summary record; None when it has none (a killed run) or no model judged."""
    from gsrlang.files.dataset import DataError
    from gsrlang.judges.llm.prices import cost_record
    from gsrlang.trace.read import read_trace
    from gsrlang.trace.schema import is_summary

    summary = None
    try:
        for _, record in read_trace(path, summaries=True):
            if is_summary(record):
                summary = record
    except (OSError, DataError) as exc:
        raise UsageError(f"--trace {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return cost_record(summary)


def criteria_agreement(args, command: str = "gsr metrics") -> dict:
    """Per-criterion agreement for --criterion (with args.trace, args.data, args.id_field, args.bootstrap and
    args.seed); a UsageError names what is wrong, and a warning names a criterion no item could be compared on."""
    from gsrlang.analysis.criteria import criterion_agreement, parse_pairs
    from gsrlang.files.dataset import DataError

    for flag, value, what in (("--trace", args.trace, "the run's trace: the judgments"),
                              ("--data", args.data, "the data file with the human labels")):
        if not value:
            raise UsageError(f"--criterion needs {flag} ({what})")
    with usage_errors(ValueError, DataError):
        pairs = parse_pairs(args.criterion)
        reports = criterion_agreement(args.trace, args.data, pairs, args.id_field, args.bootstrap, args.seed)
    for name, report in reports.items():
        if not report["n"]:
            join = f"--id-field {args.id_field}" if args.id_field else "the data's default ids (no --id-field)"
            print(f"{command}: warning: criterion `{name}`: no item of the trace has a label in `{report['field']}` "
                  f"of {args.data} (items joined by {join})", file=sys.stderr)
    return reports
