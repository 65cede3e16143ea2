"""A full disk (issue 24 item 13): whole files are replaced atomically (the old file stays whole), ENOSPC is a
one-line error in every command, and a cache that cannot store an answer never makes that answer's item invalid.

The disk is simulated: `full_disk` makes every file opened for writing under the test's folder raise
OSError(ENOSPC) once more than a few bytes have gone to it (builtins.open, io.open and os.fdopen, which every
writer of gsr goes through); the SQLite cache gets a connection whose INSERT fails as SQLite's does on a
full disk ("database or disk is full")."""

from __future__ import annotations

import builtins
import errno
import io
import os
import sqlite3
from pathlib import Path

import pytest

from gsrlang.cli import main

try:
    from fakeserver import FakeOpenAI
    from test_llm_run import HELPSTEER, KEY, fake_model, read_jsonl, write_jsonl
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI
    from tests.test_llm_run import HELPSTEER, KEY, fake_model, read_jsonl, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"
TC_DATA = TC / "data" / "dev.jsonl"
TC_RUN = ["--data", str(TC_DATA), "--id-field", "id", "--label-field", "scores.overall", "--input-field", "context",
          "--reference-field", "fact", "-q", "--no-progress"]


class _FullFile:
    """A file opened for writing on a disk that has `room` bytes left (shared by every file of the disk)."""

    def __init__(self, real, disk: dict):
        self._real, self._disk = real, disk

    def write(self, data):
        self._disk["room"] -= len(data)
        if self._disk["room"] < 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._real.write(data)

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __iter__(self):
        return iter(self._real)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._real.close()


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """Call with the bytes the disk still takes: from then on, writes under tmp_path fail with ENOSPC."""
    real_open, real_fdopen = builtins.open, os.fdopen

    def fill(room: int) -> None:
        disk = {"room": room}

        def opener(file, mode="r", *args, **kwargs):
            f = real_open(file, mode, *args, **kwargs)
            under = isinstance(file, (str, os.PathLike)) and str(os.path.realpath(file)).startswith(str(tmp_path))
            return _FullFile(f, disk) if under and any(c in mode for c in "wax+") else f

        def fdopener(fd, mode="r", *args, **kwargs):
            f = real_fdopen(fd, mode, *args, **kwargs)
            return _FullFile(f, disk) if any(c in mode for c in "wax+") else f

        monkeypatch.setattr(builtins, "open", opener)
        monkeypatch.setattr(io, "open", opener)
        monkeypatch.setattr(os, "fdopen", fdopener)

    return fill


def _one_line_disk_error(err: str, command: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gsr {command}: error: No space left on device") and "the disk is full" in lines[0]
    assert "internal error" not in err and "Traceback" not in err


def _no_temporary_files(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_tune_on_a_full_disk_keeps_the_old_tuned_file_whole(tmp_path, capsys, full_disk):
    pytest.importorskip("scipy")
    try:
        from test_tune import SYNTH, _write_data, synthetic
    except ImportError:
        from tests.test_tune import SYNTH, _write_data, synthetic
    prog, data, out = tmp_path / "synth.gsr", tmp_path / "d.jsonl", tmp_path / "synth.tuned.gsr"
    prog.write_text(SYNTH)
    _write_data(data, synthetic(40))
    argv = ["tune", str(prog), "--data", str(data), "--id-field", "id", "--label-field", "label", "--folds", "2",
            "--bootstrap", "10"]
    assert main(argv) == 0
    before = out.read_bytes()
    capsys.readouterr()
    full_disk(100)  # the tuned program is ~1 KB: it cannot be written
    assert main([*argv, "--seed", "3"]) == 2
    _one_line_disk_error(capsys.readouterr().err, "tune")
    assert out.read_bytes() == before  # was: truncated, then a 4 KB half file that does not check
    _no_temporary_files(tmp_path)


def test_run_on_a_full_disk_is_a_one_line_error(tmp_path, capsys, full_disk):
    full_disk(3000)
    code = main(["run", str(TC / "overall.gsr"), *TC_RUN, "--out", str(tmp_path / "o.jsonl"),
                 "--trace", str(tmp_path / "t.jsonl")])
    assert code == 2
    _one_line_disk_error(capsys.readouterr().err, "run")


def test_report_on_a_full_disk_keeps_the_old_page(tmp_path, capsys, full_disk):
    out, trace, page = tmp_path / "o.jsonl", tmp_path / "t.jsonl", tmp_path / "r.html"
    assert main(["run", str(TC / "overall.gsr"), *TC_RUN, "--out", str(out), "--trace", str(trace)]) == 0
    page.write_text("the old page")
    capsys.readouterr()
    full_disk(1000)
    assert main(["report", str(out), "--trace", str(trace), "-o", str(page), "--bootstrap", "0"]) == 2
    _one_line_disk_error(capsys.readouterr().err, "report")
    assert page.read_text() == "the old page"
    _no_temporary_files(tmp_path)


class _FullConnection:
    """A SQLite connection on a full disk: reads work, an INSERT fails as SQLite's does."""

    def __init__(self, real):
        self._real = real

    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self._real.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_a_full_cache_disk_keeps_every_answer(tmp_path, capsys, monkeypatch):
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: _FullConnection(real_connect(*a, **k)))
    rows = [{"id": f"i{i}", "input": f"Q{i}?", "response": ("GOOD " if i % 2 else "BAD ") + str(i)} for i in range(20)]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    out = tmp_path / "o.jsonl"
    with FakeOpenAI(responder=fake_model) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        code = main(["run", str(HELPSTEER), "--data", str(data), "--mode", "pointwise", "--id-field", "id",
                     "--model", "fake-judge", "--out", str(out), "--cache", str(tmp_path / "c.sqlite"),
                     "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    results = read_jsonl(out)
    assert [r["status"] for r in results] == ["ok"] * 20  # was: 20 of 20 invalid, though every call was answered
    assert "could not be stored (database or disk is full)" in captured.err
    assert "internal error" not in captured.err


def test_the_cache_keeps_an_unstored_answer_in_memory(tmp_path, monkeypatch):
    from gsrlang.judges.llm.cache import JudgmentCache

    cache = JudgmentCache(tmp_path / "c.sqlite")
    cache._conn = _FullConnection(cache._conn)
    cache.put("k", {"answer": 3})  # does not raise
    assert cache.get("k") == {"answer": 3} and cache.unstored == 1
    assert "1 answer could not be stored" in cache.unstored_warning()
    cache.close()
    assert JudgmentCache(tmp_path / "c.sqlite").get("k") is None  # it was never on disk


def test_disk_errors_are_named_and_others_are_not():
    from gsrlang.files.safeio import machine_error

    assert "the disk is full" in machine_error(OSError(errno.ENOSPC, "No space left on device", "out.jsonl"))
    assert "`out.jsonl`" in machine_error(OSError(errno.ENOSPC, "No space left on device", "out.jsonl"))
    assert "read-only" in machine_error(OSError(errno.EROFS, "Read-only file system"))
    assert machine_error(OSError(errno.ENOENT, "No such file")) is None and machine_error(ValueError("x")) is None


@pytest.mark.parametrize("verify", [True, False], ids=["verify", "what-if"])
def test_replay_on_a_full_disk_keeps_the_old_results_and_trace_whole(tmp_path, capsys, full_disk, verify):
    """A replay holds its result lines (and its new trace) until the whole trace is read, then writes each file
    at once (`atomic_file`): a disk that fills as they are written leaves the old files as they were, and the
    one-line error names the file it could not write."""
    trace, out, new_trace = tmp_path / "t.jsonl", tmp_path / "o.jsonl", tmp_path / "t2.jsonl"
    assert main(["run", str(TC / "overall.gsr"), *TC_RUN, "--trace", str(trace)]) == 0
    out.write_text("the old results\n")
    new_trace.write_text("the old trace\n")
    capsys.readouterr()
    full_disk(3000)
    extra = [] if verify else ["--program", str(TC / "flat.gsr"), "--trace-out", str(new_trace)]
    assert main(["replay", str(trace), "--out", str(out), "-q", "--bootstrap", "0", *extra]) == 2
    err = capsys.readouterr().err
    _one_line_disk_error(err, "replay")
    assert f"writing `{out}`" in err or f"writing `{new_trace}`" in err
    assert out.read_text() == "the old results\n" and new_trace.read_text() == "the old trace\n"
    _no_temporary_files(tmp_path)


def test_a_full_temporary_folder_is_named_and_leaves_no_results(tmp_path, capsys, monkeypatch):
    """The lines a replay holds wait in a temporary file: when its folder fills, the error names that folder
    (TMPDIR names another), and no results file is made."""
    import tempfile

    trace, out = tmp_path / "t.jsonl", tmp_path / "o.jsonl"
    assert main(["run", str(TC / "overall.gsr"), *TC_RUN, "--trace", str(trace)]) == 0
    capsys.readouterr()
    real = tempfile.TemporaryFile
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda *a, **k: _FullFile(real(*a, **k), {"room": 2000}))
    assert main(["replay", str(trace), "--out", str(out), "-q", "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    _one_line_disk_error(err, "replay")
    assert f"writing `{tempfile.gettempdir()}`" in err and not out.exists()
