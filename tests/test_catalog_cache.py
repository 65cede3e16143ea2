"""The stdlib catalogue's start-up cache is verified before it is loaded: a tampered cache is ignored and rebuilt,
never executed (issue 11)."""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
from pathlib import Path

import pytest

import gsrlang.catalog as catalog_module
from gsrlang.resources import stdlib_dir


class Boom:
    """A pickle that runs a command when loaded: what an attacker would plant."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache home; default_catalog() built once into it. Yields the cache file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    catalog_module.default_catalog.cache_clear()
    catalog_module.default_catalog()
    (path,) = (tmp_path / "cache" / "gsrlang").glob("catalog-*.pickle")
    yield path
    catalog_module.default_catalog.cache_clear()


def reload(monkeypatch) -> bool:
    """default_catalog() afresh; True when it came from the cache (the stdlib was not parsed)."""
    parsed = []
    real = catalog_module.load_catalog
    monkeypatch.setattr(catalog_module, "load_catalog", lambda folder: parsed.append(1) or real(folder))
    catalog_module.default_catalog.cache_clear()
    catalog = catalog_module.default_catalog()
    monkeypatch.setattr(catalog_module, "load_catalog", real)
    assert catalog == real(stdlib_dir())
    return not parsed


def signed(path: Path, payload: bytes) -> bytes:
    secret = (path.parent / "catalog.key").read_bytes()
    return catalog_module._MAGIC + hmac.new(secret, payload, hashlib.sha256).digest() + payload


def test_a_verified_cache_is_used(cache, monkeypatch):
    assert reload(monkeypatch)
    assert oct(cache.stat().st_mode & 0o777) == "0o600"
    assert (cache.parent / "catalog.key").stat().st_mode & 0o077 == 0


def test_a_planted_pickle_is_ignored_rebuilt_and_never_run(cache, monkeypatch, tmp_path):
    marker = tmp_path / "pwned"
    cache.write_bytes(catalog_module._MAGIC + b"\0" * 32 + pickle.dumps(Boom(marker)))  # no valid HMAC
    assert not reload(monkeypatch) and not marker.exists()
    assert reload(monkeypatch)  # rebuilt: the next start uses the cache again
    cache.write_bytes(pickle.dumps(Boom(marker)))  # the old format: a bare pickle
    assert not reload(monkeypatch) and not marker.exists()


def test_even_a_correctly_signed_pickle_may_only_build_catalogue_classes(cache, monkeypatch, tmp_path):
    marker = tmp_path / "pwned"
    cache.write_bytes(signed(cache, pickle.dumps(Boom(marker))))  # an attacker who read the key
    assert not reload(monkeypatch) and not marker.exists()


def test_a_cache_others_can_write_is_not_trusted(cache, monkeypatch):
    cache.chmod(0o620)  # group-writable
    assert not reload(monkeypatch)
    folder = cache.parent
    folder.chmod(0o777)  # a world-writable cache folder: no cache at all
    try:
        for p in folder.glob("catalog-*.pickle"):
            p.unlink()
        assert not reload(monkeypatch) and not reload(monkeypatch)
        assert not list(folder.glob("catalog-*.pickle"))
    finally:
        folder.chmod(0o700)


def test_a_symlinked_cache_file_is_not_followed(cache, monkeypatch, tmp_path):
    elsewhere = tmp_path / "elsewhere.pickle"
    elsewhere.write_bytes(cache.read_bytes())
    elsewhere.chmod(0o600)
    cache.unlink()
    cache.symlink_to(elsewhere)
    assert not reload(monkeypatch)


def test_two_checkouts_with_the_same_stdlib_text_do_not_share_an_entry(cache, monkeypatch, tmp_path):
    """The catalogue holds spans naming the stdlib's files: a clone beside a working copy (same text,
    another folder) must get its own entry, or its diagnostics would point into the other checkout."""
    import shutil

    import gsrlang.resources as resources

    copy = tmp_path / "clone" / "stdlib"
    shutil.copytree(stdlib_dir(), copy)
    monkeypatch.setattr(resources, "stdlib_dir", lambda: copy)
    catalog_module.default_catalog.cache_clear()
    catalog = catalog_module.default_catalog()
    assert len(list(cache.parent.glob("catalog-*.pickle"))) == 2
    paths = {str(sig.path) for sig in catalog.operators.values()}
    assert paths and all(p.startswith(str(copy)) for p in paths)
    catalog_module.default_catalog.cache_clear()
