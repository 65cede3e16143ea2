"""Trace format version 2: structure once in a header, lean item records; version 1 traces still replay."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.trace.read import read_records, read_trace
from gsrlang.trace.schema import TraceError

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "cases" / "trace"
TC = ROOT / "examples" / "topical_chat"
COLUMNS = ["--input-field", "context", "--reference-field", "fact", "--id-field", "id",
           "--label-field", "scores.overall"]


def gsr(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    io = capsys.readouterr()
    return code, io.out, io.err


@pytest.fixture
def v1_trace(tmp_path) -> Path:
    """A trace written by gsr before version 2 (tests/cases/trace), beside its program."""
    for name in ("topical_chat_v1.jsonl", "overall.gsr"):
        shutil.copy(CASES / name, tmp_path / name)
    return tmp_path / "topical_chat_v1.jsonl"


def test_a_version_1_trace_still_replays_exactly(v1_trace, capsys):
    code, out, err = gsr(capsys, "replay", v1_trace)
    assert code == 0, err
    assert "6 items" in out and "reproduced exactly" in out


def test_a_version_1_trace_reads_in_the_same_logical_form_as_version_2(v1_trace, tmp_path, capsys):
    v2 = tmp_path / "v2.jsonl"
    code, _, err = gsr(capsys, "replay", v1_trace, "--trace-out", v2)  # re-written in the current format
    assert code == 0, err
    old = [r for _, r in read_trace(v1_trace)]
    new = [r for _, r in read_trace(v2)]
    assert len(old) == len(new) == 6
    for a, b in zip(old, new):
        assert a["trace_version"] == 1 and b["trace_version"] == 2
        assert a["program"]["hash"] == b["program"]["hash"]  # (the path is where replay found the program)
        b["result"].pop("program")  # result lines name their program since this trace was written
        assert {k: v for k, v in a.items() if k not in ("trace_version", "program")} == \
            {k: v for k, v in b.items() if k not in ("trace_version", "program")}
    code, out, err = gsr(capsys, "replay", v2, "--program", tmp_path / "overall.gsr")
    assert code == 0 and "reproduced exactly" in out, err


def test_version_2_writes_the_structure_once_and_is_at_least_twice_smaller(v1_trace, tmp_path, capsys):
    """The same six items as the committed version 1 trace: the version 2 file is less than half its size."""
    trace = tmp_path / "t.jsonl"
    code, _, err = gsr(capsys, "run", tmp_path / "overall.gsr", "--data", TC / "data" / "dev.jsonl", *COLUMNS,
                       "--trace", trace, "--limit", "6", "-q", "--no-progress")
    assert code == 0, err
    raw = [json.loads(line) for line in trace.read_text().splitlines()]
    kinds = [r.get("kind") for r in raw]
    assert kinds == ["header", None, None, None, None, None, None, "run_summary"]
    assert all("nodes" not in r and "p" in r for r in raw[1:-1])
    item_bytes = lambda path: sum(len(line) for line in path.read_bytes().splitlines()  # noqa: E731
                                  if b'"run_summary"' not in line)
    assert item_bytes(trace) * 2 <= item_bytes(v1_trace), (item_bytes(trace), item_bytes(v1_trace))


def test_a_record_whose_header_is_missing_is_a_clear_error(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    code, _, err = gsr(capsys, "run", TC / "overall.gsr", "--data", TC / "data" / "dev.jsonl", *COLUMNS,
                       "--trace", trace, "--limit", "2", "-q", "--no-progress")
    assert code == 0, err
    lines = trace.read_text().splitlines()
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[1:]) + "\n")  # the header cut off
    with pytest.raises(TraceError, match="line 1 names header 0, which no earlier line declares"):
        list(read_records(tmp_path / "cut.jsonl"))
    code, _, err = gsr(capsys, "replay", tmp_path / "cut.jsonl")
    assert code == 2 and "names header 0" in err and "Traceback" not in err


def test_the_standard_library_fallback_writes_the_same_records(monkeypatch):
    """Without orjson (not installed off CPython) the trace is written and read by `json`, to the same values."""
    import gsrlang.trace.jsonio as fast

    record = {"out": [[0.1 + 0.2], [1e-7], [True], ["good"]], "j": {"x": [{"raw": "é", "provenance": {"n": 3}}]}}
    text = fast.dumps_line(record)
    monkeypatch.setitem(sys.modules, "orjson", None)  # import orjson now fails
    try:
        plain = importlib.reload(fast)
        assert plain.BACKEND == "json"
        assert plain.loads(plain.dumps_line(record)) == record == plain.loads(text)
    finally:
        monkeypatch.undo()
        importlib.reload(fast)


def test_a_tampered_version_2_record_is_pointed_at(tmp_path, capsys):
    """The fast path of verification (structure once per header, values straight from `out`) still finds
    and names a changed value, a changed unsettled flag and a changed header."""
    trace = tmp_path / "t.jsonl"
    code, _, err = gsr(capsys, "run", TC / "overall.gsr", "--data", TC / "data" / "dev.jsonl", *COLUMNS,
                       "--trace", trace, "--limit", "5", "-q", "--no-progress")
    assert code == 0, err
    raw = [json.loads(line) for line in trace.read_text().splitlines()]
    position = [n["id"] for n in raw[0]["nodes"]].index("quality")

    def replay_with(edit) -> str:
        rows = json.loads(json.dumps(raw))
        edit(rows)
        bad = tmp_path / "bad.jsonl"
        bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
        code, _, err = gsr(capsys, "replay", bad, "--program", TC / "overall.gsr")
        assert code == 1
        return err

    def halve(rows):
        rows[3]["out"][position][0] /= 2
    assert "item 'tc-002' (trace line 4), node `quality`, candidate A: recorded" in replay_with(halve)

    def flag(rows):
        rows[2]["u"] = {str(position): [True]}
    assert "item 'tc-001' (trace line 3), node `quality`" in replay_with(flag)

    def restructure(rows):
        rows[0]["nodes"][position]["op"] = "mean"
    assert "recorded `op` differs from the program's" in replay_with(restructure)


def _json_values():
    from hypothesis import strategies as st

    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner,
                                                                                             max_size=4), max_leaves=12)


def test_a_result_line_is_what_json_dumps_writes():
    """`schema.dumps` (the results encoder, made once) writes what `json.dumps` with its options writes."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from gsrlang.trace.schema import dumps

    @settings(max_examples=200, deadline=None)
    @given(st.dictionaries(st.text(), _json_values(), max_size=6) | _json_values())
    def check(obj):
        assert dumps(obj) == json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))

    check()
