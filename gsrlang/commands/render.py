"""gsr render: draw a program's graph (and optionally one traced item) with Graphviz."""

from __future__ import annotations

import sys
from pathlib import Path

from gsrlang.commands.common import DiagnosticPrinter
from gsrlang.files.safeio import check_outputs

HELP = "draw a program's evaluation graph (svg, png, pdf or dot), optionally with one traced item"
DESCRIPTION = """\
Draw a checked .gsr program as a graph: one box per node with its name, kind,
type and parameters (criteria show their procedure), one cell per named port with
each edge entering the port it feeds, the sink and the readout, and a legend.
The format comes from the output's extension (.svg, .png, .pdf, .dot) or -T/--type
(--format is how diagnostics are printed when the program does not check).
Without -o the DOT source is written to standard output.

With --trace and --item, the picture is the audit of one executed item: every
node's value per candidate, the gates that fired, abstentions, and the decision
path to the readout drawn thick.

DOT needs nothing else; svg, png and pdf need Graphviz's `dot` program.

output: the picture to -o FILE, and one line on standard error (`wrote FILE`); without -o, the DOT
source on standard output. Diagnostics on standard error.
exit status: 0 drawn; 1 the program has errors (nothing drawn, so a pipe never gets half a graph);
2 the tool could not do it (an unreadable file, an unknown format, an item not in the trace, no `dot`).

examples:
  gsr render examples/helpsteer2/helpfulness.gsr -o helpfulness.svg
  gsr render rubric.gsr --trace runs/trace.jsonl --item 42 -o item42.svg
  gsr render rubric.gsr | dot -Tpng > graph.png"""


def add_arguments(p) -> None:
    from gsrlang.commands.common import add_format_arguments

    p.add_argument("program", metavar="PROGRAM", help="the .gsr program to draw")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write the picture (default: DOT to stdout)")
    p.add_argument("-T", "--type", dest="image_format", choices=("svg", "png", "pdf", "dot"),
                   help="output format (default: the output file's extension)")
    p.add_argument("--trace", metavar="TRACE", help="a JSONL trace written by `gsr run`")
    p.add_argument("--item", metavar="ID", help="the traced item to overlay (with --trace)")
    p.add_argument("--direction", choices=("TB", "LR"), default="TB",
                   help="TB: criteria on top, the sink below (default); LR: left to right")
    p.add_argument("--no-legend", action="store_true", help="leave out the legend")
    add_format_arguments(p)  # how diagnostics are printed when the program does not check


def run(args) -> int:
    from gsrlang.commands import UsageError, usage_errors
    from gsrlang.lang.check.driver import analyze_file

    if (args.trace is None) != (args.item is None):
        raise UsageError("--trace and --item go together: name the trace file and the item to overlay")
    check_outputs([("PROGRAM", args.program), ("--trace", args.trace)], [("-o", args.output)])
    fmt = args.image_format
    if args.output is not None and fmt is None:
        fmt = Path(args.output).suffix.lstrip(".").lower() or None
        if fmt not in ("svg", "png", "pdf", "dot"):
            raise UsageError(f"cannot tell the format from `{args.output}`: name it .svg, .png, .pdf or .dot, "
                             "or pass --type")
    if args.output is None and fmt not in (None, "dot"):
        raise UsageError(f"{fmt} output is binary or large: write it to a file with -o")
    try:
        analysis = analyze_file(args.program)
    except OSError as exc:
        raise UsageError(f"cannot read `{args.program}`: {exc.strerror}") from exc
    if analysis.program is None:
        # diagnostics never mix with DOT on stdout
        printer = DiagnosticPrinter(args.format, args.color, to_stderr=True)
        printer.add(args.program, analysis.text, analysis.diagnostics)
        printer.finish()
        print(f"gsr render: `{args.program}` has errors; nothing drawn", file=sys.stderr)
        return 1

    from gsrlang.trace.schema import TraceError
    from gsrlang.views import render

    trace = None
    if args.trace is not None:
        with usage_errors(TraceError):
            trace = render.read_trace_item(args.trace, args.item)
        if trace.program_hash and trace.program_hash != analysis.program.content_hash:
            print(f"gsr render: warning: the trace was recorded for another version of the program "
                  f"({trace.program_hash[:19]}...); nodes are matched by id", file=sys.stderr)
    options = render.RenderOptions(legend=not args.no_legend, direction=args.direction)
    if args.output is None:
        sys.stdout.write(render.to_dot(analysis.program, trace, options))
        return 0
    try:
        written = render.render(analysis.program, args.output, fmt, trace, options)
    except render.GraphvizMissing as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise UsageError(f"cannot write `{args.output}`: {exc.strerror or exc}") from exc
    print(f"wrote {written}", file=sys.stderr)
    return 0
