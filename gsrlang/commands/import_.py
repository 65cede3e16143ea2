"""gsr import: turn a program's JSON form back into .gsr source, checked by the same checker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gsrlang.commands.common import DiagnosticPrinter, write_output
from gsrlang.files.safeio import check_outputs

HELP = "turn a program's JSON form (from `gsr export`) back into checked .gsr source"
DESCRIPTION = """\
Read a program's JSON form (docs/program.schema.json), write it as .gsr source in
the canonical layout, and check that source with the same checker as `gsr check`.
Anonymous nodes become nested calls again; named nodes, `node` declarations.

A malformed document is reported with the JSON path of each problem
(`nodes[3].inputs[0].source: unknown node 'foo'`); a document whose program does
not check is reported with the checker's diagnostics against the generated
source. Either way nothing is written.

output: the .gsr source on standard output (or -o FILE, then nothing is printed); problems on standard
error.
exit status: 0 imported; 1 a document that cannot be read, is malformed or does not check; 2 bad usage.

examples:
  gsr import rubric.json -o rubric.gsr
  gsr export a.gsr | gsr import -"""


def add_arguments(p) -> None:
    p.add_argument("document", metavar="PROGRAM.json", help="the JSON form, or - for standard input")
    p.add_argument("-o", "--output", metavar="FILE", help="write the .gsr source to FILE instead of standard output")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the diagnostics (auto: when standard error is a terminal)")


def run(args) -> int:
    from gsrlang.lang.check.driver import analyze
    from gsrlang.lang.jsonform import JsonFormError, json_to_source, node_type_mismatches

    name = "<stdin>" if args.document == "-" else args.document
    check_outputs([("PROGRAM.json", args.document)], [("-o", args.output)])
    try:
        raw = sys.stdin.read() if args.document == "-" else Path(args.document).read_text(encoding="utf-8")
    except FileNotFoundError:
        return _error(f"no such file: `{name}`")
    except (OSError, UnicodeDecodeError) as exc:
        return _error(f"cannot read `{name}`: {getattr(exc, 'strerror', None) or exc}")
    try:
        doc = json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return _error(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}")
    except ValueError as exc:  # a constant such as NaN, an integer of more than 4,300 digits
        return _error(f"{name}: invalid JSON: {exc}")
    except RecursionError:
        return _error(f"{name}: invalid JSON: arrays or objects nested too deeply")
    try:
        source = json_to_source(doc)
    except JsonFormError as exc:
        for message in exc.errors:
            print(f"{name}: {message}", file=sys.stderr)
        n = len(exc.errors)
        print(f"gsr import: `{name}` is not a valid program form ({n} problem{'s' if n != 1 else ''})",
              file=sys.stderr)
        return 1
    shown = args.output or (Path(name).stem + ".gsr" if args.document != "-" else "<generated>.gsr")
    analysis = analyze(source, None)
    printer = DiagnosticPrinter("full", args.color, to_stderr=True)
    if analysis.diagnostics:
        printer.add(shown, source, analysis.diagnostics)
    if analysis.program is None:
        print(f"gsr import: the program in `{name}` does not check (diagnostics above are against the "
              "generated source)", file=sys.stderr)
        return 1
    mismatches = node_type_mismatches(doc, analysis.program)
    if mismatches:
        for message in mismatches:
            print(f"{name}: {message}", file=sys.stderr)
        return 1
    write_output(args.output, source)
    return 0


def _reject_constant(token: str):
    raise ValueError(f"{token} is not a JSON number")


def _error(message: str) -> int:
    print(f"gsr import: {message}", file=sys.stderr)
    return 1
