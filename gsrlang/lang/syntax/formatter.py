"""The canonical layout of `.gsr` files (`gsr fmt`).

`format_source(text)` parses and reprints a file; `format_module(module, source)`
reprints an already parsed module (`source` is the text it was parsed from: comments,
blank lines and the quoting of multi-line strings are read from it). A file with
syntax errors is never formatted: `format_source` raises `FormatError` with the
parser's diagnostics.

The rules (docs/formatting-and-json.md lists them for users):

- Declarations keep the author's order; only their layout is normalised. A blank
  line separates two declarations of different kinds (header, imports, tasks,
  criteria, nodes, sink; in the stdlib operator, rule and enum signatures); within
  a run of one kind, a blank line the author left is kept (several collapse to
  one), as black and rustfmt do.
- Indentation is two spaces; lines aim at 100 columns.
- A call (operator, procedure), a list and a mapping stay on one line when they
  fit; otherwise they break one argument (item, entry) per line, each followed by
  a comma, the closing bracket on its own line. Inner calls are tried on one
  line again at their own indentation, so only what must break breaks.
- A criterion body is multi-line, one item per line, two spaces in; the one
  exception is a body whose only item is an `ask` that fits on the criterion's
  line: `criterion c: Bool { ask "..." }`. An empty body is `{}`.
- A task is `task pointwise { scale = 1..5  quantize = round }` (settings two
  spaces apart, as in the language reference) when it fits, else one setting per
  line.
- Stdlib signatures (`transform`, `reduce`, `gate`, `rule`, `enum`) are printed on
  one line whatever their length: their grammar has no trailing commas to break on,
  and the catalogue reads best one signature per line.
- Numbers are printed from their value (`0.7`, `600`, `-0.3`, `1e-05`; an integer
  stays an integer, a decimal stays a decimal); strings are re-escaped; a string
  that contains a newline and was written `\"\"\"triple-quoted\"\"\"` stays
  triple-quoted, its lines kept verbatim.
- Comments are kept, each where it was: a comment on the line of an element
  (declaration, criterion body item, task setting, call argument, list item, map
  entry) trails it (`x,  # why`: two spaces before `#`); a comment on its own line
  leads the next element, at its indentation; a comment after the last element of
  a bracketed group stays before the closing bracket; a comment right after an
  opening bracket stays there. A comment in a place that has no line of its own
  (inside a type, between a keyword and a name) moves up above its element. A
  comment anywhere inside a call, list or body makes it break. Comment text is kept
  as written, less trailing blanks. Comments at the end of the file stay there.
- Output ends with exactly one newline and uses `\\n` line endings; trailing blanks
  are removed (except inside triple-quoted strings).

Guarantees, checked by tests/test_properties.py: formatting is idempotent, and
`parse(format(x)).module == parse(x).module` (the AST ignores layout).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Callable, Sequence

from gsrlang.lang import records
from gsrlang.lang.diagnostics import Diagnostic
from gsrlang.lang.syntax import ast
from gsrlang.lang.syntax.literals import format_literal

WIDTH = 100
INDENT = "  "

Lines = list[str]  # the first line continues the text before it; the others are complete lines


class FormatError(Exception):
    """The text has syntax errors, so it is not formatted; `diagnostics` says where."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        self.diagnostics = tuple(diagnostics)
        first = self.diagnostics[0] if self.diagnostics else None
        detail = f": {first.code} {first.message}" if first else ""
        more = f" (and {len(self.diagnostics) - 1} more)" if len(self.diagnostics) > 1 else ""
        super().__init__(f"cannot format a file with syntax errors{detail}{more}")


def format_source(text: str) -> str:
    """The canonical layout of a `.gsr` text. Raises FormatError when the text does not parse."""
    from gsrlang.lang.syntax.parser import parse

    result = parse(text)
    if result.diagnostics:
        raise FormatError(result.diagnostics)
    return format_module(result.module, text)


def format_module(module: ast.Module, source: str) -> str:
    """The canonical layout of a parsed module; `source` is the text it was parsed from."""
    return _Printer(module, source).run()


# ---- where comments go ---------------------------------------------------------------------------------
@records.frozen
class _Box:
    """A bracketed group whose elements may go one per line: call arguments, list items, a body..."""

    key: tuple
    open: int | None  # offset of the opening bracket (None: the file itself)
    close: int  # offset of the closing bracket
    children: tuple


class _Printer:
    def __init__(self, module: ast.Module, source: str):
        self.module = module
        self.src = source
        self.leading: dict[int, list[ast.Comment]] = defaultdict(list)
        self.trailing: dict[int, list[ast.Comment]] = defaultdict(list)
        self.opening: dict[tuple, ast.Comment] = {}
        self.dangling: dict[tuple, list[ast.Comment]] = defaultdict(list)
        self.broken: set[tuple] = set()  # groups that must break (a comment inside)

    # ---- entry ----
    def run(self) -> str:
        comments = sorted(self.module.comments, key=lambda c: c.span.start)
        self._distribute(comments, _Box(("module",), None, len(self.src), tuple(self.module.items)), [])
        return self._module()

    # ---- source helpers ----
    def _next_token(self, pos: int) -> int:
        """The offset of the next character that is neither blank nor inside a comment."""
        src, n = self.src, len(self.src)
        while pos < n:
            ch = src[pos]
            if ch in " \t\r\n\f":
                pos += 1
            elif ch == "#":
                end = src.find("\n", pos)
                pos = n if end == -1 else end
            else:
                return pos
        return n

    def _blank_above(self, pos: int) -> bool:
        """Is there an empty line between `pos` and the text before it?"""
        src = self.src
        k = min(pos, len(src)) - 1
        while k >= 0 and src[k] in " \t\r\n\f":
            k -= 1
        return k >= 0 and src.count("\n", k + 1, pos) >= 2

    def _same_line(self, a: int, b: int) -> bool:
        return "\n" not in self.src[a:b]

    # ---- boxes of each element ----
    def _boxes(self, e) -> list[_Box]:
        if isinstance(e, (ast.Call, ast.ListExpr, ast.MapExpr)) or isinstance(e, ast.Procedure) and e.args:
            _, key, children, _, _ = self._group(e)
            name = e.op if isinstance(e, ast.Call) else e.name[-1] if isinstance(e, ast.Procedure) else None
            return [_Box(key, self._next_token(name.span.end) if name else e.span.start, e.span.end - 1, children)]
        if isinstance(e, (ast.Arg, ast.Entry, ast.Setting, ast.NodeDecl, ast.SinkDecl)):
            return self._boxes(e.value)
        if isinstance(e, ast.Example):
            return self._boxes(e.verdict)
        if isinstance(e, ast.JudgeClause):
            return self._boxes(e.procedure)
        if isinstance(e, ast.Judges):
            boxes = []
            if e.procedures:
                open_ = self._next_token(e.span.start + len("judges"))
                close = self._next_token(e.procedures[-1].span.end)
                if self.src[close:close + 1] == ",":
                    close = self._next_token(close + 1)
                boxes.append(_Box((id(e), "judges"), open_, close, e.procedures))
            return boxes + self._boxes(e.aggregate)
        if isinstance(e, ast.TaskDecl):
            return [_Box((id(e), "settings"), self._next_token(e.mode.span.end), e.span.end - 1, e.settings)]
        if isinstance(e, ast.CriterionDecl):
            boxes = self._boxes(e.procedure) if e.procedure is not None else []
            if e.body is not None:
                after = max(e.type.span.end, e.procedure.span.end if e.procedure is not None else 0)
                boxes.append(_Box((id(e), "body"), self._next_token(after), e.span.end - 1, e.body))
            return boxes
        return []

    def _distribute(self, comments: list[ast.Comment], box: _Box, path: list[tuple]) -> None:
        """Attach each comment inside `box` to one of its children, or to the box itself."""
        here = [*path, box.key]
        children = box.children
        starts = [c.span.start for c in children]
        inside: dict[int, list[ast.Comment]] = defaultdict(list)
        for c in comments:
            i = bisect.bisect_right(starts, c.span.start) - 1  # the last child starting before the comment
            if i >= 0 and c.span.start < children[i].span.end:
                inside[i].append(c)
                continue
            prev = children[i] if i >= 0 else None
            nxt = children[i + 1] if i + 1 < len(children) else None
            if prev is None and box.open is not None and self._same_line(box.open + 1, c.span.start) \
                    and box.key not in self.opening:
                self.opening[box.key] = c
            elif prev is not None and self._same_line(prev.span.end, c.span.start):
                self.trailing[id(prev)].append(c)
            elif nxt is not None:
                self.leading[id(nxt)].append(c)
            else:
                self.dangling[box.key].append(c)
            self.broken.update(here)
        for i, cs in inside.items():
            self._descend(cs, children[i], here)

    def _descend(self, comments: list[ast.Comment], element, path: list[tuple]) -> None:
        boxes = self._boxes(element)
        groups: dict[int, list[ast.Comment]] = defaultdict(list)
        for c in comments:
            k = next((k for k, b in enumerate(boxes) if b.open is not None and b.open < c.span.start < b.close), None)
            if k is None:  # no line of its own here: it moves above the element
                self.leading[id(element)].append(c)
                self.broken.update(path)
            else:
                groups[k].append(c)
        for k, cs in groups.items():
            self._distribute(cs, boxes[k], path)

    # ---- the file ----
    def _module(self) -> str:
        out: list[str] = []
        prev_group = None
        for item in self.module.items:
            group = type(item).__name__  # a blank line between declarations of different kinds
            forced = prev_group is not None and group != prev_group
            self._emit_element(out, item, self._item(item), forced, at_start=not out)
            prev_group = group
        for c in self.dangling.get(("module",), ()):
            if out and self._blank_above(c.span.start):
                out.append("")
            out.append(_comment(c))
        return "\n".join(out) + "\n" if out else ""

    def _emit_element(self, out: list[str], element, lines: Lines, forced: bool, at_start: bool,
                      indent: str = "", blanks: bool = True) -> None:
        """Leading comments, the element's lines with its trailing comment; blank lines kept (at most one)."""
        start = element.span.start
        entries: list[tuple[bool, list[str]]] = []
        leading = self.leading.get(id(element), ())
        moved = False
        for c in leading:
            if c.span.start < start:
                blank = self._blank_above(c.span.start)
            else:  # a comment from inside the element
                blank = not entries and self._blank_above(start)
                moved = True
            entries.append((blank, [indent + _comment(c)]))
        blank = self._blank_above(start) if not moved else (not entries and self._blank_above(start))
        body = [indent + lines[0], *lines[1:]]
        for c in self.trailing.get(id(element), ()):
            body[-1] += "  " + _comment(c)
        entries.append((blank, body))
        for k, (blank, chunk) in enumerate(entries):
            if not at_start and ((blank and blanks) or (k == 0 and forced)):
                out.append("")
            out.extend(chunk)
            at_start = False

    def _item(self, item) -> Lines:
        if isinstance(item, ast.Header):
            head = f"{item.kind} {item.name.name}"
            return _join([head], [" "], self._string(item.description)) if item.description else [head]
        if isinstance(item, ast.ImportDecl):
            return _join(["import "], self._string(item.path))
        if isinstance(item, ast.TaskDecl):
            return self._task(item)
        if isinstance(item, ast.CriterionDecl):
            return self._criterion(item)
        if isinstance(item, ast.NodeDecl):
            head = f"node {item.name.name} = "
            return _join([head], self._expr(item.value, 0, len(head), 0))
        if isinstance(item, ast.SinkDecl):
            return _join(["sink "], self._expr(item.value, 0, 5, 0))
        if isinstance(item, ast.OpDecl):
            tp = f"<{', '.join(t.name for t in item.type_params)}>" if item.type_params else ""
            inside = ", ".join(f"{p.name.name}: {_type(p.type)}" for p in item.ports)
            if item.params:
                inside += "; " + ", ".join(self._param_decl(p) for p in item.params)
            return [f"{item.kind} {item.name.name}{tp}({inside}) -> {_type(item.result)}"]
        if isinstance(item, ast.RuleDecl):
            params = ", ".join(self._param_decl(p) for p in item.params)
            return [f"rule {item.name.name}({params}) -> {_type(item.result)}"]
        if isinstance(item, ast.JudgeDecl):
            return [f"judge {item.name.name}({', '.join(self._param_decl(p) for p in item.params)})"]
        if isinstance(item, ast.EnumDecl):
            return [f"enum {item.name.name} {{ {', '.join(m.name for m in item.members)} }}"]
        raise TypeError(f"cannot format {type(item).__name__}")  # pragma: no cover

    def _param_decl(self, p: ast.ParamDecl) -> str:
        text = f"{p.name.name}: {_type(p.type)}"
        if p.per is not None:
            text += f" per {p.per.name}"
        if p.default is not None:
            text += " = " + "\n".join(self._expr(p.default, 0, 0, 0))
        return text

    # ---- tasks and criteria ----
    def _task(self, task: ast.TaskDecl) -> Lines:
        head = f"task {task.mode.name} {{"
        key = (id(task), "settings")
        if key not in self.broken:
            if not task.settings:
                return [head + "}"]
            flat = [self._flat(s) for s in task.settings]
            if None not in flat and len(line := head + " " + "  ".join(flat) + " }") <= WIDTH:
                return [line]
        return self._block(head, key, task.settings, "}", 0, self._labelled, sep="", blanks=False)

    def _criterion(self, c: ast.CriterionDecl) -> Lines:
        head = [f"criterion {c.name.name}: {_type(c.type)}"]
        if c.procedure is not None:
            tail = 2 if c.body is not None else 0  # the ` {` after it
            head = _join(head, [" = "], self._procedure(c.procedure, 0, len(head[0]) + 3, tail))
        if c.body is None:
            return head
        key = (id(c), "body")
        if key not in self.broken:
            if not c.body:
                return _join(head, [" {}"])
            if len(c.body) == 1 and isinstance(c.body[0], ast.Ask):
                flat = self._flat(c.body[0])
                if flat is not None and len(head[-1]) + len(flat) + 5 <= WIDTH:
                    return _join(head, [f" {{ {flat} }}"])
        return _join(head, self._block(" {", key, c.body, "}", 0, self._body_item, sep="", blanks=True))

    def _body_item(self, item, indent: int, col: int, tail: int) -> Lines:
        if isinstance(item, ast.Ask):
            return _join(["ask "], self._string(item.text))
        if isinstance(item, ast.Level):
            lines = _join([f"level {self._key(item.key)} "], self._string(item.text))
            return _join(lines, [f" = {self._leaf(item.value)}"]) if item.value is not None else lines
        if isinstance(item, ast.Example):
            lines = _join(["example "], self._string(item.text), [" -> "])
            lines = _join(lines, self._expr(item.verdict, indent, _col(lines, col), 0))
            return _join(lines, [" because "], self._string(item.reason)) if item.reason is not None else lines
        if isinstance(item, ast.JudgeClause):
            return _join(["judge "], self._procedure(item.procedure, indent, col + 6, tail))
        if isinstance(item, ast.Judges):
            if item.count is not None:
                lines = [f"judges {format_literal(item.count.value)} aggregate "]
            else:
                key = (id(item), "judges")
                parts = [self._flat(p) for p in item.procedures] if key not in self.broken else [None]
                aggregate = self._flat(item.aggregate)
                if None not in parts and aggregate is not None:
                    line = "judges [" + ", ".join(parts) + "] aggregate " + aggregate
                    if col + len(line) + tail <= WIDTH:
                        return [line]
                lines = _join(self._block("judges [", key, item.procedures, "]", indent, self._procedure),
                              [" aggregate "])
            return _join(lines, self._procedure(item.aggregate, indent, _col(lines, col), tail))
        raise TypeError(f"cannot format {type(item).__name__}")  # pragma: no cover

    def _procedure(self, p: ast.Procedure, indent: int, col: int, tail: int) -> Lines:
        return [self._bare_procedure(p)] if not p.args else self._expr(p, indent, col, tail)

    # ---- expressions ----
    def _expr(self, e, indent: int, col: int, tail: int) -> Lines:
        """`e` starting at column `col`, with `tail` characters to follow on its last line."""
        flat = self._flat(e)
        if flat is not None and col + len(flat) + tail <= WIDTH:
            return [flat]
        if (group := self._group(e)) is not None:
            head, key, children, close, render = group
            return self._block(head, key, children, close, indent, render)
        if isinstance(e, ast.String):
            return self._string(e)
        return [flat if flat is not None else self._leaf(e)]

    def _group(self, e) -> tuple | None:
        """A bracketed expression's opening text, key, children, closing bracket and child renderer; else None."""
        if isinstance(e, (ast.Call, ast.Procedure)):
            name = e.op.name if isinstance(e, ast.Call) else e.dotted
            return name + "(", (id(e), "args"), e.args, ")", self._labelled
        if isinstance(e, ast.ListExpr):
            return "[", (id(e), "items"), e.items, "]", self._expr
        if isinstance(e, ast.MapExpr):
            return "{", (id(e), "entries"), e.entries, "}", self._labelled
        return None

    def _head(self, e: ast.Arg | ast.Entry | ast.Setting) -> str:
        """What comes before an argument's, an entry's or a setting's value: `name: `, `key: `, `key = `."""
        if isinstance(e, ast.Arg):
            return f"{e.name.name}: " if e.name is not None else ""
        return f"{self._key(e.key)}: " if isinstance(e, ast.Entry) else f"{e.key.name} = "

    def _labelled(self, e: ast.Arg | ast.Entry | ast.Setting, indent: int, col: int, tail: int) -> Lines:
        head = self._head(e)
        return _join([head], self._expr(e.value, indent, col + len(head), tail))

    def _block(self, head: str, key: tuple, children, close: str, indent: int,
               render: Callable, sep: str = ",", blanks: bool = False) -> Lines:
        """`head`, then one child per line (each followed by `sep`), then `close` on its own line."""
        lines = [head]
        if (opening := self.opening.get(key)) is not None:
            lines[0] += "  " + _comment(opening)
        inner = INDENT * (indent + 1)
        body: list[str] = []
        for child in children:
            child_lines = render(child, indent + 1, len(inner), len(sep))
            child_lines[-1] += sep
            self._emit_element(body, child, child_lines, forced=False, at_start=not body, indent=inner,
                               blanks=blanks)
        for c in self.dangling.get(key, ()):
            if blanks and body and self._blank_above(c.span.start):
                body.append("")
            body.append(inner + _comment(c))
        return lines + body + [INDENT * indent + close]

    def _flat(self, e) -> str | None:
        """`e` on one line, or None when it must break (a comment or a multi-line string inside)."""
        if isinstance(e, ast.Procedure) and not e.args:
            return self._bare_procedure(e)
        if (group := self._group(e)) is not None:
            head, key, children, close, _ = group
            parts = [self._flat(c) for c in children] if key not in self.broken else [None]
            return None if None in parts else head + ", ".join(parts) + close
        if isinstance(e, (ast.Arg, ast.Entry, ast.Setting)):
            value = self._flat(e.value)
            return None if value is None else self._head(e) + value
        if isinstance(e, ast.Ask):
            text = self._string(e.text)
            return None if len(text) > 1 else f"ask {text[0]}"
        if isinstance(e, ast.String):
            text = self._string(e)
            return None if len(text) > 1 else text[0]
        return self._leaf(e)

    def _bare_procedure(self, p: ast.Procedure) -> str:
        """`llm`, or `rule.json_valid()` when the author wrote the (empty) parentheses."""
        after = self._next_token(p.name[-1].span.end)
        return p.dotted + "()" if after < p.span.end and self.src[after] == "(" else p.dotted

    def _leaf(self, e) -> str:
        if isinstance(e, ast.Ref):
            return e.name.name
        if isinstance(e, ast.Number):
            return format_literal(e.value) + (f" in {self._leaf(e.tune)}" if e.tune is not None else "")
        if isinstance(e, ast.BoolLit):
            return "true" if e.value else "false"
        if isinstance(e, ast.Range):
            return f"{format_literal(e.lo.value)}..{format_literal(e.hi.value)}"
        if isinstance(e, ast.String):
            return "\n".join(self._string(e))
        raise TypeError(f"cannot format {type(e).__name__}")  # pragma: no cover

    def _key(self, k) -> str:
        if isinstance(k, ast.String):
            return string_literal(k.value)
        if isinstance(k, ast.Ident):
            return k.name
        return self._leaf(k)

    def _string(self, s: ast.String) -> Lines:
        value = s.value
        if "\n" in value and self.src[s.span.start:s.span.start + 3] == '"""':
            return string_literal(value, triple=True).split("\n")
        return [string_literal(value)]


def string_literal(value: str, triple: bool = False) -> str:
    """A string as `.gsr` source: quoted with escapes, or triple-quoted (lines verbatim) when `triple`."""
    return '"""' + _escape_triple(value) + '"""' if triple else format_literal(value).replace("\t", "\\t")


def _escape_triple(value: str) -> str:
    # a backslash doubled; a `"` escaped before another `"` or before the closing quotes
    return "".join("\\\\" if ch == "\\" else '\\"' if ch == '"' and value[i + 1:i + 2] in ("", '"') else ch
                   for i, ch in enumerate(value))


def _join(*parts: Lines) -> Lines:
    """Concatenate multi-line pieces: each piece's first line continues the previous piece's last line."""
    out = list(parts[0])
    for p in parts[1:]:
        out[-1] += p[0]
        out.extend(p[1:])
    return out


def _col(lines: Lines, col: int) -> int:
    """The column after `lines`, the first of which started at `col`."""
    return col + len(lines[0]) if len(lines) == 1 else len(lines[-1])


def _comment(c: ast.Comment) -> str:
    return c.text.rstrip()


# ---- types -------------------------------------------------------------------------------------------
def _type(t: ast.TypeExpr) -> str:
    return " | ".join(type_atom_text(a) for a in t.options)


def type_atom_text(a: ast.TypeAtom) -> str:
    """One option of a type as `.gsr` source: `Score[0..10]?`, `Ordinal{poor, fair}`, `[Score]`."""
    if a.form == "list":
        s = f"[{_type(a.element)}]"
    elif a.form == "map":
        s = f"{{{a.name.name}: {_type(a.element)}}}"
    elif a.form == "range":
        s = f"{a.name.name}[{format_literal(a.range.lo.value)}..{format_literal(a.range.hi.value)}]"
    elif a.form == "any_range":
        s = f"{a.name.name}[*]"
    elif a.form == "labels":
        s = a.name.name + "{" + ", ".join(lab.name for lab in a.labels) + "}"
    else:
        s = a.name.name
    return s + ("?" if a.optional else "")
