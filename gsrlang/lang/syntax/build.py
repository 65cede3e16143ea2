"""The AST, built during the parse: Lark's LALR parser calls one callback per grammar rule as it reduces.

Lark's usual route builds a parse tree first (with `propagate_positions`, a position record per
node) and a Transformer then walks it into the AST: two passes and two objects per node, most of a
large file's parse time. Here each reduction calls its rule's callback with the values it reduces
(tokens, and what the callbacks of its sub-rules returned), and the callback returns the AST node.

What a handler receives is what a Lark Transformer would receive (Lark's `ChildFilter`): anonymous
tokens (keywords, brackets) are dropped, an optional `[x]` that did not match gives None
(`maybe_placeholders`), the values of rules named `_x` (and of Lark's helper rules for `x*`) are
spliced into their parent's, and a `?rule` with one value is that value. Spans are what
`propagate_positions` gave: from the start of the rule's first token to the end of its last, anonymous
tokens included (comments and whitespace are not tokens).

Spans are offsets into the whole file: a declaration parsed on its own during error recovery starts at
`base`, which `parsing(base)` sets for the thread that parses.
"""

from __future__ import annotations

import math
import re
import threading

import attrs

from gsrlang.lang.diagnostics import Diagnostic, error
from gsrlang.lang.span import Span
from gsrlang.lang.syntax import ast

MAX_INT = 2**63 - 1  # integer literals fit a signed 64-bit integer, as in most languages and JSON tools


class BadLiteral(Exception):
    """A number literal out of range (GSR006): its declaration is dropped, like one with a syntax error."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _State(threading.local):
    """What one thread's parse needs besides the text: where the parsed text starts in the file, the comments
    the lexer met, and the first out-of-range number (reported only when the text parses: a syntax error
    in the same declaration wins, as when the AST was built after the parse)."""

    base = 0
    comments: list | None = None
    bad: BadLiteral | None = None


state = _State()


def on_comment(token):
    """Lark's lexer callback for COMMENT tokens (ignored by the grammar, kept for the formatter and docs)."""
    if state.comments is not None:
        state.comments.append(token)
    return token


# ---- positions --------------------------------------------------------------------------------------------
class _Part:
    """What a rule that is not a node passes up to its parent: its values (spliced in for `_x` rules and
    Lark's `x*` helpers, given as a tuple for list rules such as `args`) and the offsets it covers."""

    __slots__ = ("items", "lo", "hi")

    def __init__(self, items, lo: int, hi: int):
        self.items, self.lo, self.hi = items, lo, hi


def _lo(value, base: int) -> int:
    """Where a reduced value starts in the file: a token (relative to the parsed text; tokens are the only strings
    reduced), a _Part or a node."""
    cls = value.__class__
    return value.lo if cls is _Part else value.start_pos + base if isinstance(value, str) else value.span.start


def _hi(value, base: int) -> int:
    cls = value.__class__
    return value.hi if cls is _Part else value.end_pos + base if isinstance(value, str) else value.span.end


# ---- callbacks ---------------------------------------------------------------------------------------------
def callbacks(rules) -> dict:
    """The callback of each of the parser's rules (those its parse tree builder made callbacks for), keyed by the
    parse table's own `Rule` objects (found by identity: Lark looks one up per reduction)."""
    return {rule: _callback(rule) for rule in rules}


def _plan(rule) -> tuple[tuple[tuple[int, str, int], ...], int]:
    """Which reduced values a handler receives (Lark's ChildFilter): (index, how, Nones before it) for each
    kept value, how being "splice" (an inlined rule's values), "seq" (a list rule's tuple) or "value";
    and the Nones after the last one."""
    symbols = rule.expansion
    marks = rule.options.empty_indices
    # where an unmatched [x] stood: one None each
    nones = [len(run) for run in "".join("1" if m else "0" for m in marks).split("0")] if marks else \
        [0] * (len(symbols) + 1)
    plan, pending = [], 0
    for i, symbol in enumerate(symbols):
        pending += nones[i]
        if symbol.is_term and symbol.filter_out:
            continue
        how = "value" if symbol.is_term else ("splice" if symbol.name.startswith("_") else
                                               "seq" if symbol.name in _SEQUENCES else "value")
        plan.append((i, how, pending))
        pending = 0
    return tuple(plan), pending + nones[len(symbols)]


def _callback(rule):
    """A rule's callback: the module's items (`start`), a _Part (inlined and list rules), the value itself (a
    `?rule` alternative of one symbol) or the node its handler builds. Fails at load for a rule without one."""
    if rule.options.keep_all_tokens:
        raise ValueError(f"rule {rule.origin.name}: `!` rules are not supported")
    plan, trailing = _plan(rule)
    name = rule.origin.name
    if name == "start":
        return _gather(plan, trailing, lambda items, lo, hi: tuple(items))
    if name.startswith("_"):
        return _gather(plan, trailing, _Part)
    handler_name = rule.alias or name
    if rule.options.expand1 and not rule.alias:
        if len(rule.expansion) != 1 or len(plan) != 1 or trailing or plan[0][2] or plan[0][1] != "value":
            raise ValueError(f"rule ?{name}: an alternative without an alias must be a single symbol")
        return lambda values: values[0]  # `?rule` with one value: that value, where it stands
    handler = _HANDLERS.get(handler_name)
    if handler is None:
        raise ValueError(f"no AST handler for grammar rule {handler_name!r}")
    if handler_name in _SEQUENCES:
        return _gather(plan, trailing, lambda items, lo, hi: _Part(handler(Span(lo, hi), *items), lo, hi))
    return _gather(plan, trailing, lambda items, lo, hi: handler(Span(lo, hi), *items))


def _gather(plan, trailing, make):
    """The callback: the kept values of a reduction, in order, with the span they cover, handed to `make`.
    Most rules keep plain values, some with Nones for unmatched `[x]`: those get a one-line callback."""
    if plan and all(how == "value" for _, how, _ in plan):
        layout = tuple(j for i, _, nones in plan for j in (*[None] * nones, i)) + (None,) * trailing

        if None not in layout:
            def callback(values):
                base = state.base
                return make([values[i] for i in layout], _lo(values[0], base), _hi(values[-1], base))
        else:
            def callback(values):
                base = state.base
                return make([None if i is None else values[i] for i in layout],
                            _lo(values[0], base), _hi(values[-1], base))
        return callback

    def callback(values):
        base = state.base
        items = []
        for i, how, nones in plan:
            if nones:
                items += [None] * nones
            value = values[i]
            if how == "splice":
                if items:
                    items += value.items
                else:  # left recursion (`x*` helpers): extend the list in place
                    items = value.items
            elif how == "seq":
                items.append(value.items)
            else:
                items.append(value)
        if trailing:
            items += [None] * trailing
        if not values:
            return make(items, base, base)
        return make(items, _lo(values[0], base), _hi(values[-1], base))
    return callback


# ---- handlers: the kept values of a rule, and its span, to an AST node ----------------------------------------
_SEQUENCES = frozenset({"criterion_body", "dotted_name", "args", "type_params", "ports", "params"})


def _t(tok) -> Span:
    base = state.base
    return Span(tok.start_pos + base, tok.end_pos + base)


def _ident(tok) -> ast.Ident:
    return ast.Ident(str(tok), span=_t(tok))


def _string(tok) -> ast.String | None:
    return None if tok is None else ast.String(_unescape(str(tok)), span=_t(tok))


def _number(tok) -> ast.Number:
    span = _t(tok)
    return ast.Number(number_value(str(tok), span), span=span)


# each rule's node: one expression of its values
_HANDLERS: dict = {
    # structure
    "header": lambda span, kind, name, description:
        ast.Header(str(kind), _ident(name), _string(description), span=span),
    "import_decl": lambda span, path: ast.ImportDecl(_string(path), span=span),
    "task_decl": lambda span, mode, *settings: ast.TaskDecl(_ident(mode), settings, span=span),
    "setting": lambda span, key, value: ast.Setting(_ident(key), value, span=span),
    # criteria
    "criterion_decl": lambda span, name, type_, procedure, body:
        ast.CriterionDecl(_ident(name), type_, procedure, body, span=span),
    "criterion_body": lambda span, *items: items,
    "ports": lambda span, *items: items,
    "params": lambda span, *items: items,
    "ask": lambda span, text: ast.Ask(_string(text), span=span),
    "level": lambda span, key, text, value: ast.Level(key, _string(text), value, span=span),
    "key_int": lambda span, tok: _number(tok),
    "key_name": lambda span, tok: _ident(tok),
    "key_true": lambda span: ast.BoolLit(True, span=span),
    "true": lambda span: ast.BoolLit(True, span=span),
    "key_false": lambda span: ast.BoolLit(False, span=span),
    "false": lambda span: ast.BoolLit(False, span=span),
    "example": lambda span, text, verdict, reason: ast.Example(_string(text), verdict, _string(reason), span=span),
    "judge": lambda span, procedure: ast.JudgeClause(procedure, span=span),
    "judges_samples": lambda span, count, aggregate: ast.Judges(_number(count), (), aggregate, span=span),
    # the aggregate comes last; a trailing comma after the procedures leaves a None before it
    "judges_list": lambda span, *rest:
        ast.Judges(None, tuple(r for r in rest[:-1] if r is not None), rest[-1], span=span),
    "procedure": lambda span, name, args: ast.Procedure(name, args, span=span),
    "dotted_name": lambda span, *parts: tuple(_ident(p) for p in parts),
    "type_params": lambda span, *parts: tuple(_ident(p) for p in parts),
    # the graph
    "node_decl": lambda span, name, value: ast.NodeDecl(_ident(name), value, span=span),
    "sink_decl": lambda span, value: ast.SinkDecl(value, span=span),
    "ref": lambda span, tok: ast.Ref(_ident(tok), span=_t(tok)),
    "call": lambda span, name, args: ast.Call(_ident(name), args or (), span=span),
    "args": lambda span, *args: tuple(a for a in args if a is not None),
    "kwarg": lambda span, name, value: ast.Arg(_ident(name), value, span=span),
    "posarg": lambda span, value: ast.Arg(None, value, span=span),
    "list_expr": lambda span, *items: ast.ListExpr(tuple(i for i in items if i is not None), span=span),
    "map_expr": lambda span, *entries: ast.MapExpr(tuple(e for e in entries if e is not None), span=span),
    "entry": lambda span, key, value:
        ast.Entry({"NAME": _ident, "STRING": _string}.get(key.type, _number)(key), value, span=span),
    # literals
    "number": lambda span, sign, tok:
        ast.Number(-number_value(str(tok), _t(tok)) if sign else number_value(str(tok), _t(tok)), span=span),
    "string": lambda span, tok: _string(tok),
    "range": lambda span, lo, hi: ast.Range(lo, hi, span=span),
    "tunable": lambda span, value, lo, hi:
        ast.Number(value.value, tune=ast.Range(lo, hi, span=lo.span.cover(hi.span)), span=span),
    # types
    "type_expr": lambda span, *atoms: ast.TypeExpr(atoms, span=span),
    "type_atom": lambda span, base, optional: attrs.evolve(base, optional=optional is not None, span=span),
    "t_name": lambda span, name: ast.TypeAtom("name", _ident(name), span=span),
    "t_range": lambda span, name, lo, hi:
        ast.TypeAtom("range", _ident(name), range=ast.Range(lo, hi, span=lo.span.cover(hi.span)), span=span),
    "t_any_range": lambda span, name: ast.TypeAtom("any_range", _ident(name), span=span),
    "t_labels": lambda span, name, _open, *labels:
        ast.TypeAtom("labels", _ident(name), labels=tuple(_ident(t) for t in labels if t is not None), span=span),
    "t_list": lambda span, element: ast.TypeAtom("list", element=element, span=span),
    "t_map": lambda span, key, value: ast.TypeAtom("map", _ident(key), element=value, span=span),
    # signatures
    "op_decl": lambda span, kind, name, type_params, ports, params, result:
        ast.OpDecl(str(kind), _ident(name), type_params or (), ports or (), params or (), result, span=span),
    "rule_decl": lambda span, name, params, result: ast.RuleDecl(_ident(name), params or (), result, span=span),
    "judge_decl": lambda span, name, params: ast.JudgeDecl(_ident(name), params or (), span=span),
    "port_decl": lambda span, name, type_: ast.PortDecl(_ident(name), type_, span=span),
    "param_decl": lambda span, name, type_, per, default:
        ast.ParamDecl(_ident(name), type_, _ident(per) if per is not None else None, default, span=span),
    "enum_decl": lambda span, name, *members:
        ast.EnumDecl(_ident(name), tuple(_ident(m) for m in members if m is not None), span=span),
}


# ---- literals -------------------------------------------------------------------------------------------------
def number_value(text: str, span: Span) -> int | float:
    """The value of an INT or FLOAT token. Out of range (integers beyond MAX_INT, checked on the digits so that
    a 5,000-digit literal is never converted; numbers that overflow a float; nonzero numbers that underflow to
    0): the first such literal of the parse is kept in `state.bad`, and 0 stands in for it."""
    if "." not in text and "e" not in text.lower():
        digits = text.lstrip("0")
        if len(digits) <= len(str(MAX_INT)) and int(digits or "0") <= MAX_INT:
            return int(text)
        return _bad(error("GSR006", "integer literal out of range", span,
                          f"more than {MAX_INT:,}" if len(digits) < 40 else f"{len(digits):,} digits",
                          help="integers are signed 64-bit; write a decimal (`1.5e20`) for a large amount"))
    value = float(text)
    if math.isinf(value):
        return _bad(error("GSR006", "number literal out of range", span, "too large for a 64-bit float",
                          help="the largest number is about 1.8e308"))
    if value == 0.0 and re.split("[eE]", text)[0].strip("0.") != "":  # a nonzero mantissa
        return _bad(error("GSR006", "number literal out of range", span, "too small: it would read as 0",
                          help="the smallest nonzero number is about 5e-324; write 0 if you mean zero"))
    return value


def _bad(diagnostic: Diagnostic) -> int:
    if state.bad is None:
        state.bad = BadLiteral(diagnostic)
    return 0


def _unescape(raw: str) -> str:
    body = raw[3:-3] if raw.startswith('"""') else raw[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body, flags=re.S)
