"""`gsr replay TRACE` verifying column by column reports exactly what the item-by-item replay reports.

On every example that runs without a model, and on traces altered record by record (a node output one
bit off, an int for a float, a changed score, sink or winner, another id, a missing key, an invalid or
abstained judgment, unsettled flags, a failed row, a duplicate id), the summary of `verify_columnar`
(counts, pairs for the metrics, difference count, first difference) equals `replay_file`'s.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_columnar import EXAMPLE_DATA, _examples_without_a_model
from tiers import examples

from gsrlang.cli import main as gsr
from gsrlang.execution.executor import default_mode
from gsrlang.execution.planner import ReplayConfig, RunConfig
from gsrlang.execution.replay import ReplayError
from gsrlang.execution.runs import replay_file, run_file
from gsrlang.execution.verify import verify_columnar
from gsrlang.files.dataset import ColumnMap
from gsrlang.judges.registry import default_registry
from gsrlang.lang.check.driver import analyze_file

FIELDS = ("items", "ok", "invalid", "failed", "label_problems", "labelled", "differences", "first_difference",
          "preds", "golds", "duplicate_ids", "duplicate_examples", "judgments", "skipped", "mode", "recorded")


def _record(path: Path, tmp_path: Path) -> tuple:
    data, cols = EXAMPLE_DATA[path.parent.name]
    program = analyze_file(str(path)).program
    trace = tmp_path / "t.jsonl"
    run_file(program, path.parent / data, ColumnMap(**cols), default_registry(), default_mode(program),
             RunConfig(trace=str(trace)))
    return program, trace


def altered(path: Path, tmp_path: Path, alter, picks) -> tuple:
    """(program, trace, the altered records' line indexes): the example's trace with `alter(record, m)` applied
    to the item records that `picks(item record line indexes)` names."""
    program, trace = _record(path, tmp_path)
    lines = trace.read_text(encoding="utf-8").splitlines()
    m = 1 if default_mode(program) == "pointwise" else 2
    chosen = picks([k for k, line in enumerate(lines) if line.startswith('{"p"')])
    for k in chosen:
        rec = json.loads(lines[k])
        alter(rec, m)
        lines[k] = json.dumps(rec)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return program, trace, chosen


def assert_same_report(program, trace: Path, may_refuse: bool = False) -> None:
    """Same summary fields and the same results file (`--out`), byte for byte, or the same refusal (a record
    whose parts do not fit each other: the column path refuses the whole trace, None, and the item path says
    what is wrong). `may_refuse`: the trace holds records the columns cannot take (`REFUSED`)."""
    fast_out, slow_out = trace.with_name("fast.jsonl"), trace.with_name("slow.jsonl")
    try:
        slow = replay_file(str(trace), program, True, ReplayConfig(out=str(slow_out)))
    except ReplayError as exc:
        try:
            fast = verify_columnar(str(trace), program, out=str(fast_out))
        except ReplayError as error:
            assert str(error) == str(exc)
        else:
            assert fast is None and not fast_out.exists()
        return
    fast = verify_columnar(str(trace), program, out=str(fast_out))
    if fast is None:
        assert may_refuse and not fast_out.exists()
        return
    for field in FIELDS:
        assert getattr(fast, field) == getattr(slow, field), field
    assert fast_out.read_bytes() == slow_out.read_bytes()


@pytest.mark.parametrize("path", _examples_without_a_model(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_example_reproduces_the_same_report(path, tmp_path):
    program, trace = _record(path, tmp_path)
    assert_same_report(program, trace)
    assert verify_columnar(str(trace), program).differences == 0


def _next_up(x: float) -> float:
    return math.nextafter(x, math.inf)


# each alteration: (the nth item record) -> changed in place; True when it must show as a difference
def _node_bit(rec, m):
    i = max(k for k, v in enumerate(rec["out"]) if v and type(v[0]) is float)
    rec["out"][i][0] = _next_up(rec["out"][i][0])


def _int_output(rec, m):
    i = next(k for k, v in enumerate(rec["out"]) if v and type(v[0]) is float)
    rec["out"][i][0] = int(rec["out"][i][0]) if float(rec["out"][i][0]).is_integer() else rec["out"][i][0] + 1


def _score(rec, m):
    r = rec["result"]
    if "score" in r and r["score"] is not None:
        r["score"] = float(r["score"]) if type(r["score"]) is int else r["score"] + 1
    elif r.get("winner") is not None:
        r["winner"] = "second" if r["winner"] != "second" else "first"


def _sink(rec, m):
    sink = rec["result"]["sink"]
    if sink:
        c = next(iter(sink))
        sink[c] = _next_up(sink[c]) if type(sink[c]) is float else 0.5


def _raw_int(rec, m):
    r = rec["result"]
    if r.get("raw") is not None:
        r["raw"] = int(r["raw"]) if float(r["raw"]).is_integer() else r["raw"] * 2


def _result_id(rec, m):
    rec["result"]["id"] = 7 if rec["result"]["id"] != 7 else "7"


def _no_reason(rec, m):
    del rec["result"]["reason"]


def _scale(rec, m):
    if "scale" in rec["result"]:
        rec["result"]["scale"] = [int(x) for x in rec["result"]["scale"]]


def _invalid_judgment(rec, m):
    cid = next(iter(rec.get("j") or {"x": 0}))
    if rec.get("j"):
        rec["j"][cid][0] = {"status": "invalid", "reason": "made invalid"}


def _abstained(rec, m):
    if rec.get("j"):
        cid = next(iter(rec["j"]))
        rec["j"][cid][0] = {"status": "abstained"}


def _unsettled(rec, m):
    rec["u"] = {"0": [True] * m}


def _failed(rec, m):
    rec["status"] = "failed"


def _duplicate(rec, m):
    rec["item"]["id"] = rec["result"]["id"] = "dup"


def _candidates(rec, m):
    rec["item"]["candidates"] = ["Z"] if m == 1 else ["A", "A"]


def _extra_key(rec, m):
    rec["result"]["extra"] = 1


def _label_error(rec, m):
    rec["result"]["label_error"] = "not a number"


def _empty_label_error(rec, m):
    rec["result"]["label_error"] = ""


def _no_item_line(rec, m):
    del rec["item"]["line"]


def _item_not_a_dict(rec, m):
    rec["item"] = [rec["item"]["id"]]


def _short_output(rec, m):
    rec["out"][-1] = rec["out"][-1][:-1]


def _judgments_missing(rec, m):
    rec.pop("j", None)


def _judgment_not_a_dict(rec, m):
    if rec.get("j"):
        cid = next(iter(rec["j"]))
        rec["j"][cid][0] = "ok"


def _negative_zero(rec, m):
    """-0.0 for a sink or raw score of 0.0: equal, so reproduced, but `--out` writes the recomputed 0.0."""
    r = rec["result"]
    for c, v in (r.get("sink") or {}).items():
        if v == 0:
            r["sink"][c] = -0.0
    if r.get("raw") == 0:
        r["raw"] = -0.0


def _reordered_result(rec, m):
    """The result line's keys (and its sink's) in another order: the same values, reproduced; `--out` writes
    them in `result_line`'s order."""
    r = rec["result"]
    if isinstance(r.get("sink"), dict):
        r["sink"] = dict(reversed(r["sink"].items()))
    rec["result"] = dict(reversed(r.items()))


# the records that the columns cannot take: a trace holding one is verified item by item, as a whole
REFUSED = {_item_not_a_dict, _judgment_not_a_dict}

ALTERATIONS = [_node_bit, _int_output, _score, _sink, _raw_int, _result_id, _no_reason, _scale, _invalid_judgment,
               _abstained, _unsettled, _failed, _duplicate, _candidates, _extra_key, _label_error,
               _empty_label_error, _no_item_line, _item_not_a_dict, _short_output, _judgments_missing,
               _judgment_not_a_dict, _negative_zero, _reordered_result]


@pytest.mark.parametrize("alter", ALTERATIONS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("path", _examples_without_a_model()[:4], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_altered_traces_give_the_same_report(path, alter, tmp_path):
    program, trace, _ = altered(path, tmp_path, alter, lambda items: (items[1], items[len(items) // 2], items[-1]))
    assert_same_report(program, trace, alter in REFUSED)
    if alter in (_node_bit, _int_output, _sink, _result_id, _no_reason):
        assert verify_columnar(str(trace), program).differences == 3


def test_the_command_prints_the_same_outcome_either_way(tmp_path, capsys):
    """`gsr replay` (columnar) and `gsr replay --trace-out` (item by item), on a trace with one altered output."""
    path = _examples_without_a_model()[0]
    _, trace, _ = altered(path, tmp_path, _node_bit, lambda items: items[2:3])
    outcomes = []
    for extra in ([], ["--trace-out", str(tmp_path / "t2.jsonl")]):
        code = gsr(["replay", str(trace), "--program", str(path), "-q", *extra])
        outcomes.append((code, capsys.readouterr().err))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == 1 and "NOT reproduced: 1 of" in outcomes[0][1]


def test_a_record_with_more_candidates_than_judgments_is_refused_in_one_line(tmp_path, capsys):
    """Both paths reach the item-by-item replay, which names the trace line (it said 'internal error')."""
    def more(rec, m):
        rec["item"]["candidates"] = ["A"] * (m + 1)

    path = _examples_without_a_model()[0]
    _, trace, (k,) = altered(path, tmp_path, more, lambda items: items[1:2])
    for extra in ([], ["--trace-out", str(tmp_path / "t2.jsonl")]):
        assert gsr(["replay", str(trace), "--program", str(path), "-q", *extra]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"gsr replay: trace line {k + 1} is not a well-formed item record") and "\n" not in err


@pytest.mark.examples
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(ALTERATIONS), st.integers(0, 10 ** 6)), min_size=1, max_size=6),
       which=st.integers(0, 3))
def test_any_mix_of_alterations_gives_the_same_report(changes, which, tmp_path_factory):
    """Several alterations, on records chosen at random (one record may get more than one)."""
    path = _examples_without_a_model()[which]
    tmp = tmp_path_factory.mktemp("mix")
    program, trace = _recorded(path, tmp)
    alter_records(trace, default_mode(program), changes)
    assert_same_report(program, trace, any(alter in REFUSED for alter, _ in changes))


def alter_records(trace: Path, mode: str, changes) -> None:
    """Apply each (alteration, pick) of `changes` to the item record `pick` names (modulo their count)."""
    lines = trace.read_text(encoding="utf-8").splitlines()
    m = 1 if mode == "pointwise" else 2
    items = [k for k, line in enumerate(lines) if line.startswith('{"p"')]
    for alter, pick in changes:
        k = items[pick % len(items)]
        rec = json.loads(lines[k])
        try:
            alter(rec, m)
        except (TypeError, KeyError, IndexError, AttributeError, StopIteration, ValueError):
            continue  # an earlier alteration took away what this one changes
        lines[k] = json.dumps(rec)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")


_RECORDED: dict = {}


def _recorded(path: Path, tmp: Path) -> tuple:
    """`_record`'s (program, trace), recorded once per example and copied to `tmp` (hypothesis alters copies)."""
    if path not in _RECORDED:
        _RECORDED[path] = _record(path, tmp)
    program, trace = _RECORDED[path]
    copy = tmp / "copy.jsonl"
    copy.write_bytes(trace.read_bytes())
    return program, copy


def test_blank_lines_are_skipped_and_lines_keep_their_numbers(tmp_path):
    """Blank and whitespace-only lines (as `read_records` skips them), then an altered record: the first
    difference names the altered record's line in the file as it is."""
    path = _examples_without_a_model()[0]
    program, trace, (k,) = altered(path, tmp_path, _node_bit, lambda items: items[3:4])
    lines = trace.read_text(encoding="utf-8").splitlines()
    lines[2:2] = ["", "   ", "\f"]
    trace.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    assert_same_report(program, trace)
    assert verify_columnar(str(trace), program).first_difference.trace_line == k + 1 + 3


@pytest.mark.parametrize("pick", ["an item", "no such item", "an id twice", "an altered item", "a failed row"])
def test_show_after_a_columnar_verification_prints_what_the_item_path_prints(pick, tmp_path, capsys):
    """`gsr replay TRACE --show ID` verifies column by column and replays only the shown item; with
    `--trace-out` (item by item) it must print the same, byte for byte."""
    path = _examples_without_a_model()[1]
    alter = {"an id twice": _duplicate, "an altered item": _node_bit, "a failed row": _failed}.get(pick)
    program, trace, chosen = altered(path, tmp_path, alter or (lambda rec, m: None), lambda items: items[3:5])
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    shown = "nothing-here" if pick == "no such item" else str(records[chosen[0]]["item"]["id"])
    outcomes = []
    for extra in ([], ["--trace-out", str(tmp_path / "t2.jsonl")]):
        code = gsr(["replay", str(trace), "--program", str(path), "--show", shown, "--bootstrap", "0", *extra])
        io = capsys.readouterr()
        outcomes.append((code, re.sub(r" in [0-9.]+ s:", " in T s:", io.out), io.err))
    assert outcomes[0] == outcomes[1]
    code, out, err = outcomes[0]
    if pick == "an item":
        assert code == 0 and "reproduced exactly" in out and f"item {shown}" in out, out
    elif pick == "no such item":
        assert code == 2 and f"item {shown!r} is not in trace `{trace}` (items: " in err
    elif pick == "an id twice":
        assert "2 records have id 'dup'" in err
    elif pick == "an altered item":
        assert code == 1 and "NOT reproduced" in err


def test_a_recorded_negative_zero_is_written_as_the_item_path_writes_it(tmp_path):
    """-0.0 equals 0.0, so a record holding it where the recomputation gives 0.0 is reproduced; the item path
    writes the recomputed 0.0 to `--out`, and so must the columnar one."""
    path = _examples_without_a_model()[1]
    program, trace = _record(path, tmp_path)
    lines = trace.read_text(encoding="utf-8").splitlines()
    zeros = 0
    for k, line in enumerate(lines):
        rec = json.loads(line)
        if line.startswith('{"p"') and 0 in (rec["result"].get("sink") or {}).values():
            _negative_zero(rec, 1)
            lines[k] = json.dumps(rec)
            zeros += 1
    assert zeros
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_same_report(program, trace)
    assert b"-0.0" not in trace.with_name("fast.jsonl").read_bytes()


@pytest.mark.parametrize("cut", ["at a line's end", "inside a line"])
def test_a_cut_trace_is_reported_as_the_item_path_reports_it(cut, tmp_path, capsys):
    """A killed run's trace: no summary record (a warning), or a last line cut short (a one-line error)."""
    path = _examples_without_a_model()[1]
    _, trace = _record(path, tmp_path)
    text = trace.read_bytes()
    lines = text.splitlines(keepends=True)[:-3]
    trace.write_bytes(b"".join(lines) if cut == "at a line's end" else b"".join(lines)[:-40])
    outcomes = []
    for extra in ([], ["--out", str(tmp_path / "r.jsonl")], ["--trace-out", str(tmp_path / "t2.jsonl")]):
        code = gsr(["replay", str(trace), "--program", str(path), "--bootstrap", "0", *extra])
        io = capsys.readouterr()
        outcomes.append((code, re.sub(r" in [0-9.]+ s:", " in T s:", io.out), io.err))
    assert outcomes[0] == outcomes[1] == outcomes[2]
    code, out, err = outcomes[0]
    if cut == "at a line's end":
        assert code == 0 and "does not end with a completed run's summary record" in err
    else:
        assert code == 2 and "is not a JSON object" in err and "Traceback" not in err


@pytest.mark.parametrize("chunk", [1, 2, 5])
@pytest.mark.parametrize("alter", [_node_bit, _duplicate, _failed, _unsettled, _label_error],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_trace_verified_a_few_items_at_a_time_gives_the_same_report(chunk, alter, tmp_path, monkeypatch):
    """The trace is verified a chunk of items at a time (memory flat in its length): chunk boundaries, an id
    repeated across chunks, a difference in a later chunk and the run summary after a full chunk change
    nothing in the report or the results file."""
    from gsrlang.execution import verify

    monkeypatch.setattr(verify, "CHUNK", chunk)
    path = _examples_without_a_model()[0]
    program, trace, _ = altered(path, tmp_path, alter, lambda items: (items[1], items[len(items) // 2], items[-1]))
    assert_same_report(program, trace)


SETTLING = """
rubric settling "Invalid judgments: some settled by a fired cap, others leave the item invalid"
task pointwise { scale = 1..5  quantize = round }
criterion quality: Score[1..3] = human(field: "quality")
criterion polite: Bool? = human(field: "polite")
criterion long: Bool = rule.word_count(above: 4)
node body = weighted_mean(items: [scale(quality), normalize(default(polite, value: false))], weights: [0.8, 0.2])
node capped = cap(base: body, trigger: long, at: 0.0)
sink capped
"""


def test_no_item_is_replayed_item_by_item(tmp_path, monkeypatch):
    """Recorded invalid items (invalid judgments, unsettled values), items settled over an invalid judgment,
    failed rows and items whose recorded values differ are all decided from the columns: the item path is
    never asked to replay one, and the report and results file are still its own."""
    from gsrlang.lang.check.driver import analyze

    source = tmp_path / "settling.gsr"
    source.write_text(SETTLING, encoding="utf-8")
    program = analyze(SETTLING, path=str(source)).program
    qualities = [2.5, 7, "x", None, 1.5, 3, 7, None, 2.0, 1.0, 2.25, "y"]
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as f:
        for k, q in enumerate(qualities):
            words = "a b c d e f" if k % 3 == 0 else "a b"
            f.write(json.dumps({"id": f"q{k}", "input": "?", "response": words, "quality": q,
                                "polite": [True, None, False][k % 3], "label": 1 + k % 5}) + "\n")
        f.write("not json\n")  # a failed row
    trace = tmp_path / "t.jsonl"
    run_file(program, tmp_path / "items.jsonl", ColumnMap(label_field="label"), default_registry(), "pointwise",
             RunConfig(trace=str(trace)))
    alter_records(trace, "pointwise", [(_node_bit, 0), (_sink, 4), (_score, 5), (_label_error, 8),
                                       (_invalid_judgment, 9), (_negative_zero, 10)])
    slow = replay_file(str(trace), program, True)
    assert slow.invalid and slow.failed and slow.differences and slow.ok
    assert_none_replayed(program, trace, monkeypatch)


def assert_none_replayed(program, trace: Path, monkeypatch) -> None:
    """The column path verifies the trace without asking the item path to replay any item, and reports what
    the item path reports."""
    import gsrlang.execution.replay as replay

    replayed = []

    def counted(name):
        item_path = getattr(replay, name)

        def count(plan, records, *rest):
            replayed.append(name)
            return item_path(plan, records, *rest)
        return count

    with monkeypatch.context() as patch:
        for name in ("replay_records", "rebuild"):
            patch.setattr(replay, name, counted(name))
        assert verify_columnar(str(trace), program) is not None
    assert replayed == []
    assert_same_report(program, trace)


@pytest.mark.parametrize("alter", [_candidates, _judgments_missing, _unsettled, _duplicate, _extra_key, _no_reason,
                                   _short_output],
                         ids=lambda f: f.__name__.strip("_"))
def test_records_of_other_shapes_are_decided_from_the_columns(alter, tmp_path, monkeypatch):
    """Pairwise: candidates that repeat (the readout refuses them), judgments not recorded, `u` flags on
    settled values, an id twice, a result line with a key more or one less, the sink's outputs one short:
    none is replayed item by item."""
    path = next(p for p in _examples_without_a_model() if default_mode(analyze_file(str(p)).program) == "pairwise")
    program, trace, _ = altered(path, tmp_path, alter, lambda items: (items[1], items[len(items) // 2], items[-1]))
    assert_none_replayed(program, trace, monkeypatch)


@pytest.mark.parametrize("label", [99.5, -1e308, "3", True, [3], "firstt", 2])
@pytest.mark.parametrize("mode", ["pointwise", "pairwise"])
def test_a_label_gsr_cannot_have_written_refuses_the_columns(mode, label, tmp_path):
    """A plain record (the reader's short way) whose label `read_records` refuses, or one it reads: the column
    path refuses the trace exactly when the item path's reader does (it then reports the line)."""
    from gsrlang.trace.read import read_records
    from gsrlang.trace.schema import TraceError

    path = next(p for p in _examples_without_a_model() if default_mode(analyze_file(str(p)).program) == mode)

    def relabel(rec, m):
        rec["result"]["label"] = label

    program, trace, _ = altered(path, tmp_path, relabel, lambda items: items[2:3])
    trace.write_text("".join(json.dumps(json.loads(line), separators=(",", ":")) + "\n"
                             for line in trace.read_text(encoding="utf-8").splitlines()), encoding="utf-8")
    try:
        list(read_records(trace))
    except TraceError:
        assert verify_columnar(str(trace), program) is None
    else:
        assert verify_columnar(str(trace), program) is not None
        assert_same_report(program, trace)
