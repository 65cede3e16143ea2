"""Render diagnostics for people and tools: full (rustc-style snippets), concise, json, sarif 2.1.0, github.

Lines and columns are 1-based with an exclusive end column, derived from the spans'
offsets at this edge only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable, Sequence

from gsrlang.diagnostics.codes import CODES
from gsrlang.diagnostics.core import Diagnostic, Label
from gsrlang.span import SourceText

FORMATS = ("full", "concise", "json", "sarif", "github")


class Sources:
    """Source texts by path, loaded on demand (imported files are read from disk when shown)."""

    def __init__(self, main: SourceText | None = None):
        self.main = main
        self._cache: dict[str, SourceText | None] = {}

    def get(self, path: str | None) -> SourceText | None:
        if path is None or (self.main is not None and path == self.main.path):
            return self.main
        if path not in self._cache:
            try:
                self._cache[path] = SourceText(path, Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                self._cache[path] = None
        return self._cache[path]

    def display(self, path: str | None) -> str:
        return (self.main.path if self.main else "<input>") if path is None else path


def _range(src: SourceText | None, label: Label) -> dict:
    if src is None:
        return {"start": {"line": 1, "column": 1}, "end": {"line": 1, "column": 1}}
    sl, sc = src.position(label.span.start)
    el, ec = src.position(label.span.end)
    return {"start": {"line": sl, "column": sc}, "end": {"line": el, "column": ec}}


# ---- full --------------------------------------------------------------------------------------------
class _Style:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, *codes: str) -> str:
        if not self.color or not codes:
            return text
        return "\x1b[" + ";".join(codes) + "m" + text + "\x1b[0m"


def render_full(diagnostics: Sequence[Diagnostic], sources: Sources, color: bool = False) -> str:
    s = _Style(color)
    return "\n".join(_full_one(d, sources, s) for d in diagnostics)


def _full_one(d: Diagnostic, sources: Sources, s: _Style) -> str:
    sev_color = "31" if d.is_error else "33"
    out = [s(f"{d.severity}[{d.code}]", "1", sev_color) + s(f": {d.message}", "1")]
    labels = [(d.primary, True), *[(lab, False) for lab in d.secondary]]
    shown = [(lab, primary, sources.get(lab.path if lab.path != sources.display(None) else None))
             for lab, primary in labels]
    numbered = [src.position(lab.span.start)[0] for lab, _, src in shown if src is not None]
    width = len(str(max(numbered))) if numbered else 1
    pad = " " * width
    # group labels by file, then by line, so a line is printed once with all its underlines
    last_path = object()
    i = 0
    while i < len(shown):
        lab, primary, src = shown[i]
        where = sources.display(lab.path)
        if src is None:
            out.append(f"{pad}{s('-->', '34', '1')} {where}")
            if lab.message:
                out.append(f"{pad} {s('=', '34', '1')} {lab.message}")
            i += 1
            continue
        line, col = src.position(lab.span.start)
        if lab.path != last_path:
            arrow = "-->" if primary else ":::"
            out.append(f"{pad}{s(arrow, '34', '1')} {where}:{line}:{col}")
            out.append(f"{pad} {s('|', '34', '1')}")
            last_path = lab.path
        same = [shown[i]]
        while i + 1 < len(shown) and shown[i + 1][0].path == lab.path and shown[i + 1][2] is not None \
                and shown[i + 1][2].position(shown[i + 1][0].span.start)[0] == line:
            i += 1
            same.append(shown[i])
        i += 1
        text = src.line_text(line - 1)
        out.append(f"{s(str(line).rjust(width), '34', '1')} {s('|', '34', '1')} {text.expandtabs(1)}")
        for lab2, primary2, _ in sorted(same, key=lambda x: -x[0].span.start):
            c2 = src.position(lab2.span.start)[1]
            end_line, end_col = src.position(lab2.span.end)
            stop = end_col if end_line == line else len(text) + 1
            mark = ("^" if primary2 else "-") * max(1, stop - c2)
            underline = " " * (c2 - 1) + s(mark + (" " + lab2.message if lab2.message else ""),
                                            "1", sev_color if primary2 else "34")
            out.append(f"{pad} {s('|', '34', '1')} {underline}")
    for note in d.notes:
        out.append(f"{pad} {s('=', '34', '1')} {s('note', '1')}: {note}")
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

    return {
        "code": d.code,
        "severity": str(d.severity),
        "message": d.message,
        **label(d.primary),
        "label": d.primary.message,
        "related": [label(lab) for lab in d.secondary],
        "notes": list(d.notes),
        "help": d.help,
        "fixes": [{"title": f.title, "offsets": [f.span.start, f.span.end], "replacement": f.replacement}
                  for f in d.fixes],
    }


def render_json(batches: Iterable[tuple[Sources, Sequence[Diagnostic]]]) -> str:
    items = [diagnostic_json(d, sources) for sources, ds in batches for d in ds]
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def render_sarif(batches: Iterable[tuple[Sources, Sequence[Diagnostic]]], version: str) -> str:
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
                  "results": results}],
    }
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


Renderer = Callable[[Sequence[Diagnostic], Sources], str]
