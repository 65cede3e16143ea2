"""Engines: how `gsr run` schedules one program over the items of a data file.

Everything but the scheduling is shared: `gsr run` checks the program, picks the mode and
the columns, builds and checks the judges, then hands a :class:`RunJob` to an engine and
prints the :class:`~gsrlang.execution.runs.RunSummary` it returns. Every engine writes the
same results lines and trace records, in input order (see :mod:`gsrlang.trace.schema`).

* ``local`` (:mod:`.local`): this process, one asyncio loop, judge calls bounded by
  `concurrency` (`gsrlang.execution.runs.run_file`).
* ``ray`` (:mod:`.ray_engine`): blocks of items run by a pool of Ray actors, each with its
  own judges; a killed run resumes (docs/scale.md). Ray is imported only by this engine.
"""

from __future__ import annotations

import importlib
from typing import Callable

import attrs

from gsrlang.execution.planner import RunConfig
from gsrlang.files.dataset import ColumnMap
from gsrlang.lang.program import CheckedProgram

__all__ = ["ENGINES", "EngineError", "EngineOptions", "RunJob", "engine"]

#: engine name -> module (imported on demand, so choosing `local` never imports Ray)
ENGINES = {"local": "gsrlang.execution.engines.local", "ray": "gsrlang.execution.engines.ray_engine"}


class EngineError(Exception):
    """The engine cannot run the job (Ray missing or unreachable, a work directory of another run, ...)."""


@attrs.frozen(kw_only=True)
class EngineOptions:
    """The engine's own settings (`gsr run --ray-address/--actors/--block-size/--work-dir`); None: the default."""

    ray_address: str | None = None
    actors: int | None = None
    block_size: int | None = None
    work_dir: str | None = None


@attrs.frozen
class RunJob:
    """What to run: one checked program over a data file, and how (`config`: the sinks, the bounds, the path).

    `judges` (a `gsrlang.judges.replica.JudgeRecipe`) rebuilds the judges `gsr run` built, for an
    engine that runs them elsewhere (Ray actors); `engine` are the engine's own settings; `inputs` are the
    run's other input files as (flag, path) pairs (--fewshot, --judge-config), which no work folder may be.
    """

    program: CheckedProgram
    data: str
    columns: ColumnMap
    mode: str
    config: RunConfig = RunConfig()
    engine: EngineOptions = EngineOptions()
    judges: object = None
    inputs: tuple = ()


def engine(name: str) -> Callable:
    """The `run(job, registry, on_item) -> RunSummary` function of the engine called `name`."""
    return importlib.import_module(ENGINES[name]).run
