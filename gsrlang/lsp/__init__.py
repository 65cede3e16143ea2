"""The gsr language server (`gsr lsp`): diagnostics, hover, definition, symbols, completion, formatting, fixes.

Thin over the checker: every answer is computed from `gsrlang.lang.check.driver.analyze`
(diagnostics), a re-run of the checker's passes that keeps their context (types,
declarations across imports), and the catalogue. `server.py` wires the protocol
(pygls 2); the other modules are plain functions of a `DocumentModel`.
"""
