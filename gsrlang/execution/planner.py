"""The one planner: how a run or a replay goes, decided once from its typed configuration.

Every command is the same composition, source -> batches -> judge where needed -> evaluate ->
write or compare; what differs is decided here, and nowhere else:

* **source**: a data file under one program, a data file under per-item programs (a compile
  index), items handed over in memory (the API, `gsr serve`), or a recorded trace (under its own
  program, an edited one, or each record's own); for tune and ablate, a table of labelled items
  from a trace or from a data file judged inline (`table_route`);
* **judging**: none (a trace), online, or through a provider's Batch API;
* **evaluation**: column by column, a chunk of items at a time (every judge answers a column and
  none judges jointly; replay: nothing to write item by item) or item by item;
* **sinks**: results, a trace, a verify or what-if comparison, one item's decision path (--show);
* **judge calls in flight**: one `CallLimit` (gsrlang.execution.limit), made where the run is planned (`run_file`,
  `run_index_file`, a Ray actor, the API's `Judges`) and held by the executor around every
  judge call; nothing else bounds the calls (the model client's adaptive window bounds its
  HTTP requests: the server's rate limit, lowered on 429s).

The configuration is built once by the command (gsrlang.commands.config, from its flags, the
environment and gsr.toml) and passed down as these attrs classes; nothing below the commands
reads a flag or, for the path, an environment variable.
"""

from __future__ import annotations

import attrs

__all__ = ["COLUMNS", "ITEMS", "ReplayConfig", "ReplayRoute", "RunConfig", "RunRoute", "TableConfig",
           "TableRoute", "replay_route", "run_route", "table_route"]

COLUMNS, ITEMS = "columns", "items"  # the two ways of evaluating: a chunk of items at a time, or one by one


@attrs.frozen(kw_only=True)
class RunConfig:
    """How one run over a data file goes (`gsr run`, the demo, the Ray engine's job).

    `out`, `trace`: the sinks (None: not written; `-`: standard output). `concurrency`: judge calls in flight
    (the resolved model settings' `concurrency`); `window`: items in flight (default 2 x concurrency).
    `columnar`: take the column path where the judges allow it (False: item by item, for comparison; the
    command sets it from GSR_COLUMNAR_RUN). `keep_pairs`: keep (prediction, label) pairs for the metrics."""

    out: str | None = None
    trace: str | None = None
    concurrency: int = 8
    limit: int | None = None
    program_path: str | None = None
    keep_pairs: bool = True
    short_circuit: bool = True
    columnar: bool = True
    window: int | None = None


@attrs.frozen(kw_only=True)
class ReplayConfig:
    """How one replay of a trace goes (`gsr replay`, the demo).

    `out`, `trace`: the sinks; `program_path`, `program_label`: how the program is named in the trace written
    and in messages; `limit`: only the first N records."""

    out: str | None = None
    trace: str | None = None
    program_path: str | None = None
    program_label: str = "the program"
    keep_pairs: bool = True
    limit: int | None = None


@attrs.frozen(kw_only=True)
class TableConfig:
    """Where `gsr tune` and `gsr ablate` read their labelled items: a recorded trace (`trace`), or a data
    file (`data`) read through `columns` (a ColumnMap with its label field) as a `mode` task (a trace
    says its own). `program_label`: how messages name the program."""

    trace: str | None = None
    data: str | None = None
    columns: object = None
    mode: str | None = None
    program_label: str = "the program"


@attrs.frozen
class RunRoute:
    """A run's path. `source`: "data" (a file, one program), "index" (per-item programs) or "items" (in
    memory: the API, `gsr serve`); `judging`: "online", "batch" (a provider's Batch API) or "dry-run" (no
    call, the plan only); `evaluate`: COLUMNS or ITEMS."""

    source: str
    judging: str
    evaluate: str


@attrs.frozen
class ReplayRoute:
    """A replay's path.

    `compare`: "verify" (every node, readout and result must be reproduced) or "whatif" (re-composed under
    another program). `evaluate`: COLUMNS or ITEMS; a column verification that finds the trace is not for it
    (version 1, another program's records) goes item by item, decided on the whole trace, never per row.
    `results`: a results file is written. `show`: how the item to --show is found: "stream" (picked from
    the item by item replay), "alone" (that item replayed by itself beside the column path) or None."""

    compare: str
    evaluate: str
    results: bool
    show: str | None

    @property
    def verify(self) -> bool:
        return self.compare == "verify"


@attrs.frozen
class TableRoute:
    """Tune's and ablate's path. `source`: "trace" (its recorded judgments: no judge is called) or "data"
    (every item judged by the program's inline judges, human() and rule.*); `evaluate`: COLUMNS, always
    (every candidate program is evaluated over the whole table at once, thousands of times in a tune)."""

    source: str
    evaluate: str = COLUMNS


def table_route(config: TableConfig) -> TableRoute:
    """The path of tune's or ablate's table: from the trace when one is given, else from the data file."""
    return TableRoute("trace" if config.trace is not None else "data")


def run_route(config: RunConfig, *, per_item: bool = False, batch: bool = False, dry_run: bool = False,
              columns_possible: bool = True, given: int | None = None) -> RunRoute:
    """The path of a run. `columns_possible`: every judge of the program answers a column at once and none
    judges jointly (gsrlang.execution.inlinerun.columnar_judges); a dry run counts every call item by item.
    `given`: the number of items handed over in memory (the API, `gsr serve`) instead of a data file; one
    alone goes item by item (a chunk's set-up costs more than the interpreter's one row)."""
    judging = "dry-run" if dry_run else "batch" if batch else "online"
    columns = config.columnar and columns_possible and not per_item and not dry_run and given != 1
    source = "index" if per_item else "data" if given is None else "items"
    return RunRoute(source, judging, COLUMNS if columns else ITEMS)


def replay_route(config: ReplayConfig, *, verify: bool, per_item: bool = False, show: bool = False,
                 skipped_judgments: int = 0) -> ReplayRoute:
    """The path of a replay.

    Columns where nothing must be written item by item: no new trace, one program (not each record's own).
    A what-if over a trace that skipped judgments goes item by item, to say which of them the program needs."""
    plain = not per_item and config.trace is None
    columns = plain and (verify or not skipped_judgments)
    return ReplayRoute("verify" if verify else "whatif", COLUMNS if columns else ITEMS, config.out is not None,
                       ("alone" if columns else "stream") if show else None)
