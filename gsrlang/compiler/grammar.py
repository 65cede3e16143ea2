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
* `guided_grammar` (older vLLM): ``extra_body={"guided_grammar": G}``;
* `grammar` (llama.cpp, llama-cpp-python): the same grammar translated to GBNF by
  :func:`program_gbnf`, in the request's ``grammar`` field.

The GBNF translation is code too: Lark compiles the simplified grammar to plain BNF rules
and terminals, and each rule becomes a GBNF rule, each string terminal a literal and each
regex terminal the GBNF of its regex (:func:`gsrlang.judges.llm.gbnf.regex_gbnf`). Lark
skips whitespace between tokens; GBNF has no skipping, so whitespace is written into the
rules: optional before punctuation, required before a token that starts with a letter or
digit (so two words never run together into one NAME). Comments are not generated.
Repetitions are bounded (at most 16 items in a program, a criterion body, a list or an
argument list; a string of at most 160 characters, a name of 41), so a small model that
loops still ends.

Whatever the server does with it, the checker still decides.
"""

from __future__ import annotations

import re
from functools import cache

GRAMMAR_FIELDS = ("structured_outputs", "guided_grammar", "grammar")

_SIGNATURES = re.compile(r"^// ---- stdlib signatures.*?(?=^// ---- )", re.M | re.S)
_SIGNATURE_ITEMS = re.compile(r"^\s*\|\s*(op_decl|rule_decl|judge_decl|enum_decl)\s*$\n?", re.M)


@cache
def program_grammar() -> str:
    from gsrlang.lang.resources import grammar_path

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


def _wordlike(pattern) -> bool:
    """Whether a terminal can start with a letter, digit or underscore."""
    if pattern.type == "str":
        return bool(re.match(r"\w", pattern.value))
    return any(re.match(pattern.to_regexp(), probe) for probe in ("a", "A", "_", "0", "0.0", "0e1"))


REPEAT_BOUND = 16  # items of a program, a criterion body, a list, arguments: a small model that loops still ends


def _gbnf_alternatives(name: str, alternatives: list[str]) -> str:
    """A rule's alternatives in the forms llama.cpp takes: `A ::= b | A c` (Lark's expansion of repetitions)
    as `A ::= (b) (c)*`, since it rejects left recursion, and an empty alternative as `(...)?`, since an
    empty alternative at the end of a rule crashes llama-cpp-python 0.3.36's sampler."""
    own = [a[len(name):].strip() for a in alternatives if a == name or a.startswith(name + " ")]
    rest = [a for a in alternatives if not (a == name or a.startswith(name + " "))]
    nonempty = [a for a in rest if a.strip()]
    body = " | ".join(nonempty) if len(nonempty) == len(rest) else "(" + " | ".join(nonempty) + ")?"
    if own:
        body = f"({body}) (" + " | ".join(own) + "){0," + str(REPEAT_BOUND - 1) + "}"
    return body


@cache
def program_gbnf(token_bound: int = 160) -> str:
    """:func:`program_grammar` in GBNF (llama.cpp), generated from Lark's compiled rules (see the module doc)."""
    from lark import Lark

    from gsrlang.judges.llm.gbnf import literal, regex_gbnf, rule_name

    lark = Lark(program_grammar(), parser="earley", keep_all_tokens=True)
    terms = {t.name: t for t in lark.terminals}
    alternatives: dict[str, list[str]] = {}
    for rule in lark.rules:
        parts = [("ws1 " if _wordlike(terms[sym.name].pattern) else "ws ") + "t-" + rule_name(sym.name)
                 if sym.is_term else "r-" + rule_name(sym.name) for sym in rule.expansion]
        alternatives.setdefault("r-" + rule_name(rule.origin.name), []).append(" ".join(parts))
    lines = ["# The .gsr program grammar in GBNF, generated from gsrlang's grammar/gsr.lark; do not edit.",
             "root ::= r-start ws"]
    lines += [f"{name} ::= {_gbnf_alternatives(name, alts)}" for name, alts in alternatives.items()]
    for name, t in terms.items():
        if name in lark.ignore_tokens:
            continue
        bound = token_bound if name == "STRING" else 40
        body = literal(t.pattern.value) if t.pattern.type == "str" else regex_gbnf(t.pattern.value, bound)
        lines.append(f"t-{rule_name(name)} ::= {body}")
    lines += [r"ws ::= [ \t\n]{0,6}", r"ws1 ::= [ \t\n]{1,6}"]
    return "\n".join(lines) + "\n"


def grammar_extra_body(field: str = "structured_outputs") -> dict:
    """The request's extra body that hands the program grammar to the server."""
    if field == "grammar":
        return {"grammar": program_gbnf()}
    if field == "structured_outputs":
        return {"structured_outputs": {"grammar": program_grammar()}}
    if field == "guided_grammar":
        return {"guided_grammar": program_grammar()}
    raise ValueError(f"unknown grammar field {field!r}; known: {', '.join(GRAMMAR_FIELDS)}")
