"""Synthesis and repair: one model call writes a program, the checker decides, diagnostics drive repairs.

    spec = CompileSpec(rubric=text, contract=Pointwise(scale=(1, 5)))
    async with CompilerClient(settings.default) as client:
        result = await compile_rubric(spec, client, repairs=3)
    if result.ok:
        Path("out.gsr").write_text(result.source)     # provenance header + the accepted program
    else:
        print(result.reason, result.last_program)    # a recorded CompileFailure

Round 0 asks for a program; each failed round sends the previous program back with the
diagnostics (checker errors, and a GSR901 diagnostic when the program's task contract
differs from the spec) and asks for a corrected one, up to `repairs` times. The first
program without errors is accepted as it is. Answers that hold no program (empty,
refused, a JSON answer that is not a program) are rounds too (GSR900), never crashes.
Transport failures (unreachable server, timeouts after the client's retries, HTTP
errors) raise `JudgeCallError`: they are the tool's failures, not the rubric's.

`compile_rubric` takes a `CompileSpec` and nothing that could carry a response or a
label: its keyword arguments are fixed, so `response=...` is a TypeError.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Callable, Sequence, Union

import attrs

from gsrlang import __version__
from gsrlang.compiler.prompt import DEFAULT_EXAMPLES, Prompt, build_prompt, fenced, repair_message
from gsrlang.compiler.spec import CompileSpec, Pointwise, canonical_json, fmt_number, sha256_text
from gsrlang.judges.llm import AnswerFormatError, JudgeCallError, LLMClient, RefusalError
from gsrlang.judges.llm.client import ChatRequest
from gsrlang.lang.catalog import Catalog, default_catalog
from gsrlang.lang.check.driver import Analysis, analyze
from gsrlang.lang.diagnostics import Diagnostic, error
from gsrlang.lang.diagnostics.render import Sources, render_concise
from gsrlang.lang.program import CheckedProgram
from gsrlang.lang.span import SourceText, Span
from gsrlang.lang.syntax import ast

CONSTRAINTS = ("none", "grammar", "json")
DEFAULT_REPAIRS = 3

NO_PROGRAM = "GSR900"  # the answer holds no program
CONTRACT = "GSR901"  # the program's task contract differs from the compile spec
COMPILER_CODES = {NO_PROGRAM: "the model's answer holds no program",
                  CONTRACT: "task contract differs from the compile specification"}


# ---- the transport ------------------------------------------------------------------------------------
@attrs.frozen
class ProgramRequest(ChatRequest):
    """A chat request whose answer is a program. With `schema=None` the answer is free text: no
    response_format is sent; `extra_body` carries server-specific constraints (a grammar)."""

    extra_body: Union[dict, None] = attrs.field(default=None, eq=False, hash=False)

    def cache_key(self, config) -> str:
        return sha256_text(super().cache_key(config) + canonical_json(self.extra_body or {}))


class CompilerClient(LLMClient):
    """An `LLMClient` that can ask for free text and send a grammar.

    Retries, timeouts, key scrubbing and error classification are the judge client's; for a
    `ProgramRequest` without a schema it sends no response_format (the answer is a program,
    not JSON), adds the request's `extra_body`, and returns the raw text (`data` is None).
    """

    def mode_for(self, request):
        return "off" if _free_text(request) else super().mode_for(request)

    def _build(self, request, mode):
        kwargs = super()._build(request, mode)
        if isinstance(request, ProgramRequest) and request.extra_body:
            kwargs["extra_body"] = dict(request.extra_body)
        return kwargs

    def _data(self, request, text):
        return None if _free_text(request) else super()._data(request, text)  # a program is no JSON: no format error


def _free_text(request) -> bool:
    """Whether `request` asks for a program as free text (no schema: no response_format, no JSON)."""
    return isinstance(request, ProgramRequest) and request.schema is None


# ---- reading an answer ----------------------------------------------------------------------------------
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[A-Za-z0-9_+.-]*)[^\n]*\n(?P<body>.*?)"
                    r"(?:^[ \t]*(?P=fence)[ \t]*$|\Z)", re.M | re.S)
_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_GSR_LANGS = {"gsr", "gsrlang"}


def extract_program(answer: str | None) -> tuple[str | None, str | None]:
    """(program text, None) or (None, why there is none).

    The program is the last ```gsr fenced block; else the last fenced block of any other
    language; else the whole answer (reasoning blocks removed). Prose around a block is fine.
    """
    if answer is None:
        return None, "the answer was empty"
    text = _THINK.sub("", answer)
    blocks = [(m["lang"].lower(), m["body"]) for m in _FENCE.finditer(text)]
    for gsr in (True, False):  # the gsr blocks first, then the others
        if nonempty := [b for lang, b in blocks if (lang in _GSR_LANGS) == gsr and b.strip()]:
            return nonempty[-1].strip("\n") + "\n", None
    if blocks:
        return None, "its code block was empty"
    if not text.strip():
        return None, "the answer was empty"
    return text.strip("\n") + "\n", None


# ---- checking a candidate program ---------------------------------------------------------------------
def contract_diagnostics(analysis: Analysis, spec: CompileSpec) -> list[Diagnostic]:
    """GSR901 for each way the checked program's readout differs from the spec's task contract.

    An answer that checks clean but is no program, a fragment (`fragment NAME`, for importing),
    is rejected too: a compile must end in a file that `gsr run` can run."""
    items = analysis.module.items if analysis.module else ()
    if analysis.program is None:
        return [error(CONTRACT, "the answer is a fragment, not a program: a fragment is only imported",
                      next((i.span for i in items if isinstance(i, ast.Header)), Span(0, 0)), "a fragment header",
                      help=f'head the file `rubric NAME "..."`, declare `{spec.contract.task_line()}` and a sink')]
    c, readout = spec.contract, analysis.program.readout
    need = f"declare `{c.task_line()}`"
    # the program's (first) task of the spec's kind
    span = next((i.span for i in items if isinstance(i, ast.TaskDecl) and i.mode.name == c.kind), Span(0, 0))
    if (r := getattr(readout, c.kind)) is None:
        return [error(CONTRACT, f"the program declares no {c.kind} task, which the compile spec requires", span,
                      help=need)]
    out = []
    if isinstance(c, Pointwise):
        lo, hi = c.scale
        if (r.lo, r.hi) != (float(lo), float(hi)):
            out.append(error(CONTRACT, f"the pointwise scale is {fmt_number(r.lo)}..{fmt_number(r.hi)}; the "
                                       f"compile spec requires {fmt_number(lo)}..{fmt_number(hi)}", span,
                             "scale differs from the spec", help=need))
        if r.quantize != c.quantize:
            out.append(error(CONTRACT, f"the pointwise task quantizes with `{r.quantize}`; the compile spec "
                                       f"requires `{c.quantize}`", span, "quantize differs from the spec",
                             help=need))
    else:
        if abs(r.epsilon - float(c.epsilon)) > 1e-12:
            out.append(error(CONTRACT, f"the pairwise epsilon is {fmt_number(r.epsilon)}; the compile spec "
                                       f"requires {fmt_number(c.epsilon)}", span, "epsilon differs from the spec",
                             help=need))
        if r.on_tie != c.on_tie:
            out.append(error(CONTRACT, f"the pairwise tie policy is `{r.on_tie}`; the compile spec requires "
                                       f"`{c.on_tie}`", span, "on_tie differs from the spec", help=need))
    return out


def check_program(program: str, spec: CompileSpec, path: str | Path | None = None,
                  catalog: Catalog | None = None) -> tuple[Analysis, tuple[Diagnostic, ...]]:
    """The analysis and the errors that reject the program (checker errors, else contract errors)."""
    analysis = analyze(program, path, catalog)
    return analysis, analysis.errors or tuple(contract_diagnostics(analysis, spec))


# ---- results ---------------------------------------------------------------------------------------------
@attrs.frozen
class Round:
    """One model call: round 0 synthesises, round k >= 1 is the k-th repair."""

    index: int
    answer: str | None  # the model's raw answer
    program: str | None  # the program read from it (None: the answer held none)
    diagnostics: tuple[Diagnostic, ...]  # the errors that rejected it (empty: accepted)
    warnings: tuple[Diagnostic, ...] = ()
    problem: str | None = None  # why the answer held no program
    model: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def accepted(self) -> bool:
        return self.program is not None and not self.diagnostics

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(d.code for d in self.diagnostics)

    def to_record(self) -> dict:
        return {"index": self.index, "answer": self.answer, "problem": self.problem, "model": self.model,
                "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}


def checked_round(spec: CompileSpec, program: str | None, *, index: int, answer: str | None, problem: str | None,
                  path=None, catalog: Catalog | None = None, model: str = "", finish_reason: str | None = None,
                  prompt_tokens: int = 0, completion_tokens: int = 0) -> Round:
    """The round of `program`, checked against `spec`; when the answer held none, one GSR900 diagnostic says why."""
    tail = (model, finish_reason, prompt_tokens, completion_tokens)
    if program is not None:
        analysis, errors = check_program(program, spec, path, catalog)
        return Round(index, answer, program, errors, tuple(d for d in analysis.diagnostics if not d.is_error), None,
                     *tail)
    why = problem or "the answer was empty"
    if finish_reason == "length" and "cut off" not in why:
        why += " (the answer was cut off at max_tokens)"
    diags = (error(NO_PROGRAM, f"the model's answer holds no program: {why}", Span(0, 0),
                   help="answer with the complete program in one ```gsr fenced code block"),)
    return Round(index, answer, None, diags, (), why, *tail)


class _ResultMixin:
    @property
    def repairs(self) -> int:
        """Repair rounds used (0: the first program was accepted)."""
        return len(self.rounds) - 1

    @property
    def codes(self) -> tuple[str, ...]:
        """Every error code that rejected a round, in order."""
        return tuple(c for r in self.rounds for c in r.codes)

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens for r in self.rounds)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.rounds)


@attrs.frozen
class CompileSuccess(_ResultMixin):
    spec: CompileSpec
    source: str  # the file to write: provenance header, then the accepted program unchanged
    program: CheckedProgram
    rounds: tuple[Round, ...]
    model: str
    date: str
    cached: bool = False
    model_calls: int = 0  # calls made for this result (0 when it came from the cache)

    ok = True

    @property
    def status(self) -> str:
        return "compiled" if self.repairs == 0 else "repaired"

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return self.rounds[-1].warnings


@attrs.frozen
class CompileFailure(_ResultMixin):
    """A recorded compile failure: the repair budget ran out. Nothing about it is an exception."""

    spec: CompileSpec
    last_program: str | None  # the last program the model wrote (None: its last answer held none)
    diagnostics: tuple[Diagnostic, ...]  # what rejected it
    rounds: tuple[Round, ...]
    model: str
    date: str
    cached: bool = False
    model_calls: int = 0

    ok = False
    status = "failed"

    @property
    def reason(self) -> str:
        last = self.rounds[-1]
        tries = f"{len(self.rounds)} round{'s' if len(self.rounds) != 1 else ''}"
        if last.program is None:
            return f"no program after {tries}: the model's last answer held none ({last.problem})"
        n = len(self.diagnostics)
        codes = ", ".join(dict.fromkeys(d.code for d in self.diagnostics))
        return f"no valid program after {tries}: the last one has {n} error{'s' if n != 1 else ''} ({codes})"


CompileResult = Union[CompileSuccess, CompileFailure]


def diagnostics_concise(program: str | None, diagnostics: Sequence[Diagnostic], display_path: str) -> str:
    return render_concise(list(diagnostics), Sources(SourceText(display_path, program or "")))


# ---- provenance ----------------------------------------------------------------------------------------
def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def provenance_header(spec: CompileSpec, *, model: str, repairs: int, date: str) -> str:
    """The comment block that starts every compiled file; `gsr check` reads it as comments."""
    lines = [
        f"compiled by gsr compile (gsrlang {__version__}) from a natural-language rubric",
        f"rubric-sha256: {spec.rubric_sha256}",
        f"spec-sha256: {spec.sha256}",
        f"contract: {spec.contract.task_line()}",
        f"model: {' '.join(model.split()) or 'unknown'}",
        f"repair-rounds: {repairs}",
        f"date: {date}",
    ]
    return "".join(f"# {line}\n" for line in lines) + "\n"


# ---- the loop ------------------------------------------------------------------------------------------
async def compile_rubric(spec: CompileSpec, client: LLMClient, *, repairs: int = DEFAULT_REPAIRS,
                         constrain: str = "none", grammar_field: str = "structured_outputs", json_form: str = "auto",
                         catalog: Catalog | None = None, examples: Sequence[str] = DEFAULT_EXAMPLES,
                         path: str | Path | None = None, on_round: Callable[[Round], None] | None = None, cache=None,
                         prompt: Prompt | None = None) -> CompileResult:
    """Compile S into a checked program (see the module docstring).

    `constrain`: "none" (free text), "grammar" (the program grammar in `grammar_field`, see
    grammar.py) or "json" (the JSON form `json_form`, see jsonmode.py). `path` is where the
    program will live (imports resolve from there); `on_round` is called after each round;
    `cache` is a `CompileCache` (a hit makes no model call).
    Raises TypeError for anything but a CompileSpec, JudgeCallError when the model cannot be
    reached.
    """
    if not isinstance(spec, CompileSpec):
        raise TypeError(f"compile_rubric takes a CompileSpec (rubric, contract, task_input, reference), "
                        f"got {type(spec).__name__}")
    if not isinstance(client, LLMClient):
        raise TypeError(f"compile_rubric needs an LLMClient (a CompilerClient), got {type(client).__name__}")
    if constrain not in CONSTRAINTS:
        raise ValueError(f"constrain must be one of {', '.join(CONSTRAINTS)}; got {constrain!r}")
    if isinstance(repairs, bool) or not isinstance(repairs, int) or repairs < 0:
        raise ValueError(f"repairs must be a whole number >= 0, got {repairs!r}")
    if not isinstance(client, CompilerClient) and (constrain == "grammar" or
                                                   (constrain == "none" and client.config.structured != "off")):
        raise TypeError("a plain LLMClient asks for JSON answers; compile with a CompilerClient "
                        "(gsrlang.compiler.CompilerClient), which asks for a program")
    catalog = catalog or default_catalog()
    prompt = prompt or build_prompt(spec, catalog, examples)
    display = Path(path).name if path else "program.gsr"

    key = None
    if cache is not None:
        variant = {"grammar": grammar_field, "json": json_form}.get(constrain)
        key = cache.key(spec, client.config, prompt=prompt, constrain=constrain, variant=variant)
        if (hit := cache.load(key, spec, repairs=repairs, path=path, catalog=catalog)) is not None:
            return hit

    extra = None
    if constrain == "json":
        from gsrlang.compiler import jsonmode

        schema, schema_name, system_note = jsonmode.request_parts(json_form)
    else:
        schema, schema_name, system_note = None, "program", ""
        if constrain == "grammar":
            from gsrlang.compiler.grammar import grammar_extra_body

            extra = grammar_extra_body(grammar_field)

    base = prompt.messages()
    if system_note:
        base[0] = {"role": "system", "content": base[0]["content"] + "\n" + system_note}
    messages = list(base)
    rounds: list[Round] = []
    calls = 0
    for index in range(repairs + 1):
        request = ProgramRequest(messages=messages, schema=schema, schema_name=schema_name, extra_body=extra)
        calls += 1  # counted once it returns, with an answer or a format error (a call failure raises)
        try:
            result = await client.complete(request)
            answer, finish, model = result.text, result.finish_reason, result.model
            pt, ct = result.prompt_tokens, result.completion_tokens
            program, problem = (jsonmode.to_program(result.data, spec, catalog, json_form) if constrain == "json"
                                else extract_program(answer))
        except AnswerFormatError as exc:  # no content, a refusal, or (json mode) no JSON object
            answer, finish, model = exc.text, exc.finish_reason, exc.model or client.config.model
            usage = exc.usage or {}
            pt, ct = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
            if isinstance(exc, RefusalError):
                program, problem = None, f"the model refused: {exc.refusal}"
            elif constrain != "json" and exc.text is not None:  # a plain LLMClient: the text is the answer
                program, problem = extract_program(exc.text)
            else:
                program, problem = None, str(exc)
        except JudgeCallError as exc:
            if constrain != "none" and exc.status in (400, 422):
                raise JudgeCallError(f"{exc} -- the server may not accept --constrain {constrain}; "
                                     f"try without it (or another --grammar-field)", status=exc.status,
                                     kind=exc.kind, server_message=exc.server_message, attempts=exc.attempts,
                                     retryable=exc.retryable, model=exc.model) from None
            raise
        this = checked_round(spec, program, index=index, answer=answer, problem=problem, path=path, catalog=catalog,
                             model=model, finish_reason=finish, prompt_tokens=pt, completion_tokens=ct)
        rounds.append(this)
        if on_round is not None:
            on_round(this)
        if this.accepted:
            break
        if index < repairs:
            shown = fenced(program) if program is not None else (answer if answer and answer.strip()
                                                                    else "(an empty answer)")
            feedback = repair_message(program, this.diagnostics, problem=this.problem, display_path=display,
                                      repair=index + 1, budget=repairs)
            messages = [*base, {"role": "assistant", "content": shown}, {"role": "user", "content": feedback}]

    out = finish_result(spec, tuple(rounds), path=path, catalog=catalog, date=utc_now(), model_calls=calls)
    if cache is not None and key is not None:
        cache.store(key, out, repairs)
    return out


def finish_result(spec: CompileSpec, rounds: tuple[Round, ...], *, path, catalog, date: str,
                  model_calls: int = 0, cached: bool = False) -> CompileResult:
    """The result of a finished loop: a success with its provenance header, or a failure."""
    last = rounds[-1]
    model = last.model or ""
    if last.accepted:
        source = provenance_header(spec, model=model, repairs=len(rounds) - 1, date=date) + last.program
        final = analyze(source, path, catalog)
        if final.program is None:  # cannot happen: the header is comments only
            raise AssertionError("the provenance header broke an accepted program")
        return CompileSuccess(spec, source, final.program, rounds, model, date, cached, model_calls)
    return CompileFailure(spec, last.program, last.diagnostics, rounds, model, date, cached, model_calls)
