"""`gsr report`: one self-contained HTML file to look at a run (and, optionally, compare it with another).

Built from a run's results file and its trace (read through `gsrlang.trace.read.read_trace`),
with the program when it can be found. The page holds:

- the agreement metrics with their bootstrap intervals (`gsrlang.analysis.metrics`);
- the confusion matrix as a heatmap, the predicted and gold score distributions, and each
  criterion's value distribution, drawn here as inline SVG;
- the program's graph (inline SVG from Graphviz, `gsrlang.views.render`), on which an item's
  decision path is drawn when the item is opened;
- a table of items, sortable and filterable (disagreement >= 2, invalid, abstained, a gate
  that fired, changed between runs, an id search), drawn a page at a time so that 10,000
  items stay fast;
- per-item drill-down: status, score and label, the decision path, every criterion's
  recorded judgment with its reason and evidence quotes;
- with a second run: the metrics side by side with paired bootstrap intervals of their
  differences, the distribution of per-item score differences, and the items that changed.

Nothing is fetched: the styles and the one script are inline, the fonts are the system's,
and the data is one JSON block in the page. A results file and a trace from different runs
are refused (`ReportError`).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Sequence

import attrs

from gsrlang.analysis.metrics import metrics_from_results, round_half_up
from gsrlang.files.dataset import DataError
from gsrlang.trace import TraceView
from gsrlang.trace.jsonio import dumps_line
from gsrlang.trace.schema import prediction

__all__ = ["ReportError", "Run", "build_report", "load_run"]

METRICS = {"pointwise": ("exact", "within1", "mae", "pearson", "spearman", "qwk", "coverage"),
           "pairwise": ("accuracy", "valid_only_accuracy", "coverage", "tie_rate", "abstain_rate", "invalid_rate")}


class ReportError(DataError):
    """The inputs cannot make a report (a results file and a trace from different runs, unreadable files)."""


@attrs.define
class Run:
    """One run: its result lines and trace records (item records, in order), and its run summary if any."""

    results_path: str
    trace_path: str
    results: list[dict]
    records: list[dict]
    summary: dict | None
    header: dict  # the first record's `program`: name, hash, path, abs_path

    @property
    def mode(self) -> str:
        return next((r.get("mode") for r in self.results if r.get("mode")), "pointwise")


def load_run(results_path: str | Path, trace_path: str | Path) -> Run:
    """Read a results file and its trace; ReportError when they are not of the same run."""
    from gsrlang.analysis.metrics import read_results
    from gsrlang.trace.read import read_trace
    from gsrlang.trace.schema import is_summary

    results = list(read_results(results_path))
    records, summary = [], None
    for _, record in read_trace(trace_path, summaries=True):
        if is_summary(record):
            summary = record
        else:
            records.append(record)
    if not results:
        raise ReportError(f"{results_path}: no result lines")
    if len(results) != len(records):
        raise ReportError(f"{results_path} and {trace_path} are not of the same run: {len(results)} result lines, "
                          f"{len(records)} trace records")
    for n, (line, record) in enumerate(zip(results, records), start=1):
        recorded = record.get("result")
        if recorded != line:
            what = _first_difference(line, recorded if isinstance(recorded, dict) else {})
            raise ReportError(f"{results_path} and {trace_path} are not of the same run: result line {n} "
                              f"(item {line.get('id')!r}) differs from the trace's record {n} "
                              f"(item {(record.get('item') or {}).get('id')!r}): {what}")
    header = next((r.get("program") for r in records if isinstance(r.get("program"), dict)), {}) or {}
    return Run(str(results_path), str(trace_path), results, records, summary, header)


def _first_difference(a: dict, b: dict) -> str:
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return f"`{key}` is {json.dumps(a.get(key))} in the results, {json.dumps(b.get(key))} in the trace"
    return "they differ"


# ---- per-item facts -----------------------------------------------------------------------------------------
def _disagreement(line: dict, mode: str) -> float | None:
    """How far the prediction is from the gold label: |score - rounded gold| (pointwise); pairwise 0 agree,
    1 a tie against a winner, 2 opposite winners. None without a label or a prediction."""
    label = line.get("label")
    if label is None or line.get("status") != "ok":
        return None
    if mode == "pointwise":
        return None if line.get("score") is None else abs(line["score"] - round_half_up(label))
    winner = line.get("winner")
    if winner == label:
        return 0
    return 1 if "tie" in (winner, label) else 2


class _Strings:
    """A table of distinct strings (reasons and decision paths repeat): the page stores indices."""

    def __init__(self):
        self.index: dict[str, int] = {}

    def __call__(self, text) -> int | None:
        return None if text is None else self.index.setdefault(str(text), len(self.index))

    @property
    def items(self) -> list[str]:
        return list(self.index)


def _value(v):
    return str(v) if isinstance(v, float) and not math.isfinite(v) else v


def _judgment_cells(j: dict, strings: _Strings) -> list:
    """A recorded judgment as the page's data holds it: value, status, reason and evidence quotes (the texts as
    indexes into the page's string table; no quotes: None)."""
    evidence = (j.get("provenance") or {}).get("evidence") or ()
    return [_value(j.get("value")), j.get("status"), strings(j.get("reason")), [strings(q) for q in evidence] or None]


def _items(run: Run, program, strings: _Strings, paths: _Strings, criteria: list[str],
           node_ids: list[str]) -> list[list]:
    """One compact row per item (see the page script for the layout). Decision paths go in `paths` (items repeat
    them: a path depends only on the node values, computed once per distinct set of values)."""
    from gsrlang.views.render import decision_path, edge_id, trace_item_from_record

    mode = run.mode
    node_index = {n: k for k, n in enumerate(node_ids)}
    rows, seen = [], {}
    for line, record in zip(run.results, run.records):
        view = TraceView.of_record(record)
        nodes = view.nodes
        judged = [[_judgment_cells(j, strings) for j in view.judgments(cid)] or None for cid in criteria]
        values = [[_value(v) for v in (nodes[n]["output"] or ())] if nodes.get(n, {}).get("output") is not None
                  else None for n in node_ids]
        path = None
        if program is not None and view.computed:
            # the path depends on the node values only, and items repeat them (criteria answer a few levels)
            key = dumps_line(values)
            if key not in seen:
                overlay = decision_path(program, trace_item_from_record(record))
                found = [sorted(node_index[n] for n in overlay.nodes if n in node_index), sorted(overlay.changed),
                         sorted(overlay.fired - overlay.changed), sorted(map(edge_id, overlay.edges))]
                seen[key] = paths(dumps_line(found))
            path = seen[key]
        sink = line.get("sink") or {}
        rows.append([str(line.get("id")), line.get("status"),
                     prediction(line, mode),
                     line.get("raw"), line.get("label"), _disagreement(line, mode),
                     int(view.abstained()), int(bool(view.fired_gates())), strings(line.get("reason")),
                     [_value(sink.get(c)) for c in sorted(sink)] if sink else None, judged, values, path])
    return rows


# ---- charts (inline SVG) ---------------------------------------------------------------------------------------
def _svg(width: int, height: int, body: str, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="{html.escape(title)}" class="chart">{body}</svg>')


def _text(x, y, s, anchor="middle", size=11, extra="") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"{extra}>'
            f'{html.escape(str(s))}</text>')


def heatmap(rows: Sequence, cols: Sequence, counts: Counter, title: str, row_name: str, col_name: str) -> str:
    """A confusion matrix: one cell per (row, col), darker for more items, the count written in."""
    cell, left, top = 38, 70, 40
    width, height = left + cell * len(cols) + 10, top + cell * len(rows) + 40
    peak = max(counts.values(), default=0) or 1
    parts = [_text(left + cell * len(cols) / 2, 14, f"{col_name} \u2192", size=12),
             _text(12, top + cell * len(rows) / 2, f"{row_name} \u2192", size=12,
                   extra=f' transform="rotate(-90 12 {top + cell * len(rows) / 2:.1f})"')]
    parts += [_text(left + cell * j + cell / 2, top - 6, c) for j, c in enumerate(cols)]
    for i, r in enumerate(rows):
        parts.append(_text(left - 6, top + cell * i + cell / 2 + 4, r, anchor="end"))
        for j, c in enumerate(cols):
            n = counts.get((r, c), 0)
            shade = n / peak
            fill = f"rgb({int(255 - 200 * shade)},{int(255 - 140 * shade)},{int(255 - 40 * shade)})"
            parts.append(f'<rect x="{left + cell * j}" y="{top + cell * i}" width="{cell - 2}" height="{cell - 2}" '
                         f'fill="{fill}" class="cell"><title>{html.escape(f"{row_name} {r}, {col_name} {c}: {n}")}'
                         f'</title></rect>')
            if n:
                color = "#fff" if shade > 0.55 else "#111"
                parts.append(_text(left + cell * j + cell / 2 - 1, top + cell * i + cell / 2 + 4, n,
                                   extra=f' fill="{color}"'))
    return _svg(width, height, "".join(parts), title)


def bars(categories: Sequence, series: Sequence[tuple[str, Counter, str]], title: str, height: int = 150) -> str:
    """Grouped bars: for each category, one bar per series (name, counts, colour), with a legend."""
    group = max(12 * len(series) + 14, 6 * max((len(_short(k)) for k in categories), default=0) + 8)
    left, top, plot = 34, 22, height - 50
    width = max(220, left + group * len(categories) + 10)
    peak = max((c.get(k, 0) for _, c, _ in series for k in categories), default=0) or 1
    parts = [f'<line x1="{left}" y1="{top + plot}" x2="{width - 4}" y2="{top + plot}" stroke="#999"/>',
             _text(left - 4, top + 4, peak, anchor="end", size=9), _text(left - 4, top + plot, 0, anchor="end", size=9)]
    x = left + 6
    for k in categories:
        for s, (name, counts, color) in enumerate(series):
            n = counts.get(k, 0)
            h = plot * n / peak
            parts.append(f'<rect x="{x + 12 * s}" y="{top + plot - h:.1f}" width="10" height="{h:.1f}" '
                         f'fill="{color}"><title>{html.escape(f"{name}, {k}: {n}")}</title></rect>')
        parts.append(_text(x + 6 * len(series), top + plot + 13, _short(k), size=10))
        x += group
    lx = left
    for name, _, color in series:
        parts.append(f'<rect x="{lx}" y="4" width="10" height="10" fill="{color}"/>')
        parts.append(_text(lx + 14, 13, name, anchor="start", size=10))
        lx += 16 + 7 * len(name)
    return _svg(width, height, "".join(parts), title)


def _short(v) -> str:
    text = str(v)
    return text if len(text) <= 11 else text[:10] + "\u2026"


# ---- metrics --------------------------------------------------------------------------------------------------
def _metrics(run: Run, bootstrap: int, seed: int) -> dict | None:
    if not any(line.get("label") is not None for line in run.results):
        return None
    return metrics_from_results(run.results_path, bootstrap=bootstrap, seed=seed).get("metrics")


def _paired(a: Run, b: Run, bootstrap: int, seed: int) -> dict:
    """Per-item differences between two runs of the same items (matched by id), with paired bootstrap intervals
    for the difference of each metric (B - A)."""
    mode = a.mode
    by_id = {str(line.get("id")): line for line in b.results}
    pairs = [(line, by_id[str(line.get("id"))]) for line in a.results if str(line.get("id")) in by_id]
    key = "score" if mode == "pointwise" else "winner"
    changed = [str(x.get("id")) for x, y in pairs if (x.get(key), x.get("status")) != (y.get(key), y.get("status"))]
    diffs = Counter(y["score"] - x["score"] for x, y in pairs if mode == "pointwise"
                    and x.get("score") is not None and y.get("score") is not None)
    labelled = [(x, y) for x, y in pairs if x.get("label") is not None]
    out = {"matched": len(pairs), "only_a": len(a.results) - len(pairs), "only_b": len(b.results) - len(pairs),
           "changed": changed, "diffs": diffs, "delta": None}
    if labelled:
        def pred(line):
            return line.get(key) if line.get("status") == "ok" else None

        from gsrlang.analysis.stats import paired_report

        report = paired_report(mode, [pred(x) for x, _ in labelled], [pred(y) for _, y in labelled],
                               [x["label"] for x, _ in labelled], n_resamples=bootstrap, seed=seed)
        out["delta"] = {k: {"value": r["diff"], "ci95": r["ci95"]} for k, r in report.items()}
    return out


def _fmt(v, digits: int = 3) -> str:
    return "\u2014" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _metric_cell(entry) -> str:
    if not isinstance(entry, dict):
        return html.escape(_fmt(entry))
    ci = entry.get("ci95")
    return _fmt(entry.get("value")) + (f' <span class="ci">[{_fmt(ci[0])}, {_fmt(ci[1])}]</span>' if ci else "")


def _metrics_table(ma: dict | None, mb: dict | None, delta: dict | None, mode: str) -> str:
    if ma is None:
        return '<p class="note">No gold labels in the results: no agreement metrics (run with --label-field).</p>'
    head = "<tr><th>metric</th><th>run A</th>" + ("<th>run B</th><th>B \u2212 A (paired 95% CI)</th>"
                                                  if mb is not None else "") + "</tr>"
    rows = [f"<tr><td>{k}</td><td>{_metric_cell(ma.get(k))}</td>"
            + (f"<td>{_metric_cell(mb.get(k))}</td><td>{_metric_cell((delta or {}).get(k))}</td>" if mb is not None
               else "") + "</tr>" for k in METRICS[mode] if k in ma]
    n = ma.get("n")
    return (f'<table class="metrics" id="metrics">{head}{"".join(rows)}</table>'
            f'<p class="note">{n} labelled items; 95% bootstrap intervals. Exact and within-1 compare with the '
            "gold label rounded half up.</p>")


def _criteria_table(by_criterion: dict | None) -> str:
    """Each criterion's agreement with the data's human label for it (`--criterion NAME=FIELD`)."""
    if not by_criterion:
        return ""
    keys = METRICS["pointwise"]
    head = "<tr><th>criterion</th><th>human label</th><th>items</th>" + "".join(f"<th>{k}</th>" for k in keys) + "</tr>"
    rows = []
    for name, r in by_criterion.items():
        unusable = f' <span class="ci">({r["n_unusable"]} unusable left out)</span>' if r.get("n_unusable") else ""
        rows.append(f'<tr data-criterion="{html.escape(name)}"><td>{html.escape(name)}</td>'
                    f'<td>{html.escape(str(r.get("field")))}</td><td>{r.get("n")}{unusable}</td>'
                    + "".join(f'<td data-metric="{k}">{_metric_cell(r.get(k))}</td>' for k in keys) + "</tr>")
    return ('<h3>Per criterion, against the data\'s human labels</h3>'
            f'<table class="metrics" id="criteria">{head}{"".join(rows)}</table>'
            '<p class="note">Each criterion\'s recorded judgment (first candidate) against the human label the '
            "data holds for it, as <code>gsr metrics --criterion</code> computes it; 95% bootstrap intervals.</p>")


# ---- the page -------------------------------------------------------------------------------------------------
def _charts(run: Run, program, criteria: list[str]) -> str:
    mode = run.mode
    out = []
    labelled = [r for r in run.results if r.get("label") is not None]
    if mode == "pointwise":
        scale = next((r["scale"] for r in run.results if r.get("scale")), None)
        lo, hi = (int(math.floor(scale[0])), int(math.ceil(scale[1]))) if scale else (1, 5)
        cats = [str(k) for k in range(lo, hi + 1)] if hi - lo <= 20 else []
        if labelled and cats:
            counts = Counter((str(round_half_up(r["label"])), str(r["score"]) if r.get("status") == "ok" and
                              r.get("score") is not None else "invalid") for r in labelled)
            out.append(("confusion matrix (gold rows, predicted columns)",
                        heatmap(cats, cats + ["invalid"], counts, "confusion matrix", "gold", "predicted")))
        if cats:
            pred = Counter(str(r["score"]) for r in run.results
                           if r.get("status") == "ok" and r.get("score") is not None)
            gold = Counter(str(round_half_up(r["label"])) for r in labelled)
            series = [("predicted", pred, "#2563eb")] + ([("gold (rounded)", gold, "#f59e0b")] if labelled else [])
            out.append(("score distribution", bars(cats, series, "score distribution")))
    else:
        cats = ["first", "second", "tie"]
        if labelled:
            counts = Counter((r["label"], r["winner"] if r.get("status") == "ok" and r.get("winner") else "invalid")
                             for r in labelled)
            out.append(("confusion matrix (gold rows, predicted columns)",
                        heatmap(cats, cats + ["invalid"], counts, "confusion matrix", "gold", "predicted")))
        pred = Counter(r.get("winner") for r in run.results if r.get("status") == "ok")
        gold = Counter(r["label"] for r in labelled)
        out.append(("verdict distribution", bars(cats, [("predicted", pred, "#2563eb"),
                                                        ("gold", gold, "#f59e0b")], "verdict distribution")))
    per = _criterion_distributions(run, program, criteria)
    charts = "".join(f'<figure class="chart-box"><figcaption>{html.escape(t)}</figcaption>{svg}</figure>'
                     for t, svg in out)
    crit = "".join(f'<figure class="chart-box crit"><figcaption>{html.escape(c)}</figcaption>{svg}</figure>'
                   for c, svg in per)
    return (f'<section id="charts"><h2>Distributions</h2><div class="charts">{charts}</div>'
            f'<h3>Per-criterion values</h3><div class="charts">{crit}</div></section>')


def _histogram(values: list[float], lo, hi, counts: Counter) -> list[str]:
    """Count numeric judgments into `counts` by bin and return the bins' labels in order. Whole numbers over a
    range of at most 20 get a bar each ("3"); otherwise ten equal bins labelled by their range ("0.9-1": the
    last bin holds its upper end, each other bin [a, b))."""
    lo = min(values) if lo is None else lo
    hi = max(values) if hi is None else hi
    if all(float(v).is_integer() for v in values) and float(lo).is_integer() and float(hi).is_integer() \
            and hi - lo <= 20:
        counts.update(str(int(v)) for v in values)
        return [str(k) for k in range(int(lo), int(hi) + 1)]
    bins = 10
    width = (hi - lo) / bins or 1
    labels = [f"{lo + k * width:.3g}\u2013{lo + (k + 1) * width:.3g}" for k in range(bins)]
    counts.update(labels[min(bins - 1, max(0, int((x - lo) / width)))] for x in values)
    return labels


def _criterion_distributions(run: Run, program, criteria: list[str]) -> list[tuple[str, str]]:
    types = {n.id: n.type for n in program.criteria} if program is not None else {}
    counts: dict[str, Counter] = {c: Counter() for c in criteria}
    numeric: dict[str, list[float]] = {c: [] for c in criteria}
    for record in run.records:
        for n in TraceView.of_record(record).criteria():
            if n.get("id") not in counts:
                continue
            for j in n.get("judgments") or ():
                st, v = j.get("status"), j.get("value")
                if st != "ok":
                    counts[n["id"]][st] += 1
                elif isinstance(v, bool) or isinstance(v, str):
                    counts[n["id"]][str(v).lower() if isinstance(v, bool) else v] += 1
                elif isinstance(v, (int, float)):
                    numeric[n["id"]].append(float(v))
    out = []
    for c in criteria:
        t = types.get(c)
        if numeric[c]:
            cats = _histogram(numeric[c], getattr(t, "lo", None), getattr(t, "hi", None), counts[c])
        else:
            labels = (["true", "false"] if t is not None and getattr(t, "kind", "") == "bool"
                      else list(getattr(t, "labels", ()) or ()))
            cats = labels + [k for k in counts[c] if k not in labels and k not in ("abstained", "invalid")]
        cats += [k for k in ("abstained", "invalid") if counts[c].get(k)]
        out.append((c, bars(cats, [("judgments", counts[c], "#0d9488")], c, height=130)))
    return out


def _graph_svg(program) -> tuple[str, str | None]:
    """(inline SVG of the program's graph, or "", and why not)."""
    if program is None:
        return "", "the program was not found: pass it with --program to draw the graph and decision paths"
    import shutil

    if shutil.which("dot") is None:
        return "", "Graphviz's `dot` is not installed: the graph is not drawn (decision paths are listed)"
    from gsrlang.views.render import RenderOptions, build_graph

    svg = build_graph(program, None, RenderOptions(legend=False)).pipe(format="svg").decode("utf-8")
    svg = svg[svg.find("<svg"):]
    # drop the root's fixed width and height (points): with its viewBox, the page's style scales it to the box's
    # width, the whole graph (sink included) in view; the zoom buttons enlarge it from there
    head, rest = svg.split(">", 1)
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    return head + ' preserveAspectRatio="xMidYMin meet">' + rest, None


def build_report(run: Run, program=None, other: Run | None = None, bootstrap: int = 1000,
                 title: str | None = None, seed: int = 0, by_criterion: dict | None = None) -> str:
    """The report page (a complete HTML document) for `run`, compared with `other` when given.

    `by_criterion` is per-criterion agreement with the data's human labels, as
    `gsrlang.analysis.criteria.criterion_agreement` gives it ({criterion: report})."""
    if other is not None and other.mode != run.mode:
        raise ReportError(f"cannot compare a {run.mode} run with a {other.mode} run")
    strings = _Strings()
    first = next((v for v in map(TraceView.of_record, run.records) if v.computed), TraceView.of_nodes(()))
    node_ids = list(first.nodes)
    kinds = first.kinds
    types = {k: n.get("type") for k, n in first.nodes.items()}
    criteria = [n for n in node_ids if kinds.get(n) == "criterion"]
    paths = _Strings()
    items = _items(run, program, strings, paths, criteria, node_ids)
    other_items = paired = None
    if other is not None:
        b_by_id = {str(line.get("id")): line for line in other.results}
        other_items = [[b_by_id[r[0]].get("status"), b_by_id[r[0]].get("score" if run.mode == "pointwise"
                                                                        else "winner"), b_by_id[r[0]].get("raw")]
                       if r[0] in b_by_id else None for r in items]
        paired = _paired(run, other, bootstrap, seed)
    ma = _metrics(run, bootstrap, seed)
    mb = _metrics(other, bootstrap, seed) if other is not None else None
    graph, graph_note = _graph_svg(program)
    counts = Counter(r.get("status") for r in run.results)
    name = run.header.get("name") or "run"
    title = title or f"gsr report: {name}"
    data = {"mode": run.mode, "criteria": criteria, "nodes": node_ids, "kinds": [kinds[n] for n in node_ids],
            "types": [types[n] for n in criteria], "sink": run.header.get("sink"),
            "strings": strings.items, "paths": [json.loads(p) for p in paths.items], "items": items, "other": other_items,
            "changed": paired["changed"] if paired else None}
    compare = _compare_section(paired) if other is not None else ""
    summary = run.summary or {}
    facts = [f"program <b>{html.escape(str(name))}</b> ({html.escape(str(run.header.get('hash') or '')[:19])})",
             html.escape(str(run.mode)), f"{len(run.results)} items: {counts.get('ok', 0)} ok, "
                                         f"{counts.get('invalid', 0)} invalid, {counts.get('failed', 0)} failed",
             f"results {html.escape(run.results_path)}", f"trace {html.escape(run.trace_path)}"]
    if summary.get("wall_s") is not None:
        facts.append(f"wall time {html.escape(str(summary['wall_s']))} s")
    from gsrlang.judges.llm.prices import cost_record, usage_text

    cost = cost_record(summary)
    if cost and cost.get("calls"):
        facts.append(html.escape(usage_text(cost)))
    if other is not None:
        facts.append(f"compared with run B: {html.escape(other.results_path)}")
    return fill(_TEMPLATE, {
        "TITLE": html.escape(title), "STYLE": _STYLE, "SCRIPT": _SCRIPT, "CSP": _CSP, "FACTS": " \u00b7 ".join(facts),
        "METRICS": _metrics_table(ma, mb, (paired or {}).get("delta"), run.mode) + _criteria_table(by_criterion),
        "COMPARE": compare, "CHARTS": _charts(run, program, criteria),
        "GRAPH": graph or f'<p class="note">{html.escape(graph_note or "")}</p>',
        "DATA": script_json(data),
    })


_SLOT = re.compile(r"@@([A-Z]+)@@")


def fill(template: str, values: dict[str, str]) -> str:
    """The template with each @@NAME@@ slot replaced by its value, in one pass: a value is never searched for
    slots itself (a literal "@@DATA@@" in a rubric's text, a title or a file name stays text). Each value is
    escaped for its slot by its maker: html.escape for text and attributes, script_json for the data block."""
    return _SLOT.sub(lambda m: values[m.group(1)], template)


def script_json(value) -> str:
    """JSON to put inside <script type="application/json">: no `<`, `>` or `&` appears raw (written as \\u003c,
    \\u003e, \\u0026, which JSON.parse reads back), so neither `</script>` nor `<!--` can end or change the
    element's parsing (a `<!--<script>` in an item id left the block in the double-escaped state, and the page's
    script never ran). U+2028 and U+2029 are escaped too."""
    text = dumps_line(value)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text


def _compare_section(paired: dict) -> str:
    diffs = paired["diffs"]
    chart = ""
    if diffs:
        cats = [str(k) for k in sorted(diffs)]
        chart = bars(cats, [("items", Counter({str(k): v for k, v in diffs.items()}), "#7c3aed")],
                     "paired score differences")
    return (f'<section id="compare"><h2>Run B compared with run A</h2>'
            f'<p>{paired["matched"]} items in both runs ({paired["only_a"]} only in A, {paired["only_b"]} only in B); '
            f'<b>{len(paired["changed"])}</b> changed their {"score" if diffs or not paired["changed"] else "verdict"} '
            f'or status (filter the table with "changed").</p>'
            + (f'<figure class="chart-box"><figcaption>score B \u2212 score A, per item</figcaption>{chart}</figure>'
               if chart else "") + "</section>")


_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#111827;background:#f9fafb}
header{background:#111827;color:#f9fafb;padding:12px 20px}header h1{margin:0;font-size:18px}
header p{margin:4px 0 0;color:#d1d5db;font-size:12px}
main{padding:8px 20px 40px}section{background:#fff;border:1px solid #e5e7eb;border-radius:6px;padding:10px 16px;
margin:12px 0}h2{font-size:16px;margin:4px 0 8px}h3{font-size:14px;margin:12px 0 6px}
table{border-collapse:collapse}th,td{padding:3px 8px;border-bottom:1px solid #e5e7eb;text-align:left;
font-variant-numeric:tabular-nums}th{background:#f3f4f6;cursor:pointer;user-select:none;white-space:nowrap}
.ci{color:#6b7280;font-size:12px}.note{color:#6b7280;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart-box{margin:0;border:1px solid #f3f4f6;padding:4px}
figcaption{font-size:12px;color:#374151;font-weight:600}
#graph{overflow:auto;max-height:85vh;border:1px solid #f3f4f6}#graph svg{display:block;width:100%;height:auto;
max-height:80vh}#graph.zoomed svg{max-height:none}.zoom{margin:0 0 6px}.zoom button{margin-right:4px}
.jtype{color:#6b7280;font-size:12px}
#graph .on-path>path,#graph .on-path>polygon{stroke:#dc2626;stroke-width:2.6}
#graph g.node.on-path>polygon,#graph g.node.on-path path{stroke:#dc2626}
.controls{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin-bottom:8px}
.controls label{white-space:nowrap}#items tbody tr{cursor:pointer}#items tbody tr:hover{background:#eff6ff}
#items tr.sel{background:#dbeafe}.st-invalid,.st-failed{color:#b91c1c;font-weight:600}
.flag{display:inline-block;font-size:11px;border-radius:3px;padding:0 4px;margin-right:3px;background:#e5e7eb}
.flag.gate{background:#fee2e2}.flag.abst{background:#f3f4f6;color:#6b7280}.flag.chg{background:#ede9fe}
#detail .crit{border-top:1px solid #f3f4f6;padding:4px 0}.quote{background:#fef9c3;padding:0 3px}
.path-node{display:inline-block;margin:2px 4px 2px 0;padding:1px 6px;border:1px solid #dc2626;border-radius:10px;
font-size:12px}.path-node.gate-changed{background:#fee2e2}.path-node.gate-same{border-color:#d97706}
.pager button{margin:0 4px}
"""

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="@@CSP@@">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@@TITLE@@</title><style>@@STYLE@@</style></head>
<body><header><h1>@@TITLE@@</h1><p>@@FACTS@@</p></header><main>
<section id="agreement"><h2>Agreement with the gold labels</h2>@@METRICS@@</section>
@@COMPARE@@
@@CHARTS@@
<section id="program"><h2>The program</h2>
<div class="zoom"><button id="zoom-in" type="button">zoom in</button><button id="zoom-out" type="button">zoom out</button>
<button id="zoom-fit" type="button">fit</button><span id="zoom-level" class="note"></span></div>
<div id="graph">@@GRAPH@@</div>
<p class="note">Open an item below to draw its decision path on the graph.</p></section>
<section id="table"><h2>Items</h2>
<div class="controls">
<input id="search" type="search" placeholder="item id contains\u2026">
<label><input type="checkbox" class="filter" value="disagree"> disagreement \u2265 2</label>
<label><input type="checkbox" class="filter" value="invalid"> invalid or failed</label>
<label><input type="checkbox" class="filter" value="abstained"> abstained</label>
<label><input type="checkbox" class="filter" value="gate"> gate fired</label>
<label id="changed-box" hidden><input type="checkbox" class="filter" value="changed"> changed (B vs A)</label>
<span id="count"></span></div>
<table id="items"><thead><tr></tr></thead><tbody></tbody></table>
<div class="pager"><button id="prev">\u2190 previous</button><span id="page"></span><button id="next">next \u2192</button></div>
</section>
<section id="detail" hidden><h2 id="detail-title"></h2><div id="detail-body"></div></section>
</main>
<script id="report-data" type="application/json">@@DATA@@</script>
<script>@@SCRIPT@@</script>
</body></html>
"""

_SCRIPT = r"""
"use strict";
const D = JSON.parse(document.getElementById("report-data").textContent);
const S = D.strings, PW = D.mode === "pointwise", PAGE = 50;
const changed = new Set(D.changed || []);
// item row: [id, status, score|winner, raw, label, disagreement, abstained, gate, reason, sink, judged, values, path (an index into D.paths)]
const cols = [["id", r => r[0]], ["status", r => r[1]], [PW ? "score" : "winner", r => r[2]],
  ["gold", r => r[4]], ["disagreement", r => r[5]], ["sink", r => r[9] ? r[9][0] : null]];
if (D.other) cols.push([PW ? "score B" : "winner B", (r, i) => D.other[i] ? D.other[i][1] : null]);
cols.push(["flags", r => (r[7] ? 2 : 0) + (r[6] ? 1 : 0)]);
let order = D.items.map((_, i) => i), view = order, sortCol = -1, sortDir = 1, page = 0, selected = -1;
if (D.other) document.getElementById("changed-box").hidden = false;
const esc = s => String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const fmt = v => v === null || v === undefined ? "\u2014" : (typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : String(v));
function header() {
  const tr = document.querySelector("#items thead tr");
  tr.innerHTML = cols.map((c, k) => `<th data-k="${k}">${esc(c[0])}${k === sortCol ? (sortDir > 0 ? " \u25b2" : " \u25bc") : ""}</th>`).join("");
  tr.querySelectorAll("th").forEach(th => th.onclick = () => {
    const k = +th.dataset.k; sortDir = k === sortCol ? -sortDir : 1; sortCol = k; apply(); });
}
function keep(r, i, filters, q) {
  if (q && !r[0].toLowerCase().includes(q)) return false;
  for (const f of filters) {
    if (f === "disagree" && !(r[5] !== null && r[5] >= 2)) return false;
    if (f === "invalid" && r[1] === "ok") return false;
    if (f === "abstained" && !r[6]) return false;
    if (f === "gate" && !r[7]) return false;
    if (f === "changed" && !changed.has(r[0])) return false;
  }
  return true;
}
function apply() {
  const filters = [...document.querySelectorAll(".filter:checked")].map(x => x.value);
  const q = document.getElementById("search").value.trim().toLowerCase();
  view = order.filter(i => keep(D.items[i], i, filters, q));
  if (sortCol >= 0) {
    const get = cols[sortCol][1];
    view.sort((a, b) => {
      const x = get(D.items[a], a), y = get(D.items[b], b);
      if (x === y) return a - b;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sortDir;
    });
  }
  page = 0; header(); draw();
}
function flags(r) {
  let s = "";
  if (r[7]) s += '<span class="flag gate">gate</span>';
  if (r[6]) s += '<span class="flag abst">abstained</span>';
  if (changed.has(r[0])) s += '<span class="flag chg">changed</span>';
  return s;
}
function draw() {
  const pages = Math.max(1, Math.ceil(view.length / PAGE));
  page = Math.min(Math.max(0, page), pages - 1);
  const rows = view.slice(page * PAGE, page * PAGE + PAGE).map(i => {
    const r = D.items[i];
    const cells = cols.map((c, k) => c[0] === "flags" ? `<td>${flags(r)}</td>` :
      k === 1 ? `<td class="st-${esc(r[1])}">${esc(r[1])}</td>` : `<td>${esc(fmt(c[1](r, i)))}</td>`).join("");
    return `<tr data-i="${i}"${i === selected ? ' class="sel"' : ""}>${cells}</tr>`;
  });
  const body = document.querySelector("#items tbody");
  body.innerHTML = rows.join("");
  body.querySelectorAll("tr").forEach(tr => tr.onclick = () => open(+tr.dataset.i));
  document.getElementById("count").textContent = `${view.length} of ${D.items.length} items`;
  document.getElementById("page").textContent = `page ${page + 1} of ${pages}`;
}
function mark(path) {
  const g = document.querySelector("#graph svg");
  if (!g) return;
  g.querySelectorAll(".on-path").forEach(e => e.classList.remove("on-path"));
  if (!path) return;
  for (const k of path[0]) { const e = document.getElementById("node:" + D.nodes[k]); if (e) e.classList.add("on-path"); }
  for (const id of path[3]) { const e = document.getElementById(id); if (e) e.classList.add("on-path"); }
}
function judgment(j, cand, type) {
  // pointwise: the value and the criterion's type ("3 Score[1..3]"); pairwise: the candidate, then the same
  const [v, st, reason, ev] = j;
  const shown = st === "ok" ? `<b>${esc(fmt(v))}</b>` : `<i>${esc(st)}</i>`;
  let s = (cand === null ? "" : `${esc(cand)}: `) + shown + (type ? ` <span class="jtype">${esc(type)}</span>` : "");
  if (reason !== null) s += ` \u2014 ${esc(S[reason])}`;
  if (ev) s += "<br>evidence: " + ev.map(q => `<span class="quote">\u201c${esc(S[q])}\u201d</span>`).join(" ");
  return s;
}
function open(i) {
  selected = i; draw();
  const r = D.items[i], box = document.getElementById("detail");
  box.hidden = false;
  document.getElementById("detail-title").textContent = `item ${r[0]}`;
  const cands = PW ? [null] : ["A", "B"];
  let h = `<p>status <b class="st-${esc(r[1])}">${esc(r[1])}</b> \u00b7 ${PW ? "score" : "winner"} <b>${esc(fmt(r[2]))}</b>` +
    (PW ? ` (raw ${esc(fmt(r[3]))})` : "") + ` \u00b7 gold ${esc(fmt(r[4]))}` +
    (r[5] !== null ? ` \u00b7 disagreement ${esc(fmt(r[5]))}` : "") + "</p>";
  if (D.other && D.other[i]) h += `<p>run B: status ${esc(D.other[i][0])}, ${PW ? "score" : "winner"} <b>${esc(fmt(D.other[i][1]))}</b></p>`;
  if (r[8] !== null) h += `<p class="st-invalid">${esc(S[r[8]])}</p>`;
  const p = r[12] === null ? null : D.paths[r[12]];
  if (p) {
    h += "<h3>Decision path</h3><div>" + p[0].map(k => {
      const id = D.nodes[k], cls = p[1].includes(id) ? " gate-changed" : p[2].includes(id) ? " gate-same" : "";
      const note = p[1].includes(id) ? " (fired)" : p[2].includes(id) ? " (fired, no change)" : "";
      const v = r[11] ? r[11][k] : null;
      return `<span class="path-node${cls}">${esc(id)} = ${esc(v ? v.map(fmt).join(" / ") : "\u2014")}${note}</span>`;
    }).join("") + "</div>";
  }
  h += "<h3>Judgments</h3>";
  D.criteria.forEach((c, k) => {
    const js = r[10] ? r[10][k] : null;
    const type = D.types ? D.types[k] : null;
    h += `<div class="crit"><b>${esc(c)}</b>: ` +
      (js ? js.map((j, n) => judgment(j, n < cands.length ? cands[n] : String(n), type)).join("<br>") : "\u2014") + "</div>";
  });
  document.getElementById("detail-body").innerHTML = h;
  mark(p);
  box.scrollIntoView({block: "nearest"});
}
// the graph: fitted to the box's width (the whole graph, sink included, in view); zoom enlarges it, the box scrolls
let zoom = 1;
function setZoom(z) {
  const g = document.querySelector("#graph svg"), box = document.getElementById("graph");
  if (!g) return;
  zoom = Math.min(8, Math.max(1, z));
  g.style.width = `${100 * zoom}%`;
  box.classList.toggle("zoomed", zoom > 1);
  document.getElementById("zoom-level").textContent = zoom > 1 ? `${Math.round(zoom * 100)}%` : "fitted to the width";
}
document.getElementById("zoom-in").onclick = () => setZoom(zoom * 1.5);
document.getElementById("zoom-out").onclick = () => setZoom(zoom / 1.5);
document.getElementById("zoom-fit").onclick = () => setZoom(1);
setZoom(1);
document.querySelectorAll(".filter").forEach(x => x.onchange = apply);
document.getElementById("search").oninput = apply;
document.getElementById("prev").onclick = () => { page--; draw(); };
document.getElementById("next").onclick = () => { page++; draw(); };
apply();
performance.mark("report-drawn");  // the first page of the table is drawn: benchmarks/bench_report.py reads it
"""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


# The page's Content-Security-Policy: nothing is fetched, and the only script and style that run are the page's
# own, allowed by their hashes, so no injected element, inline event handler or `javascript:` URL can run
# (an item id `<img src=x onerror=...>` that escaped its escaping would still do nothing)
_CSP = (f"default-src 'none'; script-src {_sha256(_SCRIPT)}; style-src {_sha256(_STYLE)}; img-src data:; "
        "base-uri 'none'; form-action 'none'")

