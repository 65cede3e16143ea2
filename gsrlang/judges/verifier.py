"""Verifier procedures (`criterion x: T = verifier("name")`): Python functions, never code in a .gsr file.

A verifier is a callable `fn(candidate, item)` (sync or async) that receives the
`gsrlang.files.dataset.Candidate` and the `gsrlang.files.dataset.Item` and returns one of:

- a value of the criterion's type (bool, a number for a Score, a label str);
- `(value, reason)`;
- None or `ABSTAIN` to abstain;
- a `Judgment`, for full control (status, reason, raw, provenance).

Verifiers are found, in this order, among those registered in this process with
`register_verifier(name, fn)` (tests, notebooks) and those that installed packages
declare under the entry-point group `gsrlang.verifiers`::

    # pyproject.toml of the package that provides it
    [project.entry-points."gsrlang.verifiers"]
    sql_runs = "mypkg.checks:sql_runs"

An unknown verifier is reported before any item runs.

A verifier is arbitrary code, so each judgment has a time limit (`VerifierJudge(time_limit=...)`,
`gsr run --time-limit`, DEFAULT_TIME_LIMIT seconds by default): an async verifier is cancelled
at the limit; a plain function runs in a daemon thread, so the event loop keeps serving model
calls while it works, and at the limit it is abandoned (Python cannot stop a thread; a daemon
thread does not keep the process alive). Either way the judgment is invalid, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from typing import Callable

from gsrlang.judges.rules import DEFAULT_TIME_LIMIT
from gsrlang.semantics.judgment import ABSTAIN, Judgment

__all__ = ["ENTRY_POINT_GROUP", "VerifierJudge", "find_verifier", "register_verifier", "unregister_verifier"]

ENTRY_POINT_GROUP = "gsrlang.verifiers"
_REGISTERED: dict[str, Callable] = {}
_LOADED: dict[str, Callable] = {}


def register_verifier(name: str, fn: Callable) -> None:
    """Make `fn` available as `verifier("name")` in this process (it wins over an entry point)."""
    if not callable(fn):
        raise TypeError(f"verifier {name!r} must be callable, got {type(fn).__name__}")
    _REGISTERED[name] = fn


def unregister_verifier(name: str) -> None:
    _REGISTERED.pop(name, None)


def _entry_points():
    from importlib import metadata  # here, not above: importing it costs a run without verifiers ~20-50 ms of CPU

    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def find_verifier(name: str) -> Callable | None:
    """The verifier registered as `name`, or None."""
    if (fn := _REGISTERED.get(name, _LOADED.get(name))) is not None:
        return fn
    for ep in _entry_points():
        if ep.name == name:
            fn = _LOADED[name] = ep.load()
            return fn
    return None


def _as_judgment(result) -> Judgment:
    if isinstance(result, Judgment):
        return result
    reason = None
    if isinstance(result, tuple) and len(result) == 2:
        result, reason = result
    if result is None or result is ABSTAIN:
        return Judgment.abstained(reason)
    if isinstance(result, int) and not isinstance(result, bool):
        result = float(result)
    return Judgment.ok(result, reason)


class VerifierJudge:
    """Serves every `verifier("name")` criterion."""

    inline = False

    def __init__(self, time_limit: float = DEFAULT_TIME_LIMIT):
        self.time_limit = time_limit

    def validate(self, node) -> str | None:
        name = node.criterion.procedure.name
        try:
            fn = find_verifier(name)
        except Exception as exc:  # a broken entry point: say which
            return f"criterion `{node.id}`: verifier `{name}` could not be loaded: {type(exc).__name__}: {exc}"
        if fn is None:
            known = sorted({*_REGISTERED, *(ep.name for ep in _entry_points())})
            return (f"criterion `{node.id}` uses verifier(\"{name}\"), which is not registered "
                    f"(known: {', '.join(known) if known else 'none'}); install a package that provides it "
                    f"under the entry-point group `{ENTRY_POINT_GROUP}`, or call "
                    "gsrlang.judges.verifier.register_verifier")
        return None

    async def judge(self, node, item, candidate) -> Judgment:
        name = node.criterion.procedure.name
        if (fn := find_verifier(name)) is None:
            return Judgment.invalid(f"verifier `{name}` is not registered")
        async def outcome():
            result = await (fn(candidate, item) if inspect.iscoroutinefunction(fn)
                            else _in_daemon_thread(fn, candidate, item))
            return await result if inspect.isawaitable(result) else result  # a function that returned a coroutine

        try:
            result = await asyncio.wait_for(outcome(), self.time_limit)
        except asyncio.TimeoutError:
            return Judgment.invalid(f"verifier `{name}` ran past the time limit of {self.time_limit:g} s per "
                                    "judgment")
        return _as_judgment(result)


def _in_daemon_thread(fn: Callable, *args) -> asyncio.Future:
    """A future of `fn(*args)` computed in a new daemon thread (not the loop's executor, whose shutdown would
    wait for a verifier that never returns)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error) -> None:
        if not future.done():  # not cancelled by the time limit meanwhile
            future.set_exception(error) if error is not None else future.set_result(result)

    def work() -> None:
        try:
            outcome = (fn(*args), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting judge, which reports it
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name="gsr-verifier", daemon=True).start()
    return future
