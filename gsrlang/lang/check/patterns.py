"""Regular expressions of `rule.regex`: RE2 (google-re2), compiled once for the checker and the rule judge.

RE2 matches in time linear in the text and never backtracks, so no pattern can stall
a run (`^(a+)+$` took 36 s on 31 characters with Python's `re`). It refuses what it
cannot match that way (backreferences, lookaround, `\\Z`, repetition counts over
1,000, `(?x)`): the checker reports such a pattern as GSR305 before anything runs.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["PatternError", "compile_pattern", "re2_help"]


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message says why, as RE2 does."""


@lru_cache(maxsize=256)
def compile_pattern(pattern: str, ignore_case: bool = False):
    """The RE2 program for a `rule.regex` pattern (cached), or PatternError."""
    import re2

    options = re2.Options()
    options.log_errors = False  # the error is ours to report, not RE2's to print on stderr
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        raise PatternError(detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)) from None


def re2_help(pattern: str) -> str | None:
    """For a pattern Python's `re` reads but RE2 refuses: why (it is valid regex syntax, just not RE2's)."""
    import re

    try:
        re.compile(pattern)
    except re.error:
        return None
    return ("`rule.regex` uses RE2 syntax, which matches in time linear in the response: no backreferences, no "
            "lookaround, repetition counts up to 1,000, `\\z` (not `\\Z`) for the end of the text")
