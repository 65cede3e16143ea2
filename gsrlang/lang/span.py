"""Positions in source text.

One position type is used everywhere: a `Span` of 0-based character offsets into
the source (end exclusive). Lines and columns are derived only at the edges: 1-based
for people and the CLI, the client's encoding for editors (see `SourceText`).
"""

from __future__ import annotations

import bisect

import attrs

from gsrlang.lang import records


@records.frozen(order=True)
class Span:
    start: int
    end: int

    def __attrs_post_init__(self):
        if self.end < self.start:
            raise ValueError(f"span end {self.end} before start {self.start}")

    def cover(self, other: "Span") -> "Span":
        return Span(min(self.start, other.start), max(self.end, other.end))


@records.frozen
class SourceText:
    """A source file's text with a line index for converting offsets to positions."""

    path: str
    text: str
    _line_starts: tuple[int, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self):
        starts = [0]
        find = self.text.find
        pos = find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        object.__setattr__(self, "_line_starts", tuple(starts))

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def line_col(self, offset: int) -> tuple[int, int]:
        """0-based line and 0-based column (in characters) of an offset."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line, offset - self._line_starts[line]

    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and column, as printed for people."""
        line, col = self.line_col(offset)
        return line + 1, col + 1

    def line_text(self, line: int) -> str:
        """The text of a 0-based line, without its newline."""
        start = self._line_starts[line]
        end = self._line_starts[line + 1] - 1 if line + 1 < len(self._line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r")

    def offset(self, line: int, col: int) -> int:
        """Offset of a 0-based line and character column (clamped to the text)."""
        if line >= len(self._line_starts):
            return len(self.text)
        start = self._line_starts[line]
        return min(start + col, start + len(self.line_text(line)))


def source_lines(text: str, keepends: bool = False) -> list[str]:
    """The lines of a program's text as the lexer sees them: split at "\n" only.

    `str.splitlines` also splits at "\r" alone, U+000B, U+000C, U+001C-U+001E, U+0085, U+2028 and U+2029,
    where a `#` comment does not end; a tool that cut a program's text with it could turn the end of a
    comment into code (issue 24 item 12). Every tool that cuts source text into lines uses this instead."""
    lines = text.split("\n")
    if keepends:
        lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    elif lines and lines[-1] == "":
        lines.pop()
    return lines

