"""The Python API: load a program, score responses, compile rubrics (see docs/python.md).

    import gsrlang
    program = gsrlang.load("examples/topical_chat/overall.gsr")   # ProgramError with the diagnostics
    result = program.score(input="...", response="...", record={"scores": {...}})
    result.score, result.ok, result.trace                          # the trace record, as `gsr run --trace`

Judging runs on an event loop that a `Judges` object owns (one background thread),
so the model client, its connection pool, its rate limits and the judgment cache
are created once and shared by every call, synchronous (`score`) or asynchronous
(`ascore`, awaited from any event loop), one item or a batch. The loop thread is a
daemon; `Judges.close()` (or a `with` block) ends it and closes the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

__all__ = ["CompileError", "GsrError", "InputError", "JudgeError", "Judges", "Program", "ProgramError", "Result",
           "compile_rubric", "load", "loads"]


class GsrError(Exception):
    """Every error the API raises for a user's mistake or an unusable setting derives from this."""


class ProgramError(GsrError):
    """The program does not check (or cannot be read). `diagnostics` holds the checker's errors."""

    def __init__(self, message: str, diagnostics: Sequence = (), path: str | None = None, text: str | None = None):
        super().__init__(message)
        self.diagnostics = tuple(diagnostics)
        self.path = path
        self.text = text


class JudgeError(GsrError):
    """The judges cannot serve the program (no model for `llm` criteria, an unknown verifier, a bad setting).

    `problems` holds one sentence per problem."""

    def __init__(self, problems: Sequence[str]):
        super().__init__("; ".join(problems))
        self.problems = list(problems)


class InputError(GsrError, ValueError):
    """The arguments of a call do not fit the program (a pairwise program given one response, ...)."""


class CompileError(GsrError):
    """`compile_rubric` produced no valid program within its repair budget; `result` is the recorded failure."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result
        self.diagnostics = tuple(getattr(result, "diagnostics", ()) or ())


# ---- results ---------------------------------------------------------------------------------------------
@attrs.frozen(eq=False)
class Result:
    """One scored item: the result line of `gsr run --out` and the trace record of `gsr run --trace`.

    `score` (pointwise: the quantized native score), `raw` (before quantizing), `value` (the sink's Score
    in [0, 1], candidate A), `winner` (pairwise: "first", "second" or "tie"); None when the item is not ok.
    `trace` is made when first read (a batch that goes by columns would otherwise compose every item again
    for it); `record` is the version 2 item record the column path made for a trace file (None: a
    `TraceWriter` makes it from `run`).
    """

    status: str  # "ok" | "invalid" | "failed"
    mode: str
    score: float | int | None
    raw: float | None
    winner: str | None
    value: float | None
    reason: str | None
    line: dict = attrs.field(repr=False)  # the results-file line
    run: object = attrs.field(default=None, repr=False)  # the executor's ItemRun (for a TraceWriter)
    static: object = attrs.field(default=None, repr=False)  # the program's trace Static (gsrlang.trace.write)
    record: dict | None = attrs.field(default=None, repr=False)  # the column path's version 2 item record

    @functools.cached_property
    def trace(self) -> dict:
        """The trace record (replayable with gsr replay)."""
        from gsrlang.trace.write import trace_record

        return trace_record(self.run, None, static=self.static)

    def _key(self) -> tuple:
        return self.status, self.mode, self.score, self.raw, self.winner, self.value, self.reason, self.line

    def __eq__(self, other) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key() and self.trace == other.trace

    __hash__ = None  # a result holds dicts

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def judgments(self) -> dict:
        """{criterion id: [judgment per candidate]} as recorded (value, status, reason, raw, provenance)."""
        from gsrlang.trace import TraceView

        return TraceView.of_record(self.trace).judged()


def _result(run, static, line: dict | None = None, record: dict | None = None) -> Result:
    from gsrlang.trace.schema import result_line

    line = line if line is not None else result_line(run, static.program, static.source)
    sink = line.get("sink") or {}
    value = sink.get("A") if line["status"] == "ok" else None
    return Result(line["status"], line["mode"], line.get("score"), line.get("raw"), line.get("winner"),
                  value if isinstance(value, (int, float)) else None, line.get("reason"), line, run, static, record)


# ---- judges ---------------------------------------------------------------------------------------------
class Judges:
    """The judges a program is scored with, and the event loop they run on.

    Rule, human and verifier judges are always there. The model judge (for `llm` criteria) is built on
    first need from `model`, `base_url`, `api_key` and `settings` (any other `gsr.toml` [judge] key:
    `temperature`, `concurrency`, `seed`, ...), then the environment (GSR_MODEL, OPENAI_BASE_URL,
    OPENAI_API_KEY), then the nearest gsr.toml, exactly as `gsr run` builds it; `llm=` gives your own.
    `cache`: the judgment cache file (SQLite), or None for none (the default, unlike `gsr run`).
    `concurrency`: judge calls in flight across every call on these judges (default 8), their one
    `CallLimit` (gsrlang.execution.planner), held around each judge call as in `gsr run`; given, it is
    also the model judge's `concurrency` setting, which would otherwise stay at gsr.toml's or 8 (see
    gsrlang.judges.llm.judge.LLMJudge for what each bound is).
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None, *,
                 cache: str | Path | None = None, concurrency: int | None = None, llm=None, **settings):
        if concurrency is not None and concurrency < 1:
            raise InputError(f"concurrency must be at least 1, got {concurrency}")
        self.options = {"model": model, "base_url": base_url, "api_key": api_key, "concurrency": concurrency,
                        **settings}
        self.cache = str(cache) if cache is not None else None
        self.concurrency = concurrency if concurrency is not None else 8
        self._llm = llm
        self._registry = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._limit = None  # the CallLimit of the judges' loop, made with it
        self._lock = threading.Lock()
        self._checked: set[str] = set()

    def registry(self, needs_llm: bool):
        """The judge registry, with the model judge when `needs_llm` (built once)."""
        from gsrlang.judges.registry import default_registry

        with self._lock:
            if self._registry is None or (needs_llm and self._registry.get("llm") is None):
                llm = self._llm if self._llm is not None or not needs_llm else self._build_llm()
                self._registry = default_registry(llm)
            return self._registry

    def _build_llm(self):
        from gsrlang.judges.llm.config import NO_MODEL_MESSAGE, LLMError, resolve_settings
        from gsrlang.judges.llm.options import JudgeOptions, build_llm_judge

        flags = {k: v for k, v in self.options.items() if v is not None}
        try:
            return build_llm_judge(resolve_settings(flags), JudgeOptions(cache=self.cache))
        except (LLMError, ValueError) as exc:
            if isinstance(exc, LLMError) and str(exc) == NO_MODEL_MESSAGE:
                return None  # reported by the registry's check, with the usual help
            raise JudgeError([f"the LLM judge cannot start: {exc}"]) from None

    def check(self, program) -> object:
        """The registry serving `program`, checked once per program (JudgeError otherwise)."""
        from gsrlang.judges.base import JudgeConfigError

        needs_llm = any(n.criterion.procedure.kind == "llm" or (
            n.criterion.ensemble is not None and any(p.kind == "llm" for p in n.criterion.ensemble.judges))
            for n in program.criteria)
        registry = self.registry(needs_llm)
        if program.content_hash not in self._checked:
            try:
                registry.check(program)
            except JudgeConfigError as exc:
                raise JudgeError(exc.problems) from None
            self._checked.add(program.content_hash)
        return registry

    def usage(self) -> dict:
        """Each judge's counters (the model judge's calls, cache hits, tokens, ...)."""
        return self._registry.usage() if self._registry is not None else {}

    # the loop every judge call runs on
    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve():
                    asyncio.set_event_loop(loop)
                    from gsrlang.execution.limit import CallLimit

                    self._limit = CallLimit(self.concurrency)
                    ready.set()
                    loop.run_forever()

                self._thread = threading.Thread(target=serve, name="gsrlang-judges", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def run(self, coro_fn):
        """Run `coro_fn(limit)` on the judges' loop and wait for it (from synchronous code)."""
        loop = self._start()
        if _running_loop() is loop:
            raise RuntimeError("Judges.run called from a judge: await the coroutine instead")
        return asyncio.run_coroutine_threadsafe(coro_fn(self._limit), loop).result()

    async def arun(self, coro_fn):
        """Run `coro_fn(limit)` on the judges' loop and await it from any event loop."""
        loop = self._start()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro_fn(self._limit), loop))

    def close(self) -> None:
        """Close the judges (the model client, the cache) and end the loop thread."""
        if (loop := self._loop) is None:
            return
        if self._registry is not None:
            asyncio.run_coroutine_threadsafe(self._registry.aclose(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join()
        loop.close()
        self._loop, self._registry, self._checked = None, None, set()

    def __enter__(self) -> "Judges":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_DEFAULT: Judges | None = None


def default_judges() -> Judges:
    """The judges used when a call names none: configured from the environment and gsr.toml, no cache."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Judges()
    return _DEFAULT


# ---- programs -------------------------------------------------------------------------------------------
class Program:
    """A checked program, ready to score responses. Get one with `gsrlang.load(path)` or `gsrlang.loads(text)`.

    `checked` is the checker's `gsrlang.lang.program.CheckedProgram` (its nodes, readout, content hash), `plan`
    the order its nodes are evaluated in (`gsrlang.semantics.compose.Plan`), made once.
    """

    def __init__(self, checked, path: str | None = None):
        from gsrlang.semantics.compose import Plan
        from gsrlang.trace.write import Static

        self.checked = checked
        self.path = path
        self.plan = Plan(checked)
        self.static = Static(self.plan, path)  # what its trace records are written with
        self._runners: dict = {}  # mode -> (registry, its ColumnRunner)

    name = property(lambda self: self.checked.name)
    hash = property(lambda self: self.checked.content_hash)

    @property
    def modes(self) -> tuple[str, ...]:
        r = self.checked.readout
        return tuple(m for m, spec in (("pointwise", r.pointwise), ("pairwise", r.pairwise)) if spec)

    def __repr__(self) -> str:
        return f"<gsrlang.Program {self.name} ({self.hash.split(':')[-1][:12]}), {', '.join(self.modes)}>"

    def _mode(self, mode: str | None, responses: int) -> str:
        if mode is None:
            return self.modes[0] if len(self.modes) == 1 else ("pairwise" if responses == 2 else "pointwise")
        if mode not in self.modes:
            raise InputError(f"program {self.name!r} declares no {mode} task (it has: {', '.join(self.modes)})")
        return mode

    def item(self, input: str = "", response: str | None = None, reference: str | None = None, *,
             responses: Sequence[str] | None = None, record: Mapping | None = None, id: str | None = None,
             mode: str | None = None, line: int = 0):
        """(mode, the `gsrlang.files.dataset.Item`) for one call's arguments; InputError when they do not fit."""
        from gsrlang.files.dataset import Candidate, Item

        if responses is not None and response is not None:
            raise InputError("give `response` (pointwise) or `responses` (pairwise), not both")
        texts = tuple(responses) if responses is not None else ((response,) if response is not None else ())
        mode = self._mode(mode, len(texts))
        need = 1 if mode == "pointwise" else 2
        if not texts and not self._reads_responses():
            texts = ("",) * need  # the criteria read no response (human annotations): the candidates are named
        if len(texts) != need:
            raise InputError(f"a {mode} item has {need} response{'s' if need > 1 else ''}, got {len(texts)}"
                             + (": pass responses=(first, second)" if need == 2 else ": pass response=..."))
        for name, text in (("input", input), ("reference", reference), *(("response", t) for t in texts)):
            if text is not None and not isinstance(text, str):
                raise InputError(f"`{name}` must be a str, got {type(text).__name__}")
        candidates = tuple(Candidate(letter, text) for letter, text in zip("AB", texts))
        if id is None and record is not None and _usable_id(record.get("id")):
            id = str(record["id"])  # as `gsr run` does: a record's `id` column is the item's id unless one is given
        return mode, Item(id if id is not None else str(line), line, input or "", candidates, reference, None,
                          dict(record or {}))

    def _reads_responses(self) -> bool:
        from gsrlang.files.needs import program_needs

        return bool(program_needs(self.checked).responses)

    async def execute(self, mode, item, registry, limit) -> Result:
        """`execute_all` of one (mode, item) pair. Both take started judges (`registry`, from `Judges.check`) and
        their limit on calls in flight: what `score` runs, and what `gsr serve` calls (gsrlang.serve)."""
        return (await self.execute_all([(mode, item)], registry, limit))[0]

    async def execute_all(self, items, registry, limit) -> list[Result]:
        """Score (mode, item) pairs, in order, the way a run of this program goes: the planner's route
        (gsrlang.execution.planner), column by column where every judge answers a column at once, else
        item by item under the judges' one limit on calls in flight (None: judges that all answer inline)."""
        from gsrlang.execution.executor import run_items
        from gsrlang.execution.inlinerun import columnar_judges
        from gsrlang.execution.planner import COLUMNS, RunConfig, run_route

        route = run_route(RunConfig(), columns_possible=columnar_judges(self.plan, registry), given=len(items))
        out: list = [None] * len(items)
        for mode in dict.fromkeys(m for m, _ in items):  # a program with both tasks: each task's items apart
            where = [k for k, (m, _) in enumerate(items) if m == mode]
            entries = [items[k][1] for k in where]
            if route.evaluate == COLUMNS:
                done = await self._columns(mode, registry).run(entries)
                results = [_result(run, self.static, line, record) for run, line, record in done]
            else:
                results = [_result(run, self.static) async for run in
                           run_items(self.plan, entries, registry, mode, limit, window=max(1, len(entries)))]
            for k, result in zip(where, results):
                out[k] = result
        return out

    def _columns(self, mode: str, registry):
        """The column path's runner of `mode` with these judges (made once: it holds the compiled evaluator)."""
        from gsrlang.execution.inlinerun import ColumnRunner

        made = self._runners.get(mode)
        if made is None or made[0] is not registry:
            made = self._runners[mode] = (registry, ColumnRunner(self.plan, registry, mode, None, self.static))
        return made[1]

    def score(self, input: str = "", response: str | None = None, reference: str | None = None, *,
              responses: Sequence[str] | None = None, record: Mapping | None = None, judges: Judges | None = None,
              mode: str | None = None, id: str | None = None) -> Result:
        """Score one response (pointwise), or compare two (`responses=(a, b)`, pairwise).

        `record` holds further columns (human annotations for `human(field: ...)`, fields a verifier reads).
        Returns a Result whether or not the item is ok (see `Result.status` and `reason`); raises InputError
        for arguments that do not fit, JudgeError when the judges cannot serve the program.
        """
        judges = judges or default_judges()
        mode, item = self.item(input, response, reference, responses=responses, record=record, id=id, mode=mode)
        registry = judges.check(self.checked)
        return judges.run(lambda limit: self.execute(mode, item, registry, limit))

    async def ascore(self, input: str = "", response: str | None = None, reference: str | None = None, *,
                     responses: Sequence[str] | None = None, record: Mapping | None = None,
                     judges: Judges | None = None, mode: str | None = None, id: str | None = None) -> Result:
        """`score`, awaitable from any event loop."""
        judges = judges or default_judges()
        mode, item = self.item(input, response, reference, responses=responses, record=record, id=id, mode=mode)
        registry = judges.check(self.checked)
        return await judges.arun(lambda limit: self.execute(mode, item, registry, limit))

    def _batch(self, rows: Iterable[Mapping], mode: str | None):
        out = []
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise InputError(f"batch row {i}: expected a mapping (input, response, ...), got "
                                 f"{type(row).__name__}")
            known = {"input", "response", "responses", "reference", "record", "id"}
            record = {**{k: v for k, v in row.items() if k not in known}, **dict(row.get("record") or {})}
            try:
                out.append(self.item(row.get("input", ""), row.get("response"), row.get("reference"),
                                     responses=row.get("responses"), record=record, id=row.get("id"), mode=mode,
                                     line=i))
            except InputError as exc:
                raise InputError(f"batch row {i}: {exc}") from None
        return out

    def score_batch(self, rows: Iterable[Mapping], *, judges: Judges | None = None,
                    mode: str | None = None) -> list[Result]:
        """Score many items concurrently (at most `judges.concurrency` judge calls in flight), in order.

        Each row is a mapping with `input`, `response` (or `responses`), optionally `reference` and `id`;
        its other keys (and a `record` mapping) are the item's further columns."""
        judges = judges or default_judges()
        items = self._batch(rows, mode)
        registry = judges.check(self.checked)
        return judges.run(lambda limit: self.execute_all(items, registry, limit))

    async def ascore_batch(self, rows: Iterable[Mapping], *, judges: Judges | None = None,
                           mode: str | None = None) -> list[Result]:
        """`score_batch`, awaitable from any event loop."""
        judges = judges or default_judges()
        items = self._batch(rows, mode)
        registry = judges.check(self.checked)
        return await judges.arun(lambda limit: self.execute_all(items, registry, limit))


def _checked(analysis, path: str | None) -> Program:
    if analysis.program is None:
        from gsrlang.lang.diagnostics.render import Sources, render_concise
        from gsrlang.lang.span import SourceText

        shown = path or "<program>"
        errors = analysis.errors
        text = render_concise(list(errors), Sources(SourceText(shown, analysis.text or ""))).strip()
        n = len(errors)
        raise ProgramError(f"{shown} has {n} error{'s' if n != 1 else ''}:\n{text}", errors, path, analysis.text)
    return Program(analysis.program, path)


def load(path: str | Path) -> Program:
    """Read and check a .gsr program; ProgramError (with `diagnostics`) when it cannot be read or does not check."""
    from gsrlang.lang.check.driver import analyze_file

    path = str(path)
    try:
        analysis = analyze_file(path)
    except OSError as exc:
        raise ProgramError(f"cannot read {path}: {exc.strerror or exc}", path=path) from None
    return _checked(analysis, path)


def loads(text: str, path: str | Path | None = None) -> Program:
    """Check a program given as text (`path` resolves its imports and names it in messages)."""
    from gsrlang.lang.check.driver import analyze

    if not isinstance(text, str):
        raise InputError(f"loads takes the program's text (a str), got {type(text).__name__}")
    return _checked(analyze(text, path), str(path) if path is not None else None)


def compile_rubric(rubric: str, *, scale: tuple[float, float] | None = None, pairwise: bool = False,
                   input: str | None = None, reference: str | None = None, model: str | None = None,
                   base_url: str | None = None, api_key: str | None = None, repairs: int = 3,
                   cache: str | Path | None = None, **settings) -> Program:
    """Compile a prose rubric into a checked program with a model (what `gsr compile` does).

    The contract is pointwise on `scale` (default 1..5, rounded) or, with `pairwise=True`, a pairwise
    verdict. The model is `model` / `base_url` / `api_key`, else the environment, else gsr.toml.
    Raises CompileError when no valid program came out within `repairs` repair rounds (its
    `diagnostics` say why), JudgeError when no model is configured or it cannot be reached,
    InputError for a bad rubric or contract. The program's text is `Program.source`.
    """
    from gsrlang.compiler.spec import CompileSpec, Pairwise, Pointwise, SpecError
    from gsrlang.judges.llm.config import LLMError, resolve_settings

    try:
        contract = Pairwise() if pairwise else Pointwise(scale=tuple(scale or (1, 5)))
        spec = CompileSpec(rubric=rubric, contract=contract, task_input=input, reference=reference)
    except (SpecError, TypeError, ValueError) as exc:
        raise InputError(str(exc)) from None
    flags = {k: v for k, v in {"model": model, "base_url": base_url, "api_key": api_key, **settings}.items()
             if v is not None}
    try:
        config = resolve_settings(flags).default
    except (LLMError, ValueError) as exc:
        raise JudgeError([f"no model to compile with: {exc}"]) from None

    async def go():
        from gsrlang.compiler.cache import CompileCache
        from gsrlang.compiler.synthesize import CompilerClient
        from gsrlang.compiler.synthesize import compile_rubric as synthesize

        with CompileCache(str(cache)) if cache is not None else contextlib.nullcontext() as store:
            async with CompilerClient(config) as client:
                return await synthesize(spec, client, repairs=repairs, cache=store)

    try:
        result = _run_sync(go())
    except LLMError as exc:
        raise JudgeError([f"the compiler's model call failed: {exc}"]) from None
    if not result.ok:
        raise CompileError(f"the rubric did not compile: {result.reason}", result)
    program = Program(result.program)
    program.source = result.source
    return program


def _run_sync(coro):
    """Run a coroutine to completion from synchronous code, even where an event loop is running (notebooks)."""
    if _running_loop() is None:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="gsrlang-compile") as pool:  # its own loop, in its own thread
        return pool.submit(asyncio.run, coro).result()


def _usable_id(value) -> bool:
    """A record's `id` that can name the item: a non-empty string or a number (not a bool)."""
    return (isinstance(value, str) and value != "") or (isinstance(value, (int, float)) and not isinstance(value, bool))
