"""gsr check: parse and check programs, print diagnostics."""

from __future__ import annotations

import sys

from gsrlang.commands.common import DiagnosticPrinter, add_format_arguments, collect_files, read_error

HELP = "check .gsr programs (files or folders) and report diagnostics"
DESCRIPTION = """\
Check .gsr rubric programs before anything runs: syntax, names, ports and arity,
types and abstention, cycles, the sink and the readout. Folders are searched for
*.gsr files. Fragments (files that start with `fragment`) are checked on their own.

output: diagnostics on stdout; with --format full or concise, one summary line on
stderr, also when clean (`checked 1 file: 0 errors, 0 warnings (ok)`; -q drops it).
exit status: 0 clean (warnings allowed, unless --werror), 1 errors (an unreadable file is one), 2 gsr itself failed.

examples:
  gsr check examples/
  gsr check rubric.gsr --format sarif > gsr.sarif
  gsr check rubric.gsr --format github   # annotations in GitHub Actions"""


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help=".gsr files or folders")
    add_format_arguments(p)
    p.add_argument("--werror", action="store_true", help="treat warnings as errors (exit 1 on warnings)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")


def run(args) -> int:
    printer = DiagnosticPrinter(args.format, args.color)
    files = 0
    for path, problem in collect_files(args.paths):
        files += 1
        if problem:
            printer.add(path, None, [read_error(path, problem)])
            continue
        if (analysis := printer.analyze(path)) is not None:
            printer.add(path, analysis.text, analysis.diagnostics)
    printer.finish()
    if not args.quiet and args.format in ("full", "concise"):
        status = "ok" if printer.errors == 0 else "failed"
        print(f"checked {files} file{'s' if files != 1 else ''}: {printer.errors} error"
              f"{'s' if printer.errors != 1 else ''}, {printer.warnings} warning"
              f"{'s' if printer.warnings != 1 else ''} ({status})", file=sys.stderr)
    if printer.internal:
        return 2
    if printer.errors or (args.werror and printer.warnings):
        return 1
    return 0
