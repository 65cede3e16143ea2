"""gsr lsp: the language server, over standard input and output."""

from __future__ import annotations

HELP = "run the language server (LSP over stdio) for editors"
DESCRIPTION = """\
Run the gsr language server: diagnostics as you type (debounced), hover, go to
definition (across imports), outline, completion, formatting and quick fixes.
It speaks the Language Server Protocol on standard input and output; editors
start it themselves (see docs/editors.md for VS Code, Neovim, Helix and Emacs).

output: the protocol's messages on standard output; the server's own log only with --log FILE.
exit status: 0 when the editor shuts it down; 2 bad options.

examples:
  gsr lsp
  gsr lsp --debounce-ms 0 --log /tmp/gsr-lsp.log"""


def add_arguments(p) -> None:
    p.add_argument("--stdio", action="store_true",
                   help="use standard input and output (the default and only transport; accepted for editors "
                        "that pass it)")
    p.add_argument("--debounce-ms", type=int, default=150, metavar="MS",
                   help="wait this long after the last change before checking a document (default 150)")
    p.add_argument("--log", metavar="FILE", help="write the server's own log (debugging gsr itself) to FILE")


def run(args) -> int:
    import gc
    import logging

    from gsrlang.commands import UsageError

    if args.debounce_ms < 0:
        raise UsageError("--debounce-ms is a number of milliseconds, 0 or more")
    if args.log:
        logging.basicConfig(filename=args.log, level=logging.DEBUG,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # The server's modules (lsprotocol alone defines ~900 attrs classes) are imported with the cyclic garbage
    # collector off, then frozen: the collections start-up would trigger find nothing (~20 ms), and every later
    # collection, and the last one at exit (~60 ms), skips them instead of traversing them again.
    gc.disable()
    try:
        from gsrlang.lsp.server import serve
    finally:
        gc.freeze()
        gc.enable()
    serve(args.debounce_ms / 1000)
    return 0
