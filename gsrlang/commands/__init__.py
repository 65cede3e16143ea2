"""One module per `gsr` subcommand: HELP, add_arguments(parser), run(args) -> exit code.

`UsageError` lives here, below both the commands and `gsrlang.cli` (which loads them),
so a command never imports the CLI that imports it.
"""


class UsageError(Exception):
    """A command was used wrongly (exit 2); `gsr` prints `gsr COMMAND: error: MESSAGE`."""
