"""gsr trust: let a project's gsr.toml send your API keys where it says (see gsrlang/judges/llm/trust.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors

HELP = "trust a project's gsr.toml with your API keys (its hosts and api_key_env), or list / revoke trust"
DESCRIPTION = """\
A project's gsr.toml may choose models and options, but until you trust it, a
base_url it sets to a host you have not approved gets no API key, and its
api_key_env (which environment variable is sent as the key) is ignored. Loopback
hosts (localhost, 127.0.0.1, ::1) and the hosts under [trust] hosts in your own
$XDG_CONFIG_HOME/gsr/config.toml are approved for every project.

`gsr trust` records the SHA-256 of the file as it is now (in
$XDG_CONFIG_HOME/gsr/trusted.json): edit it, or pull a change to it, and it is no
longer trusted until you run `gsr trust` again. Read the file first: it is shown
what the trust lets it do.

output: what the trust allows (or the list) on standard output.
exit status: 0 done; 2 no gsr.toml found, or a file that cannot be read.

examples:
  gsr trust                 # the nearest gsr.toml (this folder or a parent)
  gsr trust path/to/gsr.toml
  gsr trust --list
  gsr trust --revoke
  gsr trust --cache         # approve .gsr-cache/judgments.sqlite (made elsewhere: a clone, a copy)

A judgment cache that gsr makes is recorded as yours (by a random id kept in the
file); one it did not make for you, e.g. in a cloned project, is not read until
you approve it with `gsr trust --cache FILE`. A cache owned by another user is
never read: copy it, and approve the copy."""


def add_arguments(p) -> None:
    p.add_argument("path", metavar="PATH", nargs="?", help="the gsr.toml (default: the nearest one)")
    p.add_argument("--list", action="store_true", help="list the trusted files (and whether each still matches)")
    p.add_argument("--revoke", action="store_true", help="stop trusting the file")
    p.add_argument("--cache", metavar="FILE", nargs="?", const=".gsr-cache/judgments.sqlite", default=None,
                   help="approve a judgment cache gsr did not make for you (a cloned project's; default "
                        ".gsr-cache/judgments.sqlite): its stored answers then decide verdicts with no call; "
                        "with --revoke, withdraw that (one that is gone: by the path `--list` shows)")


def run(args) -> int:
    from gsrlang.files.printable import printable
    from gsrlang.judges.llm.config import find_config_file
    from gsrlang.judges.llm.trust import (config_dir, file_digest, trust_file, trusted_caches, trusted_files,
                                          untrust_file)

    folder = config_dir()
    if getattr(args, "cache", None) is not None and not args.list:
        return _trust_cache(Path(args.cache), folder, args.revoke)
    if args.list:
        files = trusted_files(folder)
        for path, digest in files.items():
            try:
                state = "trusted" if file_digest(Path(path).read_bytes()) == digest else "changed since trusted"
            except OSError:
                state = "missing"
            print(f"{printable(path)}: {state}")
        if not files:
            print(f"no trusted project files ({folder / 'trusted.json'})")
        for cache_id, cache in trusted_caches(folder).items():
            state = "" if Path(cache).exists() else " (not there now)"
            print(f"judgment cache {cache} (id {cache_id[:12]}){state}")
        return 0
    path = Path(args.path) if args.path else find_config_file(Path.cwd())
    if path is None:
        raise UsageError("no gsr.toml in this folder or a parent: name the file to trust")
    if args.revoke:
        if not untrust_file(path, folder):
            raise UsageError(f"`{path}` was not trusted")
        print(f"no longer trusted: {printable(str(path.resolve()))}")
        return 0
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read `{path}`: {exc.strerror or exc}") from None
    grants = _grants(path, data)
    try:
        store = trust_file(path, data, folder)
    except OSError as exc:
        raise UsageError(f"cannot record the trust in {folder}: {exc.strerror or exc}") from None
    print(f"trusted {printable(str(path.resolve()))} ({file_digest(data)[:19]}...), recorded in {store}")
    for line in grants:
        print(f"  {line}")
    print("  (an edit to the file withdraws the trust; `gsr trust --revoke` withdraws it now)", file=sys.stderr)
    return 0


def _grants(path: Path, data: bytes) -> list[str]:
    """What the trust lets the file do: the hosts it sends keys to, the variables it reads keys from."""
    from gsrlang.files.printable import printable
    from gsrlang.judges.llm.config import tomllib

    try:
        judge = tomllib.loads(data.decode("utf-8")).get("judge") or {}
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"`{path}` is not a TOML file: {exc}") from None
    if not isinstance(judge, dict):
        judge = {}
    roles = judge.get("roles") if isinstance(judge.get("roles"), dict) else {}
    tables = [("[judge]", judge)] + [(f"[judge.roles.{_name(n)}]", t) for n, t in roles.items() if isinstance(t, dict)]
    lines = []
    for where, table in tables:
        # a role without a base_url of its own sends its key to [judge]'s; [judge] without one, to the OpenAI API
        url = table.get("base_url") or judge.get("base_url")
        to = printable(url) if url else "the OpenAI API (or $OPENAI_BASE_URL)"
        if table.get("base_url"):
            lines.append(f"{where} may send your API key to {printable(table['base_url'])}")
        if table.get("api_key_env"):
            lines.append(f"{where} sends the value of ${printable(table['api_key_env'])} as its API key to {to}")
    return lines or ["it sets no base_url and no api_key_env: trust changes nothing for it yet"]


def _name(name: str) -> str:
    """A role's name as TOML would write it in a table header: bare when it can be, else quoted, escaped."""
    import re

    from gsrlang.files.printable import printable

    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else '"' + printable(name).replace('"', '\\"') + '"'


def _trust_cache(path: Path, folder: Path, revoke: bool) -> int:
    """`gsr trust --cache FILE [--revoke]`: approve a judgment cache (or withdraw it), by the id kept in it."""
    from gsrlang.judges.llm.cache import CacheError, JudgmentCache
    from gsrlang.judges.llm.trust import other_owner, trust_cache, trusted_caches, untrust_cache

    if not path.is_file():
        gone = [cache_id for cache_id, where in trusted_caches(folder).items() if where == str(path.resolve())]
        if revoke and gone:  # a deleted or moved cache (`--list`: "not there now"): forgotten by where it was
            for cache_id in gone:
                untrust_cache(cache_id, folder)
            print(f"no longer trusted: judgment cache {path.resolve()} (not there now)")
            return 0
        raise UsageError(f"--cache {path}: no such judgment cache")
    uid = other_owner(path)
    if uid is not None and not revoke:
        raise UsageError(f"--cache {path}: it belongs to another user (uid {uid}), who can change its answers after "
                         "you approve it; copy it, and approve the copy")
    with usage_errors(CacheError):
        with JudgmentCache(path) as cache:
            cache_id, n = cache.id, len(cache)
    if revoke:
        if not untrust_cache(cache_id, folder):
            raise UsageError(f"--cache {path} was not trusted")
        print(f"no longer trusted: judgment cache {path.resolve()}")
        return 0
    try:
        store = trust_cache(cache_id, path, folder)
    except OSError as exc:
        raise UsageError(f"cannot record the trust in {folder}: {exc.strerror or exc}") from None
    print(f"trusted judgment cache {path.resolve()} ({n} stored answer{'s' if n != 1 else ''}), recorded in {store}")
    print("  its answers now decide verdicts with no model call; `gsr trust --cache FILE --revoke` withdraws it",
          file=sys.stderr)
    return 0
