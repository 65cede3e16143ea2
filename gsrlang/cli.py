"""The `gsr` command: argument parsing and exit codes only; each subcommand lives in gsrlang/commands/.

Exit codes: 0 clean, 1 problems found in the user's input (diagnostics, failed items,
a replay that differs), 2 the tool itself failed (or was used wrongly).
Heavy imports (openai, graphviz, pygls, numpy) happen inside the subcommands that need them, and
`gsr COMMAND ...` imports only COMMAND's module (building the other subcommands' options would
import what they need), so `gsr check` starts fast.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from gsrlang import __version__
from gsrlang.commands import UsageError
from gsrlang.files.safeio import PathClash, machine_error

# name -> module in gsrlang.commands (`import` is a keyword, so its module is import_), in the order help lists
# them; each module defines HELP, add_arguments(parser) and run(args) -> int
COMMANDS = {name: "import_" if name == "import" else name for name in (
    "check", "fmt", "explain", "export", "import", "run", "replay", "metrics", "tune", "compare", "ablate", "compile",
    "probe", "render", "report", "serve", "trust", "batch", "lsp")}

EPILOG = """\
exit status: 0 clean, 1 problems found (diagnostics, failed items), 2 the options or an input file cannot be
used, or the tool failed.
Run `gsr COMMAND --help` for a command's options and what it prints, `gsr explain GSR301` for a diagnostic."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only`, the subcommands other than that one are left out."""
    parser = argparse.ArgumentParser(
        prog="gsr", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="gsrlang: compile rubrics into typed evaluation graphs; check, run, trace and replay them.")
    parser.add_argument("--version", action="version", version=f"gsr {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        module = importlib.import_module(f"gsrlang.commands.{COMMANDS[name]}")
        # argparse %-formats help strings: a literal % ("95% CI") must reach it as %%
        p = sub.add_parser(name, help=module.HELP.replace("%", "%%"), description=getattr(module, "DESCRIPTION", module.HELP),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


# Commands whose process runs without the cyclic garbage collector (see `main`): short, writing no file.
_NO_CYCLIC_GC = frozenset({"check"})


def main(argv: list[str] | None = None) -> int:
    """Run `gsr` with `argv` (the process's own arguments when None, as the `gsr` script calls it).

    A `gsr check` process turns the cyclic garbage collector off: what it allocates is mostly long-lived (modules,
    classes, the parser's tables) or freed by reference counting (parsing and checking already pause the collector,
    see lang/syntax/parser.py), so the collections its start-up triggered found nothing, ~6 ms of a ~125 ms check
    (CPU, median of 10; peak memory checking 1,500 broken files unchanged, 27 MB). At exit it freezes what is
    left: interpreter shutdown would otherwise run the collector over every object still alive, ~15 ms more.
    They are still freed by reference counting, and atexit handlers still run; only garbage in reference cycles
    is left unfinalized, which a command that writes no file can afford."""
    own = argv is None and sys.argv[1:2] and sys.argv[1] in _NO_CYCLIC_GC
    if own:
        gc.disable()
    code = _main(sys.argv[1:] if argv is None else argv)
    if own:
        gc.freeze()
    return code


def _main(argv: list[str]) -> int:
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except (UsageError, PathClash) as exc:  # PathClash: an output that is an input or another output; none written
        print(f"gsr {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a full disk, a read-only or vanished folder, a path that cannot be opened as given
        if (message := machine_error(exc)) is None:
            return _internal(args, exc)
        print(f"gsr {args.command}: error: {message}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug in gsr itself, never a user's mistake
        client = sys.modules.get("gsrlang.judges.llm.client")  # looked up, not imported: `gsr check` never loads it
        if client is not None and isinstance(exc, client.LLMError):  # a model server's failure, already a sentence
            print(f"gsr {args.command}: error: {exc}", file=sys.stderr)
            return 1
        return _internal(args, exc)


def _internal(args, exc: BaseException) -> int:
    if os.environ.get("GSR_DEBUG"):
        raise  # called only from an `except` block: re-raises `exc` with its traceback
    print(f"gsr {args.command}: internal error: {type(exc).__name__}: {exc}\n"
          "this is a bug in gsr; rerun with GSR_DEBUG=1 for a traceback and report it", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
