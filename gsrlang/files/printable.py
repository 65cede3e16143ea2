"""Text shown on a terminal exactly as it is: control and invisible characters escaped.

A value that came from a file (a role name, a URL, an id) may hold terminal escapes
(``\\x1b[2K\\r`` rewrites the line), bidirectional controls that reorder what is shown
(Trojan Source, CVE-2021-42574), or line and paragraph separators. :func:`printable`
writes every such character as a Python-style escape (``\\x1b``, ``\\u202e``), so what is
shown is what the file says.
"""

from __future__ import annotations

import unicodedata

__all__ = ["BIDI_CONTROLS", "printable", "visible"]

# the characters that change the order text is displayed in (Unicode's bidirectional formatting characters):
# embeddings and overrides (U+202A-U+202E), isolates (U+2066-U+2069), the marks (U+200E, U+200F, U+061C)
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")

_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}  # controls, format, surrogates, private, unassigned, separators


def printable(text: object) -> str:
    """`text` (a str; anything else as its repr) with every control, format or separator character escaped."""
    if not isinstance(text, str):
        text = repr(text)
    if text.isprintable():  # the common case: nothing to escape (isprintable is False for all of _HIDDEN)
        return text
    return "".join(_escaped(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with each control, format or separator character replaced by U+FFFD, one for one (a source line
    shown under a diagnostic keeps its columns, and cannot move the cursor or reorder the line)."""
    if text.isprintable():
        return text
    return "".join("\ufffd" if unicodedata.category(ch) in _HIDDEN else ch for ch in text)
