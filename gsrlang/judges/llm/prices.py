"""What model calls cost, in US dollars: the `genai-prices` library's prices, or the user's own.

    table = price_of("gpt-5-mini", None)                     # a Price (USD per million tokens), or None
    table = price_of("gpt-5-mini", None, batch=True)         # the Batch API's price
    cost = table.cost(prompt=1200, cached=1024, completion=300)   # dollars (float)

**Where prices come from.** `genai-prices` (Pydantic's price library, updated with every
provider change and shipped with its data, so it works offline; gsr never asks it to
update over the network). The provider is the one the library knows for the judge's
`base_url` (none set: OpenAI); for a server it does not know (a local or self-hosted
one) the model is looked up by its name alone, so a self-hosted model is priced at the
hosted price of a model of that name -- override it with `[prices]` (below), e.g. at 0
for a server of your own. A model the library does not know has no price: its cost is
*unknown* (None), never 0, and `--budget` refuses to start with it.

**Kinds of token.** Cached prompt tokens (`usage.prompt_tokens_details.cached_tokens`)
are part of the prompt tokens and are charged at the cached-input price where the model
has one; reasoning tokens are part of the completion tokens and charged as output.

**Batch.** `batch=True` gives the Batch API's price: the library's batch price where it
has one, else half the standard price (OpenAI's and Anthropic's batch discount).

**Overrides.** `gsr.toml` (the project file the judge settings came from), then the
user's `config.toml`, may set prices in US dollars per million tokens::

    [prices."gpt-5-mini"]
    input = 0.25          # prompt tokens
    cached_input = 0.025  # cached prompt tokens (default: input)
    output = 2.0          # completion tokens, reasoning included
    batch_input = 0.125   # optional; default: half of input (and of cached_input, output)
    batch_output = 1.0

A model named there is priced only from there.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Mapping

import attrs

from gsrlang.lang.types import is_finite_number

from .config import OPENAI_DEFAULT_BASE_URL as OPENAI_URL
from .config import tomllib  # the standard library's, or tomli on Python 3.10

__all__ = ["OPENAI_URL", "Price", "PriceError", "cost_record", "cost_text", "dollars", "load_overrides", "price_of",
           "token_parts"]

_FIELDS = ("input", "cached_input", "output", "batch_input", "batch_cached_input", "batch_output")


class PriceError(ValueError):
    """A `[prices]` table that cannot be used (one line naming the file and the key)."""


@attrs.frozen
class Price:
    """USD per million tokens of each kind, and where the figures came from."""

    input: float
    cached_input: float
    output: float
    source: str  # "genai-prices <version>: <provider> <model id>" or "<file> [prices.NAME]"

    def cost(self, prompt: int, cached: int, completion: int) -> float:
        cached = min(max(cached, 0), max(prompt, 0))
        return ((prompt - cached) * self.input + cached * self.cached_input + completion * self.output) / 1e6


def load_overrides(*paths: Path | None) -> dict[str, dict[str, float]]:
    """{model: {field: USD per million}} from the `[prices]` tables of these TOML files (earlier files win).
    Raises PriceError for a table that is not prices."""
    out: dict[str, dict[str, float]] = {}
    for path in reversed([p for p in paths if p is not None]):
        try:
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # the judge settings already reported a file that cannot be read
        if (table := doc.get("prices")) is None:
            continue
        if not isinstance(table, dict):
            raise PriceError(f"{path}: 'prices' must be a table of models ([prices.\"MODEL\"])")
        for model, fields in table.items():
            if not isinstance(fields, dict):
                raise PriceError(f"{path}: [prices.\"{model}\"] must be a table (input = ..., output = ...)")
            entry: dict[str, float] = {}
            for key, value in fields.items():
                if key not in _FIELDS:
                    raise PriceError(f"{path}: [prices.\"{model}\"] {key}: unknown price; known: {', '.join(_FIELDS)}")
                if not (is_finite_number(value) and value >= 0):
                    raise PriceError(f"{path}: [prices.\"{model}\"] {key} must be a number of US dollars per "
                                     f"million tokens (>= 0), got {value!r}")
                entry[key] = float(value)
            if "input" not in entry or "output" not in entry:
                raise PriceError(f"{path}: [prices.\"{model}\"] needs both input and output (US dollars per "
                                 "million tokens)")
            entry["_source"] = f"{path} [prices.\"{model}\"]"  # type: ignore[assignment]
            out[model] = entry
    return out


def price_of(model: str, base_url: str | None, batch: bool = False,
             overrides: Mapping[str, Mapping[str, Any]] | None = None) -> Price | None:
    """The price of `model` served at `base_url` (None: OpenAI), for the Batch API when `batch`; None when
    neither the overrides nor the price library know the model."""
    if (over := (overrides or {}).get(model)) is not None:
        inp, out = float(over["input"]), float(over["output"])
        cached = float(over.get("cached_input", inp))
        if batch:
            inp, cached, out = (float(over.get("batch_input", inp / 2)),
                                float(over.get("batch_cached_input", cached / 2)),
                                float(over.get("batch_output", out / 2)))
        return Price(inp, cached, out, str(over.get("_source", "[prices]")))
    return _library_price(model, (base_url or OPENAI_URL).rstrip("/"), batch)


@functools.lru_cache(maxsize=256)
def _library_price(model: str, base_url: str, batch: bool) -> Price | None:
    try:
        import genai_prices
        from genai_prices import Usage
    except ImportError:  # pragma: no cover - a dependency; without it every price is unknown
        return None
    context = {"processing": "batch"} if batch else None
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    cached = Usage(input_tokens=1_000_000, cache_read_tokens=1_000_000)
    attempts: list[dict[str, Any]] = [{"provider_id": "openai"}] if base_url == OPENAI_URL else [
        {"provider_api_url": base_url}, {}]
    for where in attempts:
        try:
            full = genai_prices.calc_price(million, model, price_context=context, **where)
            hit = genai_prices.calc_price(cached, model, price_context=context, **where)
        except LookupError:
            continue
        inp, out = float(full.input_price), float(full.output_price)
        cached_input = float(hit.input_price)
        if batch and not _has_batch_variant(full):
            inp, cached_input, out = inp / 2, cached_input / 2, out / 2
        return Price(inp, cached_input, out,
                     f"genai-prices {genai_prices.__version__}: {full.provider.id} {full.model.id}")
    return None


def _has_batch_variant(calc) -> bool:
    """Whether the library has its own batch price for the model (else gsr halves the standard one)."""
    return any((getattr(variant, "when", None) or {}).get("processing") == "batch"
               for variant in getattr(calc.model, "price_variants", None) or ())


def dollars(value: float | None) -> str:
    """`$0.0123` / `unknown` for the summary and the plan."""
    if value is None:
        return "unknown"
    if value == 0:
        return "$0"
    if value < 1:
        return f"${value:.4f}"
    return f"${value:,.2f}"


def token_parts(u: Mapping[str, Any]) -> str:
    """` (8960 of the prompt tokens cached, 320 of the completion tokens reasoning)`, or nothing when the server
    reported neither (`u`: a judge's usage, or one of its by_criterion / by_judge rows)."""
    kinds = (("cached_tokens", "prompt tokens cached"), ("reasoning_tokens", "completion tokens reasoning"))
    parts = [f"{u[key]} of the {what}" for key, what in kinds if u.get(key)]
    return f" ({', '.join(parts)})" if parts else ""


def cost_text(u: Mapping[str, Any]) -> str:
    """`$0.0123` / `cost unknown (...)` from a usage dict's `cost_usd`."""
    if "cost_usd" not in u:
        return "cost not recorded"
    if u["cost_usd"] is None:
        return "cost unknown (no price for the model: [prices] in gsr.toml sets one)"
    return dollars(u["cost_usd"])


_COUNTERS = (("cache_hits", "from the cache"), ("merged", "merged with an identical call in flight"),
             ("http_requests", "HTTP requests"), ("retries", "retries"), ("reasks", "re-asks"))


def usage_text(u: Mapping[str, Any], counters: tuple[str, ...] = (), priced: bool = True,
               who: str = "model judges:", tokens: str = " tokens") -> str:
    """`model judges: 12 calls (3 from the cache, 9 HTTP requests), 8960 prompt + 320 completion tokens, $0.01`, as
    gsr run, replay, metrics and report print it, from a usage dict (a judge's usage(), a by_criterion row, ...).

    `counters`: which of _COUNTERS go in parentheses after the calls (`merged` only when nonzero); `priced`: end
    with token_parts and cost_text; `who`: what made the calls; `tokens`: what follows `completion`."""
    shown = [f"{u.get(key, 0)} {what}" for key, what in _COUNTERS
             if key in counters and (key != "merged" or u.get(key))]
    detail = f" ({', '.join(shown)})" if shown else ""
    text = (f"{who} {u.get('calls', 0)} calls{detail}, {u.get('prompt_tokens', 0)} prompt + "
            f"{u.get('completion_tokens', 0)} completion{tokens}")
    return text + f"{token_parts(u)}, {cost_text(u)}" if priced else text


COST_KEYS = ("calls", "cache_hits", "http_requests", "prompt_tokens", "cached_tokens", "completion_tokens",
             "reasoning_tokens", "cost_usd", "by_judge", "by_criterion", "adapted")


def cost_record(summary: Mapping[str, Any] | None) -> dict | None:
    """The model judges' tokens and dollars from a trace's run-summary record (None without model judges)."""
    llm = ((summary or {}).get("judges") or {}).get("llm") if isinstance(summary, Mapping) else None
    return {k: llm[k] for k in COST_KEYS if k in llm} if isinstance(llm, Mapping) else None
