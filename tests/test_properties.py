"""Property tests (hypothesis) for the parser, the checker, the formatter and the JSON form.

(a) `parse` and `analyze` never raise, whatever the text: they return diagnostics.
(b) For generated programs of every syntactic shape, written with random spacing,
    line breaks and comments: `parse(format(p)) == parse(p)`, formatting is
    idempotent and keeps every comment.
(c) For generated programs that pass the checker (criteria of every type, named
    and nested operator nodes declared in a random order, gates, tasks), the JSON
    form validates against docs/program.schema.json and
    `analyze(json_to_source(program_to_json(P))).program.to_json() == P.to_json()`.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jsonform import SCHEMA, validate
from tiers import examples

from gsrlang.lang.check.driver import analyze
from gsrlang.lang.jsonform import json_to_source, program_to_json
from gsrlang.lang.syntax.formatter import format_source
from gsrlang.lang.syntax.parser import parse

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYWORDS = {"rubric", "fragment", "import", "task", "criterion", "node", "sink", "ask", "level", "example",
            "because", "judge", "judges", "aggregate", "true", "false", "transform", "reduce", "gate", "rule",
            "enum", "per"}

# ---- (a) parse and analyze never raise ------------------------------------------------------------------
FRAGMENTS = [
    "rubric", "fragment", "import", "task", "criterion", "node", "sink", "ask", "level", "example", "because",
    "judge", "judges", "aggregate", "transform", "reduce", "gate", "rule", "enum", "per", "true", "false",
    "pointwise", "pairwise", "scale", "quantize", "epsilon", "on_tie", "Bool", "Score", "Ordinal", "Nominal",
    "Real", "llm", "human", "verifier", "mean", "weighted_mean", "normalize", "cap", "default", "map", "mask",
    "x", "items", "weights", "at", "value", "to", "(", ")", "[", "]", "{", "}", ",", ":", ";", "=", "->",
    "..", ".", "?", "|", "<", ">", "*", "-", "0", "1", "5", "0.5", "1e-3", '"s"', '"""a\nb"""', '"', "#c\n",
    "\n", " ", "\t", "'", "/", "\\", "é", "\x00",
]


@pytest.mark.examples
@settings(max_examples=examples(150), **SETTINGS)
@given(st.text())
def test_parse_and_analyze_never_raise_on_any_text(text):
    result = parse(text)
    assert isinstance(result.diagnostics, tuple)
    analysis = analyze(text)
    assert analysis.program is None or not analysis.errors


@pytest.mark.examples
@settings(max_examples=examples(250), **SETTINGS)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map(" ".join))
def test_parse_and_analyze_never_raise_on_grammar_fragments(text):
    parse(text)
    analysis = analyze(text)
    assert analysis.program is None or not analysis.errors


@pytest.mark.examples
@settings(max_examples=examples(60), **SETTINGS)
@given(st.data())
def test_analyze_never_raises_on_mutated_programs(data):
    """Valid programs with a piece cut out or repeated: the checker's passes see near-valid input."""
    text = data.draw(checkable_programs())[0]
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    mutated = data.draw(st.sampled_from([text[:start] + text[end:], text[:end] + text[start:end] + text[end:]]))
    analysis = analyze(mutated)
    assert analysis.program is None or not analysis.errors


# ---- (b) generated programs of every shape: formatting ----------------------------------------------------
names = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True).filter(lambda s: s not in KEYWORDS)
labels = st.one_of(names, st.integers(0, 20).map(str))
comment_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12).map(lambda s: "#" + s)


def _string_token(value: str, triple: bool) -> str:
    if triple:
        body = value.replace("\\", "\\\\").replace('"', '\\"')
        return '"""' + body + '"""'
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


strings = st.builds(_string_token, st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"),
                                           max_size=15), st.booleans())
numbers = st.one_of(
    st.integers(0, 10**6).map(str),
    st.floats(0, 1000, allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0.5", "1e-3", "2.50E2", "007", "0.70"]),
).flatmap(lambda n: st.sampled_from([n, "-" + n, "- " + n]))
literal_tokens = st.one_of(numbers.map(lambda n: [n]), strings.map(lambda s: [s]),
                           st.sampled_from([["true"], ["false"]]),
                           st.tuples(numbers, numbers).map(lambda t: [t[0], "..", t[1]]))


def _sep_list(items: list[list[str]], trailing: bool) -> list[str]:
    out: list[str] = []
    for i, item in enumerate(items):
        out += item
        if i + 1 < len(items) or trailing:
            out.append(",")
    return out


def _exprs(depth: int):
    leaf = st.one_of(names.map(lambda n: [n]), literal_tokens)
    if depth <= 0:
        return leaf
    sub = _exprs(depth - 1)
    arg = st.one_of(sub, st.tuples(names, sub).map(lambda t: [t[0], ":", *t[1]]))
    call = st.tuples(names, st.lists(arg, max_size=4), st.booleans()).map(
        lambda t: [t[0], "(", *_sep_list(t[1], t[2] and bool(t[1])), ")"])
    lst = st.tuples(st.lists(sub, max_size=4), st.booleans()).map(
        lambda t: ["[", *_sep_list(t[0], t[1] and bool(t[0])), "]"])
    key = st.one_of(names, strings, st.integers(0, 9).map(str))
    mapping = st.tuples(st.lists(st.tuples(key, sub).map(lambda t: [t[0], ":", *t[1]]), max_size=3),
                        st.booleans()).map(lambda t: ["{", *_sep_list(t[0], t[1] and bool(t[0])), "}"])
    return st.one_of(leaf, call, lst, mapping)


exprs = _exprs(3)
call_args = st.lists(st.one_of(_exprs(2), st.tuples(names, _exprs(2)).map(lambda t: [t[0], ":", *t[1]])),
                     max_size=4)


def _types(depth: int = 1):
    base = st.one_of(
        names.map(lambda n: [n]),
        st.tuples(names, numbers, numbers).map(lambda t: [t[0], "[", t[1], "..", t[2], "]"]),
        names.map(lambda n: [n, "[", "*", "]"]),
        st.tuples(names, st.lists(labels, min_size=1, max_size=4), st.booleans()).map(
            lambda t: [t[0], "{", *_sep_list([[lab] for lab in t[1]], t[2]), "}"]),
    )
    if depth > 0:
        inner = _types(depth - 1)
        base = st.one_of(base, inner.map(lambda t: ["[", *t, "]"]),
                         st.tuples(names, inner).map(lambda t: ["{", t[0], ":", *t[1], "}"]))
    atom = st.tuples(base, st.booleans()).map(lambda t: t[0] + (["?"] if t[1] else []))
    return st.lists(atom, min_size=1, max_size=3).map(lambda atoms: [tok for i, a in enumerate(atoms)
                                                                     for tok in ([] if i == 0 else ["|"]) + a])


types = _types()
procedures = st.tuples(st.lists(names, min_size=1, max_size=2), st.one_of(st.none(), call_args)).map(
    lambda t: [tok for i, n in enumerate(t[0]) for tok in ([] if i == 0 else ["."]) + [n]]
    + ([] if t[1] is None else ["(", *_sep_list(t[1], False), ")"]))

body_items = st.one_of(
    strings.map(lambda s: ["ask", s]),
    st.tuples(st.one_of(names.filter(lambda n: n not in ("true", "false")), st.integers(0, 9).map(str),
                        st.sampled_from(["true", "false"])), strings, st.one_of(st.none(), numbers)).map(
        lambda t: ["level", t[0], t[1], *([] if t[2] is None else ["=", t[2]])]),
    st.tuples(strings, _exprs(1), st.one_of(st.none(), strings)).map(
        lambda t: ["example", t[0], "->", *t[1], *([] if t[2] is None else ["because", t[2]])]),
    procedures.map(lambda p: ["judge", *p]),
    st.tuples(st.integers(1, 9), procedures).map(lambda t: ["judges", str(t[0]), "aggregate", *t[1]]),
    st.tuples(st.lists(procedures, min_size=1, max_size=3), st.booleans(), procedures).map(
        lambda t: ["judges", "[", *_sep_list(t[0], t[1]), "]", "aggregate", *t[2]]),
)

param_decls = st.tuples(names, types, st.one_of(st.none(), names), st.one_of(st.none(), _exprs(1))).map(
    lambda t: [t[0], ":", *t[1], *([] if t[2] is None else ["per", t[2]]), *([] if t[3] is None else ["=", *t[3]])])

items = st.one_of(
    st.tuples(st.sampled_from(["rubric", "fragment"]), names, st.one_of(st.none(), strings)).map(
        lambda t: [t[0], t[1], *([] if t[2] is None else [t[2]])]),
    strings.map(lambda s: ["import", s]),
    st.tuples(names, st.lists(st.tuples(names, exprs), max_size=3)).map(
        lambda t: ["task", t[0], "{", *[tok for k, v in t[1] for tok in [k, "=", *v]], "}"]),
    st.tuples(names, types, st.one_of(st.none(), procedures), st.one_of(st.none(), st.lists(body_items,
                                                                                            max_size=5))).map(
        lambda t: ["criterion", t[0], ":", *t[1], *([] if t[2] is None else ["=", *t[2]]),
                   *([] if t[3] is None else ["{", *[tok for item in t[3] for tok in item], "}"])]),
    st.tuples(names, exprs).map(lambda t: ["node", t[0], "=", *t[1]]),
    exprs.map(lambda e: ["sink", *e]),
    st.tuples(st.sampled_from(["transform", "reduce", "gate"]), names, st.lists(names, max_size=2),
              st.lists(st.tuples(names, types), max_size=3), st.one_of(st.none(), st.lists(param_decls, max_size=3)),
              types).map(
        lambda t: [t[0], t[1], *(["<", *_sep_list([[n] for n in t[2]], False), ">"] if t[2] else []), "(",
                   *_sep_list([[n, ":", *ty] for n, ty in t[3]], False),
                   *([] if t[4] is None else [";", *_sep_list(t[4], False)]), ")", "->", *t[5]]),
    st.tuples(names, st.lists(param_decls, max_size=3), types).map(
        lambda t: ["rule", t[0], "(", *_sep_list(t[1], False), ")", "->", *t[2]]),
    st.tuples(names, st.lists(names, min_size=1, max_size=4), st.booleans()).map(
        lambda t: ["enum", t[0], "{", *_sep_list([[n] for n in t[1]], t[2]), "}"]),
)

trivia = st.one_of(st.just(" "), st.just("\n"), st.just("  "), st.just("\n\n"), st.just("\t"),
                   comment_text.map(lambda c: " " + c + "\n"), comment_text.map(lambda c: "\n" + c + "\n\n  "))


@st.composite
def shaped_programs(draw) -> str:
    tokens = [tok for item in draw(st.lists(items, max_size=8)) for tok in item]
    out = [draw(st.sampled_from(["", "\n", draw(comment_text) + "\n"]))]
    for tok in tokens:
        out.append(tok)
        out.append(draw(trivia))
    if draw(st.booleans()):
        out.append(draw(comment_text))
    return "".join(out)


@pytest.mark.examples
@settings(max_examples=examples(120), **SETTINGS)
@given(shaped_programs())
def test_formatting_keeps_the_ast_and_is_idempotent(text):
    parsed = parse(text)
    assert parsed.ok, (text, parsed.diagnostics)
    formatted = format_source(text)
    again = parse(formatted)
    assert again.ok, formatted
    assert again.module == parsed.module
    assert format_source(formatted) == formatted
    assert sorted(c.text.rstrip() for c in again.module.comments) == \
        sorted(c.text.rstrip() for c in parsed.module.comments)


# ---- (c) checkable programs: the JSON round trip -----------------------------------------------------------
@st.composite
def _criterion(draw, name: str):
    """(declaration, Score expression for it, Bool expression for it or None)."""
    kind = draw(st.sampled_from(["bool", "bool?", "ordinal", "labels", "score", "nominal", "rule", "human"]))
    ask = draw(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), min_size=1,
                       max_size=30).filter(lambda s: s.strip()))
    ask_tok = _string_token(ask, "\n" in ask and draw(st.booleans()))
    body = [f"ask {ask_tok}"]
    procedure = ""
    if kind in ("bool", "bool?"):
        t = "Bool" + ("?" if kind == "bool?" else "")
        if draw(st.booleans()):
            body.append('level true "yes"')
        if draw(st.booleans()):
            body.append(f'example "e" -> {draw(st.sampled_from(["true", "false"]))} because "r"')
        ens = draw(st.sampled_from(["", "judges 3 aggregate majority",
                                    'judges [llm(role: "a"), llm(role: "b")] aggregate weighted(weights: [0.6, 0.4])']))
        if ens:
            body.append(ens)
        score = f"normalize({name})" if kind == "bool" else f"normalize(default({name}, value: false))"
        flag = name if kind == "bool" else f"default({name}, value: {draw(st.sampled_from(['true', 'false']))})"
        return t, procedure, body, score, flag
    if kind == "ordinal":
        k = draw(st.integers(2, 7))
        lo = draw(st.integers(0, 3))
        t = f"Ordinal[{lo}..{lo + k - 1}]" + draw(st.sampled_from(["", "?"]))
        for level in sorted(draw(st.sets(st.integers(lo, lo + k - 1), max_size=3))):
            value = draw(st.one_of(st.none(), st.floats(0, 1, allow_nan=False).map(lambda v: round(v, 3))))
            body.append(f'level {level} "L{level}"' + ("" if value is None else f" = {value!r}"))
        if draw(st.booleans()):
            body.append(f'example "e" -> {lo + k - 1}')
        if draw(st.booleans()):
            body.append(f"judges {draw(st.integers(2, 5))} aggregate {draw(st.sampled_from(['mean', 'median']))}")
        optional = t.endswith("?")
        score = f"normalize({name})" if not optional else f"normalize(default({name}, value: {lo}))"
        return t, procedure, body, score, None
    if kind == "labels":
        t = "Ordinal{poor, fair, good}"
        if draw(st.booleans()):
            body.append('level fair "Fair" = 0.6')
        if draw(st.booleans()):
            body.append('example "e" -> good')
        if draw(st.booleans()):
            procedure = f' = llm(role: "strong", temperature: {draw(st.sampled_from(["0.0", "0.7"]))})'
        return t, procedure, body, f"normalize({name})", None
    if kind == "score":
        hi = draw(st.sampled_from(["10", "5.5", "100"]))
        t = f"Score[0..{hi}]"
        body.append('level 0 "none"')
        return t, procedure, body, f"scale({name})", f"threshold(scale({name}), at: 0.5)"
    if kind == "nominal":
        t = "Nominal{formal, casual, rude}"
        values = [draw(st.sampled_from(["0.0", "0.5", "1", "0.25"])) for _ in range(3)]
        mapping = f"{{formal: {values[0]}, casual: {values[1]}, rude: {values[2]}}}"
        return t, procedure, body, f"map({name}, to: {mapping})", None
    if kind == "rule":
        rule = draw(st.sampled_from(["word_count(above: 600)", "word_count(below: 3)", 'regex(pattern: "a+b")',
                                     'contains(text: "sorry", case_sensitive: true)', "json_valid()",
                                     'contains_any(words: ["x", "y"])']))
        return "Bool", f" = rule.{rule}", [], f"normalize({name})", name
    return "Bool?", ' = human(field: "notes.ok")', [], f"normalize(default({name}, value: true))", \
        f"default({name}, value: false)"


def modes(program) -> list[str]:
    """The modes a checked program's readout has (pointwise, pairwise or both)."""
    return [m for m in ("pointwise", "pairwise") if getattr(program.readout, m)]


def draw_checked(generated, data):
    """(program, mode): a generated program (from `checkable_programs`), checked, and one of its modes."""
    program = analyze(generated[0]).program
    assert program is not None
    return program, data.draw(st.sampled_from(modes(program)))


@st.composite
def checkable_programs(draw):
    n = draw(st.integers(1, 6))
    crit_names = [f"c{i}" for i in range(n)]
    decls, scores, flags = [], [], []
    for name in crit_names:
        t, procedure, body, score, flag = draw(_criterion(name))
        head = f"criterion {name}: {t}{procedure}"
        decls.append(head + (" {\n" + "\n".join("  " + b for b in body) + "\n}" if body else ""))
        scores.append(score)
        if flag:
            flags.append(flag)
    nodes = []
    # some score expressions get their own named node
    for i, s in enumerate(scores):
        if draw(st.booleans()):
            nodes.append(f"node s{i} = {s}")
            scores[i] = f"s{i}"
    if draw(st.booleans()):
        nodes.append("node k = 0.5")
        scores.append("k")
    if draw(st.booleans()):
        scores.append(draw(st.sampled_from(["1", "0.25", "0"])))
    # one or two reducers
    split = draw(st.integers(1, len(scores)))
    groups = [scores[:split], scores[split:]] if split < len(scores) and draw(st.booleans()) else [scores]
    reduced = []
    for gi, group in enumerate(groups):
        op = draw(st.sampled_from(["mean", "weighted_mean", "min", "max", "median", "product"]))
        args = f"items: [{', '.join(group)}]"
        if op == "weighted_mean" and draw(st.booleans()):
            weights = [draw(st.sampled_from(["1", "2", "0.5", "-0.5", "3.25"])) for _ in group]
            weights[0] = "1"
            args += f", weights: [{', '.join(weights)}]"
        if draw(st.booleans()):
            args += f", on_abstain: {draw(st.sampled_from(['skip', 'zero', 'partial', 'fail']))}"
        expr = f"{op}({args})"
        if draw(st.booleans()):
            nodes.append(f"node r{gi} = {expr}")
            expr = f"r{gi}"
        reduced.append(expr)
    base = reduced[0] if len(reduced) == 1 else f"mean(items: [{', '.join(reduced)}])"
    for fi, flag in enumerate(flags[:2]):
        gate = draw(st.sampled_from(["cap", "floor", "veto"]))
        at = "" if gate == "veto" else f", at: {draw(st.sampled_from(['0.2', '0.5', '1', '0']))}"
        base = f"{gate}(base: {base}, trigger: {flag}{at})"
        if draw(st.booleans()):
            nodes.append(f"node g{fi} = {base}")
            base = f"g{fi}"
    if draw(st.booleans()):
        nodes.append(f"node final = {base}")
        sink = "sink final"
    else:
        sink = f"sink {base}"
    tasks = []
    if draw(st.booleans()):
        lo, hi = draw(st.sampled_from([(1, 5), (0, 10), (1, 3), (0.5, 2.5)]))
        quantize = draw(st.sampled_from(["round", "floor", "ceil", "none"]))
        if isinstance(lo, int) and hi - lo == 2 and draw(st.booleans()):
            quantize = "thresholds(0.3, 0.7)"
        tasks.append(f"task pointwise {{ scale = {lo}..{hi}  quantize = {quantize} }}")
    if not tasks or draw(st.booleans()):
        tasks.append(f"task pairwise {{ epsilon = {draw(st.sampled_from(['0', '0.05', '0.1']))}  "
                     f"on_tie = {draw(st.sampled_from(['tie', 'abstain', 'first', 'second']))} }}")
    decls = draw(st.permutations(decls))
    nodes = draw(st.permutations(nodes))
    body = decls + nodes
    if draw(st.booleans()):
        body = draw(st.permutations(body))  # names may be used before they are declared
    header = 'rubric generated "A generated rubric"'
    text = "\n".join([header, *tasks, *body, sink]) + "\n"
    return text, n


@pytest.mark.examples
@settings(max_examples=examples(80), **SETTINGS)
@given(checkable_programs())
def test_json_round_trip_of_checkable_programs(generated):
    text, _ = generated
    analysis = analyze(text)
    assert analysis.program is not None, (text, [d.message for d in analysis.errors])
    program = analysis.program
    doc = json.loads(json.dumps(program_to_json(program)))
    assert validate(doc, SCHEMA) == []
    source = json_to_source(doc)
    again = analyze(source)
    assert again.program is not None, (source, [d.message for d in again.errors])
    assert again.program.to_json() == program.to_json()
    assert again.program.content_hash == program.content_hash
    # and the generated text formats faithfully too
    formatted = format_source(text)
    assert parse(formatted).module == parse(text).module
    assert format_source(formatted) == formatted
