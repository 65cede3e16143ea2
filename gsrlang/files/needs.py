"""Which columns of a data row a program reads, by the kind of its criteria's judges.

A run asks the data for what the program reads and nothing more, so that a program
whose criteria are all `human(field: ...)` runs on annotation files that have no
`input` or `response` column. Per judge kind:

| judge | reads |
|---|---|
| `llm` | the input, the response(s), and the reference when a reference column is named |
| `rule.NAME(...)` | the response(s) |
| `human(field: F)` | column F (`{candidate}` in F becomes A, B, ...) |
| `verifier("name")` | the input and the response(s) (it is handed the whole item) |

Ensembles read what each of their judges reads. A judge kind added elsewhere (see
gsrlang/lang/check/judgekinds.py) is assumed to read the input and the response(s), as a
verifier does.
"""

from __future__ import annotations

import attrs

__all__ = ["Needs", "column_map", "program_needs"]

_KNOWN = {"llm": (True, True), "rule": (False, True), "human": (False, False), "verifier": (True, True)}


@attrs.frozen
class Needs:
    """The criteria that read each part of a row (criterion ids, in declaration order)."""

    input: tuple[str, ...] = ()
    responses: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()  # (field as declared, criterion id) of human criteria

    def field_columns(self, candidates: int) -> tuple[tuple[str, str], ...]:
        """(column, criterion id) for the human fields, `{candidate}` expanded for `candidates` candidates."""
        out: dict[str, str] = {}
        for field, who in self.fields:
            for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:candidates]:
                out.setdefault(field.replace("{candidate}", c), who)
        return tuple(out.items())


def program_needs(program) -> Needs:
    """What `program`'s criteria read from each row."""
    inp, resp, fields = [], [], []
    for node in program.criteria:
        c = node.criterion
        procs = c.ensemble.judges if c.ensemble is not None else (c.procedure,)
        reads = [_KNOWN.get(p.kind, (True, True)) for p in procs]
        if any(i for i, _ in reads):
            inp.append(node.id)
        if any(r for _, r in reads):
            resp.append(node.id)
        fields += [(str(p.args["field"]), node.id) for p in procs if p.kind == "human" and p.args.get("field")]
    return Needs(tuple(inp), tuple(resp), tuple(dict.fromkeys(fields)))


def column_map(program, mode: str, input_field: str = "input", responses: tuple[str, ...] = ("response",),
               id_field: str | None = None, label_field: str | None = None, reference_field: str | None = None):
    """The one place that decides which columns of a row an item needs: the `ColumnMap` of the given fields that
    asks a row only for what `program`'s criteria read (`gsr run` and `gsr tune --data` both read rows through
    it). `program` None: every configured column (per-item programs, whose criteria are not known yet).
    ValueError for a malformed field name."""
    from gsrlang.files.dataset import ColumnMap

    extra = {}
    if program is not None:
        needs = program_needs(program)
        extra = {"read_input": bool(needs.input), "read_responses": bool(needs.responses),
                 "fields": needs.field_columns(1 if mode == "pointwise" else 2)}
    return ColumnMap(input_field, responses, id_field, label_field, reference_field, **extra)
