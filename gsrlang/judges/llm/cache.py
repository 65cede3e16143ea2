"""A persistent judgment cache: SQLite, one row per model answer.

``JudgmentCache(path)`` stores JSON-able dicts under string keys (the client
uses :meth:`ChatRequest.cache_key`, a sha256 of everything that determines the
answer).  Table ``judgments(key TEXT PRIMARY KEY, value TEXT, created REAL)``.

* **Durability**: WAL journal with ``synchronous=NORMAL`` and autocommit; every
  :meth:`put` is its own committed transaction, written to the WAL before
  ``put`` returns, so killing the process (even ``kill -9``) right afterwards
  loses nothing.  (A power cut may lose the last commits; that is the
  WAL/NORMAL trade-off, fine for a cache.)
* **Concurrency**: calls are short and synchronous; use it directly from an
  asyncio event loop.  Several processes may share one file (WAL readers never
  block, writers wait up to ``busy_timeout_s``).  A lock makes one instance safe
  to share between threads too.  WAL needs a local file system (not NFS).
* **Errors**: a corrupt or unreadable file raises :class:`CacheError` naming the
  path, with the hint to delete it (and its ``-wal``/``-shm`` companions);
  the cache is rebuilt empty on the next run.
* **A put that cannot be stored** (the disk is full, the file became read-only, a
  write lock held past the timeout) never fails the answer it stores: the value
  is kept in memory for the rest of the run (``get`` still serves it), and
  :attr:`unstored` / :attr:`unstored_error` count it for the run's warning. A
  full cache disk costs the cache, never a judgment.

Nothing secret is written: values are model answers and metadata, never
requests or keys.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from .config import LLMError

__all__ = ["JudgmentCache", "CacheError", "open_judgment_cache"]

SCHEMA_VERSION = 1


class CacheError(LLMError):
    """The judgment cache file cannot be used."""


class JudgmentCache:
    """SQLite-backed ``key -> dict`` store for model answers (see module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._memory: dict[str, str] = {}  # answers a put could not store (see `put`)
        self.unstored = 0
        self.unstored_error: str | None = None
        try:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._error(f"cannot create its directory: {exc.strerror or exc}", hint=False) from None
        try:
            conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._error(f"cannot open: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"cannot switch to WAL journal mode (got {mode!r})")
            conn.execute("PRAGMA synchronous = NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise CacheError(f"judgment cache {self.path} was written by a newer gsrlang (schema {version}); "
                                 "upgrade gsrlang or use another cache file", path=self.path)
            conn.execute("CREATE TABLE IF NOT EXISTS judgments ( key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                         "created REAL NOT NULL)")
            # the cache's id: a random token that gsr records as the user's when it makes the file (trust.py)
            conn.execute("CREATE TABLE IF NOT EXISTS gsr_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            token = secrets.token_hex(16)
            with contextlib.suppress(sqlite3.OperationalError):  # a full disk: kept in memory, as `put` keeps answers
                conn.execute("INSERT OR IGNORE INTO gsr_meta (key, value) VALUES ('id', ?)", (token,))
            row = conn.execute("SELECT value FROM gsr_meta WHERE key = 'id'").fetchone()
            self.id = str(row[0]) if row else token
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("SELECT count(*) FROM judgments LIMIT 1").fetchone()
        except CacheError:
            conn.close()
            raise
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # a damaged schema text fails to decode
            conn.close()
            raise self._error(f"cannot open: {exc}") from None
        self._conn = conn

    # ------------------------------------------------------------------ helpers

    def _error(self, what: str, *, hint: bool = True) -> CacheError:
        msg = f"judgment cache {self.path}: {what}"
        if hint:
            msg += (f". If the file is corrupt or not a gsrlang cache, delete it (and {self.path.name}-wal / "
                    f"{self.path.name}-shm next to it); it is rebuilt on the next run")
        return CacheError(msg, path=self.path)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise CacheError(f"judgment cache {self.path} is closed", path=self.path)
        return self._conn

    def _wrap(self, exc: sqlite3.Error) -> CacheError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return self._error(f"{text} (another process holds a write lock)", hint=False)
        return self._error(text)

    # ------------------------------------------------------------------ API

    def get(self, key: str) -> dict[str, Any] | None:
        """The dict stored under ``key``, or None."""
        with self._lock:
            kept = self._memory.get(key)
            try:
                row = (kept,) if kept is not None else self._db().execute(
                    "SELECT value FROM judgments WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                raise self._wrap(exc) from None
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None  # a damaged row is a miss; the next put overwrites it
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` and commit before returning; when the file cannot take it (disk full,
        read-only, locked too long), keep it in memory instead and count it (`unstored`): never raises for that."""
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        with self._lock:
            db = self._db()
            try:
                db.execute("INSERT OR REPLACE INTO judgments (key, value, created) VALUES (?, ?, ?)",
                           (key, text, time.time()))
            except (sqlite3.Error, OSError) as exc:  # sqlite3.OperationalError: "database or disk is full"
                self._memory[key] = text
                self.unstored += 1
                if self.unstored_error is None:
                    self.unstored_error = str(exc)

    def unstored_warning(self) -> str | None:
        """One line for the run's end when some answers could not be stored, else None."""
        if not self.unstored:
            return None
        n = self.unstored
        return (f"judgment cache {self.path}: {n} answer{'s' if n != 1 else ''} could not be stored "
                f"({self.unstored_error}); they are in this run's results and trace, and a rerun will ask "
                "for them again (free some space, or choose another --cache)")

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __len__(self) -> int:
        with self._lock:
            try:
                return int(self._db().execute("SELECT count(*) FROM judgments").fetchone()[0])
            except sqlite3.Error as exc:
                raise self._wrap(exc) from None

    def close(self) -> None:
        """Close the database (idempotent)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> "JudgmentCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JudgmentCache({str(self.path)!r}, {'closed' if self._conn is None else 'open'})"


def open_judgment_cache(path: Path, folder: Path | None = None):
    """The judgment cache at `path`, if it is the user's: made here by gsr for them (its id, a random token kept in
    the file, is recorded in the trust store when gsr creates it) or approved with ``gsr trust --cache``.

    A cache that answers decide verdicts with must not be planted: a cloned folder holding
    ``.gsr-cache/judgments.sqlite`` would otherwise score every item as its author chose, with no call made.
    So a cache owned by another user, or one whose id the trust store does not hold, raises
    :class:`CacheError` saying why and how to approve it; nothing is read from it."""
    from gsrlang.judges.llm.trust import TRUST_STORE, config_dir, other_owner, trust_cache, trusted_caches

    path = Path(path)
    folder = config_dir() if folder is None else Path(folder)
    existed = path.exists()
    if (uid := other_owner(path) if existed else None) is not None:
        raise CacheError(f"judgment cache {path} belongs to another user (uid {uid}), who can change its answers "
                         "at any time: gsr does not read it. Use your own (--cache FILE, or --no-cache); if you trust "
                         "its answers, copy it and run `gsr trust --cache COPY`", path=path)
    store = JudgmentCache(path)
    if not existed:
        try:
            trust_cache(store.id, path, folder)
        except OSError as exc:
            store.close()
            raise CacheError(f"judgment cache {path}: cannot record it as yours in {folder / TRUST_STORE} "
                             f"({exc.strerror or exc}); a later run could not tell it from a planted one", path=path) \
                from None
        return store
    if store.id not in trusted_caches(folder):
        n = len(store)
        store.close()
        raise CacheError(f"judgment cache {path} ({n} answer{'s' if n != 1 else ''}) was not made by gsr for you "
                         f"(it is not recorded in {folder / TRUST_STORE}): its answers would decide verdicts without a "
                         f"call, so gsr does not read it. If you trust it, run `gsr trust --cache {path}`; or use "
                         "--no-cache, or --cache NEW_FILE", path=path)
    return store
