"""Coverage-guided fuzzing (atheris, libFuzzer) of three entry points: the parser and checker, the JSON form
(`gsr import`), and the JSONL row reader.

    .venv/bin/python benchmarks/fuzz_coverage.py ENTRY RUNS [SEED]     # ENTRY: parser, json, jsonl

gsrlang's modules are imported under atheris's instrumentation, so libFuzzer keeps the inputs that reach
new branches and mutates those. The seed corpus is what users write: the example programs (parser), their
JSON forms (json), and data files of good and spiced rows (jsonl), from tests/fuzzing.py, whose targets
decide what a crash is (an exception that escapes, or an internal error). A crash is counted, not raised, so
one run covers RUNS inputs; the last line printed is JSON: {"entry", "runs", "crashes", "first", "seconds"}
(printed once RUNS inputs are done: libFuzzer then ends the process with C's exit, past Python's atexit).
Each entry runs in a process of its own.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

try:
    import atheris
except ImportError:
    raise SystemExit("fuzz_coverage.py needs atheris: pip install -e '.[fuzz]'") from None

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

with atheris.instrument_imports(include=["gsrlang"]):
    import gsrlang.lang.check.driver  # noqa: F401  (the parser, the checker and the diagnostics)
    import gsrlang.cli  # noqa: F401
    import gsrlang.commands.import_  # noqa: F401
    import gsrlang.files.dataset  # noqa: F401
    import gsrlang.lang.diagnostics.render  # noqa: F401
    import gsrlang.lang.jsonform  # noqa: F401
    import gsrlang.files.jsonl  # noqa: F401

import fuzzing  # noqa: E402  (tests/fuzzing.py: the targets and the seed material)

STATE = {"runs": 0, "crashes": 0, "first": None, "t0": time.perf_counter()}


def _seeds(entry: str, folder: Path) -> None:
    rnd = random.Random(7)
    if entry == "parser":
        items = [t.encode("utf-8") for t in fuzzing.example_texts()]
    elif entry == "json":
        items = [json.dumps(f).encode("utf-8") for f in fuzzing.example_forms()]
    else:
        items = [fuzzing.row_file([("row", rnd.randrange(2**32)) for _ in range(4)], ".jsonl") for _ in range(20)]
    for i, data in enumerate(items):
        (folder / f"seed-{i:03d}").write_bytes(data)


def _target(entry: str, work: Path):
    if entry == "parser":
        return lambda data: fuzzing.check_target(data.decode("utf-8", "replace"), work)
    if entry == "json":
        return lambda data: fuzzing.import_target(data.decode("utf-8", "replace"), work)
    return lambda data: fuzzing.rows_target(data, ".jsonl", work)


def _report(entry: str) -> None:
    print(json.dumps({"entry": entry, "runs": STATE["runs"], "crashes": STATE["crashes"], "first": STATE["first"],
                      "seconds": round(time.perf_counter() - STATE["t0"], 1)}), flush=True)


def main() -> None:
    if not 3 <= len(sys.argv) <= 4 or not all(a.isdigit() for a in sys.argv[2:]):
        raise SystemExit("usage: fuzz_coverage.py ENTRY RUNS [SEED] (RUNS and SEED whole numbers)")
    entry, runs = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 2026
    if entry not in ("parser", "json", "jsonl"):
        raise SystemExit(f"unknown entry {entry!r}: parser, json or jsonl")
    corpus, work = Path(tempfile.mkdtemp(prefix="gsr-fuzz-corpus-")), Path(tempfile.mkdtemp(prefix="gsr-fuzz-"))
    _seeds(entry, corpus)
    target = _target(entry, work)

    def one(data: bytes) -> None:
        STATE["runs"] += 1
        problem = target(data)
        if problem is not None:
            STATE["crashes"] += 1
            STATE["first"] = STATE["first"] or problem
        if STATE["runs"] == runs:
            _report(entry)

    atheris.Setup([sys.argv[0], f"-runs={runs}", f"-seed={seed}", "-max_len=65536", "-rss_limit_mb=4096",
                   "-print_final_stats=0", "-print_pcs=0", str(corpus)], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
