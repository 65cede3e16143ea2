"""Fuzzing in the test suite: one hypothesis target per entry point, and the corpus of past crashers.

Targets (tests/fuzzing.py): `gsr check` on mutants of the example programs, `gsr import` on
mutants of their JSON forms, the row readers on JSONL and CSV files with spiced rows, the
language server's features on edited documents. Each runs a bounded number of examples
(a quarter of them by default, all 40 in the slow tier: tests/tiers.py); `benchmarks/bench_hardening.py` runs
thousands and prints crashes per 10,000. Set GSR_FUZZ_EXAMPLES to run more here.

tests/fuzz_corpus/ keeps one file per crasher class found by hand and by fuzzing (issue
11); each must now be handled: a diagnostic, a form error or a failed row, never an
internal error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import fuzzing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
EXAMPLES = int(os.environ.get("GSR_FUZZ_EXAMPLES", "0")) or examples(40)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

TEXTS = fuzzing.example_texts()
FORMS = fuzzing.example_forms()
seeds = st.integers(0, 2**32 - 1)
text_ops = st.lists(st.tuples(st.sampled_from(sorted(fuzzing.TEXT_MUTATIONS)), seeds), min_size=1, max_size=4)
json_ops = st.lists(st.tuples(st.sampled_from([*sorted(fuzzing.JSON_MUTATIONS), "delete", "truncate"]), seeds),
                    min_size=1, max_size=4)
row_ops = st.lists(st.tuples(st.sampled_from(["row", "truncate"]), seeds), min_size=1, max_size=6)


@pytest.mark.examples
@FUZZ
@given(source=st.sampled_from(TEXTS), ops=text_ops)
def test_fuzz_check(tmp_path, source, ops):
    assert fuzzing.check_target(fuzzing.mutate_text(source, ops), tmp_path) is None


@pytest.mark.examples
@FUZZ
@given(form=st.sampled_from(FORMS), ops=json_ops)
def test_fuzz_import(tmp_path, form, ops):
    assert fuzzing.import_target(fuzzing.mutate_json(form, ops), tmp_path) is None


@pytest.mark.examples
@FUZZ
@given(ops=row_ops, suffix=st.sampled_from([".jsonl", ".csv"]))
def test_fuzz_row_readers(tmp_path, ops, suffix):
    assert fuzzing.rows_target(fuzzing.row_file(ops, suffix), suffix, tmp_path) is None


@pytest.mark.examples
@settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
@given(source=st.sampled_from(TEXTS), ops=text_ops, seed=seeds)
def test_fuzz_language_server(source, ops, seed):
    assert fuzzing.lsp_target(fuzzing.mutate_text(source, ops), seed) is None


def test_the_mutators_change_their_inputs():
    """A fuzzer whose mutants equal the examples would test nothing."""
    import random

    rnd = random.Random(1)
    changed = sum(fuzzing.mutate_text(TEXTS[0], [(name, rnd.randrange(2**32))]) != TEXTS[0]
                  for name in fuzzing.TEXT_MUTATIONS for _ in range(5))
    assert changed >= 0.8 * 5 * len(fuzzing.TEXT_MUTATIONS)
    import json

    assert all(json.loads(fuzzing.mutate_json(FORMS[0], [(name, 7)])) != FORMS[0] for name in fuzzing.JSON_MUTATIONS)


# ---- the corpus of crashers ------------------------------------------------------------------------------------
def _corpus(kind: str) -> list[Path]:
    return sorted((CORPUS / kind).iterdir())


@pytest.mark.parametrize("path", _corpus("check"), ids=lambda p: p.name)
def test_corpus_check(path, capsys):
    from gsrlang.cli import main

    assert main(["check", str(path), "--format", "sarif"]) == 1  # a diagnostic, not an internal error (2)
    import json

    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["results"] and "invocations" not in run
    text = path.read_text(encoding="utf-8", errors="replace")
    assert fuzzing.lsp_target(text, 0) is None


@pytest.mark.parametrize("path", _corpus("import"), ids=lambda p: p.name)
def test_corpus_import(path, capsys):
    from gsrlang.cli import main

    assert main(["import", str(path)]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err and err.strip()


@pytest.mark.parametrize("path", _corpus("rows"), ids=lambda p: p.name)
def test_corpus_rows(path):
    """Each file holds good rows around the crasher: the crasher is a failed row naming its line; the rest read."""
    from gsrlang.files.dataset import ColumnMap, Item, ItemError, read_items

    results = list(read_items(path, ColumnMap()))
    failed = [r for r in results if isinstance(r, ItemError)]
    if path.stem.endswith("_is_read"):  # once a crasher, now within the limits
        assert not failed and len(results) == 3
        return
    assert len(failed) == 1 and failed[0].reason.startswith(f"line {failed[0].line}: ")
    assert isinstance(results[0], Item) and isinstance(results[-1], Item)


def test_corpus_regex_runs_in_linear_time(monkeypatch):
    from test_rule_judges import regex_engines

    from gsrlang.judges.rules import run_rule

    engines = regex_engines(monkeypatch)  # RE2 never backtracks; Python's re took 36 s on this one
    pattern = (CORPUS / "regex" / "catastrophic.txt").read_text(encoding="utf-8").strip()
    assert run_rule("regex", "a" * 30 + "!", {"pattern": pattern})[0] is False
    assert engines == ["re2"]


@pytest.mark.parametrize("entry", ["parser", "json", "jsonl"])
def test_coverage_guided_fuzzing_runs_and_finds_no_crash(entry):
    # issue 24 ("Also"): atheris over the parser, the JSON form and the JSONL row reader, briefly
    pytest.importorskip("atheris")
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "fuzz_coverage.py"), entry, "60"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(root)})
    report = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert report["entry"] == entry and report["runs"] == 60
    assert report["crashes"] == 0, report["first"]
    assert "NEW" in proc.stderr  # libFuzzer kept inputs for their new coverage
