"""`gsr replay TRACE --program OTHER.gsr --out FILE` column by column writes the item-by-item replay's file.

On every model-free example's trace, re-composed under each program of its folder, and on traces altered
record by record (the alterations of test_verify_columnar, one by one and in random mixes), the results
file of `recompose_columnar` is `replay_file(..., verify=False, out=...)`'s byte for byte, and the summary's
counts and (prediction, label) pairs are the same; a trace either path refuses is refused alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_columnar import _examples_without_a_model
from test_verify_columnar import ALTERATIONS, _invalid_judgment, _record, alter_records
from tiers import examples

from gsrlang.cli import main as gsr
from gsrlang.execution import tracetable
from gsrlang.execution.executor import default_mode
from gsrlang.execution.planner import ReplayConfig
from gsrlang.execution.replay import ReplayError
from gsrlang.execution.runs import replay_file
from gsrlang.execution.whatif import recompose_columnar
from gsrlang.lang.check.driver import analyze_file
from gsrlang.trace.schema import TraceError

FIELDS = ("items", "ok", "invalid", "failed", "label_problems", "labelled", "preds", "golds", "duplicate_ids",
          "duplicate_examples", "needs", "mode", "recorded", "judgments", "skipped")


def _pairs() -> list[tuple[Path, Path]]:
    """(recorded program, another program of its folder that its criteria can feed) for each example."""
    examples = _examples_without_a_model()
    out = []
    for path in examples:
        others = [p for p in examples if p.parent == path.parent and p != path]
        out.append((path, others[0] if others else path))
    return out


def assert_same_file(program, trace: Path, tmp: Path):
    """Check the what-if's file and summary against the item path's; the what-if's summary, or None where the
    columns refused the trace (nothing to compare: the caller replays it item by item)."""
    fast_out, slow_out = tmp / "fast.jsonl", tmp / "slow.jsonl"
    try:
        slow = replay_file(str(trace), program, False, ReplayConfig(out=str(slow_out), program_label="P"))
    except ReplayError as exc:
        fast = None
        try:
            fast = recompose_columnar(str(trace), program, "P", str(fast_out))
        except ReplayError as mine:
            assert str(mine) == str(exc)
        else:
            assert fast is None  # not read into columns: the caller replays it item by item, which refuses it
        return None
    fast = recompose_columnar(str(trace), program, "P", str(fast_out))
    if fast is None:  # the columns cannot read it (the item path can): the caller falls back to it
        return None
    for field in FIELDS:
        assert getattr(fast, field) == getattr(slow, field), field
    assert fast_out.read_bytes() == slow_out.read_bytes()
    counted = recompose_columnar(str(trace), program, "P")  # the what-if without --out: the same summary
    for field in FIELDS:
        assert getattr(counted, field) == getattr(slow, field), field
    return fast


@pytest.mark.parametrize("recorded, other", _pairs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_example_recomposed_writes_the_item_paths_file(recorded, other, tmp_path):
    program, trace = _record(recorded, tmp_path)
    assert_same_file(analyze_file(str(other)).program, trace, tmp_path)
    assert (tmp_path / "fast.jsonl").is_file()


@pytest.mark.parametrize("alter", ALTERATIONS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("pair", _pairs()[:2], ids=lambda p: f"{p[0].parent.name}/{p[1].name}")
@pytest.mark.parametrize("chunk", [2, 16384], ids=lambda n: f"chunk{n}")
def test_altered_traces_recomposed_write_the_item_paths_file(pair, alter, chunk, tmp_path, monkeypatch):
    """Read a chunk of items at a time (`tracetable.CHUNK`), the file and counts are the same."""
    monkeypatch.setattr(tracetable, "CHUNK", chunk)
    recorded, other = pair
    program, trace = _record(recorded, tmp_path)
    alter_records(trace, default_mode(program), [(alter, 1), (alter, 5), (alter, -1)])
    assert_same_file(analyze_file(str(other)).program, trace, tmp_path)


@pytest.mark.examples
@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(ALTERATIONS), st.integers(0, 10 ** 6)), min_size=1, max_size=6),
       which=st.integers(0, 3), chunk=st.sampled_from([1, 3, 7, 16384]))
def test_any_mix_of_alterations_recomposed_writes_the_item_paths_file(changes, which, chunk, tmp_path_factory):
    recorded, other = _pairs()[which % len(_pairs())]
    tmp = tmp_path_factory.mktemp("mix")
    program, trace = _record(recorded, tmp)
    alter_records(trace, default_mode(program), changes)
    with mock.patch.object(tracetable, "CHUNK", chunk):
        assert_same_file(analyze_file(str(other)).program, trace, tmp)


def test_the_command_prints_the_same_either_way(tmp_path, capsys):
    """`gsr replay --program OTHER --out` (columnar) and with `--trace-out` too (item by item)."""
    recorded, other = next(p for p in _pairs() if p[0] != p[1])
    _, trace = _record(recorded, tmp_path)
    outcomes = []
    for name, extra in (("a", []), ("b", ["--trace-out", str(tmp_path / "t2.jsonl")])):
        code = gsr(["replay", str(trace), "--program", str(other), "--bootstrap", "0", "--out",
                    str(tmp_path / f"{name}.jsonl"), *extra])
        io = capsys.readouterr()
        outcomes.append((code, io.out.replace(f"{name}.jsonl", "X"), io.err))
    assert outcomes[0] == outcomes[1] and outcomes[0][0] == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


@pytest.mark.parametrize("out", [False, True])
def test_show_in_a_what_if_prints_what_the_item_path_prints(out, tmp_path, capsys):
    """`--show ID` with `--program OTHER` (and `--out`): re-composed column by column, the shown item item by
    item; with `--trace-out` (all item by item) the output is the same."""
    recorded, other = next(p for p in _pairs() if p[0] != p[1])
    _, trace = _record(recorded, tmp_path)
    shown = str(json.loads(trace.read_text(encoding="utf-8").splitlines()[5])["item"]["id"])
    outcomes = []
    for name, extra in (("a", []), ("b", ["--trace-out", str(tmp_path / "t2.jsonl")])):
        argv = ["replay", str(trace), "--program", str(other), "--bootstrap", "0", "--show", shown, *extra]
        code = gsr(argv + (["--out", str(tmp_path / f"{name}.jsonl")] if out else []))
        io = capsys.readouterr()
        outcomes.append((code, io.out.replace(f"{name}.jsonl", "X"), io.err))
    assert outcomes[0] == outcomes[1] and outcomes[0][0] == 0
    assert f"item {shown}" in outcomes[0][1]


@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: f"{p[0].parent.name}/{p[1].name}")
def test_invalid_items_are_written_from_the_evaluation(pair, tmp_path):
    """An item left invalid by an invalid judgment gets its line (the item path's reason) from the columns: the
    trace is not sent item by item, and the file is still the item path's byte for byte."""
    recorded, other = pair
    program, trace = _record(recorded, tmp_path)
    alter_records(trace, default_mode(program), [(_invalid_judgment, k) for k in range(0, 40, 3)])
    assert assert_same_file(analyze_file(str(other)).program, trace, tmp_path) is not None
    lines = (tmp_path / "fast.jsonl").read_text(encoding="utf-8").splitlines()
    invalid = [json.loads(x) for x in lines if '"status": "invalid"' in x or '"status":"invalid"' in x]
    assert invalid and all(line["reason"] for line in invalid)


@pytest.mark.parametrize("criterion", range(4))
def test_items_settled_over_a_skipped_judgment_count_it_as_skipped(criterion, tmp_path):
    """A judgment the recorded run skipped (short-circuit) on every item: the items the program settles anyway
    are written from the columns, and counted with that judgment skipped, as the item path counts them."""
    recorded, other = next(p for p in _pairs() if p[1].name == "overall.gsr")
    program, trace = _record(recorded, tmp_path)
    lines = []
    for line in trace.read_text(encoding="utf-8").splitlines():
        if line.startswith('{"p"'):
            rec = json.loads(line)
            ids = list(rec.get("j") or {})
            if ids:
                rec["j"][ids[criterion % len(ids)]][0] = {"status": "skipped", "reason": "short-circuit"}
            line = json.dumps(rec)
        lines.append(line)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    slow = replay_file(str(trace), analyze_file(str(other)).program, False, ReplayConfig(program_label="P"))
    assert slow.ok and slow.skipped
    assert_same_file(analyze_file(str(other)).program, trace, tmp_path)


ZERO_SINK = """
rubric zero "A recorded -0.0 straight to the sink"
task pointwise { scale = 1..5  quantize = round }
criterion understandable: Score = human(field: "u")
criterion natural: Score[1..3] = human(field: "n")
sink min(items: [understandable, scale(natural)])
"""


@pytest.mark.parametrize("which", ["topical_chat/overall.gsr", "llmbar/rules_only.gsr"])
def test_no_item_is_replayed_item_by_item(which, tmp_path):
    """Failed rows, items left invalid over a judgment the recorded run skipped (the summary counts what the
    program needs), a recorded Score of -0.0 and the sink it makes, and (pairwise) repeated candidate ids: all
    written from the evaluation, the item path's file and summary, with no item replayed item by item."""
    from gsrlang.lang.check.driver import analyze

    recorded = next(p for p, _ in _pairs() if str(p).endswith(which))
    program, trace = _record(recorded, tmp_path)
    other = analyze(ZERO_SINK).program if default_mode(program) == "pointwise" else program
    lines, k = [], 0
    for line in trace.read_text(encoding="utf-8").splitlines():
        if json.loads(line).get("kind") == "header":
            position = [n["id"] for n in json.loads(line)["nodes"]].index(other.criteria[0].id)
        elif line.startswith('{"p"'):
            rec, k = json.loads(line), k + 1
            if k % 7 == 0:
                rec["status"] = "failed"
            elif k % 5 == 0 and rec.get("j"):
                rec["j"][other.criteria[0].id][0] = {"status": "skipped", "reason": "short-circuit"}
            elif k % 5 == 1 and len(rec["item"]["candidates"]) == 2:
                rec["item"]["candidates"] = ["A", "A"]
            elif k % 5 == 2 and rec.get("out") and rec["out"][position][0] == 0:
                rec["out"][position][0] = -0.0
            line = json.dumps(rec)
        lines.append(line)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert assert_same_file(other, trace, tmp_path) is not None  # written from the columns, not item by item
    slow = replay_file(str(trace), other, False, ReplayConfig(program_label="P"))
    assert slow.failed and slow.invalid
    if other is program:
        assert '"reason": "readout: candidate ids repeat: A, A"' in (tmp_path / "fast.jsonl").read_text("utf-8")
    else:
        assert slow.needs and '-0.0' in trace.read_text("utf-8")


@pytest.mark.parametrize("verify", [False, True], ids=["what-if", "verify"])
def test_results_to_standard_output_are_the_files_bytes(verify, tmp_path, capsysbinary):
    """`--out -` copies the spooled lines to standard output: the bytes `--out FILE` writes (and, where standard
    output is a text-only stand-in, the same text)."""
    import contextlib
    import io

    recorded, other = _pairs()[0]
    program, trace = _record(recorded, tmp_path)
    target = str(recorded if verify else other)
    args = ["replay", str(trace), "--program", target, "-q", "--bootstrap", "0"]
    assert gsr(args + ["--out", str(tmp_path / "file.jsonl")]) == 0
    capsysbinary.readouterr()
    assert gsr(args + ["--out", "-"]) == 0
    written = (tmp_path / "file.jsonl").read_bytes()
    assert capsysbinary.readouterr().out == written and written.count(b"\n") > 2
    stand_in = io.StringIO()
    with contextlib.redirect_stdout(stand_in):
        assert gsr(args + ["--out", "-"]) == 0
    assert stand_in.getvalue() == written.decode("utf-8")


@pytest.mark.parametrize("verify", [False, True], ids=["what-if", "verify"])
def test_a_results_file_that_cannot_be_written_is_refused_before_the_trace_is_read(verify, tmp_path):
    """The results file's folder is made when the replay starts: one that cannot be (a file stands in its
    place) is an OSError at once, before the trace (here: none) is looked at, not after the whole of it."""
    from gsrlang.execution.verify import verify_columnar

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    program = analyze_file(str(_pairs()[0][0])).program
    replay = verify_columnar if verify else recompose_columnar
    with pytest.raises(OSError):
        replay(str(tmp_path / "no-such-trace.jsonl"), program, "P", str(blocker / "out.jsonl"))
    assert replay(str(tmp_path / "no-such-trace.jsonl"), program, "P", str(tmp_path / "out.jsonl")) is None
    assert not (tmp_path / "out.jsonl").exists()


def _edited_label(line: str) -> str:
    rec = json.loads(line)
    rec["result"]["label"] = "3"
    return json.dumps(rec)


def _undeclared_header(line: str) -> str:
    rec = json.loads(line)
    rec["p"] = 99
    return json.dumps(rec)


BROKEN = {  # a line that reading the trace refuses: (what becomes of an item line, what the refusal says)
    "edited-label": (_edited_label, "(was the file edited?)"),
    "undeclared-header": (_undeclared_header, "names header 99, which no earlier line declares"),
    "not-json": (lambda line: "{", "is not a JSON object"),
    "not-a-record": (lambda line: "[1]", "is not a trace record"),
    "no-version": (lambda line: '{"mode": "pointwise"}', "is not a trace record (no `trace_version`)"),
    "later-version": (lambda line: '{"trace_version": 99}', "is a version 99 trace record"),
    "empty-header": (lambda line: '{"trace_version": 2, "kind": "header", "key": 5}',
                     "is a header record without `program` and `nodes`"),
}


@pytest.mark.parametrize("broken", BROKEN)
def test_a_line_the_reading_refuses_is_refused_as_item_by_item(broken, tmp_path, monkeypatch, capsys):
    """The what-if reads the trace twice (the second reading a chunk behind), and only the first checks each
    line: a line it refuses, in a later chunk than the first, leaves the what-if with nothing written (None),
    and the command refuses the trace with the item path's message, which names the line."""
    from gsrlang.trace.schema import TraceError

    monkeypatch.setattr(tracetable, "CHUNK", 2)
    recorded, other = next(p for p in _pairs() if p[0] != p[1])
    _, trace = _record(recorded, tmp_path)
    lines = trace.read_text(encoding="utf-8").splitlines()
    change, says = BROKEN[broken]
    lines[8] = change(lines[8])
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    program = analyze_file(str(other)).program
    assert recompose_columnar(str(trace), program, "P", str(tmp_path / "fast.jsonl")) is None
    assert not (tmp_path / "fast.jsonl").exists()
    with pytest.raises(TraceError) as refused:
        replay_file(str(trace), program, False, ReplayConfig(program_label="P"))
    assert "line 9" in str(refused.value) and says in str(refused.value)
    outcomes = []
    for name, extra in (("a", []), ("b", ["--trace-out", str(tmp_path / "t2.jsonl")])):
        code = gsr(["replay", str(trace), "--program", str(other), "--bootstrap", "0", "--out",
                    str(tmp_path / f"{name}.jsonl"), *extra])
        io = capsys.readouterr()
        outcomes.append((code, io.out, io.err))
    assert outcomes[0] == outcomes[1] and outcomes[0][0] != 0 and str(refused.value) in outcomes[0][2]
    # the item path held its result lines and its new trace until the end: a trace refused part way leaves
    # neither file
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "b.jsonl").exists()
    assert not (tmp_path / "t2.jsonl").exists()


def test_a_record_gone_at_the_second_reading_leaves_nothing_written(tmp_path, monkeypatch):
    """The what-if decodes again, by line number, the records of the items its columns leave invalid: a line
    gone by then (the file was cut while it was read) gives up the what-if with nothing written (None), for the
    item path to report the file as it then is."""
    from gsrlang.execution import whatif

    recorded, other = next(p for p in _pairs() if p[0] != p[1])
    program, trace = _record(recorded, tmp_path)
    alter_records(trace, default_mode(program), [(_invalid_judgment, 5)])
    with pytest.raises(TraceError, match="line 999 is gone: the file changed while it was read"):
        whatif._Again(str(trace)).record(999)
    asked, real = [], whatif._Again.record
    monkeypatch.setattr(whatif._Again, "record", lambda again, line: asked.append(line) or real(again, 999))
    out = tmp_path / "fast.jsonl"
    assert recompose_columnar(str(trace), analyze_file(str(other)).program, "P", str(out)) is None
    assert asked and not out.exists()


def test_a_record_of_an_unexpected_shape_sends_the_whole_trace_item_by_item(tmp_path, capsys):
    """One record whose candidates are not strings: the columns take none of the trace (None, nothing written),
    never that row alone, and `gsr replay --program OTHER --out` writes the item path's file all the same."""
    recorded, other = next(p for p in _pairs() if p[0] != p[1])
    program, trace = _record(recorded, tmp_path)
    lines = trace.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith('{"p"'))
    rec = json.loads(lines[at])
    rec["item"]["candidates"] = [7] * len(rec["item"]["candidates"])
    lines[at] = json.dumps(rec)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = tmp_path / "fast.jsonl"
    assert recompose_columnar(str(trace), analyze_file(str(other)).program, "P", str(fast)) is None
    assert not fast.exists()
    slow = tmp_path / "slow.jsonl"
    replay_file(str(trace), analyze_file(str(other)).program, False, ReplayConfig(out=str(slow), program_label="P"))
    assert gsr(["replay", str(trace), "--program", str(other), "-q", "--bootstrap", "0", "--out", str(fast)]) in (0, 1)
    assert fast.read_bytes() == slow.read_bytes()
