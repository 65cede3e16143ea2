"""Render diagnostics for people and tools: full (rustc-style snippets), concise, json, sarif 2.1.0, github.

Lines and columns are 1-based with an exclusive end column, derived from the spans'
offsets at this edge only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Sequence

from gsrlang.files.printable import visible
from gsrlang.lang.diagnostics.codes import CODES
from gsrlang.lang.diagnostics.core import Diagnostic, Label
from gsrlang.lang.span import SourceText

FORMATS = ("full", "concise", "json", "sarif", "github")


class Sources:
    """Source texts by path, loaded on demand (imported files are read from disk when shown)."""

    def __init__(self, main: SourceText | None = None, main_path: str | None = None):
        """`main` is the checked file's text; `main_path` names it when its text cannot be shown."""
        self.main = main
        self.main_path = main.path if main is not None else main_path
        self._cache: dict[str, SourceText | None] = {}

    def get(self, path: str | None) -> SourceText | None:
        """The text to quote for `path`: the main file's, or an imported .gsr file's; never another file's
        (a diagnostic must not echo a line of `.env`)."""
        if path is None or path == self.main_path:
            return self.main
        if not str(path).endswith(".gsr"):
            return None
        if path not in self._cache:
            try:
                self._cache[path] = SourceText(path, Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                self._cache[path] = None
        return self._cache[path]

    def display(self, path: str | None) -> str:
        return (self.main_path or "<input>") if path is None else display_path(path)


def display_path(path: str) -> str:
    """A path as people should read it: relative to the working folder when it lies inside it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):
        return path


def _range(src: SourceText | None, label: Label) -> dict:
    (sl, sc), (el, ec) = ((1, 1), (1, 1)) if src is None else (src.position(label.span.start),
                                                              src.position(label.span.end))
    return {"start": {"line": sl, "column": sc}, "end": {"line": el, "column": ec}}


# ---- full --------------------------------------------------------------------------------------------
def render_full(diagnostics: Sequence[Diagnostic], sources: Sources, color: bool = False) -> str:
    def s(text: str, *codes: str) -> str:  # `text` in the SGR colours `codes`, when `color`
        return "\x1b[" + ";".join(codes) + "m" + text + "\x1b[0m" if color and codes else text

    return "\n".join(_full_one(d, sources, s) for d in diagnostics)


MAX_SNIPPET = 120  # characters of a source line shown around a label


def _full_one(d: Diagnostic, sources: Sources, s: Callable[..., str]) -> str:
    sev_color = "31" if d.is_error else "33"
    out = [s(f"{d.severity}[{d.code}]", "1", sev_color) + s(f": {d.message}", "1")]
    labels = [(d.primary, True), *[(lab, False) for lab in d.secondary]]
    # the primary label's file first, then the others; within a file, in source order
    shown = [(path, sources.get(path), sorted(((lab, primary) for lab, primary in labels if lab.path == path),
                                              key=lambda x: x[0].span.start))
             for path in dict.fromkeys(lab.path for lab, _ in labels)]
    numbered = [src.position(lab.span.start)[0] for _, src, group in shown if src for lab, _ in group]
    width = len(str(max(numbered))) if numbered else 1
    pad = " " * width
    bar = s("|", "34", "1")
    for path, src, group in shown:
        where = sources.display(path)
        first = next((lab for lab, primary in group if primary), group[0][0])
        arrow = "-->" if any(primary for _, primary in group) else ":::"
        if src is None:
            out.append(f"{pad}{s(arrow, '34', '1')} {where}")
            out.extend(f"{pad} {s('=', '34', '1')} {lab.message}" for lab, _ in group if lab.message)
            continue
        line, col = src.position(first.span.start)
        out.append(f"{pad}{s(arrow, '34', '1')} {where}:{line}:{col}")
        out.append(f"{pad} {bar}")
        by_line: dict[int, list] = {}
        for lab, primary in group:
            by_line.setdefault(src.position(lab.span.start)[0], []).append((lab, primary))
        previous = None
        for line_no in sorted(by_line):
            if previous is not None and line_no > previous + 1:
                out.append(s("...", "34", "1"))
            previous = line_no
            text = visible(src.line_text(line_no - 1).expandtabs(1))  # no escape or bidi control reaches the terminal
            marks = []
            for lab, primary in by_line[line_no]:
                c = src.position(lab.span.start)[1]
                end_line, end_col = src.position(lab.span.end)
                stop = end_col if end_line == line_no else len(text) + 1
                marks.append((c, max(1, stop - c), lab, primary))
            lo = max(0, min(m[0] for m in marks) - 1 - 40) if len(text) > MAX_SNIPPET else 0
            shift = 0
            if lo:
                text, shift = "..." + text[lo:], lo - 3
            if len(text) > MAX_SNIPPET:
                text = text[:MAX_SNIPPET] + "..."
            out.append(f"{s(str(line_no).rjust(width), '34', '1')} {bar} {text}")
            for c, n, lab, primary in marks:
                mark = ("^" if primary else "-") * min(n, MAX_SNIPPET)
                underline = " " * (c - 1 - shift) + s(mark + (" " + lab.message if lab.message else ""),
                                                      "1", sev_color if primary else "34")
                out.append(f"{pad} {bar} {underline}")
    out.extend(f"{pad} {s('=', '34', '1')} {s('note', '1')}: {note}" for note in d.notes)
    if d.help:
        out.append(f"{pad} {s('=', '34', '1')} {s('help', '1')}: {d.help}")
    return "\n".join(out) + "\n"


# ---- concise, json, sarif, github -----------------------------------------------------------------------
def render_concise(diagnostics: Sequence[Diagnostic], sources: Sources) -> str:
    lines = []
    for d in diagnostics:
        r = _range(sources.get(d.primary.path), d.primary)["start"]
        lines.append(f"{sources.display(d.primary.path)}:{r['line']}:{r['column']}: {d.code} {d.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def diagnostic_json(d: Diagnostic, sources: Sources) -> dict:
    def label(lab: Label) -> dict:
        return {"path": sources.display(lab.path), "range": _range(sources.get(lab.path), lab),
                "offsets": [lab.span.start, lab.span.end], "message": lab.message}

    primary = label(d.primary)
    return {
        "code": d.code,
        "severity": str(d.severity),
        "message": d.message,
        "path": primary["path"],
        "range": primary["range"],
        "offsets": primary["offsets"],
        "label": d.primary.message,
        "related": [label(lab) for lab in d.secondary],
        "notes": list(d.notes),
        "help": d.help,
        "fixes": [{"title": f.title, "offsets": [f.span.start, f.span.end], "replacement": f.replacement,
                   "applicability": f.applicability}
                  for f in d.fixes],
    }


INTERNAL_HELP = "this is a bug in gsr; rerun with GSR_DEBUG=1 for a traceback and report it"


def internal_error_json(path: str | None, message: str) -> dict:
    """The JSON form's entry for a failure of gsr itself (not a diagnostic: no code, no range)."""
    return {"code": None, "severity": "internal-error", "message": message, "path": path, "range": None,
            "offsets": None, "label": "", "related": [], "notes": [], "help": INTERNAL_HELP, "fixes": []}


def render_json(batches: Iterable[tuple[Sources, Sequence[Diagnostic]]],
                internal: Sequence[tuple[str | None, str]] = ()) -> str:
    """The diagnostics as a JSON array; `internal` ((path, message) of each failure of gsr itself) adds
    entries of severity `internal-error`, so a failing run still prints a valid document."""
    import json  # here, not at the top: the default format needs no JSON, and `gsr check` starts faster

    items = [diagnostic_json(d, sources) for sources, ds in batches for d in ds]
    items += [internal_error_json(path, message) for path, message in internal]
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def render_sarif(batches: Iterable[tuple[Sources, Sequence[Diagnostic]]], version: str,
                 internal: Sequence[tuple[str | None, str]] = ()) -> str:
    """A SARIF 2.1.0 log; failures of gsr itself (`internal`) are tool execution notifications of an
    invocation that did not succeed, which is where SARIF consumers look for them."""
    import json

    results, used = [], set()
    for sources, ds in batches:
        for d in ds:
            used.add(d.code)

            def location(lab: Label, message: str | None = None):
                r = _range(sources.get(lab.path), lab)
                loc = {"physicalLocation": {
                    "artifactLocation": {"uri": Path(sources.display(lab.path)).as_posix()},
                    "region": {"startLine": r["start"]["line"], "startColumn": r["start"]["column"],
                               "endLine": r["end"]["line"], "endColumn": r["end"]["column"]}}}
                if message:
                    loc["message"] = {"text": message}
                return loc

            text = d.message + (f"\nhelp: {d.help}" if d.help else "")
            results.append({
                "ruleId": d.code,
                "level": "error" if d.is_error else "warning",
                "message": {"text": text},
                "locations": [location(d.primary)],
                "relatedLocations": [dict(location(lab, lab.message or "related"), id=i)
                                     for i, lab in enumerate(d.secondary)],
            })
    rules = [{"id": c, "name": CODES[c].title.replace(" ", "-") if c in CODES else c,
              "shortDescription": {"text": CODES[c].title if c in CODES else c},
              "helpUri": f"https://gsrlang.invalid/explain/{c}",
              "defaultConfiguration": {"level": "error" if CODES.get(c) is None or CODES[c].severity == "error"
                                       else "warning"}} for c in sorted(used)]
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "gsr", "version": version, "informationUri": "https://gsrlang.invalid",
                                      "rules": rules}},
                  "columnKind": "unicodeCodePoints",
                  "results": results}],
    }
    if internal:
        doc["runs"][0]["invocations"] = [{"executionSuccessful": False, "toolExecutionNotifications": [
            dict({"level": "error", "message": {"text": f"{message}\n{INTERNAL_HELP}"},
                  "descriptor": {"id": "internal-error"}},
                 **({"locations": [{"physicalLocation": {"artifactLocation": {"uri": Path(path).as_posix()}}}]}
                    if path else {}))
            for path, message in internal]}]
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(diagnostics: Sequence[Diagnostic], sources: Sources) -> str:
    lines = []
    for d in diagnostics:
        r = _range(sources.get(d.primary.path), d.primary)
        kind = "error" if d.is_error else "warning"
        props = (f"file={_gh_escape(sources.display(d.primary.path), True)},line={r['start']['line']},"
                 f"col={r['start']['column']},endLine={r['end']['line']},endColumn={r['end']['column']},"
                 f"title={d.code}")
        msg = d.message + (f" (help: {d.help})" if d.help else "")
        lines.append(f"::{kind} {props}::{_gh_escape(msg)}")
    return "\n".join(lines) + ("\n" if lines else "")
