"""`gsr report`: one self-contained HTML page, checked in a real headless browser (Debian's Chromium, driven
by Playwright; skipped where either is missing), plus what can be checked without one."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from runfiles import records

from gsrlang.cli import main

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"
TC_DATA = TC / "data" / "dev.jsonl"
LLMBAR = ROOT / "examples" / "llmbar"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    return sync_playwright if Path(CHROMIUM).is_file() else None


_skip_browser = pytest.mark.skipif(_playwright() is None, reason="Playwright or /usr/bin/chromium is not installed "
                                                                 "(make setup installs both)")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def needs_browser(test):
    """A browser test: in the slow tier (make test-all), skipped without Playwright or Chromium."""
    return pytest.mark.slow(_skip_browser(test))


def run_tc(tmp, program: str, tag: str, limit: int | None = None) -> tuple[Path, Path]:
    out, trace = tmp / f"{tag}.results.jsonl", tmp / f"{tag}.trace.jsonl"
    argv = ["run", str(TC / program), "--data", str(TC_DATA), "--id-field", "id", "--label-field",
            "scores.overall", "--out", str(out), "--trace", str(trace), "-q", "--bootstrap", "0"]
    assert main(argv + (["--limit", str(limit)] if limit else [])) == 0
    return out, trace


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    return tmp, run_tc(tmp, "overall.gsr", "overall"), run_tc(tmp, "flat.gsr", "flat")


def report(tmp, a, b=None, name="report.html") -> Path:
    out = tmp / name
    argv = ["report", str(a[0]), "--trace", str(a[1]), "-o", str(out), "--bootstrap", "200"]
    if b:
        argv += ["--compare", str(b[0]), "--compare-trace", str(b[1])]
    assert main(argv) == 0
    return out


def page_data(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    block = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', text, re.S).group(1)
    return json.loads(block.replace("<\\/", "</"))


@needs_dot
def test_report_is_self_contained_and_holds_every_part(runs):
    tmp, a, _ = runs
    text = report(tmp, a).read_text(encoding="utf-8")
    # no network: nothing fetched (no src/href to a URL, no @import, no web font)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "@import" not in text and "@font-face" not in text and "url(" not in text
    for part in ('id="metrics"', "confusion matrix", "score distribution", "Per-criterion values",
                 'id="graph"', "<svg", 'id="items"', "disagreement"):
        assert part in text, part
    data = page_data(report(tmp, a))
    assert len(data["items"]) == 240 and data["criteria"][:2] == ["understandable", "natural"]
    results = records(a[0])  # the item lines (a results file ends with its completion line)
    assert [r[0] for r in data["items"]] == [r["id"] for r in results]
    assert [r[2] for r in data["items"]] == [r["score"] for r in results]


def test_results_and_trace_of_different_runs_are_refused(runs, capsys):
    tmp, a, b = runs
    out = tmp / "mixed.html"
    assert main(["report", str(a[0]), "--trace", str(b[1]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "are not of the same run" in err and err.count("\n") == 1 and not out.exists()
    short = run_tc(tmp, "overall.gsr", "short", limit=10)
    assert main(["report", str(a[0]), "--trace", str(short[1]), "-o", str(out)]) == 2
    assert "240 result lines, 10 trace records" in capsys.readouterr().err


def test_a_program_of_another_version_is_refused(runs, capsys):
    tmp, a, _ = runs
    assert main(["report", str(a[0]), "--trace", str(a[1]), "--program", str(TC / "flat.gsr"),
                 "-o", str(tmp / "x.html")]) == 2
    assert "another version of the program" in capsys.readouterr().err


@needs_browser
@needs_dot
def test_report_in_a_headless_browser(runs, tmp_path):
    tmp, a, b = runs
    page_file = report(tmp, a, b, name="compare.html")
    sync_playwright = _playwright()
    errors, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_file.as_uri())
        page.wait_for_selector("#items tbody tr")
        assert errors == []
        assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests
        total = page.locator("#count").inner_text()
        assert total == "240 of 240 items"
        assert page.locator("#items tbody tr").count() == 50  # one page at a time

        data = page_data(page_file)
        expect_disagree = sum(1 for r in data["items"] if r[5] is not None and r[5] >= 2)
        page.check('input.filter[value="disagree"]')
        assert page.locator("#count").inner_text() == f"{expect_disagree} of 240 items"
        shown = page.locator("#items tbody tr td:nth-child(5)").all_inner_texts()
        assert len(shown) == min(expect_disagree, 50) and all(float(x) >= 2 for x in shown)
        page.uncheck('input.filter[value="disagree"]')

        expect_gate = sum(1 for r in data["items"] if r[7])
        assert 0 < expect_gate < 240
        page.check('input.filter[value="gate"]')
        assert page.locator("#count").inner_text() == f"{expect_gate} of 240 items"
        assert page.locator("#items tbody tr .flag.gate").count() == min(expect_gate, 50)
        page.uncheck('input.filter[value="gate"]')

        expect_changed = len(data["changed"])
        page.check('input.filter[value="changed"]')
        assert page.locator("#count").inner_text() == f"{expect_changed} of 240 items"
        page.uncheck('input.filter[value="changed"]')

        page.fill("#search", "tc-00")
        assert page.locator("#count").inner_text() == "10 of 240 items"
        page.fill("#search", "")

        page.click('#items thead th:has-text("score")')  # sort ascending by score
        scores = [int(x) for x in page.locator("#items tbody tr td:nth-child(3)").all_inner_texts() if x.isdigit()]
        assert scores == sorted(scores)

        # the whole graph fits the box's width, the sink in view; zoom enlarges it and "fit" restores it
        box = page.locator("#graph").bounding_box()
        sink = page.locator('#graph [id="node:final"]').bounding_box()
        graph = page.locator("#graph svg").bounding_box()
        assert graph["width"] <= box["width"] + 1 and graph["height"] <= box["height"] + 1
        assert box["x"] <= sink["x"] and sink["x"] + sink["width"] <= box["x"] + box["width"]
        assert box["y"] <= sink["y"] and sink["y"] + sink["height"] <= box["y"] + box["height"]
        page.click("#zoom-in")
        assert page.locator("#graph svg").bounding_box()["width"] > 1.4 * graph["width"]
        page.click("#zoom-fit")
        assert abs(page.locator("#graph svg").bounding_box()["width"] - graph["width"]) < 1

        page.click("#items tbody tr >> nth=0")
        detail = page.locator("#detail")
        assert detail.is_visible() and "Decision path" in detail.inner_text()
        assert "Judgments" in detail.inner_text()
        # pointwise judgments: value and type, no candidate letter
        crit = page.locator("#detail .crit >> nth=1").inner_text()  # natural: Score[1..3]
        assert re.fullmatch(r"natural: [0-9.]+ Score\[1\.\.3\]", crit.strip()), crit
        assert "A:" not in detail.inner_text()
        assert page.locator("#graph .on-path").count() > 0  # the path is drawn on the graph
        assert errors == []
        shot = Path(os.environ.get("GSR_REPORT_SCREENSHOT") or tmp_path / "report.png")
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@needs_browser
@needs_dot
def test_pairwise_report_in_a_headless_browser(tmp_path):
    out, trace = tmp_path / "p.jsonl", tmp_path / "p.trace.jsonl"
    assert main(["run", str(LLMBAR / "rules_only.gsr"), "--data", str(LLMBAR / "data" / "natural.json"),
                 "--responses", "output_1,output_2", "--label-field", "label", "--out", str(out), "--trace",
                 str(trace), "-q", "--bootstrap", "0"]) in (0, 1)
    page_file = report(tmp_path, (out, trace), name="pairwise.html")
    errors = []
    with _playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        page.wait_for_selector("#items tbody tr")
        assert page.locator("#count").inner_text() == "100 of 100 items"
        page.check('input.filter[value="disagree"]')  # opposite winners
        n = sum(1 for r in page_data(page_file)["items"] if r[5] == 2)
        assert n > 0 and page.locator("#count").inner_text() == f"{n} of 100 items"
        page.click("#items tbody tr >> nth=0")
        assert "B:" in page.locator("#detail").inner_text()
        browser.close()
    assert errors == []


def test_per_criterion_agreement_in_the_report(runs, tmp_path, capsys):
    """--criterion NAME=FIELD --data FILE: the criterion's judgments against the data's human label for it."""
    from gsrlang.analysis.metrics import pointwise_metrics

    tmp, a, _ = runs
    rows = [json.loads(x) for x in TC_DATA.read_text().splitlines()]
    for i, r in enumerate(rows):  # a second annotator: some coherence labels moved up one
        r["human"] = {"coherence": r["scores"]["coherence"] + (1.0 if i % 5 == 0 else 0.0)}
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "crit.html"
    argv = ["report", str(a[0]), "--trace", str(a[1]), "-o", str(out), "--bootstrap", "100", "--data", str(data),
            "--id-field", "id", "--criterion", "maintains_context=human.coherence"]
    assert main(argv) == 0
    text = out.read_text(encoding="utf-8")
    table = re.search(r'<table class="metrics" id="criteria">(.*?)</table>', text, re.S).group(1)
    # maintains_context is human(field: "scores.coherence"): its judgments are the first annotator's labels
    expected = pointwise_metrics([r["scores"]["coherence"] for r in rows], [r["human"]["coherence"] for r in rows])
    assert 0.5 < expected["exact"] < 1.0
    for key in ("exact", "within1", "mae", "qwk"):
        cell = re.search(rf'<td data-metric="{key}">([^<]*)<span class="ci">\[([^,]+), ([^\]]+)\]', table)
        value, low, high = (float(x) for x in cell.groups())
        assert value == pytest.approx(expected[key], abs=5e-4) and low <= value <= high, key
    assert "human.coherence" in table and "<td>240</td>" in table

    for bad, message in ((["--criterion", "nonexistent=human.coherence", "--data", str(data)], "no criterion"),
                         (["--criterion", "maintains_context=human.coherence"], "needs --data"),
                         (["--data", str(data)], "go with --criterion"),
                         (["--criterion", "oops", "--data", str(data)], "NAME=FIELD")):
        capsys.readouterr()
        assert main(["report", str(a[0]), "--trace", str(a[1]), "-o", str(tmp_path / "bad.html")] + bad) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "bad.html").exists()
    # a field no row holds: the page is written, and a warning says that nothing could be compared
    assert main(argv[:-1] + ["maintains_context=human.nothing"]) == 0
    err = capsys.readouterr().err
    assert "warning: criterion `maintains_context`: no item of the trace has a label in `human.nothing`" in err


# ---- issue 24 item 2: nothing a run holds can run as script in the page ---------------------------------------
PAYLOADS = ["<img src=x onerror=window.__pwned=1>", "<!--<script>", "@@DATA@@", "</script><script>window.__pwned=2</script>",
            "a&b \u2028 c", "@@SCRIPT@@ x"]


def hostile_run(tmp: Path) -> tuple[Path, Path, Path]:
    """A run whose item ids, rubric text, results file name and trace summary carry markup and template slots."""
    rows = [json.loads(x) for x in TC_DATA.read_text(encoding="utf-8").splitlines()[:len(PAYLOADS) + 2]]
    for row, payload in zip(rows, PAYLOADS + ["plain-1", "plain-2"]):
        row["id"] = payload
    data = tmp / "hostile.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    source = (TC / "overall.gsr").read_text(encoding="utf-8").replace(
        '"What is your overall impression', '"@@DATA@@ <img src=x onerror=window.__pwned=3> What is your overall impression')
    program = tmp / "hostile.gsr"
    program.write_text(source, encoding="utf-8")
    out, trace = tmp / "@@DATA@@ <b>results</b>.jsonl", tmp / "hostile.trace.jsonl"
    assert main(["run", str(program), "--data", str(data), "--id-field", "id", "--label-field", "scores.overall",
                 "--out", str(out), "--trace", str(trace), "-q", "--bootstrap", "0"]) == 0
    lines = trace.read_text(encoding="utf-8").rstrip("\n").split("\n")  # not splitlines: an id holds U+2028
    summary = json.loads(lines[-1])
    assert summary["kind"] == "run_summary"
    summary["wall_s"] = "<img src=x onerror=window.__pwned=4>"  # a tampered summary
    trace.write_text("\n".join(lines[:-1] + [json.dumps(summary)]) + "\n", encoding="utf-8")
    page = tmp / "hostile.html"
    assert main(["report", str(out), "--trace", str(trace), "-o", str(page), "--bootstrap", "0",
                 "--title", "@@DATA@@ <script>window.__pwned=5</script>"]) == 0
    return page, out, trace


def test_hostile_values_are_escaped_for_their_context(tmp_path):
    page, out, _ = hostile_run(tmp_path)
    text = page.read_text(encoding="utf-8")
    # the data block: no raw <, > or & at all, and it reads back to the ids
    block = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', text, re.S).group(1)
    assert not set("<>&") & set(block) and "\u2028" not in block
    assert [r[0] for r in json.loads(block)["items"]][:len(PAYLOADS)] == PAYLOADS
    # one pass: every slot filled once, none left, none filled inside a value
    assert text.count('<script id="report-data"') == 1 and "@@CSP@@" not in text and "@@GRAPH@@" not in text
    outside = text.replace(block, "")
    for raw in ("<img src=x", "<script>window", "<b>results</b>", "<!--<script>"):
        assert raw not in outside, raw
    assert "@@DATA@@ &lt;script&gt;window.__pwned=5&lt;/script&gt;" in text  # the title, as text
    assert "wall time &lt;img src=x onerror=window.__pwned=4&gt; s" in text
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', text).group(1)
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe-inline" not in csp


@needs_browser
@needs_dot
def test_hostile_values_run_nothing_in_a_browser(tmp_path):
    page_file, _, _ = hostile_run(tmp_path)
    # and a page where markup did get through (as a bug would let it): the policy stops its handler
    text = page_file.read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(text.replace("<main>", '<main><img src="x" onerror="window.__pwned=9">', 1), encoding="utf-8")
    with _playwright()() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for path, expect_violation in ((page_file, False), (broken, True)):
            errors = []
            page = browser.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.add_init_script("window.__violations = []; document.addEventListener('securitypolicyviolation', "
                                 "e => window.__violations.push(e.violatedDirective));")
            page.goto(path.as_uri())
            page.wait_for_selector("#items tbody tr")
            assert page.evaluate("window.__pwned") is None
            assert page.locator("#count").inner_text() == f"{len(PAYLOADS) + 2} of {len(PAYLOADS) + 2} items"
            ids = page.locator("#items tbody tr td:nth-child(1)").all_inner_texts()
            # the ids are drawn as text (inner_text folds the U+2028 of one into a line break)
            assert {"<img src=x onerror=window.__pwned=1>", "<!--<script>", "@@DATA@@",
                    "</script><script>window.__pwned=2</script>", "@@SCRIPT@@ x"} <= set(ids)
            violations = page.evaluate("window.__violations")
            if expect_violation:
                assert "script-src-attr" in violations, violations  # the inline handler was refused
            else:
                assert violations == [] and errors == [], (violations, errors)
            page.close()
        browser.close()


def test_histogram_bins_are_labelled_by_their_range():
    from collections import Counter

    from gsrlang.views.report import _histogram

    counts = Counter()
    labels = _histogram([0.0, 0.05, 0.95, 1.0], 0.0, 1.0, counts)
    assert labels[0] == "0\u20130.1" and labels[-1] == "0.9\u20131" and counts[labels[-1]] == 2
    counts = Counter()
    assert _histogram([1, 3, 3], 1, 3, counts) == ["1", "2", "3"] and counts == Counter({"3": 2, "1": 1})
