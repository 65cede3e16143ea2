"""gsr fmt: rewrite .gsr files in the canonical layout (see gsrlang/lang/syntax/formatter.py)."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from gsrlang.commands.common import DiagnosticPrinter, collect_files, read_error
from gsrlang.files.safeio import write_atomic

HELP = "format .gsr files (files or folders) in the canonical layout"
DESCRIPTION = """\
Rewrite .gsr files in place in the one canonical layout: two-space indentation,
calls broken one argument per line when longer than 100 columns, comments kept
where they are. Declarations keep their order. Folders are searched for *.gsr
files; `-` reads standard input and writes the result to standard output.
A file with syntax errors is never rewritten: its diagnostics are printed and
the exit status is 1.

Diagnostics and the summary go to standard error; file lists, diffs and
formatted text to standard output.

Every result is parsed again and must give the same syntax tree as the input
(like black's --safe); if it does not, the file is left as it is and the exit
status is 2.

exit status: 0 done (or nothing to change), 1 a file has syntax errors or, with
--check, would be reformatted, 2 the tool failed or was used wrongly.

examples:
  gsr fmt examples/                 # rewrite every .gsr file under examples/
  gsr fmt --check .                 # CI: list the files that are not formatted
  gsr fmt --diff rubric.gsr         # show what would change
  cat rubric.gsr | gsr fmt -        # filter"""


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help=".gsr files or folders, or - for standard input")
    p.add_argument("--check", action="store_true",
                   help="write nothing; list the files that would change and exit 1 if there are any")
    p.add_argument("--diff", action="store_true", help="write nothing; print a unified diff of the changes")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the diagnostics (auto: when standard error is a terminal)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")


def run(args) -> int:
    from gsrlang.commands import UsageError

    if "-" in args.paths and len(args.paths) > 1:
        raise UsageError("`-` (standard input) cannot be combined with other paths")
    printer = DiagnosticPrinter("full", args.color, to_stderr=True)
    if args.paths == ["-"]:
        return _run_stdin(args, printer)
    changed = unchanged = failed = unsafe = 0
    for path, problem in collect_files(args.paths):
        if problem:
            printer.add(path, None, [read_error(path, problem)])
            failed += 1
            continue
        try:
            outcome = _format_file(path, args, printer)
        except _Unsafe:
            unsafe += 1
            continue
        if outcome is None:
            failed += 1
        elif outcome:
            changed += 1
        else:
            unchanged += 1
    if not args.quiet:
        _summary(args, changed, unchanged, failed + unsafe)
    if unsafe:
        return 2
    if failed or (args.check and changed):
        return 1
    return 0


class _Unsafe(Exception):
    """The formatted text would not parse to the same program: a formatter bug, never written out."""


def _formatted(path: str, data: bytes, printer) -> tuple[str, str] | None:
    """(the text, its canonical layout), or None after reporting why it cannot be formatted. The layout is
    checked like black's --safe: it must parse back to the same syntax tree (else _Unsafe)."""
    from gsrlang.lang.syntax.formatter import format_module
    from gsrlang.lang.syntax.parser import decode_source, parse

    text, problem = decode_source(data)
    if problem:
        printer.add(path, None, [problem])
        return None
    result = parse(text)
    if result.diagnostics:
        printer.add(path, text, result.diagnostics)
        return None
    formatted = format_module(result.module, text)
    again = parse(formatted)
    if again.diagnostics or again.module != result.module:
        print(f"gsr fmt: internal error: the formatted `{path}` would not mean the same program; it was left "
              "as it is. This is a bug in gsr: please report it with the file.", file=sys.stderr)
        raise _Unsafe(path)
    return text, formatted


def _format_file(path: str, args, printer) -> bool | None:
    """True when the file changes (or would), False when it is already formatted, None when it cannot be."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        printer.add(path, None, [read_error(path, f"cannot read `{path}`: {exc.strerror}")])
        return None
    if (done := _formatted(path, data, printer)) is None:
        return None
    formatted = done[1]
    original = data.decode("utf-8")  # the file as it is (decode_source blanks out a byte-order mark)
    if formatted == original:
        return False
    if args.diff:
        sys.stdout.write(_diff(original, formatted, path))
    if args.check:
        print(path)
    if not (args.check or args.diff):
        try:
            write_atomic(path, formatted, newline="")
        except OSError as exc:
            printer.add(path, None, [read_error(path, f"cannot write `{path}`: {exc.strerror}")])
            return None
    return True


def _run_stdin(args, printer) -> int:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8")
    try:
        done = _formatted("<stdin>", data, printer)
    except _Unsafe:
        return 2
    if done is None:
        return 1
    text, formatted = done
    if args.diff:
        sys.stdout.write(_diff(text, formatted, "<stdin>"))
    elif not args.check:
        sys.stdout.write(formatted)
    return 1 if args.check and formatted != text else 0


def _diff(before: str, after: str, path: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _summary(args, changed: int, unchanged: int, failed: int) -> None:
    def n(k: int, what: str) -> str:
        return f"{k} file{'s' if k != 1 else ''} {what}"

    verb = "would be reformatted" if (args.check or args.diff) else "reformatted"
    parts = [n(k, what) for k, what in ((changed, verb), (unchanged, "already formatted"),
                                         (failed, "with errors (not formatted)")) if k]
    print(", ".join(parts) if parts else "no files", file=sys.stderr)
