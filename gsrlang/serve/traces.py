"""The served rewards' trace: every reward's trace record appended to a trace file, rotated by size.

`--trace out/rewards.jsonl` writes *segments*: `out/rewards.jsonl`, then `out/rewards.1.jsonl`,
`out/rewards.2.jsonl`, ... Each segment is an ordinary version 2 trace (`gsr run --trace`'s format,
gsrlang.trace.schema) of one program version and one mode, so `gsr replay SEGMENT` verifies it and
`gsr replay SEGMENT --program EDITED.gsr` re-composes it with no model call. A segment is closed with a
run-summary record (its items, ok / invalid / failed, wall time, and the model calls, cache hits and tokens
spent since the segment before it closed: server-wide, so with a pointwise and a pairwise segment open at once
each counts the other's calls too) when it passes `max_bytes`, when the program is reloaded and its last item is
written, and when the server stops; the next record goes to the next free name. A file that is already there
is never written to: segments are created exclusively (a restarted server goes on at the next free name).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["TraceSink"]


class _Counting:
    """A text file that counts the characters written to it (the trace's size, without asking the OS)."""

    def __init__(self, handle):
        self.handle = handle
        self.size = 0
        self.name = handle.name

    def write(self, text: str) -> int:
        self.size += len(text)
        return self.handle.write(text)


class _Segment:
    def __init__(self, path: Path, program, mode: str, usage: dict):
        from gsrlang.execution.runs import RunSummary
        from gsrlang.trace.write import TraceWriter

        self.path = path
        self.program = program
        self.file = _Counting(open(path, "x", encoding="utf-8"))  # exclusive: never an existing file
        self.writer = TraceWriter(self.file)
        self.summary = RunSummary(program.name, program.hash, mode)
        self.started = time.perf_counter()
        self.usage = usage  # the judges' counters when the segment opened

    def write(self, result) -> None:
        if result.record is not None:  # made by the column path: the record the writer would make from the run
            self.writer.write_record(dict(result.record), self.program.static)
        else:
            self.writer.write(result.run, self.program.static, result.line)
        self.summary.count(result.run, result.line, keep_pairs=False)

    def close(self, usage_now: dict) -> None:
        from gsrlang.execution.runs import run_summary_record

        spent = {kind: _delta(counters, self.usage.get(kind) or {}) for kind, counters in usage_now.items()}
        info = {"program": {"name": self.program.name, "hash": self.program.hash, "path": self.program.path},
                "served": True}
        self.writer.write_summary(run_summary_record(self.summary, spent, time.perf_counter() - self.started, info))
        self.file.handle.close()


def _delta(now: dict, then: dict) -> dict:
    """Counters spent between two usage snapshots (numbers subtracted; anything else as it is now)."""
    out = {}
    for key, value in now.items():
        before = then.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(before, (int, float)):
            out[key] = round(value - before, 6) if isinstance(value, float) else value - before
        else:
            out[key] = value
    return out


class TraceSink:
    """Appends served results to size-rotated trace segments (see the module docstring).

    `usage()` returns the judges' counters (for each segment's summary record)."""

    def __init__(self, path: str | os.PathLike, max_bytes: int, usage=lambda: {}):
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.usage = usage
        self.open: dict[tuple[str, str], _Segment] = {}  # (program hash, mode) -> its open segment
        self.written: list[Path] = []  # every segment created, in order
        self._next = 0
        self._baseline: dict | None = None  # the judges' counters when the last segment closed (or at the start)
        if not self.path.parent.is_dir():
            raise OSError(f"--trace {self.path}: the folder {self.path.parent} does not exist")

    def _free_name(self) -> Path:
        while True:
            n = self._next
            self._next += 1
            p = self.path if n == 0 else self.path.with_name(f"{self.path.stem}.{n}{self.path.suffix}")
            if not p.exists():
                return p

    def write(self, program, result) -> None:
        """Append one result's trace record (`result.run` is its ItemRun) to its program's and mode's segment."""
        key = (program.hash, result.mode)
        if (segment := self.open.get(key)) is None:
            while segment is None:
                with contextlib.suppress(FileExistsError):  # made by someone else since we looked: the next name
                    segment = _Segment(self._free_name(), program, result.mode, self._since())
            self.open[key] = segment
            self.written.append(segment.path)
        segment.write(result)
        if segment.file.size >= self.max_bytes:
            self._close(key)

    def _since(self) -> dict:
        if self._baseline is None:
            self._baseline = self.usage()
        return self._baseline

    def start(self) -> None:
        """Take the judges' counters now: the first segment's summary counts what was spent from here."""
        self._baseline = self.usage()

    def _close(self, key) -> None:
        segment = self.open.pop(key)
        now = self.usage()
        segment.close(now)
        self._baseline = now

    def close_program(self, digest: str) -> None:
        """Close the segments of a program that is no longer served (its last item written)."""
        for key in [k for k in self.open if k[0] == digest]:
            self._close(key)

    def flush(self) -> None:
        for segment in self.open.values():
            segment.file.handle.flush()

    def close(self) -> None:
        for key in list(self.open):
            self._close(key)
