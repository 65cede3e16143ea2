"""The language, from source text to the checked program: syntax, the checker (`check`), the
catalogue, the checked program (`program`), diagnostics, the JSON form, and the small value types
they are written in (`records`, `span`, `types`, `tasks`)."""
