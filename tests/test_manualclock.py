"""The manual clock of tests/manualclock.py: timers fire only as the test moves it, I/O runs meanwhile, and a
task a failed test leaves waiting on the clock does not hang the test."""

from __future__ import annotations

import asyncio

import pytest

import manualclock


def test_a_timer_fires_only_when_the_clock_is_moved_past_it():
    async def main(loop):
        start = loop.time()
        slept = asyncio.ensure_future(asyncio.sleep(5))
        await loop.settle()
        loop.advance(4.9)
        await loop.settle()
        assert not slept.done()
        loop.advance(0.2)
        await loop.settle()
        assert slept.done() and loop.time() - start == pytest.approx(5.1)

    manualclock.run(main)


def test_io_and_threads_run_with_the_clock_still():
    async def echo(reader, writer):
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    async def main(loop):
        start = loop.time()
        async with await asyncio.start_server(echo, "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
            writer.write(b"ping\n")
            assert await reader.readline() == b"ping\n"
            writer.close()
        assert await asyncio.to_thread(lambda: "from a thread") == "from a thread"
        assert loop.time() == start

    manualclock.run(main)


def test_a_task_left_waiting_on_the_clock_is_cancelled_and_run_out():
    ended = []

    async def cleans_up_on_the_clock():
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(10)  # a clean-up that waits on the clock too
            ended.append(True)

    async def main(loop):
        asyncio.ensure_future(cleans_up_on_the_clock())
        await loop.settle()
        raise RuntimeError("the test failed")

    with pytest.raises(RuntimeError, match="the test failed"):
        manualclock.run(main)
    assert ended == [True]
