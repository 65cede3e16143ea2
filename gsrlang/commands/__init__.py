"""One module per `gsr` subcommand: HELP, add_arguments(parser), run(args) -> exit code."""
