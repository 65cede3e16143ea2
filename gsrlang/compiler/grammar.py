"""The grammar handed to servers that constrain decoding (`--constrain grammar`).

It is derived from `grammar/gsr.lark`, the parser's own grammar, at run time (never a
hand-kept copy), and simplified for generation: the stdlib's signature declarations
are dropped (a program may not use them), and the constructs that grammar engines
for decoding do not accept are rewritten: the lookahead that tells `Ordinal{...}`
from a criterion body becomes a plain "{" (ambiguity is harmless when generating),
aliases (`-> name`), inline markers (`?rule`) and priorities (`.2`) are removed, and
strings are the one-line form (`"..."` with escapes; the triple-quoted form needs a
lookahead too).
The result is still a Lark grammar; tests parse every example program with it.

Servers take it in different fields:

* `structured_outputs` (vLLM >= 0.10.2, and the only form since 0.12):
  ``extra_body={"structured_outputs": {"grammar": G}}``;
* `guided_grammar` (older vLLM): ``extra_body={"guided_grammar": G}``.

Whatever the server does with it, the checker still decides.
"""

from __future__ import annotations

import re
from functools import cache

GRAMMAR_FIELDS = ("structured_outputs", "guided_grammar")

_SIGNATURES = re.compile(r"^// ---- stdlib signatures.*?(?=^// ---- )", re.M | re.S)
_SIGNATURE_ITEMS = re.compile(r"^\s*\|\s*(op_decl|rule_decl|judge_decl|enum_decl)\s*$\n?", re.M)


@cache
def program_grammar() -> str:
    from gsrlang.resources import grammar_path

    text = grammar_path().read_text(encoding="utf-8")
    text = _SIGNATURES.sub("", text)
    text = _SIGNATURE_ITEMS.sub("", text)
    # the contextual-lexer trick for label lists: a lookahead regex and its comment
    text = re.sub(r"^//[^\n]*\n//[^\n]*told apart by what follows it[^\n]*\n", "", text, flags=re.M)
    text = re.sub(r"^LABELS_OPEN[^\n]*\n", "", text, flags=re.M)
    text = text.replace("NAME LABELS_OPEN label", 'NAME "{" label')
    text = re.sub(r"\s*->\s*[a-z_][a-z0-9_]*", "", text)          # aliases
    text = re.sub(r"^\?([a-z_])", r"\1", text, flags=re.M)          # ?rule: inline markers
    text = re.sub(r"^(\s*)\?([a-z_]+:)", r"\1\2", text, flags=re.M)
    text = re.sub(r"^([A-Z_]+)\.\d+:", r"\1:", text, flags=re.M)     # terminal priorities
    # strings: the one-line form only (the triple-quoted one needs a lookahead)
    text = re.sub(r"^STRING:.*$", lambda m: r'STRING: /"(?:[^"\\\n]|\\.)*"/', text, flags=re.M)
    header = ("// The .gsr program grammar for constrained decoding, derived from gsrlang's grammar/gsr.lark.\n")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("// The grammar of")
                     and "LALR" not in line and "reference; every construct" not in line)
    return header + body.strip() + "\n"


def grammar_extra_body(field: str = "structured_outputs") -> dict:
    """The request's extra body that hands the program grammar to the server."""
    if field == "structured_outputs":
        return {"structured_outputs": {"grammar": program_grammar()}}
    if field == "guided_grammar":
        return {"guided_grammar": program_grammar()}
    raise ValueError(f"unknown grammar field {field!r}; known: {', '.join(GRAMMAR_FIELDS)}")
