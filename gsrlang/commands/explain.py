"""gsr explain: the long explanation of a diagnostic code, with a wrong and a right example."""

from __future__ import annotations

import difflib
import sys

HELP = "explain a diagnostic code (e.g. GSR301), or list every code"
DESCRIPTION = """\
Print the long explanation of a diagnostic code: what the rule is, why it exists,
a program that breaks it and the fixed program. Codes are case-insensitive, and the
`GSR` prefix may be left out.

examples:
  gsr explain GSR301
  gsr explain gsr302
  gsr explain --list"""


def add_arguments(p) -> None:
    p.add_argument("code", nargs="?", metavar="CODE", help="a diagnostic code, e.g. GSR301")
    p.add_argument("--list", action="store_true", help="list every code with its severity and title")


def run(args) -> int:
    from gsrlang.commands import UsageError
    from gsrlang.diagnostics.codes import ALL_CODES as CODES
    from gsrlang.diagnostics.explanations import explain

    if args.list:
        if args.code:
            raise UsageError("give a CODE or --list, not both")
        width = max(len(info.severity) for info in CODES.values())
        for code, info in CODES.items():
            print(f"{code}  {info.severity.ljust(width)}  {info.title}")
        return 0
    if not args.code:
        raise UsageError("give a diagnostic code (e.g. `gsr explain GSR301`), or --list for every code")
    code = _normalize(args.code, CODES)
    text = explain(code) if code else None
    if text is None:
        raise UsageError(f"unknown diagnostic code `{args.code}`" + _suggestion(args.code, CODES)
                         + "\nrun `gsr explain --list` to see every code")
    sys.stdout.write(text)
    return 0


def _normalize(raw: str, codes) -> str | None:
    """GSR301, gsr301, 301 and ` GSR301 ` all name GSR301; so does an exact title ("type mismatch")."""
    text = raw.strip()
    key = text.upper()
    if key.isdigit():
        key = "GSR" + key.zfill(3)
    if key in codes:
        return key
    by_title = {info.title.lower(): code for code, info in codes.items()}
    return by_title.get(text.lower())


def _suggestion(raw: str, codes) -> str:
    key = raw.strip().upper()
    if key.isdigit():
        key = "GSR" + key
    close = difflib.get_close_matches(key, list(codes), n=3, cutoff=0.6)
    if not close:
        titles = {info.title: code for code, info in codes.items()}
        close = [titles[t] for t in difflib.get_close_matches(raw.strip().lower(), list(titles), n=3, cutoff=0.5)]
    if not close:
        return ""
    shown = [f"`{c}` ({codes[c].title})" for c in close]
    return "; did you mean " + (shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]) + "?"
