"""An asyncio event loop whose clock stands still until the test moves it, for the tests of what waits on time
(``--rpm``, timeouts) whose verdict must not depend on how fast or loaded the machine is.

``ManualClockLoop.time()`` is the clock of everything that waits on the loop: ``asyncio.sleep``,
``asyncio.wait_for``, anyio's (and so the HTTP client's) timeouts, aiolimiter's leaky bucket. It changes only
through ``advance(seconds)``, so a timer fires only when the test moves the clock past it; real I/O (the
sockets to the fake server, threads) runs as on any other loop. A request that waits on a timer is thus seen
waiting however slow the machine, and one that does not is seen going, with the clock where it was.

``await loop.settle()`` returns once every task that can go on without the clock or I/O has gone as far as it
can: nothing but the caller is left ready to run. What is still waiting then waits on a timer, a socket or a
thread.

``run(main)`` runs ``main(loop)`` to its end on a new such loop and closes it; a plain (synchronous) test calls
it, as pytest-asyncio's loop has a real clock.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")


class ManualClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` moves only with :meth:`advance` (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 1000.0  # any start will do; not 0, which could hide a clock read as "unset"

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock `seconds` on; the timers due by then fire as the loop next runs."""
        if seconds < 0:
            raise ValueError("the clock only moves on")
        self._now += seconds

    async def settle(self) -> None:
        """Return once no task but the caller's is ready to run (each pass polls I/O without waiting)."""
        await asyncio.sleep(0)
        while self._ready:  # the handles due to run after the caller's: BaseEventLoop's queue of ready callbacks
            await asyncio.sleep(0)

    async def run_out(self, tasks: set[asyncio.Task]) -> None:
        """Cancel `tasks` and let them end, moving the clock to the next timer whenever nothing else can run
        (a pass that finds no timer only polls I/O: a task may be waiting on a socket)."""
        for task in tasks:
            task.cancel()
        while not all(t.done() for t in tasks):
            await self.settle()
            if due := [h.when() for h in self._scheduled if not h.cancelled()]:  # BaseEventLoop's timers
                self._now = max(self._now, min(due))


def run(main: Callable[[ManualClockLoop], Awaitable[T]]) -> T:
    """``main(loop)`` run to its end on a new :class:`ManualClockLoop`, which is closed afterwards. Tasks still
    pending then (a failed test's) are cancelled and run out, the clock jumping from timer to timer, so that
    a task that waits on the clock cannot hang the test."""
    loop = ManualClockLoop()
    try:
        return loop.run_until_complete(main(loop))
    finally:
        try:
            if pending := asyncio.all_tasks(loop):
                loop.run_until_complete(loop.run_out(pending))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()
