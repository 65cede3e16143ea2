"""Offsets <-> LSP positions, in the position encoding negotiated with the client.

The language works in 0-based character offsets (`Span`); the protocol counts a
line's characters in UTF-16 code units by default, or in UTF-8 bytes or code points
when client and server agree on it at initialization. This module is the only
place that converts between the two.
"""

from __future__ import annotations

from lsprotocol import types

from gsrlang.lang.span import SourceText, Span

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def _units(char: str, encoding: str) -> int:
    cp = ord(char)
    if encoding == UTF16:
        return 2 if cp > 0xFFFF else 1
    if encoding == UTF8:
        return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    return 1


class PositionMap:
    """Converts between offsets into `text` and LSP positions in `encoding` (utf-8, utf-16 or utf-32)."""

    def __init__(self, text: str, encoding: str | None = UTF16):
        self.source = SourceText("", text)
        self.text = text
        encoding = str(encoding or UTF16).lower()
        self.encoding = encoding if encoding in (UTF8, UTF16, UTF32) else UTF16

    def _col_units(self, line: int, chars: int) -> int:
        text = self.source.line_text(line)[:chars]
        if self.encoding == UTF32 or text.isascii():
            return len(text)
        # surrogatepass: a lone surrogate (a client may send one) counts as the one unit _units gives it
        if self.encoding == UTF16:
            return len(text.encode("utf-16-le", "surrogatepass")) // 2
        return len(text.encode("utf-8", "surrogatepass"))

    def position(self, offset: int) -> types.Position:
        line, col = self.source.line_col(offset)
        return types.Position(line=line, character=self._col_units(line, col))

    def range(self, span: Span) -> types.Range:
        return types.Range(start=self.position(span.start), end=self.position(span.end))

    def offset(self, position: types.Position) -> int:
        """The offset of a client position; positions past a line's end clamp to it (as the protocol asks)."""
        line = max(0, position.line)
        if line >= self.source.line_count:
            return len(self.text)
        text = self.source.line_text(line)
        want = max(0, position.character)
        if self.encoding == UTF32 or text.isascii():
            return self.source.offset(line, min(want, len(text)))
        units = chars = 0
        for ch in text:
            step = _units(ch, self.encoding)
            if units + step > want:
                break
            units += step
            chars += 1
        return self.source.offset(line, chars)

    def span(self, rng: types.Range) -> Span:
        start, end = self.offset(rng.start), self.offset(rng.end)
        return Span(min(start, end), max(start, end))
