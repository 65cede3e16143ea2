"""JudgmentCache: SQLite WAL store, durability, multi-process use, corrupt files."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gsrlang.judges.llm import CacheError, JudgmentCache


def test_put_get_len(tmp_path):
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        assert len(cache) == 0 and cache.get("k") is None and "k" not in cache
        value = {"text": "{\"a\": 1}", "data": {"a": 1, "ü": ["ö", None, 1.5]}, "model": "m"}
        cache.put("k", value)
        assert cache.get("k") == value and "k" in cache and len(cache) == 1
        cache.put("k", {"text": "new", "data": {}})  # replace
        assert cache.get("k") == {"text": "new", "data": {}} and len(cache) == 1
        cache.put("k2", {"x": 1})
        assert len(cache) == 2


def test_persists_and_uses_wal(tmp_path):
    path = tmp_path / "sub" / "dir" / "c.sqlite"  # parent directories are created
    cache = JudgmentCache(path)
    cache.put("k", {"v": 1})
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(CacheError, match="closed"):
        cache.get("k")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = [r[1] for r in conn.execute("PRAGMA table_info(judgments)")]
    assert cols == ["key", "value", "created"]
    conn.close()
    with JudgmentCache(path) as again:
        assert again.get("k") == {"v": 1}


def test_put_survives_kill_9(tmp_path):
    path = tmp_path / "c.sqlite"
    script = textwrap.dedent(
        f"""
        import os, signal
        from gsrlang.judges.llm import JudgmentCache
        cache = JudgmentCache({str(path)!r})
        for i in range(20):
            cache.put(f"k{{i}}", {{"i": i}})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert proc.returncode == -9
    with JudgmentCache(path) as cache:
        assert len(cache) == 20 and cache.get("k19") == {"i": 19}


def test_several_processes_share_one_file(tmp_path):
    path = tmp_path / "shared.sqlite"
    JudgmentCache(path).close()
    script = textwrap.dedent(
        """
        import sys
        from gsrlang.judges.llm import JudgmentCache
        path, tag = sys.argv[1], sys.argv[2]
        cache = JudgmentCache(path)
        for i in range(100):
            cache.put(f"{tag}-{i}", {"tag": tag, "i": i})
            cache.get(f"{tag}-{i // 2}")
        cache.close()
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"p{n}"]) for n in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with JudgmentCache(path) as cache:
        assert len(cache) == 400 and cache.get("p3-99") == {"tag": "p3", "i": 99}


def test_corrupt_file_gives_clear_error(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is certainly not an sqlite database" * 100)
    with pytest.raises(CacheError) as info:
        JudgmentCache(path)
    msg = str(info.value)
    assert str(path) in msg and "delete it" in msg
    assert info.value.path == path


def test_unreadable_location_gives_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CacheError) as info:
        JudgmentCache(blocker / "c.sqlite")  # parent is a file
    assert str(blocker / "c.sqlite") in str(info.value)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions to apply")
def test_unreadable_file_gives_clear_error(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgmentCache(path).close()
    path.chmod(0)
    try:
        with pytest.raises(CacheError) as info:
            JudgmentCache(path)
        assert str(path) in str(info.value)
    finally:
        path.chmod(0o600)


def test_damaged_row_is_a_miss(tmp_path):
    path = tmp_path / "c.sqlite"
    with JudgmentCache(path) as cache:
        cache.put("k", {"v": 1})
    conn = sqlite3.connect(path)
    conn.execute("UPDATE judgments SET value = 'not json' WHERE key = 'k'")
    conn.commit()
    conn.close()
    with JudgmentCache(path) as cache:
        assert cache.get("k") is None
        cache.put("k", {"v": 2})
        assert cache.get("k") == {"v": 2}


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgmentCache(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="newer"):
        JudgmentCache(path)


def test_repr_shows_path(tmp_path):
    cache = JudgmentCache(Path(tmp_path) / "c.sqlite")
    assert "c.sqlite" in repr(cache) and "open" in repr(cache)
    cache.close()
    assert "closed" in repr(cache)


def test_a_bad_byte_in_the_schema_text_gives_the_clear_error(tmp_path):
    # issue 24 item 16: one bad byte in the stored CREATE TABLE text was an internal UnicodeDecodeError
    path = tmp_path / "c.sqlite"
    cache = JudgmentCache(path)
    cache.put("k", {"a": 1})
    cache.close()
    data = bytearray(path.read_bytes())
    data[data.index(b"CREATE TABLE") + 3] = 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError) as info:
        JudgmentCache(path)
    msg = str(info.value)
    assert f"judgment cache {path}: cannot open" in msg and "delete it" in msg
