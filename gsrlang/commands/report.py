"""gsr report: one self-contained HTML page of a run (and optionally a comparison with a second run)."""

from __future__ import annotations

import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors
from gsrlang.commands.metrics import add_criterion_arguments, criteria_agreement

HELP = "write one self-contained HTML report of a run: metrics, charts, the graph, items, decision paths"
DESCRIPTION = """\
Build one HTML file from a run's results (`gsr run --out`) and its trace (`gsr run
--trace`): the agreement metrics with 95% bootstrap intervals, the confusion matrix
as a heatmap, predicted and gold score distributions, each criterion's value
distribution, the program's graph, and a table of items that sorts and filters
(disagreement >= 2, invalid, abstained, a gate fired, an id search), a page at a
time. Opening an item shows its decision path on the graph, with every recorded
judgment, its reason and its evidence quotes.

With --compare RESULTS2 --compare-trace TRACE2 (a second run of the same items),
the page also shows the metrics of both runs with paired bootstrap intervals of
their differences, the distribution of per-item score differences, and the items
that changed.

The page needs no network: its script, styles and data are inline and it uses the
system's fonts. The program is found as `gsr replay` finds it (the path the trace
records, its absolute path, or beside the trace; it must have the recorded content
hash), or given with --program; without it the page has no graph or decision paths.
Drawing the graph needs Graphviz's `dot`.

With --criterion NAME=FIELD --data FILE (as for `gsr metrics`), the page also shows
each named criterion's agreement with a human label for that criterion held in the
data file (joined by item id: --id-field, as the run was given it).

A results file and a trace that are not of the same run (different items, or a
result the trace does not record) are refused.

output: the page to -o FILE and one line on standard output (`wrote FILE (0.2 MB, 240 items)`);
warnings on standard error.
exit status: 0 written; 2 the files cannot be used.

examples:
  gsr report out/demo/overall.results.jsonl --trace out/demo/overall.trace.jsonl -o out/demo/report.html
  gsr report a.jsonl --trace a.trace.jsonl --compare b.jsonl --compare-trace b.trace.jsonl -o ab.html
  gsr report a.jsonl --trace a.trace.jsonl -o a.html --data dev.jsonl --id-field id \\
      --criterion maintains_context=human.coherence"""


def add_arguments(p) -> None:
    p.add_argument("results", metavar="RESULTS", help="the run's results file (JSONL, from `gsr run --out`)")
    p.add_argument("--trace", required=True, metavar="TRACE", help="the same run's trace (from `gsr run --trace`)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the HTML page")
    p.add_argument("--compare", metavar="RESULTS2", help="a second run's results, to compare with")
    p.add_argument("--compare-trace", metavar="TRACE2", help="the second run's trace (with --compare)")
    p.add_argument("--program", metavar="PROGRAM",
                   help="the program the run used (default: the one the trace names, found by its hash)")
    p.add_argument("--title", metavar="TEXT", help="the page's title")
    from gsrlang.commands.common import add_bootstrap_argument, add_seed_argument

    add_bootstrap_argument(p, " for the 95%% intervals")
    add_seed_argument(p)
    add_criterion_arguments(p)


def run(args) -> int:
    from gsrlang.files.dataset import DataError
    from gsrlang.files.safeio import check_outputs, write_atomic
    from gsrlang.views.report import build_report, load_run

    if (args.compare is None) != (args.compare_trace is None):
        raise UsageError("--compare and --compare-trace go together: the second run's results and its trace")
    if (args.data or args.id_field) and not args.criterion:
        raise UsageError("--data and --id-field go with --criterion NAME=FIELD (the criteria to compare with the "
                         "data's human labels)")
    out = Path(args.output)
    inputs = [("RESULTS", args.results), ("--trace", args.trace), ("--compare", args.compare),
              ("--compare-trace", args.compare_trace), ("--program", args.program), ("--data", args.data)]
    check_outputs(inputs, [("-o", args.output)])
    if out.is_dir():
        raise UsageError(f"-o {args.output} is a folder: give a file name")
    with usage_errors(DataError):
        first = load_run(args.results, args.trace)
        other = load_run(args.compare, args.compare_trace) if args.compare else None
    by_criterion = criteria_agreement(args, "gsr report") if args.criterion else None
    program = _program(args, first)
    with usage_errors(DataError):
        page = build_report(first, program, other, bootstrap=args.bootstrap, title=args.title, seed=args.seed,
                            by_criterion=by_criterion)
    write_atomic(out, page)
    n = len(first.results)
    print(f"wrote {out} ({len(page.encode('utf-8')) / 1e6:.1f} MB, {n} item{'s' if n != 1 else ''}"
          + (f", compared with {args.compare}" if other is not None else "") + ")")
    return 0


def _program(args, run):
    """The checked program of the run: --program, else the one the trace names; None (with a warning) if absent."""
    from gsrlang.commands.replay import recorded_program_path
    from gsrlang.commands.run import load_program

    if args.program is not None:
        path = args.program
    else:
        try:
            path = recorded_program_path(run.header, args.trace)
        except UsageError as exc:
            print(f"gsr report: warning: {exc}; the page has no graph or decision paths", file=sys.stderr)
            return None
    if (program := load_program(path)) is None:
        raise UsageError(f"`{path}` does not check: fix it, or leave it out")
    recorded = run.header.get("hash")
    if recorded and program.content_hash != recorded:
        raise UsageError(f"`{path}` is another version of the program than the trace's ({program.content_hash}, "
                         f"the trace has {recorded}): its decision paths would not be the run's")
    return program
