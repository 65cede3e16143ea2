"""Reading the JSONL files a run writes, in tests."""

from __future__ import annotations

import json
from pathlib import Path


def records(path: Path) -> list[dict]:
    """Every JSON line of a results or trace file, less a results file's end-of-run line.

    (A trace's run-summary record, which carries `trace_version`, is kept: tests look at it.)"""
    found = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in found if not (r.get("kind") == "run_summary" and "trace_version" not in r)]
