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

        if (llm := registry.get("llm")) is None:
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

    def fingerprint(self) -> str | None:
        """What decides the judges' answers (models, servers, sampling, seed, few-shot, re-asks), as a digest;
        not the key, nor what only changes speed (concurrency, timeouts, retries)."""
        import hashlib
        import re

        if self.llm is None:
            return None
        settings = re.sub(r"\b(concurrency|timeout_s|max_retries)=[^,)]*", "", repr(self.llm["settings"]))
        bank = self.llm["fewshot"]
        shots = None if bank is None else (bank.source, bank.k, bank.seed)
        text = repr((settings, shots, self.llm["max_reasks"], self.llm["joint_disagreement"], self.llm["seed"],
                     self.llm["weighted"]))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    def open_cache(self):
        from gsrlang.judges.llm.cache import JudgmentCache

        return JudgmentCache(self.cache_path)
