"""The checker's output: the Program graph (ids, order, types, parameters), imports, aliases and readouts.

Every diagnostic code has a golden case in tests/cases/check/; these tests pin the
structure the runtime consumes.
"""

from __future__ import annotations

import textwrap

import pytest

from gsrlang.lang.catalog import Symbol
from gsrlang.lang.check.driver import analyze


def check(src: str, path=None):
    return analyze(textwrap.dedent(src), path)


def codes(src: str, path=None):
    return [d.code for d in check(src, path).diagnostics]


BASE = """
rubric r "d"
task pointwise { scale = 1..5 }
criterion a: Ordinal[1..5] { ask "a?" }
criterion b: Bool { ask "b?" }
criterion u: Bool? { ask "u?" }
"""


def test_program_graph_structure():
    result = check(BASE + """
node body = weighted_mean(items: [normalize(a), normalize(b)], weights: [0.7, 0.3])
node final = cap(base: body, trigger: default(u, value: false), at: 0.25)
sink final
""")
    assert result.ok, result.diagnostics
    p = result.program
    ids = [n.id for n in p.nodes]
    # every node after its inputs
    for n in p.nodes:
        for i in n.inputs:
            assert ids.index(i.source) < ids.index(n.id)
    assert p.sink == "final"
    body = p.node("body")
    assert body.kind == "reduce" and body.op == "weighted_mean"
    assert [(i.port, i.slot, i.source) for i in body.inputs] == [
        ("items", 0, "body.items[0]"), ("items", 1, "body.items[1]")]
    assert body.params == {"weights": [0.7, 0.3], "on_abstain": Symbol("fail")}
    assert p.node("final.trigger").op == "default"
    assert str(p.node("final.trigger").type) == "Bool"
    assert str(p.node("a").type) == "Ordinal[1..5]"
    assert p.readout.pointwise.lo == 1 and p.readout.pointwise.quantize == "round"


def test_defaults_filled_and_level_values_folded_in():
    result = check("""
    rubric r
    task pointwise { scale = 1..3 }
    criterion s: Ordinal{low, mid, high} { ask "?" level mid "m" = 0.8 }
    node t = threshold(normalize(s))
    sink normalize(t)
    """)
    assert result.ok, result.diagnostics
    p = result.program
    assert p.node("t").params == {"at": 0.5}
    assert p.node("s").type.values == (0.0, 0.8, 1.0)
    assert p.sink == "sink"


def test_transform_propagates_abstention_and_reducer_needs_policy():
    assert codes(BASE + "node m = mean(items: [normalize(u), normalize(a), normalize(b)])\nsink m") == ["GSR302"]
    result = check(BASE + "node m = mean(items: [normalize(u), normalize(a), normalize(b)], on_abstain: skip)\nsink m")
    assert result.ok
    assert result.program.node("m.items[0]").type.optional
    assert not result.program.node("m").type.optional


def test_gate_and_sink_refuse_abstention():
    assert codes(BASE + "node c = cap(base: normalize(a), trigger: u, at: 0.2)\nsink veto(base: c, trigger: b)") == ["GSR302"]
    assert codes(BASE + "sink normalize(u)") == ["GSR402", "GSR402", "GSR503"]
    assert check(BASE + "sink min(items: [default(normalize(u), value: 0.5), normalize(a), normalize(b)])").ok


def test_mask_introduces_abstention():
    result = check(BASE + """
node masked = mask(base: normalize(a), trigger: b)
sink mean(items: [masked, normalize(b), normalize(u)], on_abstain: skip)
""")
    assert result.ok, result.diagnostics
    assert str(result.program.node("masked").type) == "Score?"


def test_no_silent_coercions_with_fixes():
    result = check(BASE + "node m = mean(items: [a, normalize(b), default(normalize(u), value: 0)])\nsink m")
    (d,) = result.diagnostics
    assert d.code == "GSR301" and "Ordinal[1..5]" in d.message and "normalize" in d.help
    assert d.fixes[0].replacement == "normalize(a)"
    scaled = check(BASE + "criterion s: Score[0..10] = human(field: \"x\")\nsink mean(items: [s, normalize(a), normalize(b), default(normalize(u), value: 0)])")
    assert [x.code for x in scaled.diagnostics] == ["GSR301"]
    assert "scale(" in scaled.diagnostics[0].help


def test_alias_names_the_same_node():
    result = check(BASE + "node body = mean(items: [normalize(a), normalize(b), default(normalize(u), value: 0)])\nnode final = body\nsink final")
    assert result.ok, result.diagnostics
    assert result.program.sink == "body"


def test_content_hash_ignores_layout_and_comments():
    one = check(BASE + "node m = mean(items: [normalize(a), normalize(b), default(normalize(u), value: 0)])\nsink m")
    two = check("# a comment\n" + BASE.replace("\n", "\n\n") +
                "node m = mean(\n  items: [normalize(a), normalize(b), default(normalize(u), value: 0)],\n)\nsink m  # end")
    assert one.program.content_hash == two.program.content_hash
    three = check(BASE + "node m = mean(items: [normalize(b), normalize(a), default(normalize(u), value: 0)])\nsink m")
    assert three.program.content_hash != one.program.content_hash


def test_content_hash_is_computed_once_per_program_and_anew_for_a_changed_one():
    """A run names its program's hash on every result line: it is worked out once, not per item."""
    import attrs

    program = check(BASE + "node m = mean(items: [normalize(a), normalize(b), default(normalize(u), value: 0)])\nsink m").program
    first = program.content_hash
    assert program.content_hash is first
    renamed = attrs.evolve(program, name="other")
    assert renamed.content_hash != first and renamed.content_hash.startswith("sha256:")


def test_pairwise_readout_and_wrong_mode_settings():
    ok = check("""
    rubric p
    task pairwise { epsilon = 0.05 on_tie = first }
    criterion a: Bool { ask "?" }
    sink normalize(a)
    """)
    assert ok.ok and ok.program.readout.pairwise.on_tie == "first"
    assert codes("""
    task pairwise { scale = 1..5 }
    criterion a: Bool { ask "?" }
    sink normalize(a)
    """) == ["GSR504"]


def test_thresholds_quantization():
    ok = check("""
    task pointwise { scale = 1..3 quantize = thresholds(0.3, 0.7) }
    criterion a: Bool { ask "?" }
    sink normalize(a)
    """)
    assert ok.ok and ok.program.readout.pointwise.thresholds == (0.3, 0.7)
    assert codes("""
    task pointwise { scale = 1..3 quantize = thresholds(0.3) }
    criterion a: Bool { ask "?" }
    sink normalize(a)
    """) == ["GSR507"]


def test_imports_are_confined_and_must_be_fragments(tmp_path):
    (tmp_path / "frag.gsr").write_text('fragment f\ncriterion shared: Bool { ask "?" }\nnode unused = not(shared)\n')
    (tmp_path / "notfrag.gsr").write_text('rubric g\ncriterion x: Bool { ask "?" }\n')
    main = tmp_path / "sub" / "main.gsr"
    main.parent.mkdir()
    src = 'import "../frag.gsr"\ntask pointwise { scale = 1..5 }\nsink normalize(shared)\n'
    main.write_text(src)
    assert codes(src, main) == ["GSR011"]  # ../ leaves the main file's folder tree
    top = tmp_path / "main.gsr"
    result = check('import "frag.gsr"\ntask pointwise { scale = 1..5 }\nsink normalize(shared)\n', top)
    assert result.ok, result.diagnostics
    assert "unused" not in result.program  # imported but unused: pruned, no diagnostic
    assert codes('import "notfrag.gsr"\ntask pointwise { scale = 1..5 }\ncriterion a: Bool { ask "?" }\nsink normalize(a)\n', top) == ["GSR011"]
    assert codes('import "missing.gsr"\ntask pointwise { scale = 1..5 }\ncriterion a: Bool { ask "?" }\nsink normalize(a)\n', top) == ["GSR010"]


def test_stdlib_fragment_import():
    result = check("""
    import "std/fragments/safety.gsr"
    task pointwise { scale = 1..5 }
    criterion good: Ordinal[1..5] { ask "?" }
    sink cap(base: normalize(good), trigger: unsafe_flag, at: 0.2)
    """, "/tmp/x.gsr")
    assert result.ok, result.diagnostics
    assert str(result.program.node("unsafe").type) == "Bool?"


def test_import_cycle(tmp_path):
    (tmp_path / "a.gsr").write_text('fragment a\nimport "b.gsr"\ncriterion x: Bool { ask "?" }\n')
    (tmp_path / "b.gsr").write_text('fragment b\nimport "a.gsr"\ncriterion y: Bool { ask "?" }\n')
    main = tmp_path / "main.gsr"
    assert "GSR012" in codes('import "a.gsr"\ntask pointwise { scale = 1..5 }\nsink normalize(x)\n', main)


def test_cycle_is_reported_once_with_every_edge():
    result = check(BASE + """
node x = mean(items: [y, normalize(a)])
node y = mean(items: [x, normalize(b), default(normalize(u), value: 0)])
sink x
""")
    cyc = [d for d in result.diagnostics if d.code == "GSR401"]
    assert len(cyc) == 1
    assert cyc[0].message in ("cycle: x -> y -> x", "cycle: y -> x -> y")
    assert len(cyc[0].secondary) == 1
    assert not [d for d in result.diagnostics if d.code == "GSR402"]


@pytest.mark.parametrize("example", sorted(p.name for p in __import__("pathlib").Path(__file__).resolve().parents[1].joinpath("examples").rglob("*.gsr")))
def test_every_example_checks_clean(example):
    from pathlib import Path

    (path,) = [p for p in Path(__file__).resolve().parents[1].joinpath("examples").rglob("*.gsr") if p.name == example][:1]
    from gsrlang.lang.check.driver import analyze_file

    result = analyze_file(path)
    assert result.ok and not result.diagnostics, [f"{d.code} {d.message}" for d in result.diagnostics]


def test_judges_n_samples_the_given_procedure():
    result = check("""
    task pointwise { scale = 1..5 }
    criterion a: Bool { ask "?" judge llm(role: "strong") judges 3 aggregate majority }
    sink normalize(a)
    """)
    assert result.ok, result.diagnostics
    ensemble = result.program.node("a").criterion.ensemble
    assert [j.args for j in ensemble.judges] == [{"role": "strong"}] * 3
    assert codes("""
    task pointwise { scale = 1..5 }
    criterion a: Bool { ask "?" judge llm judges [llm, llm] aggregate majority }
    sink normalize(a)
    """) == ["GSR601"]


def test_a_comment_inside_a_criterion_body_is_not_a_label():
    result = check("""
    task pointwise { scale = 1..5 }
    criterion a: Bool { # TODO: sharpen
      ask "?" }
    criterion b: Nominal{ # the labels
      x, y } { ask "x or y?" }
    sink mean(items: [normalize(a), map(b, to: {x: 1, y: 0})])
    """)
    assert result.ok, result.diagnostics


def test_what_parsed_is_still_checked_after_a_syntax_error():
    result = check("""
    task pointwise { scale = 1..5 }
    criterion a: Bool { ask "?" }
    node broken = mean(items: [normalize(a)
    node typed = cap(base: a, trigger: a, at: 0.2)
    sink typed
    """)
    found = sorted({d.code for d in result.diagnostics})
    assert found == ["GSR001", "GSR301"]  # the type error in the next declaration is reported too
    assert result.program is None


def test_headerless_program_is_named_after_its_file():
    result = check("task pointwise { scale = 1..5 }\ncriterion a: Bool { ask \"?\" }\nsink normalize(a)\n",
                   "/tmp/2-my-rubric.gsr")
    assert result.program.name == "_2_my_rubric"


def test_the_language_reference_lists_the_whole_catalogue():
    """docs/language.md states the language exactly: every stdlib operator and judge kind signature appears in it."""
    from pathlib import Path

    from gsrlang.lang.catalog import default_catalog

    text = (Path(__file__).resolve().parents[1] / "docs" / "language.md").read_text(encoding="utf-8")
    missing = [op.signature() for op in default_catalog().operators.values() if op.signature() not in text]
    assert not missing, missing
    for rule in default_catalog().rules:
        assert f"rule.{rule}" in text or f"`{rule}(" in text, rule
    kinds = [k.signature() for k in default_catalog().judges.values() if k.signature() not in text]
    assert not kinds, kinds


def test_each_fix_says_whether_it_is_safe_to_apply_blindly():
    """The one conversion the types allow is safe; a renamed typo or a chosen threshold is a guess."""
    text = ("rubric r\ntask pointwise { scale = 1..5 }\n"
            "criterion correct: Ordinal[1..5] { ask \"?\" }\ncriterion long: Score { ask \"?\" }\n"
            "sink cap(base: corect, trigger: long, at: 0.5)\n")
    fixes = {f.title: f.applicability for d in analyze(text).diagnostics for f in d.fixes}
    assert fixes == {"rename to `correct`": "unsafe", "wrap in `threshold(...)`": "unsafe"}
    text = text.replace("corect", "correct").replace("trigger: long", "trigger: threshold(long)")
    fixes = {f.title: f.applicability for d in analyze(text).diagnostics for f in d.fixes}
    assert fixes == {"wrap in `normalize(...)`": "safe"}


def test_long_alias_chain_resolves_to_its_root():
    chain = "\n".join(f"node n{i} = n{i - 1}" for i in range(1, 3000))
    result = check(BASE + "node n0 = mean(items: [normalize(a), normalize(b), default(normalize(u), value: 0)])\n"
                   + chain + "\nsink n2999\n")
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.program.sink == "n0"


def test_alias_cycle_reached_through_a_chain_is_reported_once_from_its_first_member():
    result = check(BASE + "node lead = c1\nnode c1 = c2\nnode c2 = c3\nnode c3 = c1\nsink normalize(a)\n")
    cyc = [d.message for d in result.diagnostics if d.code == "GSR401"]
    assert cyc == ["cycle: c1 -> c2 -> c3 -> c1"]
