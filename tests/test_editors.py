"""Editor files: the TextMate grammar (its scopes on sample lines, run with Python's `re`), the VS Code
extension folder, and the pre-commit hooks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gsrlang.lang.catalog import default_catalog

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR_PATH = ROOT / "editors" / "textmate" / "gsr.tmLanguage.json"
VSCODE = ROOT / "editors" / "vscode"


# ---- a small TextMate engine: enough of one to check the grammar's scopes --------------------------------------------
class Engine:
    """Leftmost match wins, ties go to the earlier pattern; `match` rules with captures, `begin`/`end` rules
    with inner patterns; `include` of repository entries. Patterns are compiled with Python's `re`
    (MULTILINE, so `^` and `$` work per line, as TextMate matches line by line)."""

    def __init__(self, grammar: dict):
        self.repo = grammar["repository"]
        self.top = self._expand(grammar["patterns"])

    def _expand(self, patterns: list[dict]) -> list[dict]:
        out = []
        for p in patterns:
            if "include" in p:
                out += self._expand([self.repo[p["include"].lstrip("#")]])
            elif "patterns" in p and "begin" not in p:
                out += self._expand(p["patterns"])
            else:
                q = dict(p)
                for key in ("match", "begin", "end"):
                    if key in q:
                        q["_" + key] = re.compile(q[key], re.M)
                if "begin" in q:
                    q["_inner"] = self._expand(q.get("patterns", []))
                out.append(q)
        return out

    def scopes(self, text: str) -> list[tuple[int, int, str]]:
        found: list[tuple[int, int, str]] = []
        self._run(text, 0, len(text), self.top, found, until=None)
        return found

    def _run(self, text, pos, stop, patterns, found, until):
        while pos < stop:
            best = None
            for p in patterns:
                m = (p.get("_match") or p["_begin"]).search(text, pos, stop)
                if m and (best is None or m.start() < best[1].start()):
                    best = (p, m)
            end = until.search(text, pos) if until is not None else None
            if end is not None and (best is None or end.start() <= best[1].start()):
                return end
            if best is None:
                return None
            p, m = best
            if "_match" in p:
                self._record(p, m, p.get("captures", {}), found)
                pos = max(m.end(), m.start() + 1)
                continue
            self._record(p, m, p.get("beginCaptures", {}), found, whole=False)
            end = self._run(text, m.end(), stop, p["_inner"], found, until=p["_end"])
            close = end.end() if end is not None else stop
            if "name" in p:
                found.append((m.start(), close, p["name"]))
            if end is not None:
                for group, spec in p.get("endCaptures", {}).items():
                    if end.group(int(group)) is not None:
                        found.append((end.start(int(group)), end.end(int(group)), spec["name"]))
            pos = max(close, m.start() + 1)
        return None

    @staticmethod
    def _record(p, m, captures, found, whole=True):
        if whole and "name" in p:
            found.append((m.start(), m.end(), p["name"]))
        for group, spec in captures.items():
            if m.group(int(group)) is not None:
                found.append((m.start(int(group)), m.end(int(group)), spec["name"]))


@pytest.fixture(scope="module")
def grammar() -> dict:
    return json.loads(GRAMMAR_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def engine(grammar) -> Engine:
    return Engine(grammar)


def scopes_of(engine: Engine, text: str, fragment: str, nth: int = 0) -> set[str]:
    """The scopes covering the first character of the `nth` occurrence of `fragment`."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(fragment, at + 1)
    return {scope for start, end, scope in engine.scopes(text) if start <= at < end}


def test_grammar_is_valid_json_with_compilable_patterns(grammar):
    assert grammar["scopeName"] == "source.gsr" and grammar["fileTypes"] == ["gsr"]
    count = 0
    for entry in _walk(grammar):
        for key in ("match", "begin", "end"):
            if key in entry:
                re.compile(entry[key])
                count += 1
    assert count > 20


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_grammar_knows_every_catalogue_operator(grammar):
    builtin = next(p for p in grammar["repository"]["call"]["patterns"] if p["name"] == "support.function.operator.gsr")
    listed = set(re.search(r"\((.*?)\)", builtin["match"]).group(1).split("|"))
    assert listed == set(default_catalog().operators), "regenerate the operator list from stdlib/operators.gsr"


def test_grammar_knows_every_judge_kind(grammar):
    procedure = next(p for p in _walk(grammar) if isinstance(p, dict) and p.get("name") == "support.function.procedure.gsr")
    listed = set(re.search(r"\((.*?)\)", procedure["match"]).group(1).split("|"))
    assert listed == set(default_catalog().judges) - {"rule"}, "list every kind of stdlib/judges.gsr but rule"


CASES = [
    ("# the safety cap", "# the", "comment.line.number-sign.gsr"),
    ('rubric helpfulness "How helpful?"', "rubric", "keyword.declaration.header.gsr"),
    ('rubric helpfulness "How helpful?"', "helpfulness", "entity.name.namespace.gsr"),
    ('rubric helpfulness "How helpful?"', "How", "string.quoted.double.gsr"),
    ('import "std/fragments/safety.gsr"', "import", "keyword.declaration.gsr"),
    ("criterion correct: Ordinal[1..5] {", "criterion", "keyword.declaration.criterion.gsr"),
    ("criterion correct: Ordinal[1..5] {", "correct", "entity.name.criterion.gsr"),
    ("criterion correct: Ordinal[1..5] {", "Ordinal", "support.type.judgment.gsr"),
    ("criterion correct: Ordinal[1..5] {", "1", "constant.numeric.gsr"),
    ("criterion correct: Ordinal[1..5] {", "..", "keyword.operator.range.gsr"),
    ("criterion correct: Ordinal[1..5] {", "5", "constant.numeric.gsr"),
    ("criterion unsafe: Bool? {", "?", "keyword.operator.optional.gsr"),
    ('  ask "What share of \\"facts\\" is right?"', "ask", "keyword.other.criterion-item.gsr"),
    ('  ask "What share of \\"facts\\" is right?"', '\\"', "constant.character.escape.gsr"),
    ('  ask "What share of \\"facts\\" is right?"', "is right", "string.quoted.double.gsr"),
    ('  level 3 "Some errors" = 0.4', "level", "keyword.other.criterion-item.gsr"),
    ('  level 3 "Some errors" = 0.4', "0.4", "constant.numeric.gsr"),
    ('  example "2 + 2 = 5" -> false because "wrong"', "->", "keyword.operator.arrow.gsr"),
    ('  example "2 + 2 = 5" -> false because "wrong"', "false", "constant.language.boolean.gsr"),
    ('  example "2 + 2 = 5" -> false because "wrong"', "because", "keyword.other.criterion-item.gsr"),
    ("  judges 3 aggregate majority", "judges", "keyword.other.criterion-item.gsr"),
    ("  judges 3 aggregate majority", "aggregate", "keyword.other.criterion-item.gsr"),
    ('criterion rambling: Bool = rule.word_count(above: 600)', "rule", "support.class.rule.gsr"),
    ('criterion rambling: Bool = rule.word_count(above: 600)', "word_count", "support.function.rule.gsr"),
    ('criterion rambling: Bool = rule.word_count(above: 600)', "above", "variable.parameter.gsr"),
    ('criterion rambling: Bool = rule.word_count(above: 600)', "600", "constant.numeric.gsr"),
    ('criterion fluent: Score = human(field: "scores.fluency")', "human", "support.function.procedure.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)", "node",
     "keyword.declaration.node.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)", "body",
     "entity.name.node.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)",
     "weighted_mean", "support.function.operator.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)",
     "normalize", "support.function.operator.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)", "items",
     "variable.parameter.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)",
     "on_abstain", "variable.parameter.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)", "-0.3",
     "constant.numeric.gsr"),
    ("node body = weighted_mean(items: [normalize(correct)], weights: [0.7, -0.3], on_abstain: skip)", "=",
     "keyword.operator.assignment.gsr"),
    ("node x = my_own_op(a: b)", "my_own_op", "entity.name.function.call.gsr"),
    ("task pointwise { scale = 1..5  quantize = round }", "task", "keyword.declaration.task.gsr"),
    ("task pointwise { scale = 1..5  quantize = round }", "pointwise", "support.constant.task-mode.gsr"),
    ("task pairwise  { epsilon = 0.05  on_tie = tie }", "0.05", "constant.numeric.gsr"),
    ("sink final", "sink", "keyword.declaration.gsr"),
    ("transform normalize(x: Ordinal | Bool) -> Score", "transform", "keyword.declaration.signature.gsr"),
    ("transform normalize(x: Ordinal | Bool) -> Score", "normalize", "entity.name.function.gsr"),
    ("transform normalize(x: Ordinal | Bool) -> Score", "|", "keyword.operator.union.gsr"),
    ("reduce weighted_mean(items: [Score]; weights: [Real] per items = equal) -> Score", "per",
     "keyword.other.per.gsr"),
    ("reduce weighted_mean(items: [Score]; weights: [Real] per items = equal) -> Score", "Real",
     "support.type.parameter.gsr"),
    ('node x = cap(base: y, trigger: z, at: 0.25)  # why "capped"', "# why", "comment.line.number-sign.gsr"),
    ('node x = cap(base: y, trigger: z, at: 0.25)  # why "capped"', '"capped"', "comment.line.number-sign.gsr"),
]


@pytest.mark.parametrize("line, fragment, scope", CASES)
def test_scopes_of_sample_lines(engine, line, fragment, scope):
    assert scope in scopes_of(engine, line, fragment), line


def test_strings_do_not_leak(engine):
    line = 'criterion c: Bool { ask "a # not a comment" }  # a comment'
    assert "string.quoted.double.gsr" in scopes_of(engine, line, "# not")
    assert "comment.line.number-sign.gsr" not in scopes_of(engine, line, "# not")
    assert "comment.line.number-sign.gsr" in scopes_of(engine, line, "# a comment")
    unclosed = 'ask "never closed\nnode x = mean(items: [a])'
    assert "string.quoted.double.gsr" not in scopes_of(engine, unclosed, "node")
    assert "keyword.declaration.node.gsr" in scopes_of(engine, unclosed, "node")


def test_triple_quoted_strings_span_lines(engine):
    text = 'criterion c: Bool {\n  ask """First line, with "quotes",\n  and # no comment\n  """\n}\nnode n = x'
    for inside in ("First", '"quotes"', "# no comment"):
        assert "string.quoted.triple.gsr" in scopes_of(engine, text, inside), inside
    assert "string.quoted.triple.gsr" not in scopes_of(engine, text, "node")
    assert "keyword.declaration.node.gsr" in scopes_of(engine, text, "node")


def test_the_examples_highlight_without_gaps_in_keywords(engine):
    for path in sorted((ROOT / "examples").glob("*/*.gsr")):
        text = path.read_text(encoding="utf-8")
        found = engine.scopes(text)
        for m in re.finditer(r"^(criterion|node|sink|task|rubric)\b", text, re.M):
            assert any(s <= m.start() < e and scope.startswith("keyword.declaration") for s, e, scope in found), \
                (path, m.group())


# ---- VS Code ----------------------------------------------------------------------------------------------------------
def test_vscode_extension_files():
    package = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    config = json.loads((VSCODE / "language-configuration.json").read_text(encoding="utf-8"))
    (language,) = package["contributes"]["languages"]
    assert language["id"] == "gsr" and language["extensions"] == [".gsr"]
    assert (VSCODE / language["configuration"]).is_file()
    (entry,) = package["contributes"]["grammars"]
    assert entry["scopeName"] == "source.gsr" and entry["language"] == "gsr"
    assert (VSCODE / entry["path"]).is_file()
    assert (VSCODE / package["main"]).is_file()
    assert package["private"] is True  # documented, not published
    assert "vscode-languageclient" in package["dependencies"]
    assert config["comments"]["lineComment"] == "#"
    extension = (VSCODE / "extension.js").read_text(encoding="utf-8")
    assert '"lsp"' in extension and "TransportKind.stdio" in extension


def test_vscode_grammar_is_the_textmate_grammar():
    package = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    copy = VSCODE / package["contributes"]["grammars"][0]["path"]
    assert copy.read_bytes() == GRAMMAR_PATH.read_bytes(), \
        "editors/vscode/syntaxes/ must be a copy of editors/textmate/gsr.tmLanguage.json (npm run sync-grammar)"


# ---- pre-commit --------------------------------------------------------------------------------------------------------
def read_hooks() -> list[dict]:
    """`.pre-commit-hooks.yaml` is a flat list of maps; read it without a YAML library."""
    hooks: list[dict] = []
    for raw in (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8").splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        if line.startswith("- "):
            hooks.append({})
            line = "  " + line[2:]
        key, _, value = line.strip().partition(": ")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = [v.strip() for v in value[1:-1].split(",") if v.strip()]
        hooks[-1][key] = value
    return hooks


def test_pre_commit_hooks():
    hooks = {h["id"]: h for h in read_hooks()}
    assert set(hooks) == {"gsr-check", "gsr-fmt"}
    assert hooks["gsr-check"]["entry"] == "gsr check"
    assert hooks["gsr-fmt"]["entry"] == "gsr fmt --check"
    for hook in hooks.values():
        assert hook["types"] == ["file"] and hook["language"] == "python"
        files = re.compile(hook["files"])
        assert files.search("rubrics/helpfulness.gsr") and not files.search("notes.gsr.md")


def _gsr(*args):
    return subprocess.run([sys.executable, "-m", "gsrlang.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("hook_id", ["gsr-check", "gsr-fmt"])
def test_pre_commit_hook_commands_run(hook_id, tmp_path):
    hook = {h["id"]: h for h in read_hooks()}[hook_id]
    command = hook["entry"].split()[1:] + list(hook.get("args", []))
    if _gsr(command[0], "--help").returncode != 0:
        pytest.skip(f"`gsr {command[0]}` is not in this tree yet")
    good = tmp_path / "good.gsr"
    source = (ROOT / "tests" / "cases" / "render" / "helpfulness.gsr").read_text(encoding="utf-8")
    if hook_id == "gsr-fmt":
        from gsrlang.lang.syntax.formatter import format_source

        source = format_source(source)
    good.write_text(source, encoding="utf-8")
    assert _gsr(*command, str(good)).returncode == 0
    bad = tmp_path / "bad.gsr"
    bad.write_text("node  x=mean(items:[a])\n", encoding="utf-8")
    assert _gsr(*command, str(bad)).returncode == 1
