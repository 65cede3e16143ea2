"""Golden render cases (tests/cases/render): each NAME.gsr draws as NAME.dot; with NAME.data.jsonl, each of its
items run and overlaid draws as NAME.ITEM.dot. Plus what the pictures must show: declaration and slot order,
one edge per list slot, and a decision path that marks only what decided the result.

GSR_UPDATE_GOLDEN=1 rewrites the golden files (read the diff before committing)."""

from __future__ import annotations

import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gsrlang.execution.planner import RunConfig
from gsrlang.execution.runs import run_file
from gsrlang.files.dataset import ColumnMap
from gsrlang.judges.registry import default_registry
from gsrlang.lang.check.driver import analyze_file
from gsrlang.views import render

CASES = Path(__file__).resolve().parent / "cases" / "render"
SVG = "{http://www.w3.org/2000/svg}"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def program(name: str):
    return analyze_file(CASES / f"{name}.gsr").program


def traced(name: str, tmp: Path) -> Path:
    trace = tmp / f"{name}.trace.jsonl"
    columns = ColumnMap(id_field="id", read_input=False, read_responses=False)
    run_file(program(name), CASES / f"{name}.data.jsonl", columns, default_registry(), "pointwise",
             RunConfig(trace=str(trace), program_path=f"{name}.gsr"))
    return trace


def golden(path: Path, text: str) -> None:
    if os.environ.get("GSR_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs (GSR_UPDATE_GOLDEN=1 to rewrite)"


CASE_NAMES = sorted(p.stem for p in CASES.glob("*.gsr"))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_golden_render_cases(name, tmp_path):
    golden(CASES / f"{name}.dot", render.to_dot(program(name)))
    data = CASES / f"{name}.data.jsonl"
    if data.is_file():
        trace = traced(name, tmp_path)
        for line in data.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)["id"]
            golden(CASES / f"{name}.{item}.dot", render.to_dot(program(name), render.read_trace_item(trace, item)))


def test_list_slots_each_get_a_cell_and_keep_their_order():
    dot = render.to_dot(program("slots"))
    heads = re.findall(r'-> body:in_items_(\d+):n', dot)
    assert heads == [str(k) for k in range(8)]  # one cell per slot, edges written in slot order
    assert 'ordering=in' in dot
    cells = re.findall(r'PORT="in_items_(\d+)"', dot)
    assert cells == [str(k) for k in range(8)]


def test_criteria_keep_declaration_order():
    dot = render.to_dot(program("slots"))
    chain = re.findall(r'(c\d):o -> (c\d):o \[id="order:', dot)
    assert chain == [(f"c{k}", f"c{k + 1}") for k in range(7)]
    assert "rank=same" in dot


def _svg(p, trace=None) -> ET.Element:
    return ET.fromstring(render.build_graph(p, trace).pipe(format="svg"))


def _groups(svg, cls):
    return {g.get("id"): g for g in svg.iter(f"{SVG}g") if g.get("class") == cls}


def _x(g) -> float:
    xs = [float(t.get("x")) for t in g.iter(f"{SVG}text")]
    return min(xs)


@needs_dot
def test_laid_out_left_to_right_in_declaration_and_slot_order():
    svg = _svg(program("slots"))
    nodes, edges = _groups(svg, "node"), _groups(svg, "edge")
    xs = [_x(nodes[f"node:c{k}"]) for k in range(8)]
    assert xs == sorted(xs), xs
    tips = []
    for k in range(8):
        poly = next(edges[f"edge:body.items[{k}]->body:items[{k}]"].iter(f"{SVG}polygon"))
        points = [tuple(map(float, p.split(","))) for p in poly.get("points").split()]
        tips.append(max(points, key=lambda p: p[1])[0])
    assert tips == sorted(tips) and len({round(t) for t in tips}) == 8, tips  # eight distinct entry points


def _texts(g) -> str:
    return " ".join("".join(t.itertext()) for t in g.iter(f"{SVG}text"))


@needs_dot
def test_a_gate_that_fired_without_changing_anything(tmp_path):
    trace = traced("gates", tmp_path)
    p = program("gates")
    same = render.read_trace_item(trace, "same")
    path = render.decision_path(p, same)
    assert path.fired == {"capped"} and path.changed == frozenset()
    # the cap changed nothing: the base decided; the trigger's branch is not on the path
    assert "flagged" not in path.nodes and ("flagged", "capped", "trigger", None) not in path.edges
    assert {"quality", "body", "capped", "final"} <= path.nodes
    svg = _svg(p, same)
    nodes = _groups(svg, "node")
    assert "fired, no change" in _texts(nodes["node:capped"])
    assert "fired" not in _texts(nodes["sink"])

    changed = render.read_trace_item(trace, "changed")
    path = render.decision_path(p, changed)
    assert path.changed == {"capped"} and path.fired == {"capped", "final"}
    assert "flagged" in path.nodes and "short" not in path.nodes  # the final cap fired, with no change
    nodes = _groups(_svg(p, changed), "node")
    assert "fired, no change" in _texts(nodes["node:final"])
    assert re.search(r"fired\s+\(A\)", _texts(nodes["node:capped"])) and "fired" not in _texts(nodes["sink"])
