"""Limits on what a program's text may hold: each is a diagnostic, never an internal error (issue 11).

Number literals are bounded on their text (GSR006); imports refuse a NUL byte and nest
at most MAX_IMPORT_DEPTH deep (GSR011). The golden cases in tests/cases/check show the
rendered diagnostics; these tests pin the edges.
"""

from __future__ import annotations

import copy
import json

import pytest

from gsrlang.cli import main
from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.lang.check.imports import MAX_IMPORT_DEPTH
from gsrlang.lang.syntax.parser import MAX_INT, MAX_NESTING

HEAD = 'rubric r "d"\ntask pointwise { scale = 1..5 }\ncriterion a: Ordinal[1..5] { ask "?" }\n'


def codes(text: str, path=None) -> list[str]:
    return [d.code for d in analyze(text, path).diagnostics]


@pytest.mark.parametrize("literal", [str(MAX_INT + 1), "9" * 5000, "1e400", "1.5e309", "1e" + "9" * 400,
                                     "1e-400", "0.0000001e-330"])
def test_number_literals_out_of_range_are_gsr006(literal):
    assert codes(HEAD + f"sink cap(base: normalize(a), trigger: true, at: {literal})\n") == ["GSR006"]


@pytest.mark.parametrize("literal", [str(MAX_INT), "0" * 30 + "7", "1e308", "0.0", "0e-999", "5e-324"])
def test_number_literals_in_range_are_read(literal):
    found = codes(HEAD + f"sink cap(base: normalize(a), trigger: true, at: {literal})\n")
    assert "GSR006" not in found


@pytest.mark.parametrize("where", ["level 99999999999999999999 \"x\"", "judges 99999999999999999999 aggregate mean"])
def test_bounds_hold_in_every_integer_position(where):
    text = ('rubric r "d"\ntask pointwise { scale = 1..5 }\n'
            f'criterion a: Ordinal[1..5] {{ ask "?" {where} }}\nsink normalize(a)\n')
    assert "GSR006" in codes(text)


def test_a_bad_literal_drops_only_its_declaration():
    text = HEAD + "criterion b: Bool = rule.word_count(above: 1e999)\ncriterion c: Bool = rule.nope()\nsink normalize(a)\n"
    assert sorted(codes(text)) == ["GSR006", "GSR104"]


def test_nul_byte_in_an_import_path_is_a_diagnostic(tmp_path):
    text = 'rubric r "d"\nimport "a\x00b.gsr"\n' + HEAD.split("\n", 1)[1] + "sink normalize(a)\n"
    result = analyze(text, tmp_path / "main.gsr")
    assert [d.message for d in result.diagnostics] == ["import path contains a NUL byte"]


def test_an_import_path_too_long_for_the_file_system_is_a_diagnostic(tmp_path):
    text = f'rubric r "d"\nimport "{"x" * 5000}.gsr"\n' + HEAD.split("\n", 1)[1] + "sink normalize(a)\n"
    assert codes(text, tmp_path / "main.gsr") == ["GSR010"]


def test_import_chains_stop_at_the_depth_limit(tmp_path):
    n = 1000  # far deeper than the interpreter's stack would allow if the limit were not enforced
    for i in range(n):
        nxt = f'import "f{i + 1}.gsr"\n' if i + 1 < n else ""
        (tmp_path / f"f{i}.gsr").write_text(f'fragment f{i}\n{nxt}criterion c{i}: Bool {{ ask "?" }}\n')
    main = tmp_path / "main.gsr"
    main.write_text('rubric r "d"\nimport "f0.gsr"\ntask pointwise { scale = 1..5 }\nsink normalize(c0)\n')
    result = analyze_file(main)
    deep = [d for d in result.diagnostics if d.code == "GSR011"]
    assert [d.message for d in deep] == [f"imports nested more than {MAX_IMPORT_DEPTH} deep"]
    assert deep[0].primary.path.endswith(f"f{MAX_IMPORT_DEPTH - 1}.gsr")


def test_import_chains_within_the_limit_check_clean(tmp_path):
    n = MAX_IMPORT_DEPTH
    for i in range(n):
        nxt = f'import "f{i + 1}.gsr"\n' if i + 1 < n else ""
        (tmp_path / f"f{i}.gsr").write_text(f'fragment f{i}\n{nxt}criterion c{i}: Bool {{ ask "?" }}\n')
    items = ", ".join(f"c{i}" for i in range(n))
    main = tmp_path / "main.gsr"
    main.write_text(f'rubric r "d"\nimport "f0.gsr"\ntask pointwise {{ scale = 1..5 }}\nsink normalize(any(items: [{items}]))\n')
    result = analyze_file(main)
    assert result.ok, [d.message for d in result.diagnostics]


# ---- the JSON form (gsr import) ----------------------------------------------------------------------------
NOT_CHAIN_HEAD = 'rubric r "d"\ntask pointwise { scale = 1..5 }\ncriterion a: Bool { ask "?" }\n'


def _not_chain(n: int) -> dict:
    """The JSON form of `sink normalize(not(not(... a)))` with n anonymous `not` nodes."""
    from gsrlang.lang.jsonform import program_to_json

    program = analyze(NOT_CHAIN_HEAD + "sink normalize(" + "not(" * 3 + "a" + ")" * 4 + "\n").program
    doc = json.loads(json.dumps(program_to_json(program)))
    crit, first_not, *_ , sink = doc["nodes"]
    nots = []
    for i in range(n):
        node = copy.deepcopy(first_not)
        node["id"] = f"sink.x.{i}"
        node["inputs"][0]["source"] = nots[-1]["id"] if nots else crit["id"]
        nots.append(node)
    sink["inputs"][0]["source"] = nots[-1]["id"]
    doc["nodes"] = [crit, *nots, sink]
    doc.pop("content_hash")
    return doc


def test_a_chain_of_anonymous_nodes_as_deep_as_the_parser_reads_is_imported():
    from gsrlang.lang.jsonform import json_to_source

    source = json_to_source(_not_chain(MAX_NESTING - 1))  # normalize's bracket and 63 of not's
    assert analyze(source).ok


def test_a_longer_chain_of_anonymous_nodes_is_a_form_error_naming_the_node():
    from gsrlang.lang.jsonform import JsonFormError, json_to_source

    with pytest.raises(JsonFormError) as info:
        json_to_source(_not_chain(5000))
    first_too_deep = 5000 - MAX_NESTING + 1  # nodes[5000] is the sink's input, one bracket deep
    assert info.value.errors == [f"nodes[{first_too_deep}]: anonymous nodes nest more than {MAX_NESTING} brackets deep "
                                 'here: make some of them named nodes (`"anonymous": false`, an id that is a name)']


@pytest.mark.parametrize("document, message", [
    ("[" * 100_000 + "]" * 100_000, "invalid JSON: arrays or objects nested too deeply"),
    ('{"format": "gsr-program", "nodes": [' + "[" * 500 + "]" * 500 + "]}", "nested more than 80 levels deep"),
    ('{"format": "gsr-program", "version": 1, "nodes": [], "sink": 1' + "0" * 400 + "}", "integer out of range"),
    ('{"format": "gsr-program", "version": 1, "nodes": [], "sink": 1e400}', "expected a string"),
    ("1" * 5000, "invalid JSON: Exceeds the limit"),
])
def test_import_reports_documents_beyond_the_limits(tmp_path, capsys, document, message):
    path = tmp_path / "doc.json"
    path.write_text(document)
    assert main(["import", str(path)]) == 1
    assert message in capsys.readouterr().err


# ---- JSON and SARIF output stay valid documents when gsr itself fails ------------------------------------------
def _boom(*args, **kwargs):
    raise ZeroDivisionError("injected")


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_an_internal_error_is_reported_inside_the_document(tmp_path, capsys, monkeypatch, fmt):
    import gsrlang.lang.check.driver as driver

    good, bad = tmp_path / "a.gsr", tmp_path / "b.gsr"
    good.write_text(NOT_CHAIN_HEAD + "sink normalize(a)\nnode unused = normalize(a)\n")
    bad.write_text(NOT_CHAIN_HEAD + "sink normalize(a)\n")
    real = driver.analyze_file
    monkeypatch.setattr(driver, "analyze_file", lambda p, *a: _boom() if str(p) == str(bad) else real(p, *a))
    assert main(["check", str(good), str(bad), "--format", fmt]) == 2
    doc = json.loads(capsys.readouterr().out)
    if fmt == "json":
        assert [(d["code"], d["severity"]) for d in doc] == [("GSR402", "error"), (None, "internal-error")]
        assert doc[1]["path"] == str(bad) and "ZeroDivisionError: injected" in doc[1]["message"]
    else:
        run = doc["runs"][0]
        assert [r["ruleId"] for r in run["results"]] == ["GSR402"]
        (invocation,) = run["invocations"]
        assert invocation["executionSuccessful"] is False
        (note,) = invocation["toolExecutionNotifications"]
        assert "ZeroDivisionError: injected" in note["message"]["text"]


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_a_failure_while_writing_the_report_still_gives_a_document(tmp_path, capsys, monkeypatch, fmt):
    import gsrlang.lang.diagnostics.render as render

    path = tmp_path / "a.gsr"
    path.write_text(NOT_CHAIN_HEAD + "sink normalize(b)\n")
    monkeypatch.setattr(render, "diagnostic_json", _boom)
    monkeypatch.setattr(render, "_range", _boom)
    assert main(["check", str(path), "--format", fmt]) == 2
    text = json.dumps(json.loads(capsys.readouterr().out))
    assert "internal error while writing the report: ZeroDivisionError" in text
