"""`gsr report`: the page's size, the time to build it, and its load time in a headless browser.

    python benchmarks/bench_report.py            # 240 and 10,000 items, 3 repeats
    python benchmarks/bench_report.py --quick    # 240 and 2,000 items

Runs: the Topical-Chat graph program (examples/topical_chat/overall.gsr, human
annotations, no model) over its 240 items, and over 10,000 items made by repeating
them with new ids. For each:

- the HTML file's size;
- the time `build_report` takes with the command's default 1,000 bootstrap resamples,
  as a ratio to a numpy anchor timed in the same run (sorting 4 million floats);
- the bootstrap alone, per resample: the vectorised metrics (`metrics_with_confidence`)
  against one `pointwise_metrics` report per resample (`with_confidence`, the way gsr
  computed intervals before; timed over 20 resamples), same data;
- in Debian's Chromium driven by Playwright: the load time, from navigation until the
  item table's first page is drawn (the page's script has parsed the data and rendered:
  the `report-drawn` performance mark, read in the page), as a ratio to an anchor page
  whose script draws one table row; and the time one filter (disagreement >= 2) and one
  sort (by score) take in the page (the script's work, measured around the event in the page).

Figures are min / median / max over the repeats. Needs Playwright and /usr/bin/chromium
(`make setup`); without them only size and build times are printed.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUICK = "--quick" in sys.argv
SIZES = (240, 2000) if QUICK else (240, 10_000)
REPEATS = 3
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ANCHOR = ("<!DOCTYPE html><html><body><table id='items'><tbody></tbody></table><script>"
          "document.querySelector('#items tbody').innerHTML='<tr><td>x</td></tr>';"
          "performance.mark('report-drawn');</script></body></html>")


def make_run(folder: Path, n: int) -> tuple[Path, Path]:
    from gsrlang.lang.check.driver import analyze_file
    from gsrlang.files.dataset import ColumnMap
    from gsrlang.judges.registry import default_registry
    from gsrlang.execution.runs import run_file
    from gsrlang.execution.planner import RunConfig

    rows = [json.loads(line) for line in (ROOT / "examples/topical_chat/data/dev.jsonl").read_text().splitlines()]
    data = folder / f"items{n}.jsonl"
    with data.open("w") as f:
        for k in range(n):
            f.write(json.dumps({**rows[k % len(rows)], "id": f"it-{k:05d}"}) + "\n")
    path = ROOT / "examples/topical_chat/overall.gsr"
    program = analyze_file(path).program
    out, trace = folder / f"r{n}.jsonl", folder / f"t{n}.jsonl"
    columns = ColumnMap("context", ("response",), "id", "scores.overall", read_input=False, read_responses=False,
                        fields=())
    run_file(program, data, columns, default_registry(), "pointwise",
             RunConfig(out=str(out), trace=str(trace), program_path=str(path)))
    return out, trace, program


FILTER = """() => { const t = performance.now(); const box = document.querySelector('input.filter[value=disagree]');
  box.checked = true; box.dispatchEvent(new Event('change')); const dt = performance.now() - t;
  box.checked = false; box.dispatchEvent(new Event('change')); return dt; }"""
SORT = """() => { const t = performance.now(); [...document.querySelectorAll('#items thead th')]
  .find(th => th.textContent.startsWith('score')).click(); return performance.now() - t; }"""


def browser_times(page_file: Path, repeats: int, interact: bool) -> dict[str, list[float]] | None:
    """Load times (s), and with `interact` the filter and sort times (s), over `repeats` fresh pages."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).is_file():
        return None
    times: dict[str, list[float]] = {"load": [], "filter": [], "sort": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(repeats):
            page = browser.new_page()
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_selector("#items tbody tr")
            times["load"].append(page.evaluate("performance.getEntriesByName('report-drawn')[0].startTime") / 1000)
            if interact:
                times["filter"].append(page.evaluate(FILTER) / 1000)
                times["sort"].append(page.evaluate(SORT) / 1000)
            page.close()
        browser.close()
    return times


def numpy_anchor() -> float:
    import numpy as np

    data = np.random.default_rng(0).random(4_000_000)
    t = time.perf_counter()
    np.sort(data)
    return time.perf_counter() - t


def bootstrap_per_resample(results: Path) -> tuple[float, float]:
    """(vectorised, one report per resample) seconds per resample on a results file's labelled items."""
    from gsrlang.analysis.metrics import metrics_with_confidence, pointwise_metrics, read_results, with_confidence

    lines = [r for r in read_results(results) if r.get("kind") != "run_summary" and r.get("label") is not None]
    preds = [r["score"] if r["status"] == "ok" else None for r in lines]
    golds = [r["label"] for r in lines]
    t = time.perf_counter()
    metrics_with_confidence("pointwise", preds, golds, n_resamples=1000)
    fast = (time.perf_counter() - t) / 1000
    t = time.perf_counter()
    with_confidence(pointwise_metrics, preds, golds, n_resamples=20)
    slow = (time.perf_counter() - t) / 20
    return fast, slow


def spread(values, unit=1.0, fmt="{:.3f}") -> str:
    return " / ".join(fmt.format(v * unit) for v in (min(values), statistics.median(values), max(values)))


def main() -> int:
    from gsrlang.views.report import build_report, load_run

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        anchor_file = folder / "anchor.html"
        anchor_file.write_text(ANCHOR)
        anchor = browser_times(anchor_file, REPEATS, interact=False)
        if anchor is None:
            print("(Playwright or Chromium missing: load times not measured)")
        else:
            print(f"anchor page: a minimal page drawing one row: load {spread(anchor['load'], 1e3, '{:.1f}')} ms "
                  "(min / median / max)")
        for n in SIZES:
            results, trace, program = make_run(folder, n)
            builds, anchors, size = [], [], 0
            for _ in range(REPEATS):
                anchors.append(numpy_anchor())
                t = time.perf_counter()
                page = build_report(load_run(results, trace), program, bootstrap=1000)
                builds.append(time.perf_counter() - t)
                size = len(page.encode("utf-8"))
            page_file = folder / f"report{n}.html"
            page_file.write_text(page, encoding="utf-8")
            ratios = [b / statistics.median(anchors) for b in builds]
            print(f"{n:>6} items: {size / 1e6:.2f} MB; build (1,000 resamples) {spread(builds, 1, '{:.2f}')} s = "
                  f"{spread(ratios, 1, '{:.0f}')} x the numpy anchor ({spread(anchors, 1e3, '{:.0f}')} ms)")
            fast, slow = bootstrap_per_resample(results)
            print(f"        bootstrap per resample: vectorised {fast * 1e3:.2f} ms, one report per resample "
                  f"{slow * 1e3:.1f} ms ({slow / fast:.0f}x)")
            times = browser_times(page_file, REPEATS, interact=True) if anchor is not None else None
            if times:
                load_ratios = [x / statistics.median(anchor["load"]) for x in times["load"]]
                print(f"        in Chromium: load {spread(times['load'], 1e3, '{:.0f}')} ms "
                      f"({spread(load_ratios, 1, '{:.1f}')} x the anchor page); filter "
                      f"{spread(times['filter'], 1e3, '{:.1f}')} ms; sort {spread(times['sort'], 1e3, '{:.1f}')} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
