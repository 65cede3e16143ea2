"""`gsr report`: the page's size, the time to build it, and its load time in a headless browser.

    python benchmarks/bench_report.py            # 240 and 10,000 items, 3 repeats
    python benchmarks/bench_report.py --quick    # 240 and 2,000 items

Runs: the Topical-Chat graph program (examples/topical_chat/overall.gsr, human
annotations, no model) over its 240 items, and over 10,000 items made by repeating
them with new ids. For each: the HTML file's size, the time `build_report` takes
(bootstrap 200), and the load time in Debian's Chromium driven by Playwright: from
navigation until the item table's first page is drawn (the page's script has parsed
the data and rendered: the `report-drawn` performance mark, read in the page). The anchor is the same
browser loading a minimal page whose script draws one table row, in the same run; the
load time is also given as a ratio to it. min / median / max over the repeats.
Needs Playwright and /usr/bin/chromium (`make setup`); without them only size and
build time are printed.
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
    from gsrlang.check.driver import analyze_file
    from gsrlang.data import ColumnMap
    from gsrlang.judges.registry import default_registry
    from gsrlang.runtime.batch import run_file

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
    run_file(program, data, columns, default_registry(), "pointwise", str(out), str(trace), program_path=str(path))
    return out, trace, program


def load_times(page_file: Path, repeats: int) -> list[float] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).is_file():
        return None
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(repeats):
            page = browser.new_page()
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_selector("#items tbody tr")
            times.append(page.evaluate("performance.getEntriesByName('report-drawn')[0].startTime") / 1000)
            page.close()
        browser.close()
    return times


def spread(values, unit=1.0, fmt="{:.3f}") -> str:
    return " / ".join(fmt.format(v * unit) for v in (min(values), statistics.median(values), max(values)))


def main() -> int:
    from gsrlang.report import build_report, load_run

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        anchor_file = folder / "anchor.html"
        anchor_file.write_text(ANCHOR)
        anchor = load_times(anchor_file, REPEATS)
        if anchor is None:
            print("(Playwright or Chromium missing: load times not measured)")
        else:
            print(f"anchor: a minimal page drawing one row: load {spread(anchor, 1e3, '{:.1f}')} ms "
                  "(min / median / max)")
        for n in SIZES:
            results, trace, program = make_run(folder, n)
            builds, size = [], 0
            for _ in range(REPEATS):
                t = time.perf_counter()
                page = build_report(load_run(results, trace), program, bootstrap=200)
                builds.append(time.perf_counter() - t)
                size = len(page.encode("utf-8"))
            page_file = folder / f"report{n}.html"
            page_file.write_text(page, encoding="utf-8")
            line = f"{n:>6} items: {size / 1e6:.2f} MB; build {spread(builds, 1, '{:.2f}')} s"
            loads = load_times(page_file, REPEATS) if anchor is not None else None
            if loads:
                ratios = [x / statistics.median(anchor) for x in loads]
                line += (f"; load in Chromium {spread(loads, 1e3, '{:.0f}')} ms "
                         f"({spread(ratios, 1, '{:.1f}')} x the anchor)")
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
