"""The Ray engine: blocks of items run by a pool of Ray actors; a killed run resumes.

`gsr run --engine ray` shares everything with the local engine but scheduling (see
docs/scale.md for clusters and sizing):

* **Blocks.** The driver (the `gsr run` process) reads the data with gsrlang's own readers
  (so failed rows, line numbers and ids are exactly the local engine's) and cuts the
  items into blocks of `--block-size`. Each block goes to an idle actor of the pool.
* **Actors.** Each `_BlockRunner` holds the checked program and its own judges (one async
  LLM client pool, `--concurrency` calls in flight), and runs a block with the same
  executor as the local engine (`run_items`), returning its result lines and trace
  records as text. Actors are created with unlimited restarts and task retries: an actor
  killed mid-block is restarted by Ray, which runs the block again.
* **Order and resume.** The driver stores each finished block beside the output, in the
  work folder `OUT.gsr-ray/`, which it makes (`block-000012.results.jsonl`, `.trace.jsonl`, then
  `.done.json` last, each written whole and renamed into place). A driver killed and
  started again with the same command skips every block whose `.done.json` exists. When
  every block is done, the blocks are concatenated in input order into `--out` (JSONL or
  Parquet) and `--trace` (ending with the run summary), and gsr removes its own files from
  the work folder, then the folder if that emptied it (never anything it did not write).
* **Judgment cache.** Workers need no shared disk: the cache is the driver's SQLite file
  (`--cache`), served by one `_CacheServer` actor pinned to the driver's node. Every
  judgment an actor buys is stored there as soon as it is answered, so neither a retried
  block nor a resumed run buys it again.

Ray is imported only here, and only when this engine runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import attrs

from gsrlang.execution.engines import EngineError, RunJob
from gsrlang.execution.executor import ItemRun
from gsrlang.execution.runs import RunSummary, close_output, end_results, label_reader, open_output, open_results, \
    run_summary_record
from gsrlang.files.dataset import read_items
from gsrlang.files.safeio import write_atomic
from gsrlang.trace.schema import dumps

__all__ = ["run"]

WORK_FORMAT = 1  # the work directory's layout; a directory of another format is not resumed
MARK = "run.json"  # what marks a work folder as gsr's (and records what run it belongs to)


def run(job: RunJob, registry, on_item=None) -> RunSummary:
    """Run `job` on Ray (connecting to `--ray-address`, else starting a local instance)."""
    ray = _import_ray()
    state = _Run(ray, job, registry, on_item)  # checks the work directory before Ray starts
    started = not ray.is_initialized()
    if started:
        address = job.engine.ray_address
        try:
            ray.init(address=address, include_dashboard=False, configure_logging=True, logging_level="WARNING",
                     log_to_driver=False)
        except Exception as exc:  # Ray's connection errors have no common base
            raise EngineError(f"cannot connect to Ray at {address or 'a new local instance'}: {exc}") from None
    try:
        return state.go()
    finally:
        if started:
            ray.shutdown()


def _import_ray():
    try:
        import ray
    except ImportError:
        raise EngineError("the ray engine needs Ray: pip install 'gsrlang[ray]'") from None
    return ray


# ------------------------------------------------------------------------------------------------ actors


class _CacheServer:
    """The driver's judgment cache (SQLite), served to the actors; runs on the driver's node."""

    def __init__(self, judges):
        self.cache = judges.open_cache()

    def get(self, key: str):
        return self.cache.get(key)

    def put(self, key: str, value: dict) -> None:
        self.cache.put(key, value)

    def flush(self) -> None:
        """Nothing: answered after every call the same caller sent before it (an actor runs one caller's
        calls in order), so a caller that waits for it knows its puts are stored."""


class _RemoteCache:
    """`JudgmentCache`'s get/put, answered by the `_CacheServer` actor (puts are not waited for: an actor's
    calls run in the order they were sent, so its own later `get` sees them)."""

    def __init__(self, server):
        self.server = server
        # what the client learns of a server (structured-output mode) is kept beside the cache file: on a
        # worker, this node's temporary directory (it only saves a negotiation, never decides a result)
        self.path = os.path.join(tempfile.gettempdir(), "gsr-ray", "judgments.sqlite")

    def get(self, key: str):
        import ray

        return ray.get(self.server.get.remote(key))

    def put(self, key: str, value: dict) -> None:
        self.server.put.remote(key, value)

    def close(self) -> None:
        pass


class _BlockRunner:
    """One actor of the pool: the checked program and its own judges. The driver sends it one block at a
    time; its second slot answers `pid` and `close` while a block runs.

    The program and the judges' settings come with the first block, as a reference to one shared object,
    not as constructor arguments: Ray restarts a killed actor by running its constructor again, and keeps
    no large arguments for that."""

    def __init__(self):
        self.job = None

    def _setup(self, setup) -> None:
        from gsrlang.execution.inlinerun import ColumnRunner, columnar_judges
        from gsrlang.execution.limit import CallLimit
        from gsrlang.execution.planner import COLUMNS, run_route
        from gsrlang.semantics.compose import Plan
        from gsrlang.trace.write import Static

        job, cache_server = setup
        self.plan = Plan(job.program)
        self.static = Static(self.plan, job.config.program_path)
        self.cache_server = cache_server
        self.registry = job.judges.build(_RemoteCache(cache_server) if cache_server is not None else None)
        self.labels = label_reader(job.program, job.mode, job.columns) if job.columns.label_field else None
        # the planner's path, as the local engine's: a block of a program whose judges answer a column at once
        # is evaluated by columns (the same lines and records, byte for byte), else item by item
        route = run_route(job.config, columns_possible=columnar_judges(self.plan, self.registry))
        self.columns = ColumnRunner(self.plan, self.registry, job.mode, self.labels, self.static,
                                    records=bool(job.config.trace)) \
            if route.evaluate == COLUMNS else None
        self.limit = CallLimit(job.config.concurrency)  # this actor's judge calls in flight
        self.job = job

    def pid(self) -> int:
        return os.getpid()

    async def run_block(self, setup: list, index: int, entries: list) -> dict:
        """{"index", "results": [line text], "trace": [record text], "usage": judge usage of this block}.

        `setup`: [a reference to (job, cache server)] (in a list, so Ray passes the reference)."""
        from gsrlang.execution.executor import run_items
        from gsrlang.trace.jsonio import dumps_line
        from gsrlang.trace.schema import result_line
        from gsrlang.trace.write import item_record

        if self.job is None:
            self._setup(await setup[0])
        before = self.registry.usage()
        if self.columns is not None:
            done = await self.columns.run(entries)
        else:
            done = [(item_run, result_line(item_run, self.job.program), None) async for item_run in
                    run_items(self.plan, entries, self.registry, self.job.mode, self.limit, self.labels,
                              short_circuit=self.job.config.short_circuit)]
        results, traces = [], []
        for item_run, line, record in done:
            results.append(dumps(line))
            if self.job.config.trace:  # version 2 item records of the one header the driver writes (key 0)
                if record is None:
                    record = item_record(item_run, self.static, 0, line)
                record["p"] = 0
                traces.append(dumps_line(record))
        if self.cache_server is not None:  # the block's puts are stored before it counts as done: the driver
            await self.cache_server.flush.remote()  # kills the cache server at the end, queued puts and all
        return {"index": index, "results": results, "trace": traces, "usage": _add(self.registry.usage(), before, -1)}

    async def close(self) -> None:
        if self.job is not None:
            await self.registry.aclose()


def _add(a, b, sign: int = 1):
    """a + sign * b over the numbers of two nested usage dicts (other values: a's)."""
    if isinstance(a, dict):
        return {k: _add(a.get(k), (b or {}).get(k), sign) if k in a else _add(None, b[k], sign)
                for k in {**(b or {}), **a}}
    if isinstance(a, (int, float)) and not isinstance(a, bool) and isinstance(b, (int, float)):
        return a + sign * b
    if a is None and isinstance(b, (int, float)) and not isinstance(b, bool):
        return sign * b
    if a is None and isinstance(b, dict):
        return _add({}, b, sign)
    return a


def _criteria_in_order(usage: dict, program) -> None:
    """Each judge's by_criterion in program order, as one process keys it (the blocks' sum lists a criterion
    where the first block that met it was, which depends on which actor ran what)."""
    order = {node.id: i for i, node in enumerate(program.criteria)}
    for judge in usage.values():
        rows = judge.get("by_criterion") if isinstance(judge, dict) else None
        if rows:
            judge["by_criterion"] = dict(sorted(rows.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


# ------------------------------------------------------------------------------------------------ the driver


class _Run:
    def __init__(self, ray, job: RunJob, registry, on_item):
        self.ray, self.job, self.registry, self.on_item = ray, job, registry, on_item
        if job.judges is None:
            raise EngineError("the ray engine rebuilds the judges on its actors: give the RunJob their recipe "
                              "(gsrlang.judges.replica.JudgeRecipe.of(registry))")
        self.block_size = max(1, job.engine.block_size or 500)
        self.summary = RunSummary(job.program.name, job.program.content_hash, job.mode)
        self.usage: dict = {}
        self.resumed = 0
        self.blocks = 0
        self.work, self.temporary = self._work_dir(job.engine.work_dir)

    # ---------------------------------------------------------------- the work directory

    def _work_dir(self, given: str | None) -> tuple[Path, bool]:
        """The work folder: one gsr makes (and marks with its `run.json`) inside `--work-dir DIR` (default: the
        output's folder), named after the output, `OUT.gsr-ray`. It is never DIR itself, so `--work-dir .`
        leaves the project as it was; it is checked against every input and output of the run (safeio), and
        a folder of that name that gsr did not make (no `run.json` of its own) is refused, never used."""
        from gsrlang.files.safeio import check_work_dir

        target = next((p for p in (self.job.config.out, self.job.config.trace) if p and p != "-"), None)
        if target is None and not given:  # nothing is kept: no resume
            return Path(tempfile.mkdtemp(prefix="gsr-ray-")), True
        if given and not os.path.isdir(given):
            raise EngineError(f"--work-dir {given}: {'not a folder' if os.path.exists(given) else 'no such folder'}"
                              " (gsr makes its work folder inside it)")
        name = (Path(target).name if target else "run") + ".gsr-ray"
        work = Path(given) / name if given else Path(target).with_name(name)
        check_work_dir("the work folder", work,
                       [("PROGRAM", self.job.config.program_path), ("--data", self.job.data), *self.job.inputs],
                       [("--out", self.job.config.out), ("--trace", self.job.config.trace),
                        ("--cache", self.job.judges.cache_path)])
        manifest = self._manifest()
        mine = work / MARK
        if os.path.lexists(work):
            if work.is_symlink() or not work.is_dir() or not mine.is_file():
                raise EngineError(f"{work} exists and is not a work folder gsr made (it has no {MARK} of gsr's): "
                                  "move it away, or choose another --work-dir; nothing was changed")
            try:
                found = json.loads(mine.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                found = None
            if found != manifest:
                raise EngineError(f"{work} holds an unfinished run of another program, data or settings; "
                                  "delete it to start afresh, or rerun that run's command to finish it")
            return work, False
        # made whole, then renamed into place: a folder of that name is gsr's only if it holds run.json
        try:
            fresh = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=work.parent))
        except OSError as exc:
            raise EngineError(f"cannot create the work folder {work}: {exc.strerror or exc}") from None
        try:
            write_atomic(fresh / MARK, json.dumps(manifest))
            os.rename(fresh, work)
        except OSError as exc:
            _remove_own(fresh, 0)
            raise EngineError(f"cannot create the work folder {work}: {exc.strerror or exc}") from None
        return work, False

    def _manifest(self) -> dict:
        job = self.job
        return {"made_by": "gsr run --engine ray", "format": WORK_FORMAT, "program": job.program.content_hash,
                "data": str(job.data), "data_stamp": _stamp(job.data), "judges": job.judges.fingerprint(),
                "columns": attrs.asdict(job.columns, value_serializer=lambda _, __, v: list(v)
                                        if isinstance(v, tuple) else v),
                "mode": job.mode, "limit": job.config.limit, "block_size": self.block_size,
                "trace": bool(job.config.trace)}

    def _part(self, index: int, what: str) -> Path:
        return self.work / f"block-{index:06d}.{what}"

    # ---------------------------------------------------------------- running

    def go(self) -> RunSummary:
        t0 = time.perf_counter()
        try:
            self._run_blocks()
            self._merge(time.perf_counter() - t0)
        finally:
            self.summary.seconds = time.perf_counter() - t0
            if self.temporary:  # nothing to resume from
                _remove_own(self.work, self.blocks)
        _remove_own(self.work, self.blocks)  # the run is complete: its blocks are in --out and --trace
        self.summary.judges = self.usage
        return self.summary

    def _pool(self):
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        server = None
        if self.job.judges.cache_path is not None:  # pinned to this node: the cache file is on this node's disk
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            server = ray.remote(_CacheServer).options(num_cpus=0, max_restarts=-1, max_task_retries=-1,
                                                      scheduling_strategy=here).remote(self.job.judges)
        cpus = max(1.0, float(ray.cluster_resources().get("CPU", 1)))
        n = self.job.engine.actors or int(cpus)
        runner = ray.remote(_BlockRunner)
        self.setup = [ray.put((self.job, server))]
        tag = f"gsr-{os.getpid()}-{int(time.time() * 1000)}"  # named, so an operator (or a test) can find them
        actors = [runner.options(name=f"{tag}-actor-{k}", num_cpus=min(1.0, cpus / n), max_restarts=-1,
                                 max_task_retries=-1, max_concurrency=2).remote() for k in range(n)]
        return actors, server

    def _run_blocks(self) -> None:
        ray = self.ray
        actors, server = None, None
        idle: list = []
        in_flight: dict = {}  # ObjectRef -> actor
        self.next = 0  # the next block to count, in input order
        self.ready: set[int] = set()
        try:
            for index, block in self._blocks():
                self.blocks = index + 1
                if self._part(index, "done.json").exists():
                    self.resumed += 1
                    self._finished(index)
                    continue
                if actors is None:
                    actors, server = self._pool()
                    idle = list(actors)
                while not idle:
                    idle.append(self._collect(in_flight))
                actor = idle.pop()
                in_flight[actor.run_block.remote(self.setup, index, block)] = actor
            while in_flight:
                self._collect(in_flight)
            if actors:  # close the judges' HTTP clients (best effort: killing the actors frees them anyway)
                ray.wait([a.close.remote() for a in actors], num_returns=len(actors), timeout=30)
        finally:
            for a in (actors or []) + ([server] if server is not None else []):
                ray.kill(a)

    def _blocks(self):
        from itertools import islice

        items = read_items(self.job.data, self.job.columns)
        if self.job.config.limit is not None:
            items = islice(items, self.job.config.limit)
        yield from enumerate(iter(lambda: list(islice(items, self.block_size)), []))

    def _collect(self, in_flight: dict):
        """Wait for one block, store it, count what is now in order; returns its (idle again) actor."""
        ray = self.ray
        (ref,), _ = ray.wait(list(in_flight), num_returns=1)
        actor = in_flight.pop(ref)
        try:
            done = ray.get(ref)
        except Exception as exc:  # an error inside gsr (not an actor's death: Ray retries those)
            raise EngineError(f"a block failed on its actor: {exc}") from None
        index = done["index"]
        _write_whole(self._part(index, "results.jsonl"), "".join(t + "\n" for t in done["results"]))
        if self.job.config.trace:
            _write_whole(self._part(index, "trace.jsonl"), "".join(t + "\n" for t in done["trace"]))
        _write_whole(self._part(index, "done.json"), json.dumps({"items": len(done["results"]),
                                                                 "usage": done["usage"]}))
        self._finished(index)
        return actor

    def _finished(self, index: int) -> None:
        """Count the blocks that are done and next in input order (progress, summary, metrics)."""
        self.ready.add(index)
        while self.next in self.ready:
            self.ready.discard(self.next)
            done = json.loads(self._part(self.next, "done.json").read_text(encoding="utf-8"))
            self.usage = _add(self.usage, done["usage"])
            with self._part(self.next, "results.jsonl").open(encoding="utf-8") as f:
                for text in f:
                    line = json.loads(text)
                    item_run = _item_run(line)
                    self.summary.count(item_run, line, True)
                    if self.on_item:
                        self.on_item(item_run, line)
            self.next += 1
        _criteria_in_order(self.usage, self.job.program)

    def _merge(self, wall_s: float) -> None:
        """The blocks, in input order, into --out and --trace; the trace ends with the run summary."""
        out = open_results(self.job.config.out, self.job.mode)
        trace = open_output(self.job.config.trace)
        try:
            if trace is not None:
                from gsrlang.semantics.compose import Plan
                from gsrlang.trace.write import Static, header_line

                trace.write(header_line(Static(Plan(self.job.program), self.job.config.program_path), 0) + "\n")
            for index in range(self.blocks):
                if out is not None:
                    with self._part(index, "results.jsonl").open(encoding="utf-8") as f:
                        for text in f:
                            out.write(json.loads(text))
                if trace is not None:
                    with self._part(index, "trace.jsonl").open(encoding="utf-8") as f:
                        shutil.copyfileobj(f, trace)
            end_results(out, self.summary)
            if trace is not None:
                info = {"program": {"name": self.job.program.name, "hash": self.job.program.content_hash,
                                    "path": self.job.config.program_path},
                        "engine": {"name": "ray", "blocks": self.blocks, "blocks_resumed": self.resumed,
                                   "block_size": self.block_size}}
                record = run_summary_record(self.summary, self.usage, wall_s, info)
                trace.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        finally:
            for f in (out, trace):
                close_output(f)


def _stamp(data: str) -> list | None:
    """A local data file's size and modification time (a file changed since the blocks were run is another
    run's data); None for a URI."""
    from gsrlang.files.storage import is_uri

    if is_uri(data):
        return None
    try:
        st = os.stat(data)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _item_run(line: dict) -> ItemRun:
    """What the summary and the progress display need of an item, from its result line."""
    return ItemRun(line["id"], line["line"], line["mode"], (), line["status"], line["reason"],
                   label=line.get("label"), label_error=line.get("label_error"))


def _write_whole(path: Path, text: str) -> None:
    """Write a file so that it exists whole or not at all (a killed driver leaves no half block)."""
    write_atomic(path, text, newline="")


BLOCK_PARTS = ("results.jsonl", "trace.jsonl", "done.json")


def _remove_own(work: Path, blocks: int) -> None:
    """Remove what gsr wrote in its work folder, by name: the block files of blocks 0..blocks-1, run.json and
    the temporary files of interrupted writes of these (`.NAME.*.tmp`); then the folder, only if that left
    it empty. Nothing else is touched, whatever else the folder holds."""
    own = {MARK, *(f"block-{i:06d}.{part}" for i in range(blocks) for part in BLOCK_PARTS)}
    try:
        names = os.listdir(work)
    except OSError:
        return
    for entry in names:
        base = entry[1:].rsplit(".", 2)[0] if entry.startswith(".") and entry.endswith(".tmp") else entry
        if entry in own or (base in own and entry != base):
            with contextlib.suppress(OSError):
                if not os.path.islink(work / entry) and os.path.isfile(work / entry):
                    os.unlink(work / entry)
    with contextlib.suppress(OSError):  # fails, harmlessly, when something not gsr's is left in it
        os.rmdir(work)

