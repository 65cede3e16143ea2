"""Whole runs over a data file: stream items through the executor, write results and traces, count outcomes.

`run_file(...)` is what `gsr run` and the demo call; `run_index_file(...)` is `gsr run
--programs` (each item under its own program); `replay_file(...)` is what `gsr replay`
calls. How each goes (its sinks, bounds, and the evaluator's path) is a typed
configuration (`RunConfig`, `ReplayConfig`), the path decided by gsrlang.execution.planner. All write one results line (and one trace record) per item as soon as it is
done, in input order, and keep only counters in memory (plus each item's id, for repeated
ids, and one (prediction, label) pair per labelled item when metrics must be computed
without a results file, both packed a few bytes an item: gsrlang.execution.packed), so
memory stays about flat however long the file is. A run that completes ends its trace with
the run-summary record (`run_summary_record`); replay skips it and keeps it in
`RunSummary.recorded`.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import time
from pathlib import Path
from typing import Callable, TextIO

import attrs
import numpy as np

from gsrlang.analysis.metrics import metrics_with_confidence
from gsrlang.execution.executor import ItemRun, run_items, run_items_each
from gsrlang.execution.inlinerun import ColumnRunner, columnar_judges
from gsrlang.execution.labels import label_reader
from gsrlang.execution.packed import PackedColumn, PackedIds
from gsrlang.execution.peritem import compile_id
from gsrlang.execution.planner import COLUMNS, ReplayConfig, RunConfig, TableConfig, run_route, table_route
from gsrlang.execution.replay import Difference, needed_judgments, replay_records
from gsrlang.files.dataset import ColumnMap, Item, read_items
from gsrlang.files.safeio import atomic_file, check_outputs
from gsrlang.lang.program import CheckedProgram
from gsrlang.semantics.compose import Plan
from gsrlang.trace.read import read_records
from gsrlang.trace.schema import RUN_SUMMARY, dumps, is_summary, prediction, result_line, summary_record
from gsrlang.trace.write import Static, TraceWriter

__all__ = ["RunSummary", "label_reader", "load_table", "replay_file", "results_end", "run_file", "run_index_file",
           "run_summary_record"]


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
    preds: PackedColumn = attrs.field(factory=PackedColumn)  # (prediction, gold) for labelled items, for metrics
    golds: PackedColumn = attrs.field(factory=PackedColumn)
    recorded: dict | None = None  # replay: the trace's run-summary record, if it has one
    judges: dict | None = None  # each judge's usage, when the judges ran elsewhere (the ray engine's actors)
    _ids: PackedIds = attrs.field(factory=PackedIds, repr=False)
    needs: dict = attrs.field(factory=dict)  # what-if replay: criterion -> items that need its skipped judgment
    judgments: int = 0  # judgments made (short-circuit judging leaves out the skipped ones)
    skipped: int = 0  # judgments not asked for: they could not change the result
    stopped: str | None = None  # why the run stopped writing before the end of its data ("budget")
    unwritten: int = 0  # items run but not written because the run stopped (a prefix was written)

    @property
    def duplicate_ids(self) -> int:
        """Items whose id an earlier item already had (every one is still run and written)."""
        return self._ids.duplicates

    @property
    def duplicate_examples(self) -> list:
        """The first few such ids."""
        return self._ids.examples

    @property
    def problems(self) -> int:
        return self.invalid + self.failed + self.label_problems

    def count(self, run: ItemRun, line: dict, keep_pairs: bool) -> None:
        self.count_item(*self.entry(run, line, keep_pairs), keep_pairs)

    @staticmethod
    def entry(run: ItemRun, line: dict, keep_pairs: bool = True) -> tuple:
        """`count_item`'s arguments for a run and its result line (`count_items` takes a list of them)."""
        made, skipped = run.judgment_counts()
        pred = prediction(line, run.mode) if run.status == "ok" and keep_pairs and run.label is not None else None
        return run.id, run.status, run.label_error, made, skipped, run.label, pred

    def count_item(self, item_id, status: str, label_error, made: int, skipped: int, label, pred,
                   keep_pairs: bool = True) -> None:
        """Count one item: its `status` (ok, invalid or failed), `made` judgments made and `skipped` skipped,
        and (`keep_pairs`) its prediction `pred` (None unless ok) against its `label` when it has one. Verify and
        what-if count the items the columns vouched for so, with no ItemRun made for them."""
        self.items += 1
        self.count_id(item_id)
        if status == "ok":
            self.ok += 1
        elif status == "invalid":
            self.invalid += 1
        else:
            self.failed += 1
        if label_error:
            self.label_problems += 1
        self.judgments += made
        self.skipped += skipped
        if label is not None:
            self.labelled += 1
            if keep_pairs:
                self.preds.append(pred)
                self.golds.append(label)

    def count_entries(self, entries: list) -> None:
        """`count_item` of each entry (its arguments, as `entry` gives them), in order (`count_items`)."""
        if entries:
            self.count_items(*zip(*entries))

    def count_items(self, ids, statuses, errors, made, skipped, labels, preds) -> None:
        """`count_item` of each item, its arguments given a column each (ids, statuses, label errors, judgments
        made and skipped, labels, predictions), in order: all at once where every item is ok, with an id that no
        other has (verify and what-if count a chunk so), else one by one."""
        try:
            distinct = None not in ids and len(set(ids)) == len(ids)
        except TypeError:  # an id that cannot be in a set: `count_id` says so
            distinct = False
        if not (distinct and statuses.count("ok") == len(ids) and self.count_distinct_ids(ids)):
            for entry in zip(ids, statuses, errors, made, skipped, labels, preds):
                self.count_item(*entry)
            return
        self.items += len(ids)
        self.ok += len(ids)
        self.label_problems += sum(map(bool, errors))
        self.judgments += sum(made)
        self.skipped += sum(skipped)
        if None in labels:
            preds = [pred for pred, label in zip(preds, labels) if label is not None]
            labels = [label for label in labels if label is not None]
        self.labelled += len(labels)
        self.preds.extend(preds)
        self.golds.extend(labels)

    def count_id(self, item_id) -> None:
        """Note an item's id, counting it when an earlier item had it. A row that could not be read has no id
        (None): it is not a repeat of another such row."""
        if item_id is not None:
            self._ids.add(item_id)

    def count_distinct_ids(self, ids: list | set) -> bool:
        """Note ids known to be distinct among themselves, all at once, when none was noted before (verify counts
        a chunk's ids in one go); False, noting nothing, when one was (they are then counted one by one)."""
        return self._ids.add_distinct(ids)

    def id_sample(self, k: int = 6) -> list[str]:
        """Some of the ids counted so far (sorted, as text), for a message about an id that is not among them."""
        return self._ids.sample(k)

    def count_needs(self, plan: Plan, run: ItemRun) -> None:
        """What-if replay: an item left invalid because the recorded run skipped a judgment (short-circuit
        judging) counts towards each criterion whose skipped judgment the program needs."""
        if run.status == "invalid" and any(j.status == "skipped" for row in run.judgments.values() for j in row):
            for criterion in needed_judgments(plan, run):
                self.needs[criterion] = self.needs.get(criterion, 0) + 1

    def count_difference(self, difference: Difference | None) -> None:
        """Verifying replay: count an item that was not reproduced, keeping the first difference."""
        if difference is not None:
            self.differences += 1
            if self.first_difference is None:
                self.first_difference = difference

    def metrics(self, bootstrap: int = 1000, seed: int = 0) -> dict | None:
        """Agreement with the labels (with bootstrap intervals), or None without labelled items."""
        if not self.golds:
            return None
        preds, golds = self.preds.numbers(), self.golds.numbers()  # pointwise: arrays, not a Python object an item
        if self.mode != "pointwise" or preds is None or golds is None or np.isnan(golds).any():
            preds, golds = self.preds.tolist(), self.golds.tolist()
        return metrics_with_confidence(self.mode, preds, golds, n_resamples=bootstrap, seed=seed)

    def line(self) -> str:
        return (f"{self.items} item{'s' if self.items != 1 else ''}: {self.ok} ok, {self.invalid} invalid, "
                f"{self.failed} failed")


def _guard(inputs: list, out: str | None, trace: str | None) -> None:
    """Refuse (PathClash) results or trace paths that are an input or each other, before anything is opened."""
    check_outputs(inputs, [("the results file", out), ("the trace file", trace)])


def open_output(path: str | None) -> TextIO | None:
    if path is None:
        return None
    if path == "-":
        import sys

        return sys.stdout
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", encoding="utf-8")


class _JsonResults:
    """Result lines to a text stream, one JSON object per line."""

    def __init__(self, handle: TextIO):
        self.handle = handle

    def write(self, line: dict) -> None:
        self.handle.write(dumps(line) + "\n")

    def close(self) -> None:
        close_output(self.handle)


def close_output(f) -> None:
    """Close a file gsr opened; standard output (`-`), whatever stands in for it, is only flushed."""
    import sys

    if f is None:
        return
    if f is sys.stdout or f is sys.__stdout__:
        f.flush()
    else:
        f.close()


class Spool:
    """A replay's result lines (or its new trace), held in an anonymous temporary file until the whole trace
    has been read and then copied to the file (`keep`, `commit`): a replay that gives up part way (the trace
    goes item by item) has written nothing. Binary: a read-write text file resets its decoder at every write
    (a call into Python's codecs, several percent of a what-if replay). The results file's folder is made (and must be writable) at
    once, so that a results file that cannot be written is said before the trace is read, not after."""

    def __init__(self, out: str):
        import tempfile  # (here: a replay without --out has no need of it)

        if out != "-":
            folder = Path(out).parent
            folder.mkdir(parents=True, exist_ok=True)
            if not os.access(folder, os.W_OK):
                raise PermissionError(errno.EACCES, "permission denied", str(folder))
        self.out, self.file = out, tempfile.TemporaryFile()

    def write(self, text: str) -> None:
        try:
            self.file.write(text.encode())
        except OSError as exc:
            raise self._named(exc) from None

    def _named(self, exc: OSError) -> OSError:
        """`exc`, of the temporary file (its folder full, say), naming that folder (TMPDIR names another)."""
        import tempfile

        exc.filename = exc.filename or tempfile.gettempdir()
        return exc

    def keep(self, summary: "RunSummary") -> None:
        """End the lines with the results' last line, for `summary`, and copy them to the results file."""
        self.write(dumps(results_end(summary, complete=recorded_complete(summary.recorded))) + "\n")
        self.commit()

    def commit(self) -> None:
        """Copy what was written to the file, all at once (`atomic_file`: a disk that fills part way leaves the
        file as it was), or to standard output, for `-`."""
        import shutil
        import sys

        try:
            self.file.seek(0)  # (which writes what is buffered)
        except OSError as exc:
            raise self._named(exc) from None
        if self.out != "-":
            with atomic_file(self.out) as handle:
                shutil.copyfileobj(self.file, handle)
            return
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)  # (None: a stand-in for standard output, text only)
        if buffer is None:
            sys.stdout.write(self.file.read().decode())
        else:
            shutil.copyfileobj(self.file, buffer)
            buffer.flush()

    def __enter__(self) -> "Spool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a full temporary folder, said already: what it could not flush is not kept
            self.file.close()


def open_results(path: str | None, mode: str):
    """A writer of result lines (`write(line)`, `close()`): JSONL, or Parquet for a `.parquet` path."""
    from gsrlang.files.parquet import ResultsParquet, is_parquet

    if path is not None and is_parquet(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return ResultsParquet(path, mode)
    handle = open_output(path)
    return _JsonResults(handle) if handle is not None else None


async def _write_runs(batches, out: str | None, trace: str | None, registry, summary: RunSummary, on_item,
                      keep_pairs: bool, t0: float, run_info: Callable[[], dict]) -> None:
    """Write each run of the stream (lists of (ItemRun, its program's `Static` or `NotRun`, its result line or
    None, its trace record or None: made here from the run)): its result line and trace record; count it; end
    the trace with the run summary when the stream is done. Closes the files and the judges."""
    out_f, trace_f = open_results(out, summary.mode), open_output(trace)
    writer = TraceWriter(trace_f) if trace_f else None
    model_judge = registry.get("llm") if hasattr(registry, "get") else None
    cut = getattr(model_judge, "budget_cut", None) if getattr(model_judge, "budget_usd", None) else None
    try:
        async for batch in batches:
            for run, static, line, record in batch:
                if cut is not None and (summary.stopped or cut(run)):  # --budget: only a prefix is written, so
                    summary.stopped = "budget"  # that a later run with more budget resumes it from the cache
                    summary.unwritten += 1
                    continue
                if line is None:
                    line = result_line(run, static.program, static.source)
                if out_f:
                    out_f.write(line)
                if writer:
                    if record is None:
                        writer.write(run, static, line)
                    else:
                        writer.write_record(record, static)
                summary.count(run, line, keep_pairs)
                if on_item:
                    on_item(run, line)
        if writer:
            record = run_summary_record(summary, registry.usage(), time.perf_counter() - t0, run_info())
            if summary.stopped:
                record.update(complete=False, stopped=summary.stopped, unwritten=summary.unwritten)
            writer.write_summary(record)
        if not summary.stopped:
            end_results(out_f, summary)
    finally:
        for f in (out_f, trace_f):
            close_output(f)
        await registry.aclose()


def end_results(out_f, summary: RunSummary) -> None:
    """End a completed run's JSONL results with `results_end` (a Parquet file is complete once closed: a killed
    run's has no footer)."""
    if isinstance(out_f, _JsonResults):
        out_f.handle.write(dumps(results_end(summary, complete=True)) + "\n")


def results_end(summary: RunSummary, complete: bool) -> dict:
    """The line that ends a results file whose run went to the end of its data (see gsrlang.trace.schema)."""
    return {"kind": RUN_SUMMARY, "complete": complete, "mode": summary.mode, "items": summary.items,
            "ok": summary.ok, "invalid": summary.invalid, "failed": summary.failed,
            "duplicate_ids": summary.duplicate_ids}


def recorded_complete(record: dict | None) -> bool:
    """Whether a trace's run-summary record (None: it has none) says its run went to the end."""
    return record is not None and record.get("complete", True) is True


def run_summary_record(summary: RunSummary, usage: dict, wall_s: float, run_info: dict) -> dict:
    """The record that ends a completed run's trace: counts, wall time and each judge's usage (`usage`, as a
    registry's `usage()` gives it: model calls, HTTP requests, cache hits, tokens, ...)."""
    return summary_record(mode=summary.mode, **run_info, items=summary.items, ok=summary.ok,
                          invalid=summary.invalid, failed=summary.failed, label_problems=summary.label_problems,
                          labelled=summary.labelled, wall_s=round(wall_s, 3), judges=usage,
                          short_circuit={"judgments": summary.judgments, "skipped": summary.skipped})


def run_file(program: CheckedProgram, data: str | Path, columns: ColumnMap, registry, mode: str,
             config: RunConfig = RunConfig(), on_item: Callable[[ItemRun, dict], None] | None = None,
             batcher=None) -> RunSummary:
    """Run `program` over every row of `data` as `config` says; raises DataError when the file cannot be read at
    all, PathClash when `config.out` or `config.trace` is an input or the other output.

    A program whose judges all answer a column at once (rules, human fields) runs a chunk of items at a time
    (gsrlang.execution.inlinerun), with the same results and trace, byte for byte; `config.columnar=False` runs it
    item by item (gsrlang.execution.planner decides). `batcher`: the model calls go through a provider's Batch API
    (gsrlang.judges.llm.batch; the trace's run summary says how)."""
    path = config.program_path if config.program_path is not None else program.path
    out, trace = config.out, config.trace
    _guard([("the data file", data), ("the program", path)], out, trace)
    items = read_items(data, columns)
    if config.limit is not None:
        items = itertools.islice(items, config.limit)
    summary = RunSummary(program.name, program.content_hash, mode)
    t0 = time.perf_counter()

    async def go():
        import asyncio

        from gsrlang.execution.limit import CallLimit

        plan = Plan(program)
        labels = label_reader(program, mode, columns) if columns.label_field else None
        static = Static(plan, path)
        if batcher is not None:
            batcher.attach(asyncio.current_task())
        route = run_route(config, batch=batcher is not None, columns_possible=columnar_judges(plan, registry))
        if route.evaluate == COLUMNS:
            batches = ColumnRunner(plan, registry, mode, labels, static, records=trace is not None).batches(items)
        else:
            batches = _singles(run_items(plan, items, registry, mode, CallLimit(config.concurrency), labels,
                                         config.window, config.short_circuit), static)

        def info() -> dict:
            extra = {"batch": batcher.summary()} if batcher is not None else {}
            return {"program": {"name": program.name, "hash": program.content_hash, "path": path}, **extra}

        try:
            await _write_runs(batches, out, trace, registry, summary, on_item, config.keep_pairs, t0, info)
        finally:
            if batcher is not None:
                await batcher.aclose()

    return _timed(go, summary, t0)


def _timed(go, summary: RunSummary, t0: float) -> RunSummary:
    """`asyncio.run(go())`, noting the summary's wall time since `t0` even when it raises."""
    import asyncio

    try:
        asyncio.run(go())
    finally:
        summary.seconds = time.perf_counter() - t0
    return summary


async def _singles(runs, static):
    """The item path's runs as batches of one (for `_write_runs`)."""
    async for run in runs:
        yield ((run, static, None, None),)


def run_index_file(programs, data: str | Path, columns: ColumnMap, registry, config: RunConfig = RunConfig(),
                   on_item: Callable[[ItemRun, dict], None] | None = None, compile_ids: bool = False) -> RunSummary:
    """Run every row of `data` under its own program (`programs`: an `IndexedPrograms` whose mode is chosen),
    item by item, as `config` says (its program path and columnar choice do not apply).

    compile_ids: give items the id a batch compile gives them (the row's `id` column when there is
    one, else the row number), for data read without an id column. Raises DataError as `run_file` does.
    """
    from gsrlang.trace.write import NotRun

    out, trace, limit = config.out, config.trace, config.limit
    _guard([("the data file", data), ("the program index", programs.index)], out, trace)
    mode = programs.mode
    items = read_items(data, columns)
    if compile_ids:
        items = (compile_id(it) if isinstance(it, Item) else it for it in items)
    if limit is not None:
        items = itertools.islice(items, limit)
    summary = RunSummary(programs.index, "", mode)
    t0 = time.perf_counter()
    failed_row = NotRun(None, programs.index)

    async def go():
        from gsrlang.execution.limit import CallLimit

        async def stream():
            async for run, ref in run_items_each(programs.resolve, items, registry, mode,
                                                  CallLimit(config.concurrency), config.window,
                                                  config.short_circuit):
                yield ((run, ref.static if ref is not None else failed_row, None, None),)

        def info() -> dict:
            return {"programs": {"index": programs.index, "checked": programs.checked,
                                 "did_not_check": programs.unusable, "items_without_program": programs.no_program}}

        await _write_runs(stream(), out, trace, registry, summary, on_item, config.keep_pairs, t0, info)

    return _timed(go, summary, t0)


def replay_file(trace_path: str | Path, program: CheckedProgram | None, verify: bool, config: ReplayConfig = ReplayConfig(),
                on_item: Callable[[ItemRun, dict, Difference | None, object], None] | None = None,
                programs=None) -> RunSummary:
    """Replay a trace under `program` item by item (verify: compare; else re-compose), as `config` says; raises
    TraceError / ReplayError.

    With `programs` (a `RecordedPrograms`, and `program` None), a per-item trace is verified,
    each record under the program it names. The trace's run-summary record is not replayed:
    it is kept in `summary.recorded`. `on_item(run, result line, difference, trace static)`.
    """
    from gsrlang.execution.replay import replay_records_each

    out, trace, program_path, limit = config.out, config.trace, config.program_path, config.limit
    program_label, keep_pairs = config.program_label, config.keep_pairs
    _guard([("the trace", trace_path), ("the program", program_path if program is not None else None)], out, trace)
    summary = RunSummary(program.name if program else "", program.content_hash if program else "", "")
    records = _item_records(read_records(trace_path), summary, stored=programs is None)
    if limit is not None:
        records = itertools.islice(records, limit)
    # the result lines and the new trace are held until the whole trace has been read (`Spool`): a trace
    # refused part way, an edited label on line 31 say, leaves neither file, as the columnar paths leave none
    out_f, trace_f = Spool(out) if out is not None else None, Spool(trace) if trace is not None else None
    writer = TraceWriter(trace_f) if trace_f else None
    if programs is not None:
        replayed = replay_records_each(programs, records)
    else:
        plan = Plan(program)
        single = Static(plan, program_path if program_path is not None else program.path)
        replayed = (r + (single,) for r in replay_records(plan, records, verify, program_label))
    t0 = time.perf_counter()
    try:
        for _, record, run, line, difference, static in replayed:
            if not summary.mode:
                summary.mode = run.mode
            if out_f:
                out_f.write(dumps(line) + "\n")
            if writer:
                writer.write(run, static, line)
            summary.count(run, line, keep_pairs)
            if not verify:
                summary.count_needs(plan, run)
            summary.count_difference(difference)
            if on_item:
                on_item(run, line, difference, static)
        if out_f:
            out_f.keep(summary)  # the lines, ended by `results_end`
        if writer:
            end = results_end(summary, complete=recorded_complete(summary.recorded))
            writer.write_summary({**summary_record(replayed=str(trace_path)), **end})
            trace_f.commit()
    finally:
        summary.seconds = time.perf_counter() - t0
        for f in (out_f, trace_f):
            close_output(f)
    return summary


def load_table(program: CheckedProgram, config: TableConfig):
    """The labelled items `gsr tune` and `gsr ablate` evaluate, as a columnar Table, from where the planner's
    `table_route` says: a trace's recorded judgments, or a data file judged by the program's inline judges.

    Raises ReplayError (the trace's criteria cannot feed the program), TraceError or DataError (a file that
    cannot be read), ValueError (a data file under a program with judges that are not inline)."""
    from gsrlang.execution.tracetable import table_from_data, table_from_trace
    from gsrlang.judges.registry import default_registry

    if table_route(config).source == "trace":
        return table_from_trace(program, config.trace, config.program_label)
    labels = label_reader(program, config.mode, config.columns)
    return table_from_data(program, config.data, config.columns, default_registry(), config.mode, labels)


def _item_records(records, summary: RunSummary, stored: bool = True):
    """The item records (version 2 ones as `Stored`, or in the logical form); the run summary (the last one,
    if several) goes to `summary.recorded`."""
    from gsrlang.execution.replay import Stored
    from gsrlang.trace.read import logical_record

    for line, header, record in records:
        if header is not None:
            yield line, (Stored(header, record) if stored else logical_record(header, record))
        elif is_summary(record):
            summary.recorded = record
        else:
            yield line, record


def skipped_judgments(trace_path: str | Path) -> int:
    """How many judgments the run that wrote the trace skipped (its run summary's count; 0 without one)."""
    from gsrlang.trace.jsonio import loads

    with open(trace_path, "rb") as handle:
        handle.seek(max(0, handle.seek(0, 2) - 65536))  # the last 64 KiB
        lines = handle.read().splitlines()
    try:
        last = loads(lines[-1]) if lines else {}
    except Exception:  # a cut or damaged last line: no summary to read
        return 0
    return int(((last.get("short_circuit") or {}).get("skipped") or 0)) if isinstance(last, dict) and \
        is_summary(last) else 0
