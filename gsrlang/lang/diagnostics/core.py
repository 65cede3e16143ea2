"""Diagnostics are data: a code, a severity, a one-line message, labelled spans, help and fixes.

Checker passes return them and never raise on a user's mistake; renderers (see
`render.py`) turn them into text for people and tools.
"""

from __future__ import annotations

import enum

import attrs

from gsrlang.lang import records
from gsrlang.lang.span import Span


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:
        return self.value


@records.frozen
class Label:
    """A span with a short message. `path` is None for the file being checked."""

    span: Span
    message: str = ""
    path: str | None = None


APPLICABILITY = ("safe", "unsafe")


@records.frozen
class Fix:
    """A machine-applicable edit: replace `span` (in the primary file) by `replacement`.

    applicability (as ruff has it): "safe" when applying it blindly keeps what the author
    meant (the one conversion the types allow, such as `normalize(...)` of a Bool), "unsafe"
    when it is a guess a person should confirm (a renamed typo, a chosen threshold or
    default). Editors offer both; a `gsr fix` without `--unsafe` applies only safe ones.
    """

    title: str
    span: Span
    replacement: str
    applicability: str = attrs.field(default="unsafe", validator=attrs.validators.in_(APPLICABILITY))

    @property
    def safe(self) -> bool:
        return self.applicability == "safe"


@records.frozen
class Diagnostic:
    code: str
    severity: Severity
    message: str
    primary: Label
    secondary: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None
    fixes: tuple[Fix, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    @property
    def span(self) -> Span:
        return self.primary.span


def error(code: str, message: str, span: Span, label: str = "", *, path: str | None = None,
          secondary=(), notes=(), help: str | None = None, fixes=()) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, message, Label(span, label, path), tuple(secondary),
                      tuple(notes), help, tuple(fixes))


def warning(code: str, message: str, span: Span, label: str = "", *, path: str | None = None,
            secondary=(), notes=(), help: str | None = None, fixes=()) -> Diagnostic:
    return Diagnostic(code, Severity.WARNING, message, Label(span, label, path), tuple(secondary),
                      tuple(notes), help, tuple(fixes))


def has_errors(diagnostics) -> bool:
    return any(d.is_error for d in diagnostics)


def sort_key(d: Diagnostic):
    return (d.primary.path or "", d.primary.span.start, d.code)
