"""gsr explain: the long explanation of a diagnostic code (with a wrong and a right example), or
the signature, documentation and example of an operator, judge kind, rule or enum."""

from __future__ import annotations

import difflib
import sys
import textwrap
from pathlib import Path

HELP = "explain a diagnostic code (e.g. GSR301), an operator or a judge kind, or list every code"
DESCRIPTION = """\
Print the long explanation of a diagnostic code: what the rule is, why it exists,
a program that breaks it and the fixed program. Codes are case-insensitive, and the
`GSR` prefix may be left out. Given the name of an operator (cap), a judge kind
(human), a rule (rule.word_count) or an enum (Abstain), print its signature, its
documentation and an example, as declared in the stdlib.

output: the explanation on standard output; an unknown code or name is one line on standard error,
with the nearest ones.
exit status: 0 explained (or listed); 2 an unknown code or name.

examples:
  gsr explain GSR301
  gsr explain gsr302
  gsr explain cap
  gsr explain human
  gsr explain --list"""


def add_arguments(p) -> None:
    p.add_argument("code", nargs="?", metavar="CODE|NAME",
                   help="a diagnostic code (GSR301), or an operator, judge kind, rule or enum name (cap, human)")
    p.add_argument("--list", action="store_true", help="list every code with its severity and title")


def run(args) -> int:
    from gsrlang.commands import UsageError
    from gsrlang.lang.diagnostics.codes import ALL_CODES as CODES
    from gsrlang.lang.diagnostics.explanations import explain

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
        from gsrlang.lang.catalog import default_catalog

        catalog = default_catalog()
        if (text := explain_name(args.code.strip(), catalog)) is None:
            raw = args.code.strip()
            if raw.upper().startswith("GSR") or raw.isdigit():
                problem = f"unknown diagnostic code `{raw}`" + _suggestion(raw, CODES)
            else:
                problem = f"unknown diagnostic code `{raw}`, and no operator, judge kind, rule or enum is named so" \
                    + (_name_suggestion(raw, catalog) or _suggestion(raw, CODES))
            raise UsageError(problem + "\nrun `gsr explain --list` to see every code")
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
    return {info.title.lower(): code for code, info in codes.items()}.get(text.lower())


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


def _named(catalog) -> dict:
    """Every name `gsr explain` knows in the catalogue -> (what it is, its signature object)."""
    from gsrlang.lang.check.judgekinds import judge_kinds

    return {**{e.name: ("enum", e) for e in catalog.enums.values()},
            **{f"rule.{r.name}": ("rule", r) for r in catalog.rules.values()},
            **{k.name: ("judge kind", k.sig) for k in judge_kinds(catalog).values()},
            **{op.name: (f"{op.kind} operator", op) for op in catalog.operators.values()}}


def explain_name(name: str, catalog) -> str | None:
    """The signature, documentation and example of a catalogue name; None when it names nothing."""
    named = _named(catalog)
    found = named.get(name) or (named.get(f"rule.{name}") if name in catalog.rules else None)
    if found is None:
        return None
    what, sig = found
    where = Path(sig.path).name if getattr(sig, "path", None) else "stdlib"
    if what == "enum":
        head = f"enum {sig.name} {{ {', '.join(sig.members)} }}"
        body, example = sig.doc, None
    else:
        head, body, example = sig.signature(), sig.description, sig.example
    title = f"{name}: {what} (stdlib/{where})" if what != "enum" else f"{name}: enum (the values of a policy parameter)"
    out = [title, "", "    " + head, ""]
    if body:
        out += [textwrap.fill(p.replace("\n", " "), 88) for p in body.split("\n\n")] + [""]
    if example:
        out += ["Example:", "", "    " + example, ""]
    return "\n".join(out)


def _name_suggestion(raw: str, catalog) -> str:
    close = difflib.get_close_matches(raw.strip(), list(_named(catalog)), n=1, cutoff=0.7)
    return f"; did you mean `{close[0]}`?" if close else ""
