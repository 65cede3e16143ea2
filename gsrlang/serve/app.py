"""The reward server's HTTP application (Starlette): routes, request validation, the token, the body cap.

Every route answers JSON. A request that cannot be used gets 400 with
`{"error": {"message": ..., "field": "items[2].response"}}` naming the field (401 without the token, 413
past the body cap, 504 past a deadline under the `fail` policy); every scoring response names the program
that scored it (`"program": {"name", "hash"}`). The request schemas are in docs/rewards.md.

No request names a file: a request carries texts and data, and the only files the server reads or writes
are the ones its command line named (the program, the judgment cache, the trace).
"""

from __future__ import annotations

import functools
import hmac
import time
from collections.abc import Mapping

import attrs

from gsrlang.files.jsonl import json_type
from gsrlang.lang.types import is_finite_number
from gsrlang.serve.group import NORMALIZE, normalize, round_robin, win_rates

__all__ = ["Options", "RequestError", "build_app"]

POLICIES = ("fail", "default")
SCALES = ("unit", "native")
MiB = 1 << 20


@attrs.define
class Options:
    """The server's settings; a request may override the scoring ones (deadline_s, on_deadline, ...)."""

    token: str | None = None
    max_body: int = 8 * MiB
    max_items: int = 10_000
    deadline_s: float | None = None
    on_deadline: str = "fail"
    default_reward: float = 0.0
    failure_value: float | None = 0.0
    scale: str = "unit"


class RequestError(Exception):
    """A request that cannot be used: 400 (or `status`), naming the field."""

    def __init__(self, message: str, field: str | None = None, status: int = 400, extra: dict | None = None):
        super().__init__(message)
        self.field = field
        self.status = status
        self.extra = extra or {}


# ---- reading requests --------------------------------------------------------------------------------------
_type_name = functools.partial(json_type, article=False)  # `got object`


def text_field(value, field: str, *, completion: bool, optional: bool = False) -> str | None:
    """A text field: a string, or a conversation (a list of {"role", "content"} messages)."""
    if type(value) is str:
        return value
    if value is None and optional:
        return None
    from gsrlang.reward import text_field as conversation_text
    try:
        return conversation_text(value, "completion" if completion else "prompt", 0)
    except Exception:
        raise RequestError(f"`{field}` must be a string or a list of {{\"role\", \"content\"}} messages, got "
                           f"{_type_name(value)}", field) from None


def _number(body: Mapping, key: str, default, *, low=None, allow_null=False, where: str = ""):
    if key not in body:
        return default
    v = body[key]
    field = where + key
    if v is None and allow_null:
        return None
    if not is_finite_number(v):
        raise RequestError(f"`{field}` must be a finite number{' or null' if allow_null else ''}, got "
                           f"{_type_name(v)}", field)
    if low is not None and v <= low:
        raise RequestError(f"`{field}` must be greater than {low:g}, got {v:g}", field)
    return float(v)


def _choice(body: Mapping, key: str, choices, default, where: str = "") -> str:
    v = body.get(key, default)
    if v not in choices:
        raise RequestError(f"`{where}{key}` must be one of {', '.join(map(repr, choices))}, got {v!r}"
                           if isinstance(v, str) else f"`{where}{key}` must be a string, got {_type_name(v)}",
                           where + key)
    return v


def _allowed(body: Mapping, keys, where: str = "") -> None:
    for key in body:
        if key not in keys:
            raise RequestError(f"unknown field `{where}{key}` (allowed: {', '.join(sorted(set(keys)))})", where + key)


def _list(body: Mapping, key: str, options: Options, *, where: str = "", required: bool = True) -> list:
    if key not in body:
        if required:
            raise RequestError(f"missing field `{where}{key}`", where + key)
        return []
    v = body[key]
    if not isinstance(v, list):
        raise RequestError(f"`{where}{key}` must be an array, got {_type_name(v)}", where + key)
    if len(v) > options.max_items:
        raise RequestError(f"`{where}{key}` has {len(v)} entries; this server takes at most {options.max_items} "
                           "per request (--max-items)", where + key)
    return v


@attrs.define
class Policy:
    deadline_s: float | None
    on_deadline: str
    default_reward: float
    failure_value: float | None
    scale: str
    step: int | None
    prefix: str


COMMON = ("deadline_s", "on_deadline", "default_reward", "failure_value", "scale", "step", "id")


def _policy(body: Mapping, options: Options, seq: int) -> Policy:
    step = body.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise RequestError(f"`step` must be a non-negative integer, got {_type_name(step)}", "step")
    rid = body.get("id")
    if rid is not None and not isinstance(rid, str):
        raise RequestError(f"`id` must be a string, got {_type_name(rid)}", "id")
    prefix = (f"{step}/" if step is not None else "") + (rid if rid is not None else f"r{seq}")
    return Policy(_number(body, "deadline_s", options.deadline_s, low=0, allow_null=True),
                  _choice(body, "on_deadline", POLICIES, options.on_deadline),
                  _number(body, "default_reward", options.default_reward),
                  _number(body, "failure_value", options.failure_value, allow_null=True),
                  _choice(body, "scale", SCALES, options.scale), step, prefix)


ITEM_KEYS = ("input", "response", "reference", "id", "record")
PAIR_KEYS = ("input", "responses", "reference", "id", "record")


def _record(entry: Mapping, where: str) -> dict:
    if (record := entry.get("record")) is None:
        return {}
    if not isinstance(record, dict):
        raise RequestError(f"`{where}record` must be an object, got {_type_name(record)}", where + "record")
    return record


def _item(program, mode: str, entry, where: str, default_id: str, responses=None):
    """(mode, Item) from one request entry; RequestError naming the field otherwise."""
    from gsrlang.api import InputError

    if not isinstance(entry, dict):
        raise RequestError(f"`{where.rstrip('.')}` must be an object, got {_type_name(entry)}", where.rstrip("."))
    _allowed(entry, PAIR_KEYS if mode == "pairwise" else ITEM_KEYS, where)
    item_id = entry.get("id", default_id)
    if not isinstance(item_id, str):
        raise RequestError(f"`{where}id` must be a string, got {_type_name(item_id)}", where + "id")
    text_input = text_field(entry.get("input", ""), where + "input", completion=False)
    reference = text_field(entry.get("reference"), where + "reference", completion=False, optional=True)
    if mode == "pairwise":
        if responses is None:
            pair = entry.get("responses")
            if not isinstance(pair, list) or len(pair) != 2:
                raise RequestError(f"`{where}responses` must be an array of two responses, got "
                                   + (f"{len(pair)}" if isinstance(pair, list) else _type_name(pair)),
                                   where + "responses")
            responses = [text_field(r, f"{where}responses[{k}]", completion=True) for k, r in enumerate(pair)]
        kwargs = {"responses": responses}
    else:
        if responses is None:
            response = entry.get("response")
            responses = [None if response is None and "response" not in entry else
                         text_field(response, where + "response", completion=True)]
        kwargs = {"response": responses[0]}
    try:
        return program.item(text_input, reference=reference, record=_record(entry, where), id=item_id, mode=mode,
                            **kwargs)[1]
    except InputError as exc:
        raise RequestError(str(exc), where + ("responses" if mode == "pairwise" else "response")) from None


# ---- answering ---------------------------------------------------------------------------------------------
def _reward(result, policy: Policy):
    if result is None:
        return policy.default_reward
    if not result.ok:
        return policy.failure_value
    return float(result.raw) if policy.scale == "native" and result.raw is not None else float(result.value)


def _result_json(result, item, reward=None, *, pairwise: bool = False) -> dict:
    if result is None:
        out = {"id": item.id, "status": "unfinished", "reason": "the deadline passed before it was scored"}
    elif pairwise:
        out = {"id": item.id, "status": result.status, "winner": result.winner, "value": result.value,
               "reason": result.reason}
    else:
        out = {"id": item.id, "status": result.status, "score": result.score, "raw": result.raw,
               "value": result.value, "reason": result.reason}
    if reward is not None or not pairwise:
        out["reward"] = reward
    return out


def _unfinished(results, items) -> list[dict]:
    return [{"index": i, "id": item.id} for i, (r, item) in enumerate(zip(results, items)) if r is None]


def _past_deadline(policy: Policy, results, items) -> None:
    """The `fail` policy: an error naming the unfinished items, when there are any."""
    missing = _unfinished(results, items)
    if missing and policy.on_deadline == "fail":
        shown = ", ".join(m["id"] for m in missing[:10]) + (", ..." if len(missing) > 10 else "")
        raise RequestError(f"the deadline of {policy.deadline_s:g} s passed with {len(missing)} of {len(items)} "
                           f"items unfinished: {shown}", "deadline_s", status=504, extra={"unfinished": missing})


class Server:
    """The state the routes share: the engine, the settings, the metrics."""

    def __init__(self, engine, options: Options, metrics):
        self.engine = engine
        self.options = options
        self.metrics = metrics
        self.seq = 0

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _mode(self, served, wanted: str | None, field: str = "mode") -> str:
        modes = served.program.modes
        if wanted is None:
            return modes[0]
        if wanted not in modes:
            raise RequestError(f"the served program {served.program.name!r} declares no {wanted} task (it has: "
                               f"{', '.join(modes)})", field)
        return wanted

    async def _score(self, served, mode, items, policy):
        results = await self.engine.run(served, mode, items, policy.deadline_s)
        if self.metrics is not None and (n := sum(r is None for r in results)):
            self.metrics.unfinished.inc(n)
        return results

    # POST /score
    async def score(self, body: dict) -> dict:
        served = self.engine.current
        _allowed(body, ("items",) + ITEM_KEYS + COMMON)
        policy = _policy(body, self.options, self.next_seq())
        mode = self._mode(served, "pointwise" if "pointwise" in served.program.modes else None)
        if mode != "pointwise":
            raise RequestError(f"the served program {served.program.name!r} has no pointwise task: use /compare")
        if "items" in body:
            if any(k in body for k in ITEM_KEYS if k != "id"):
                raise RequestError("give `items` or one item's fields (`input`, `response`, ...), not both", "items")
            entries = [(e, f"items[{i}].") for i, e in enumerate(_list(body, "items", self.options))]
        else:
            entries = [({k: body[k] for k in ITEM_KEYS if k in body and k != "id"}, "")]
        items = [_item(served.program, mode, e, where, f"{policy.prefix}/{i}") for i, (e, where) in enumerate(entries)]
        results = await self._score(served, mode, items, policy)
        _past_deadline(policy, results, items)
        rewards = [_reward(r, policy) for r in results]
        return {"program": _program(served), "rewards": rewards,
                "results": [_result_json(r, it, rw) for r, it, rw in zip(results, items, rewards)],
                "unfinished": _unfinished(results, items)}

    # POST /compare
    async def compare(self, body: dict) -> dict:
        served = self.engine.current
        _allowed(body, ("pairs",) + COMMON)
        policy = _policy(body, self.options, self.next_seq())
        mode = self._mode(served, "pairwise")
        entries = _list(body, "pairs", self.options)
        items = [_item(served.program, mode, e, f"pairs[{i}].", f"{policy.prefix}/{i}") for i, e in enumerate(entries)]
        results = await self._score(served, mode, items, policy)
        _past_deadline(policy, results, items)
        return {"program": _program(served),
                "winners": [r.winner if r is not None and r.ok else None for r in results],
                "values": [r.value if r is not None and r.ok else None for r in results],
                "results": [_result_json(r, it, pairwise=True) for r, it in zip(results, items)],
                "unfinished": _unfinished(results, items)}

    # POST /group
    async def group(self, body: dict) -> dict:
        served = self.engine.current
        group_keys = ("input", "responses", "reference", "record", "normalize", "by", "both_orders")
        if "groups" in body:
            _allowed(body, ("groups", "normalize", "by", "both_orders") + COMMON)
            groups = [(g, f"groups[{i}].") for i, g in enumerate(_list(body, "groups", self.options))]
        else:
            _allowed(body, group_keys + COMMON)
            groups = [({k: body[k] for k in group_keys if k in body}, "")]
        policy = _policy(body, self.options, self.next_seq())
        plans = []
        items: list = []
        for g, (entry, where) in enumerate(groups):
            if not isinstance(entry, dict):
                raise RequestError(f"`{where.rstrip('.')}` must be an object, got {_type_name(entry)}",
                                   where.rstrip("."))
            if where:
                _allowed(entry, group_keys, where)
            how = _choice(entry, "normalize", NORMALIZE, body.get("normalize", "raw"), where)
            by = entry.get("by", body.get("by"))
            if by is not None and by not in ("pointwise", "pairwise"):
                raise RequestError(f"`{where}by` must be 'pointwise' or 'pairwise', got {by!r}", where + "by")
            mode = self._mode(served, by, where + "by")
            both = entry.get("both_orders", body.get("both_orders", False))
            if not isinstance(both, bool):
                raise RequestError(f"`{where}both_orders` must be a boolean, got {_type_name(both)}",
                                   where + "both_orders")
            if not (responses := _list(entry, "responses", self.options, where=where)):
                raise RequestError(f"`{where}responses` is empty: a group has at least one response",
                                   where + "responses")
            texts = [text_field(r, f"{where}responses[{k}]", completion=True) for k, r in enumerate(responses)]
            base = {k: entry[k] for k in ("input", "reference", "record") if k in entry}
            gid = f"{policy.prefix}/g{g}" if len(groups) > 1 else policy.prefix
            if mode == "pointwise":
                units = [(k,) for k in range(len(texts))]
                made = [_item(served.program, mode, base, where, f"{gid}/{k}", responses=[texts[k]])
                        for k in range(len(texts))]
            else:
                units = round_robin(len(texts), both)
                made = [_item(served.program, mode, base, where, f"{gid}/{a}v{b}", responses=[texts[a], texts[b]])
                        for a, b in units]
            if len(items) + len(made) > self.options.max_items:
                raise RequestError(f"the request makes {len(items) + len(made)} items to score; this server takes "
                                   f"at most {self.options.max_items} per request (--max-items)",
                                   where + "responses")
            plans.append((mode, how, len(texts), units, len(items), len(made)))
            items.extend(made)
        # one submission per mode (a request's groups share a mode unless `by` differs between them)
        results: list = [None] * len(items)
        by_mode: dict[str, list[int]] = {}
        for mode, _, _, _, start, n in plans:
            by_mode.setdefault(mode, []).extend(range(start, start + n))
        import asyncio

        got = await asyncio.gather(*(self._score(served, mode, [items[i] for i in where_], policy)
                                     for mode, where_ in by_mode.items()))
        for where_, rs in zip(by_mode.values(), got):
            for i, r in zip(where_, rs):
                results[i] = r
        _past_deadline(policy, results, items)
        out_groups = []
        for mode, how, n, units, start, count in plans:
            rs = results[start:start + count]
            its = items[start:start + count]
            if mode == "pointwise":
                raw = [_reward(r, policy) for r in rs]
                detail = [_result_json(r, it, rw) for r, it, rw in zip(rs, its, raw)]
            else:
                raw = win_rates(n, units, [r.winner if r is not None and r.ok else None for r in rs])
                detail = [{**_result_json(r, it, pairwise=True), "pair": list(u)} for r, it, u in zip(rs, its, units)]
            out_groups.append({"rewards": normalize(raw, how), "raw": raw, "normalize": how, "by": mode,
                               "results": detail, "unfinished": _unfinished(rs, its)})
        if "groups" in body:
            return {"program": _program(served), "groups": out_groups,
                    "rewards": [r for g in out_groups for r in g["rewards"]]}
        return {"program": _program(served), **out_groups[0]}

    # POST /openrlhf (and /get_reward, the path of OpenRLHF's own reward server)
    async def openrlhf(self, body: dict) -> dict:
        """OpenRLHF's remote reward model: `{"query": [...], "prompts": [...], "labels": [...]}` ->
        `{"rewards": [...], "scores": [...], "extra_logs": {...}}`. A query is the prompt and the response
        decoded together: the response is what follows the prompt (the whole query when it does not start
        with it), with the end-of-text markers of common chat templates taken off its end."""
        served = self.engine.current
        _allowed(body, ("query", "prompts", "labels") + COMMON)
        policy = _policy(body, self.options, self.next_seq())
        if policy.failure_value is None:
            policy.failure_value = policy.default_reward  # OpenRLHF needs a number for every query
        mode = self._mode(served, "pointwise")
        queries = _list(body, "query", self.options)
        prompts = _list(body, "prompts", self.options, required=False)
        labels = _list(body, "labels", self.options, required=False)
        for key, values in (("prompts", prompts), ("labels", labels)):
            if values and len(values) != len(queries):
                raise RequestError(f"`{key}` has {len(values)} entries for {len(queries)} queries", key)
        items = []
        for i, q in enumerate(queries):
            if not isinstance(q, str):
                raise RequestError(f"`query[{i}]` must be a string, got {_type_name(q)}", f"query[{i}]")
            prompt = prompts[i] if prompts else ""
            if not isinstance(prompt, str):
                raise RequestError(f"`prompts[{i}]` must be a string, got {_type_name(prompt)}", f"prompts[{i}]")
            label = labels[i] if labels else None
            if label is not None and not isinstance(label, (str, int, float)):
                raise RequestError(f"`labels[{i}]` must be a string, a number or null, got {_type_name(label)}",
                                   f"labels[{i}]")
            entry = {"input": prompt, "response": response_of(q, prompt),
                     "reference": None if label is None else str(label),
                     "record": {} if label is None else {"label": label}}
            items.append(_item(served.program, mode, entry, f"query[{i}].", f"{policy.prefix}/{i}"))
        results = await self._score(served, mode, items, policy)
        _past_deadline(policy, results, items)
        rewards = [_reward(r, policy) for r in results]
        ok = [1.0 if r is not None and r.ok else 0.0 for r in results]
        return {"rewards": rewards, "scores": rewards, "extra_logs": {"gsr_ok": ok},
                "program": _program(served), "unfinished": _unfinished(results, items)}


END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "</s>", "<eos>", "<end_of_turn>")


def response_of(query: str, prompt: str) -> str:
    """The response in an OpenRLHF query (prompt + response, decoded with special tokens)."""
    text = query[len(prompt):] if prompt and query.startswith(prompt) else query
    while True:
        stripped = text.rstrip()
        if (marker := next((m for m in END_MARKERS if stripped.endswith(m)), None)) is None:
            return text.strip()
        text = stripped[: -len(marker)]


def _program(served) -> dict:
    return {"name": served.program.name, "hash": served.program.hash}


# ---- the application ----------------------------------------------------------------------------------------
def build_app(engine, options: Options, metrics=None, watcher=None):
    """The Starlette application for `engine` (its lifespan starts and stops the engine and the watcher)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from gsrlang.trace.jsonio import dumps_line, loads

    class JSONResponse(Response):  # Starlette's, encoded as the traces are (orjson: ~10x the json module)
        media_type = "application/json"

        def render(self, content) -> bytes:
            return dumps_line(content).encode("utf-8")

    server = Server(engine, options, metrics)

    def error(status: int, message: str, field: str | None = None, extra: dict | None = None, headers=None):
        body = {"error": {"message": message, "field": field, **(extra or {})}}
        if engine.current is not None:
            body["program"] = _program(engine.current)
        return JSONResponse(body, status_code=status, headers=headers)

    def authorized(request: Request) -> bool:
        if options.token is None:
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else ""
        return hmac.compare_digest(given.encode("utf-8"), options.token.encode("utf-8"))

    async def read_body(request: Request) -> dict:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > options.max_body:
            raise RequestError(f"the body has {int(length)} bytes; this server takes at most {options.max_body} "
                               "(--max-body-mb)", None, status=413)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > options.max_body:
                raise RequestError(f"the body is larger than {options.max_body} bytes (--max-body-mb)", status=413)
            chunks.append(chunk)
        try:
            body = loads(b"".join(chunks))
        except ValueError as exc:  # orjson's and json's decode errors, and bad UTF-8, are ValueErrors
            raise RequestError(f"the body is not JSON: {exc}", None) from None
        if not isinstance(body, dict):
            raise RequestError(f"the body must be a JSON object, got {_type_name(body)}", None)
        return body

    def scoring(route: str, handler):
        async def endpoint(request: Request) -> Response:
            t0 = time.perf_counter()
            status = 200
            try:
                if not authorized(request):
                    status = 401
                    return error(401, "missing or wrong token: send `Authorization: Bearer TOKEN`",
                                 headers={"WWW-Authenticate": "Bearer"})
                answer = await handler(await read_body(request))
                answer["elapsed_s"] = round(time.perf_counter() - t0, 6)
                return JSONResponse(answer)
            except RequestError as exc:
                status = exc.status
                return error(exc.status, str(exc), exc.field, exc.extra)
            except Exception as exc:  # a bug in gsr: say so, keep serving
                status = 500
                import logging

                logging.getLogger("gsrlang.serve").exception("internal error on %s", route)
                return error(500, f"internal error: {type(exc).__name__}: {exc} (a bug in gsr; the server goes on)")
            finally:
                if metrics is not None:
                    metrics.request(route, status, time.perf_counter() - t0)

        return endpoint

    async def healthz(request: Request) -> Response:
        served = engine.current
        return JSONResponse({"status": "ok", "program": served.describe(), "modes": list(served.program.modes),
                             "since": round(served.since, 3), "in_flight": engine.in_flight,
                             "uptime_s": round(time.time() - engine.started, 3)})

    async def metrics_route(request: Request) -> Response:
        if not authorized(request):
            return error(401, "missing or wrong token: send `Authorization: Bearer TOKEN`",
                         headers={"WWW-Authenticate": "Bearer"})
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(metrics.text(), media_type=CONTENT_TYPE_LATEST)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await engine.start()
        if watcher is not None:
            await watcher.start()
        try:
            yield
        finally:
            if watcher is not None:
                await watcher.stop()
            await engine.stop()

    async def not_found(request, exc):
        return error(exc.status_code, f"{request.method} {request.url.path}: "
                     + ("no such route (routes: /score, /compare, /group, /openrlhf, /healthz, /metrics)"
                        if exc.status_code == 404 else "method not allowed"), None)

    routes = [Route("/score", scoring("score", server.score), methods=["POST"]),
              Route("/compare", scoring("compare", server.compare), methods=["POST"]),
              Route("/group", scoring("group", server.group), methods=["POST"]),
              Route("/openrlhf", scoring("openrlhf", server.openrlhf), methods=["POST"]),
              Route("/get_reward", scoring("openrlhf", server.openrlhf), methods=["POST"]),
              Route("/healthz", healthz, methods=["GET"])]
    if metrics is not None:
        routes.append(Route("/metrics", metrics_route, methods=["GET"]))
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})
