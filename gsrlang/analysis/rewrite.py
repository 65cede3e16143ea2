"""Writing a tuned program: the source with its tuned numbers replaced, in canonical layout, under a provenance header.

Only the numbers change (each keeps or gains its range, `0.412 in 0..1`, so the
file can be tuned again); every comment and name stays. The header is a block
of comment lines that start with `# gsr tune: `, so `gsr check` reads the file
unchanged, and a file tuned again gets a new header instead of a second one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

from gsrlang.lang.span import source_lines
from gsrlang.lang.syntax.formatter import format_source

__all__ = ["HEADER_PREFIX", "file_hash", "number_text", "tuned_name", "tuned_source"]

HEADER_PREFIX = "# gsr tune: "


def file_hash(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def number_text(x: float, digits: int = 4) -> str:
    """A tuned number as written: rounded to `digits` decimals, without trailing zeros."""
    v = round(float(x), digits) + 0.0  # no -0.0
    return str(int(v)) if v.is_integer() else repr(v)


def tuned_name(name: str) -> str:
    """A tuned program's rubric name: the program's without a `_tunable` or `_tuned` suffix, with `_tuned`, so
    that `gsr compare` and `gsr metrics` tell the tuned program from the untuned one by name, not only by hash."""
    for suffix in ("_tunable", "_tuned"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)] + "_tuned"
    return name + "_tuned"


def _name_edit(text: str, name: str):
    """(span of the rubric's name in `text`, `name`), or None for a file without a rubric header."""
    from gsrlang.lang.syntax.parser import parse

    header = next((i for i in getattr(parse(text).module, "items", ()) if type(i).__name__ == "Header"), None)
    return None if header is None or header.kind != "rubric" or header.name.span is None else (header.name.span, name)


def tuned_source(text: str, knobs: Sequence, values: Sequence[float], header: Sequence[str],
                 name: str | None = None) -> str:
    """The program text with each knob's number replaced by its value (ranges kept), formatted, under `header`;
    with `name`, the rubric renamed."""
    edits = [(k.span, f"{number_text(v)} in {number_text(k.lo)}..{number_text(k.hi)}")
             for k, v in zip(knobs, values) if k.span is not None]
    rename = _name_edit(text, name) if name else None
    if rename is not None:
        edits.append(rename)
    for span, replacement in sorted(edits, key=lambda e: e[0].start, reverse=True):
        text = text[:span.start] + replacement + text[span.end:]
    lines = source_lines(text, keepends=True)  # as the lexer ends a comment: at "\n" only
    while lines and lines[0].startswith(HEADER_PREFIX):
        lines.pop(0)
    body = format_source("".join(lines))
    return "".join(f"{HEADER_PREFIX}{_one_line(line)}".rstrip() + "\n" for line in header) + body


def _one_line(text: str) -> str:
    """A header line that stays one comment: a newline in it (a file name may hold one) is written escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n") if "\n" in text else text
