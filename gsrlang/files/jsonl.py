"""The one JSON Lines reader: data files, traces, results, compile indexes and few-shot files.

    for line, value, problem in jsonl_lines(path): ...      # never raises for a line's content
    for line, record in read_jsonl(path, TraceError): ...    # one-line errors naming the file and line

Blank lines are skipped; a UTF-8 byte-order mark on the first line is dropped; a line
that is not valid UTF-8, not JSON (truncated JSON is said to be so), nested deeper than
MAX_ROW_DEPTH, holding a number beyond a float's range, longer than MAX_ROW_BYTES or
(for `read_jsonl`) not a JSON object is reported with its line number. Files are
streamed, and an over-long line is read past without being held, so memory stays flat
whatever the file holds. The data reader (gsrlang/files/dataset.py) shares the limits and the
per-line primitives for its CSV and .json formats.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Iterator

try:  # pragma: no cover - which branch runs depends on the install
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

__all__ = ["MAX_ROW_BYTES", "MAX_ROW_DEPTH", "describe_json_error", "json_type", "jsonl_lines", "parse_json",
           "read_jsonl", "same"]

#: A line (JSONL) or CSV cell longer than this makes its row a failed row; the line is never held whole.
MAX_ROW_BYTES = 64 * 2**20
#: Arrays and objects nested deeper than this in one row make it a failed row (no rubric reads so deep).
MAX_ROW_DEPTH = 100

_JSON_TYPES = ((type(None), "null"), (bool, "boolean"), ((int, float), "number"), (str, "string"),
               (Mapping, "object"), ((list, tuple), "array"))


def json_type(value: object, article: bool = True) -> str:
    """The JSON name of a value's type, for messages: `an object`, `a number`, `null` (`object` without the
    article); a value JSON has no name for gives its Python type's."""
    for types, name in _JSON_TYPES:
        if isinstance(value, types):
            return name if not article or name == "null" else f"{'an' if name[0] in 'ao' else 'a'} {name}"
    return type(value).__name__


def decode_line(raw: bytes, line: int) -> tuple[str, str | None]:
    """A line's text, and what is wrong with its bytes (None when they are UTF-8); bad bytes become U+FFFD."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = f"byte 0x{raw[error.start]:02x} at byte {error.start + 1} of the line"
        return raw.decode("utf-8", errors="replace"), f"not valid UTF-8 ({bad})"
    if line == 1:
        text = text.removeprefix("\ufeff")
    return text, None


def physical_lines(handle) -> Iterator[tuple[int, bytes | None]]:
    """(1-based line number, bytes) for each line of a binary file; None for a line longer than MAX_ROW_BYTES,
    which is read past in chunks and never held whole, so memory stays flat whatever the file holds."""
    line = 0
    while True:
        raw = handle.readline(MAX_ROW_BYTES + 1)
        if not raw:
            return
        line += 1
        if len(raw) > MAX_ROW_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = handle.readline(MAX_ROW_BYTES)
            yield line, None
        else:
            yield line, raw


def too_long() -> str:
    return f"the line is longer than {MAX_ROW_BYTES:,} bytes"


def finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:20]}{'...' if len(text) > 20 else ''} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_float=finite_float)
# 19 digits in a row: perhaps an integer beyond 64 bits, which orjson would read as a float (json keeps it an int).
# Found in the text's UTF-8 bytes with every ASCII digit made "0" and every other byte a space (no byte of a
# multibyte character is a digit): a few times faster than a regular expression's search, as much as orjson's read
_DIGITS_AS_ZERO = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_DIGITS = b"0" * 19


def _long_digits(text: str) -> bool:
    """Whether `text` holds 19 ASCII digits in a row."""
    return _LONG_DIGITS in text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZERO)


def number_problem(error: ValueError) -> str:
    """The ValueError json.loads raises past JSONDecodeError: a float out of range (from finite_float), or
    Python's limit on the digits of an integer."""
    return str(error) if "out of range" in str(error) else "an integer with more than 4,300 digits"


def parse_json(text: str) -> tuple[object, str | None]:
    """One JSON value, or why it cannot be read: invalid or truncated JSON, nesting deeper than MAX_ROW_DEPTH,
    a number beyond a float's range or an integer of more than 4,300 digits.

    orjson (where installed) reads a line first, about 3x faster: where it reads one it gives the same value
    as the standard library (floats correctly rounded both); what it refuses (NaN and Infinity, lone
    surrogates, a number out of range, anything invalid) and every line with 19 digits in a row go to `json`,
    which reads them as before or says what is wrong."""
    if orjson is not None and not _long_digits(text) and not text.startswith("\ufeff"):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        else:
            if deeper_than(value, MAX_ROW_DEPTH, text):
                return None, f"JSON nested more than {MAX_ROW_DEPTH} levels deep"
            return value, None
    try:
        # one decoder for every line (json.loads with an option builds a new one per call); a leading BOM
        # goes through json.loads, which reports it
        value = json.loads(text) if text.startswith("\ufeff") else _DECODER.decode(text)
    except json.JSONDecodeError as error:
        return None, describe_json_error(error, text)
    except RecursionError:
        return None, f"JSON nested more than {MAX_ROW_DEPTH} levels deep"
    except ValueError as error:
        return None, f"invalid JSON: {number_problem(error)}"
    if deeper_than(value, MAX_ROW_DEPTH, text):
        return None, f"JSON nested more than {MAX_ROW_DEPTH} levels deep"
    return value, None


_UNREAD = object()


def _parse_bytes(raw: bytes):
    """The value of a line read from its bytes as `parse_json` would read its text, or _UNREAD for a line
    it leaves to the long way (decoded, stripped, then `parse_json`): a line that is not UTF-8, a blank one,
    one with a byte-order mark, one orjson refuses, 19 digits in a row, nesting too deep. orjson refuses
    what is not UTF-8 (surrogates and overlong forms included) and a byte-order mark, and reads line endings
    as whitespace, so a value it reads is the one of the line's text without them. Skipping the decoding and
    the text's re-encoding saves about a third of the reading of a data file."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _UNREAD
    if _LONG_DIGITS in raw.translate(_DIGITS_AS_ZERO) or \
            raw.count(b"[") + raw.count(b"{") > MAX_ROW_DEPTH and deeper_than(value, MAX_ROW_DEPTH):
        return _UNREAD
    return value


def deeper_than(value: object, limit: int, text: str | None = None) -> bool:
    """Whether arrays and objects nest more than `limit` deep (walked without recursion, and only when the
    value's `text` holds enough brackets to go that deep), so that nothing downstream recurses past the stack."""
    if text is not None and text.count("[") + text.count("{") <= limit:
        return False
    todo = [(value, 0)]
    while todo:
        current, depth = todo.pop()
        if isinstance(current, (list, dict)):
            if depth >= limit:
                return True
            todo.extend((child, depth + 1) for child in (current.values() if isinstance(current, dict) else current))
    return False


def same(a, b) -> bool:
    """Strict JSON equality: same structure, same types (1 is not 1.0, true is not 1), same floats."""
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        if a.keys() != b.keys():
            return False
        for k, x in a.items():
            y = b[k]
            tx = type(x)
            if tx is not type(y):
                return False
            if tx is dict or tx is list:
                if not same(x, y):
                    return False
            elif x != y:
                return False
        return True
    if t is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def describe_json_error(error: json.JSONDecodeError, text: str) -> str:
    """Say what is wrong with one line of JSON, spotting lines that were cut off.

    ``text`` is the line without its line ending, so the error position is the
    column in that line.
    """
    message = error.msg[:1].lower() + error.msg[1:]
    column = error.pos + 1
    if error.msg.startswith("Unterminated string"):
        # JSON strings cannot hold a raw newline, so the line ended inside one.
        return f"truncated JSON (unterminated string starting at column {column})"
    if error.pos >= len(text.rstrip()):
        return f"truncated JSON (the line ends at column {column}, {message})"
    return f"invalid JSON at column {column}: {message}"


def jsonl_lines(path) -> Iterator[tuple[int, object, str | None]]:
    """(line number, parsed value, None) or (line number, None, why it cannot be read) for each non-blank line.

    What is wrong with a line (not UTF-8, invalid or truncated JSON, nested too deep, a number out of range,
    longer than MAX_ROW_BYTES, which is read past without being held) is said, never raised; only an
    unreadable file raises (OSError).
    """
    source = path if hasattr(path, "open") else Path(path)  # a Path, or a remote file (gsrlang.files.storage)
    with source.open("rb") as handle:
        for line, raw in physical_lines(handle):
            if raw is None:
                yield line, None, too_long()
                continue
            if orjson is not None:  # the short way for a line orjson reads from its bytes (`_parse_bytes`)
                value = _parse_bytes(raw)
                if value is not _UNREAD:
                    yield line, value, None
                    continue
            text, bad_bytes = decode_line(raw, line)
            text = text.rstrip("\r\n")
            if not text.strip():
                continue
            if bad_bytes:
                yield line, None, bad_bytes
                continue
            yield line, *parse_json(text)


def read_jsonl(path: str | Path, error: type[Exception] = ValueError, what: str = "a JSON object"
               ) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; raises `error("PATH: line N ...")` for a bad line.

    what: what each line should be, for the message ("a trace record", "a compile index entry").
    A missing or unreadable file raises `error` too.
    """
    path = Path(path)
    try:
        for line, value, problem in jsonl_lines(path):
            if problem is not None:
                raise error(f"{path}: line {line}: {problem}")
            if not isinstance(value, dict):
                raise error(f"{path}: line {line}: expected {what}, got a JSON {json_type(value, article=False)}")
            yield line, value
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read: {exc.strerror or exc}") from None
