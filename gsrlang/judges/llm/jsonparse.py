"""Pull a JSON object out of a model's answer.

Models asked for JSON answer with bare JSON, with JSON in a Markdown code fence,
or with JSON somewhere in prose ("Sure! Here is my judgment: {...}").
:func:`extract_json` tries, in order:

1. the whole text (after stripping whitespace);
2. the text with ``<think>...</think>`` reasoning blocks removed (reasoning
   models served by Ollama/vLLM often put them in the content);
3. each fenced code block (```json ... ``` or plain ``` ... ```), in order;
4. each balanced ``{...}`` span in order of its opening brace, found with a
   string-aware brace matcher (braces inside JSON strings do not count).

Each candidate is parsed with :func:`json.loads` (``strict=False``, so raw
newlines inside strings are accepted) and, failing that, once more with
trailing commas before ``}``/``]`` removed -- a common slip of small models.
Only a JSON *object* (a ``dict``) is accepted.  When nothing parses,
:class:`AnswerFormatError` is raised; it carries the full raw ``text`` and its
message shows a short excerpt.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from .config import LLMError

__all__ = ["AnswerFormatError", "RefusalError", "STORED_ANSWER_CHARS", "clip", "clip_strings", "extract_json",
           "excerpt"]

STORED_ANSWER_CHARS = 64 * 1024
"""The most characters of a model's answer kept in the judgment cache and the trace (more is cut, saying so)."""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n`]*\n(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_MAX_SPANS = 200  # bound the work on pathological answers


class AnswerFormatError(LLMError):
    """The model's answer holds no parseable JSON object.

    ``text`` is the raw answer.  The client also sets ``usage`` (tokens spent
    on the bad answer), ``model``, ``structured`` and ``finish_reason`` when it
    raises this; retrying is the caller's decision.
    """

    def __init__(self, message: str, text: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.text = text
        self.usage: dict[str, int] | None = details.pop("usage", None)
        self.model: str | None = details.pop("model", None)
        self.structured: str | None = details.pop("structured", None)
        self.finish_reason: str | None = details.pop("finish_reason", None)


class RefusalError(AnswerFormatError):
    """The model refused to answer (``content: null`` with a ``refusal`` field)."""

    def __init__(self, message: str, refusal: str, **details: Any) -> None:
        super().__init__(message, text=refusal, **details)
        self.refusal = refusal


def clip(text: str, limit: int) -> str:
    """`text`, or its start and a note that gsr cut it, `limit` characters in all (`limit` >= 100).

    The note names only the limit, so cutting a longer text, or one already cut longer, to the same limit gives
    the same string, and cutting again changes nothing."""
    if len(text) <= limit:
        return text
    note = f"\u2026 [cut by gsr to {limit} characters]"
    return text[: max(0, limit - len(note))] + note


def clip_strings(value: Any, limit: int) -> Any:
    """A JSON value with every string in it (keys included) cut by :func:`clip`."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, list):
        return [clip_strings(v, limit) for v in value]
    if isinstance(value, dict):
        return {clip(k, limit) if isinstance(k, str) else k: clip_strings(v, limit) for k, v in value.items()}
    return value


def excerpt(text: str, limit: int = 160, *, quoted: bool = True) -> str:
    """A one-line, shortened ``repr`` of ``text`` for error messages (the text itself when not `quoted`)."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "\u2026"
    return repr(flat) if quoted else flat


_TRAILING_COMMA = re.compile(r'("(?:[^"\\]|\\.)*")|,(\s*[}\]])', re.DOTALL)


def _strip_trailing_commas(s: str) -> str:
    return _TRAILING_COMMA.sub(lambda m: m.group(1) or m.group(2), s)


def _parse_object(candidate: str) -> dict | None:
    candidate = candidate.strip()
    if not candidate.startswith("{"):
        return None
    for attempt in dict.fromkeys((candidate, _strip_trailing_commas(candidate))):  # then without trailing commas
        try:
            value = json.loads(attempt, strict=False)
        except (ValueError, RecursionError):
            continue
        return value if isinstance(value, dict) else None
    return None


def _balanced_spans(text: str) -> Iterator[str]:
    """Yield each balanced ``{...}`` substring, by position of its opening brace."""
    n = len(text)
    start = text.find("{")
    spans = 0
    while start != -1 and spans < _MAX_SPANS:
        spans += 1
        depth, in_str, esc, end = 0, False, False, -1
        for i in range(start, n):
            c = text[i]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end != -1:  # else unbalanced from here (e.g. a truncated answer); an inner object may still close
            yield text[start : end + 1]
        start = text.find("{", start + 1)


def _candidates(text: str) -> Iterator[str]:
    yield text
    if (unthought := _THINK.sub("", text)) != text:
        yield unthought
        text = unthought
    for m in _FENCE.finditer(text):
        yield m.group(2)
    yield from _balanced_spans(text)


def extract_json(text: str) -> Any:
    """Parse the JSON object in a model's answer (see module docstring)."""
    if not isinstance(text, str):
        raise AnswerFormatError(f"expected the answer as text, got {type(text).__name__}", text=None)
    if not text.strip():
        raise AnswerFormatError("the answer is empty; expected a JSON object", text=text)
    seen: set[str] = set()
    for candidate in _candidates(text):
        if candidate in seen:
            continue
        seen.add(candidate)
        if (value := _parse_object(candidate)) is not None:
            return value
    raise AnswerFormatError(f"no JSON object found in the answer: {excerpt(text)}", text=text)
