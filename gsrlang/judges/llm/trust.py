"""The trust boundary between a project's gsr.toml and the user's credentials.

A ``gsr.toml`` comes with the project (often a cloned repository), so it is not the
user's word on where their API key may go. Like direnv's ``allow`` and VS Code's
workspace trust, gsr lets a project file choose models and options, but not:

* **the host a key is sent to**: a ``base_url`` set by a project file is used without
  any key unless its host is approved: a loopback host (``localhost``, ``127.0.0.1``,
  ``::1``), a host listed in the user's configuration (``[trust] hosts``), or any host
  of a project file the user trusted with ``gsr trust`` (below);
* **which environment variable is sent as a key**: ``api_key_env`` in a project file
  is ignored unless the file is trusted (it could name ``AWS_SECRET_ACCESS_KEY``).

The user's own configuration, ``$XDG_CONFIG_HOME/gsr/config.toml`` (by default
``~/.config/gsr/config.toml``), is trusted: it takes the same ``[judge]`` and
``[judge.roles.NAME]`` settings as gsr.toml, ``api_key_env`` included, and a
``[trust] hosts = ["api.example.com", "gpu-box:8000"]`` list. Flags and environment
variables are the user's too.

``gsr trust [PATH]`` records the SHA-256 of a project file in
``$XDG_CONFIG_HOME/gsr/trusted.json``; the trust holds for that exact content, so an
edit (a ``git pull``) needs a new ``gsr trust``. A key that would travel over plain
``http://`` to a host that is not loopback is sent (the user chose it) with a warning.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["approved_host", "config_dir", "file_digest", "host_of", "is_loopback", "is_trusted",
           "other_owner", "trust_cache", "trust_file", "trusted_caches", "trusted_files",
           "untrust_cache", "untrust_file"]

TRUST_STORE = "trusted.json"
USER_CONFIG = "config.toml"


def config_dir() -> Path:
    """The user's gsr configuration folder: $XDG_CONFIG_HOME/gsr, else ~/.config/gsr."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")) / "gsr"


def file_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _table(folder: Path, name: str) -> dict[str, str]:
    """One string-to-string table of the trust store ("files", "caches"); empty when none, or unreadable."""
    try:
        doc = json.loads((folder / TRUST_STORE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    table = doc.get(name) if isinstance(doc, dict) else None
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(table, dict) else {}


def trusted_files(folder: Path) -> dict[str, str]:
    """{resolved path: digest} of the project files the user trusted (empty when none, or unreadable).

    `folder`: the user's configuration folder (:func:`config_dir`)."""
    return _table(folder, "files")


def trusted_caches(folder: Path) -> dict[str, str]:
    """{cache id: path where it was made or approved} of the judgment caches gsr made for the user, or the user
    approved with ``gsr trust --cache`` (see :func:`gsrlang.judges.llm.cache.open_judgment_cache`)."""
    return _table(folder, "caches")


def is_trusted(path: Path, data: bytes, folder: Path) -> bool:
    """Whether the user trusted this project file with exactly this content."""
    return trusted_files(folder).get(str(Path(path).resolve())) == file_digest(data)


def _save(folder: Path, name: str, table: dict[str, str]) -> Path:
    """Write the trust store with its table `name` ("files", "caches") replaced by `table`; its path."""
    from gsrlang.files.safeio import write_atomic

    store = folder / TRUST_STORE
    tables = {"files": trusted_files(folder), "caches": trusted_caches(folder), name: table}
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"version": 1, **{k: dict(sorted(t.items())) for k, t in tables.items()}}
    write_atomic(store, json.dumps(doc, indent=2) + "\n")
    os.chmod(store, 0o600)
    return store


def _forget(folder: Path, name: str, key: str) -> bool:
    """Remove `key` from the trust store's table `name`; False when it was not there."""
    table = _table(folder, name)
    if table.pop(key, None) is None:
        return False
    _save(folder, name, table)
    return True


def trust_file(path: Path, data: bytes, folder: Path) -> Path:
    """Record `data` (the file's content, as shown to the user) as trusted; the trust store's path. Raises OSError."""
    return _save(folder, "files", {**trusted_files(folder), str(Path(path).resolve()): file_digest(data)})


def untrust_file(path: Path, folder: Path) -> bool:
    """Forget a trusted file; False when it was not trusted."""
    return _forget(folder, "files", str(Path(path).resolve()))


def host_of(url: str) -> tuple[str, int | None]:
    """(host in lower case, port or None) of a base URL."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return (parts.hostname or "").lower(), port


def is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def approved_host(url: str, hosts: list[str]) -> bool:
    """Whether credentials may go to `url`: a loopback host, or one the user listed (`host` or `host:port`)."""
    host, port = host_of(url)
    if is_loopback(host):
        return True
    for entry in hosts:
        h, _, p = entry.strip().lower().rpartition(":") if entry.count(":") == 1 else (entry.strip().lower(), "", "")
        if h == host and (not p or (p.isdigit() and port == int(p))):
            return True
    return False


# --------------------------------------------------------------------------- ownership, judgment caches


def other_owner(path: Path) -> int | None:
    """The uid owning `path` when it is neither the user nor root (who can change any file anyway); else None.

    None also where files have no owners (Windows) or `path` cannot be read."""
    if (getuid := getattr(os, "getuid", None)) is None:
        return None
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return None
    return None if uid in (getuid(), 0) else uid


def trust_cache(cache_id: str, path: Path, folder: Path) -> Path:
    """Record a judgment cache (by the id stored in it) as the user's; the trust store's path. Raises OSError."""
    return _save(folder, "caches", {**trusted_caches(folder), cache_id: str(Path(path).resolve())})


def untrust_cache(cache_id: str, folder: Path) -> bool:
    """Forget a judgment cache; False when it was not trusted."""
    return _forget(folder, "caches", cache_id)
