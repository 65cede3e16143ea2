"""Batch compile: one program per data item from a per-item rubric column (BiGGen-style rubrics).

Rows are read from JSONL, CSV/TSV or a JSON array; each row is cut down at once to the
columns named for the compile (id, rubric, and optionally task input and reference):
nothing else of the row is kept, and columns that hold responses or labels cannot be
named (`RefusedField`). Each item's S is compiled through the compile cache, so a rerun
costs no model call. The output folder gets:

* `<id>.gsr` for each accepted program (provenance header included);
* `<id>.gsr.failed` for each compile failure: its diagnostics as comments, then the
  last program (not a `.gsr` file, so `gsr check DIR` and folder scans skip it);
* `index.jsonl`: one line per item, in data order (see `IndexEntry` and docs/compiling.md);
* optionally a JSON compile report (`BatchReport.to_json`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator, Sequence

import attrs

from gsrlang.compiler.spec import CompileSpec, Contract, SpecError
from gsrlang.files.dataset import DataError, ItemError, MissingFieldError, Row, get_path, read_rows
from gsrlang.files.safeio import write_atomic

INDEX_NAME = "index.jsonl"

# Column names that hold what a compile must never see: candidate responses and gold labels.
_REFUSED = re.compile(
    r"^(responses?|response_?[a-z0-9]+|outputs?|output_?[a-z0-9]+|candidates?|candidate_?[a-z0-9]+|"
    r"completions?|answers?|answer_?[a-z0-9]+|generation|prediction|chosen|rejected|"
    r"labels?|gold(_?label)?|winner|preference|human_?(score|label|judgment)s?|scores?|rating|ground_?truth)$",
    re.I)


class RefusedField(ValueError):
    """A compile column names a response or a label column."""


def check_field(role: str, name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"the {role} column must be a non-empty name")
    if _REFUSED.match(name.rsplit(".", 1)[-1]):
        raise RefusedField(
            f"refusing to read column {name!r} as the {role}: a compile sees no candidate response and no "
            f"gold label, and {name!r} names one (rename the column if it really holds the {role})")
    return name


@attrs.frozen
class CompileFields:
    """Which columns a batch compile reads. There is no response or label column, by design."""

    rubric: str = attrs.field(validator=lambda i, a, v: check_field("rubric", v))
    input: str | None = attrs.field(default=None, validator=lambda i, a, v: v is None or check_field("task input", v))
    reference: str | None = attrs.field(default=None,
                                        validator=lambda i, a, v: v is None or check_field("reference", v))
    id: str | None = attrs.field(default=None, validator=lambda i, a, v: v is None or check_field("id", v))

    def named(self) -> tuple[str, ...]:
        return tuple(f for f in (self.id, self.rubric, self.input, self.reference) if f is not None)


@attrs.frozen
class CompileItem:
    id: str
    line: int
    spec: CompileSpec


# ---- reading -------------------------------------------------------------------------------------------
class _Row(Exception):
    pass


def _text(record, name: str, optional: bool, empty_is_none: bool) -> str | None:
    try:
        value = get_path(record, name)
    except MissingFieldError as exc:
        raise _Row(f"missing column {name!r} ({exc.detail})") from None
    if value is None or (empty_is_none and value == ""):
        if optional:
            return None
        raise _Row(f"column {name!r} is empty")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _Row(f"column {name!r} must be text, got {type(value).__name__}")
    return str(value)


def _project(row: Row, fields: CompileFields, contract: Contract) -> CompileItem | ItemError:
    """Cut a row down to the compile columns; the rest of the row is dropped here."""
    if row.problem is not None:
        return ItemError(id=row.default_id, line=row.line, reason=f"{row.where}: {row.problem}")
    record, empty_is_none, item_id = row.record, row.empty_is_none, row.default_id
    try:
        if not isinstance(record, dict):
            raise _Row("expected a JSON object")
        if fields.id is not None:
            item_id = _text(record, fields.id, False, empty_is_none)
        elif "id" in record and isinstance(record["id"], (str, int)) and not isinstance(record["id"], bool) \
                and str(record["id"]).strip():
            item_id = str(record["id"])
        rubric = _text(record, fields.rubric, False, empty_is_none)
        task_input = _text(record, fields.input, True, empty_is_none) if fields.input else None
        reference = _text(record, fields.reference, True, empty_is_none) if fields.reference else None
        spec = CompileSpec(rubric=rubric, contract=contract, task_input=task_input, reference=reference)
    except (_Row, SpecError) as exc:
        return ItemError(id=item_id, line=row.line, reason=f"{row.where}: {exc}")
    return CompileItem(item_id, row.line, spec)


def read_compile_items(path: str | Path, fields: CompileFields, contract: Contract
                       ) -> Iterator[CompileItem | ItemError]:
    """Stream the items of a data file as CompileItem (or ItemError for a bad row).

    Rows are read by the same reader as `gsr run` (gsrlang.files.dataset.read_rows); only the named compile
    columns are read from them. Raises DataError for a file that cannot be read at all (missing,
    unsupported, a CSV header without a named column).
    """
    return (_project(row, fields, contract) for row in read_rows(path, fields.named()))


# ---- the index and the report ----------------------------------------------------------------------
@attrs.frozen
class IndexEntry:
    """One line of index.jsonl (paths are relative to the index's folder)."""

    id: str
    line: int
    status: str  # compiled | repaired | failed | error
    program: str | None = None  # the accepted program (compiled, repaired)
    failed_program: str | None = None  # the last program of a compile failure
    repairs: int = 0
    codes: tuple[str, ...] = ()  # error codes of every rejected round
    spec_sha256: str | None = None
    rubric_sha256: str | None = None
    cached: bool = False
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None  # why an item has no compile result
    error_kind: str | None = None  # "row" (the data row is unusable) or "model" (the model call failed)

    def to_json(self) -> dict:
        """Every field but the tokens (the report's, not the index's), in field order."""
        return attrs.asdict(self, filter=lambda a, _: a.name not in ("prompt_tokens", "completion_tokens"))


STATUSES = ("compiled", "repaired", "failed", "error")


@attrs.frozen
class BatchReport:
    entries: tuple[IndexEntry, ...]
    model: str = ""

    def count(self, status: str) -> int:
        return sum(e.status == status for e in self.entries)

    def code_counts(self) -> list[tuple[str, int, int]]:
        """(code, occurrences over every rejected round, items it occurred in), most frequent first."""
        total, items = Counter(), Counter()
        for e in self.entries:
            total.update(e.codes)
            items.update(set(e.codes))
        return [(c, n, items[c]) for c, n in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))]

    def to_json(self, top: int = 10) -> dict:
        from gsrlang.compiler.synthesize import COMPILER_CODES
        from gsrlang.lang.diagnostics.codes import CODES

        n = len(self.entries)
        counts = {s: self.count(s) for s in STATUSES}
        share = (lambda k: round(k / n, 4) if n else 0.0)
        return {
            "items": n, "model": self.model,
            "compiled_first_try": counts["compiled"], "compiled_after_repair": counts["repaired"],
            "failed": counts["failed"], "errors": counts["error"],
            "shares": {"first_try": share(counts["compiled"]), "after_repair": share(counts["repaired"]),
                       "failed": share(counts["failed"]), "errors": share(counts["error"])},
            "repair_rounds": dict(sorted(Counter(str(e.repairs) for e in self.entries
                                                 if e.status in ("compiled", "repaired")).items())),
            "top_codes": [{"code": c, "count": k, "items": i,
                           "title": CODES[c].title if c in CODES else COMPILER_CODES.get(c, "")}
                          for c, k, i in self.code_counts()[:top]],
            **{k: sum(getattr(e, k) for e in self.entries)
               for k in ("model_calls", "cached", "prompt_tokens", "completion_tokens")},
        }

    def summary(self, top: int = 5) -> str:
        doc = self.to_json(top)
        n = doc["items"]
        pct = (lambda k: f"{100 * k / n:.0f}%" if n else "0%")
        lines = [f"compile report: {n} item{'s' if n != 1 else ''}",
                 f"  compiled on the first try  {doc['compiled_first_try']:>5}  {pct(doc['compiled_first_try'])}",
                 f"  compiled after repair      {doc['compiled_after_repair']:>5}  {pct(doc['compiled_after_repair'])}",
                 f"  failed                     {doc['failed']:>5}  {pct(doc['failed'])}"]
        if doc["errors"]:
            lines.append(f"  not compiled (errors)      {doc['errors']:>5}  {pct(doc['errors'])}")
        lines.append(f"  model calls {doc['model_calls']}, from cache {doc['cached']} item"
                     f"{'s' if doc['cached'] != 1 else ''}")
        if doc["top_codes"]:
            lines.append("  most frequent diagnostics:")
            lines += [f"    {c['code']}  {c['count']:>4} in {c['items']} item{'s' if c['items'] != 1 else ''}"
                      f"  {c['title']}" for c in doc["top_codes"]]
        return "\n".join(lines) + "\n"


# ---- file names --------------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def program_stem(item_id: str, taken: set[str]) -> str:
    """A file-name stem for an item id: safe characters only, unique in the folder (case-insensitively)."""
    stem = (_UNSAFE.sub("_", item_id).strip("._") or "item")[:80]
    if stem.lower() in taken or stem.lower() == "index":
        from gsrlang.compiler.spec import sha256_text

        stem = f"{stem}-{sha256_text(item_id)[:8]}"
    taken.add(stem.lower())
    return stem


def failed_text(result, display: str) -> str:
    from gsrlang.compiler.synthesize import diagnostics_concise

    lines = [f"compile failed: {result.reason}", f"spec-sha256: {result.spec.sha256}",
             f"contract: {result.spec.contract.task_line()}", f"model: {result.model}", "diagnostics:"]
    lines += ["  " + d for d in diagnostics_concise(result.last_program, result.diagnostics, display).splitlines()]
    return "".join(f"# {line}\n" for line in lines) + "\n" + (result.last_program or "")


# ---- the batch ---------------------------------------------------------------------------------------
def _fatal(exc) -> bool:
    return getattr(exc, "kind", None) == "connection" or getattr(exc, "status", None) in (401, 403, 404)


async def compile_batch(items: Sequence[CompileItem | ItemError] | Iterator[CompileItem | ItemError],
                        compile_one: Callable, out_dir: str | Path, *, concurrency: int = 4, model: str = "",
                        on_item: Callable[[CompileItem | ItemError, object], None] | None = None) -> BatchReport:
    """Compile every item with `compile_one(spec, path) -> CompileResult` and write programs and the index.

    Model-call failures are recorded per item (status `error`); a failure that would repeat for
    every item (no server, bad key, unknown model) stops the batch: the remaining items are
    recorded as not compiled.
    """
    from gsrlang.judges.llm import LLMError

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    seen_ids: dict[str, int] = {}
    queue: list[tuple[int, CompileItem, str]] = []
    entries: dict[int, IndexEntry] = {}
    for order, it in enumerate(items, 1):
        if isinstance(it, ItemError):
            entries[order] = IndexEntry(id=it.id or f"line-{it.line}", line=it.line, status="error", error=it.reason,
                                        error_kind="row")
            continue
        if it.id in seen_ids:
            entries[order] = IndexEntry(id=it.id, line=it.line, status="error",
                                        error=f"line {it.line}: duplicate id {it.id!r} (first on line "
                                              f"{seen_ids[it.id]})", error_kind="row")
            continue
        seen_ids[it.id] = it.line
        queue.append((order, it, program_stem(it.id, taken)))

    stopped: list[str] = []
    pending = iter(queue)

    async def worker() -> None:
        for order_no, item, stem in pending:
            if stopped:
                entries[order_no] = IndexEntry(id=item.id, line=item.line, status="error", spec_sha256=item.spec.sha256,
                                               error=f"not compiled: the batch stopped ({stopped[0]})",
                                               error_kind="model")
                continue
            try:
                result = await compile_one(item.spec, out / f"{stem}.gsr")
            except LLMError as exc:
                if _fatal(exc):
                    stopped.append(str(exc))
                entries[order_no] = IndexEntry(id=item.id, line=item.line, status="error",
                                               spec_sha256=item.spec.sha256, rubric_sha256=item.spec.rubric_sha256,
                                               error=f"model call failed: {exc}", error_kind="model")
                result = exc  # what on_item is told
            else:
                entries[order_no] = _write(out, stem, item, result)
            if on_item:
                on_item(item, result)

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    ordered = tuple(entries[k] for k in sorted(entries))
    write_index(out / INDEX_NAME, ordered)
    return BatchReport(ordered, model=model)


def _write(out: Path, stem: str, item: CompileItem, result) -> IndexEntry:
    common = dict(id=item.id, line=item.line, status=result.status, repairs=result.repairs, codes=result.codes,
                  spec_sha256=item.spec.sha256, rubric_sha256=item.spec.rubric_sha256, cached=result.cached,
                  model_calls=result.model_calls, prompt_tokens=0 if result.cached else result.prompt_tokens,
                  completion_tokens=0 if result.cached else result.completion_tokens)
    program, failed = out / f"{stem}.gsr", out / f"{stem}.gsr.failed"
    if result.ok:
        write_atomic(program, result.source)
        failed.unlink(missing_ok=True)
        return IndexEntry(program=program.name, **common)
    write_atomic(failed, failed_text(result, program.name))
    program.unlink(missing_ok=True)
    return IndexEntry(failed_program=failed.name, **common)


def write_index(path: Path, entries: Sequence[IndexEntry]) -> None:
    write_atomic(path, "".join(json.dumps(e.to_json(), ensure_ascii=False) + "\n" for e in entries))


def read_index(path: str | Path) -> dict[str, dict]:
    """id -> index entry (with `program` resolved to a path), for consumers such as `gsr run`.

    Raises ValueError (with the file and line) for a line that is not a JSON object."""
    from gsrlang.files.jsonl import read_jsonl

    path = Path(path)
    out = {}
    for _, entry in read_jsonl(path, ValueError, "a compile index entry"):
        if entry.get("program"):
            entry["program_path"] = str(path.parent / entry["program"])
        out[str(entry["id"])] = entry
    return out


class ProgramIndex:
    """Per-item programs of a batch compile, for consumers such as `gsr run`.

        index = ProgramIndex("programs/index.jsonl")
        program = index.program(item.id)   # a checked Program; raises KeyError / LookupError with a reason

    Programs are checked when first asked for (`analyze_file`, the same checker), then kept.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.entries = read_index(self.path)
        except (OSError, ValueError, KeyError) as exc:
            raise DataError(f"{self.path}: not a compile index ({exc})") from None
        self._programs: dict[str, object] = {}

    def __contains__(self, item_id: str) -> bool:
        return item_id in self.entries

    def program(self, item_id: str):
        if item_id in self._programs:
            return self._programs[item_id]
        if (entry := self.entries.get(item_id)) is None:
            raise KeyError(f"item {item_id!r} is not in {self.path}")
        if not entry.get("program"):
            why = entry.get("error") or f"its compile {entry.get('status')}"
            raise LookupError(f"item {item_id!r} has no compiled program ({why})")
        from gsrlang.lang.check.driver import analyze_file

        path = self.path.parent / entry["program"]
        try:
            analysis = analyze_file(path)
        except OSError as exc:
            raise LookupError(f"item {item_id!r}: cannot read {path}: {exc.strerror or exc}") from None
        if analysis.program is None:
            raise LookupError(f"item {item_id!r}: {path} does not check ({len(analysis.errors)} errors)")
        self._programs[item_id] = analysis.program
        return analysis.program
