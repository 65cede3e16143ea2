"""What a model server supports, found out once per (base_url, model) and remembered.

OpenAI-compatible servers differ in how they take structured output. OpenAI and vLLM
take ``response_format: {"type": "json_schema", ...}``; llama.cpp's Python server
(llama-cpp-python) answers that with HTTP 500 and a validation error, but takes
``{"type": "json_object", "schema": {...}}`` and a GBNF grammar in the request's
``grammar`` field; some servers take none of these. :data:`LADDER` lists the modes from
strongest to weakest:

``json_schema``
    ``response_format`` of type ``json_schema`` with the answer's schema;
``json_object``
    ``response_format`` of type ``json_object`` *with* the schema (llama.cpp constrains
    to it; servers that ignore the extra key still get the schema in the prompt);
``grammar``
    a GBNF grammar of the schema (:func:`gsrlang.judges.llm.gbnf.schema_gbnf`) in the
    ``grammar`` field, and the schema in the prompt;
``off``
    the schema in the prompt only.

**Negotiation.** In ``auto`` mode the client tries the ladder in order on its first
request with a schema (one request at a time while it negotiates). An answer that says
the *format* is unsupported (:func:`format_rejected`: 400, 422, or a 500 whose body
names the format) means "step down", never "retry". The first mode that gets an answer
is kept for the client and written to a small JSON file, :class:`KnowledgeStore`
(``servers.json`` beside the judgment cache), keyed by base_url and model, so a resumed
run does not negotiate at all. ``--structured MODE`` forces one mode and skips all this.

The same file keeps what ``gsr probe`` learns (context length, grammar dialect,
logprobs); ``gsr compile`` reads the context length from it to size its prompt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Mapping

__all__ = ["LADDER", "KnowledgeStore", "context_from_error", "format_rejected", "knowledge_path"]

LADDER = ("json_schema", "json_object", "grammar", "off")
STORE_VERSION = 1

# words that, in an error about the request, point at the structured-output format
_FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object", "json schema",
                 "structured output", "guided_json", "guided decoding", "grammar", "gbnf")


def format_rejected(status: int | None, message: str, sent: Mapping[str, Any], param: str | None = None) -> bool:
    """True when an error answer says the request's structured-output format is unsupported.

    400 and 422 count when they name the format (or its parameter); a 500 counts only when
    its body names it too (llama-cpp-python answers an unknown ``response_format`` type with
    a 500 validation error: "Input should be 'text' or 'json_object'"). A request that sent
    no format cannot have been refused for it.
    """
    sent_format = "response_format" in sent or "grammar" in (sent.get("extra_body") or {})
    if not sent_format or status not in (400, 422, 500):
        return False
    lowered = message.lower()
    named = param in ("response_format", "grammar") or any(w in lowered for w in _FORMAT_WORDS)
    if status == 500:
        return named and ("input should be" in lowered or "validation" in lowered or "unsupported" in lowered
                          or "not supported" in lowered or "invalid" in lowered or "parse" in lowered)
    return named


_CONTEXT_PATTERNS = (
    re.compile(r"context window of (\d+)"),                   # llama-cpp-python
    re.compile(r"maximum context length is (\d+)"),           # OpenAI, vLLM
    re.compile(r"n_ctx(?:_slot)?\s*[=:]\s*(\d+)"),            # llama.cpp server
    re.compile(r"context (?:length|size) (?:of |is )?(\d+)"),
)


def context_from_error(message: str) -> int | None:
    """The context length a context-overflow error names, or None."""
    for pattern in _CONTEXT_PATTERNS:
        if m := pattern.search(message):
            return int(m.group(1))
    return None


def knowledge_path(cache_path: str | os.PathLike[str] | None) -> Path | None:
    """Where server knowledge lives: ``servers.json`` beside a cache file (None without a cache)."""
    return None if cache_path is None else Path(cache_path).with_name("servers.json")


def _key(base_url: str, model: str) -> str:
    return hashlib.sha256(f"{base_url}\n{model}".encode()).hexdigest()[:24]


class KnowledgeStore:
    """A small JSON file of what each (base_url, model) supports (see the module doc).

    Reads are tolerant (an unreadable or foreign file is treated as empty and rewritten);
    writes replace the file atomically, so concurrent runs never see half a file (the last
    writer wins, which is harmless: every writer records the same facts).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != STORE_VERSION or not isinstance(data.get("servers"), dict):
            return {}
        return data

    def get(self, base_url: str, model: str) -> dict:
        """What is known of this server and model ({} when nothing)."""
        entry = self._read().get("servers", {}).get(_key(base_url, model))
        return dict(entry) if isinstance(entry, dict) else {}

    def update(self, base_url: str, model: str, **facts: Any) -> None:
        """Merge ``facts`` into the entry of this server and model; a write that fails is ignored
        (knowledge only saves a negotiation, it never decides a result)."""
        data = self._read() or {"version": STORE_VERSION, "servers": {}}
        key = _key(base_url, model)
        entry = dict(data["servers"].get(key) or {})
        entry.update({"base_url": base_url, "model": model, **facts, "updated": round(time.time(), 3)})
        data["servers"][key] = entry
        from gsrlang.files.safeio import write_atomic

        # whole or not at all: a full disk leaves the old file and no temporary one
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True))

