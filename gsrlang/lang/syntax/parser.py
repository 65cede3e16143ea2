"""Text in, typed AST and diagnostics out (with build.py and tables.py, the only modules that touch the parser).

One LALR parser is loaded once, from the standalone parser module shipped in the package
(tables.py: Lark's generated parser, so Lark itself is not imported), and builds the AST
as it parses (build.py). Syntax errors are collected, several per file:
when the whole file does not parse, it is cut at each top-level declaration keyword and
every piece is parsed on its own (panic-mode recovery), so one broken declaration does
not hide the next.
"""

from __future__ import annotations

import contextlib
import gc
import re
from functools import cache

import attrs

from gsrlang.lang import records
from gsrlang.lang.diagnostics import Diagnostic, Label, error
from gsrlang.lang.resources import grammar_path
from gsrlang.lang.span import SourceText, Span
from gsrlang.lang.syntax import ast, build, tables
from gsrlang.lang.syntax.build import MAX_INT, BadLiteral  # noqa: F401 (MAX_INT: part of this module's interface)

MAX_SOURCE_CHARS = 8_000_000
MAX_NESTING = 64


@cache
def _runtime():
    """The parser module: the shipped one, or one generated from the grammar when that is stale (tables.py).
    Its exception and token classes are its own (never Lark's)."""
    return tables.load(grammar_path().read_text(encoding="utf-8"))


@cache
def _parser():
    """The parser (a `Lark` of the parser module); its reductions call build.py's callbacks instead of building a
    parse tree."""
    parser = _runtime().Lark_StandAlone(lexer_callbacks={"COMMENT": build.on_comment})
    driver = parser.parser.parser.parser  # Lark's LALR driver (`_Parser` of lalr_parser.py)
    driver.callbacks = build.callbacks(driver.callbacks)  # the tree builder's, one per rule, replaced
    return parser


@records.frozen
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


def parse_declaration(text: str, base: int) -> ParseResult:
    """One declaration of a file read on its own (the text from offset `base` of the file), spans in the file's
    offsets: how the catalogue reads the stdlib's signatures, one when it is first needed."""
    with gc_paused():
        try:
            return ParseResult(_parse_piece(text, base), ())
        except BadLiteral as exc:
            problem = exc.diagnostic
        except _runtime().UnexpectedInput as exc:
            problem = _syntax_diagnostic(exc, text, 0)  # (its offsets are the piece's: it names the problem)
    return ParseResult(ast.Module((), span=Span(base, base + len(text))), (problem,))


def _parse(text: str) -> ParseResult:
    if len(text) > MAX_SOURCE_CHARS:
        return ParseResult(ast.Module((), span=Span(0, 0)), (error(
            "GSR004", f"file is too large ({len(text):,} characters; the limit is {MAX_SOURCE_CHARS:,})",
            Span(0, 0), help="split the rubric into fragments and import them"),))
    if deep := _nesting_error(text):
        return ParseResult(ast.Module((), span=Span(0, len(text))), (deep,))
    try:
        return ParseResult(_parse_piece(text, 0), ())
    except (_runtime().UnexpectedInput, BadLiteral):
        return _parse_with_recovery(text)


# ---- recovery --------------------------------------------------------------------------------------------
_DECL_START = re.compile(
    r"^[ \t]*(?:rubric|fragment|import|task|criterion|node|sink|transform|reduce|gate|rule|enum)(?=[ \t])", re.M)


def _parse_with_recovery(text: str) -> ParseResult:
    starts = [m.start() for m in _DECL_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    items, comments, diagnostics = [], [], []
    unexpected = _runtime().UnexpectedInput
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        try:
            module = _parse_piece(text[start:end], start)
        except unexpected as exc:
            diagnostics.append(_syntax_diagnostic(exc, text, start, end))
            continue
        except BadLiteral as exc:
            diagnostics.append(exc.diagnostic)
            continue
        items.extend(module.items)
        comments.extend(module.comments)
    return ParseResult(ast.Module(tuple(items), tuple(comments), span=Span(0, len(text))), tuple(diagnostics))


def _parse_piece(text: str, base: int) -> ast.Module:
    """The module of text (a file, or one declaration of it that starts at offset `base`); raises Lark's
    UnexpectedInput for a syntax error, then BadLiteral for a number out of range."""
    found: list = []  # the COMMENT tokens
    state = build.state
    state.base, state.comments, state.bad = base, found, None
    try:
        items = _parser().parse(text)
        if state.bad is not None:
            raise state.bad
    finally:
        state.base, state.comments, state.bad = 0, None, None
    comments = tuple(ast.Comment(str(t), span=Span(t.start_pos + base, t.end_pos + base)) for t in found)
    return _attach_docs(ast.Module(items, comments, span=Span(base, base + len(text))), text, base)


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
        ch = m.group("b")  # None for a string or a comment
        if ch in _CLOSER:
            depth += 1
            if depth > MAX_NESTING:
                return error("GSR004", f"expression nested too deeply (more than {MAX_NESTING} levels)",
                             Span(m.start(), m.end()), "this bracket is too deep",
                             help="name intermediate results with `node NAME = ...` declarations")
        elif ch is not None:
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


def _describe_token(tok) -> str:
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
        if ch in _CLOSER:
            stack.append(m.start())
        elif ch is not None and stack:
            stack.pop()
    return stack[0] if stack else None


_CLOSER = {"(": ")", "[": "]", "{": "}"}


def _syntax_diagnostic(exc, text: str, base: int, end: int | None = None) -> Diagnostic:
    """A diagnostic for a syntax error (the parser module's UnexpectedInput) in the declaration text[base:end]."""
    end = len(text) if end is None else end
    runtime = _runtime()
    if isinstance(exc, runtime.UnexpectedCharacters):
        at = exc.pos_in_stream + base
        ch = text[at] if at < len(text) else ""
        if ch == '"':
            end = text.find("\n", at)
            end = len(text) if end == -1 else end
            return error("GSR002", "unterminated string", Span(at, end), "this string has no closing quote",
                         help='close it with `"` on the same line, or use a """triple-quoted""" string')
        return error("GSR002", f"unexpected character {ch!r}", Span(at, at + 1), "not part of the language",
                     help=_char_help(ch))
    if isinstance(exc, runtime.UnexpectedToken):
        tok = exc.token
        expected = _describe_expected(exc.expected)
        if tok.type == "$END":
            at = len(text[:end].rstrip())
            opened = _unclosed_bracket(text, base, end)
            what = "file" if end >= len(text.rstrip()) else "declaration"
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
    if isinstance(exc, runtime.UnexpectedEOF):
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
