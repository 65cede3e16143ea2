"""`gsr run --dry-run`: what a run will ask of its model judges, and what it will cost, before any call.

The run is executed with the model judge in *plan* mode (`LLMJudge(plan=CallPlan())`): every
judgment the program needs is prepared exactly as a real run prepares it -- its messages, its
schema, its cache key -- and counted instead of sent. Judgments whose whole answer is in the
judgment cache cost nothing; identical requests (the same cache key) are one call. Rules and
other judges without a model run as usual (they cost nothing). Every criterion is asked for
every item (no short-circuit judging: without answers nothing can be skipped), so the counts are
what the program *needs*; a previous run's trace (`--trace PREVIOUS`) gives the share that
short-circuit judging skipped, the re-asks per call, the length of the answers and the share of
prompt tokens the server's cache served, per criterion, and the plan applies them.

**Prompt tokens** are estimated at 4 characters a token of the request body (the messages and the
answer schema) -- no tokenizer of a hosted model is available offline (OpenAI's `tiktoken` fetches
its encodings from the network on first use) -- and marked so. **Completion tokens** come from the
previous trace (completion tokens per call, reasoning included), else a guess of
`COMPLETION_GUESS` a call (plus `REASONING_GUESS` for a reasoning effort), marked so.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

__all__ = ["CallPlan", "COMPLETION_GUESS", "REASONING_GUESS", "TraceRates", "estimate_tokens"]

CHARS_PER_TOKEN = 4
COMPLETION_GUESS = 60  # completion tokens of one judgment's answer ({"reason": one or two sentences, "answer": ...})
REASONING_GUESS = {"minimal": 0, "low": 300, "medium": 1000, "high": 3000}  # reasoning tokens a call, a guess


def estimate_tokens(body: dict[str, Any]) -> int:
    """Prompt tokens of a chat request body, estimated at 4 characters a token (messages and schema)."""
    chars = 0
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(str(p.get("text", ""))) for p in content if isinstance(p, dict))
        chars += 16  # the role and the chat template's separators
    if isinstance(fmt := body.get("response_format"), dict) and fmt.get("type") == "json_schema":
        chars += len(json.dumps(fmt.get("json_schema", {}).get("schema"), separators=(",", ":")))
    return max(1, math.ceil(chars / CHARS_PER_TOKEN))


class CallPlan:
    """The calls a dry run counted, per criterion (see the module doc)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self._keys: set[str] = set()
        self.clients: dict[str, Any] = {}  # criterion -> the client (model, server) that judges it

    def add(self, node_id: str, client, request, cached: bool = False) -> None:
        """One call unit of a criterion: answered by the cache, merged with an identical one, or a new call."""
        row = self.rows.setdefault(node_id, {"judgments": 0, "calls": 0, "merged": 0, "cached": 0, "prompt_tokens": 0})
        row["judgments"] += 1
        self.clients.setdefault(node_id, client)
        if cached:
            row["cached"] += 1
            return
        key = request.cache_key(client.config)
        if key in self._keys:
            row["merged"] += 1
            return
        self._keys.add(key)
        row["calls"] += 1
        row["prompt_tokens"] += estimate_tokens(client.request_body(request))


class TraceRates:
    """Per criterion, what a previous run's trace measured: the share of judgments short-circuit judging
    skipped, calls per call unit (re-asks), completion tokens per call and the cached share of prompt tokens."""

    def __init__(self) -> None:
        self.made: dict[str, int] = defaultdict(int)
        self.skipped: dict[str, int] = defaultdict(int)
        self.units: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self.completion: dict[str, int] = defaultdict(int)
        self.prompt: dict[str, int] = defaultdict(int)
        self.cached: dict[str, int] = defaultdict(int)
        self.items = 0

    @classmethod
    def read(cls, path: str) -> "TraceRates":
        """Raises gsrlang.files.dataset.DataError (TraceError) when the file is not a trace."""
        from gsrlang.trace import TraceView
        from gsrlang.trace.read import read_trace
        from gsrlang.trace.schema import is_summary

        rates = cls()
        for _, record in read_trace(path, summaries=True):
            if is_summary(record):
                continue
            rates.items += 1
            for node in TraceView.of_record(record).criteria():
                for j in node.get("judgments") or ():
                    if j.get("status") == "skipped":
                        rates.skipped[node["id"]] += 1
                        continue
                    rates.made[node["id"]] += 1
                    for unit in _units(j.get("provenance") or {}):
                        rates.add_unit(node["id"], unit)
        return rates

    def add_unit(self, name: str, prov: dict) -> None:
        calls = int(prov.get("calls") or 0)
        if prov.get("cached") or not calls:  # a cached answer says nothing of the server's tokens
            return
        tokens = prov.get("tokens") or {}
        self.units[name] += 1
        self.calls[name] += calls
        self.completion[name] += int(tokens.get("completion") or 0)
        self.prompt[name] += int(tokens.get("prompt") or 0)
        self.cached[name] += int(tokens.get("cached") or 0)

    def skip_share(self, name: str) -> float:
        total = self.made.get(name, 0) + self.skipped.get(name, 0)
        return self.skipped.get(name, 0) / total if total else 0.0

    def calls_per_unit(self, name: str) -> float:
        return self.calls[name] / self.units[name] if self.units.get(name) else 1.0

    def completion_per_call(self, name: str) -> float | None:
        return self.completion[name] / self.calls[name] if self.calls.get(name) else None

    def cached_share(self, name: str) -> float:
        return self.cached[name] / self.prompt[name] if self.prompt.get(name) else 0.0


def _units(prov: dict):
    """The call units of a judgment's provenance: itself, or each ensemble vote, or each joint order."""
    if prov.get("votes"):
        for vote in prov["votes"]:
            yield from _units(vote)
    elif prov.get("orders"):
        yield from (order for order in prov["orders"] if not order.get("calls_shared_with"))
    else:
        yield prov


def forecast(plan: CallPlan, rates: TraceRates | None, price_for) -> dict[str, Any]:
    """The plan's figures per criterion and in total: judgments needed, calls after merging (and from the cache),
    expected calls, prompt / completion tokens, dollars. `price_for(client)` gives a Price or None."""
    out: dict[str, Any] = {"criteria": {}, "estimated_prompt": True, "guessed_completion": rates is None,
                           "previous_items": rates.items if rates is not None else None}
    total = {"judgments": 0, "calls": 0, "merged": 0, "cached": 0, "expected_calls": 0.0, "prompt_tokens": 0.0,
             "cached_tokens": 0.0, "completion_tokens": 0.0, "cost_usd": 0.0}
    for name, row in plan.rows.items():
        client = plan.clients[name]
        keep = 1.0 - (rates.skip_share(name) if rates else 0.0)
        per_unit = rates.calls_per_unit(name) if rates else 1.0
        calls = row["calls"] * keep * per_unit
        per_call = rates.completion_per_call(name) if rates else None
        guessed = per_call is None
        if per_call is None:
            per_call = COMPLETION_GUESS + REASONING_GUESS.get(client.config.reasoning_effort or "", 0)
        prompt = row["prompt_tokens"] * keep * per_unit
        cached = prompt * (rates.cached_share(name) if rates else 0.0)
        completion = calls * per_call
        price = price_for(client)
        cost = price.cost(round(prompt), round(cached), round(completion)) if price is not None else None
        figures = out["criteria"][name] = {
            **row, "expected_calls": calls, "prompt_tokens": prompt, "cached_tokens": cached,
            "completion_tokens": completion, "completion_guessed": guessed, "skip_share": 1.0 - keep,
            "model": client.config.model, "price": price.source if price is not None else None, "cost_usd": cost}
        for key in ("judgments", "calls", "merged", "cached", "expected_calls", "prompt_tokens", "cached_tokens",
                    "completion_tokens"):
            total[key] += figures[key]
        total["cost_usd"] = None if cost is None or total["cost_usd"] is None else total["cost_usd"] + cost
        out["guessed_completion"] = out["guessed_completion"] or guessed
    out["total"] = total
    return out
