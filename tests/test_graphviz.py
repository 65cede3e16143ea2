"""`gsr render`: DOT (golden), real SVG from Graphviz (nodes, port-targeted edges), escaping, trace overlays,
and the message when Graphviz is missing.

Regenerate the golden DOT with `GSR_UPDATE_GOLDEN=1 pytest tests/test_graphviz.py`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gsrlang.lang.check.driver import analyze, analyze_file
from gsrlang.trace.schema import TraceError
from gsrlang.views import render

CASES = Path(__file__).resolve().parent / "cases" / "render"
SVG = "{http://www.w3.org/2000/svg}"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's `dot` is not installed "
                               "(apt-get install graphviz); CI installs it")


def program_of(text: str, path: str | None = None):
    analysis = analyze(text, path)
    assert analysis.program is not None, analysis.diagnostics
    return analysis.program


def gsr(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gsrlang.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def svg_of(program, trace=None) -> ET.Element:
    data = render.build_graph(program, trace).pipe(format="svg")
    return ET.fromstring(data)


def groups(svg: ET.Element, cls: str) -> dict[str, ET.Element]:
    return {g.get("id"): g for g in svg.iter(f"{SVG}g") if g.get("class") == cls}


def texts(element: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in element.iter(f"{SVG}text")]


# ---- DOT (the golden files: tests/test_render_golden.py) -----------------------------------------------------------------------------------------------
def test_dot_enters_named_ports_and_labels_slots():
    dot = render.to_dot(analyze_file(CASES / "helpfulness.gsr").program)
    assert '"capped.trigger":o:s -> capped:in_trigger:n' in dot
    assert "body:o:s -> capped:in_base:n" in dot
    # a list port's edges carry their slot, and the slot's weight
    assert re.search(r'"body.items\[1\]":o:s -> body:in_items_1:n \[label="\[1\] weights=0.3"', dot)
    assert "scale = 1..5" in dot and "on_tie = tie" in dot and "rule.word_count(above: 600)" in dot


# ---- SVG -------------------------------------------------------------------------------------------------
@needs_dot
def test_svg_has_every_node_edge_sink_readout_and_legend():
    program = analyze_file(CASES / "helpfulness.gsr").program
    svg = svg_of(program)
    nodes, edges = groups(svg, "node"), groups(svg, "edge")
    for node in program.nodes:
        assert f"node:{node.id}" in nodes
    for source, target, inp in program.edges():
        slot = f"[{inp.slot}]" if inp.slot is not None else ""
        assert f"edge:{source}->{target}:{inp.port}{slot}" in edges
    assert {"sink", "readout:pointwise", "readout:pairwise", "legend"} <= set(nodes)
    assert "edge:final->@sink" in edges
    shown = texts(nodes["node:correct"])
    assert "correct" in shown and "llm" in shown and any("Ordinal[1..5]" in t for t in shown)
    assert any("weights = [0.7, 0.3]" in t for t in texts(nodes["node:body"]))
    assert any("rule.word_count(above: 600)" in t for t in texts(nodes["node:rambling"]))
    legend = " ".join(texts(nodes["legend"]))
    for kind in ("criterion", "transform", "reduce", "gate", "sink"):
        assert kind in legend


def _text_x(node: ET.Element, startswith: str) -> float:
    for t in node.iter(f"{SVG}text"):
        if "".join(t.itertext()).startswith(startswith):
            return float(t.get("x"))
    raise AssertionError(f"no text {startswith!r}")


def _arrow_tip(edge: ET.Element) -> tuple[float, float]:
    poly = next(edge.iter(f"{SVG}polygon"))
    points = [tuple(map(float, p.split(","))) for p in poly.get("points").split()]
    return max(points, key=lambda p: p[1])  # TB layout: the arrow points down, its tip is the lowest point


@needs_dot
def test_svg_edges_enter_the_cell_of_their_port():
    svg = svg_of(analyze_file(CASES / "helpfulness.gsr").program)
    nodes, edges = groups(svg, "node"), groups(svg, "edge")
    capped = nodes["node:capped"]
    base_x, trigger_x = _text_x(capped, "base:"), _text_x(capped, "trigger:")
    for edge_id, port_x, other_x in (("edge:body->capped:base", base_x, trigger_x),
                                     ("edge:capped.trigger->capped:trigger", trigger_x, base_x)):
        tip_x, _ = _arrow_tip(edges[edge_id])
        assert abs(tip_x - port_x) < abs(tip_x - other_x), edge_id


AWKWARD = r'''rubric odd "A <b>bold</b> & 'quoted' \"rubric\" \\ with a backslash"
task pointwise { scale = 0..10  quantize = none }
criterion lt_gt: Bool { ask "Is 3 < 4 && 5 > 2? Say \"yes\" or 'no' </TD></TABLE>" }
criterion pattern: Bool = rule.regex(pattern: "<[a-z]+>&\\d\"")
criterion from_data: Score = human(field: "scores.<x>&\"y\"")
node amp_and = cap(base: from_data, trigger: any(items: [lt_gt, pattern]), at: 0.5)
sink amp_and
'''


@needs_dot
def test_all_user_text_is_escaped():
    program = program_of(AWKWARD)
    dot = render.to_dot(program)
    labels = re.findall(r"label=<(.*?)> (?:id|labelloc)", dot)
    assert labels and not any("<b>" in label or "</TD></TABLE> " in label for label in labels)
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;" in dot
    svg = svg_of(program)  # Graphviz accepted every label, and the SVG is well-formed XML
    everything = " ".join(texts(svg))
    assert "A <b>bold</b> & 'quoted' \"rubric\" \\ with a backslash" in everything
    assert 'Is 3 < 4 && 5 > 2? Say "yes" or' in everything
    assert 'rule.regex(pattern: "<[a-z]+>&\\\\d\\"", ignore_case: false)' in everything
    assert "scores.<x>&" in everything


# ---- trace overlay ------------------------------------------------------------------------------------------
def _trace_record(item_id="42") -> dict:
    outputs = {"correct": [5, 3], "coherent": [4, 4], "unsafe": [None, True], "rambling": [False, False],
               "body.items[0]": [1.0, 0.5], "body.items[1]": [0.75, 0.75], "body": [0.925, 0.575],
               "capped.trigger": [False, True], "capped": [0.925, 0.25], "final": [0.925, 0.25]}
    return {"trace_version": 1, "program": {"name": "helpfulness", "hash": "sha256:0", "sink": "final"},
            "mode": "pairwise", "item": {"id": item_id, "line": 1, "candidates": ["A", "B"]}, "status": "ok",
            "nodes": [{"id": k, "output": v} for k, v in outputs.items()],
            "readout": {"mode": "pairwise", "status": "ok", "sink": {"A": 0.925, "B": 0.25}, "winner": "first",
                        "reason": None},
            "result": {"id": item_id, "status": "ok", "winner": "first", "label": "first"}}


@pytest.fixture
def trace_file(tmp_path) -> Path:
    path = tmp_path / "trace.jsonl"
    other = _trace_record("7")
    path.write_text(json.dumps(other) + "\n" + json.dumps(_trace_record()) + "\n", encoding="utf-8")
    return path


def test_read_trace_item(trace_file):
    item = render.read_trace_item(trace_file, "42")
    assert item.candidates == ("A", "B") and item.mode == "pairwise"
    assert item.outputs["unsafe"][0] is render.ABSTAINED and item.outputs["final"] == (0.925, 0.25)
    with pytest.raises(TraceError, match="item `9` is not in trace.*7, 42"):
        render.read_trace_item(trace_file, "9")


@needs_dot
def test_trace_overlay_shows_values_fired_gates_abstentions_and_the_decision_path(trace_file):
    program = analyze_file(CASES / "helpfulness.gsr").program
    svg = svg_of(program, render.read_trace_item(trace_file, "42"))
    nodes, edges = groups(svg, "node"), groups(svg, "edge")
    assert "0.925" in " ".join(texts(nodes["node:final"]))
    assert "fired" in " ".join(texts(nodes["node:capped"]))  # its trigger held for B
    assert "fired" not in " ".join(texts(nodes["node:final"]))
    assert "A: abstained" in " ".join(texts(nodes["node:unsafe"]))
    assert "winner" in " ".join(texts(nodes["readout:pairwise"]))

    def stroke(edge_id):
        return next(edges[edge_id].iter(f"{SVG}path")).get("stroke")

    on_path = ("edge:capped.trigger->capped:trigger", "edge:body->capped:base", "edge:capped->final:base",
               "edge:final->@sink", "edge:@sink->readout:pairwise")
    for edge_id in on_path:
        assert stroke(edge_id) == render.PATH_COLOR, edge_id
    # `rambling` held for nobody: the final cap did not fire, so its trigger is off the path
    assert stroke("edge:rambling->final:trigger") != render.PATH_COLOR
    assert stroke("edge:@sink->readout:pointwise") != render.PATH_COLOR


def test_cli_trace_overlay(trace_file, tmp_path):
    out = tmp_path / "item.dot"
    done = gsr("render", str(CASES / "helpfulness.gsr"), "--trace", str(trace_file), "--item", "42", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "another version of the program" in done.stderr  # the hand-written trace has another hash
    assert "fired" in out.read_text(encoding="utf-8")
    missing = gsr("render", str(CASES / "helpfulness.gsr"), "--trace", str(trace_file), "--item", "nope")
    assert missing.returncode == 2 and "item `nope` is not in trace" in missing.stderr
    alone = gsr("render", str(CASES / "helpfulness.gsr"), "--item", "42")
    assert alone.returncode == 2 and "--trace and --item go together" in alone.stderr


# ---- the command ---------------------------------------------------------------------------------------------
def test_cli_writes_dot_to_stdout_and_files(tmp_path):
    done = gsr("render", str(CASES / "helpfulness.gsr"))
    assert done.returncode == 0 and done.stdout.startswith("digraph helpfulness {")
    out = tmp_path / "g.dot"
    assert gsr("render", str(CASES / "helpfulness.gsr"), "-o", str(out)).returncode == 0
    assert out.read_text(encoding="utf-8") == done.stdout
    bad = gsr("render", str(CASES / "helpfulness.gsr"), "-o", str(tmp_path / "g.jpeg"))
    assert bad.returncode == 2 and "name it .svg, .png, .pdf or .dot" in bad.stderr


@needs_dot
@pytest.mark.parametrize("fmt, magic", [("svg", b"<?xml"), ("png", b"\x89PNG"), ("pdf", b"%PDF")])
def test_cli_renders_images(tmp_path, fmt, magic):
    out = tmp_path / f"g.{fmt}"
    done = gsr("render", str(CASES / "helpfulness.gsr"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().startswith(magic)


def test_cli_program_with_errors_draws_nothing(tmp_path):
    bad = tmp_path / "bad.gsr"
    bad.write_text("rubric bad\ntask pointwise { scale = 1..5 }\nsink nothing_here\n", encoding="utf-8")
    done = gsr("render", str(bad))
    assert done.returncode == 1
    assert done.stdout == ""  # diagnostics go to stderr, never into the DOT stream
    assert "GSR101" in done.stderr and "nothing drawn" in done.stderr


# ---- without Graphviz ------------------------------------------------------------------------------------------
def test_missing_dot_is_explained(monkeypatch, tmp_path):
    program = analyze_file(CASES / "helpfulness.gsr").program
    monkeypatch.setattr(render.shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(render.GraphvizMissing) as info:
        render.render(program, tmp_path / "g.svg")
    assert "apt-get install graphviz" in str(info.value) and "brew install graphviz" in str(info.value)
    assert render.render(program, tmp_path / "g.dot").read_text(encoding="utf-8").startswith("digraph")


def test_cli_without_dot_on_path(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    done = gsr("render", str(CASES / "helpfulness.gsr"), "-o", str(tmp_path / "g.png"), env=env)
    assert done.returncode == 2
    assert "apt-get install graphviz" in done.stderr and "brew install graphviz" in done.stderr
    assert not (tmp_path / "g.png").exists()
    done = gsr("render", str(CASES / "helpfulness.gsr"), "-o", str(tmp_path / "g.dot"), env=env)
    assert done.returncode == 0 and (tmp_path / "g.dot").read_text(encoding="utf-8").startswith("digraph")


def test_cli_does_not_import_graphviz_at_start_up():
    code = ("import sys; from gsrlang.cli import build_parser; build_parser(); "
            "print('graphviz' in sys.modules, 'pygls' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False"], done.stderr


@needs_dot
def test_overlay_of_a_real_run(tmp_path, root):
    """A trace written by `gsr run` (human judgments from the data: no model) draws as an overlay."""
    program = root / "examples" / "topical_chat" / "overall.gsr"
    data = root / "examples" / "topical_chat" / "data" / "dev.jsonl"
    if not (program.is_file() and data.is_file()):
        pytest.skip("the Topical-Chat example is not in this tree")
    trace = tmp_path / "trace.jsonl"
    done = gsr("run", str(program), "--data", str(data), "--input-field", "context", "--reference-field", "fact",
               "--id-field", "id", "--label-field", "scores.overall", "--trace", str(trace), "--limit", "2",
               "--no-progress", "-q")
    assert done.returncode == 0, done.stderr
    from gsrlang.trace.read import read_trace

    _, first = next(read_trace(trace))
    item = render.read_trace_item(trace, first["item"]["id"])
    checked = analyze_file(program).program
    assert item.program_hash == checked.content_hash
    svg = svg_of(checked, item)
    nodes = groups(svg, "node")
    sink_value = first["readout"]["sink"]["A"]
    assert f": {sink_value:.4g}" in " ".join(texts(nodes["sink"]))  # `A` is bold: a text of its own
    shown = texts(nodes["readout:pointwise"])
    assert f"score = {first['readout']['score']}" in "".join(shown)
    for node in checked.nodes:
        assert "not in trace" not in " ".join(texts(nodes[f"node:{node.id}"]))
