"""`gsr serve --watch`: reload the program when its file changes, if the new version checks.

The file is looked at every `interval` seconds (its size and modification time). A change is read and
checked once the file has stopped changing: when two looks in a row see the same new size and time. An
editor or a script that writes the file in place (truncate, then write) is never caught half-way, at the
cost of one interval's delay. A version that does not check, or that the judges cannot serve, is refused: the
diagnostics are logged, the program already served goes on serving, and the refusal is counted in
`gsr_reloads_total{outcome="refused"}`. A version that checks is served from the next request on; each
response names the hash of the program that scored it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

log = logging.getLogger("gsrlang.serve")

__all__ = ["Watcher"]


def _stamp(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


class Watcher:
    def __init__(self, path: str, engine, metrics=None, interval: float = 1.0):
        self.path = path
        self.engine = engine
        self.metrics = metrics
        self.interval = interval
        self._stamp = _stamp(path)
        self._pending = None  # a new stamp seen once, not yet twice in a row
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.ensure_future(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.look()

    async def look(self) -> bool | None:
        """One look at the file: the reload's outcome when a settled change was found, else None."""
        stamp = _stamp(self.path)
        if stamp is None or stamp == self._stamp:
            self._pending = None
            return None
        if stamp != self._pending:  # still changing, or changed just now: look again next time
            self._pending = stamp
            return None
        self._stamp, self._pending = stamp, None
        return await self.reload()

    async def reload(self) -> bool:
        """Load, check and serve the file's current version; False (and logged) when it is refused. The check
        runs in a thread: requests are served meanwhile."""
        from gsrlang.api import GsrError, load

        old = self.engine.current.program
        try:
            program = await asyncio.to_thread(load, self.path)
            if program.hash == old.hash:
                return True  # touched, not changed
            self.engine.swap(program)
        except GsrError as exc:
            log.error("%s changed but is refused; still serving %s (%s):\n%s", self.path, old.name,
                      old.hash.split(":")[-1][:12], exc)
            if self.metrics is not None:
                self.metrics.reloads.labels("refused").inc()
            return False
        log.info("reloaded %s: now serving %s (%s), was %s", self.path, program.name,
                 program.hash.split(":")[-1][:12], old.hash.split(":")[-1][:12])
        if self.metrics is not None:
            self.metrics.reloads.labels("loaded").inc()
        return True
