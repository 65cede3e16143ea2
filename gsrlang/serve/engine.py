"""The reward server's scoring: one `Judges`, the served program, micro-batches and deadlines.

Every item of every request is judged through one `gsrlang.Judges` (the API's: one model client, one
judgment cache, one concurrency limit, merging of identical calls in flight), by the same executor
`gsr run` uses (short-circuit judging included), on the judges' own event loop.

**Micro-batching.** A request puts its items on one queue; a batcher takes everything queued (up to
`max_batch` items, after waiting `window_s` for more) and hands it to the judges' loop as one batch,
whichever requests the items came from. Each item's result comes back to the server's loop as soon as it
is ready, so one slow item does not hold the others, and each request waits only for its own items.

**Deadlines.** A request waits for its items at most its deadline. Items still unfinished then are not
abandoned: their judge calls may be shared with other requests' items (merged in flight), so they run to
the end, their judgments go to the cache and their trace records to the trace. The request is answered
at the deadline with its policy (`fail`: an error naming the unfinished items; `default`: the default
reward for them, named in `unfinished`).

**Reload.** `swap(program)` makes a new program the served one: requests already queued keep the program
they started with (each result names the program hash that scored it); the old program's trace segments
close when its last item is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

import attrs

log = logging.getLogger("gsrlang.serve")

__all__ = ["Engine", "Served"]


@attrs.define(eq=False)
class Served:
    """A program being served (or that was, while items it started are still running)."""

    program: object  # gsrlang.api.Program
    registry: object
    since: float = attrs.field(factory=time.time)
    pending: int = 0  # items submitted and not yet delivered
    inline: bool = False  # every judge answers at once, with no I/O (rules, human fields)

    @classmethod
    def of(cls, program, judges) -> "Served":
        from gsrlang.execution.executor import all_inline

        registry = judges.check(program.checked)
        return cls(program, registry, inline=all_inline(program.plan, registry))

    @property
    def hash(self) -> str:
        return self.program.hash

    def describe(self) -> dict:
        return {"name": self.program.name, "hash": self.program.hash, "path": self.program.path}


@attrs.define(eq=False)
class _Entry:
    served: Served
    mode: str
    item: object  # gsrlang.files.dataset.Item
    future: asyncio.Future


class Engine:
    """Scores items for the server's requests (see the module docstring)."""

    def __init__(self, program, judges, *, sink=None, metrics=None, max_batch: int = 1024, window_s: float = 0.0):
        self.judges = judges
        self.sink = sink
        self.metrics = metrics
        self.max_batch = max(1, int(max_batch))
        self.window_s = max(0.0, float(window_s))
        self.current = Served.of(program, judges)
        self._queue: asyncio.Queue | None = None
        self._batcher: asyncio.Task | None = None
        self._batches: set[asyncio.Future] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.started = time.time()

    # ---- lifecycle (on the server's loop) ----
    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._batcher = asyncio.ensure_future(self._batch_forever())
        if self.sink is not None:
            self.sink.start()

    async def stop(self, grace_s: float = 30.0) -> None:
        """Stop taking items, let the batches in flight finish (at most `grace_s`), close the trace."""
        if self._batcher is not None:
            self._batcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._batcher
            self._batcher = None
        while self._queue is not None and not self._queue.empty():
            entry = self._queue.get_nowait()
            if not entry.future.done():
                entry.future.cancel()
        if self._batches:
            await asyncio.wait(list(self._batches), timeout=grace_s)
        if self.sink is not None:
            self.sink.close()

    def swap(self, program) -> Served:
        """Serve `program` from now on (JudgeError when the judges cannot serve it: the old one stays)."""
        served = Served.of(program, self.judges)
        old, self.current = self.current, served
        if old.pending == 0 and self.sink is not None and old.hash != served.hash:
            self.sink.close_program(old.hash)
        return served

    @property
    def in_flight(self) -> int:
        return self.current.pending

    # ---- scoring ----
    def submit(self, served: Served, mode: str, items: list) -> list[asyncio.Future]:
        futures = []
        for item in items:
            future = self.loop.create_future()
            served.pending += 1
            self._queue.put_nowait(_Entry(served, mode, item, future))
            futures.append(future)
        return futures

    async def run(self, served: Served, mode: str, items: list, deadline_s: float | None) -> list:
        """The items' results (`gsrlang.Result`), None for those unfinished at the deadline."""
        if not (futures := self.submit(served, mode, items)):
            return []
        done, _ = await asyncio.wait(futures, timeout=deadline_s)
        return [f.result() if f in done else None for f in futures]  # an exception is a bug in gsr: 500

    async def _batch_forever(self) -> None:
        queue = self._queue
        while True:
            batch = [await queue.get()]
            await asyncio.sleep(self.window_s)  # even 0: the requests that arrived with this one add theirs first
            while len(batch) < self.max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            self._launch(batch)

    def _launch(self, batch: list[_Entry]) -> None:
        if self.metrics is not None:
            self.metrics.batch(len(batch))
        inline = all(e.served.inline for e in batch)
        task = asyncio.ensure_future(self._run_here(batch) if inline else self.judges.arun(self._work(batch)))
        self._batches.add(task)
        task.add_done_callback(self._batch_done)

    async def _run_here(self, batch: list[_Entry]) -> None:
        """A batch of a program whose judges all answer at once (no I/O): judged on this loop, sparing the two
        hops to the judges' loop and back (a model-free program's items take well under a millisecond).

        Each served program's items of each mode go through the API's `score_batch` route together (the
        planner's: one pass over the kernels for the lot, where the judges answer a column at once). Should that
        raise (a bug in gsr: an item never raises), the group is scored again item by item, so that only the
        requests of the items that raise answer 500."""
        groups: dict = {}
        for entry in batch:
            groups.setdefault((entry.served, entry.mode), []).append(entry)
        for (served, mode), entries in groups.items():
            try:
                results = await served.program.execute_all([(mode, e.item) for e in entries], served.registry, None)
            except Exception:  # noqa: BLE001 - found out item by item below
                await self._run_each(served, mode, entries)
            else:
                for entry, result in zip(entries, results):
                    self._deliver(entry, result, None)
            await asyncio.sleep(0)  # let other requests in (/healthz, new items) between groups

    async def _run_each(self, served: Served, mode: str, entries: list[_Entry]) -> None:
        for k, entry in enumerate(entries):
            try:
                result = await served.program.execute(mode, entry.item, served.registry, None)
            except Exception as exc:  # a bug in gsr (an item never raises): that request answers 500
                self._deliver(entry, None, exc)
            else:
                self._deliver(entry, result, None)
            if k % 32 == 31:
                await asyncio.sleep(0)

    def _work(self, batch: list[_Entry]):
        """The batch's coroutine for the judges' loop. Results come back to this loop as they are ready,
        several at a time: one wake-up of this loop takes every result that arrived meanwhile."""
        loop = self.loop
        ready: list = []
        lock = threading.Lock()

        def drain():
            with lock:
                got = ready[:]
                ready.clear()
            for entry, result, exc in got:
                self._deliver(entry, result, exc)

        def post(entry, result, exc):
            with lock:
                ready.append((entry, result, exc))
                first = len(ready) == 1
            if first:
                loop.call_soon_threadsafe(drain)

        async def work(limiter):
            async def one(entry: _Entry):
                try:
                    result = await entry.served.program.execute(entry.mode, entry.item, entry.served.registry, limiter)
                except Exception as exc:  # a bug in gsr (an item never raises): that request answers 500
                    post(entry, None, exc)
                else:
                    post(entry, result, None)

            await asyncio.gather(*(one(e) for e in batch))

        return work

    def _batch_done(self, task: asyncio.Future) -> None:
        self._batches.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a batch failed: %s: %s", type(task.exception()).__name__, task.exception())
        if self.sink is not None:
            try:
                self.sink.flush()
            except OSError as exc:
                self._trace_failed(exc)

    def _deliver(self, entry: _Entry, result, exc) -> None:
        served = entry.served
        served.pending -= 1
        if exc is None:
            if self.sink is not None:
                try:
                    self.sink.write(served.program, result)
                except OSError as error:
                    self._trace_failed(error)
            if self.metrics is not None:
                self.metrics.item(result.status)
        if not entry.future.done():
            if exc is None:
                entry.future.set_result(result)
            else:
                entry.future.set_exception(exc)
        if served is not self.current and served.pending == 0 and self.sink is not None:
            self.sink.close_program(served.hash)

    def _trace_failed(self, exc: OSError) -> None:
        if self.metrics is not None:
            self.metrics.trace_error()
        log.error("cannot write the trace: %s", exc.strerror or exc)
