"""`make demo`: run the Topical-Chat rubric programs over real human annotations, with no key and no model.

1. runs examples/topical_chat/overall.gsr (the graph: gates and a weighted mean) and
   flat.gsr (the flat weighted-mean baseline) over the 240 USR-annotated responses,
   with every criterion read from the annotations (`human(field: ...)`);
2. prints their agreement with the annotators' overall score side by side (exact,
   within-1, MAE, Pearson, Spearman, QWK, with bootstrap 95% intervals), and says
   whether the direct holistic baseline (direct.gsr, one model judgment) was run;
3. replays the graph's trace with no judge call and checks that it reproduces
   every node exactly, then re-composes the same recorded judgments under flat.gsr
   (the "what if") and checks that this equals running flat.gsr;
4. prints one item's decision path from its trace, and the commands to try next (each works
   as printed: tests/test_first_hour.py runs them).

Outputs (results and traces) go to out/demo/ (git-ignored). Run: python -m gsrlang.demo
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "topical_chat"
METRICS = ("exact", "within1", "mae", "pearson", "spearman", "qwk")


def _data_file() -> Path:
    data = EXAMPLE / "data" / "dev.jsonl"
    if data.is_file():
        return data
    raise SystemExit("demo: the Topical-Chat data is missing (examples/topical_chat/data/dev.jsonl)")


def _columns():
    from gsrlang.data import ColumnMap

    return ColumnMap(input_field="context", response_fields=("response",), id_field="id",
                     label_field="scores.overall", reference_field="fact")


def _program(name: str):
    from gsrlang.check.driver import analyze_file

    path = EXAMPLE / name
    analysis = analyze_file(path)
    if analysis.program is None:
        raise SystemExit(f"demo: {path} does not check: {analysis.errors[0].message}")
    return analysis.program, _rel(path)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _cell(report: dict | None, key: str) -> str:
    if report is None:
        return "—"
    entry = report.get(key)
    if not isinstance(entry, dict) or entry.get("value") is None:
        return "undefined"
    value = f"{entry['value']:.3f}"
    ci = entry.get("ci95")
    return value + (f"  [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _run(program, path: str, data: Path, out: Path, tag: str, registry=None):
    from gsrlang.judges.registry import default_registry
    from gsrlang.runtime.batch import run_file

    registry = registry or default_registry()
    registry.check(program)
    summary = run_file(program, data, _columns(), registry, "pointwise", str(out / f"{tag}.results.jsonl"),
                       str(out / f"{tag}.trace.jsonl"), program_path=path)
    p = program.readout.pointwise
    return summary, summary.metrics((p.lo, p.hi))


def _direct(console: Console, data: Path, out: Path):
    """Run direct.gsr if a model is configured and this installation has an LLM judge; else say why not."""
    from gsrlang.judges.base import JudgeConfigError
    from gsrlang.judges.registry import default_registry, llm_judge_available, load_llm_judge, model_configured

    how = ("gsr run examples/topical_chat/direct.gsr --data examples/topical_chat/data/dev.jsonl "
           "--input-field context --reference-field fact --id-field id --label-field scores.overall "
           "--model MODEL --out out/direct.jsonl")
    if not model_configured({}):
        return None, None, ("direct.gsr (one holistic model judgment) was NOT run: it needs a model, and none is "
                      f"configured. Set GSR_MODEL (and OPENAI_API_KEY or OPENAI_BASE_URL), or run:\n  {how}")
    if not llm_judge_available():
        return None, None, "direct.gsr was NOT run: a model is configured, but this installation has no LLM judge."
    program, path = _program("direct.gsr")
    try:
        llm = load_llm_judge({})
        console.print(f"running direct.gsr with the configured model ({os.environ.get('GSR_MODEL', 'from gsr.toml')})"
                      " — this calls the model once per item …")
        summary, report = _run(program, path, data, out, "direct", default_registry(llm))
    except JudgeConfigError as exc:
        return None, None, f"direct.gsr was NOT run: {'; '.join(exc.problems)}"
    return report, summary, f"direct.gsr: {summary.line()}"


def main(argv: list[str] | None = None) -> int:
    from gsrlang.runtime.batch import replay_file
    from gsrlang.runtime.explain import decision_tree
    from gsrlang.runtime.trace import read_trace
    from gsrlang.trace import TraceView

    console = Console(width=max(100, min(140, Console().width)))
    t0 = time.perf_counter()
    data = _data_file()
    out = Path("out") / "demo"
    out.mkdir(parents=True, exist_ok=True)
    console.rule("[bold]gsrlang demo: Topical-Chat (USR annotations), 240 responses")
    console.print(f"data: {_rel(data)} — criteria read from the human annotations; no key, no model\n")

    graph, graph_path = _program("overall.gsr")
    flat, flat_path = _program("flat.gsr")
    g_summary, g_report = _run(graph, graph_path, data, out, "overall")
    f_summary, f_report = _run(flat, flat_path, data, out, "flat")
    d_report, d_summary, d_note = _direct(console, data, out)

    table = Table(title="agreement with the annotators' overall score (1..5), 95% bootstrap CI",
                  title_justify="left")
    table.add_column("metric")
    table.add_column("graph: overall.gsr", justify="right")
    table.add_column("flat: flat.gsr", justify="right")
    table.add_column("direct: direct.gsr", justify="right")
    for key in METRICS:
        table.add_row(key, _cell(g_report, key), _cell(f_report, key), _cell(d_report, key) if d_report else "not run")
    table.add_row("items ok", f"{g_summary.ok} of {g_summary.items}", f"{f_summary.ok} of {f_summary.items}",
                  "—" if d_summary is None else f"{d_summary.ok} of {d_summary.items}")
    console.print(table)
    console.print("exact and within-1 compare with the overall score rounded half up; MAE, Pearson and Spearman "
                  "with the unrounded mean of three annotators.")
    console.print(d_note + "\n")

    # replay: exact reproduction with no judge, then the "what if" under the flat program
    trace = out / "overall.trace.jsonl"
    replayed = replay_file(trace, graph, verify=True)
    if replayed.first_difference is None:
        console.print(f"[bold green]replay[/]: {replayed.items} items of {_rel(trace)} recomputed with no judge call "
                      f"in {replayed.seconds:.2f} s — every node output, readout and result reproduced exactly")
    else:
        console.print(f"[bold red]replay differs[/]: {replayed.first_difference.describe()}")
    whatif = out / "flat_from_graph_trace.results.jsonl"
    replay_file(trace, flat, verify=False, out=str(whatif), program_label=flat_path)
    same = whatif.read_bytes() == (out / "flat.results.jsonl").read_bytes()
    console.print(f"[bold]what if[/]: the graph's recorded judgments re-composed under {flat_path} "
                  f"{'give exactly' if same else 'do NOT give'} the results of running {flat_path} "
                  "(an ablation is a replay, no judge needed)\n")

    # one item's decision path: the first where a gate changed the score, if any
    chosen = None
    for _, record in read_trace(trace):
        if TraceView.of_record(record).score_changes():
            chosen = record
            break
        chosen = chosen or record
    console.print(f"[bold]decision path[/] of one item, from its trace record ({_rel(trace)}):")
    console.print(decision_tree(chosen))
    console.print(f"\noutputs in {out}/; done in {time.perf_counter() - t0:.1f} s. Next, try:")
    for command in next_commands(out, str(chosen["item"]["id"])):
        console.print("  " + command, markup=False, highlight=False, soft_wrap=True)
    return 0


def gsr_command() -> str:
    """How to call `gsr` from here: `gsr` when it is on PATH, else the path to this environment's script."""
    script = Path(sys.executable).parent / "gsr"
    found = shutil.which("gsr")
    if found and (not script.is_file() or Path(found).resolve() == script.resolve()):
        return "gsr"
    return _rel(script) if script.is_file() else f"{sys.executable} -m gsrlang.cli"


def next_commands(out: Path, item_id: str) -> list[str]:
    """The commands the demo suggests, each of which works as printed (tests run them)."""
    gsr, trace, results = gsr_command(), f"{out}/overall.trace.jsonl", f"{out}/overall.results.jsonl"
    program, data = _rel(EXAMPLE / "overall.gsr"), _rel(EXAMPLE / "data" / "dev.jsonl")
    return [f"{gsr} check {program}",
            f"{gsr} replay {trace} --show {item_id}",
            f"{gsr} metrics {results}",
            f"{gsr} render {program} --trace {trace} --item {item_id} -o {out}/{item_id}.svg",
            f"{gsr} run {program} --data {data} --id-field id "
            f"--label-field scores.overall --out {out}/again.results.jsonl --trace {out}/again.trace.jsonl",
            f"{gsr} report {results} --trace {trace} --compare {out}/flat.results.jsonl "
            f"--compare-trace {out}/flat.trace.jsonl -o {out}/report.html"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
