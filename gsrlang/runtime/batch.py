"""Whole runs over a data file: stream items through the executor, write results and traces, count outcomes.

`run_file(...)` is what `gsr run` and the demo call; `replay_file(...)` is what
`gsr replay` calls. Both write one results line (and one trace record) per item as
soon as it is done, in input order, and keep only counters in memory (plus one
(prediction, label) pair per labelled item when metrics must be computed without a
results file), so memory stays flat however long the file is.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Callable, Iterable, TextIO

import attrs

from gsrlang.data import ColumnMap, Item, parse_pairwise_label, parse_pointwise_label, read_items
from gsrlang.metrics import pairwise_metrics, pointwise_metrics, with_confidence
from gsrlang.program import Program
from gsrlang.runtime.compose import Plan
from gsrlang.runtime.executor import ItemRun, run_items
from gsrlang.runtime.replay import Difference, replay_records
from gsrlang.runtime.trace import TraceWriter, dumps, read_trace, result_line

__all__ = ["RunSummary", "label_reader", "replay_file", "run_file"]


@attrs.define
class RunSummary:
    program: str
    hash: str
    mode: str
    items: int = 0
    ok: int = 0
    invalid: int = 0
    failed: int = 0
    label_problems: int = 0
    labelled: int = 0
    seconds: float = 0.0
    differences: int = 0
    first_difference: Difference | None = None
    preds: list = attrs.field(factory=list)  # (prediction, gold) for labelled items, for metrics
    golds: list = attrs.field(factory=list)

    @property
    def problems(self) -> int:
        return self.invalid + self.failed + self.label_problems

    def count(self, run: ItemRun, line: dict, keep_pairs: bool) -> None:
        self.items += 1
        if run.status == "ok":
            self.ok += 1
        elif run.status == "invalid":
            self.invalid += 1
        else:
            self.failed += 1
        if run.label_error:
            self.label_problems += 1
        if run.label is not None:
            self.labelled += 1
            if keep_pairs:
                pred = line.get("score") if run.mode == "pointwise" else line.get("winner")
                self.preds.append(pred if run.status == "ok" else None)
                self.golds.append(run.label)

    def metrics(self, scale: tuple[float, float] | None, bootstrap: int = 1000, seed: int = 0) -> dict | None:
        """Agreement with the labels (with bootstrap intervals), or None without labelled items."""
        if not self.golds:
            return None
        if self.mode == "pointwise":
            def report(preds, golds):
                return pointwise_metrics(preds, golds, scale=scale)
        else:
            report = pairwise_metrics
        return with_confidence(report, self.preds, self.golds, n_resamples=bootstrap, seed=seed)

    def line(self) -> str:
        return (f"{self.items} item{'s' if self.items != 1 else ''}: {self.ok} ok, {self.invalid} invalid, "
                f"{self.failed} failed")


def label_reader(program: Program, mode: str, columns: ColumnMap) -> Callable[[Item], tuple[object, str | None]]:
    """Reads an item's gold label: a number within the pointwise scale, or first / second / tie."""
    if mode == "pointwise":
        r = program.readout.pointwise

        def read(item: Item):
            if item.label is None:
                return None, None
            try:
                x = parse_pointwise_label(item.label)
            except ValueError as exc:
                return None, f"line {item.line}: {exc}"
            if r is not None and not r.lo <= x <= r.hi:
                return None, (f"line {item.line}: label {x:g} is outside the scale {r.lo:g}..{r.hi:g} "
                              "(the item is scored, but left out of the metrics)")
            return x, None
        return read

    def read_pair(item: Item):
        if item.label is None:
            return None, None
        try:
            return parse_pairwise_label(item.label, columns.response_fields), None
        except ValueError as exc:
            return None, f"line {item.line}: {exc}"
    return read_pair


def _open(path: str | None) -> TextIO | None:
    if path is None:
        return None
    if path == "-":
        import sys

        return sys.stdout
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", encoding="utf-8")


async def _arun(program: Program, items: Iterable, registry, mode: str, columns: ColumnMap, out: str | None,
                trace: str | None, concurrency: int, program_path: str | None, on_item, keep_pairs: bool,
                summary: RunSummary) -> None:
    plan = Plan(program)
    labels = label_reader(program, mode, columns) if columns.label_field else None
    out_f, trace_f = _open(out), _open(trace)
    writer = TraceWriter(trace_f, plan, program_path) if trace_f else None
    try:
        async for run in run_items(plan, items, registry, mode, concurrency=concurrency, labels=labels):
            line = result_line(run, program)
            if out_f:
                out_f.write(dumps(line) + "\n")
            if writer:
                writer.write(run)
            summary.count(run, line, keep_pairs)
            if on_item:
                on_item(run, line)
    finally:
        for f in (out_f, trace_f):
            if f is not None and f.name != "<stdout>":
                f.close()
        await registry.aclose()


def run_file(program: Program, data: str | Path, columns: ColumnMap, registry, mode: str, out: str | None = None,
             trace: str | None = None, concurrency: int = 8, limit: int | None = None,
             program_path: str | None = None, on_item: Callable[[ItemRun, dict], None] | None = None,
             keep_pairs: bool = True) -> RunSummary:
    """Run `program` over every row of `data`; raises DataError when the file cannot be read at all."""
    items = read_items(data, columns)
    if limit is not None:
        items = itertools.islice(items, limit)
    summary = RunSummary(program.name, program.content_hash, mode)
    t0 = time.perf_counter()
    try:
        asyncio.run(_arun(program, items, registry, mode, columns, out, trace, concurrency,
                          program_path if program_path is not None else program.path, on_item, keep_pairs, summary))
    finally:
        summary.seconds = time.perf_counter() - t0
    return summary


def replay_file(trace_path: str | Path, program: Program, verify: bool, out: str | None = None,
                trace: str | None = None, program_path: str | None = None, program_label: str = "the program",
                on_item: Callable[[ItemRun, dict, Difference | None], None] | None = None,
                keep_pairs: bool = True, limit: int | None = None) -> RunSummary:
    """Replay a trace under `program` (verify: compare; else re-compose); raises TraceError / ReplayError."""
    plan = Plan(program)
    records = read_trace(trace_path)
    if limit is not None:
        records = itertools.islice(records, limit)
    mode = None
    summary = RunSummary(program.name, program.content_hash, "")
    out_f, trace_f = _open(out), _open(trace)
    writer = TraceWriter(trace_f, plan, program_path if program_path is not None else program.path) if trace_f else None
    t0 = time.perf_counter()
    try:
        for _, record, run, line, difference in replay_records(plan, records, verify, program_label):
            if mode is None:
                mode = summary.mode = run.mode
            if out_f:
                out_f.write(dumps(line) + "\n")
            if writer:
                writer.write(run)
            summary.count(run, line, keep_pairs)
            if difference is not None:
                summary.differences += 1
                if summary.first_difference is None:
                    summary.first_difference = difference
            if on_item:
                on_item(run, line, difference)
    finally:
        summary.seconds = time.perf_counter() - t0
        for f in (out_f, trace_f):
            if f is not None and f.name != "<stdout>":
                f.close()
    return summary
