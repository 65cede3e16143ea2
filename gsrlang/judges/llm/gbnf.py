"""GBNF, the grammar language of llama.cpp's constrained decoding, written by code.

Two things are turned into GBNF here, never by hand:

* a judgment's JSON Schema (:func:`schema_gbnf`), for servers that take a grammar but no
  JSON Schema (the ``grammar`` step of structured-output negotiation); only the shapes
  :class:`gsrlang.judges.llm.prompts.AnswerSpec` produces are covered (objects with fixed
  properties, strings, string enums, numbers, booleans, arrays, ``anyOf``);
* a regular expression of a Lark terminal (:func:`regex_gbnf`), used by
  :mod:`gsrlang.compiler.grammar` to translate the program grammar. Python's own regex
  parser reads the pattern, so every construct either translates or raises
  :class:`GBNFError` (lookarounds and backreferences have no GBNF form).

GBNF rule names allow letters, digits and ``-`` only: :func:`rule_name` maps the rest.
"""

from __future__ import annotations

import json
import re

try:  # Python >= 3.11
    import re._constants as _c
    import re._parser as _p
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

__all__ = ["GBNFError", "literal", "regex_gbnf", "rule_name", "schema_gbnf"]


class GBNFError(ValueError):
    """A construct with no GBNF form."""


def rule_name(name: str) -> str:
    """A GBNF-legal rule name (letters, digits, ``-``) for a grammar's symbol name."""
    return re.sub(r"[^A-Za-z0-9-]", "-", name).strip("-") or "r"


_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}  # the control characters GBNF writes with a backslash


def literal(text: str) -> str:
    """A GBNF string literal."""
    return '"' + "".join("\\" + ch if ch in '"\\' else _ESCAPES.get(ch, ch) for ch in text) + '"'


def _class_char(code: int) -> str:
    """A character inside ``[...]``; llama.cpp knows few escapes (backslash, quote, brackets, t, r, n, xHH)."""
    ch = chr(code)
    if ch in "]\\[":
        return "\\" + ch
    if ch in "-^\f\v":
        return f"\\x{code:02X}"
    return _ESCAPES.get(ch, ch)


_CATEGORIES = {
    _c.CATEGORY_DIGIT: ("0-9", False),
    _c.CATEGORY_NOT_DIGIT: ("0-9", True),
    _c.CATEGORY_SPACE: (" \\t\\n\\r\\x0C\\x0B", False),
    _c.CATEGORY_NOT_SPACE: (" \\t\\n\\r\\x0C\\x0B", True),
    _c.CATEGORY_WORD: ("A-Za-z0-9_", False),
    _c.CATEGORY_NOT_WORD: ("A-Za-z0-9_", True),
}


def _charset(items) -> str:
    negate = False
    parts = []
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            parts.append(_class_char(av))
        elif op is _c.RANGE:
            parts.append(f"{_class_char(av[0])}-{_class_char(av[1])}")
        elif op is _c.CATEGORY:
            body, neg = _CATEGORIES[av]
            if neg:
                raise GBNFError("a negated category inside a character class")
            parts.append(body)
        else:
            raise GBNFError(f"character-class item {op}")
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def _seq(items, bound: int | None = None) -> str:
    return " ".join(p for p in (_node(op, av, bound) for op, av in items) if p) or '""'


def _node(op, av, bound: int | None = None) -> str:
    if op is _c.LITERAL:
        return literal(chr(av))
    if op is _c.NOT_LITERAL:
        return "[^" + _class_char(av) + "]"
    if op is _c.ANY:
        return "[^\\n]"
    if op is _c.IN:
        return _charset(av)
    if op is _c.CATEGORY:
        body, neg = _CATEGORIES[av]
        return "[" + ("^" if neg else "") + body + "]"
    if op is _c.SUBPATTERN:
        return "(" + _seq(av[-1], bound) + ")"
    if op is _c.BRANCH:
        return "(" + " | ".join(_seq(alt, bound) for alt in av[1]) + ")"
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
        lo, hi, sub = av
        if hi == _c.MAXREPEAT and bound is not None:
            hi = max(lo, bound)
        inner = _seq(sub, bound)
        inner = inner if len(sub) == 1 and sub[0][0] in (_c.IN, _c.LITERAL, _c.SUBPATTERN, _c.ANY, _c.BRANCH, _c.CATEGORY) else f"({inner})"
        suffix = {(0, _c.MAXREPEAT): "*", (1, _c.MAXREPEAT): "+", (0, 1): "?"}.get((lo, hi))
        bounds = str(lo) + ("," if hi == _c.MAXREPEAT else "," + str(hi) if hi != lo else "")
        return inner + (suffix or "{" + bounds + "}")
    raise GBNFError(f"the regex construct {op} (lookaround, anchor or backreference)")


def regex_gbnf(pattern: str, bound: int | None = None) -> str:
    """A GBNF expression matching what the Python regex ``pattern`` matches (see the module doc);
    with ``bound``, unbounded repetitions (``*``, ``+``) stop at ``bound`` (so a small model that
    loops inside a string still ends)."""
    return _seq(_p.parse(pattern), bound)


# ---- JSON Schema -> GBNF (the judgment shapes) ------------------------------------------------------------

_WS = 'ws ::= [ \\t\\n]{0,8}'
_STRING = 'string ::= "\\"" ( [^"\\\\\\n] | "\\\\" ["\\\\/bfnrt] ){0,600} "\\""'
_NUMBER = 'number ::= "-"? [0-9]{1,8} ("." [0-9]{1,6})?'


def _value(schema: dict, rules: dict[str, str], name: str) -> str:
    if "anyOf" in schema:
        return "(" + " | ".join(_value(s, rules, f"{name}-{i}") for i, s in enumerate(schema["anyOf"])) + ")"
    if "enum" in schema:
        return "(" + " | ".join(literal(json.dumps(v)) for v in schema["enum"]) + ")"
    if "const" in schema:
        return literal(json.dumps(schema["const"]))
    typ = schema.get("type")
    if typ == "object":
        rules[name] = _object(schema, rules, name)
        return name
    if typ == "array":
        item = _value(schema.get("items", {"type": "string"}), rules, name + "-item")
        return f'"[" ws ({item} ws ("," ws {item} ws){{0,7}})? "]"'
    if typ == "string":
        return "string"
    if typ in ("number", "integer"):
        return "number"
    if typ == "boolean":
        return '("true" | "false")'
    raise GBNFError(f"a JSON Schema of type {typ!r}")


def _object(schema: dict, rules: dict[str, str], name: str) -> str:
    props = schema.get("properties") or {}
    parts = [('"," ws ' if i else "") + f"{literal(json.dumps(key))} ws \":\" ws "
             f"{_value(sub, rules, rule_name(f'{name}-{key}'))} ws" for i, (key, sub) in enumerate(props.items())]
    return '"{" ws ' + " ".join(parts) + ' "}"'


def schema_gbnf(schema: dict) -> str:
    """A GBNF grammar whose sentences are JSON objects of ``schema``, properties in the schema's order."""
    rules: dict[str, str] = {}
    lines = [f"root ::= ws {_object(schema, rules, 'obj')} ws"]  # filling `rules` first
    lines += [f"{k} ::= {v}" for k, v in rules.items()]
    lines += [_WS, _STRING, _NUMBER]
    return "\n".join(lines) + "\n"
