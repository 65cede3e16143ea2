"""Parquet in and out and data on other filesystems (fsspec URIs) with the local engine, and the engine flags'
errors; no Ray is started here (tests/test_ray_engine.py does that)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from runfiles import records

from gsrlang.cli import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
fsspec = pytest.importorskip("fsspec")

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "topical_chat"
TC_DATA = TC / "data" / "dev.jsonl"
COLUMNS = ["--input-field", "context", "--reference-field", "fact", "--id-field", "id",
           "--label-field", "scores.overall", "--no-progress", "-q"]


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    monkeypatch.delenv("GSR_MODEL", raising=False)


def _run(data, out, *extra, capsys=None) -> int:
    code = main(["run", str(TC / "overall.gsr"), "--data", str(data), *COLUMNS, "--out", str(out), *map(str, extra)])
    if capsys is not None:
        capsys.readouterr()
    return code


def _lines(path: Path) -> list[dict]:
    return records(path)  # the item lines (a JSONL results file ends with its completion line)


def test_parquet_in_and_out_give_the_jsonl_results(tmp_path, capsys):
    rows = _lines(TC_DATA)
    data = tmp_path / "dev.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data, row_group_size=50)  # several row groups
    assert _run(TC_DATA, tmp_path / "ref.jsonl", capsys=capsys) == 0
    assert _run(data, tmp_path / "out.jsonl", capsys=capsys) == 0
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()  # row n = line n here

    assert _run(data, tmp_path / "out.parquet", capsys=capsys) == 0
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.schema.field("score").type == pa.float64() and table.schema.field("label").type == pa.float64()
    got = table.to_pylist()
    for row, line in zip(got, _lines(tmp_path / "ref.jsonl"), strict=True):
        row["sink"] = json.loads(row["sink"])
        # a Parquet struct has every field of its schema: the program's path is null for a one-program run
        row["program"] = {k: v for k, v in row["program"].items() if k in line["program"]}
        assert {k: v for k, v in row.items() if k in line} == line
        assert all(row[k] is None for k in row if k not in line)


def test_a_row_that_cannot_be_an_item_is_a_failed_row_with_its_row_number(tmp_path, capsys):
    rows = _lines(TC_DATA)[:4]
    rows[2] = {**rows[2], "id": None}  # a column the run reads (the program reads no input)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    assert _run(tmp_path / "d.parquet", tmp_path / "out.jsonl") == 1
    failed = [r for r in _lines(tmp_path / "out.jsonl") if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["line"] == 3 and failed[0]["reason"].startswith("row 3: column 'id'")


def test_data_on_another_filesystem_through_fsspec(tmp_path, capsys):
    fs = fsspec.filesystem("memory")
    fs.pipe("/gsr-test/dev.jsonl", TC_DATA.read_bytes())
    try:
        assert _run(TC_DATA, tmp_path / "ref.jsonl", capsys=capsys) == 0
        assert _run("memory://gsr-test/dev.jsonl", tmp_path / "out.jsonl", capsys=capsys) == 0
        assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
        assert _run("memory://gsr-test/missing.jsonl", tmp_path / "x.jsonl") == 2
        assert "memory://gsr-test/missing.jsonl: no such file" in capsys.readouterr().err
    finally:
        fs.rm("/gsr-test", recursive=True)


@pytest.mark.parametrize("argv, message", [
    (["--data", "{bad}"], "not a readable Parquet file"),
    (["--data", "{data}", "--actors", "2"], "--actors only apply to --engine ray"),
    (["--data", "{data}", "--engine", "ray", "--block-size", "0"], "--block-size must be at least 1"),
    (["--data", "{data}", "--engine", "ray", "--deadline", "5"], "--deadline is not supported by --engine ray"),
    (["--data", "unknown-protocol-xyz://a/b.jsonl"], "unknown-protocol-xyz://a/b.jsonl: cannot open this filesystem"),
])
def test_bad_input_and_engine_flags_are_one_line_errors(tmp_path, capsys, argv, message):
    (tmp_path / "bad.parquet").write_text("not parquet")
    argv = [a.format(bad=tmp_path / "bad.parquet", data=TC_DATA) for a in argv]
    assert main(["run", str(TC / "overall.gsr"), *argv, *COLUMNS, "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "internal error" not in err


def test_the_ray_engine_without_ray_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    assert _run(TC_DATA, tmp_path / "o.jsonl", "--engine", "ray") == 2
    assert "the ray engine needs Ray: pip install 'gsrlang[ray]'" in capsys.readouterr().err


def test_a_work_directory_of_another_run_is_not_resumed(tmp_path, capsys):
    pytest.importorskip("ray")
    work = tmp_path / "o.jsonl.gsr-ray"
    work.mkdir()
    (work / "run.json").write_text(json.dumps({"format": 1, "program": "sha256:another"}))
    assert _run(TC_DATA, tmp_path / "o.jsonl", "--engine", "ray") == 2  # refused before Ray starts
    assert "holds an unfinished run of another program, data or settings" in capsys.readouterr().err
    assert (work / "run.json").exists()


def test_a_local_run_imports_neither_ray_nor_pyarrow():
    code = ("import sys; from gsrlang.cli import main; "
            f"status = main(['run', {str(TC / 'overall.gsr')!r}, '--data', {str(TC_DATA)!r}, '--input-field', "
            "'context', '--id-field', 'id', '-q', '--no-progress']); "
            "print(status, sorted(m for m in ('ray', 'pyarrow', 'fsspec') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 []"


def test_a_folder_gsr_did_not_make_is_never_used_as_a_work_folder(tmp_path, capsys):
    # issue 24 item 1: a folder named like gsr's work folder but not made by gsr (no run.json of its own) is
    # refused, and left as it was; --work-dir names the folder gsr makes its own subfolder in
    pytest.importorskip("ray")
    work = tmp_path / "o.jsonl.gsr-ray"
    work.mkdir()
    (work / "thesis.tex").write_text("years of work")
    assert _run(TC_DATA, tmp_path / "o.jsonl", "--engine", "ray") == 2
    err = capsys.readouterr().err
    assert "is not a work folder gsr made" in err and "Traceback" not in err
    assert sorted(p.name for p in work.iterdir()) == ["thesis.tex"]
    (tmp_path / "file").write_text("x")
    assert _run(TC_DATA, tmp_path / "o.jsonl", "--engine", "ray", "--work-dir", tmp_path / "file") == 2
    assert "--work-dir" in capsys.readouterr().err and (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("where", ["data", "out"])
def test_a_work_folder_holding_an_input_or_output_is_refused(tmp_path, capsys, where):
    # the work folder is checked against every input and output, as the other outputs are (safeio)
    pytest.importorskip("ray")
    work = tmp_path / "o.jsonl.gsr-ray"
    inner = tmp_path / "w"
    inner.mkdir()
    data = TC_DATA
    if where == "data":  # --data lies in the folder gsr would make and empty
        work.mkdir()
        data = work / "dev.jsonl"
        data.write_bytes(TC_DATA.read_bytes())
        code = _run(data, tmp_path / "o.jsonl", "--engine", "ray")
    else:  # --trace is the very path of the work folder gsr would make for --out
        code = _run(data, tmp_path / "o.jsonl", "--engine", "ray", "--trace", work)
    assert code == 2
    err = capsys.readouterr().err
    assert "the work folder" in err and ("holds --data" if where == "data" else "is --trace") in err
    assert "Traceback" not in err


def test_remove_own_removes_only_gsrs_block_files(tmp_path):
    from gsrlang.execution.engines.ray_engine import _remove_own

    work = tmp_path / "w"
    work.mkdir()
    own = ["run.json", "block-000000.results.jsonl", "block-000000.done.json", "block-000001.trace.jsonl",
           ".block-000001.done.json.abc_12.tmp", ".run.json.x1y2.tmp"]
    others = ["block-000002.done.json", "notes.txt", ".notes.txt.a.tmp", "block-000000.results.jsonl.bak"]
    for name in own + others:
        (work / name).write_text("x")
    (work / "sub").mkdir()
    _remove_own(work, 2)
    assert sorted(p.name for p in work.iterdir()) == sorted(others + ["sub"])
    for name in others:
        (work / name).unlink()
    (work / "sub").rmdir()
    (work / "run.json").write_text("{}")
    _remove_own(work, 2)
    assert not work.exists()  # emptied of gsr's files only: then the folder goes
