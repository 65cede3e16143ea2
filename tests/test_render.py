"""The diagnostic renderers: full (rustc-style), concise, json, sarif 2.1.0 and github.

Lines and columns are 1-based, and a range's end column is exclusive. These tests pin
each format's fields on programs with known positions; the golden files in
tests/cases/check/ pin the full format of every code.
"""

from __future__ import annotations

import json
import re

from gsrlang.lang.check.driver import analyze
from gsrlang.lang.diagnostics import Diagnostic, Fix, Label, error, warning
from gsrlang.lang.diagnostics.codes import CODES
from gsrlang.lang.diagnostics.render import (
    FORMATS,
    Sources,
    diagnostic_json,
    render_concise,
    render_full,
    render_github,
    render_json,
    render_sarif,
)
from gsrlang.lang.span import SourceText, Span

PATH = "rubrics/helpfulness.gsr"

# line 4, column 16: `corect` (6 characters), with a rename fix to `correct`
TYPO = (
    'rubric helpfulness "How helpful is the response?"\n'
    "task pointwise { scale = 1..5 }\n"
    'criterion correct: Ordinal[1..5] { ask "How correct are the facts?" }\n'
    "sink normalize(corect)\n"
)
# an error with a secondary label (primary on line 3, secondary on line 2) and a warning on line 6
MIXED = (
    'rubric helpfulness "How helpful is the response?"\n'
    "task pointwise { scale = 1..5 }\n"
    "task pointwise { scale = 1..10 }\n"
    'criterion correct: Ordinal[1..5] { ask "How correct are the facts?" }\n'
    'criterion clear: Ordinal[1..5] { ask "How clear is it?" }\n'
    "sink mean(items: [normalize(correct), normalize(clear)], on_abstain: skip)\n"
)
WARNING_ONLY = (
    'rubric helpfulness "How helpful is the response?"\n'
    "task pointwise { scale = 1..5 }\n"
    'criterion correct: Ordinal[1..5] { ask "How correct are the facts?" }\n'
    "sink cap(base: normalize(correct), trigger: true, at: 0.5)\n"
)


def diagnose(text: str, path: str = PATH):
    analysis = analyze(text, None)
    return list(analysis.diagnostics), Sources(SourceText(path, text))


# ---- concise --------------------------------------------------------------------------------------------
def test_concise_is_path_line_col_code_message():
    ds, sources = diagnose(TYPO)
    assert render_concise(ds, sources) == f"{PATH}:4:16: GSR101 unknown name `corect`\n"


def test_concise_one_line_per_diagnostic_in_order():
    ds, sources = diagnose(MIXED)
    lines = render_concise(ds, sources).splitlines()
    assert len(lines) == len(ds) >= 1
    for line in lines:
        assert re.fullmatch(rf"{re.escape(PATH)}:\d+:\d+: GSR\d{{3}} \S.*", line), line
    assert render_concise([], sources) == ""


# ---- json -----------------------------------------------------------------------------------------------
def test_json_fields_and_exclusive_end():
    ds, sources = diagnose(TYPO)
    items = json.loads(render_json([(sources, ds)]))
    assert len(items) == 1
    item = items[0]
    assert item["code"] == "GSR101"
    assert item["severity"] == "error"
    assert item["path"] == PATH
    assert item["range"] == {"start": {"line": 4, "column": 16}, "end": {"line": 4, "column": 22}}
    start, end = item["offsets"]
    assert TYPO[start:end] == "corect"
    assert item["label"] == "not declared"
    assert item["help"] == "did you mean `correct`?"
    assert item["related"] == [] and item["notes"] == []
    fix = item["fixes"][0]
    assert fix["replacement"] == "correct" and fix["offsets"] == [start, end]


def test_json_message_is_the_diagnostic_message():
    ds, sources = diagnose(TYPO)
    item = json.loads(render_json([(sources, ds)]))[0]
    assert item["message"] == "unknown name `corect`"


def test_json_related_labels_and_severity():
    ds, sources = diagnose(MIXED)
    items = {i["code"]: i for i in json.loads(render_json([(sources, ds)]))}
    assert set(items) == {"GSR506", "GSR701"}
    twice = items["GSR506"]
    assert twice["severity"] == "error"
    assert twice["range"] == {"start": {"line": 3, "column": 6}, "end": {"line": 3, "column": 15}}
    (related,) = twice["related"]
    assert related["path"] == PATH and related["message"] == "first declared here"
    s, e = related["offsets"]
    assert MIXED[s:e] == "task pointwise { scale = 1..5 }"
    assert related["range"] == {"start": {"line": 2, "column": 1}, "end": {"line": 2, "column": 32}}
    assert items["GSR701"]["severity"] == "warning"
    assert items["GSR701"]["range"]["start"]["line"] == 6


def test_json_several_files_in_one_array():
    ds1, s1 = diagnose(TYPO, "a.gsr")
    ds2, s2 = diagnose(WARNING_ONLY, "b.gsr")
    items = json.loads(render_json([(s1, ds1), (s2, []), (s2, ds2)]))
    assert [(i["path"], i["code"], i["severity"]) for i in items] == [
        ("a.gsr", "GSR101", "error"), ("b.gsr", "GSR702", "warning")]
    assert json.loads(render_json([])) == []


def test_json_zero_width_span_at_end_of_file():
    text = 'rubric r "no sink"\ntask pointwise { scale = 1..5 }\ncriterion c: Bool { ask "ok?" }\n'
    ds, sources = diagnose(text)
    (item,) = [i for i in json.loads(render_json([(sources, ds)])) if i["code"] == "GSR501"]
    assert item["range"]["start"] == item["range"]["end"] == {"line": 3, "column": 32}


def test_json_keeps_non_ascii():
    text = TYPO.replace("How correct are the facts?", "Les faits sont-ils exacts ? é")
    ds, sources = diagnose(text.replace("normalize(corect)", "normalize(exactitude)"))
    out = render_json([(sources, ds)])
    assert json.loads(out)[0]["range"]["start"] == {"line": 4, "column": 16}


# ---- sarif ----------------------------------------------------------------------------------------------
def test_sarif_2_1_0_document():
    ds, sources = diagnose(MIXED)
    doc = json.loads(render_sarif([(sources, ds)], "9.9.9"))
    assert doc["version"] == "2.1.0"
    assert "sarif-2.1.0" in doc["$schema"]
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gsr" and driver["version"] == "9.9.9"
    rules = {r["id"]: r for r in driver["rules"]}
    assert set(rules) == {d.code for d in ds}
    for code, rule in rules.items():
        assert rule["shortDescription"]["text"] == CODES[code].title
        assert rule["defaultConfiguration"]["level"] == ("warning" if CODES[code].severity == "warning" else "error")
        assert code in rule["helpUri"]
    results = run["results"]
    assert [r["ruleId"] for r in results] == [d.code for d in ds]
    for r, d in zip(results, ds):
        assert r["level"] == ("error" if d.is_error else "warning")
        assert r["message"]["text"].startswith(d.message)
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == PATH
        region = loc["region"]
        assert set(region) == {"startLine", "startColumn", "endLine", "endColumn"}
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        src = SourceText(PATH, MIXED)
        assert (region["startLine"], region["startColumn"]) == src.position(d.span.start)
        assert (region["endLine"], region["endColumn"]) == src.position(d.span.end)
    assert [r["level"] for r in results] == ["error", "warning"]
    twice = results[0]
    (related,) = twice["relatedLocations"]
    assert related["message"]["text"] == "first declared here" and related["id"] == 0
    assert related["physicalLocation"]["region"]["startLine"] == 2
    assert "help:" in results[1]["message"]["text"]


def test_sarif_empty_run_and_several_files():
    doc = json.loads(render_sarif([], "0"))
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []
    ds1, s1 = diagnose(TYPO, "a.gsr")
    ds2, s2 = diagnose(TYPO, "dir/b.gsr")
    doc = json.loads(render_sarif([(s1, ds1), (s2, ds2)], "0"))
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]]
    assert uris == ["a.gsr", "dir/b.gsr"]
    assert [r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]] == ["GSR101"]  # each rule once


def test_sarif_columns_agree_with_the_declared_column_kind():
    # `other` comes after an emoji: 1 code point, but 2 UTF-16 code units
    text = TYPO.replace("sink normalize(corect)\n", 'criterion emoji: Bool { ask "😀?" }  criterion other: Bool { ask "?" }\n'
                        "sink normalize(correct)\n")
    ds, sources = diagnose(text)
    run = json.loads(render_sarif([(sources, ds)], "0"))["runs"][0]
    result = next(r for r in run["results"] if "`other`" in r["message"]["text"])
    region = result["locations"][0]["physicalLocation"]["region"]
    line = text.splitlines()[region["startLine"] - 1]
    before = line[:line.index("other")]
    in_code_points, in_utf16 = len(before) + 1, len(before.encode("utf-16-le")) // 2 + 1
    assert in_code_points != in_utf16
    expected = in_code_points if run.get("columnKind") == "unicodeCodePoints" else in_utf16
    assert region["startColumn"] == expected


# ---- github ---------------------------------------------------------------------------------------------
def test_github_workflow_commands():
    ds, sources = diagnose(TYPO)
    assert render_github(ds, sources) == (
        f"::error file={PATH},line=4,col=16,endLine=4,endColumn=22,title=GSR101::"
        "unknown name `corect` (help: did you mean `correct`?)\n")
    ds, sources = diagnose(WARNING_ONLY)
    out = render_github(ds, sources)
    assert out.startswith(f"::warning file={PATH},line=4,col=45,") and "title=GSR702::" in out
    assert render_github([], sources) == ""


def test_github_escapes_properties_and_message():
    text = "x\n"
    d = error("GSR001", "50% of a\nmessage", Span(0, 1), help=None)
    out = render_github([d], Sources(SourceText("odd,name:1.gsr", text)))
    assert out == "::error file=odd%2Cname%3A1.gsr,line=1,col=1,endLine=1,endColumn=2,title=GSR001::50%25 of a%0Amessage\n"


# ---- full -----------------------------------------------------------------------------------------------
def test_full_snippet_caret_help_and_no_colour():
    ds, sources = diagnose(TYPO)
    assert render_full(ds, sources) == (
        "error[GSR101]: unknown name `corect`\n"
        f" --> {PATH}:4:16\n"
        "  |\n"
        "4 | sink normalize(corect)\n"
        "  |                ^^^^^^ not declared\n"
        "  = help: did you mean `correct`?\n")
    assert "\x1b[" not in render_full(ds, sources, color=False)


def test_full_colour_only_when_asked():
    ds, sources = diagnose(TYPO)
    coloured = render_full(ds, sources, color=True)
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == render_full(ds, sources)


def test_full_secondary_label_notes_and_warning():
    ds, sources = diagnose(MIXED)
    out = render_full(ds, sources)
    assert "error[GSR506]: `task pointwise` is declared twice" in out
    assert "  | ------------------------------- first declared here\n" in out
    assert "\nwarning[GSR701]: `on_abstain` has no effect" in out
    d = warning("GSR703", "the weights sum to zero", Span(0, 6), "here", notes=("a note",), help="a help")
    full = render_full([d], Sources(SourceText("w.gsr", "rubric r\n")))
    assert full.endswith("  = note: a note\n  = help: a help\n")


def test_full_label_in_another_file(tmp_path):
    other = tmp_path / "frag.gsr"
    other.write_text('fragment frag "f"\ncriterion correct: Bool { ask "?" }\n', encoding="utf-8")
    d = error("GSR103", "`correct` is declared twice", Span(10, 17), "declared again here",
              secondary=[Label(Span(28, 35), "first declared here", str(other))])
    text = "criterion correct: Bool { ask \"?\" }\n"
    out = render_full([d], Sources(SourceText("main.gsr", text)))
    assert f" ::: {other}:2:11" in out
    assert "  |           ------- first declared here" in out


def test_full_snippet_lines_are_in_source_order():
    text = TYPO.replace("sink normalize(corect)", 'criterion correct: Bool { ask "Again?" }\nsink normalize(correct)')
    ds, sources = diagnose(text)
    assert [d.code for d in ds] == ["GSR103"]
    numbers = [int(m.group(1)) for m in re.finditer(r"^(\d+) \|", render_full(ds, sources), re.M)]
    assert numbers == sorted(numbers) == [3, 4]


def test_full_span_over_several_lines_is_underlined_to_the_end_of_its_first_line():
    text = "node a = mean(items: [\n  x,\n])\n"
    d = error("GSR204", "port `items` has no slots", Span(21, 27), "here")
    out = render_full([d], Sources(SourceText("m.gsr", text)))
    assert "1 | node a = mean(items: [\n  |                      ^ here\n" in out


def test_full_tabs_keep_the_caret_aligned():
    text = "\tsink\tnormalize(corect)\n"
    start = text.index("corect")
    d = error("GSR101", "unknown name `corect`", Span(start, start + 6), "not declared")
    lines = render_full([d], Sources(SourceText("t.gsr", text))).splitlines()
    code_line, caret_line = lines[3], lines[4]
    assert code_line.index("corect") == caret_line.index("^")


def test_full_crlf_source_has_no_carriage_returns():
    text = TYPO.replace("\n", "\r\n")
    ds, sources = diagnose(text)
    out = render_full(ds, sources)
    assert "\r" not in out
    assert f" --> {PATH}:4:16\n" in out
    assert render_concise(ds, sources) == f"{PATH}:4:16: GSR101 unknown name `corect`\n"


def test_full_diagnostic_without_source_text():
    d = error("GSR005", "no such file or folder: `x.gsr`", Span(0, 0))
    out = render_full([d], Sources(SourceText("x.gsr", "")))
    assert out.startswith("error[GSR005]: no such file or folder: `x.gsr`\n --> x.gsr:1:1\n")


def test_label_in_unreadable_file_shows_the_path_only(tmp_path):
    d = error("GSR001", "syntax error", Span(0, 3), "here", path=str(tmp_path / "gone.gsr"))
    out = render_full([d], Sources(SourceText("main.gsr", "abc\n")))
    assert f"--> {tmp_path / 'gone.gsr'}\n" in out and "= here" in out
    items = json.loads(render_json([(Sources(SourceText("main.gsr", "abc\n")), [d])]))
    assert items[0]["range"]["start"] == {"line": 1, "column": 1}


def test_every_format_renders_every_golden_case_without_error():
    """Smoke: the five formats accept diagnostics with fixes, secondary labels and zero-width spans."""
    assert FORMATS == ("full", "concise", "json", "sarif", "github")
    ds = [
        error("GSR101", "m", Span(0, 0), "zero width", fixes=(Fix("rename", Span(0, 0), "x"),)),
        warning("GSR701", "w", Span(0, 3), secondary=[Label(Span(1, 2), "")]),
    ]
    sources = Sources(SourceText("s.gsr", "abc"))
    assert render_full(ds, sources) and render_concise(ds, sources) and render_github(ds, sources)
    assert json.loads(render_json([(sources, ds)]))[0]["fixes"][0]["replacement"] == "x"
    sarif = json.loads(render_sarif([(sources, ds)], "0"))
    assert sarif["runs"][0]["results"][1]["relatedLocations"][0]["message"]["text"] == "related"
    assert diagnostic_json(ds[1], sources)["severity"] == "warning"
    assert isinstance(ds[0], Diagnostic)
