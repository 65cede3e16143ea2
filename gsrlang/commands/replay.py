"""gsr replay: recompute composition and readout from a trace, with no judge call."""

from __future__ import annotations

import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors

HELP = "recompute a trace with no judge call: verify it exactly, or re-compose it under an edited program"
DESCRIPTION = """\
Replay a trace written by `gsr run --trace`. No judge is called.

Without --program (or with the very program the trace was recorded with), every
operator node, the readout and the result line are recomputed from the recorded
criterion outputs and must be reproduced exactly; the first difference is shown
(item, node, candidate, recorded and recomputed values) and the exit status is 1.
A trace recorded under another version of the program is reported as such.

With --program EDITED.gsr (a different program that keeps the recorded criteria,
with the same names and types), the recorded judgments are re-composed under it:
the cheap "what if". Write the new results with --out (and a new trace with
--trace-out); agreement is printed when the trace holds labels.

A trace of per-item programs (`gsr run --programs`) is verified record by record,
each under the program file its record names (re-checked; it must still have the
recorded hash); items that ran under no program are carried over. A trace's
run-summary record (its last line) is not replayed: its totals are printed
("recorded run: ...").

output, on standard output (standard error with --out -): the outcome (`replayed N items ... reproduced
exactly`), the recorded run's totals and, when the trace holds labels, the agreement; --show prints the
item's decision path. A difference, warnings and errors go to standard error.

exit status: 0 reproduced exactly (or re-composed); 1 a difference, another program
version, or criteria that do not match; 2 the trace or program cannot be read.

examples:
  gsr replay out/trace.jsonl
  gsr replay out/trace.jsonl --program examples/topical_chat/flat.gsr --out out/flat.jsonl
  gsr replay out/trace.jsonl --show tc-007"""


def add_arguments(p) -> None:
    p.add_argument("trace", metavar="TRACE", help="a trace file (JSONL) written by `gsr run --trace`")
    p.add_argument("--program", metavar="PROGRAM",
                   help="replay under this program (default: the program file named in the trace)")
    p.add_argument("--out", metavar="FILE", help="write one result line per item (`-`: standard output)")
    p.add_argument("--trace-out", dest="trace_out", metavar="FILE", help="write a new trace (for the edited program)")
    p.add_argument("--show", metavar="ITEM_ID", help="print this item's decision path from the replayed trace")
    from gsrlang.commands.common import add_bootstrap_argument

    add_bootstrap_argument(p, " for the metrics' confidence intervals")
    p.add_argument("-q", "--quiet", action="store_true", help="only the outcome")


def _first_header(path: str) -> dict:
    from gsrlang.trace.read import read_trace
    from gsrlang.trace.schema import TraceError

    with usage_errors(TraceError):
        for _, record in read_trace(path):
            return record.get("program") or {}
    raise UsageError(f"{path}: the trace holds no records")


def recorded_program_path(header: dict, trace_path: str) -> str:
    """The program file a trace was recorded with (also used by `gsr report`); UsageError when it is gone."""
    if not (named := header.get("path")):
        raise UsageError("the trace does not name its program file: pass it with --program")
    candidates = [Path(named)]
    if header.get("abs_path"):
        candidates.append(Path(header["abs_path"]))
    if not Path(named).is_absolute():
        candidates.append(Path(trace_path).resolve().parent / named)
    # as recorded (relative to where the run was), then its absolute path, then beside the trace;
    # a file found there that is another version of the program is passed over for one that is not
    found = [c for c in dict.fromkeys(candidates) if c.is_file()]
    for c in found:
        if _content_hash(c) == header.get("hash"):
            return str(c)
    if found:
        return str(found[0])  # another version: run() says so
    raise UsageError(f"the program the trace was recorded with, `{named}`"
                     + (f" ({header['abs_path']})" if header.get("abs_path") else "")
                     + ", is not there any more: pass it with --program")


def _content_hash(path: Path) -> str | None:
    from gsrlang.lang.check.driver import analyze_file

    try:
        program = analyze_file(path).program
    except OSError:
        return None
    return program.content_hash if program is not None else None


def run(args) -> int:
    from gsrlang.commands.run import duplicate_warning, load_program
    from gsrlang.execution.peritem import RecordedPrograms
    from gsrlang.execution.planner import ReplayConfig, replay_route
    from gsrlang.execution.replay import ReplayError, unused_criteria
    from gsrlang.execution.runs import recorded_complete, skipped_judgments
    from gsrlang.files.dataset import DataError
    from gsrlang.files.safeio import check_outputs

    outputs = [("--out", args.out), ("--trace-out", args.trace_out)]
    check_outputs([("TRACE", args.trace), ("--program", args.program)], outputs)
    header = _first_header(args.trace)
    recorded_hash = header.get("hash")
    explicit = args.program is not None
    per_item = "index" in header  # recorded by `gsr run --programs`: each record names its own program
    out = sys.stderr if args.out == "-" else sys.stdout
    programs = None
    if per_item and not explicit:
        program, path, verify = None, None, True
        programs = RecordedPrograms(args.trace)
        label = "each record's own program"
    else:
        path = args.program if explicit else recorded_program_path(header, args.trace)
        check_outputs([("the trace's program", path)], outputs)
        if (program := load_program(path)) is None:
            return 1
        verify = program.content_hash == recorded_hash and not per_item
        if not verify and not explicit:
            print(f"gsr replay: `{path}` has changed since the trace was recorded: the trace was recorded under "
                  f"version {recorded_hash}, the file is now {program.content_hash}.\n"
                  f"To re-compose the recorded judgments under the current version, run\n"
                  f"  gsr replay {args.trace} --program {path}", file=sys.stderr)
            return 1
        label = f"`{path}`"
        if not verify and not args.quiet:
            recorded = ("the per-item programs of " + str(header.get("index"))) if per_item else \
                f"{header.get('name')!r} ({_short(recorded_hash)})"
            print(f"re-composing the judgments recorded under {recorded} with {label} "
                  f"({_short(program.content_hash)})", file=out)
    shown = []

    def on_item(run, line, difference, static):
        if args.show is not None and str(run.id) == args.show:
            shown.append((run, static))

    config = ReplayConfig(out=args.out, trace=args.trace_out, program_path=path, program_label=label)
    route = replay_route(config, verify=verify, per_item=programs is not None, show=args.show is not None,
                         skipped_judgments=0 if verify or programs is not None or args.trace_out
                         else skipped_judgments(args.trace))
    try:
        summary, by_columns = _replay(route, args.trace, program, config, on_item, programs)
        if route.show == "alone" and by_columns:
            from gsrlang.execution.verify import replay_item

            shown.extend(replay_item(args.trace, program, args.show, path, label, verify))
    except ReplayError as exc:
        print(f"gsr replay: {exc}", file=sys.stderr)
        return 1
    except DataError as exc:
        raise UsageError(str(exc)) from None

    if not verify and not args.quiet:
        first = _first_record(args.trace)
        unused = unused_criteria(program, first) if first and not per_item else []
        if unused:
            print(f"  recorded criteria not used by {label}: {', '.join(unused)}", file=out)

    under = f"{label} ({_short(program.content_hash)})" if program is not None else \
        f"each record's own program ({programs.checked} program{'s' if programs.checked != 1 else ''} checked)"
    if verify:
        if summary.first_difference is not None:
            d = summary.first_difference
            print(f"gsr replay: the trace is NOT reproduced: {summary.differences} of {summary.items} items differ.\n"
                  f"first difference: {d.describe()}", file=sys.stderr)
            code = 1
        else:
            carried = f" ({summary.failed} failed rows carried over)" if summary.failed else ""
            print(f"replayed {summary.items} item{'s' if summary.items != 1 else ''} of {args.trace} under "
                  f"{under} in {summary.seconds:.2f} s: every node output, readout "
                  f"and result reproduced exactly{carried}", file=out)
            code = 0
    else:
        print(f"{program.name} ({_short(program.content_hash)}), {summary.mode}: {summary.line()}", file=out)
        if args.out and args.out != "-":
            print(f"  wrote results {args.out}", file=out)
        code = 0
        if summary.needs:
            items = ", ".join(f"`{c}` ({n} item{'s' if n != 1 else ''})" for c, n in summary.needs.items())
            print(f"  {label} needs judgments that the recorded run never made (short-circuit judging skipped "
                  f"them as moot): {items}; those items are invalid here. Rerun with `gsr run "
                  "--no-short-circuit` to make every judgment.", file=out)
    if summary.recorded is not None and not args.quiet:
        print(f"  {recorded_run(summary.recorded)}", file=out)
    claimed = summary.recorded.get("items") if isinstance(summary.recorded, dict) else None
    if claimed is not None and claimed != summary.items:
        from gsrlang.files.printable import printable

        print(f"gsr replay: error: {args.trace}: its run summary claims {printable(repr(claimed))} items, but it "
              f"holds {summary.items}: the file was cut, joined with another or edited; the figures above are "
              "of the items it holds", file=sys.stderr)
        code = max(code, 1)
    if summary.duplicate_ids and not args.quiet:
        print(duplicate_warning("gsr replay", summary), file=sys.stderr)
    if not recorded_complete(summary.recorded):
        print(f"gsr replay: warning: {args.trace} does not end with a completed run's summary record: the run "
              f"was killed or failed, so it holds only {summary.items} of its items", file=sys.stderr)
    if not args.quiet and (not verify or code == 0):
        from gsrlang.commands.run import print_agreement

        print_agreement(summary, args.bootstrap, out)
    if args.show is not None and not _show(args, shown, out, summary):
        return max(code, 2)
    return code


def _replay(route, trace: str, program, config, on_item, programs):
    """Run the planner's route: (the summary, whether the column path ran it). A column path that finds the
    whole trace is not for it (version 1, another program's records) returns None: then item by item."""
    from gsrlang.execution.planner import COLUMNS
    from gsrlang.execution.runs import replay_file

    summary = None
    if route.evaluate == COLUMNS:
        if route.verify:
            from gsrlang.execution.verify import verify_columnar

            summary = verify_columnar(trace, program, config.program_label, config.out)
        else:
            from gsrlang.execution.whatif import recompose_columnar

            summary = recompose_columnar(trace, program, config.program_label, config.out)
    if summary is not None:
        return summary, True
    return replay_file(trace, program, route.verify, config, on_item=on_item, programs=programs), False


def recorded_run(record: dict) -> str:
    """One line on a trace's run-summary record: items, wall time, and the model judges' cost."""
    items = record.get("items", 0)
    text = (f"recorded run: {items} item{'s' if items != 1 else ''} ({record.get('ok', 0)} ok, "
            f"{record.get('invalid', 0)} invalid, {record.get('failed', 0)} failed) in "
            f"{float(record.get('wall_s') or 0):.2f} s")
    if not (llm := (record.get("judges") or {}).get("llm")):
        return text + "; no model judge"
    from gsrlang.judges.llm.prices import usage_text

    return text + "; " + usage_text(llm, ("cache_hits", "http_requests"), priced=False)


def _short(digest: str | None) -> str:
    return (digest or "?").split(":")[-1][:12]


def _first_record(path: str) -> dict | None:
    from gsrlang.trace import TraceView
    from gsrlang.trace.read import read_trace

    for _, record in read_trace(path):
        if TraceView.of_record(record).computed:
            return record
    return None


def _show(args, shown, out, summary) -> bool:
    """Print the decision path of the item to --show; False when the trace has no such item."""
    from rich.console import Console

    from gsrlang.trace.write import trace_record
    from gsrlang.views.explain import decision_tree

    if not shown:
        ids = summary.id_sample()
        sample = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        print(f"gsr replay: error: --show: item {args.show!r} is not in trace `{args.trace}`"
              + (f" (items: {sample})" if ids else " (it records no items)"), file=sys.stderr)
        return False
    run, static = shown[0]
    if len(shown) > 1:
        print(f"gsr replay: {len(shown)} records have id {args.show!r}; showing the first (line {run.line})",
              file=sys.stderr)
    if not static.nodes:
        print(f"gsr replay: item {args.show!r} has no decision path: {run.reason}", file=sys.stderr)
        return True
    record = trace_record(run, None, static=static)
    console = Console(file=out)
    for c in range(max(1, len(record["item"]["candidates"]))):
        console.print(decision_tree(record, c))
    return True
