"""The only module that touches Lark: text in, typed AST and diagnostics out.

One LALR parser is built once (and its tables cached on disk by Lark). Syntax
errors are collected, several per file: when the whole file does not parse, it is
cut at each top-level declaration keyword and every piece is parsed on its own
(panic-mode recovery), so one broken declaration does not hide the next.
"""

from __future__ import annotations

import contextlib
import gc
import math
import re
import threading
from functools import cache

import attrs
import lark
from lark import Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from gsrlang.diagnostics import Diagnostic, Label, error
from gsrlang.resources import grammar_path
from gsrlang.span import SourceText, Span
from gsrlang.syntax import ast

MAX_SOURCE_CHARS = 8_000_000
MAX_NESTING = 64
MAX_INT = 2**63 - 1  # integer literals fit a signed 64-bit integer, as in most languages and JSON tools

_comments = threading.local()


def _on_comment(token: Token):
    sink = getattr(_comments, "sink", None)
    if sink is not None:
        sink.append(token)
    return token


@cache
def _parser() -> lark.Lark:
    return lark.Lark(
        grammar_path().read_text(encoding="utf-8"),
        parser="lalr",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,
        lexer_callbacks={"COMMENT": _on_comment},
    )


@attrs.frozen
class ParseResult:
    module: ast.Module
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return not self.diagnostics


# ---- public entry points ---------------------------------------------------------------------------------
def decode_source(data: bytes) -> tuple[str | None, Diagnostic | None]:
    """Bytes to text, or a diagnostic for binary content and invalid UTF-8."""
    if b"\x00" in data[:8192]:
        at = data.index(b"\x00")
        return None, error("GSR003", "file is binary, not .gsr text", Span(0, 0),
                           f"NUL byte at byte offset {at}", help="check the path: .gsr files are UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[: exc.start].decode("utf-8")
        return None, error("GSR003", "file is not valid UTF-8", Span(len(good), len(good)),
                           f"invalid byte 0x{data[exc.start]:02x} here", help="save the file as UTF-8")
    if text.startswith("\ufeff"):
        text = " " + text[1:]  # keep offsets; a BOM is harmless
    return text, None


def lossy_text(data: bytes) -> str:
    """The text of undecodable bytes, for showing where a GSR003 points (bad bytes become U+FFFD)."""
    return data.replace(b"\x00", b" ").decode("utf-8", errors="replace")


@contextlib.contextmanager
def gc_paused():
    """Parsing and checking allocate many small objects and no reference cycles worth collecting; pausing the
    cyclic GC keeps the cost per node flat (with it on, gen-2 passes make a 10,000-node check 2.5x slower)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse(text: str) -> ParseResult:
    with gc_paused():
        return _parse(text)


def _parse(text: str) -> ParseResult:
    if len(text) > MAX_SOURCE_CHARS:
        return ParseResult(ast.Module((), span=Span(0, 0)), (error(
            "GSR004", f"file is too large ({len(text):,} characters; the limit is {MAX_SOURCE_CHARS:,})",
            Span(0, 0), help="split the rubric into fragments and import them"),))
    deep = _nesting_error(text)
    if deep:
        return ParseResult(ast.Module((), span=Span(0, len(text))), (deep,))
    try:
        module = _parse_piece(text, 0)
        return ParseResult(module, ())
    except (UnexpectedInput, _BadLiteral):
        pass
    return _parse_with_recovery(text)


# ---- recovery --------------------------------------------------------------------------------------------
_DECL_START = re.compile(
    r"^[ \t]*(?:rubric|fragment|import|task|criterion|node|sink|transform|reduce|gate|rule|enum)(?=[ \t])", re.M)


def _parse_with_recovery(text: str) -> ParseResult:
    starts = [m.start() for m in _DECL_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    items, comments, diagnostics = [], [], []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        piece = text[start:end]
        try:
            module = _parse_piece(piece, start)
        except UnexpectedInput as exc:
            diagnostics.append(_syntax_diagnostic(exc, text, start, end))
            continue
        except _BadLiteral as exc:
            diagnostics.append(exc.diagnostic)
            continue
        items.extend(module.items)
        comments.extend(module.comments)
    return ParseResult(ast.Module(tuple(items), tuple(comments), span=Span(0, len(text))), tuple(diagnostics))


def _parse_piece(text: str, base: int) -> ast.Module:
    found: list[Token] = []
    _comments.sink = found
    try:
        tree = _parser().parse(text)
    finally:
        _comments.sink = None
    try:
        module = _ToAst(base, len(text)).transform(tree)
    except VisitError as exc:  # Lark wraps what a transformer raises
        if isinstance(exc.orig_exc, _BadLiteral):
            raise exc.orig_exc from None
        raise
    comments = tuple(ast.Comment(str(t), span=Span(t.start_pos + base, t.end_pos + base)) for t in found)
    module = attrs.evolve(module, comments=comments)
    return _attach_docs(module, text, base)


def _attach_docs(module: ast.Module, text: str, base: int) -> ast.Module:
    """Comment lines directly above a signature (no blank line between) become its documentation."""
    if not module.comments:
        return module
    src = SourceText("", text)
    own_line: dict[int, str] = {}  # line -> text of a comment that is alone on its line
    for c in module.comments:
        line, col = src.line_col(c.span.start - base)
        if not src.line_text(line)[:col].strip():
            own_line[line] = c.text.lstrip("#").strip()
    items = []
    for item in module.items:
        if isinstance(item, (ast.OpDecl, ast.RuleDecl, ast.JudgeDecl, ast.EnumDecl)):
            line = src.line_col(item.span.start - base)[0] - 1
            lines = []
            while line in own_line:
                lines.append(own_line[line])
                line -= 1
            item = attrs.evolve(item, doc="\n".join(reversed(lines)))
        items.append(item)
    return attrs.evolve(module, items=tuple(items))


def _nesting_error(text: str) -> Diagnostic | None:
    depth = 0
    for m in _BRACKETS.finditer(text):
        ch = m.group("b")
        if ch is None:
            continue
        if ch in "([{":
            depth += 1
            if depth > MAX_NESTING:
                return error("GSR004", f"expression nested too deeply (more than {MAX_NESTING} levels)",
                             Span(m.start(), m.end()), "this bracket is too deep",
                             help="name intermediate results with `node NAME = ...` declarations")
        elif ch in ")]}":
            depth = max(0, depth - 1)
    return None


# strings and comments are matched (and skipped) so that brackets inside them do not count
_BRACKETS = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|"(?:[^"\\\n]|\\.)*"|#[^\n]*|(?P<b>[\[\](){}])')


# ---- syntax error messages ----------------------------------------------------------------------------
# Named terminals; Lark's anonymous ones (`__ANON_n`, numbered in an order the grammar does not fix) are
# described by their own pattern, read from the parser.
_TOKEN_NAMES = {
    "NAME": "a name", "STRING": "a string", "INT": "an integer", "FLOAT": "a number", "SIGN": "'-'",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'",
    "LABELS_OPEN": "'{'", "COMMA": "','", "COLON": "':'", "SEMICOLON": "';'", "EQUAL": "'='",
    "QMARK": "'?'", "OPTIONAL": "'?'", "VBAR": "'|'", "DOT": "'.'", "MORETHAN": "'>'", "LESSTHAN": "'<'",
    "STAR": "'*'", "$END": "end of file",
}


def _describe_expected(names) -> str:
    described = set()
    for name in names:
        if name in _TOKEN_NAMES:
            described.add(_TOKEN_NAMES[name])
        elif name.isupper() and not name.startswith("__"):
            described.add(f"`{name.lower()}`")
        else:
            pattern = _parser().get_terminal(name).pattern.value if name.startswith("__") else name
            described.add(f"'{pattern}'")
    ordered = sorted(described)
    if len(ordered) > 6:
        return ", ".join(ordered[:6]) + f" or one of {len(ordered) - 6} more"
    if len(ordered) > 1:
        return ", ".join(ordered[:-1]) + " or " + ordered[-1]
    return ordered[0] if ordered else "something else"


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    value = str(tok)
    if len(value) > 20:
        value = value[:17] + "..."
    return f"`{value}`"


def _unclosed_bracket(text: str, start: int, end: int) -> int | None:
    """Offset of the first bracket opened in text[start:end] and never closed there."""
    stack = []
    for m in _BRACKETS.finditer(text, start, end):
        ch = m.group("b")
        if ch is None:
            continue
        if ch in "([{":
            stack.append(m.start())
        elif ch in ")]}" and stack:
            stack.pop()
    return stack[0] if stack else None


_CLOSER = {"(": ")", "[": "]", "{": "}"}


def _syntax_diagnostic(exc: UnexpectedInput, text: str, base: int, end: int | None = None) -> Diagnostic:
    """A diagnostic for a syntax error in the declaration text[base:end]."""
    end = len(text) if end is None else end
    if isinstance(exc, UnexpectedCharacters):
        at = exc.pos_in_stream + base
        ch = text[at] if at < len(text) else ""
        if ch == '"':
            end = text.find("\n", at)
            end = len(text) if end == -1 else end
            return error("GSR002", "unterminated string", Span(at, end), "this string has no closing quote",
                         help='close it with `"` on the same line, or use a """triple-quoted""" string')
        return error("GSR002", f"unexpected character {ch!r}", Span(at, at + 1), "not part of the language",
                     help=_char_help(ch))
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        expected = _describe_expected(exc.expected)
        if tok.type == "$END":
            at = len(text[:end].rstrip())
            opened = _unclosed_bracket(text, base, end)
            last = end >= len(text.rstrip())
            what = "file" if last else "declaration"
            if opened is not None:
                ch = text[opened]
                return error("GSR001", f"unclosed `{ch}`", Span(opened, opened + 1), "opened here",
                             secondary=[Label(Span(at, at), f"the {what} ends here without `{_CLOSER[ch]}`")],
                             help=f"add the matching `{_CLOSER[ch]}`")
            return error("GSR001", f"unexpected end of {what}, expected {expected}", Span(at, at),
                         f"the {what} ends here")
        start = tok.start_pos + base
        return error("GSR001", f"expected {expected}, found {_describe_token(tok)}",
                     Span(start, start + max(1, len(str(tok)))), f"unexpected {_describe_token(tok)}")
    if isinstance(exc, UnexpectedEOF):
        at = len(text)
        return error("GSR001", "unexpected end of file", Span(at, at), "file ends here")
    return error("GSR001", "syntax error", Span(base, base), str(exc).splitlines()[0])  # pragma: no cover


def _char_help(ch: str) -> str | None:
    return {
        "'": 'strings use double quotes: "like this"',
        "/": "comments start with `#`",
        ";": "declarations need no `;`; separate arguments with `,`",
        "=": "did you mean `:` (arguments are written `name: value`)?",
    }.get(ch)


# ---- Lark tree -> AST -------------------------------------------------------------------------------------
class _BadLiteral(Exception):
    """A number literal out of range (GSR006): its declaration is dropped, like one with a syntax error."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def _number_value(text: str, span: Span) -> int | float:
    """The value of an INT or FLOAT token, or _BadLiteral: integers beyond MAX_INT (checked on the digits, so a
    5,000-digit literal is never converted), numbers that overflow a float, nonzero numbers that underflow to 0."""
    if "." not in text and "e" not in text.lower():
        digits = text.lstrip("0")
        if len(digits) <= len(str(MAX_INT)) and int(digits or "0") <= MAX_INT:
            return int(text)
        raise _BadLiteral(error("GSR006", "integer literal out of range", span,
                                f"more than {MAX_INT:,}" if len(digits) < 40 else f"{len(digits):,} digits",
                                help="integers are signed 64-bit; write a decimal (`1.5e20`) for a large amount"))
    value = float(text)
    if math.isinf(value):
        raise _BadLiteral(error("GSR006", "number literal out of range", span, "too large for a 64-bit float",
                                help="the largest number is about 1.8e308"))
    mantissa = re.split("[eE]", text)[0]
    if value == 0.0 and mantissa.strip("0.") != "":
        raise _BadLiteral(error("GSR006", "number literal out of range", span, "too small: it would read as 0",
                                help="the smallest nonzero number is about 5e-324; write 0 if you mean zero"))
    return value


def _unescape(raw: str) -> str:
    body = raw[3:-3] if raw.startswith('"""') else raw[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body, flags=re.S)


@v_args(meta=True, inline=True)
class _ToAst(Transformer):
    def __init__(self, base: int, length: int):
        super().__init__()
        self.base = base
        self.length = length

    # positions
    def _s(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.base, self.base)
        return Span(meta.start_pos + self.base, meta.end_pos + self.base)

    def _t(self, tok: Token) -> Span:
        return Span(tok.start_pos + self.base, tok.end_pos + self.base)

    def _ident(self, tok: Token) -> ast.Ident:
        return ast.Ident(str(tok), span=self._t(tok))

    # structure
    def start(self, meta, *items):
        return ast.Module(tuple(items), span=Span(self.base, self.base + self.length))

    def header(self, meta, kind, name, description):
        return ast.Header(str(kind), self._ident(name), self._string(description), span=self._s(meta))

    def import_decl(self, meta, path):
        return ast.ImportDecl(self._string(path), span=self._s(meta))

    def task_decl(self, meta, mode, *settings):
        return ast.TaskDecl(self._ident(mode), tuple(settings), span=self._s(meta))

    def setting(self, meta, key, value):
        return ast.Setting(self._ident(key), value, span=self._s(meta))

    # criteria
    def criterion_decl(self, meta, name, type_, procedure, body):
        return ast.CriterionDecl(self._ident(name), type_, procedure, body, span=self._s(meta))

    def criterion_body(self, meta, *items):
        return tuple(items)

    def ask(self, meta, text):
        return ast.Ask(self._string(text), span=self._s(meta))

    def level(self, meta, key, text, value):
        return ast.Level(key, self._string(text), value, span=self._s(meta))

    def key_int(self, meta, tok):
        return ast.Number(_number_value(str(tok), self._t(tok)), span=self._t(tok))

    def key_name(self, meta, tok):
        return self._ident(tok)

    def key_true(self, meta):
        return ast.BoolLit(True, span=self._s(meta))

    def key_false(self, meta):
        return ast.BoolLit(False, span=self._s(meta))

    def example(self, meta, text, verdict, reason):
        return ast.Example(self._string(text), verdict, self._string(reason), span=self._s(meta))

    def judge(self, meta, procedure):
        return ast.Judge(procedure, span=self._s(meta))

    def judges_samples(self, meta, count, aggregate):
        number = ast.Number(_number_value(str(count), self._t(count)), span=self._t(count))
        return ast.Judges(number, (), aggregate, span=self._s(meta))

    def judges_list(self, meta, *rest):
        *procedures, aggregate = [r for r in rest if r is not None]
        return ast.Judges(None, tuple(procedures), aggregate, span=self._s(meta))

    def procedure(self, meta, name, args):
        return ast.Procedure(name, args, span=self._s(meta))

    def dotted_name(self, meta, *parts):
        return tuple(self._ident(p) for p in parts)

    # the graph
    def node_decl(self, meta, name, value):
        return ast.NodeDecl(self._ident(name), value, span=self._s(meta))

    def sink_decl(self, meta, value):
        return ast.SinkDecl(value, span=self._s(meta))

    def ref(self, meta, tok):
        ident = self._ident(tok)
        return ast.Ref(ident, span=ident.span)

    def call(self, meta, name, args):
        return ast.Call(self._ident(name), args or (), span=self._s(meta))

    def args(self, meta, *args):
        return tuple(a for a in args if a is not None)

    def kwarg(self, meta, name, value):
        return ast.Arg(self._ident(name), value, span=self._s(meta))

    def posarg(self, meta, value):
        return ast.Arg(None, value, span=self._s(meta))

    def list_expr(self, meta, *items):
        return ast.ListExpr(tuple(i for i in items if i is not None), span=self._s(meta))

    def map_expr(self, meta, *entries):
        return ast.MapExpr(tuple(e for e in entries if e is not None), span=self._s(meta))

    def entry(self, meta, *children):
        if len(children) == 1:  # the key was the keyword `true` or `false`: Lark drops anonymous tokens
            raise AssertionError("unreachable")  # pragma: no cover
        key, value = children
        if key.type == "NAME":
            k = self._ident(key)
        elif key.type == "STRING":
            k = self._string(key)
        elif key.type == "INT":
            k = ast.Number(_number_value(str(key), self._t(key)), span=self._t(key))
        else:
            k = ast.BoolLit(str(key) == "true", span=self._t(key))
        return ast.Entry(k, value, span=self._s(meta))

    # literals
    def number(self, meta, sign, tok):
        value = _number_value(str(tok), self._t(tok))
        return ast.Number(-value if sign else value, span=self._s(meta))

    def string(self, meta, tok):
        return self._string(tok)

    def _string(self, tok):
        if tok is None:
            return None
        return ast.String(_unescape(str(tok)), span=self._t(tok))

    def true(self, meta):
        return ast.BoolLit(True, span=self._s(meta))

    def false(self, meta):
        return ast.BoolLit(False, span=self._s(meta))

    def range(self, meta, lo, hi):
        return ast.Range(lo, hi, span=self._s(meta))

    def tunable(self, meta, value, lo, hi):
        return ast.Number(value.value, tune=ast.Range(lo, hi, span=lo.span.cover(hi.span)), span=self._s(meta))

    # types
    def type_expr(self, meta, *atoms):
        return ast.TypeExpr(tuple(atoms), span=self._s(meta))

    def type_atom(self, meta, base, optional):
        return attrs.evolve(base, optional=optional is not None, span=self._s(meta))

    def t_name(self, meta, name):
        return ast.TypeAtom("name", self._ident(name), span=self._s(meta))

    def t_range(self, meta, name, lo, hi):
        rng = ast.Range(lo, hi, span=lo.span.cover(hi.span))
        return ast.TypeAtom("range", self._ident(name), range=rng, span=self._s(meta))

    def t_any_range(self, meta, name):
        return ast.TypeAtom("any_range", self._ident(name), span=self._s(meta))

    def t_labels(self, meta, name, _open, *labels):
        return ast.TypeAtom("labels", self._ident(name),
                            labels=tuple(self._ident(t) for t in labels if t is not None), span=self._s(meta))

    def t_list(self, meta, element):
        return ast.TypeAtom("list", element=element, span=self._s(meta))

    def t_map(self, meta, key, value):
        return ast.TypeAtom("map", self._ident(key), element=value, span=self._s(meta))

    # signatures
    def op_decl(self, meta, kind, name, type_params, ports, params, result):
        return ast.OpDecl(str(kind), self._ident(name), type_params or (), ports or (), params or (), result,
                          span=self._s(meta))

    def rule_decl(self, meta, name, params, result):
        return ast.RuleDecl(self._ident(name), params or (), result, span=self._s(meta))

    def judge_decl(self, meta, name, params):
        return ast.JudgeDecl(self._ident(name), params or (), span=self._s(meta))

    def type_params(self, meta, *names):
        return tuple(self._ident(n) for n in names)

    def ports(self, meta, *ports):
        return tuple(ports)

    def port_decl(self, meta, name, type_):
        return ast.PortDecl(self._ident(name), type_, span=self._s(meta))

    def params(self, meta, *params):
        return tuple(params)

    def param_decl(self, meta, name, type_, per, default):
        return ast.ParamDecl(self._ident(name), type_, self._ident(per) if per is not None else None, default,
                             span=self._s(meta))

    def enum_decl(self, meta, name, *members):
        return ast.EnumDecl(self._ident(name), tuple(self._ident(m) for m in members if m is not None),
                            span=self._s(meta))
