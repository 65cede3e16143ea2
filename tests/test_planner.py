"""The planner's decisions (gsrlang.execution.planner): each path of run and replay chosen once, from typed config.

The decisions are pure functions of the configuration and a few facts about the source (whether the judges
answer a column, whether the trace skipped judgments); the commands and the runtime run what they choose. The
last tests check that `gsr run` and `gsr replay` really take the chosen path (and that the one environment
variable left, GSR_COLUMNAR_RUN, is read by the config builder alone)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from gsrlang.execution.planner import (
    COLUMNS,
    ITEMS,
    ReplayConfig,
    RunConfig,
    TableConfig,
    replay_route,
    run_route,
    table_route,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("config, facts, expected", [
    (RunConfig(), {}, ("data", "online", COLUMNS)),
    (RunConfig(columnar=False), {}, ("data", "online", ITEMS)),  # GSR_COLUMNAR_RUN=0
    (RunConfig(), {"columns_possible": False}, ("data", "online", ITEMS)),  # a model judge, a joint criterion
    (RunConfig(), {"per_item": True}, ("index", "online", ITEMS)),  # --programs: each item its own program
    (RunConfig(), {"batch": True, "columns_possible": False}, ("data", "batch", ITEMS)),
    (RunConfig(), {"dry_run": True}, ("data", "dry-run", ITEMS)),  # every call counted, item by item
    (RunConfig(), {"given": 6}, ("items", "online", COLUMNS)),  # the API's score_batch
    (RunConfig(), {"given": 1}, ("items", "online", ITEMS)),  # its score: one item alone
    (RunConfig(), {"given": 6, "columns_possible": False}, ("items", "online", ITEMS)),
])
def test_run_routes(config, facts, expected):
    route = run_route(config, **facts)
    assert (route.source, route.judging, route.evaluate) == expected


@pytest.mark.parametrize("config, facts, expected", [
    # verify: columns unless a new trace is written or each record has its own program
    (ReplayConfig(), {"verify": True}, ("verify", COLUMNS, False, None)),
    (ReplayConfig(out="r.jsonl"), {"verify": True}, ("verify", COLUMNS, True, None)),
    (ReplayConfig(trace="t2.jsonl"), {"verify": True}, ("verify", ITEMS, False, None)),
    (ReplayConfig(), {"verify": True, "per_item": True}, ("verify", ITEMS, False, None)),
    (ReplayConfig(), {"verify": True, "show": True}, ("verify", COLUMNS, False, "alone")),
    (ReplayConfig(trace="t2.jsonl"), {"verify": True, "show": True}, ("verify", ITEMS, False, "stream")),
    # what-if: columns too, unless the trace skipped judgments (item by item says which the program needs)
    (ReplayConfig(), {"verify": False}, ("whatif", COLUMNS, False, None)),
    (ReplayConfig(out="r.jsonl"), {"verify": False}, ("whatif", COLUMNS, True, None)),
    (ReplayConfig(out="r.jsonl"), {"verify": False, "skipped_judgments": 3}, ("whatif", ITEMS, True, None)),
    (ReplayConfig(), {"verify": True, "skipped_judgments": 3}, ("verify", COLUMNS, False, None)),
])
def test_replay_routes(config, facts, expected):
    route = replay_route(config, **facts)
    assert (route.compare, route.evaluate, route.results, route.show) == expected
    assert route.verify == (expected[0] == "verify")


@pytest.mark.parametrize("config, expected", [
    (TableConfig(trace="t.jsonl"), ("trace", COLUMNS)),  # gsr tune --trace, gsr ablate: no judge is called
    (TableConfig(data="d.jsonl", mode="pointwise"), ("data", COLUMNS)),  # gsr tune --data: judged inline
])
def test_table_routes(config, expected):
    route = table_route(config)
    assert (route.source, route.evaluate) == expected


def test_only_the_config_builder_reads_the_path_variable():
    """GSR_COLUMNAR_RUN is read in one place, gsrlang/commands/config.py: nothing else chooses the path."""
    readers = []
    for path in sorted((ROOT / "gsrlang").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "GSR_COLUMNAR_RUN":
                readers.append(str(path.relative_to(ROOT)))
    assert readers == ["gsrlang/commands/config.py"]


TC = ROOT / "examples" / "topical_chat"
TC_RUN = ["run", str(TC / "flat.gsr"), "--data", str(TC / "data" / "dev.jsonl"), "--input-field", "context",
          "--reference-field", "fact", "--id-field", "id", "--label-field", "scores.overall", "--limit", "12",
          "--no-progress", "-q"]


def _spy(monkeypatch, module, name: str, taken: list):
    real = getattr(module, name)

    def spy(*args, **kwargs):
        route = real(*args, **kwargs)
        taken.append(route.evaluate)
        return route
    monkeypatch.setattr(module, name, spy)


def test_run_takes_the_planned_path(tmp_path, monkeypatch):
    """A program of human fields runs by columns, and item by item with GSR_COLUMNAR_RUN=0: the same bytes."""
    from gsrlang.execution import runs
    from gsrlang.cli import main

    taken: list = []
    _spy(monkeypatch, runs, "run_route", taken)
    outs = []
    for flag in ("1", "0"):
        monkeypatch.setenv("GSR_COLUMNAR_RUN", flag)
        out, trace = tmp_path / f"r{flag}.jsonl", tmp_path / f"t{flag}.jsonl"
        assert main([*TC_RUN, "--out", str(out), "--trace", str(trace)]) == 0
        outs.append((out.read_bytes(), trace.read_bytes().splitlines()[:-1]))  # the run summary has a wall time
    assert taken == [COLUMNS, ITEMS]
    assert outs[0] == outs[1]


def test_replay_takes_the_planned_path(tmp_path, monkeypatch, capsys):
    """Verifying by columns, and item by item when a new trace is written; both reproduce the trace."""
    import gsrlang.execution.planner as planner
    from gsrlang.cli import main

    trace = tmp_path / "t.jsonl"
    assert main([*TC_RUN, "--trace", str(trace)]) == 0
    taken: list = []

    real = planner.replay_route

    def spy(*args, **kwargs):
        route = real(*args, **kwargs)
        taken.append((route.compare, route.evaluate))
        return route
    monkeypatch.setattr(planner, "replay_route", spy)
    assert main(["replay", str(trace), "-q"]) == 0
    assert main(["replay", str(trace), "--trace-out", str(tmp_path / "t2.jsonl"), "-q"]) == 0
    assert main(["replay", str(trace), "--program", str(TC / "overall.gsr"), "--out", str(tmp_path / "w.jsonl"),
                 "-q"]) in (0, 1)
    assert taken[:2] == [("verify", COLUMNS), ("verify", ITEMS)]
    assert taken[2][0] == "whatif"


def test_the_api_takes_the_planned_path(monkeypatch):
    """`score_batch` of a program of rules goes by columns, `score` (one item) item by item: the same results."""
    import gsrlang
    import gsrlang.execution.planner as planner

    taken: list = []
    _spy(monkeypatch, planner, "run_route", taken)
    program = gsrlang.loads('rubric r "Rules"\ntask pointwise { scale = 1..5 }\n'
                            'criterion long: Bool = rule.word_count(above: 3)\n'
                            'criterion polite: Bool = rule.contains_any(words: ["please", "thanks"])\n'
                            'node both = weighted_mean(items: [normalize(long), normalize(polite)], weights: [2, 1])\n'
                            'sink both\n')
    rows = [{"input": "q", "response": text} for text in ("no", "please answer me now", "thanks", "a b c d e")]
    with gsrlang.Judges() as judges:
        many = program.score_batch(rows, judges=judges)
        each = [program.score(**row, judges=judges) for row in rows]
    assert taken == [COLUMNS] + [ITEMS] * len(rows)
    def placeless(result):  # a batch row's id and line are its index; a lone item's are 0
        def drop(d):
            return {k: v for k, v in d.items() if k not in ("id", "line")}
        trace = result.trace
        return drop(result.line), {**trace, "item": drop(trace["item"]), "result": drop(trace["result"])}
    assert [placeless(r) for r in many] == [placeless(r) for r in each]
    assert len({r.score for r in many}) > 1


def test_tune_and_ablate_take_the_planned_path(tmp_path, monkeypatch, capsys):
    """gsr ablate reads its trace, and gsr tune's --data its file judged inline, as the planner routes them."""
    import argparse

    import gsrlang.execution.runs as runs
    from gsrlang.cli import main
    from gsrlang.commands.run import load_program
    from gsrlang.commands.tune import load_table

    trace = tmp_path / "t.jsonl"
    assert main([*TC_RUN, "--trace", str(trace)]) == 0
    capsys.readouterr()
    taken: list = []
    real = runs.table_route

    def spy(config):
        route = real(config)
        taken.append(route.source)
        return route
    monkeypatch.setattr(runs, "table_route", spy)
    assert main(["ablate", str(TC / "flat.gsr"), "--trace", str(trace), "--bootstrap", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 12
    args = argparse.Namespace(trace=None, data=str(TC / "data" / "dev.jsonl"), input_field="context",
                              response_field="response", responses=None, id_field="id",
                              label_field="scores.overall", reference_field="fact")
    table = load_table(load_program(str(TC / "flat.gsr")), args, "pointwise", "`flat.gsr`")
    assert taken == ["trace", "data"]
    assert len(table) > 12 and sum(label is not None for label in table.labels) > 12
