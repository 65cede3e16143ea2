"""Completion: what can be typed at the cursor, read from the text before it.

While a line is being typed the document rarely parses, and the parser's recovery
drops a broken declaration whole, so the context comes from a tolerant scan of the
text before the cursor (strings, comments, brackets), not from the syntax tree:
inside `weighted_mean(` it offers the call's ports and parameters not given yet
(with their types); after `on_abstain:` the enum's members; after `items: [` or
`node x =` the declared names (those whose type fits the port first) and the
operators; after `rule.` the rules; in a `task` block its settings and their
values; in a criterion's body its keywords; at the start of a line the
declaration keywords. Types and imported names come from the last analysis.
"""

from __future__ import annotations

import re
from pathlib import Path

from lsprotocol import types

from gsrlang.lang import records, tasks
from gsrlang.lang.catalog import OperatorSig, ParamSig, PortSig, default_catalog, param_text
from gsrlang.lang.check.judgekinds import judge_kinds
from gsrlang.lang.resources import stdlib_dir
from gsrlang.lang.span import Span
from gsrlang.lang.types import BOOL, SCORE, Pattern, matches, substitute
from gsrlang.lsp import knowledge
from gsrlang.lsp.hover import describe_judge_kind, describe_signature
from gsrlang.lsp.model import DocumentModel
from gsrlang.lsp.positions import PositionMap

_TOKEN = re.compile(r'''
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"""(?:[^"\\]|\\.|"(?!""))*(?:"""|\Z) | "(?:[^"\\\n]|\\.)*(?:"|(?=\n)|\Z))
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>\.\.|->|.)
''', re.X | re.S)

_OPEN, _CLOSE = "([{", ")]}"
_DECL_KEYWORDS = ("rubric", "fragment", "import", "task", "criterion", "node", "sink")


@records.frozen
class Tok:
    kind: str  # name | number | string | punct
    text: str
    start: int
    end: int


def tokenize(text: str) -> tuple[list[Tok], str | None]:
    """The significant tokens of `text`, and "comment" or "string" when `text` ends inside one."""
    out: list[Tok] = []
    inside = None
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        inside = None
        if kind == "ws":
            continue
        if kind == "comment":
            inside = "comment"
            continue
        value = m.group()
        if kind == "string":
            closed = len(value) >= 6 and value.startswith('"""') and value.endswith('"""') or \
                not value.startswith('"""') and len(value) >= 2 and value.endswith('"') and not value.endswith('\\"')
            if not closed and m.end() == len(text):
                inside = "string"
        out.append(Tok(kind, value, m.start(), m.end()))
    if out and text and text[-1] == "\n" and inside == "comment":
        inside = None
    return out, inside


class _Ctx:
    def __init__(self, model: DocumentModel, offset: int, positions: PositionMap, snippets: bool):
        self.model, self.catalog, self.positions, self.snippets = model, model.catalog, positions, snippets
        before = model.text[:offset]
        self.tokens, self.inside = tokenize(before)
        self.offset = self.prefix_start = offset
        if self.tokens and self.tokens[-1].kind == "name" and self.tokens[-1].end == offset:
            self.prefix_start = self.tokens[-1].start
            self.tokens = self.tokens[:-1]
        self.replace = positions.range(Span(self.prefix_start, offset))
        self.line_start = before.rfind("\n") + 1
        self.declaring = None  # the node whose value is being typed: not offered (it would be a cycle)
        for i in range(len(self.tokens) - 3, -1, -1):
            t = self.tokens[i]
            if t.text in _DECL_KEYWORDS:
                if t.text == "node" and self.tokens[i + 1].kind == "name" and self.tokens[i + 2].text == "=":
                    self.declaring = self.tokens[i + 1].text
                break

    def item(self, label: str, kind, detail: str | None = None, doc: str | None = None, insert: str | None = None,
             snippet: str | None = None, sort: str = "5") -> types.CompletionItem:
        text, fmt = insert if insert is not None else label, None
        if snippet is not None and self.snippets:
            text, fmt = snippet, types.InsertTextFormat.Snippet
        return types.CompletionItem(
            label=label, kind=kind, detail=detail, sort_text=f"{sort}{label}", insert_text_format=fmt,
            documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value=doc) if doc else None,
            text_edit=types.TextEdit(range=self.replace, new_text=text))


def complete(model: DocumentModel, offset: int, positions: PositionMap, snippets: bool = False
             ) -> list[types.CompletionItem]:
    c = _Ctx(model, offset, positions, snippets)
    if c.inside == "comment":
        return []
    toks = c.tokens
    if c.inside == "string":
        return _import_paths(c, toks[-1]) if len(toks) >= 2 and toks[-2].text == "import" else []
    if len(toks) >= 2 and toks[-1].text == "." and toks[-2].text == "rule":
        return _rules(c)
    if stack := _open_brackets(toks):
        at = stack[-1]
        opener = toks[at].text
        if opener == "(":
            return _in_call(c, toks, at)
        if opener == "[":
            return _in_list(c, toks, stack)
        return _in_braces(c, toks, at)
    return _top_level(c, toks)


def _open_brackets(toks: list[Tok]) -> list[int]:
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.kind != "punct":
            continue
        if t.text in _OPEN:
            stack.append(i)
        elif t.text in _CLOSE:
            want = _OPEN[_CLOSE.index(t.text)]
            while stack and toks[stack[-1]].text != want:
                stack.pop()  # an unclosed bracket inside: give up on it
            if stack:
                stack.pop()
    return stack


def _segment(toks: list[Tok], at: int) -> tuple[list[Tok], list[Tok]]:
    """After the opener at `at` (the innermost unclosed one): the tokens at its own depth, and the
    tokens of the argument being typed (since the last comma at that depth)."""
    depth, top, current = 0, [], []
    for t in toks[at + 1:]:
        if t.kind == "punct" and t.text in _OPEN:
            depth += 1
        elif t.kind == "punct" and t.text in _CLOSE:
            depth -= 1
        elif depth == 0:
            top.append(t)
            if t.text == ",":
                current = []
                continue
        current.append(t)
    return top, current


def _callee(toks: list[Tok], at: int) -> tuple[str | None, str]:
    """The name called by the `(` at `at` and whether it is an operator, a rule or a procedure."""
    if at == 0 or toks[at - 1].kind != "name":
        return None, ""
    name = toks[at - 1].text
    if at >= 3 and toks[at - 2].text == "." and toks[at - 3].text == "rule":
        return name, "rule"
    if at >= 2 and toks[at - 2].text in ("=", "judge", "[", ",") and name != "rule" and \
            name in default_catalog().judges:
        return name, "procedure"
    return name, "operator"


def _in_call(c: _Ctx, toks: list[Tok], at: int) -> list[types.CompletionItem]:
    name, what = _callee(toks, at)
    if name is None:
        return []
    top, current = _segment(toks, at)
    given = {a.text for a, b in zip(top, top[1:]) if a.kind == "name" and b.text == ":"}  # the named arguments
    owner = name
    if what == "operator":
        sig = c.catalog.operator(name)
        if sig is None:
            return []
        args: list[PortSig | ParamSig] = [*sig.ports, *sig.params]
    elif what == "rule":
        rule = c.catalog.rules.get(name)
        if rule is None:
            return []
        args, owner = list(rule.params), f"rule.{name}"
    else:
        kind = c.catalog.judges.get(name)
        args = list(kind.params) if kind is not None else []
    if not current:  # the start of an argument: its name (or, first, a positional port's value)
        items = [_argument_item(c, a, owner) for a in args if a.name not in given]
        if what == "operator" and not top and sig.ports:
            items += _values(c, sig.ports[0].pattern, sort="6")
        return items
    if len(current) == 2 and current[0].kind == "name" and current[1].text == ":":
        arg = next((a for a in args if a.name == current[0].text), None)
        if isinstance(arg, PortSig):
            return _values(c, arg.item_pattern) if not arg.is_list else \
                [c.item("[ ]", types.CompletionItemKind.Snippet, f"the slots of {arg.name}", insert="[",
                        snippet="[$1]$0", sort="0"), *_values(c, arg.item_pattern, sort="6")]
        if isinstance(arg, ParamSig):
            return _param_values(c, arg)
    return []


def _in_list(c: _Ctx, toks: list[Tok], stack: list[int]) -> list[types.CompletionItem]:
    at = stack[-1]
    below = stack[-2] if len(stack) > 1 else None
    if below is not None and toks[below].text == "(":
        name, what = _callee(toks, below)
        if what == "operator" and at >= 2 and toks[at - 1].text == ":" and toks[at - 2].kind == "name":
            sig = c.catalog.operator(name or "")
            port = sig.port(toks[at - 2].text) if sig else None
            if port is not None:
                return _values(c, port.item_pattern)
        return []
    return _procedures(c) if at >= 1 and toks[at - 1].text == "judges" else []


def _in_braces(c: _Ctx, toks: list[Tok], at: int) -> list[types.CompletionItem]:
    head = toks[at - 2].text if at >= 2 else ""
    if head == "task":
        mode = toks[at - 1].text
        _, current = _segment(toks, at)
        if len(current) >= 2 and current[-1].text == "=" and current[-2].kind == "name":
            return _setting_values(c, current[-2].text)
        given = {a.text for a, b in zip(current, current[1:]) if a.kind == "name" and b.text == "="}
        return [c.item(key, types.CompletionItemKind.Property, s.form, s.about, insert=f"{key} = ")
                for key, s in tasks.SETTINGS.items() if s.mode == mode and key not in given]
    # a criterion's body: `criterion NAME: TYPE [= PROC] {`
    decl = _last_keyword(toks[:at])
    labels = at >= 2 and toks[at - 1].text in ("Ordinal", "Nominal") and toks[at - 2].text == ":"
    if decl != "criterion" or labels:
        return []
    last = toks[-1].text
    if last == "judge":
        return _procedures(c)
    if last == "aggregate":
        return [c.item(name, types.CompletionItemKind.EnumMember, "aggregate", about)
                for name, about in knowledge.AGGREGATES.items()]
    if last in knowledge.BODY_KEYWORDS or last in ("->", "because", "=", "-"):
        return []
    return [c.item(k, types.CompletionItemKind.Keyword, form, about, insert=k + " ")
            for k, (form, about) in knowledge.BODY_KEYWORDS.items()]


def _last_keyword(toks: list[Tok]) -> str | None:
    return next((t.text for t in reversed(toks) if t.kind == "name" and t.text in _DECL_KEYWORDS), None)


def _top_level(c: _Ctx, toks: list[Tok]) -> list[types.CompletionItem]:
    last = toks[-1].text if toks else ""
    at_line_start = not c.model.text[c.line_start:c.prefix_start].strip()
    if last == "sink" or (last == "=" and len(toks) >= 3 and toks[-3].text == "node"):
        return _values(c, None, exclude=toks[-2].text if last == "=" else None)
    if last == ":" and len(toks) >= 3 and toks[-3].text == "criterion":
        return [c.item(t, types.CompletionItemKind.TypeParameter, None, knowledge.TYPES.get(t.split("[")[0]
                .split("{")[0].rstrip("?"), ("", ""))[1] or None) for t in knowledge.JUDGMENT_TYPE_SNIPPETS]
    if last == "=" and _last_keyword(toks) == "criterion":
        return _procedures(c)
    if last == "task":
        return [c.item(m, types.CompletionItemKind.Keyword, None, about, insert=m + " ")
                for m, about in tasks.MODES.items()]
    return [c.item(k, types.CompletionItemKind.Keyword, form, about, insert=k + " ")
            for k, (form, about) in knowledge.KEYWORDS.items()] if at_line_start or not toks else []


# ---- item makers ---------------------------------------------------------------------------------------------
def _argument_item(c: _Ctx, a: PortSig | ParamSig, owner: str) -> types.CompletionItem:
    if isinstance(a, PortSig):
        return c.item(a.name, types.CompletionItemKind.Field, f"port {a.name}: {a.pattern}", f"a port of `{owner}`",
                      insert=f"{a.name}: ", snippet=f"{a.name}: [$1]" if a.is_list else None, sort="0")
    return c.item(a.name, types.CompletionItemKind.Property, f"parameter {param_text(a)}", f"a parameter of `{owner}`",
                  insert=f"{a.name}: ", sort="1" if a.required else "2")


def _values(c: _Ctx, pattern: Pattern | None, sort: str = "0", exclude: str | None = None
            ) -> list[types.CompletionItem]:
    """Declared names (those whose type fits `pattern` first), then the operators."""
    items = []
    semantic = c.model.semantic
    for name, decl in c.model.declarations.items():
        if name == exclude or name == c.declaring:
            continue
        jtype = semantic.type_of(name)
        fits = pattern is None or jtype is None or _fits(pattern, jtype)
        kind = types.CompletionItemKind.Variable if decl.kind == "node" else types.CompletionItemKind.Field
        detail = f"{decl.kind} {name}" + (f": {jtype}" if jtype is not None else "")
        items.append(c.item(name, kind, detail, sort=sort if fits else "7"))
    for op in c.catalog.operators.values():
        fits = pattern is None or any(_fits(pattern, t) for t in _result_examples(op))
        items.append(c.item(op.name, types.CompletionItemKind.Function, op.signature(), describe_signature(op),
                            insert=f"{op.name}(", snippet=_call_snippet(op.name, op.ports, op.params),
                            sort="3" if fits else "8"))
    return items


def _fits(pattern: Pattern, jtype) -> bool:
    try:
        return matches(pattern, jtype, {})
    except Exception:
        return True


def _result_examples(op: OperatorSig):
    t = substitute(op.result, {})
    return (t,) if t is not None else (BOOL, SCORE)


def _call_snippet(name: str, ports, params) -> str:
    # a lone port is written positionally, as the language reference does: `normalize(x)`, `default(x, ...)`
    parts = [f"${i}" if len(ports) == 1 and not p.is_list else f"{p.name}: " + (f"[${i}]" if p.is_list else f"${i}")
             for i, p in enumerate(ports, 1)]
    parts += [f"{p.name}: ${i}" for i, p in enumerate((p for p in params if p.required), len(ports) + 1)]
    return f"{name}({', '.join(parts)})$0"


def _param_values(c: _Ctx, p: ParamSig) -> list[types.CompletionItem]:
    pattern = p.pattern
    if pattern.kind == "enum":
        enum = c.catalog.enums.get(pattern.name)
        return [c.item(m, types.CompletionItemKind.EnumMember, f"{enum.name}.{m}", enum.doc or None,
                       sort="0" if m != p.default else "1") for m in enum.members] if enum is not None else []
    return [c.item(v, types.CompletionItemKind.Value, "Bool") for v in ("true", "false")] \
        if pattern.kind == "bool" else []


def _setting_values(c: _Ctx, key: str) -> list[types.CompletionItem]:
    setting = tasks.SETTINGS.get(key)
    items = [c.item(v, types.CompletionItemKind.EnumMember, f"{key} = {v}", about)
             for v, about in (setting.values if setting else ()) if not (key == "quantize" and v == "thresholds")]
    if key == "quantize":
        items.append(c.item("thresholds", types.CompletionItemKind.Function, "thresholds(c1, c2, ...)",
                            "explicit cut points in [0, 1], one between each two native scores",
                            insert="thresholds(", snippet="thresholds($1)$0"))
    return items


def _rules(c: _Ctx) -> list[types.CompletionItem]:
    return [c.item(r.name, types.CompletionItemKind.Function, r.signature(), describe_signature(r),
                   insert=f"{r.name}(", snippet=_call_snippet(r.name, (), r.params)) for r in c.catalog.rules.values()]


def _procedures(c: _Ctx) -> list[types.CompletionItem]:
    return [c.item(name, types.CompletionItemKind.Module, kind.use_text(), describe_judge_kind(kind), insert="rule.")
            if name == "rule" else
            c.item(name, types.CompletionItemKind.Function, kind.use_text(), describe_judge_kind(kind))
            for name, kind in judge_kinds(c.catalog).items()]


def _import_paths(c: _Ctx, string: Tok) -> list[types.CompletionItem]:
    rng = c.positions.range(Span(string.start + 1, c.offset))  # what is typed of the path, after the quote
    fragments = stdlib_dir() / "fragments"
    found = ["std/fragments/" + p.name for p in (sorted(fragments.glob("*.gsr")) if fragments.is_dir() else ())]
    if c.model.path:
        here = Path(c.model.path).parent
        found += [p.relative_to(here).as_posix() for p in sorted(here.rglob("*.gsr"))[:200]
                  if p.resolve() != Path(c.model.path).resolve()]
    return [types.CompletionItem(label=f, kind=types.CompletionItemKind.File,
                                 text_edit=types.TextEdit(range=rng, new_text=f)) for f in found]


__all__ = ["complete", "tokenize"]
