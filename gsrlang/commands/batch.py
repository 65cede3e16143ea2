"""gsr batch status|cancel, and `gsr run --batch` / `--batch-export` / `--batch-import` (docs/running.md, "Batch runs")."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors

HELP = "the Batch API batches of a `gsr run --batch`: their status, or cancel them"
DESCRIPTION = """\
The batches a `gsr run --batch` sent are recorded in its state folder (OUT.gsr-batch/
beside its --out, else beside its --trace, or its --batch-state). Name the run's --out
(or the state folder itself):

  gsr batch status out/results.jsonl     # each batch: id, status, requests done/total, the provider's counts
  gsr batch cancel out/results.jsonl     # cancel every batch not yet finished

The server and key are resolved as for `gsr run` (flags, then the environment, then
gsr.toml); they must be the ones the batches were sent to. `status --offline` prints what
the state folder recorded, without asking the server.

output: the batches' status on standard output; progress and the server's errors on standard error.
exit status: 0 done; 2 no state folder there, or the server cannot be asked."""

RETRY = ("online", "batch")


def add_arguments(p) -> None:
    from gsrlang.commands.config import add_model_arguments

    p.add_argument("action", choices=("status", "cancel"), help="status: show the batches; cancel: cancel them")
    p.add_argument("run", metavar="OUT", help="the run's --out (or --trace), or its state folder")
    p.add_argument("--offline", action="store_true", help="status: what the state folder recorded; no server call")
    add_model_arguments(p)


def add_run_arguments(p) -> None:
    """`gsr run`'s batch flags."""
    b = p.add_argument_group("batch runs (a provider's Batch API: half the price, answers within 24 h; "
                             "docs/running.md, \"Batch runs\")")
    b.add_argument("--batch", action="store_true",
                   help="send the model calls through the server's Batch API (/v1/files + /v1/batches), round by "
                        "round: a judgment short-circuiting skips is never bought. Same results, trace and cache "
                        "entries as the online run; a killed run resumes its batches")
    b.add_argument("--batch-retry", choices=RETRY, default=None,
                   help="a batch line that failed (an error status, expired): retry it online (default) or in the "
                        "next batch")
    b.add_argument("--batch-state", metavar="DIR",
                   help="where the batches are recorded (default: OUT.gsr-batch beside --out, else beside --trace)")
    b.add_argument("--batch-max-requests", type=int, metavar="N",
                   help="requests per batch; more are split into several batches (default 50000, OpenAI's limit)")
    b.add_argument("--batch-max-bytes", metavar="SIZE",
                   help="bytes per batch input file, e.g. 200MB (the default, OpenAI's limit)")
    b.add_argument("--batch-poll", type=float, metavar="SECONDS",
                   help="the first wait between status checks; it doubles while nothing changes, up to 120 s "
                        "(default 5)")
    b.add_argument("--batch-window", type=int, metavar="N",
                   help="items in flight: a batch holds the current round's requests of at most N items "
                        "(default 10000)")
    b.add_argument("--batch-export", metavar="FILE",
                   help="write the requests the next round needs to FILE (OpenAI batch input JSONL, as `vllm "
                        "run-batch` reads it) and stop, calling nothing")
    b.add_argument("--batch-import", metavar="FILE",
                   help="answer from FILE, a batch results JSONL (OpenAI's output format, as `vllm run-batch` "
                        "writes it) of requests this run exported; with --batch-export, the next round is exported")


def wanted(args) -> bool:
    return bool(getattr(args, "batch", False) or getattr(args, "batch_export", None)
                or getattr(args, "batch_import", None))


def check_run_arguments(args) -> None:
    """Usage errors of the batch flags, before anything runs."""
    from gsrlang.files.safeio import check_outputs

    on = wanted(args)
    tuning = [f for f in ("batch_retry", "batch_state", "batch_max_requests", "batch_max_bytes", "batch_poll",
                          "batch_window") if getattr(args, f, None) is not None]
    if tuning and not on:
        raise UsageError(f"--{tuning[0].replace('_', '-')} only applies with --batch, --batch-export or "
                         "--batch-import")
    if not on:
        return
    if getattr(args, "dry_run", False):
        if args.batch_export or args.batch_import:
            raise UsageError("--dry-run plans a run and calls nothing: it takes --batch (the plan at the Batch API's "
                             "price), not --batch-export or --batch-import")
        return
    if args.batch and args.batch_export:
        raise UsageError("--batch and --batch-export exclude each other: --batch sends the requests to the server's "
                         "Batch API, --batch-export writes them to a file for another runner")
    if args.programs is not None:
        raise UsageError("batch runs take one PROGRAM; --programs runs online only")
    if args.engine != "local":
        raise UsageError("batch runs use the local engine; drop --engine ray")
    if getattr(args, "no_cache", False):
        raise UsageError("batch runs keep every answer in the judgment cache (resuming and importing read it "
                         "back): drop --no-cache")
    if args.batch_state is None and not (args.out and args.out != "-") and not args.trace:
        raise UsageError("a batch run records its batches beside --out or --trace: give one of them (a file), "
                         "or --batch-state DIR")
    for flag in ("batch_max_requests", "batch_window"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.batch_poll is not None and not args.batch_poll > 0:
        raise UsageError("--batch-poll must be a positive number of seconds")
    if args.batch_max_bytes is not None:
        from gsrlang.judges.llm.batch import parse_size

        try:
            parse_size(args.batch_max_bytes)
        except ValueError as exc:
            raise UsageError(f"--batch-max-bytes: {exc}") from None
    if args.batch_import is not None and not os.path.isfile(args.batch_import):
        raise UsageError(f"--batch-import {args.batch_import}: no such file")
    check_outputs([("--data", args.data), ("PROGRAM", args.program), ("--batch-import", args.batch_import)],
                  [("--out", args.out), ("--trace", args.trace), ("--batch-export", args.batch_export)])


def state_folder(args) -> str:
    if args.batch_state:
        return args.batch_state
    return (args.out if args.out and args.out != "-" else args.trace) + ".gsr-batch"


def run_with_batches(args, program, mode, columns, registry, settings, *, local, progress, summarize,
                     finish) -> int:
    """`gsr run --batch` (or --batch-export / --batch-import): the run, its model calls answered from batches.

    `local`, `progress`, `summarize` and `finish` are gsr run's own steps (gsrlang.commands.run: the online run,
    the progress display, the summary, the exit status), passed in so that this module does not import it."""
    from gsrlang.commands.config import run_config
    from gsrlang.execution.runs import run_file
    from gsrlang.judges.llm.batch import (Batcher, BatchError, BatchLimits, BatchState, check_batch_api, parse_size,
                                          read_results)

    llm = registry.get("llm")
    if llm is None or not hasattr(llm, "pool"):
        print("gsr run: no criterion of this program is judged by a model: nothing to batch; running it as usual",
              file=sys.stderr)
        return local(args, program, mode, columns, registry, settings)
    say = (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    with usage_errors(BatchError):
        state = BatchState(state_folder(args))
        answers: dict = {}
        if args.batch_import:
            answers, problems = read_results(args.batch_import, lambda cid: cid in state.ledger)
            for problem in problems[:10]:
                print(f"gsr run: --batch-import {args.batch_import}: {problem}; its request is asked again",
                      file=sys.stderr)
            if len(problems) > 10:
                print(f"gsr run: --batch-import {args.batch_import}: {len(problems) - 10} more lines could not be "
                      "used", file=sys.stderr)
        limits = BatchLimits(args.batch_max_requests or 50_000,
                             parse_size(args.batch_max_bytes) if args.batch_max_bytes else 200 * 1024 * 1024)
        batcher = Batcher(state, api=bool(args.batch), limits=limits, retry=args.batch_retry or "online",
                          poll=args.batch_poll or 5.0, poll_cap=120.0, export=args.batch_export, imported=answers,
                          say=say, warn=lambda text: print(text, file=sys.stderr, flush=True))
        llm.pool.batcher = batcher
        for client in llm.pool.clients:  # made already (the --budget price check makes them)
            client.batcher = batcher
        llm.batch_pricing = bool(args.batch)  # the spend and --budget at the Batch API's price
        if args.batch:  # before anything is uploaded: a server without the Batch API is one line
            asyncio.run(check_batch_api([llm.pool.for_role(None)]))
    out, trace = args.out, args.trace
    if args.batch_export:  # the results are written only once no request is left to export
        folder = Path(state.folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = str(folder / ("results.partial" + Path(args.out).suffix)) if args.out and args.out != "-" else args.out
        trace = str(folder / "trace.partial.jsonl") if args.trace else None
    window = args.batch_window or 10_000

    def go(on_item):
        return run_file(program, args.data, columns, registry, mode,
                        run_config(args, 1 << 30, out=out, trace=trace, window=window), on_item=on_item,
                        batcher=batcher)

    try:
        summary = progress(args, go, registry)
    except asyncio.CancelledError:
        stop = batcher.stop
        if stop is None:
            raise
        for path in (out, trace):
            if path and path not in (args.out, args.trace) and os.path.exists(path):
                os.unlink(path)
        text = str(stop)
        if text.startswith("exported:"):
            _, n, models = text.split(":", 2)
            print(f"gsr run: wrote the {n} requests the next round needs to {args.batch_export} (model {models}); "
                  f"nothing was called. Run them (e.g. `vllm run-batch -i {args.batch_export} -o results.jsonl "
                  "--model ...`), then run this command again with --batch-import results.jsonl (and "
                  "--batch-export for the round after)", file=sys.stderr if args.out == "-" else sys.stdout)
            return 0
        raise UsageError(text) from None
    if args.batch_export:
        for final, partial in ((args.out, out), (args.trace, trace)):
            if final and partial and final != partial:
                Path(final).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(partial, final)
    stream = sys.stderr if args.out == "-" else sys.stdout
    summarize(summary, program, args, stream)
    s = batcher.summary()
    if s["batched"] or s["imported"] or args.batch:
        extra = "".join(f", {s[k]} {label}" for k, label in (
            ("imported", "imported"), ("retried_online", "retried online"),
            ("retried_in_batch", "retried in a later batch"), ("failed_lines", "lines failed"),
            ("cancelled", "not answered (cancelled)")) if s[k])
        print(f"  batches: {s['batched']} requests in {s['batches']} batch{'es' if s['batches'] != 1 else ''} "
              f"({s['answered']} answered{extra}); state in {state.folder}", file=stream)
    if args.batch_export:
        print(f"  nothing left to export: the run is complete (no request written to {args.batch_export})",
              file=stream)
    return finish(args, registry, summary, stream)


# ------------------------------------------------------------------------------------------------ gsr batch


def _state_for(path: str):
    from gsrlang.judges.llm.batch import BatchError, BatchState

    candidates = [Path(path), Path(path + ".gsr-batch")]
    for folder in candidates:
        if (folder / "state.json").is_file():
            with usage_errors(BatchError):
                return BatchState(folder)
    raise UsageError(f"no batch state at {path} (looked for {candidates[1]}/state.json and {candidates[0]}/"
                     "state.json): name the --out of a `gsr run --batch`, or its --batch-state folder")


def run(args) -> int:
    from gsrlang.commands.config import model_settings
    from gsrlang.judges.llm.batch import BatchAPI, scrubbed_url
    from gsrlang.judges.llm.client import LLMClient
    from gsrlang.judges.llm.config import LLMError

    state = _state_for(args.run)
    parts = [p for p in state.parts if p.stage != "exported"]
    if not parts:
        print(f"{state.folder}: no batch was sent (only exports)" if state.parts else f"{state.folder}: no batch")
        return 0
    if args.action == "status" and args.offline:
        for p in parts:
            _show(p.batch_id or f"(part {p.n}, not created yet)", p.status or p.stage, p.counts, p.requests)
        return 0
    with usage_errors(LLMError):
        settings = model_settings(args)
    if settings is None:
        raise UsageError("no model server configured: pass --base-url (and the key) the batches were sent with")

    async def go() -> int:
        problems = 0
        seen: dict = {}
        for p in parts:
            config = next((c for c in [settings.default, *(settings.for_role(r) for r in settings.roles)]
                           if scrubbed_url(c.effective_base_url) == p.base_url and c.model == p.model), None)
            if config is None:
                raise UsageError(f"batch part {p.n} went to model {p.model!r} at {p.base_url}, which the settings "
                                 "do not name: pass --base-url and --model as the run had them")
            if config not in seen:
                seen[config] = BatchAPI(LLMClient(config))
            api = seen[config]
            if not p.batch_id:
                _show(f"(part {p.n}, not created yet)", p.stage, p.counts, p.requests)
                continue
            try:
                b = await api.retrieve(p.batch_id)
                if args.action == "cancel" and b.status not in ("failed", "completed", "expired", "cancelled",
                                                                "cancelling"):
                    b = await api.cancel(p.batch_id)
            except Exception as exc:  # one line per batch that cannot be asked
                problems += 1
                print(f"gsr batch: {api.error('ask about batch ' + p.batch_id, exc)}", file=sys.stderr)
                continue
            counts = b.request_counts.model_dump() if b.request_counts is not None else {}
            _show(b.id, b.status, counts, p.requests)
        for api in seen.values():
            await api.aclose()
            await api.client.aclose()
        return 2 if problems else 0

    return asyncio.run(go())


def _show(batch_id: str, status: str, counts: dict, requests: int) -> None:
    total = counts.get("total") or requests
    failed = f", {counts['failed']} failed" if counts.get("failed") else ""
    print(f"{batch_id}  {status}  {counts.get('completed', 0)}/{total} requests done{failed}")
