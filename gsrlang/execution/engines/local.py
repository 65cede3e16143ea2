"""The local engine: every item in this process, on one asyncio loop (`gsr run`'s default)."""

from __future__ import annotations

from gsrlang.execution.engines import RunJob
from gsrlang.execution.runs import RunSummary, run_file


def run(job: RunJob, registry, on_item=None) -> RunSummary:
    """Run `job` with `registry`'s judges; `on_item(run, line)` after each item, in input order."""
    return run_file(job.program, job.data, job.columns, registry, job.mode, job.config, on_item=on_item)
