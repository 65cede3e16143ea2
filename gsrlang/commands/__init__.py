"""One module per `gsr` subcommand: HELP, add_arguments(parser), run(args) -> exit code.

`UsageError` lives here, below both the commands and `gsrlang.cli` (which loads them),
so a command never imports the CLI that imports it.
"""

import contextlib


class UsageError(Exception):
    """A command was used wrongly (exit 2); `gsr` prints `gsr COMMAND: error: MESSAGE`."""


@contextlib.contextmanager
def usage_errors(*kinds: type[Exception]):
    """`with usage_errors(DataError): ...`: an error of one of `kinds` raised inside is the command's usage
    error, with its message."""
    try:
        yield
    except kinds as exc:
        raise UsageError(str(exc)) from None
