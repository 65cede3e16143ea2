"""The LLM judge: criterion nodes judged by any OpenAI-compatible model.

``LLMJudge`` implements the judge interface of :mod:`gsrlang.judges.base`::

    judge = LLMJudge(resolve_settings({"model": "gpt-4o-mini"}), cache=JudgmentCache(path))
    judgment = await judge.judge(node, item, candidate)          # one criterion, one candidate
    judgments = await judge.judge_joint(node, item)              # llm(joint: true): all candidates at once
    await judge.aclose()

One **call unit** is one question to one model: the first ask plus at most
``max_reasks`` re-asks when the answer is not a value of the criterion's type
(no JSON, a refusal, a letter that is not an option, a number out of range,
``cannot_assess`` for a criterion that cannot abstain). After the last re-ask the
answer is recorded as *abstained* for a ``T?`` criterion and *invalid* otherwise,
with the raw answer kept.

* **Seeds.** Every unit has a *call seed*, a hash of the base seed (the
  procedure's ``seed:``, else the run's ``seed`` setting, else 0), the item id,
  the criterion, the candidate, the ensemble sample and the joint order. It
  drives the option order (``shuffle: true``, the default) and is recorded in
  the trace (``seed``) with the listed order (``order``), so every prompt can be
  rebuilt. When a seed is configured (``seed`` setting or ``seed:``), the call
  seed is also sent to the model as its sampling seed.
* **Ensembles** (``judges N aggregate AGG``, ``judges [p1, p2] aggregate AGG``):
  one unit per judge (sample ``i`` of the same procedure gets its own call seed,
  hence its own option order, and its own cache entry), aggregated with
  :func:`aggregate`; every vote is in ``provenance["votes"]``.
* **Joint judging** (``llm(joint: true)``, pairwise): the responses are shown
  together, once in the item's order (A, B) and once reversed (B, A); each order
  gives a judgment per candidate, and where the two orders disagree the
  ``joint_disagreement`` policy decides (:data:`DISAGREEMENT_POLICIES`). Both
  orders are in ``provenance["orders"]``.
* **Cache and resume.** Each model call goes through the client's SQLite cache
  (keyed by model, server, messages, schema, temperature, seed, sample); in
  addition the outcome of a whole unit (re-asks included, also when it ended
  invalid) is stored under a key derived from its first request, so a rerun
  makes no call for anything already decided. Failed calls (the server down
  after every retry) are not stored: a rerun tries them again.
* **Failures.** A call that fails after the client's retries makes that
  judgment invalid; the run goes on. A client refused for its key or model
  (401/403/404), or whose first 20 calls all failed, is stopped and its
  remaining judgments fail at once; :meth:`LLMJudge.report` says so loudly.
* **Accounting.** :meth:`LLMJudge.usage` gives calls, HTTP requests, cache hits,
  prompt and completion tokens, re-asks, refusals and failures; every judgment's
  provenance holds its own tokens, latency, model, seed and cache flag.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import statistics
import time
from collections import Counter
from typing import Any, Sequence

import attrs

from gsrlang.files.dataset import Candidate, Item
from gsrlang.judges.llm.cache import JudgmentCache
from gsrlang.judges.llm.client import ChatRequest, ClientPool, JudgeCallError, LLMClient, Usage, describe_adaptation
from gsrlang.judges.llm.config import OPENAI_DEFAULT_BASE_URL, ConfigError, JudgeSettings
from gsrlang.judges.llm.fewshot import FewShotBank
from gsrlang.judges.llm.jsonparse import STORED_ANSWER_CHARS, AnswerFormatError, RefusalError, clip
from gsrlang.judges.llm.prompts import (MAX_REASON_CHARS, AnswerSpec, Example, OutsideType, PromptParts,
                                        build_joint_messages, build_messages, data_token, joint_keys, reask_message)
from gsrlang.judges.llm.weighted import TOP_LOGPROBS, eligible, read_weighted
from gsrlang.lang.catalog import default_catalog
from gsrlang.lang.program import Node, ProcedureSpec
from gsrlang.lang.types import JType
from gsrlang.semantics.judgment import ABSTAIN, Judgment

__all__ = ["DISAGREEMENT_POLICIES", "LLMJudge", "aggregate", "call_seed", "combine_orders"]

UNIT_VERSION = "gsr-unit/1"
DISAGREEMENT_POLICIES = default_catalog().enums["Disagreement"].members  # declared once, in stdlib/rules.gsr
_OPENAI_REASONING = re.compile(r"^(o1|o3|o4|gpt-5)(-|$)")  # OpenAI's reasoning model families (no logprobs)
FIRST_ANSWER_GUESS = 300  # completion tokens expected of the first call (--budget), before any answer is seen
_TOKENS = ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")  # a unit's token counts
DEAD_AFTER = 20  # consecutive failures with no success ever: stop calling that client
_FATAL_STATUS = (401, 403, 404)


def call_seed(base: int, item_id: str, node_id: str, who: str, sample: int = 0, order: str = "") -> int:
    """The per-call seed (31 bits) of one unit; see the module docstring."""
    digest = hashlib.sha256(f"{base}|{item_id}|{node_id}|{who}|{sample}|{order}".encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


def _value_json(value):
    return None if value is ABSTAIN else value


def _value_from_json(data, status: str):
    return {"abstained": ABSTAIN, "invalid": None}.get(status, data)


# ------------------------------------------------------------------------------------------ units


@attrs.define
class _Outcome:
    """What one call unit (first ask + re-asks) produced, per response key."""

    results: list[dict]  # per response: {"status", "value", "reason", "evidence", "answer"}
    raw: str | None = None
    attempts: list[dict] = attrs.field(factory=list)  # {"raw", "problem"} of each unusable answer
    calls: int = 0  # chat completions asked for (first ask + re-asks)
    requests: int = 0  # HTTP requests (retries included; 0 when every call was cached)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens: from the server's prompt cache
    reasoning_tokens: int = 0  # of completion_tokens: reasoning
    latency_s: float = 0.0
    cached: bool = False
    model: str | None = None
    structured: str | None = None
    refusals: int = 0
    error: str | None = None  # the call failed (not an answer problem)
    weighted: dict | None = None  # llm(weighted: true): the point probabilities and expected value
    not_bought: bool = False  # --budget: the call was not made, the budget would have been passed

    def to_json(self) -> dict:
        d = attrs.asdict(self)
        d["results"] = [{**r, "value": _value_json(r["value"])} for r in self.results]
        return d

    @classmethod
    def replayed(cls, d: dict) -> "_Outcome | None":
        """A stored outcome as a cache hit (no request, token or latency of its own); None when it is damaged."""
        names = {a.name for a in attrs.fields(cls)}
        try:
            d = {**d, "results": [{**r, "value": _value_from_json(r.get("value"), r["status"])} for r in d["results"]]}
            out = cls(**{k: v for k, v in d.items() if k in names})
        except (KeyError, TypeError, ValueError):
            return None
        out.cached, out.requests, out.latency_s = True, 0, 0.0
        out.prompt_tokens = out.completion_tokens = out.cached_tokens = out.reasoning_tokens = 0
        return out


@attrs.define
class _RoleStats:
    units: int = 0
    ok_units: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    first_error: str | None = None
    dead: str | None = None
    prose: int = 0  # units whose every answer held no JSON object
    origin: str = ""
    structured: str = ""


@attrs.define
class _Stats:
    judgments: Counter = attrs.field(factory=Counter)
    units: int = 0
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0  # of the calls whose price is known
    unpriced_calls: int = 0  # calls that spent tokens on a model without a known price
    reasks: int = 0
    refusals: int = 0
    outside_type: int = 0  # units that ended abstained/invalid because no answer fitted
    call_failures: int = 0
    joint_disagreements: int = 0
    latency_s: float = 0.0
    past_deadline: int = 0  # units not called because the run's deadline had passed
    answers_cut: int = 0  # answers longer than STORED_ANSWER_CHARS, kept cut in the trace and cache


# ------------------------------------------------------------------------------------------ aggregation


def _nearest_level(t: JType, value: float) -> str:
    """The level whose value is nearest; ties go to the lower level."""
    best = min(range(len(t.labels)), key=lambda i: (abs(t.values[i] - value), i))
    return t.labels[best]


def aggregate(agg: str, t: JType, votes: Sequence[Judgment], weights: Sequence[float] | None = None) -> Judgment:
    """Combine an ensemble's votes (each a Judgment) into one judgment.

    Abstained and invalid votes are left out; when abstentions are a strict majority of
    the votes of a ``T?`` criterion, the result abstains; with no valid vote left it is
    invalid (or abstained when some vote abstained and the type allows it).
    Bool: ``majority`` / ``weighted`` (more votes / more weight for true than false;
    a tie abstains for ``Bool?`` and otherwise takes the first judge's vote),
    ``unanimous`` (every vote true), ``any`` (some vote true). Ordinal: ``mean`` (the
    mean of the level values, then the nearest level, the lower one on a tie),
    ``median`` (the lower median level), ``mode`` (the most common level, the lower
    on a tie), ``min``, ``max``. Score: ``mean``, ``median``, ``mode`` (the most
    common value, the lowest on a tie), ``min``, ``max``. Nominal: ``mode`` (a tie
    goes to the label voted first).
    """
    n = len(votes)
    ok = [(i, v.value) for i, v in enumerate(votes) if v.status == "ok"]
    abstained = sum(v.status == "abstained" for v in votes)
    if t.optional and abstained * 2 > n:
        return Judgment.abstained(f"{abstained} of {n} judges could not assess")
    if not ok:
        if abstained and t.optional:
            return Judgment.abstained(f"{abstained} of {n} judges could not assess")
        return Judgment.invalid(f"none of the {n} judges gave a valid answer")
    values = [v for _, v in ok]
    how = f"{agg} of {len(ok)} vote{'s' if len(ok) != 1 else ''}"
    if t.kind == "bool":
        if agg in ("majority", "weighted"):
            w = [1.0] * n if agg == "majority" else [float(x) for x in (weights or [1.0] * n)]
            yes = sum(w[i] for i, v in ok if v is True)
            no = sum(w[i] for i, v in ok if v is False)
            if yes == no:
                if t.optional:
                    return Judgment.abstained(f"{how}: a tie")
                return Judgment.ok(ok[0][1], f"{how}: a tie, the first judge's vote")
            return Judgment.ok(yes > no, f"{how}: {yes:g} for true, {no:g} for false")
        if agg == "unanimous":
            return Judgment.ok(all(values), how)
        if agg == "any":
            return Judgment.ok(any(values), how)
    elif t.kind == "ordinal":
        idx = sorted(t.labels.index(v) for v in values)
        if agg == "mean":
            return Judgment.ok(_nearest_level(t, statistics.fmean(t.values[i] for i in idx)), how)
        picked = {"median": idx[(len(idx) - 1) // 2], "mode": _lowest_mode(idx), "min": idx[0], "max": idx[-1]}
        if agg in picked:
            return Judgment.ok(t.labels[picked[agg]], how)
    elif t.kind == "score":
        xs = [float(v) for v in values]
        picked = {"mean": min(t.hi, max(t.lo, statistics.fmean(xs))), "median": float(statistics.median(xs)),
                  "mode": _lowest_mode(xs), "min": min(xs), "max": max(xs)}
        if agg in picked:
            return Judgment.ok(picked[agg], how)
    elif t.kind == "nominal" and agg == "mode":
        counts = Counter(values)
        top = max(counts.values())
        return Judgment.ok(next(v for v in values if counts[v] == top), how)
    return Judgment.invalid(f"`{agg}` cannot aggregate `{t}` votes")


def _lowest_mode(values: Sequence) -> Any:
    """The most common of `values`, the lowest on a tie."""
    counts = Counter(values)
    top = max(counts.values())
    return min(v for v, c in counts.items() if c == top)


def combine_orders(policy: str, t: JType, first: Judgment, second: Judgment) -> tuple[Judgment, str]:
    """One candidate's judgment from the two orders of joint judging, and how they related.

    Agreeing orders give their value. When only one order gave a valid answer it is used.
    When they disagree: ``mean`` averages (Score: the mean; Ordinal: the level nearest to
    the mean of the two values, the lower on a tie; Bool and Nominal cannot be averaged
    and are treated as ``abstain``), ``first`` keeps the item's order (A, B), ``abstain``
    abstains for a ``T?`` criterion and is invalid otherwise, ``invalid`` is invalid.
    """
    if first.status == "ok" and second.status == "ok":
        if first.value == second.value:
            return Judgment.ok(first.value, first.reason), "agree"
        why = "the two orders disagree"
        if policy == "first":
            return Judgment.ok(first.value, f"{why}; kept the first order's answer"), "disagree"
        if policy == "mean" and t.kind == "score":
            return Judgment.ok((float(first.value) + float(second.value)) / 2, f"{why}; their mean"), "disagree"
        if policy == "mean" and t.kind == "ordinal":
            mean = (t.level_value(first.value) + t.level_value(second.value)) / 2
            return Judgment.ok(_nearest_level(t, mean), f"{why}; the level nearest their mean"), "disagree"
        if policy == "invalid" or not t.optional:
            return Judgment.invalid(f"{why} ({first.value!r} vs {second.value!r})"), "disagree"
        return Judgment.abstained(f"{why} ({first.value!r} vs {second.value!r})"), "disagree"
    if first.status == "ok" or second.status == "ok":
        one = first if first.status == "ok" else second
        return Judgment.ok(one.value, one.reason), "one order"
    if first.status == "abstained" and second.status == "abstained":
        return Judgment.abstained(first.reason), "agree"
    if t.optional and "abstained" in (first.status, second.status):
        return Judgment.abstained(first.reason or second.reason), "one order"
    return Judgment.invalid(first.reason or second.reason or "no valid answer in either order"), "none"


# ------------------------------------------------------------------------------------------ the judge


class LLMJudge:
    """Judges ``llm`` criteria through OpenAI-compatible servers (see the module docstring).

    Who bounds what: the run's ``concurrency`` (judge calls in flight, the resolved default model's
    setting) is the run's one `CallLimit` (gsrlang.execution.planner), held by the executor around each
    judge call, which also fixes the order calls start in, and so the trace's bytes; a call that gets
    its turn after the judge stopped (a fatal error, the deadline, the budget) fails at once, uncalled.
    Each client's adaptive window (at most its model's ``concurrency``, lowered on 429s) bounds its HTTP
    requests, an ensemble's or a joint call's fan-out included: the server's rate limit."""

    inline = False

    def __init__(self, settings: JudgeSettings, *, cache: JudgmentCache | None = None,
                 fewshot: FewShotBank | None = None, max_reasks: int = 2, joint_disagreement: str = "mean",
                 seed: int | None = None, pool: ClientPool | None = None, owns_cache: bool = False,
                 deadline_s: float | None = None, weighted: bool = False, price_overrides: dict | None = None,
                 budget_usd: float | None = None, plan=None, **client_kwargs: Any) -> None:
        if joint_disagreement not in DISAGREEMENT_POLICIES:
            raise ConfigError(f"joint disagreement policy must be one of {', '.join(DISAGREEMENT_POLICIES)}, "
                              f"got {joint_disagreement!r}")
        if max_reasks < 0:
            raise ConfigError(f"max_reasks must be >= 0, got {max_reasks}")
        if deadline_s is not None and not deadline_s > 0:
            raise ConfigError(f"--deadline must be a positive number of seconds, got {deadline_s:g}")
        self.deadline_s = deadline_s
        self.weighted = weighted  # --weighted: every Score criterion that can be weighted is
        self._started = time.monotonic()
        self.settings = settings
        self.cache = cache
        self._owns_cache = owns_cache
        self.fewshot = fewshot
        self.max_reasks = max_reasks
        self.joint_disagreement = joint_disagreement
        self.seed = seed if seed is not None else (settings.default.seed or 0)
        if deadline_s is not None:  # a call in flight at the deadline is cut there
            client_kwargs.setdefault("deadline_at", self._started + deadline_s)
        self.pool = pool or ClientPool(settings, cache, **client_kwargs)
        self.stats = _Stats()
        self._roles: dict[str, _RoleStats] = {}
        self._closed_usage = Usage()
        self._closed_modes: dict[str, str] = {}
        self._closed_adapted: dict[str, list[str]] = {}
        self._by_judge: dict[str, dict] = {}
        self._by_criterion: dict[str, dict] = {}
        self._declared: dict[str, int] = {}  # criterion id -> its place in the programs checked (usage's order)
        self._prices: dict = {}
        self.price_overrides = price_overrides
        self.batch_pricing = False  # gsr run --batch (and its --dry-run): calls cost the Batch API's price
        if budget_usd is not None and not (budget_usd > 0 and budget_usd != float("inf")):
            raise ConfigError(f"--budget must be a positive number of US dollars, got {budget_usd!r}")
        self.budget_usd = budget_usd  # stop buying calls when spend + calls in flight would pass it
        self.spent_usd = 0.0  # dollars of the calls made so far (for --budget)
        self._reserved = 0.0  # the expected dollars of the calls in flight
        self._answers = [0, 0]  # completion tokens and calls so far: the expected length of the next answer
        self.stopped_by_budget: str | None = None
        self.plan = plan  # gsr run --dry-run: a gsrlang.judges.llm.plan.CallPlan; calls are counted, never made
        self._fewshot_used: set[str] = set()

    # ---------------------------------------------------------------- interface
    def validate(self, node: Node) -> str | None:
        """Why this judge cannot answer `node` (None: it can); the registry asks in program order, which is the
        order of usage's `by_criterion`."""
        self._declared.setdefault(node.id, len(self._declared))
        if node.criterion is None:
            return f"`{node.id}` is not a criterion"
        for proc in self._procedures(node):
            if proc.args.get("weighted") and eligible(node.type) is not None:
                return f"criterion `{node.id}`: {eligible(node.type)}"
            role = proc.args.get("role")
            try:
                config = self.settings.for_role(role)
            except ConfigError as exc:
                return f"criterion `{node.id}`: {exc}"
            if proc.args.get("weighted", self.weighted and eligible(node.type) is None):
                if why := self._no_logprobs(role, config):
                    flag = "llm(weighted: true)" if proc.args.get("weighted") else "--weighted"
                    return (f"criterion `{node.id}`: {flag} reads the answer's logprobs, and {why}: drop it (the "
                            "written answer is used), or judge with a model that returns logprobs "
                            "(`gsr probe` shows whether one does)")
        if node.type.kind not in ("bool", "score", "ordinal", "nominal"):
            return f"criterion `{node.id}`: the LLM judge cannot answer `{node.type}`"
        return self.fewshot.problem(node.id, node.type.required()) if self.fewshot is not None else None

    def _no_logprobs(self, role: str | None, config) -> str | None:
        """Why the role's model gives no logprobs, known before any call: the negotiation record (an earlier
        refusal, or `gsr probe`) says so, or it is one of OpenAI's reasoning models, which refuse them."""
        if (client := self.pool.for_role(role)).logprobs_refused:
            return f"model {config.model!r} at {client.origin} returns none (its negotiation record says so)"
        if config.effective_base_url.rstrip("/") == OPENAI_DEFAULT_BASE_URL and _OPENAI_REASONING.match(config.model):
            return f"{config.model!r} is an OpenAI reasoning model, which returns none"
        return None

    async def judge(self, node: Node, item: Item, candidate: Candidate) -> Judgment:
        procs = self._procedures(node)
        votes = await asyncio.gather(*(self._single(node, item, candidate, p, i) for i, p in enumerate(procs)))
        return self._finish(node, list(votes))

    async def judge_joint(self, node: Node, item: Item) -> tuple[Judgment, ...]:
        procs = self._procedures(node)
        if len(item.candidates) < 2:
            return tuple([await self.judge(node, item, c) for c in item.candidates])

        async def vote(proc: ProcedureSpec, sample: int) -> list[Judgment]:
            if proc.args.get("joint"):
                return await self._joint(node, item, proc, sample)
            return list(await asyncio.gather(*(self._single(node, item, c, proc, sample) for c in item.candidates)))

        per_vote = await asyncio.gather(*(vote(p, i) for i, p in enumerate(procs)))
        return tuple(self._finish(node, [v[k] for v in per_vote]) for k in range(len(item.candidates)))

    async def aclose(self) -> None:
        """Close the HTTP clients (and the cache, when this judge opened it)."""
        self._closed_usage = self._closed_usage + self.pool.usage  # the pool forgets its clients on close
        self._closed_modes = self.structured_modes()
        self._closed_adapted = self.adaptations()
        await self.pool.aclose()
        if self._owns_cache and self.cache is not None:
            self.cache.close()

    # ---------------------------------------------------------------- accounting
    def usage(self) -> dict:
        """Counters for the run summary and the trace (calls, requests, cache hits, tokens, ...)."""
        s = self.stats
        transport = self._closed_usage + self.pool.usage
        return {
            "judgments": sum(s.judgments.values()),
            **{status: s.judgments[status] for status in ("ok", "abstained", "invalid")},
            "calls": s.calls, "http_requests": transport.http_requests, "merged": transport.merged,
            "cache_hits": s.cache_hits,
            **{k: getattr(s, k) for k in ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")},
            "cost_usd": None if s.unpriced_calls else round(s.cost_usd, 9),
            "retries": transport.retries, "rate_limited": transport.rate_limited,
            "lowest_concurrency": min((c.window.lowest for c in self.pool.clients), default=None),
            **{k: getattr(s, k) for k in ("reasks", "refusals", "outside_type", "call_failures", "joint_disagreements",
                                          "past_deadline")},
            "model_latency_s": round(s.latency_s, 3),
            "structured": self.structured_modes(), "adapted": self.adaptations(),
            "by_judge": {k: _rounded(v) for k, v in sorted(self._by_judge.items())},
            "by_criterion": {k: _rounded(self._by_criterion[k]) for k in self._criteria_order()},
        }

    def _criteria_order(self) -> list[str]:
        """The criteria with calls, in the order of the programs checked (then by name): never the order their
        first answers came back in, which is the server's timing."""
        last = len(self._declared)
        return sorted(self._by_criterion, key=lambda k: (self._declared.get(k, last), k))

    def adaptations(self) -> dict[str, list[str]]:
        """{"MODEL at ORIGIN": ["temperature dropped (...)", ...]}: the refused parameters adapted for each
        client used so far, with whether the negotiation record already had them."""
        out = dict(self._closed_adapted)
        for client in self.pool.clients:
            if client.adapted:
                out[f"{client.config.model} at {client.origin}"] = [
                    describe_adaptation(p, a) + ("" if p in client.adapted_now else " (remembered)")
                    for p, a in sorted(client.adapted.items())]
        return out

    def price(self, client: LLMClient):
        """The client's model's price (gsrlang.judges.llm.prices), or None when unknown."""
        key = (client.config.model, client.config.base_url, self.batch_pricing)
        if key not in self._prices:
            from gsrlang.judges.llm.prices import price_of

            self._prices[key] = price_of(client.config.model, client.config.base_url, overrides=self.price_overrides,
                                         batch=self.batch_pricing)
        return self._prices[key]

    def _account(self, client: LLMClient, role: str, node_id: str, out: "_Outcome", cache_hits: int) -> None:
        """Add a unit's calls and tokens to the totals, its judge's and its criterion's, with their dollars."""
        s = self.stats
        for k in _TOKENS:
            setattr(s, k, getattr(s, k) + getattr(out, k))
        spent = out.prompt_tokens or out.completion_tokens
        price = self.price(client) if spent else None
        cost = price.cost(out.prompt_tokens, out.cached_tokens, out.completion_tokens) if price else None
        if spent and cost is None:
            s.unpriced_calls += 1
        elif cost:
            s.cost_usd += cost
        rows = [self._by_judge.setdefault(role, {"model": client.config.model, **_zero()}),
                self._by_criterion.setdefault(node_id, _zero())]
        for row in rows:
            row["calls"] += out.calls
            row["cache_hits"] += cache_hits
            for k in _TOKENS:
                row[k] += getattr(out, k)
            if spent and cost is None:
                row["cost_usd"] = None
            elif cost and row["cost_usd"] is not None:
                row["cost_usd"] += cost

    def past_deadline(self) -> bool:
        return self.deadline_s is not None and time.monotonic() - self._started > self.deadline_s

    def pace(self) -> dict:
        """Progress figures for the progress display: completion tokens per second so far, and the deadline."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        return {"tokens_per_s": self.stats.completion_tokens / elapsed, "elapsed_s": elapsed,
                "deadline_s": self.deadline_s}

    def structured_modes(self) -> dict[str, str]:
        """{"MODEL at ORIGIN": "MODE (negotiated|remembered|forced)"} for every client used so far."""
        modes = dict(self._closed_modes)
        for client in self.pool.clients:
            how = "forced" if client.config.structured != "auto" else (client.negotiation or "not yet negotiated")
            modes[f"{client.config.model} at {client.origin}"] = f"{client.structured_mode} ({how})"
        return modes

    def report(self) -> list[str]:
        """Loud lines about judges that failed (empty when every judge answered)."""
        lines = []
        for role, rs in sorted(self._roles.items()):
            if not rs.failures:
                continue
            cfg = self.settings.for_role(None if role == "default" else role)
            who = f"judge {role!r} (model {cfg.model!r})"
            failed = (f"EVERY call failed ({rs.failures} of {rs.units})" if rs.ok_units == 0
                      else f"{rs.failures} of {rs.units} calls failed")
            lines.append(f"{who}: {failed}; first error: {rs.first_error}")
            if rs.dead:
                lines.append(f"{who}: stopped calling it: {rs.dead}")
        for role, rs in sorted(self._roles.items()):
            if rs.prose:
                cfg = self.settings.for_role(None if role == "default" else role)
                fix = ("try --structured grammar (a server that takes GBNF) or a larger model" if rs.structured == "off"
                       else f"its server does not enforce --structured {rs.structured} (`gsr probe` shows what it "
                            "enforces); use a mode it enforces or a larger model")
                lines.append(f"judge {role!r} (model {cfg.model!r} at {rs.origin}): {rs.prose} of {rs.units} "
                             f"judgments got prose, not JSON, after every re-ask: {fix}")
        if n := self.stats.answers_cut:
            lines.append(f"{n} model answer{'s were' if n != 1 else ' was'} longer than the {STORED_ANSWER_CHARS} "
                         "characters gsr keeps: the trace and the cache hold the start, marked \"[cut by gsr to "
                         f"{STORED_ANSWER_CHARS} characters]\" (the verdicts were read from the whole answers)")
        if self.fewshot is not None and self._fewshot_used:
            if unused := sorted(self.fewshot.criteria() - self._fewshot_used):
                lines.append(f"few-shot file {self.fewshot.source}: no model-judged criterion is called "
                             f"{', '.join(unused)}; those examples were not used")
        if (unstored := getattr(self.cache, "unstored_warning", None)) is not None and unstored():
            lines.append(unstored())
        return lines

    @property
    def failed_every_call(self) -> bool:
        return any(rs.failures and not rs.ok_units for rs in self._roles.values())

    # ---------------------------------------------------------------- internals
    def _procedures(self, node: Node) -> tuple[ProcedureSpec, ...]:
        spec = node.criterion
        return tuple(spec.ensemble.judges) if spec.ensemble is not None else (spec.procedure,)

    def _finish(self, node: Node, votes: list[Judgment]) -> Judgment:
        spec = node.criterion
        if spec.ensemble is None:
            j = votes[0]
        else:
            ens = spec.ensemble
            agg = aggregate(ens.aggregate, node.type, votes, ens.args.get("weights"))
            prov = {
                "procedure": "ensemble", "aggregate": ens.aggregate,
                "votes": [{"value": _value_json(v.value), "status": v.status, "reason": v.reason, "raw": v.raw,
                           **v.provenance} for v in votes],
                "model": ",".join(dict.fromkeys(str(v.provenance.get("model")) for v in votes)),
                **_totals([v.provenance for v in votes]),
            }
            if ens.args.get("weights") is not None:
                prov["weights"] = list(ens.args["weights"])
            j = attrs.evolve(agg, provenance=prov)
        self.stats.judgments[j.status] += 1
        return j

    def _parts(self, node: Node, item: Item, spec: AnswerSpec, exclude: Sequence[str]) -> PromptParts:
        crit = node.criterion
        examples = [Example(e.text, e.verdict, e.reason) for e in crit.examples]
        if self.fewshot is not None:
            self._fewshot_used.add(node.id)
            examples += self.fewshot.examples_for(node.id, node.type.required())
        examples = [e for e in examples if e.text not in exclude]
        token = data_token(self.seed, [item.id, item.input, item.reference, *(c.text for c in item.candidates)])
        return PromptParts(crit.ask, spec, item.input, item.reference, token, tuple(examples))

    async def _ask(self, node: Node, item: Item, proc: ProcedureSpec, sample: int, texts: list[str], who: str,
                   order: str = "") -> tuple[int, str, AnswerSpec, _Outcome]:
        """The call unit of `proc` judging `texts` (one response, or the responses of a joint call's `order`):
        its call seed, role, answer spec and outcome."""
        seed = call_seed(self._base_seed(proc), item.id, node.id, who, sample, order)
        role = proc.args.get("role")
        client = self.pool.for_role(role)
        rng = random.Random(seed) if proc.args.get("shuffle", True) else None
        weighted = bool(proc.args.get("weighted", self.weighted and eligible(node.type) is None))
        spec = AnswerSpec.build(node.type, node.criterion.levels, rng=rng, evidence=bool(proc.args.get("evidence")),
                                weighted=weighted)
        send_seed = "seed" in proc.args or client.config.seed is not None
        opts = {"temperature": proc.args.get("temperature"), "seed": seed if send_seed else None}
        parts = self._parts(node, item, spec, texts)
        messages = build_joint_messages(parts, texts) if order else build_messages(parts, texts[0])
        out = await self._unit(client, role or "default", messages, spec, joint_keys(len(texts)) if order else None,
                               sample, opts, node.id)
        return seed, role or "default", spec, out

    def _base_seed(self, proc: ProcedureSpec) -> int:
        s = proc.args.get("seed")
        return int(s) if s is not None else self.seed

    async def _single(self, node: Node, item: Item, candidate: Candidate, proc: ProcedureSpec, sample: int) -> Judgment:
        seed, role, spec, out = await self._ask(node, item, proc, sample, [candidate.text], candidate.id)
        r = out.results[0]
        prov = self._provenance(proc, role, seed, spec, out)
        if out.weighted is not None and r["status"] == "ok":
            prov["weighted"] = {**out.weighted, "written": r["value"]}
            if "expected" in out.weighted:
                r = {**r, "value": float(out.weighted["expected"])}
        if r.get("evidence"):
            prov["evidence"] = r["evidence"]
            prov["evidence_found"] = [q.strip() in candidate.text for q in r["evidence"]]
        return Judgment(r["value"], r["status"], r.get("reason"), out.raw, prov)

    async def _joint(self, node: Node, item: Item, proc: ProcedureSpec, sample: int) -> list[Judgment]:
        cands = list(item.candidates)
        orders = [cands, cands[::-1]]  # each named by its candidates' ids ("AB", "BA")
        done = await asyncio.gather(*(self._ask(node, item, proc, sample, [c.text for c in o], "joint",
                                                "".join(c.id for c in o)) for o in orders))
        policy = str(proc.args.get("on_disagree") or self.joint_disagreement)  # the criterion's own, else the run's
        judgments = []
        for k, cand in enumerate(cands):
            per_order, records = [], []
            for order, (seed, role, spec, out) in zip(orders, done):
                pos = [c.id for c in order].index(cand.id)
                r = out.results[pos]
                per_order.append(Judgment(r["value"], r["status"], r.get("reason"), out.raw))
                rec = {"candidates": [c.id for c in order], "position": pos + 1, "value": _value_json(r["value"]),
                       "status": r["status"], "reason": r.get("reason"), "answer": r.get("answer"),
                       "raw": out.raw, **self._provenance(proc, role, seed, spec, out)}
                if k > 0:  # the calls are shared: count their tokens on the first candidate only
                    rec.update(tokens={"prompt": 0, "completion": 0}, calls=0, calls_shared_with=cands[0].id)
                if r.get("evidence"):
                    rec["evidence"] = r["evidence"]
                records.append(rec)
            j, relation = combine_orders(policy, node.type, per_order[0], per_order[1])
            if relation == "disagree" and k == 0:
                self.stats.joint_disagreements += 1
            prov = {"procedure": proc.describe(), "joint": True, "policy": policy, "agreement": relation,
                    "orders": records, "model": records[0].get("model"), "seed": records[0].get("seed"),
                    **_totals(records)}  # the calls are counted on the first candidate only
            judgments.append(Judgment(j.value, j.status, j.reason, records[0]["raw"], prov))
        return judgments

    def _provenance(self, proc: ProcedureSpec, role: str, seed: int, spec: AnswerSpec, out: _Outcome) -> dict:
        prov: dict[str, Any] = {"procedure": proc.describe(), "role": role, "model": out.model, "seed": seed,
                                "tokens": _tokens(out), "latency_s": round(out.latency_s, 4), "cached": out.cached,
                                "calls": out.calls}
        if out.structured:
            prov["structured"] = out.structured
        if spec.options:
            prov["order"] = spec.order
        if len(out.results) == 1 and out.results[0].get("answer") is not None:
            prov["answer"] = out.results[0]["answer"]
        if out.calls > 1:
            prov["reasks"] = out.calls - 1
        if out.attempts:
            prov["attempts"] = out.attempts
        if out.error:
            prov["error"] = out.error
        if out.not_bought:
            prov["not_bought"] = True
        return prov

    # ---------------------------------------------------------------- --budget
    def _reserve(self, client: LLMClient, request: ChatRequest) -> float | None:
        """The expected dollars of this call, now counted as in flight; None (and the judge stopped for good)
        when the spend so far plus the calls in flight plus this one would pass the budget."""
        if self.stopped_by_budget is None:
            price = self.price(client)
            from gsrlang.judges.llm.plan import estimate_tokens

            tokens, calls = self._answers
            completion = tokens / calls if calls else (client.config.max_tokens or FIRST_ANSWER_GUESS)
            expected = price.cost(estimate_tokens(client.request_body(request)), 0, int(completion)) if price else 0.0
            if self.spent_usd + self._reserved + expected <= self.budget_usd:
                self._reserved += expected
                return expected
            from gsrlang.judges.llm.prices import dollars

            self.stopped_by_budget = (
                f"the --budget of {dollars(self.budget_usd)} would be passed (spent {dollars(self.spent_usd)}, "
                f"{dollars(self._reserved)} in flight, this call about {dollars(expected)})")
        return None

    def _count_tokens(self, client: LLMClient, out: _Outcome, prompt: int, completion: int, cached: int,
                      reasoning: int, bought: bool = True) -> None:
        """Add a call's tokens to its unit's; a call `bought` now (not answered by the cache) also counts for
        --budget: its dollars, and its answer's length (the expected length of the next)."""
        for k, n in zip(_TOKENS, (prompt, cached, completion, reasoning)):
            setattr(out, k, getattr(out, k) + n)
        if not bought:
            return
        self._answers[0] += completion
        self._answers[1] += 1
        if (price := self.price(client) if self.budget_usd is not None else None) is not None:
            self.spent_usd += price.cost(prompt, cached, completion)

    def budget_cut(self, run) -> bool:
        """Whether an item lost a judgment to the budget (its result is not written: see gsr run --budget)."""
        return self.stopped_by_budget is not None and any(
            _not_bought(j.provenance) for row in run.judgments.values() for j in row)

    async def _unit(self, client: LLMClient, role: str, messages: list[dict], spec: AnswerSpec,
                    keys: list[str] | None, sample: int, opts: dict, node_id: str) -> _Outcome:
        request = ChatRequest(messages=messages, schema=spec.schema(keys), temperature=opts["temperature"],
                              seed=opts["seed"], sample=sample,
                              top_logprobs=TOP_LOGPROBS if spec.weighted and keys is None else None)
        stats = self.stats
        stats.units += 1
        rs = self._roles.setdefault(role, _RoleStats())
        rs.units += 1
        unit_key = None
        if self.cache is not None:
            unit_key = hashlib.sha256(
                f"{UNIT_VERSION}|{request.cache_key(client.config)}|{self.max_reasks}".encode()).hexdigest()
            hit = self.cache.get("unit:" + unit_key)
            if hit is not None and (out := _Outcome.replayed(hit)) is not None:
                stats.calls += out.calls
                stats.cache_hits += out.calls
                rs.ok_units += 1
                self._account(client, role, node_id, out, out.calls)
                if self.plan is not None:
                    self.plan.add(node_id, client, None, cached=True)
                return out
        n_out = len(keys) if keys else 1
        out = _Outcome([], model=client.config.model)
        if self.plan is not None:  # a dry run: count the call (merged with an identical one already counted)
            self.plan.add(node_id, client, request)
            return self._failed(n_out, "not called: a dry run (--dry-run)", out)
        all_cached = True
        hits = 0  # calls of this unit answered from the call cache
        last_results: list[dict] | None = None
        for attempt in range(self.max_reasks + 1):
            before = client.usage.http_requests
            problem = None
            try:
                if rs.dead:  # checked once the run's limit lets the call start: queued calls see an earlier fatal error
                    stats.call_failures += 1
                    rs.failures += 1
                    return self._failed(n_out, f"not called: {rs.dead}", out)
                if self.past_deadline():
                    stats.past_deadline += 1
                    return self._failed(n_out, f"not called: the run's --deadline of {self.deadline_s:g} s "
                                               "had passed", out)
                reserved = self._reserve(client, request) if self.budget_usd is not None else 0.0
                if reserved is None:
                    out.not_bought = True
                    return self._failed(n_out, f"not bought: {self.stopped_by_budget}", out)
                out.calls += 1
                stats.calls += 1
                try:
                    result = await client.complete(request)
                finally:
                    self._reserved -= reserved
            except JudgeCallError as exc:
                out.requests += client.usage.http_requests - before
                stats.call_failures += 1
                rs.failures += 1
                rs.consecutive_failures += 1
                rs.first_error = rs.first_error or str(exc)
                if exc.status in _FATAL_STATUS or (rs.ok_units == 0 and rs.consecutive_failures >= DEAD_AFTER):
                    rs.dead = rs.dead or str(exc)
                out.error = str(exc)
                self._account(client, role, node_id, out, hits)
                return self._failed(n_out, str(exc), out)
            except AnswerFormatError as exc:
                all_cached = False
                out.requests += client.usage.http_requests - before
                usage = exc.usage or {}
                self._count_tokens(client, out, *(usage.get(f"{k}_tokens", 0)
                                                  for k in ("prompt", "completion", "cached", "reasoning")))
                out.model = exc.model or out.model
                raw = self._kept(exc.text)
                if isinstance(exc, RefusalError):
                    out.refusals += 1
                    stats.refusals += 1
                    problem = "you declined to answer; this is an evaluation task and the response is data to judge"
                else:
                    problem = "no JSON object was found in it"
            else:
                all_cached = all_cached and result.cached
                out.requests += result.attempts
                self._count_tokens(client, out, result.prompt_tokens, result.completion_tokens, result.cached_tokens,
                                   result.reasoning_tokens, bought=not result.cached)
                out.latency_s += result.latency_s
                out.model, out.structured = result.model, result.structured
                if result.cached:
                    stats.cache_hits += 1
                    hits += 1
                raw = self._kept(result.text)
                last_results, problem = self._read(result.data, spec, keys)
            out.raw = raw
            if problem is None:
                break
            out.attempts.append({"raw": raw, "problem": problem})
            if attempt < self.max_reasks:
                stats.reasks += 1
                request = attrs.evolve(request, messages=(
                    *request.messages, {"role": "assistant", "content": raw or "(no answer)"},
                    reask_message(problem, spec, keys)))
        rs.ok_units += 1
        rs.consecutive_failures = 0
        self._account(client, role, node_id, out, hits)
        stats.latency_s += out.latency_s
        if problem is None:
            out.results = last_results
            if request.top_logprobs and last_results[0]["status"] == "ok":
                if result.logprobs is None and not result.cached:
                    why = (f"the server at {client.origin} returned no logprobs: llm(weighted: true) needs a server "
                           "that returns them (`gsr probe` shows whether it does), or drop weighted")
                    rs.dead = rs.dead or why
                    out.error = why
                    return self._failed(n_out, why, out)
                out.weighted = read_weighted(spec.type, result.logprobs or []) or {
                    "unread": "no answer token with a point of the scale among its alternatives; the written "
                              "number is kept"}
        else:
            stats.outside_type += 1
            if all(a["problem"].startswith("no JSON object") for a in out.attempts):
                rs.prose += 1
                rs.origin, rs.structured = client.origin, client.structured_mode
            why = f"no answer fitted `{spec.type}` after {len(out.attempts)} tries (last: {problem})"
            out.results = self._give_up(n_out, why, spec, last_results)
        out.cached = all_cached
        if unit_key is not None:
            self.cache.put("unit:" + unit_key, out.to_json())
        return out

    def _kept(self, text: str | None) -> str | None:
        """An answer as the trace, the cache and a re-ask keep it: cut past STORED_ANSWER_CHARS, saying so."""
        if text is None or len(text) <= STORED_ANSWER_CHARS:
            return text
        self.stats.answers_cut += 1
        return clip(text, STORED_ANSWER_CHARS)

    def _read(self, data, spec: AnswerSpec, keys: list[str] | None) -> tuple[list[dict] | None, str | None]:
        """Per-response results when every response's answer fits, else (partial results, the problem)."""
        if keys is not None and not isinstance(data, dict):
            return None, "expected a JSON object"
        objs = [data] if keys is None else [data.get(k) for k in keys]
        results: list[dict] = []
        problems = []
        for k, obj in enumerate(objs):
            try:
                value, reason, evidence = spec.read(obj)
                status = "abstained" if value is ABSTAIN else "ok"
            except OutsideType as exc:
                problems.append((f"{keys[k]}: " if keys else "") + str(exc))
                status, value, reason, evidence = "invalid", None, str(exc), []
            results.append({"status": status, "value": value, "reason": reason, "evidence": evidence,
                            "answer": _answer_field(obj)})
        return results, ("; ".join(problems) if problems else None)

    def _give_up(self, n: int, why: str, spec: AnswerSpec, partial: list[dict] | None) -> list[dict]:
        status = "abstained" if spec.optional else "invalid"
        given = [partial[k] if partial is not None and k < len(partial) else None for k in range(n)]
        # in joint mode one response's answer may fit while the other's does not
        return [r if r is not None and r["status"] != "invalid" else
                {"status": status, "value": ABSTAIN if status == "abstained" else None, "reason": why, "evidence": [],
                 "answer": r.get("answer") if r else None} for r in given]

    def _failed(self, n: int, why: str, out: _Outcome) -> _Outcome:
        out.results = [{"status": "invalid", "value": None, "reason": why, "evidence": [], "answer": None}
                       for _ in range(n)]
        out.error = out.error or why
        return out


def _not_bought(prov) -> bool:
    """Whether a judgment's provenance, or a vote's or an order's in it, says the budget did not buy its call."""
    return isinstance(prov, dict) and (bool(prov.get("not_bought")) or any(
        _not_bought(v) for key in ("votes", "orders") for v in prov.get(key) or ()))


def _tokens(out: "_Outcome") -> dict:
    """A judgment's tokens for its provenance: prompt and completion, and the cached and reasoning parts when a
    server reported them (absent otherwise, so traces of servers that report none are unchanged)."""
    return {"prompt": out.prompt_tokens, "completion": out.completion_tokens,
            **{k: n for k, n in (("cached", out.cached_tokens), ("reasoning", out.reasoning_tokens)) if n}}


def _totals(parts: Sequence[dict]) -> dict:
    """The tokens, latency, cache flag and calls of a judgment made of several (an ensemble's votes, a joint
    judgment's orders), from their provenances."""
    return {"tokens": {k: sum(p.get("tokens", {}).get(k, 0) for p in parts) for k in ("prompt", "completion")},
            "latency_s": max((p.get("latency_s", 0.0) for p in parts), default=0.0),
            "cached": all(p.get("cached") for p in parts),
            "calls": sum(p.get("calls", 0) for p in parts)}


def _zero() -> dict:
    return {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0,
            "reasoning_tokens": 0, "cost_usd": 0.0}


def _rounded(row: dict) -> dict:
    return {**row, "cost_usd": None if row.get("cost_usd") is None else round(row["cost_usd"], 9)}


def _answer_field(obj):
    if isinstance(obj, dict):
        value = obj.get("answer")
        if isinstance(value, str):
            return clip(value, MAX_REASON_CHARS)
        if isinstance(value, (int, float, bool)) or value is None:
            return value
        return clip(json.dumps(value), MAX_REASON_CHARS)
    return None
