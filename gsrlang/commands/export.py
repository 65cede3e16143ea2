"""gsr export: write a checked program in its declarative JSON form (see gsrlang/lang/jsonform.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gsrlang.commands.common import DiagnosticPrinter, read_error, write_output
from gsrlang.files.safeio import check_outputs

HELP = "export a checked .gsr program as JSON (the graph, its types and its readout)"
DESCRIPTION = """\
Check a .gsr program and write its JSON form: every node of the evaluation graph
in topological order (kind, type, operator, parameters with their defaults,
inputs by port and slot), the criteria with their questions, levels, examples and
procedures, the sink and the readout. docs/program.schema.json is its schema;
`gsr import` turns it back into .gsr source.

output: the JSON form on standard output (or -o FILE, then nothing is printed); diagnostics on standard
error. A program with errors is not exported.
exit status: 0 exported; 1 the program has errors or cannot be read (GSR005); 2 bad usage.

examples:
  gsr export rubric.gsr --json -o rubric.json
  gsr export rubric.gsr | jq '.nodes[] | .id'"""


def add_arguments(p) -> None:
    p.add_argument("program", metavar="PROGRAM.gsr", help="the program to export")
    p.add_argument("--json", dest="to", action="store_const", const="json", default="json",
                   help="write the JSON form (the default, and the only format for now)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the diagnostics (auto: when standard error is a terminal)")


def run(args) -> int:
    from gsrlang.lang.check.driver import analyze_file
    from gsrlang.lang.jsonform import program_to_json

    path = args.program
    check_outputs([("PROGRAM", path)], [("-o", args.output)])
    printer = DiagnosticPrinter("full", args.color, to_stderr=True)
    if not Path(path).is_file():
        problem = f"no such file: `{path}`" if not Path(path).exists() else f"`{path}` is not a file"
        return _fail(printer, path, None, [read_error(path, problem)])
    try:
        analysis = analyze_file(path)
    except OSError as exc:
        return _fail(printer, path, None, [read_error(path, f"cannot read `{path}`: {exc.strerror}")])
    if analysis.program is None:
        if analysis.errors:
            return _fail(printer, path, analysis.text, analysis.diagnostics)
        print(f"gsr export: `{path}` is a fragment: only a rubric (with tasks and a sink) can be exported",
              file=sys.stderr)
        return 1
    if analysis.diagnostics:  # warnings
        printer.add(path, analysis.text, analysis.diagnostics)
    write_output(args.output, json.dumps(program_to_json(analysis.program), indent=2, ensure_ascii=False) + "\n")
    return 0


def _fail(printer, path, text, diagnostics) -> int:
    printer.add(path, text, diagnostics)
    return 1
