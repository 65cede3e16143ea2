"""What a cloned folder, or another user, may decide (issue 24, items 8 and 9).

8. A planted judgment cache (a cloned folder holding gsr.toml and .gsr-cache/judgments.sqlite) served "10 from the
   cache, 0 HTTP requests", scoring every answer as its author chose, with no warning. Now a cache that gsr did not
   make for this user is not read until they approve it (`gsr trust --cache`), one owned by another user never, and
   the run names the cache and how many answers came from it.
9. A gsr.toml two folders up, owned by another user, chose the judge's server and received the key. Now such a file
   is ignored with a notice, and the run's header names what chose each server.

The tests run as whatever user runs the suite; files "of another user" are made by chown when that is allowed
(root), else those tests are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.judges.llm import resolve_settings
from gsrlang.judges.llm.trust import config_dir, trusted_caches

try:
    from fakeserver import FakeOpenAI
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI

PROGRAM = '''rubric r "r"
task pointwise { scale = 1..5  quantize = round }
criterion polite: Bool { ask "Is the response polite?" }
sink normalize(polite)
'''
OTHER_UID = 54321


@pytest.fixture(autouse=True)
def clean_env(model_env):
    """The model settings of conftest.model_env: none from the caller's shell, the test's folder as cwd."""


def can_chown() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def project(folder: Path, base_url: str, items: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "p.gsr").write_text(PROGRAM)
    (folder / "d.jsonl").write_text("".join(json.dumps({"id": f"i{k}", "input": "q", "response": f"r{k}"}) + "\n"
                                            for k in range(items)))
    (folder / "gsr.toml").write_text(f'[judge]\nmodel = "fake-model"\nbase_url = "{base_url}"\n')
    return folder


def run(folder: Path, *extra) -> int:
    os.chdir(folder)
    return main(["run", "p.gsr", "--data", "d.jsonl", "--no-progress", "--out", "r.jsonl", *extra])


def verdicts(folder: Path) -> list:
    return [r.get("sink") for r in map(json.loads, (folder / "r.jsonl").read_text().splitlines()) if "status" in r]


@pytest.fixture
def server():
    with FakeOpenAI(responder=lambda body: {"answer": "B", "reason": "the model's own verdict"}) as s:
        yield s


# ----------------------------------------------------------------------------------------- item 8


def test_a_cache_gsr_made_for_you_is_read_and_named(server, tmp_path, capsys):
    here = project(tmp_path / "mine", server.base_url)
    assert run(here) == 0
    assert len(server.requests) == 3
    (cache_id, path), = trusted_caches(config_dir()).items()
    assert path == str((here / ".gsr-cache" / "judgments.sqlite").resolve())
    capsys.readouterr()
    assert run(here) == 0
    io = capsys.readouterr()
    assert len(server.requests) == 3  # every answer from the cache
    assert "judgment cache .gsr-cache/judgments.sqlite (6 stored answers" in io.err  # the header
    assert "3 answers came from the judgment cache .gsr-cache/judgments.sqlite, not from the model" in io.out


def test_a_planted_cache_is_not_read_without_approval(server, tmp_path, capsys):
    # the attacker's run, on their machine: every answer stored as the planted verdict
    theirs = project(tmp_path / "attacker", server.base_url)
    server.responder = lambda body: {"answer": "A", "reason": "planted"}
    assert run(theirs) == 0
    planted = verdicts(theirs)
    # the victim clones the folder (gsr.toml and .gsr-cache/ with it); their gsr never made that cache
    (config_dir() / "trusted.json").unlink()
    clone = tmp_path / "clone"
    shutil.copytree(theirs, clone)
    (clone / "r.jsonl").unlink()
    server.responder = lambda body: {"answer": "B", "reason": "the model's own verdict"}
    server.reset()
    capsys.readouterr()
    assert run(clone) == 2
    err = capsys.readouterr().err
    assert "was not made by gsr for you" in err and "gsr trust --cache .gsr-cache/judgments.sqlite" in err
    assert "Traceback" not in err and len(server.requests) == 0 and not (clone / "r.jsonl").exists()
    # --no-cache runs with the model's own verdicts
    assert run(clone, "--no-cache") == 0 and len(server.requests) == 3
    assert verdicts(clone) != planted
    # approved, the cache's answers are used (and the run says where they came from)
    assert main(["trust", "--cache"]) == 0
    assert "trusted judgment cache" in capsys.readouterr().out
    server.reset()
    assert run(clone) == 0 and len(server.requests) == 0 and verdicts(clone) == planted
    assert "3 answers came from the judgment cache" in capsys.readouterr().out
    assert main(["trust", "--list"]) == 0 and "judgment cache" in capsys.readouterr().out
    assert main(["trust", "--cache", "--revoke"]) == 0
    assert run(clone) == 2



def test_a_trusted_cache_that_is_gone_can_be_revoked_by_its_path(server, tmp_path, capsys):
    here = project(tmp_path / "gone", server.base_url)
    assert run(here) == 0  # gsr made the cache for this user: it is in the trust store
    db = here / ".gsr-cache" / "judgments.sqlite"
    db.unlink()
    capsys.readouterr()
    assert main(["trust", "--list"]) == 0 and f"{db} (id " in (out := capsys.readouterr().out)
    assert "(not there now)" in out
    assert main(["trust", "--cache", str(db), "--revoke"]) == 0
    assert "no longer trusted: judgment cache" in capsys.readouterr().out
    assert main(["trust", "--list"]) == 0 and str(db) not in capsys.readouterr().out
    assert main(["trust", "--cache", str(db), "--revoke"]) == 2
    assert "no such judgment cache" in capsys.readouterr().err


def test_a_cache_from_before_cache_ids_needs_approval_once(server, tmp_path, capsys):
    import sqlite3

    here = project(tmp_path / "old", server.base_url)
    assert run(here) == 0
    db = here / ".gsr-cache" / "judgments.sqlite"
    with sqlite3.connect(db) as conn:  # as an older gsr left it: no id
        conn.execute("DROP TABLE gsr_meta")
    conn.close()
    capsys.readouterr()
    assert run(here) == 2 and "gsr trust --cache" in capsys.readouterr().err
    assert main(["trust", "--cache", str(db)]) == 0
    server.reset()
    assert run(here) == 0 and len(server.requests) == 0


@pytest.mark.skipif(not can_chown(), reason="making a file of another user needs root")
def test_another_users_cache_is_never_read(server, tmp_path, capsys):
    here = project(tmp_path / "shared", server.base_url)
    assert run(here) == 0
    db = here / ".gsr-cache" / "judgments.sqlite"
    os.chown(db, OTHER_UID, OTHER_UID)
    capsys.readouterr()
    assert run(here) == 2
    assert f"belongs to another user (uid {OTHER_UID})" in capsys.readouterr().err
    assert main(["trust", "--cache"]) == 2 and "copy it, and approve the copy" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- item 9


@pytest.mark.skipif(not can_chown(), reason="making a file of another user needs root")
def test_another_users_gsr_toml_is_ignored_with_a_notice(tmp_path, capsys):
    top = tmp_path / "shared"
    work = top / "a" / "b"
    work.mkdir(parents=True)
    (top / "gsr.toml").write_text('[judge]\nmodel = "m"\nbase_url = "http://127.0.0.1:9999/v1"\n')
    os.chown(top / "gsr.toml", OTHER_UID, OTHER_UID)
    s = resolve_settings({"model": "mine"}, env={"OPENAI_API_KEY": "sk-mine-1234"}, cwd=work)
    assert s.default.base_url is None and s.config_file is None  # the OpenAI API, as if the file were not there
    err = capsys.readouterr().err
    assert f"{top / 'gsr.toml'} is ignored: it belongs to another user (uid {OTHER_UID})" in err
    # the search goes on past another's file, to the user's own further up
    (tmp_path / "gsr.toml").write_text('[judge]\nmodel = "m"\nbase_url = "http://127.0.0.1:8/v1"\n')
    assert resolve_settings({}, env={}, cwd=work).config_file == tmp_path / "gsr.toml"
    # named on purpose, another user's file is used
    s = resolve_settings({}, env={}, cwd=work, config_path=top / "gsr.toml")
    assert s.default.base_url == "http://127.0.0.1:9999/v1"


def test_the_runs_header_names_what_chose_each_server(server, tmp_path, capsys, monkeypatch):
    here = project(tmp_path / "p", server.base_url)
    assert run(here) == 0
    err = capsys.readouterr().err
    origin = server.base_url.rsplit("/v1", 1)[0]
    assert f"gsr run: judge: model 'fake-model' at {origin} (server chosen by {here / 'gsr.toml'})" in err
    assert run(here, "--base-url", server.base_url) == 0
    assert "(server chosen by --base-url)" in capsys.readouterr().err
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    assert run(here) == 0
    assert "(server chosen by OPENAI_BASE_URL)" in capsys.readouterr().err
    monkeypatch.delenv("OPENAI_BASE_URL")
    (here / "gsr.toml").write_text('[judge]\nmodel = "fake-model"\n')
    s = resolve_settings({}, env={"OPENAI_API_KEY": "sk-x-1234"}, cwd=here)
    assert s.server_sources == {"default": "the default (the OpenAI API)"}
    (here / "gsr.toml").write_text(f'[judge]\nmodel = "fake-model"\n[judge.roles.strong]\nbase_url = "{server.base_url}"\n')
    s = resolve_settings({}, env={"OPENAI_API_KEY": "sk-x-1234"}, cwd=here)
    assert s.server_sources["strong"] == str(here / "gsr.toml")
