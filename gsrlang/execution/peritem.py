"""Per-item programs: the compile index `gsr run --programs` reads, and the programs `gsr replay` re-checks.

`IndexedPrograms(index, registry, columns)` reads a batch compile's `index.jsonl`
(docs/compiling.md) into a compact map, item id -> program path or the reason there
is none, and hands out a `ProgramRef` per item. Programs are checked when first
needed (`analyze_file`, the checker `gsr check` uses) and kept in a small LRU keyed
by path, so a program shared by many items is checked once, and memory does not
grow with the number of programs. A program that does not check, declares another
task (mode) or scale than the run's, or has criteria the judges cannot serve, gives
a ref without a plan and with the reason: its items are invalid, the run goes on.

`RecordedPrograms(trace)` does the same for replay: each trace record names its
program's path and content hash; the file is re-checked (once per path, LRU) and
must still have the recorded hash.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Callable

import attrs

from gsrlang.execution.executor import all_inline, default_mode
from gsrlang.execution.labels import label_reader
from gsrlang.files.dataset import ColumnMap, DataError, Item
from gsrlang.files.jsonl import read_jsonl
from gsrlang.lang.program import CheckedProgram
from gsrlang.semantics.compose import Plan

__all__ = ["DEFAULT_CACHE_SIZE", "IndexedPrograms", "ProgramRef", "RecordedPrograms", "check_program", "compile_id"]

DEFAULT_CACHE_SIZE = 64  # checked programs kept at once


class ProgramRef:
    """The program one item runs under, or why it has none.

    plan: the Plan to run (None when the item cannot run); static: the trace header
    and node skeleton (a `gsrlang.trace.write.Static`, or a `NotRun`); problem: the reason when
    there is no plan; labels: the label reader for the item; inline: every judge of the
    plan is inline.
    """

    __slots__ = ("path", "program", "plan", "static", "problem", "labels", "inline")

    def __init__(self, path: str | None, program: CheckedProgram | None = None, plan: Plan | None = None, static=None,
                 problem: str | None = None, labels=None, inline: bool = False):
        self.path, self.program, self.plan, self.static = path, program, plan, static
        self.problem, self.labels, self.inline = problem, labels, inline


def check_program(path: str) -> tuple[CheckedProgram | None, str | None]:
    """(the checked program, None), or (None, why it cannot be used): one sentence with the first error."""
    from gsrlang.lang.check.driver import analyze_file

    try:
        analysis = analyze_file(path)
    except OSError as exc:
        return None, f"program `{path}` cannot be read: {exc.strerror or exc}"
    if analysis.program is not None:
        return analysis.program, None
    errors = analysis.errors
    if not errors:
        return None, f"program `{path}` does not check"
    first = errors[0]
    where = ""
    if analysis.text is not None and first.primary.path in (None, str(path)):
        where = f" (line {analysis.text.count(chr(10), 0, first.span.start) + 1})"
    more = f"; and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''}" if len(errors) > 1 else ""
    return None, (f"program `{path}` does not check: {first.code} {first.message}{where}{more} "
                  f"(`gsr check {path}`)")


def compile_id(item: Item) -> Item:
    """The item with the id a batch compile gives its row when no id column is named: the row's `id`
    (text or a whole number, not empty), else the row number the reader gave."""
    value = item.record.get("id") if isinstance(item.record, dict) else None
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip() and str(value) != item.id:
        return attrs.evolve(item, id=str(value))
    return item


class _LRU:
    def __init__(self, size: int):
        self.size = max(1, size)
        self.data: OrderedDict = OrderedDict()

    def get(self, key):
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


class IndexedPrograms:
    """The per-item programs of a compile index, as `gsr run --programs INDEX` uses them.

        programs = IndexedPrograms("programs/index.jsonl")
        mode = programs.choose_mode(None)      # --mode, else the first program's that checks
        programs.start(mode, columns, registry)  # fixes the scale (pointwise) and the judges
        ref = programs.resolve(item)           # a ProgramRef (plan or problem)

    Raises DataError for an index that cannot be read.
    """

    def __init__(self, index: str | Path, registry=None, cache_size: int = DEFAULT_CACHE_SIZE):
        self.index = str(index)
        self.registry = registry
        self.columns = ColumnMap()
        self.mode: str | None = None
        self.scale: tuple[float, float] | None = None  # the run's pointwise scale (the first program's)
        self.reference: str | None = None  # the program that fixed mode and scale
        self.checked = 0  # program files checked (a program evicted from the LRU and needed again counts again)
        self.unusable = 0  # of which did not check
        self.no_program = 0  # items run under no program
        self._cache = _LRU(cache_size)
        self._plain_labels = None
        self._entries, self._first_line, self._order = self._read(Path(index))

    # ---- the index ------------------------------------------------------------------------------------------
    def _read(self, path: Path) -> tuple[dict, dict, list]:
        """id -> (program path, None, line) or (None, reason, line); id -> the line of its first row for
        repeated ids; the first program paths in index order (for choosing the mode and the scale)."""
        if not path.is_file():
            raise DataError(f"{path}: no such file (the index a batch `gsr compile --out-dir` writes)")
        entries: dict[str, tuple[str | None, str | None, int | None]] = {}
        repeated: dict[str, int] = {}
        order: list[str] = []
        folder = path.parent
        for n, e in read_jsonl(path, DataError, "a JSON object (not a compile index)"):
            if "id" not in e or "status" not in e:
                raise DataError(f"{path}: line {n} has no `id` and `status`: not a compile index")
            item_id = str(e["id"])
            if item_id in entries:
                repeated.setdefault(item_id, entries[item_id][2])
                continue
            program = e.get("program")
            if program:
                program_path = str(folder / program)
                entries[item_id] = (program_path, None, e.get("line"))
                if len(order) < 10_000:
                    order.append(program_path)
            else:
                entries[item_id] = (None, _no_program(e, folder), e.get("line"))
        return entries, repeated, order

    # ---- mode and scale -----------------------------------------------------------------------------------------
    def choose_mode(self, mode: str | None, fallback: str = "pointwise") -> str:
        """The run's mode: `mode`, else the task of the first program in the index that checks
        (ValueError when it declares both), else `fallback` (no program checks)."""
        if mode is not None:
            return mode
        for path in dict.fromkeys(self._order):
            program = self._checked(path)
            if program is not None:
                mode = default_mode(program)
                if mode is None:
                    raise ValueError(f"the first program in the index, `{path}`, declares both a pointwise and a "
                                     "pairwise task: choose one with --mode")
                return mode
        return fallback

    def start(self, mode: str, columns: ColumnMap, registry=None) -> None:
        """Fix the run's mode, columns and judges (`registry`, if not given to the constructor); in pointwise
        mode the scale is that of the first program in the index that checks and has a pointwise task.
        Call before `resolve`."""
        self.mode, self.columns = mode, columns
        if registry is not None:
            self.registry = registry
        if self.registry is None:
            raise ValueError("IndexedPrograms.start: no judges (registry) to check the programs against")
        if mode == "pointwise":
            for path in dict.fromkeys(self._order):
                program = self._checked(path)
                if program is not None and program.readout.pointwise is not None:
                    p = program.readout.pointwise
                    self.scale, self.reference = (p.lo, p.hi), path
                    break
        for path, ref in list(self._cache.data.items()):  # checked before the start: judge them against the run
            self._cache.data[path] = self._fitted(ref)

    # ---- lookup -----------------------------------------------------------------------------------------------
    def resolve(self, item: Item) -> ProgramRef:
        """The program `item` runs under (by id), or a ref with the reason it has none."""
        entry = self._entries.get(item.id)
        if entry is None:
            return self._none(f"no compiled program: item {item.id!r} is not in {self.index}")
        path, problem, _ = entry
        first_line = self._first_line.get(item.id)
        if first_line is not None and item.line != first_line:
            return self._none(f"no compiled program: the id {item.id!r} is repeated; the index gives a "
                              f"program only to its first row (line {first_line})")
        if path is None:
            return self._none(problem)
        ref = self._cache.get(path)
        if ref is None:
            ref = self._fitted(self._load(path))
            self._cache.put(path, ref)
        if ref.plan is None:
            self.no_program += 1
        return ref

    def _none(self, problem: str) -> ProgramRef:
        from gsrlang.trace.write import NotRun

        self.no_program += 1
        return ProgramRef(None, static=NotRun(None, self.index), problem=problem, labels=self._labels(None))

    def _checked(self, path: str) -> CheckedProgram | None:
        ref = self._cache.get(path)
        if ref is None:
            ref = self._load(path)
            self._cache.put(path, ref)
        return ref.program

    def _load(self, path: str) -> ProgramRef:
        """Check the program file (a ref with the program, or with the reason it does not check)."""
        self.checked += 1
        program, problem = check_program(path)
        if program is None:
            self.unusable += 1
        return ProgramRef(path, program, problem=problem)

    def _fitted(self, ref: ProgramRef) -> ProgramRef:
        """A checked ref made ready for this run: a plan, or why the program cannot run its items."""
        from gsrlang.trace.write import NotRun, Static

        if ref.plan is not None or ref.static is not None:
            return ref
        path, program = ref.path, ref.program
        if program is None:
            return ProgramRef(path, static=NotRun(path, self.index), problem=ref.problem, labels=self._labels(None))
        problem = self._fit(program, path)
        if problem is not None:
            return ProgramRef(path, program, static=NotRun(path, self.index, program.name, program.content_hash),
                              problem=problem, labels=self._labels(None))
        plan = Plan(program)
        return ProgramRef(path, program, plan, Static(plan, path, self.index), None, self._labels(program),
                          all_inline(plan, self.registry))

    def _fit(self, program: CheckedProgram, path: str) -> str | None:
        mode = self.mode
        task = _task(program, mode)
        if task is None:
            other = "pairwise" if mode == "pointwise" else "pointwise"
            return f"program `{path}` declares no {mode} task (it has a {other} one); this run is {mode}"
        if mode == "pointwise" and self.scale is not None and (task.lo, task.hi) != self.scale:
            return (f"program `{path}` scores on {task.lo:g}..{task.hi:g}, but this run's scale is "
                    f"{self.scale[0]:g}..{self.scale[1]:g} (from `{self.reference}`): results on different "
                    "scales cannot be compared")
        problems = self.registry.problems(program)
        return f"the judges cannot serve program `{path}`: " + "; ".join(problems) if problems else None

    def _labels(self, program: CheckedProgram | None) -> Callable | None:
        if not self.columns.label_field:
            return None
        if program is None:
            if self._plain_labels is None:
                self._plain_labels = label_reader(None, self.mode, self.columns, self.scale)
            return self._plain_labels
        return label_reader(program, self.mode, self.columns, self.scale)


def _task(program: CheckedProgram, mode: str):
    return program.readout.pointwise if mode == "pointwise" else program.readout.pairwise


def _no_program(e: dict, folder: Path) -> str:
    status = e.get("status")
    if status == "failed":
        codes = list(dict.fromkeys(e.get("codes") or ()))
        what = f" ({', '.join(codes[:5])}{', ...' if len(codes) > 5 else ''})" if codes else ""
        see = f"; see {folder / e['failed_program']}" if e.get("failed_program") else ""
        return f"no compiled program: its compile failed{what}{see}"
    if status == "error":
        return f"no compiled program: {e.get('error') or 'the compile had no result'}"
    return f"no compiled program (index status {status!r})"


class RecordedPrograms:
    """The programs a per-item trace was recorded with, re-checked for replay (LRU by path)."""

    def __init__(self, trace: str | Path, cache_size: int = DEFAULT_CACHE_SIZE):
        self.trace = Path(trace)
        self._cache = _LRU(cache_size)
        self.checked = 0

    def locate(self, named: str) -> str | None:
        """The recorded path as recorded (relative to where the run was), else beside the trace."""
        candidates = [Path(named)] + ([] if Path(named).is_absolute() else [self.trace.resolve().parent / named])
        return next((str(c) for c in candidates if c.is_file()), None)

    def program(self, header: dict) -> tuple[CheckedProgram | None, str | None]:
        """(the program the header names, None), or (None, why it cannot be used for verification)."""
        named = header.get("path")
        if not named:
            return None, "the record does not name its program file"
        hit = self._cache.get(named)
        if hit is None:
            path = self.locate(named)
            if path is None:
                hit = (None, f"the program `{named}` is not there any more")
            else:
                self.checked += 1
                hit = check_program(path)
            self._cache.put(named, hit)
        program, problem = hit
        if program is not None and program.content_hash != header.get("hash"):
            return None, (f"`{named}` has changed since the trace was recorded: the trace was recorded under "
                          f"version {header.get('hash')}, the file is now {program.content_hash}")
        return program, problem
