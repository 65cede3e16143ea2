"""Model-call transport for LLM judges: config, client, cache, JSON extraction.

Everything is async and goes through ``openai.AsyncOpenAI``, so any
OpenAI-compatible server works (OpenAI, vLLM, Ollama, llama.cpp, LM Studio)::

    settings = resolve_settings({"model": "gpt-4o-mini"})
    cache = JudgmentCache(".gsr-cache/judgments.sqlite")
    async with LLMClient(settings.for_role("strong"), cache) as client:
        result = await client.complete(ChatRequest(messages=[...], schema={...}))
        result.data  # the parsed JSON object
"""

from typing import TYPE_CHECKING, Any

from .cache import CacheError, JudgmentCache
from .config import (
    ConfigError,
    JudgeConfig,
    JudgeSettings,
    LLMError,
    Secret,
    STRUCTURED_MODES,
    find_config_file,
    resolve_settings,
)
from .jsonparse import AnswerFormatError, RefusalError, extract_json

if TYPE_CHECKING:
    from .client import ChatRequest, ChatResult, ClientPool, JudgeCallError, LLMClient, Usage

# client.py imports the openai package (about a second); load it on first use so
# that code needing only config/cache/jsonparse stays quick to import.
_LAZY = {"ChatRequest", "ChatResult", "ClientPool", "JudgeCallError", "LLMClient", "Usage"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AnswerFormatError",
    "CacheError",
    "ChatRequest",
    "ChatResult",
    "ClientPool",
    "ConfigError",
    "JudgeCallError",
    "JudgeConfig",
    "JudgeSettings",
    "JudgmentCache",
    "LLMClient",
    "LLMError",
    "RefusalError",
    "STRUCTURED_MODES",
    "Secret",
    "Usage",
    "extract_json",
    "find_config_file",
    "resolve_settings",
]
