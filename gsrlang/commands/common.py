"""Helpers shared by subcommands: collecting .gsr files, reading them, printing diagnostics."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator, Sequence

from gsrlang.diagnostics import Diagnostic, error
from gsrlang.diagnostics.render import FORMATS, Sources, render_concise, render_full, render_github, render_json, render_sarif
from gsrlang.span import SourceText, Span


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
        if p.is_dir():
            found = sorted(q for q in p.rglob("*.gsr") if q.is_file())
            if not found:
                yield raw, f"no .gsr files in folder `{raw}`"
            for q in found:
                yield str(q), None
        elif p.exists():
            yield raw, None
        else:
            yield raw, f"no such file or folder: `{raw}`"


def read_error(path: str, message: str) -> Diagnostic:
    return error("GSR005", message, Span(0, 0), help=None)


class DiagnosticPrinter:
    """Accumulates (sources, diagnostics) per file and prints them in the chosen format."""

    def __init__(self, fmt: str, color: bool, version: str):
        self.fmt, self.color, self.version = fmt, color, version
        self.batches: list[tuple[Sources, Sequence[Diagnostic]]] = []
        self.errors = self.warnings = 0
        self.printed_files = 0

    def add(self, path: str, text: str | None, diagnostics: Sequence[Diagnostic]) -> None:
        sources = Sources(SourceText(path, text)) if text is not None else Sources(main_path=path)
        self.errors += sum(d.is_error for d in diagnostics)
        self.warnings += sum(not d.is_error for d in diagnostics)
        if self.fmt in ("full", "concise", "github") and diagnostics:
            render = {"full": lambda ds, s: render_full(ds, s, self.color), "concise": render_concise,
                      "github": render_github}[self.fmt]
            if self.fmt == "full" and self.printed_files:
                sys.stdout.write("\n")  # a blank line between files, as between diagnostics
            self.printed_files += 1
            sys.stdout.write(render(diagnostics, sources))
            sys.stdout.flush()
        else:
            self.batches.append((sources, diagnostics))

    def finish(self) -> None:
        if self.fmt == "json":
            sys.stdout.write(render_json(self.batches))
        elif self.fmt == "sarif":
            sys.stdout.write(render_sarif(self.batches, self.version))


def write_output(path: str | None, text: str) -> None:
    """Write a command's output to `path`, or to stdout without one; an unwritable path is a usage error."""
    if not path:
        sys.stdout.write(text)
        return
    from gsrlang.commands import UsageError

    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write `{path}`: {exc.strerror}") from exc
