"""The run's one bound on judge calls in flight (see gsrlang.execution.planner, which names it). A module of its
own: it is an asyncio.Semaphore, and what imports the planner without running an event loop (a verifying
replay) does not import asyncio."""

from __future__ import annotations

import asyncio

__all__ = ["CallLimit"]


class CallLimit(asyncio.Semaphore):
    """The one bound on a run's judge calls in flight (its `concurrency`), shared by every item of the run
    (and by every call of an API `Judges`). `window`: the items in flight by default, twice the calls."""

    def __init__(self, concurrency: int):
        self.concurrency = max(1, int(concurrency))
        super().__init__(self.concurrency)

    @property
    def window(self) -> int:
        return 2 * self.concurrency
