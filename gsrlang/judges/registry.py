"""Which judge serves which procedure kind, and the checks made before any item runs.

    registry = default_registry()                 # rule, human, verifier
    registry = default_registry(llm=my_llm_judge) # ... and model judges
    registry.check(program)                       # JudgeConfigError: one sentence per problem

A procedure kind is "rule", "human", "verifier" or "llm" (`ProcedureSpec.kind`).

The LLM judge lives in `gsrlang.judges.llm` (it talks to a network, so the
deterministic core never imports it). `load_llm_judge(options)` is the one hook the
demo uses to build it from a dict of settings (`gsrlang.judges.llm.options.create_judge`);
it returns None when no model is configured (neither `--model` nor `GSR_MODEL` nor a
project file says which).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Mapping

from gsrlang.judges.base import Judge, JudgeConfigError

__all__ = ["JudgeRegistry", "default_registry", "llm_judge_available", "load_llm_judge"]

LLM_HOOK = "gsrlang.judges.llm.judge"
NO_MODEL_HELP = ("configure one with --model MODEL (or the GSR_MODEL environment variable; OPENAI_BASE_URL "
                 "for a local OpenAI-compatible server), or judge it with `rule.*`, `human(field: ...)` "
                 "or `verifier(...)` instead")


class JudgeRegistry:
    """A mapping from procedure kind to the Judge that serves it."""

    def __init__(self, judges: Mapping[str, Judge] | None = None):
        self._judges: dict[str, Judge] = dict(judges or {})

    def get(self, kind: str) -> Judge | None:
        return self._judges.get(kind)

    def judges(self) -> list[Judge]:
        return list(self._judges.values())

    def usage(self) -> dict[str, dict]:
        """{procedure kind: counters} for the judges that count their work (`usage()`: the LLM judge's calls,
        HTTP requests, cache hits, tokens, ...), for the run summary."""
        return {kind: judge.usage() for kind, judge in self._judges.items() if callable(getattr(judge, "usage", None))}

    def judge_for(self, node) -> Judge:
        if (judge := self._judges.get(node.criterion.procedure.kind)) is None:
            raise JudgeConfigError([self._missing(node.criterion.procedure.kind, [node.id])])
        return judge

    @staticmethod
    def _missing(kind: str, names: list[str]) -> str:
        which = ", ".join(f"`{n}`" for n in names)
        plural = len(names) > 1
        if kind == "llm":
            return f"criteri{'a' if plural else 'on'} {which} {'are' if plural else 'is'} judged by a model: {NO_MODEL_HELP}"
        return f"no judge is configured for `{kind}` procedures (criteri{'a' if plural else 'on'} {which})"

    def problems(self, program) -> list[str]:
        """Why these judges cannot serve `program` (empty when they can)."""
        missing: dict[str, list[str]] = {}
        out = []
        for node in program.criteria:
            kind = node.criterion.procedure.kind
            if (judge := self._judges.get(kind)) is None:
                missing.setdefault(kind, []).append(node.id)
                continue
            if (validate := getattr(judge, "validate", None)) and (problem := validate(node)):
                out.append(problem)
        return [self._missing(kind, names) for kind, names in missing.items()] + out

    def check(self, program) -> None:
        """Raise JudgeConfigError (before any item runs) if some criterion cannot be judged."""
        if problems := self.problems(program):
            raise JudgeConfigError(problems)

    async def aclose(self) -> None:
        for judge in self._judges.values():
            if (close := getattr(judge, "aclose", None)) is not None:
                await close()


def default_registry(llm: Judge | None = None, catalog=None, time_limit: float | None = None) -> JudgeRegistry:
    """A judge for every judge kind that needs no configuration (rule, human, verifier, and any kind
    registered with `gsrlang.lang.check.judgekinds.judge_kind`), plus `llm` when one is given. `time_limit`:
    seconds per judgment for the judges that have one (rules and verifiers; a judgment that overruns it
    is invalid), instead of their default."""
    from gsrlang.lang.catalog import default_catalog
    from gsrlang.lang.check.judgekinds import judge_kinds

    judges: dict[str, Judge] = {}
    for name, kind in judge_kinds(catalog or default_catalog()).items():
        if (judge := kind.make_judge()) is not None:
            if time_limit is not None and hasattr(judge, "time_limit"):
                judge.time_limit = time_limit
            judges[name] = judge
    if llm is not None:
        judges["llm"] = llm
    return JudgeRegistry(judges)


def llm_judge_available() -> bool:
    """Whether this installation has an LLM judge (the `gsrlang.judges.llm.judge` module)."""
    try:
        return importlib.util.find_spec(LLM_HOOK) is not None
    except ModuleNotFoundError:
        return False


def model_configured(options: Mapping | None = None) -> bool:
    """Whether a model is named by the options, the environment or a project file."""
    if (options and options.get("model")) or os.environ.get("GSR_MODEL"):
        return True
    try:
        from gsrlang.judges.llm import resolve_settings

        return bool(resolve_settings({}).default.model)
    except Exception:  # noqa: BLE001 - no usable configuration (a ConfigError, or worse) means no model
        return False


def load_llm_judge(options: Mapping | None = None) -> Judge | None:
    """The LLM judge for these options, or None when no model is configured.

    Raises JudgeConfigError when a model is configured but this installation has no
    LLM judge, or the configuration is unusable.
    """
    options = {k: v for k, v in (options or {}).items() if v is not None}
    if not model_configured(options):
        return None
    if not llm_judge_available():
        raise JudgeConfigError([f"a model is configured, but this installation of gsrlang has no LLM judge "
                                f"(the `{LLM_HOOK}` module is missing)"])
    from gsrlang.judges.llm.options import create_judge

    try:
        return create_judge(options)
    except Exception as exc:  # a configuration problem, reported before any item runs
        raise JudgeConfigError([f"the LLM judge cannot start: {exc}"]) from exc
