"""Helpers shared by subcommands: collecting .gsr files, reading them, printing diagnostics."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator, Sequence

from gsrlang import __version__
from gsrlang.lang.diagnostics import Diagnostic, error
from gsrlang.lang.diagnostics.render import (FORMATS, INTERNAL_HELP, Sources, render_concise, render_full,
                                             render_github, render_json, render_sarif)
from gsrlang.lang.span import SourceText, Span


def add_format_arguments(parser) -> None:
    parser.add_argument("--format", choices=FORMATS, default="full",
                        help="diagnostics format: full (snippets, default), concise (path:line:col: CODE message), "
                             "json, sarif (2.1.0) or github (workflow commands)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the full format (auto: when writing to a terminal)")


def use_color(choice: str, stream=None) -> bool:
    stream = sys.stdout if stream is None else stream
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def collect_files(paths: Sequence[str]) -> Iterator[tuple[str, str | None]]:
    """(path, problem) for each .gsr file named or found under a named folder; problem for a missing path."""
    for raw in paths:
        p = Path(raw)
        try:
            p.stat()
        except OSError as exc:  # no such path, a name too long, a loop of links, no permission
            yield raw, (f"no such file or folder: `{raw}`" if isinstance(exc, FileNotFoundError)
                        else f"cannot read `{raw}`: {exc.strerror}")
            continue
        if p.is_dir():
            if not (found := sorted(q for q in p.rglob("*.gsr") if q.is_file())):
                yield raw, f"no .gsr files in folder `{raw}`"
            for q in found:
                yield str(q), None
        else:
            yield raw, None


def read_error(path: str, message: str) -> Diagnostic:
    return error("GSR005", message, Span(0, 0), help=None)


class DiagnosticPrinter:
    """Accumulates (sources, diagnostics) per file and prints them in the chosen format, on standard output
    or (`to_stderr`, for a command whose standard output is its result) standard error; `color` is the
    --color choice (auto, always, never), for that stream."""

    def __init__(self, fmt: str, color: str, to_stderr: bool = False):
        self.fmt, self.to_stderr = fmt, to_stderr
        self.color = use_color(color, sys.stderr if to_stderr else None)
        self.batches: list[tuple[Sources, Sequence[Diagnostic]]] = []
        self.errors = self.warnings = self.printed_files = 0
        self.internal: list[tuple[str | None, str]] = []  # (path, message): failures of gsr itself

    def analyze(self, path: str):
        """`analyze_file(path)`, reporting what goes wrong as this printer's output (None then): a file that
        cannot be read as a diagnostic, a failure of gsr itself as an internal error, so that the JSON and
        SARIF documents stay valid and the other files are still checked."""
        from gsrlang.lang.check.driver import analyze_file

        try:
            return analyze_file(path)
        except OSError as exc:
            self.add(path, None, [read_error(path, f"cannot read `{path}`: {exc.strerror}")])
        except Exception as exc:  # a bug in gsr, never a user's mistake
            if os.environ.get("GSR_DEBUG"):
                raise
            self.add_internal(path, exc)
        return None

    def add_internal(self, path: str | None, exc: BaseException) -> None:
        message = f"internal error: {type(exc).__name__}: {exc}"
        self.internal.append((path, message))
        if self.fmt not in ("json", "sarif"):
            print(f"gsr: {path}: {message}\n{INTERNAL_HELP}", file=sys.stderr)

    @property
    def out(self):
        return sys.stderr if self.to_stderr else sys.stdout

    def add(self, path: str, text: str | None, diagnostics: Sequence[Diagnostic]) -> None:
        sources = Sources(SourceText(path, text)) if text is not None else Sources(main_path=path)
        self.errors += sum(d.is_error for d in diagnostics)
        self.warnings += sum(not d.is_error for d in diagnostics)
        if self.fmt in ("full", "concise", "github") and diagnostics:
            render = {"full": lambda ds, s: render_full(ds, s, self.color), "concise": render_concise,
                      "github": render_github}[self.fmt]
            if self.fmt == "full" and self.printed_files:
                self.out.write("\n")  # a blank line between files, as between diagnostics
            self.printed_files += 1
            self.out.write(render(diagnostics, sources))
            self.out.flush()
        else:
            self.batches.append((sources, diagnostics))

    def finish(self) -> None:
        if self.fmt not in ("json", "sarif"):
            return
        render = (lambda batches: render_json(batches, self.internal)) if self.fmt == "json" else \
            (lambda batches: render_sarif(batches, __version__, self.internal))
        try:
            text = render(self.batches)
        except Exception as exc:  # still a valid document: the failure, without the diagnostics it stopped
            if os.environ.get("GSR_DEBUG"):
                raise
            self.internal.append((None, f"internal error while writing the report: {type(exc).__name__}: {exc}"))
            text = render([])
        self.out.write(text)


def write_output(path: str | None, text: str) -> None:
    """Write a command's output to `path`, or to stdout without one; an unwritable path is a usage error."""
    if not path:
        sys.stdout.write(text)
        return
    from gsrlang.commands import UsageError
    from gsrlang.files.safeio import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write `{path}`: {exc.strerror}") from exc


SEED_MAX = 2**32 - 1  # numpy's legacy generators and scipy's resampling take seeds below 2**32


def seed_value(text: str) -> int:
    """`--seed N` of every command that resamples or splits (argparse type): a whole number, 0 to 2**32-1."""
    import argparse

    try:
        value = int(text.strip().replace("_", ""), 10)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {SEED_MAX}, not `{text}`")
    return value


def add_seed_argument(parser, what: str = "bootstrap seed") -> None:
    """The one `--seed` option of metrics, compare, ablate, report and tune (checked by `seed_value`)."""
    parser.add_argument("--seed", type=seed_value, default=0, metavar="N",
                        help=f"{what}: a whole number from 0 to {SEED_MAX} (default: 0)")


def bootstrap_count(text: str) -> int:
    """`--bootstrap N` (argparse type): a whole number of resamples, 0 or more."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def add_bootstrap_argument(parser, what: str = "", default: int = 1000) -> None:
    """The one `--bootstrap N` option of every command that prints confidence intervals (`bootstrap_count`)."""
    parser.add_argument("--bootstrap", type=bootstrap_count, default=default, metavar="N",
                        help=f"bootstrap resamples{what} (default: {default})")


def warn_repeated_ids(command: str, ids, source: str, policy: str) -> None:
    """The one warning (on stderr) of every command that reads items by id (compare, ablate, tune) when some id
    repeats; `policy` says what the command did with the repeats. Nothing when every id is distinct."""
    seen: set = set()
    repeats: list = []
    n = 0
    for item_id in ids:
        if item_id is None:
            continue
        if item_id in seen:
            n += 1
            if len(repeats) < 3 and item_id not in repeats:
                repeats.append(item_id)
        else:
            seen.add(item_id)
    if not n:
        return
    from gsrlang.files.printable import printable

    first = ", ".join(printable(repr(i)) for i in repeats)
    print(f"{command}: warning: {source}: {n} item{'s repeat' if n != 1 else ' repeats'} an id an earlier item has "
          f"(first: {first}): {policy}; a file run twice, or joined with another, counts its items twice",
          file=sys.stderr)
