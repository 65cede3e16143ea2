"""gsr serve: a program as an HTTP reward server for RL trainers (docs/rewards.md)."""

from __future__ import annotations

import sys

from gsrlang.commands import UsageError, usage_errors

HELP = "serve a program's rewards over HTTP to RL trainers (TRL, OpenRLHF, veRL, ...)"
DESCRIPTION = """\
Serve PROGRAM's rewards over HTTP (Starlette on uvicorn), for RL trainers:

  POST /score      items, pointwise: {"items": [{"input", "response", "reference"?, "id"?, "record"?}]}
  POST /compare    pairs, pairwise programs: {"pairs": [{"input", "responses": [A, B], ...}]}
  POST /group      responses to one prompt: {"input", "responses": [...], "normalize": "raw"|"rank"|"zscore"}
                   (pointwise scores, or a pairwise program's round-robin wins; "groups": [...] for several)
  POST /openrlhf   OpenRLHF's remote reward model ({"query", "prompts", "labels"} -> {"rewards": [...]});
                   also at /get_reward
  GET  /healthz    the program served, its hash, items in flight
  GET  /metrics    Prometheus text: requests, latency quantiles, rewards, judge calls, cache hits, tokens

Every request's items are judged through one set of judges (one model client, one judgment cache, one
concurrency limit, identical calls in flight merged), and the items of concurrent requests are judged
together. A request may set a deadline ("deadline_s") and what happens past it ("on_deadline": "fail",
an error naming the unfinished items, or "default", the "default_reward" for them); --deadline and
--on-deadline are the defaults. Every response names the program (name and hash) that scored it.

--trace FILE appends every reward's trace record to FILE, then FILE's next free numbered name
(trace.1.jsonl, ...) past --trace-max-mb or when the program is reloaded: each is a trace of one program
version that `gsr replay` verifies and re-composes under an edited program, with no model call.

Security: it binds 127.0.0.1 unless --host says otherwise, and another address needs a token
(--token-env NAME: the environment variable holding it; requests send `Authorization: Bearer TOKEN`).
Bodies are capped (--max-body-mb); no request can make it read or write a file.

--watch reloads PROGRAM when its file changes and the new version checks; one that does not is refused
(its diagnostics logged) and the old one keeps serving.

The model judge is configured as for `gsr run` (--model, --base-url, the environment, gsr.toml; the
judgment cache --cache, on by default).

output: on standard error, `gsr serve: serving NAME (HASH, MODES) on http://HOST:PORT` once it listens,
the server's log, and `gsr serve: stopped`; nothing on standard output.
exit status: 0 stopped (Ctrl-C, SIGTERM); 1 the program does not check; 2 the options cannot be used.

examples:
  gsr serve examples/helpsteer2/helpfulness.gsr --model judge --base-url http://localhost:8000/v1
  gsr serve rubric.gsr --port 8100 --trace runs/rewards.jsonl --watch --deadline 60 --on-deadline default
  GSR_TOKEN=... gsr serve rubric.gsr --host 0.0.0.0 --token-env GSR_TOKEN"""


def add_arguments(p) -> None:
    p.add_argument("program", metavar="PROGRAM", help="the .gsr program to serve")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; another "
                                                       "address needs --token-env)")
    p.add_argument("--port", type=int, default=8080, help="the port (default 8080; 0: any free port, printed)")
    p.add_argument("--token-env", metavar="NAME",
                   help="the environment variable holding the token every request must send "
                        "(`Authorization: Bearer TOKEN`); required off loopback")
    p.add_argument("--trace", metavar="FILE", help="append every reward's trace record here (rotated by size)")
    p.add_argument("--trace-max-mb", type=float, default=256.0, metavar="MB",
                   help="start the next trace file past this size (default 256)")
    p.add_argument("--watch", action="store_true", help="reload PROGRAM when its file changes and checks clean")
    p.add_argument("--watch-interval", type=float, default=1.0, metavar="SECONDS",
                   help="how often --watch looks at the file (default 1)")
    g = p.add_argument_group("rewards (a request may override each)")
    g.add_argument("--deadline", type=float, metavar="SECONDS", help="a request's deadline (default: none)")
    g.add_argument("--on-deadline", choices=("fail", "default"), default="fail",
                   help="past the deadline: fail (an error naming the unfinished items; default) or default "
                        "(the default reward for them)")
    g.add_argument("--default-reward", type=float, default=0.0, metavar="X",
                   help="the reward of an item unfinished at the deadline, under `default` (default 0.0)")
    g.add_argument("--failure-value", default="0.0", metavar="X|none",
                   help="the reward of an item that is not ok (a failed judge call, an invalid answer, ...): a "
                        "number, or none for null (default 0.0)")
    g.add_argument("--scale", choices=("unit", "native"), default="unit",
                   help="unit: the sink's Score in [0, 1] (default); native: the score on the program's scale")
    s = p.add_argument_group("server")
    s.add_argument("--max-body-mb", type=float, default=8.0, metavar="MB", help="the largest request body (default 8)")
    s.add_argument("--max-items", type=int, default=10_000, metavar="N",
                   help="the most items one request may make (default 10000)")
    s.add_argument("--max-batch", type=int, default=1024, metavar="N",
                   help="the most items judged in one micro-batch (default 1024)")
    s.add_argument("--batch-window-ms", type=float, default=0.0, metavar="MS",
                   help="wait this long for more requests before judging a micro-batch (default 0: judge what "
                        "has arrived)")
    s.add_argument("--concurrency", type=int, default=None, metavar="N",
                   help="judge calls in flight (default: the model judges' `concurrency` setting, else 8)")
    s.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    p.add_argument("--model", metavar="MODEL", help="the model for `llm` criteria (default: $GSR_MODEL)")
    p.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server for `llm` criteria")
    from gsrlang.commands.config import add_llm_arguments

    add_llm_arguments(p)


def _failure_value(text: str) -> float | None:
    if text.strip().lower() in ("none", "null"):
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--failure-value must be a number or none, got {text!r}") from None


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _token(args) -> str | None:
    import os

    if args.token_env is None:
        if not _loopback(args.host):
            raise UsageError(f"--host {args.host} is not a loopback address: requests from other machines need a "
                             "token; put one in an environment variable and pass its name with --token-env NAME")
        return None
    if not (token := os.environ.get(args.token_env, "").strip()):
        raise UsageError(f"--token-env {args.token_env}: that environment variable is not set (or empty)")
    return token


def _judges(args, program):
    """One `gsrlang.Judges` for the whole server, the model judge built as `gsr run` builds it."""
    import gsrlang
    from gsrlang.commands.run import run_concurrency, run_llm_judge
    from gsrlang.judges.base import JudgeConfigError

    try:
        llm, settings = run_llm_judge(args)
        judges = gsrlang.Judges(llm=llm, concurrency=run_concurrency(args, settings), cache=None)
        judges.check(program.checked)
    except (JudgeConfigError, gsrlang.JudgeError) as exc:
        raise UsageError("the judges cannot serve this program:\n  " + "\n  ".join(exc.problems)) from None
    return judges


def build(args):
    """(the uvicorn server, its bound socket, the engine) for the parsed arguments; UsageError for bad ones."""
    import logging
    import socket

    import gsrlang
    from gsrlang.files.safeio import check_outputs
    from gsrlang.serve.app import MiB, Options, build_app
    from gsrlang.serve.engine import Engine
    from gsrlang.serve.metrics import Metrics
    from gsrlang.serve.traces import TraceSink
    from gsrlang.serve.watch import Watcher

    for name, value in (("--trace-max-mb", args.trace_max_mb), ("--watch-interval", args.watch_interval),
                        ("--deadline", args.deadline), ("--max-body-mb", args.max_body_mb),
                        ("--max-items", args.max_items), ("--max-batch", args.max_batch)):
        if value is not None and not value > 0:
            raise UsageError(f"{name} must be greater than 0, got {value:g}")
    if args.batch_window_ms < 0:
        raise UsageError(f"--batch-window-ms must be 0 or more, got {args.batch_window_ms:g}")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {args.port}")
    token = _token(args)
    failure_value = _failure_value(args.failure_value)
    check_outputs([("PROGRAM", args.program)], [("--trace", args.trace)])
    try:
        program = gsrlang.load(args.program)
    except gsrlang.ProgramError as exc:
        print(f"gsr serve: {exc}", file=sys.stderr)
        return None
    judges = _judges(args, program)
    log = logging.getLogger("gsrlang.serve")  # the server's own messages only: not every model call's
    log.setLevel(args.log_level.upper())
    if not any(h.get_name() == "gsr serve" for h in log.handlers):  # added once however often it is built
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("gsr serve: %(levelname)s %(message)s"))
        handler.set_name("gsr serve")
        log.addHandler(handler)

    engine = None
    metrics = Metrics(lambda: ((engine.current.program.name, engine.current.hash), engine.in_flight,
                               judges.usage()))
    sink = None
    if args.trace:
        with usage_errors(OSError):
            sink = TraceSink(args.trace, int(args.trace_max_mb * MiB), judges.usage)
    engine = Engine(program, judges, sink=sink, metrics=metrics, max_batch=args.max_batch,
                    window_s=args.batch_window_ms / 1000)
    options = Options(token=token, max_body=int(args.max_body_mb * MiB), max_items=args.max_items,
                      deadline_s=args.deadline, on_deadline=args.on_deadline, default_reward=args.default_reward,
                      failure_value=failure_value, scale=args.scale)
    watcher = Watcher(args.program, engine, metrics, args.watch_interval) if args.watch else None
    app = build_app(engine, options, metrics, watcher)

    import uvicorn

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns Nagle's algorithm off only on sockets that say they are TCP, and without
    # that every response on a kept-alive connection waits ~40 ms for a delayed acknowledgement
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host.strip("[]"), args.port))
        sock.listen(2048)  # connections wait from now on, before the server has started
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=30)
    return uvicorn.Server(config), sock, engine


def run(args) -> int:
    if (built := build(args)) is None:
        return 1
    server, sock, engine = built
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    program = engine.current.program
    print(f"gsr serve: serving {program.name} ({program.hash.split(':')[-1][:12]}, "
          f"{', '.join(program.modes)}) on http://{shown}:{port}" + (" (token required)" if args.token_env else ""),
          file=sys.stderr, flush=True)
    import signal

    # uvicorn stops gracefully on SIGINT / SIGTERM, then raises the signal again under the handlers it found:
    # these make that a clean exit (0) once the trace is closed
    stopped = []
    previous = {sig: signal.signal(sig, lambda s, f: stopped.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        engine.judges.close()
        sock.close()
    print("gsr serve: stopped", file=sys.stderr)
    return 0
