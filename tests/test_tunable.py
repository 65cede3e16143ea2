"""Tunable numbers (`0.35 in 0.1..0.6`): parsed, checked, formatted, in the JSON form, outside the content hash."""

from __future__ import annotations

from gsrlang.lang.check.driver import analyze
from gsrlang.lang.jsonform import json_to_source, program_to_json
from gsrlang.lang.syntax.formatter import format_source

TEXT = """rubric r
task pointwise { scale = 1..5  quantize = thresholds(0.2 in 0.1..0.3, 0.4, 0.6, 0.8 in 0.7..0.9) }
criterion a: Score = human(field: "a")
criterion b: Ordinal{poor, fair, good} = human(field: "b")
node m = weighted_mean(items: [a, map(b, to: {poor: 0, fair: 0.5 in 0.2..0.8, good: 1})], weights: [0.5 in 0..1, 1])
sink cap(base: m, trigger: threshold(a, at: 0.3 in 0.1..0.5), at: 0.9)
"""


def program(text=TEXT):
    result = analyze(text)
    assert result.program is not None, [d.message for d in result.diagnostics]
    return result.program


def test_ranges_reach_the_checked_program():
    p = program()
    tunes = {n.id: n.tune for n in p.nodes if n.tune}
    assert tunes == {"m": {"weights[0]": (0.0, 1.0)}, "m.items[1]": {"to[fair]": (0.2, 0.8)},
                     "sink.trigger": {"at": (0.1, 0.5)}}
    assert p.readout.pointwise.tune == ((0.1, 0.3), None, None, (0.7, 0.9))
    assert p.node("m").params["weights"] == [0.5, 1]  # the number itself is unchanged


def test_ranges_are_not_part_of_the_meaning():
    bare = TEXT
    for r in (" in 0.1..0.3", " in 0.7..0.9", " in 0.2..0.8", " in 0..1", " in 0.1..0.5"):
        bare = bare.replace(r, "")
    assert " in " not in bare
    assert program(bare).content_hash == program().content_hash
    assert program(bare).to_json() != program().to_json()


def test_format_and_json_round_trips_keep_the_ranges():
    formatted = format_source(TEXT)
    assert "0.5 in 0..1" in formatted and "thresholds(0.2 in 0.1..0.3, 0.4, 0.6, 0.8 in 0.7..0.9)" in formatted
    assert program(formatted).to_json() == program().to_json()
    again = json_to_source(program_to_json(program()))
    assert program(again).to_json() == program().to_json()


def test_bad_ranges_and_places_are_diagnosed():
    cases = {
        TEXT.replace("0.5 in 0..1", "0.5 in 1..0"): ("GSR305", "empty"),
        TEXT.replace("0.5 in 0..1", "0.5 in 0.6..1"): ("GSR305", "outside its tuning range"),
        TEXT.replace("at: 0.3 in 0.1..0.5", "at: 0.3 in 0.1..1.5"): ("GSR305", "leaves [0, 1]"),
        TEXT.replace('sink cap', 'node k = 0.5 in 0..1\nsink cap'): ("GSR320", "can be tuned"),
    }
    for text, (code, words) in cases.items():
        result = analyze(text)
        assert result.program is None
        assert any(d.code == code and words in d.message for d in result.diagnostics), \
            [(d.code, d.message) for d in result.diagnostics]


def test_in_is_still_a_name_elsewhere():
    p = program('rubric r\ntask pointwise { scale = 1..5 }\ncriterion in: Score = human(field: "x")\nsink in\n')
    assert p.sink == "in"
