"""`make demo`: the Topical-Chat rubric programs over real human annotations, with no key and no model.

1. runs three programs over the 240 USR-annotated responses, every criterion read from the
   annotations (`human(field: ...)`): examples/topical_chat/overall.gsr (the hand-set graph: gates and a
   weighted mean), overall.tuned.gsr (its learnable version as `gsr tune` tuned it, with its provenance header)
   and flat.gsr (the flat weighted mean, the baseline);
2. prints their agreement with the annotators' overall score side by side (exact, within-1, MAE, Pearson,
   Spearman, QWK, with bootstrap 95% intervals), with the tuned program's nested cross-validation figure from
   its header (its in-sample figures are on the items it was tuned on);
3. runs `gsr compare` of the tuned program against the flat mean, as the command prints it: paired differences
   with a cluster bootstrap over conversations, per-item wins and McNemar's exact test;
4. prints the decision path of one item where the graph and the flat mean disagree, from its trace;
5. replays the graph's trace with no judge call and checks that it reproduces every node exactly, and prints
   the commands to try next (each works as printed: tests/test_first_hour.py runs them).

It needs the runtime dependencies only. Outputs (results and traces) go to out/demo/ (git-ignored).
Run: python -m gsrlang.demo
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
    from gsrlang.files.dataset import ColumnMap

    return ColumnMap(input_field="context", response_fields=("response",), id_field="id",
                     label_field="scores.overall", reference_field="fact")


def _program(name: str):
    from gsrlang.lang.check.driver import analyze_file

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
    ci = entry.get("ci95")
    return f"{entry['value']:.3f}" + (f"  [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _run(program, path: str, data: Path, out: Path, tag: str, registry=None):
    from gsrlang.execution.planner import RunConfig
    from gsrlang.execution.runs import run_file
    from gsrlang.judges.registry import default_registry

    registry = registry or default_registry()
    registry.check(program)
    summary = run_file(program, data, _columns(), registry, "pointwise",
                       RunConfig(out=str(out / f"{tag}.results.jsonl"), trace=str(out / f"{tag}.trace.jsonl"),
                                 program_path=path))
    return summary, summary.metrics()


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


def _nested_cv(path: Path) -> str | None:
    """The tuned program's nested-CV line from its provenance header (`# gsr tune: CV exact: ...`)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# gsr tune: CV "):
            return line[len("# gsr tune: "):]
        if not line.startswith("#"):
            break
    return None


def _disagreeing_item(out: Path):
    """The first item whose graph score differs from the flat mean's and is the closer of the two to the gold
    label (else the first that differs, else the first): (graph's trace record, flat's result line)."""
    from gsrlang.analysis.metrics import read_results, round_half_up
    from gsrlang.trace.read import read_trace

    flat = {line["id"]: line for line in read_results(out / "flat.results.jsonl")}
    chosen = fallback = None
    for _, record in read_trace(out / "overall.trace.jsonl"):
        line, other = record["result"], flat.get(record["item"]["id"])
        fallback = fallback or (record, other)
        if other is None or line.get("score") is None or other.get("score") is None or line["score"] == other["score"]:
            continue
        gold = round_half_up(line["label"]) if line.get("label") is not None else None
        if gold is not None and abs(line["score"] - gold) < abs(other["score"] - gold):
            return record, other
        chosen = chosen or (record, other)
    return chosen or fallback


def main(argv: list[str] | None = None) -> int:
    from gsrlang.cli import main as gsr
    from gsrlang.execution.runs import replay_file
    from gsrlang.views.explain import decision_tree

    console = Console(width=max(100, min(140, Console().width)))
    t0 = time.perf_counter()
    data = _data_file()
    out = Path("out") / "demo"
    out.mkdir(parents=True, exist_ok=True)
    console.rule("[bold]gsrlang demo: Topical-Chat (USR annotations), 240 responses")
    console.print(f"data: {_rel(data)} — criteria read from the human annotations; no key, no model\n")

    graph, graph_path = _program("overall.gsr")
    tuned, tuned_path = _program("overall.tuned.gsr")
    flat, flat_path = _program("flat.gsr")
    g_summary, g_report = _run(graph, graph_path, data, out, "overall")
    t_summary, t_report = _run(tuned, tuned_path, data, out, "tuned")
    f_summary, f_report = _run(flat, flat_path, data, out, "flat")
    d_report, d_summary, d_note = _direct(console, data, out)

    table = Table(title="agreement with the annotators' overall score (1..5), 95% bootstrap CI",
                  title_justify="left")
    table.add_column("metric")
    table.add_column("hand-set graph: overall.gsr", justify="right")
    table.add_column("tuned: overall.tuned.gsr", justify="right")
    table.add_column("flat mean: flat.gsr", justify="right")
    if d_report:
        table.add_column("direct: direct.gsr", justify="right")
    for key in METRICS:
        table.add_row(key, _cell(g_report, key), _cell(t_report, key), _cell(f_report, key),
                      *([_cell(d_report, key)] if d_report else []))
    table.add_row("items ok", *(f"{s.ok} of {s.items}" for s in (g_summary, t_summary, f_summary)),
                  *([f"{d_summary.ok} of {d_summary.items}"] if d_report else []))
    console.print(table)
    console.print("exact and within-1 compare with the overall score rounded half up; MAE, Pearson and Spearman "
                  "with the unrounded mean of three annotators.")
    cv = _nested_cv(EXAMPLE / "overall.tuned.gsr")
    console.print(f"The tuned program was tuned on these 240 items, so its column is in-sample. On items it did not "
                  f"see (nested 5-fold cross-validation, from its header): {cv or 'see its header'}.")
    console.print(d_note + "\n")

    # gsr compare, as the command prints it: the tuned program against the flat mean, paired, conversations kept
    # together (the six responses to one conversation are not independent)
    compare = [str(out / "flat.results.jsonl"), str(out / "tuned.results.jsonl"), "--data", _rel(data),
               "--id-field", "id", "--group-field", "context"]
    console.print(f"[bold]$ gsr compare {' '.join(compare)}[/]", highlight=False)
    sys.stdout.flush()
    gsr(["compare", *compare])
    sys.stdout.flush()
    sys.stderr.flush()
    console.print()

    # one item where the graph and the flat mean disagree: why the graph scored it as it did
    record, flat_line = _disagreeing_item(out)
    item_id = str(record["item"]["id"])
    line = record["result"]
    console.print(f"[bold]where the graph and the flat mean disagree[/]: item {item_id}, gold {line.get('label')}: "
                  f"graph {line.get('score')}, flat mean {flat_line.get('score') if flat_line else '—'} "
                  f"(raw {flat_line.get('raw') if flat_line else '—'}). The graph's decision path, from its trace "
                  f"({_rel(out / 'overall.trace.jsonl')}):", highlight=False)
    console.print(decision_tree(record))

    # replay: exact reproduction with no judge
    trace = out / "overall.trace.jsonl"
    replayed = replay_file(trace, graph, verify=True)
    if replayed.first_difference is None:
        console.print(f"\n[bold green]replay[/]: {replayed.items} items of {_rel(trace)} recomputed with no judge "
                      f"call in {replayed.seconds:.2f} s — every node output, readout and result reproduced exactly")
    else:
        console.print(f"\n[bold red]replay differs[/]: {replayed.first_difference.describe()}")
    console.print(f"\noutputs in {out}/; done in {time.perf_counter() - t0:.1f} s. Next, try:")
    for command in next_commands(out, item_id):
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
            f"{gsr} run {program} --data {data} "
            f"--label-field scores.overall --out {out}/again.results.jsonl --trace {out}/again.trace.jsonl",
            f"{gsr} report {results} --trace {trace} --compare {out}/tuned.results.jsonl "
            f"--compare-trace {out}/tuned.trace.jsonl -o {out}/report.html",
            f"{gsr} ablate {program} --trace {trace}"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
