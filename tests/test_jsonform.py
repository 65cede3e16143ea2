"""The JSON form of programs (`gsrlang.lang.jsonform`), its schema, `gsr export` and `gsr import`.

Exported documents are validated against docs/program.schema.json with a small
validator written here for the subset of JSON Schema (2020-12) the schema uses;
a test checks the schema uses nothing else, so the validator never skips a rule.
"""

from __future__ import annotations

import copy
import io
import json
import re
import sys
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.lang.jsonform import JsonFormError, declared_type, json_to_source, program_to_json
from gsrlang.lang.types import JType

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "docs" / "program.schema.json").read_text(encoding="utf-8"))


# ---- a validator for the JSON Schema subset docs/program.schema.json uses ------------------------------------
ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs"}
KEYWORDS = {"$ref", "type", "const", "enum", "pattern", "minimum", "maximum", "exclusiveMaximum", "minLength",
            "minItems", "maxItems", "items", "properties", "required", "additionalProperties", "minProperties",
            "oneOf", "anyOf"}


def _is_type(value, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float)
                                                                           and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise AssertionError(f"unknown type {name}")


def _json_equal(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def validate(value, schema: dict, path: str = "$") -> list[str]:
    """Problems of `value` under `schema` (resolved against SCHEMA for `$ref`), as 'path: message'."""
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        return validate(value, SCHEMA["$defs"][ref.split("/")[-1]], path)
    errors: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            return [f"{path}: expected {types}, found {value!r}"]
    if "const" in schema and not _json_equal(value, schema["const"]):
        errors.append(f"{path}: expected {schema['const']!r}")
    if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: too short")
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: above {schema['maximum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            errors.append(f"{path}: not below {schema['exclusiveMaximum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{path}: wrong number of items ({len(value)})")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += validate(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        if len(value) < schema.get("minProperties", 0):
            errors.append(f"{path}: too few properties")
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{path}: missing {key!r}")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                errors += validate(item, props[key], f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected property {key!r}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += validate(item, schema["additionalProperties"], f"{path}.{key}")
    if "oneOf" in schema:
        matching = [s for s in schema["oneOf"] if not validate(value, s, path)]
        if len(matching) != 1:
            errors.append(f"{path}: matches {len(matching)} of the oneOf alternatives, not exactly one")
    if "anyOf" in schema and not any(not validate(value, s, path) for s in schema["anyOf"]):
        errors.append(f"{path}: matches none of the anyOf alternatives")
    return errors


def _walk_schema(schema, where="$"):
    if isinstance(schema, dict):
        for key, sub in schema.items():
            if where.endswith(".properties") or where.endswith(".$defs"):
                yield from _walk_schema(sub, f"{where}.{key}")
                continue
            yield where, key
            if key in ("properties", "$defs"):
                yield from _walk_schema(sub, f"{where}.{key}")
            elif key in ("items", "additionalProperties") and isinstance(sub, dict):
                yield from _walk_schema(sub, f"{where}.{key}")
            elif key in ("oneOf", "anyOf"):
                for i, s in enumerate(sub):
                    yield from _walk_schema(s, f"{where}.{key}[{i}]")


def test_the_schema_uses_only_what_the_validator_checks():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    unknown = {(w, k) for w, k in _walk_schema(SCHEMA) if k not in KEYWORDS | ANNOTATIONS}
    assert not unknown


def test_the_validator_rejects_what_it_should():
    good = _export(REFERENCE)
    assert validate(good, SCHEMA) == []
    bad = copy.deepcopy(good)
    bad["nodes"][0]["kind"] = "wizard"
    bad["readout"]["pairwise"]["epsilon"] = 1
    bad["extra"] = 1
    problems = validate(bad, SCHEMA)
    assert any("nodes[0]" in p for p in problems)
    assert any("epsilon" in p for p in problems)
    assert any("'extra'" in p for p in problems)


# ---- programs ------------------------------------------------------------------------------------------------
REFERENCE = """\
# Helpfulness, as in HelpSteer2: a correctness-first rubric with a safety cap.
rubric helpfulness "How helpful is the response to the prompt overall?"

task pointwise { scale = 1..5  quantize = round }
task pairwise  { epsilon = 0.05  on_tie = tie }

criterion correct: Ordinal[1..5] {
  ask "What share of the pertinent facts in the response are correct?"
  level 1 "Mostly wrong or hallucinated"
  level 3 "Some errors that matter"
  level 5 "Fully correct"
}
criterion coherent: Ordinal[1..5] { ask "How clear and self-consistent is the response?" }
criterion unsafe: Bool? {
  ask "Does the response give instructions that could cause serious harm?"
}
criterion rambling: Bool = rule.word_count(above: 600)

node body   = weighted_mean(items: [normalize(correct), normalize(coherent)], weights: [0.7, 0.3])
node capped = cap(base: body, trigger: default(unsafe, value: false), at: 0.25)
node final  = cap(base: capped, trigger: rambling, at: 0.6)

sink final
"""

EVERYTHING = '''\
# Every feature the JSON form must carry.
rubric everything """A rubric
with a two-line description"""

task pointwise { scale = 0..10  quantize = thresholds(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95) }
task pairwise { epsilon = 0.05  on_tie = abstain }

criterion correct: Ordinal[1..5] {
  ask """What share of the facts are correct?
Answer with a level."""
  level 1 "Mostly wrong" = 0.0
  level 3 "Some errors" = 0.4
  level 5 "Fully correct"
  example "The Eiffel Tower is in Rome." -> 1 because "a false claim"
  example "Water boils at 100 C." -> 5
  judges 3 aggregate median
}
criterion polite: Bool {
  ask "Is it polite?"
  judges [llm(role: "strong"), llm(role: "fast", temperature: 0.2), llm(role: "cheap", seed: 3)] aggregate weighted(weights: [0.5, 0.3, 0.2])
}
criterion tone: Nominal{formal, casual, rude} { ask "Which tone?"  example "Yo" -> casual }
criterion grade: Ordinal{poor, fair, good}? = llm(role: "strong", evidence: true) { ask "Grade?"  level fair "Fair" = 0.6 }
criterion depth: Score[0..10] { ask "How deep?"  level 0 "Shallow"  example "x" -> 7.5 }
criterion annotated: Bool? = human(field: "annotations.ok")
criterion tested: Bool = verifier("unit_tests")
criterion repeated: Bool = rule.regex(pattern: "(\\\\w+) \\\\d", ignore_case: true)
criterion short: Bool = rule.word_count(below: 5)
criterion cites: Bool { ask "Does it \\"cite\\" sources?\\tTab." }
criterion levels: Ordinal{1, 2, x} { ask "Which?"  example "a" -> "2"  example "b" -> x }

node tone_score = map(tone, to: {formal: 1.0, casual: 0.7, rude: 0})
node level_score = map(levels, to: {1: 0.0, 2: 0.5, x: 1})
node half = 0.5
node alias = half
node applicable = mask(base: normalize(cites), trigger: not(default(annotated, value: true)))
node content = weighted_mean(items: [normalize(correct), normalize(polite), tone_score, scale(depth), normalize(default(grade, value: fair)), applicable, alias, 1, level_score], weights: [3, 1, 1, 2, 1, 1, 0.5, -0.5, 1], on_abstain: skip)
node gated = cap(base: content, trigger: any(items: [short, repeated, tested]), at: 0.3)

sink floor(base: veto(base: gated, trigger: false), trigger: threshold(normalize(correct), at: 0.75), at: 0.2)
'''

# The declaration order matters: `n1` is declared first but the document lists `n2` (reached from it) first.
ORDER = """\
rubric order
task pointwise { scale = 1..5 }
criterion c: Bool { ask "c?" }
criterion d: Ordinal[1..3] { ask "d?" }
node n1 = cap(base: normalize(c), trigger: n2, at: 0.5)
node n2 = threshold(normalize(d), at: 0.5)
node n3 = mean(items: [n1, normalize(d), n4])
node n4 = 0.25
sink n3
"""


def _program(text: str, path: str | None = None):
    analysis = analyze(text, path)
    assert analysis.program is not None, analysis.diagnostics
    return analysis.program


def _export(text: str) -> dict:
    return json.loads(json.dumps(program_to_json(_program(text))))


def _round_trip(program):
    doc = json.loads(json.dumps(program_to_json(program)))
    assert validate(doc, SCHEMA) == []
    source = json_to_source(doc)
    again = analyze(source)
    assert again.program is not None, (source, again.diagnostics)
    return again.program, source


def _example_files() -> list[Path]:
    return sorted(p for p in (ROOT / "examples").rglob("*.gsr") if p.is_file())


@pytest.mark.parametrize("name", ["REFERENCE", "EVERYTHING", "ORDER"])
def test_round_trip_keeps_the_program(name):
    program = _program(globals()[name])
    again, source = _round_trip(program)
    assert again.to_json() == program.to_json()
    assert again.content_hash == program.content_hash
    assert json_to_source(program_to_json(again)) == source  # a fixed point


@pytest.mark.parametrize("path", _example_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_round_trip_of_the_examples(path: Path):
    analysis = analyze_file(path)
    if analysis.program is None:
        pytest.skip("not a checkable rubric")
    again, _ = _round_trip(analysis.program)
    assert again.content_hash == analysis.program.content_hash


def test_declaration_order_is_rebuilt_from_the_topological_order():
    program = _program(ORDER)
    source = json_to_source(program_to_json(program))
    assert source.index("node n1 =") < source.index("node n2 =")
    assert [n.id for n in _program(source).nodes] == [n.id for n in program.nodes]


def test_export_adds_declared_types_and_the_content_hash():
    program = _program(EVERYTHING)
    doc = program_to_json(program)
    assert doc["content_hash"] == program.content_hash
    declared = {n["id"]: n["declared_type"] for n in doc["nodes"] if n["kind"] == "criterion"}
    assert declared["correct"] == "Ordinal[1..5]"
    assert declared["grade"] == "Ordinal{poor, fair, good}?"
    assert declared["depth"] == "Score[0..10]"
    assert declared["annotated"] == "Bool?"
    assert declared["tone"] == "Nominal{formal, casual, rude}"
    assert {k: v for k, v in doc.items() if k != "content_hash"} | {"nodes": doc["nodes"]} != program.to_json()
    stripped = copy.deepcopy(doc)
    del stripped["content_hash"]
    for n in stripped["nodes"]:
        n.pop("declared_type", None)
    assert stripped == program.to_json()


def test_declared_type_text():
    assert declared_type(JType("score", -1.0, 1.5)) == "Score[-1..1.5]"
    assert declared_type(JType("bool", optional=True)) == "Bool?"


def test_imported_programs_are_inlined():
    program = _program((ROOT / "examples" / "helpsteer2" / "helpfulness.gsr").read_text(encoding="utf-8"),
                       ROOT / "examples" / "helpsteer2" / "helpfulness.gsr")
    source = json_to_source(program_to_json(program))
    assert "import" not in source
    assert "criterion unsafe" in source


def test_a_minimal_hand_written_document():
    doc = {
        "format": "gsr-program", "version": 1, "name": "tiny",
        "nodes": [
            {"id": "ok", "kind": "criterion", "type": {"kind": "bool"}, "criterion": {"ask": "Is it ok?"}},
            {"id": "n1", "kind": "transform", "op": "normalize", "anonymous": True,
             "inputs": [{"port": "x", "source": "ok"}]},
            {"id": "final", "kind": "reduce", "op": "mean", "inputs": [{"port": "items", "slot": 0, "source": "n1"}]},
        ],
        "sink": "final",
        "readout": {"pointwise": {"scale": [1, 5]}},
    }
    source = json_to_source(doc)
    assert "node final = mean(items: [normalize(ok)])" in source
    program = _program(source)
    assert [n.id for n in program.nodes] == ["ok", "final.items[0]", "final"]


# ---- malformed documents ---------------------------------------------------------------------------------------
def _errors(doc) -> list[str]:
    with pytest.raises(JsonFormError) as info:
        json_to_source(doc)
    assert info.value.errors
    return info.value.errors


def _broken(**changes) -> dict:
    doc = _export(REFERENCE)
    for path, value in changes.items():
        target = doc
        keys = [int(k) if k.isdigit() else k for k in path.split("__")]
        for k in keys[:-1]:
            target = target[k]
        if value is DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return doc


DELETE = object()


@pytest.mark.parametrize("doc, expected", [
    ([], "(document): expected an object, found an array"),
    ({"format": "gsr-program"}, "(document): missing field `nodes`"),
    (_broken(format="other"), "format: expected 'gsr-program', found 'other'"),
    (_broken(version=7), "version: unsupported version 7"),
    (_broken(name="has space"), "name: 'has space' is not a valid rubric name"),
    (_broken(nodes=[]), "nodes: a program has at least one node"),
    (_broken(nodes__3__kind="wizard"), "nodes[3].kind: unknown node kind 'wizard'"),
    (_broken(nodes__4__inputs__0__source="foo"), "nodes[4].inputs[0].source: unknown node 'foo'"),
    (_broken(nodes__4__op="frobnicate"), "nodes[4].op: unknown operator 'frobnicate'"),
    (_broken(nodes__4__inputs__0__port="y"), "nodes[4].inputs[0].port: `normalize` has no port 'y'"),
    (_broken(nodes__6__inputs__1__slot=5), "nodes[6].inputs: port `items` has no slot 1"),
    (_broken(nodes__6__inputs__0__slot=None), "nodes[6].inputs[0].slot: expected a slot number"),
    (_broken(nodes__6__params__weights=[1, None]), "nodes[6].params.weights[1]: null is not a value"),
    (_broken(nodes__6__params__weights=[1, float("inf")]), "nodes[6].params.weights[1]: numbers must be finite"),
    (_broken(nodes__6__params__frob=1), "nodes[6].params.frob: `weighted_mean` has no parameter 'frob'"),
    (_broken(nodes__8__params=DELETE), "nodes[8].params: `cap` needs its `at` parameter"),
    (_broken(nodes__0__type__kind="fuzzy"), "nodes[0].type.kind: unknown type kind 'fuzzy'"),
    (_broken(nodes__0__type__labels=["1", "3"]), "nodes[0].type.labels: a numbered ordinal has consecutive"),
    (_broken(nodes__0__imputs=[]), "nodes[0].imputs: unknown field"),
    (_broken(nodes__0__criterion__procedure__kind="oracle"), "nodes[0].criterion.procedure.kind: unknown "
                                                             "procedure kind 'oracle'"),
    (_broken(nodes__3__criterion__procedure__name="word_cnt"), "nodes[3].criterion.procedure.name: unknown rule"),
    (_broken(nodes__1__id="correct"), "nodes[1].id: duplicate node id 'correct'"),
    (_broken(nodes__0__declared_type="Bool"), "nodes[0].declared_type: 'Bool' contradicts `type`"),
    (_broken(nodes__0__type__values=[0, 0.1, 0.5, 0.75, 1]), "nodes[0].type.values[1]: level `2` has value 0.1"),
    (_broken(sink="nowhere"), "sink: unknown node 'nowhere'"),
    (_broken(readout={}), "readout: a readout has `pointwise`, `pairwise` or both"),
    (_broken(readout__pairwise__on_tie="coin"), "readout.pairwise.on_tie: expected one of tie, abstain"),
    (_broken(nodes__7__anonymous=False), "nodes[7].id: 'capped.trigger' is not a valid node name"),
])
def test_malformed_documents_name_the_json_path(doc, expected):
    errors = _errors(doc)
    assert any(e.startswith(expected) for e in errors), errors


def test_an_anonymous_node_with_two_consumers():
    doc = _export(REFERENCE)
    doc["nodes"][9]["inputs"][1]["source"] = "capped.trigger"  # final's trigger now shares capped's
    errors = _errors(doc)
    assert any("anonymous node 'capped.trigger' is already used by 'capped'" in e for e in errors), errors


def test_an_unused_anonymous_node():
    doc = _export(REFERENCE)
    doc["nodes"].append({"id": "stray", "kind": "const", "value": 0.5, "anonymous": True})
    assert any(e.startswith("nodes[10]: anonymous node 'stray' is used by no node") for e in _errors(doc))


def test_an_anonymous_cycle_is_an_error_not_a_hang():
    doc = {
        "format": "gsr-program", "version": 1, "name": "loop",
        "nodes": [
            {"id": "a", "kind": "transform", "op": "invert", "anonymous": True, "inputs": [{"port": "x", "source": "b"}]},
            {"id": "b", "kind": "transform", "op": "invert", "anonymous": True, "inputs": [{"port": "x", "source": "a"}]},
            {"id": "s", "kind": "transform", "op": "invert", "inputs": [{"port": "x", "source": "a"}]},
        ],
        "sink": "s", "readout": {"pointwise": {"scale": [1, 5]}},
    }
    assert any("part of a cycle" in e or "already used" in e for e in _errors(doc))


def test_many_problems_are_reported_at_once():
    errors = _errors(_broken(nodes__3__kind="wizard", sink="nowhere", readout__pairwise__on_tie="coin"))
    assert len(errors) >= 3


# ---- gsr export / gsr import ------------------------------------------------------------------------------
def test_export_and_import_round_trip(tmp_path, capsys):
    src = tmp_path / "every.gsr"
    src.write_text(EVERYTHING, encoding="utf-8")
    out_json = tmp_path / "every.json"
    assert main(["export", str(src), "--json", "-o", str(out_json)]) == 0
    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert validate(doc, SCHEMA) == []
    out_gsr = tmp_path / "back.gsr"
    assert main(["import", str(out_json), "-o", str(out_gsr)]) == 0
    back = analyze_file(out_gsr)
    assert back.program.content_hash == doc["content_hash"]
    # the imported file is formatted
    from gsrlang.lang.syntax.formatter import format_source

    text = out_gsr.read_text(encoding="utf-8")
    assert format_source(text) == text
    capsys.readouterr()
    assert main(["export", str(out_gsr)]) == 0
    assert json.loads(capsys.readouterr().out)["content_hash"] == doc["content_hash"]


def test_export_to_stdout_and_import_from_stdin(tmp_path, monkeypatch, capsys):
    src = tmp_path / "r.gsr"
    src.write_text(REFERENCE, encoding="utf-8")
    assert main(["export", str(src)]) == 0
    exported = capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO(exported))
    assert main(["import", "-"]) == 0
    source = capsys.readouterr().out
    assert source.startswith('rubric helpfulness "How helpful')
    assert _program(source).content_hash == json.loads(exported)["content_hash"]


def test_export_of_a_program_with_errors(tmp_path, capsys):
    src = tmp_path / "bad.gsr"
    src.write_text("rubric r\ntask pointwise { scale = 1..5 }\nsink mean(items: [nowhere])\n", encoding="utf-8")
    out = tmp_path / "bad.json"
    assert main(["export", str(src), "-o", str(out), "--color", "never"]) == 1
    captured = capsys.readouterr()
    assert "GSR101" in captured.err and "unknown name `nowhere`" in captured.err
    assert not out.exists()
    assert main(["export", str(tmp_path / "missing.gsr")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_export_of_a_fragment(capsys):
    assert main(["export", str(ROOT / "stdlib" / "fragments" / "safety.gsr")]) == 1
    assert "is a fragment" in capsys.readouterr().err


def test_import_of_malformed_json(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "gsr-program",\n  "nodes": [1, 2,]\n}', encoding="utf-8")
    assert main(["import", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:2:" in err and "invalid JSON" in err
    assert "Traceback" not in err
    path.write_text('{"version": NaN}', encoding="utf-8")
    assert main(["import", str(path)]) == 1
    assert "NaN is not a JSON number" in capsys.readouterr().err


def test_import_of_a_wrong_shaped_document(tmp_path, capsys):
    path = tmp_path / "wrong.json"
    doc = _broken(nodes__4__inputs__0__source="foo", nodes__3__kind="wizard")
    path.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "out.gsr"
    assert main(["import", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: nodes[4].inputs[0].source: unknown node 'foo'" in err
    assert f"{path}: nodes[3].kind: unknown node kind 'wizard'" in err
    assert "not a valid program form (2 problems)" in err
    assert not out.exists()
    path.write_text("[1, 2, 3]", encoding="utf-8")
    assert main(["import", str(path)]) == 1
    assert "expected an object, found an array" in capsys.readouterr().err


def test_import_of_a_document_that_does_not_check(tmp_path, capsys):
    doc = _export(REFERENCE)
    doc["nodes"][4]["inputs"][0]["source"] = "unsafe"  # normalize(correct) -> normalize(unsafe): Score? into mean
    path = tmp_path / "unchecked.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["import", str(path), "--color", "never"]) == 1
    captured = capsys.readouterr()
    assert "GSR302" in captured.err and "unchecked.gsr" in captured.err
    assert "does not check" in captured.err
    assert captured.out == ""


def test_import_reports_a_type_the_checker_contradicts(tmp_path, capsys):
    doc = _export(REFERENCE)
    doc["nodes"][6]["type"] = {"kind": "bool", "optional": False}  # `body` is a Score
    path = tmp_path / "typed.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["import", str(path)]) == 1
    assert "nodes[6].type: the document says `Bool` but the checker infers `Score` for 'body'" in \
        capsys.readouterr().err


def test_import_of_a_missing_file(tmp_path, capsys):
    assert main(["import", str(tmp_path / "nope.json")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_the_documented_example_is_what_export_writes():
    doc_text = (ROOT / "docs" / "formatting-and-json.md").read_text(encoding="utf-8")
    source = re.search(r"```gsr\n(rubric tiny.*?)```", doc_text, re.S).group(1)
    exported = program_to_json(_program(source))
    shown = json.loads(re.search(r"```json\n(.*?)```", doc_text, re.S).group(1)
                       .replace('"sha256:..."', json.dumps(exported["content_hash"])))
    assert shown == exported
    assert validate(shown, SCHEMA) == []
