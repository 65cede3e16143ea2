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

if TYPE_CHECKING:
    from .cache import CacheError, JudgmentCache
    from .client import ChatRequest, ChatResult, ClientPool, JudgeCallError, LLMClient, Usage
    from .config import (STRUCTURED_MODES, ConfigError, JudgeConfig, JudgeSettings, LLMError, Secret,
                         find_config_file, resolve_settings)
    from .jsonparse import AnswerFormatError, RefusalError, extract_json

# Every name is loaded on first use: client.py imports the openai package (about a second) and cache.py
# sqlite3, and `gsr` registers its command-line flags (gsrlang.judges.llm.options) on every start-up.
_LAZY = {
    "cache": ("CacheError", "JudgmentCache"),
    "client": ("ChatRequest", "ChatResult", "ClientPool", "JudgeCallError", "LLMClient", "Usage"),
    "config": ("ConfigError", "JudgeConfig", "JudgeSettings", "LLMError", "Secret", "STRUCTURED_MODES",
               "find_config_file", "resolve_settings"),
    "jsonparse": ("AnswerFormatError", "RefusalError", "extract_json"),
}
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if (module := _MODULE_OF.get(name)) is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

