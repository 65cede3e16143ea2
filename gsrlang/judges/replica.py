"""Judges rebuilt in another process (a Ray actor, `gsr run --engine ray`) from the ones `gsr run` built.

A :class:`JudgeRecipe` is small and picklable: the model judge's resolved settings (the key
included: the workers need it and their environment may not hold it), its few-shot bank and
options, and the path of the judgment cache. `build(cache)` makes the same judges over
`cache`, an object with the judgment cache's `get` / `put` (the engine serves the driver's
cache to its workers); `open_cache()` opens the cache file itself, where it lives.
"""

from __future__ import annotations

import attrs

__all__ = ["JudgeRecipe"]


@attrs.frozen
class JudgeRecipe:
    llm: dict | None  # LLMJudge keyword arguments, None: no model judges
    cache_path: str | None  # the judgment cache file (absolute), None: no cache

    @classmethod
    def of(cls, registry) -> "JudgeRecipe":
        from pathlib import Path

        llm = registry.get("llm")
        if llm is None:
            return cls(None, None)
        path = getattr(llm.cache, "path", None)
        return cls({"settings": llm.settings, "fewshot": llm.fewshot, "max_reasks": llm.max_reasks,
                    "joint_disagreement": llm.joint_disagreement, "seed": llm.seed,
                    "weighted": getattr(llm, "weighted", False)},
                   str(Path(path).resolve()) if path is not None else None)

    def build(self, cache):
        """The judge registry, its model judge (if any) reading and writing judgments through `cache`."""
        from gsrlang.judges.registry import default_registry

        if self.llm is None:
            return default_registry(None)
        from gsrlang.judges.llm.judge import LLMJudge

        return default_registry(LLMJudge(cache=cache, **self.llm))

    def open_cache(self):
        from gsrlang.judges.llm.cache import JudgmentCache

        return JudgmentCache(self.cache_path)
