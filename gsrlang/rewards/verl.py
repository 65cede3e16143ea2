"""veRL: a `gsr serve` as veRL's custom reward function (`custom_reward_function.path` / `.name`).

veRL loads a function from a file and calls it once per response:
`compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)`, a float or a dict
with `score` (its other keys go to veRL's reward extra info); a coroutine function is awaited by veRL's
asynchronous reward loop. Its batch reward manager calls
`compute_score(data_sources, solution_strs, ground_truths, extra_infos, **reward_kwargs)` with lists.
This file is that function: point veRL at it (`python -m gsrlang.rewards.verl` prints its path) and give the
server's URL in `reward_kwargs`:

    custom_reward_function.path=$(python -m gsrlang.rewards.verl) \
    custom_reward_function.name=compute_score \
    +custom_reward_function.reward_kwargs.url=http://127.0.0.1:8080

(or set GSR_SERVE_URL). The response is `solution_str`; the prompt shown to model judges is
`extra_info[prompt_key]` (default: the first of "prompt", "question", "problem" that extra_info has);
`ground_truth` is the reference; `data_source` and extra_info's plain values are the item's further fields.
Every call is one item: the server judges the items of concurrent calls together (micro-batches). A reward
that the server gives as null (an item that is not ok under `failure_value=None`) is 0.0 here, since veRL
needs a number. Any other keyword in `reward_kwargs` (`deadline_s`, `on_deadline`, `default_reward`,
`failure_value`, `scale`) goes into every request; `token_env` names the token's environment variable.
"""

from __future__ import annotations

import os
import threading

__all__ = ["acompute_score", "compute_score", "compute_score_batch"]

_CLIENTS: dict = {}
_LOCK = threading.Lock()
PROMPT_KEYS = ("prompt", "question", "problem")
REQUEST = ("deadline_s", "on_deadline", "default_reward", "failure_value", "scale")


def _client(kwargs: dict):
    from gsrlang.rewards.client import RewardClient

    if not (url := kwargs.get("url") or os.environ.get("GSR_SERVE_URL")):
        raise ValueError("no reward server: pass reward_kwargs.url=http://HOST:PORT (or set GSR_SERVE_URL)")
    key = (url, kwargs.get("token_env"))
    with _LOCK:
        if (client := _CLIENTS.get(key)) is None:
            client = _CLIENTS[key] = RewardClient(url, token_env=kwargs.get("token_env"),
                                                  timeout=float(kwargs.get("timeout") or 600.0))
    return client


def _plain(value):
    """A value JSON can carry (veRL's extra_info may hold arrays and other objects: those are left out)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else None


def _item(data_source, solution_str, ground_truth, extra_info, kwargs) -> dict:
    extra = extra_info if isinstance(extra_info, dict) else {}
    key = kwargs.get("prompt_key") or next((k for k in PROMPT_KEYS if isinstance(extra.get(k), str)), None)
    record = {k: _plain(v) for k, v in extra.items() if _plain(v) is not None}
    if data_source is not None:
        record["data_source"] = str(data_source)
    item = {"input": str(extra.get(key) or "") if key else "", "response": str(solution_str), "record": record}
    if ground_truth is not None:
        item["reference"] = ground_truth if isinstance(ground_truth, str) else str(_plain(ground_truth))
    return item


def _body(items: list, kwargs: dict) -> dict:
    return {"items": items, **{k: kwargs[k] for k in REQUEST if k in kwargs}}


def _scores(answer: dict) -> list[dict]:
    return [{"score": float(r["reward"]) if r.get("reward") is not None else 0.0,
             "gsr_ok": 1.0 if r.get("status") == "ok" else 0.0} for r in answer["results"]]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """veRL's custom reward function: {"score": the reward, "gsr_ok": 1.0 when the item was scored ok}."""
    item = _item(data_source, solution_str, ground_truth, extra_info, kwargs)
    return _scores(_client(kwargs).post("/score", _body([item], kwargs)))[0]


async def acompute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """`compute_score`, as a coroutine function (veRL's asynchronous reward loop awaits it)."""
    item = _item(data_source, solution_str, ground_truth, extra_info, kwargs)
    return _scores(await _client(kwargs).apost("/score", _body([item], kwargs)))[0]


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs) -> list[dict]:
    """veRL's batch reward manager's form: lists in, one dict per response out (one request)."""
    items = [_item(d, s, g, e, kwargs) for d, s, g, e in zip(data_sources, solution_strs, ground_truths, extra_infos)]
    return _scores(_client(kwargs).post("/score", _body(items, kwargs)))


if __name__ == "__main__":  # the path to give veRL's custom_reward_function.path
    print(os.path.abspath(__file__))
