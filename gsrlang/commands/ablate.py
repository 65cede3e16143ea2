"""gsr ablate: the composition ablation of a program over recorded judgments, in one command."""

from __future__ import annotations

import json
import sys

from gsrlang.commands import UsageError

HELP = "ablate a program over a trace or data: bypass each gate, mean each reducer, drop each criterion, flat mean"
DESCRIPTION = """\
Re-compose the judgments recorded in a trace (--trace; no judge is called),
or those of a data file whose criteria only read the data (--data: human(),
rule.*; its columns named as for gsr run, the label by --label-field), under
variants of PROGRAM generated from its graph: each gate bypassed, each Score
reducer replaced by a plain mean, each criterion dropped (with what depends
only on it), and the whole graph replaced by the equal-weight mean of every
criterion (the weighted-aggregation baseline). For each variant, its agreement
with the labels and the paired difference to the program (variant - program)
with a paired bootstrap 95% interval. A variant keeps only the nodes that
still reach its sink, so recorded criteria it no longer uses are fine.

output: the table on standard output (--json: one JSON document); diagnostics and warnings on
standard error.
exit status: 0 done; 1 the program has errors, or the trace cannot feed it; 2 bad usage or a file that
cannot be read (or --data under criteria that need a judge).

examples:
  gsr ablate examples/topical_chat/overall.gsr --trace out/overall.trace.jsonl
  gsr ablate examples/topical_chat/flat.gsr --data examples/topical_chat/data/dev.jsonl \\
      --label-field scores.overall
  gsr ablate rubric.gsr --trace out/trace.jsonl --json > ablation.json"""

SHOWN = ("exact", "qwk", "spearman", "mae")


def add_arguments(p) -> None:
    p.add_argument("program", metavar="PROGRAM", help="the .gsr program")
    from gsrlang.commands.config import add_table_arguments

    add_table_arguments(p, "a trace with labels (`gsr run --trace`)")
    p.add_argument("--mode", choices=("pointwise", "pairwise"),
                   help="with --data: the task to ablate, for a program that declares both (default: its only "
                        "task; a trace's records say theirs)")
    from gsrlang.commands.common import add_bootstrap_argument, add_seed_argument

    add_bootstrap_argument(p, default=500)
    add_seed_argument(p)
    p.add_argument("--json", action="store_true", help="print the table as JSON")


def run(args) -> int:
    from gsrlang.analysis.ablate import variants
    from gsrlang.analysis.stats import paired_report
    from gsrlang.commands.common import warn_repeated_ids
    from gsrlang.commands.run import choose_mode, load_program
    from gsrlang.commands.tune import TraceRefused, load_table
    from gsrlang.semantics.evaluate import Evaluator

    if (program := load_program(args.program)) is None:
        return 1
    if args.trace and args.mode:
        raise UsageError("--mode is for --data: a trace's records say their task")
    mode = choose_mode(program, args.mode) if args.data else None
    try:
        table = load_table(program, args, mode, f"`{args.program}`")
    except TraceRefused as exc:
        print(f"gsr ablate: {exc}", file=sys.stderr)
        return 1
    warn_repeated_ids("gsr ablate", table.ids, args.trace or args.data, "each is counted")
    keep = [i for i, g in enumerate(table.labels) if g is not None]
    if not keep:
        if args.data:
            raise UsageError(f"{args.data}: no item has a label in --label-field {args.label_field}")
        raise UsageError(f"{args.trace}: no item has a label: record the run with --label-field")
    labelled = table.take(keep)
    golds = labelled.labels
    mode = labelled.mode
    base = Evaluator(program).run(labelled).predictions()
    rows = []
    for v in variants(program):
        preds = Evaluator(v.program).run(labelled).predictions()
        rows.append({"variant": v.name, "hash": v.program.content_hash,
                     "metrics": paired_report(mode, base, preds, golds, args.bootstrap, args.seed)})
    result = {"program": args.program, "hash": program.content_hash,
              **({"trace": args.trace} if args.trace else {"data": args.data}), "n": len(keep), "mode": mode,
              "variants": rows}
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(format_ablation(result))
    return 0


def format_ablation(result: dict) -> str:
    from gsrlang.commands.tune import format_ci

    keys = SHOWN if result["mode"] == "pointwise" else ("accuracy",)
    lines = [f"{result['program']} over {result['n']} labelled items of {result.get('trace') or result['data']}; "
             "difference = variant - program, paired bootstrap 95% CI", ""]
    first = result["variants"][0]["metrics"] if result["variants"] else {}
    width = max([len("program")] + [len(r["variant"]) for r in result["variants"]])
    lines.append(f"  {'variant':<{width}}" + "".join(f"{k:>10}{'difference':>25}" for k in keys if k in first))
    if first:
        lines.append(f"  {'program':<{width}}" + "".join(f"{_num(first[k]['a']):>10}{'':>25}" for k in keys
                                                          if k in first))
    for r in result["variants"]:
        m = r["metrics"]
        lines.append(f"  {r['variant']:<{width}}" + "".join(
            f"{_num(m[k]['b']):>10}{format_ci(m[k]['diff'], m[k]['ci95'], True):>25}" for k in keys if k in m))
    return "\n".join(lines)


def _num(x) -> str:
    return "undef." if x is None else f"{x:.3f}"
