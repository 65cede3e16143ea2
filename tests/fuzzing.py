"""Fuzzing gsr's entry points: mutators of real inputs, and one target per entry point.

Shared by tests/test_fuzz.py (hypothesis drives the mutators; a bounded run in every CI
job) and benchmarks/bench_hardening.py (crashes per 10,000 inputs per entry point).

Inputs are mutants of what users really write: the example programs (examples/**/*.gsr),
their JSON forms (`gsr export --json`), data rows, and half-typed edits of a document in
the language server. Each mutation is a small, named operation seeded by an integer, so
hypothesis can shrink a failing case to a short list of operations. The "spice" pools
hold the inputs that once crashed gsr (tests/fuzz_corpus/ keeps each one as a file).

A target returns None when the entry point handled its input, or a one-line description
of the crash: an exception that escaped, or an "internal error" (exit status 2).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").rglob("*.gsr"))

# ---- program text ------------------------------------------------------------------------------------------------
PROGRAM_SPICES = [
    "9" * 5000, "99999999999999999999", "1e400", "-1e400", "1e-400", "0.0e-999", "1" + "0" * 400 + ".5",
    "\x00", '"\x00"', 'import "a\x00b.gsr"', 'import "' + "x" * 300 + '.gsr"', 'import "std/../../x.gsr"',
    "(" * 80, ")" * 5, "[" * 70, "]", "{", "}", "node a = a", "node n1 = n0\nnode n0 = n1",
    'rule.regex(pattern: "(")', 'rule.regex(pattern: "(a)\\\\1")', 'rule.regex(pattern: "^(a+)+$")',
    "\ufeff", "\U0001f600", "\ud7ff", "criterion", "sink", "..", "?", "0.5 in 0.1..0.9", "judges 99999 aggregate",
    "level 99999999999999999999999", "task pairwise { epsilon = 1e400 }", ",", ":", "=", "#", '"""', "\r\n", "\t",
]


def _span(rnd: random.Random, text: str) -> tuple[int, int]:
    a = rnd.randrange(len(text) + 1)
    return a, min(len(text), a + rnd.randint(0, 60))


def _numbers(text: str) -> list[tuple[int, int]]:
    import re

    return [m.span() for m in re.finditer(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", text)]


def _m_delete(rnd, text):
    a, b = _span(rnd, text)
    return text[:a] + text[b:]


def _m_duplicate(rnd, text):
    a, b = _span(rnd, text)
    at = rnd.randrange(len(text) + 1)
    return text[:at] + text[a:b] + text[at:]


def _m_spice(rnd, text):
    at = rnd.randrange(len(text) + 1)
    return text[:at] + rnd.choice(PROGRAM_SPICES) + text[at:]


def _m_number(rnd, text):
    spans = _numbers(text)
    if not spans:
        return _m_spice(rnd, text)
    a, b = rnd.choice(spans)
    return text[:a] + rnd.choice(["9" * 5000, "1e400", "1e-400", "18446744073709551616", "0", "007", "1e308"]) + text[b:]


def _m_lines(rnd, text):
    lines = text.split("\n")
    i, j = rnd.randrange(len(lines)), rnd.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    if rnd.random() < 0.3:
        lines.insert(i, lines[j] * rnd.randint(2, 50))
    return "\n".join(lines)


def _m_truncate(rnd, text):
    return text[:rnd.randrange(len(text) + 1)]


def _m_aliases(rnd, text):
    """A chain of aliases, the shape that was cubic in the cycle check."""
    n = rnd.randint(50, 400)
    chain = "\n".join(f"node z{i + 1} = z{i}" for i in range(n))
    return text + f"\nnode z0 = z{n if rnd.random() < 0.5 else 1}\n" + chain + "\n"


TEXT_MUTATIONS = {f.__name__[3:]: f for f in (_m_delete, _m_duplicate, _m_spice, _m_number, _m_lines, _m_truncate,
                                             _m_aliases)}


def mutate_text(text: str, ops: list[tuple[str, int]]) -> str:
    for name, seed in ops:
        text = TEXT_MUTATIONS[name](random.Random(seed), text)
    return text


# ---- JSON forms --------------------------------------------------------------------------------------------------
def _nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


JSON_SPICES = [10 ** 400, -(10 ** 30), 2 ** 63, 1e308, -0.0, "", "x" * 1000, "a.b", "\x00", None, True, [], {},
               _nested(200), {"kind": "transform"}, "sink", "true", 0, -1, 1.5]


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _j_replace(rnd, doc):
    paths = [p for p in _paths(doc) if p]
    if not paths:
        return doc
    *parent, key = rnd.choice(paths)
    target = doc
    for k in parent:
        target = target[k]
    target[key] = json.loads(json.dumps(rnd.choice(JSON_SPICES)))
    return doc


def _j_drop(rnd, doc):
    paths = [p for p in _paths(doc) if p]
    *parent, key = rnd.choice(paths)
    target = doc
    for k in parent:
        target = target[k]
    del target[key]
    return doc


def _j_copy(rnd, doc):
    """A node's field copied onto another node (ids, inputs, anonymity: the plan's invariants)."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list) or len(nodes) < 2:
        return doc
    a, b = rnd.sample(range(len(nodes)), 2)
    if isinstance(nodes[a], dict) and isinstance(nodes[b], dict) and nodes[a]:
        key = rnd.choice(sorted(nodes[a]))
        nodes[b][key] = json.loads(json.dumps(nodes[a][key]))
    return doc


def _j_chain(rnd, doc):
    """A long chain of anonymous nodes feeding the sink (deeper than the source's brackets allow)."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list) or not nodes or not isinstance(nodes[0], dict):
        return doc
    prev = nodes[0].get("id")
    chain = []
    for i in range(rnd.randint(10, 150)):
        chain.append({"id": f"fz.{i}", "kind": "transform", "op": "not", "anonymous": True,
                      "inputs": [{"port": "x", "source": prev}]})
        prev = f"fz.{i}"
    doc["nodes"] = [nodes[0], *chain, {"id": "fz", "kind": "transform", "op": "normalize",
                                      "inputs": [{"port": "x", "source": prev}]}]
    doc["sink"] = "fz"
    return doc


JSON_MUTATIONS = {f.__name__[3:]: f for f in (_j_replace, _j_drop, _j_copy, _j_chain)}


def mutate_json(doc: dict, ops: list[tuple[str, int]]) -> str:
    """A mutant of a JSON form, as text; a last `text:` operation mutates the text itself."""
    doc = json.loads(json.dumps(doc))
    for name, seed in ops:
        if name in JSON_MUTATIONS:
            doc = JSON_MUTATIONS[name](random.Random(seed), doc)
    text = json.dumps(doc)
    for name, seed in ops:
        if name in TEXT_MUTATIONS and name not in ("aliases", "number"):
            text = TEXT_MUTATIONS[name](random.Random(seed), text)
    return text


# ---- data rows ---------------------------------------------------------------------------------------------------
ROW_SPICES = [
    b"[" * 3000 + b"]" * 3000, b'{"input": "q", "response": ' + b"[" * 150 + b"]" * 150 + b"}",
    b'{"input": "q", "response": "r", "n": ' + b"9" * 5000 + b"}", b'{"input": "q", "response": "r", "n": 1e400}',
    b'{"input": "caf\xe9", "response": "r"}', b"\xff\xfe\x00", b'{"input": "q", "response": "\\ud800"}',
    b'{"input": "q", "response": NaN}', b'{"input": "q"', b"{}", b"[]", b"null", b'"text"', b"\x00" * 10,
    b'{"input": 1, "response": 2.5, "label": ' + b"9" * 400 + b"}", b'{"input": "q", "response": "r", "label": 1e308}',
    b'{"input": {"a": 1}, "response": true}', b"\r", b" ",
]
CSV_SPICES = [b'"', b'""', b",,,", b"\xe9", b"\x00", b"\r", b'"a\nb"', b"x" * 3000, b"\t", b'q,"unterminated']


def row_file(ops: list[tuple[str, int]], suffix: str) -> bytes:
    """A data file of good rows with spiced ones among them (`suffix`: .jsonl or .csv)."""
    good = (b'{"input": "q", "response": "a b c", "label": 3}' if suffix == ".jsonl" else b"q,a b c,3")
    lines = [b"input,response,label"] if suffix == ".csv" else []
    for name, seed in ops:
        rnd = random.Random(seed)
        lines.append(good)
        if suffix == ".jsonl":
            lines.append(rnd.choice(ROW_SPICES))
        else:
            cells = [b"q", b"r", b"3"]
            cells[rnd.randrange(3)] = rnd.choice(CSV_SPICES)
            lines.append(b",".join(cells))
        if name == "truncate":
            lines[-1] = lines[-1][:rnd.randrange(len(lines[-1]) + 1)]
    lines.append(good)
    return b"\n".join(lines) + b"\n"


# ---- the targets -------------------------------------------------------------------------------------------------
def _crash(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}{where}: {str(exc)[:200]}"


def check_target(text: str, folder: Path) -> str | None:
    """`gsr check` on a program's text: analyze (with imports relative to `folder`), then every output format."""
    from gsrlang.lang.check.driver import analyze
    from gsrlang.lang.diagnostics.render import Sources, render_full, render_json, render_sarif
    from gsrlang.lang.span import SourceText

    path = str(folder / "fuzz.gsr")
    try:
        analysis = analyze(text, path)
        sources = Sources(SourceText(path, text))
        render_full(analysis.diagnostics, sources, False)
        json.loads(render_json([(sources, analysis.diagnostics)]))
        json.loads(render_sarif([(sources, analysis.diagnostics)], "fuzz"))
    except Exception as exc:  # noqa: BLE001 - counting crashes is the point
        return _crash(exc)
    return None


def cli_target(argv: list[str]) -> str | None:
    """A `gsr` command line: a crash is an exception or an internal error (exit status 2 with that message)."""
    from gsrlang.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except Exception as exc:  # noqa: BLE001
        return _crash(exc)
    if code == 2 or "internal error" in err.getvalue():
        return f"exit {code}: {err.getvalue().strip().splitlines()[0] if err.getvalue().strip() else ''}"[:300]
    return None


def import_target(text: str, folder: Path) -> str | None:
    """`gsr import` on a JSON document's text."""
    path = folder / "fuzz.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return cli_target(["import", str(path), "--color", "never"])


def rows_target(data: bytes, suffix: str, folder: Path) -> str | None:
    """The row readers: every row comes out as an item or a failed row, and labels read or are refused."""
    from gsrlang.files.dataset import ColumnMap, DataError, ItemError, parse_pointwise_label, read_items

    path = folder / f"fuzz{suffix}"
    path.write_bytes(data)
    try:
        for entry in read_items(path, ColumnMap(label_field="label")):
            if not isinstance(entry, ItemError) and entry.label is not None:
                with contextlib.suppress(ValueError):
                    parse_pointwise_label(entry.label)
    except DataError as exc:
        if suffix == ".jsonl" or "(the header)" not in str(exc):
            return f"DataError mid-stream: {exc}"[:300]
    except Exception as exc:  # noqa: BLE001
        return _crash(exc)
    return None


def exercise_lsp(text: str, rnd: random.Random, offsets: int, files=None):
    """The language server's model of `text`; unless building it failed inside (`internal_error`), every
    feature is asked of it, at up to `offsets` cursor positions drawn from `rnd`. Exceptions propagate."""
    from gsrlang.lang.span import Span
    from gsrlang.lsp import completion, diagnostics, hover, navigation
    from gsrlang.lsp.model import DocumentModel, Files
    from gsrlang.lsp.positions import PositionMap

    model = DocumentModel("file:///tmp/fuzz/doc.gsr", text, 1, None)
    if model.internal_error is not None:
        return model
    positions, files = PositionMap(text), Files() if files is None else files
    diagnostics.to_lsp(model, positions, files)
    navigation.document_symbols(model, positions)
    for offset in rnd.sample(range(len(text) + 1), min(offsets, len(text) + 1)):
        hover.hover(model, offset, positions, files)
        navigation.definition(model, offset, positions, files)
        completion.complete(model, offset, positions, snippets=True)
        diagnostics.code_actions(model, Span(offset, offset), positions, files)
    return model


def lsp_target(text: str, seed: int) -> str | None:
    """The language server's features on one version of a document, at a few cursor positions."""
    try:
        model = exercise_lsp(text, random.Random(seed), 3)
    except Exception as exc:  # noqa: BLE001
        return _crash(exc)
    if model.internal_error is not None:
        return "internal error: " + model.internal_error.strip().splitlines()[-1][:200]
    return None


def example_texts() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in EXAMPLES]


def example_forms() -> list[dict]:
    """The JSON form of every example (`gsr export --json`)."""
    from gsrlang.lang.check.driver import analyze_file
    from gsrlang.lang.jsonform import program_to_json

    return [json.loads(json.dumps(program_to_json(analyze_file(p).program))) for p in EXAMPLES]


def scratch() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="gsr-fuzz-")
