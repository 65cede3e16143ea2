"""The compile cache: compile results stored under the hash of S, so recompiling costs no model call.

The key is a sha256 over the hash of S (`CompileSpec.sha256`), the prompt's fixed part
(`Prompt.sha256`: the language reference, the catalogue and the examples, so a program
compiled for an older language is not reused), the model and server, the sampling
settings that change answers (temperature, seed, max_tokens) and the constraint mode.
The repair budget is not in the key: a success that needed k repairs is reused for any
budget K >= k, and a failure only for the same budget.

A record keeps every round's answer and program; loading re-checks them (the checker
is fast and deterministic), so a cached result is the same object a live compile gives,
with `cached=True` and `model_calls=0`. The store is a `JudgmentCache` (SQLite, WAL,
one committed row per put; safe for several processes).
"""

from __future__ import annotations

from pathlib import Path

from gsrlang.compiler.spec import CompileSpec, canonical_json, sha256_text
from gsrlang.judges.llm import JudgmentCache

CACHE_VERSION = "gsr-compile/1"
DEFAULT_CACHE = Path(".gsr-cache") / "compile.sqlite"


class CompileCache:
    def __init__(self, path: str | Path = DEFAULT_CACHE):
        self.path = Path(path)
        self._store = JudgmentCache(self.path)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> "CompileCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def key(self, spec: CompileSpec, config, *, prompt, constrain: str, variant: str | None = None) -> str:
        # `variant`: the grammar field or the JSON form
        payload = {"v": CACHE_VERSION, "spec": spec.sha256, "prompt": prompt.sha256, "model": config.model,
                   "base_url": config.effective_base_url, "temperature": config.temperature, "seed": config.seed,
                   "max_tokens": config.max_tokens, "constrain": constrain, "variant": variant}
        return sha256_text(canonical_json(payload))

    def store(self, key: str, result, repairs: int) -> None:
        rounds = [{**r.to_record(), "program": r.program} for r in result.rounds]
        self._store.put(key, {"v": CACHE_VERSION, "status": result.status, "spec": result.spec.to_json(),
                              "rounds": rounds, "date": result.date, "budget": repairs})

    def load(self, key: str, spec: CompileSpec, *, repairs: int, path=None, catalog=None):
        """The cached result for `key`, rebuilt and re-checked; None on a miss."""
        from gsrlang.compiler.synthesize import checked_round, finish_result

        record = self._store.get(key)
        usable = (record is not None and record.get("v") == CACHE_VERSION and record.get("rounds")
                  and CompileSpec.from_json(record["spec"]) == spec)
        if usable:
            n = len(record["rounds"])
            usable = (n - 1 <= repairs) if record["status"] != "failed" else record.get("budget") == repairs
        if not usable:
            return None
        rounds = tuple(checked_round(spec, r.get("program"), index=r["index"], answer=r.get("answer"),
                                     problem=r.get("problem"), path=path, catalog=catalog, model=r.get("model") or "",
                                     finish_reason=r.get("finish_reason"), prompt_tokens=r.get("prompt_tokens", 0),
                                     completion_tokens=r.get("completion_tokens", 0)) for r in record["rounds"])
        result = finish_result(spec, rounds, path=path, catalog=catalog, date=record.get("date") or "",
                               model_calls=0, cached=True)
        return result if result.status == record["status"] else None  # else the checker changed its mind: compile again
