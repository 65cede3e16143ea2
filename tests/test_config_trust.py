"""The trust boundary for configuration: a project's gsr.toml cannot send the user's key to a host the user has
not approved, nor choose which environment variable is sent as the key (issue 11)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.judges.llm import resolve_settings
from gsrlang.judges.llm.trust import approved_host, config_dir

try:
    from fakeserver import FakeOpenAI
except ImportError:  # tests/ imported as a package
    from tests.fakeserver import FakeOpenAI

KEY = "sk-user-OPENAI-5e1f"
AWS = "aws-SECRET-0c9d"
ROOT = Path(__file__).resolve().parents[1]
HELPSTEER = ROOT / "examples" / "helpsteer2" / "helpfulness.gsr"
HOSTILE = '[judge]\nmodel = "m"\nbase_url = "http://elsewhere.example/v1"\napi_key_env = "AWS_SECRET_ACCESS_KEY"\n'


@pytest.fixture
def project(tmp_path):
    (tmp_path / "gsr.toml").write_text(HOSTILE)
    return tmp_path


def user_config(text: str) -> Path:
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(text)
    return folder / "config.toml"


def resolve(cwd, env=None, **kw):
    return resolve_settings({}, env={"OPENAI_API_KEY": KEY, "AWS_SECRET_ACCESS_KEY": AWS} if env is None else env,
                            cwd=cwd, **kw)


def test_a_cloned_projects_file_gets_no_key_and_cannot_pick_the_variable(project, capsys):
    s = resolve(project)
    assert s.default.base_url == "http://elsewhere.example/v1" and s.default.model == "m"  # options still apply
    assert s.default.api_key is None  # neither $AWS_SECRET_ACCESS_KEY nor $OPENAI_API_KEY goes there
    err = capsys.readouterr().err
    assert 'api_key_env = "AWS_SECRET_ACCESS_KEY" is ignored' in err
    assert "elsewhere.example/v1, a host you have not approved, so no API key is sent" in err
    assert f"gsr trust {project / 'gsr.toml'}" in err
    assert AWS not in err and KEY not in err


def test_gsr_trust_approves_this_exact_file(project, capsys):
    assert main(["trust", str(project / "gsr.toml")]) == 0
    out = capsys.readouterr().out
    assert "may send your API key to http://elsewhere.example/v1" in out and "$AWS_SECRET_ACCESS_KEY" in out
    store = json.loads((config_dir() / "trusted.json").read_text())
    assert str((project / "gsr.toml").resolve()) in store["files"]
    assert os.stat(config_dir() / "trusted.json").st_mode & 0o077 == 0
    assert resolve(project).default.api_key.reveal() == KEY  # trusted: its host may get the key ($OPENAI_API_KEY
    assert resolve(project, {"AWS_SECRET_ACCESS_KEY": AWS}).default.api_key.reveal() == AWS  # wins), api_key_env too
    assert "plain http to elsewhere.example" in capsys.readouterr().err  # but the key goes unencrypted
    # an edit (a pull) withdraws the trust
    (project / "gsr.toml").write_text(HOSTILE + "temperature = 0.5\n")
    assert resolve(project).default.api_key is None
    assert main(["trust", "--list"]) == 0 and "changed since trusted" in capsys.readouterr().out
    assert main(["trust", "--revoke", str(project / "gsr.toml")]) == 0
    assert main(["trust", "--revoke", str(project / "gsr.toml")]) == 2


def test_hosts_in_the_user_config_are_approved_for_every_project(tmp_path):
    (tmp_path / "gsr.toml").write_text('[judge]\nmodel = "m"\nbase_url = "https://llm.corp.example:8443/v1"\n')
    assert resolve(tmp_path).default.api_key is None
    user_config('[trust]\nhosts = ["llm.corp.example:8443"]\n')
    assert resolve(tmp_path).default.api_key.reveal() == KEY
    user_config('[trust]\nhosts = ["llm.corp.example:9999"]\n')  # another port is another server
    assert resolve(tmp_path).default.api_key is None


def test_the_user_config_may_name_the_key_variable_and_host(tmp_path):
    (tmp_path / "gsr.toml").write_text('[judge]\nmodel = "project-model"\n')
    user_config('[judge]\nmodel = "user-model"\nbase_url = "https://api.example.com/v1"\napi_key_env = "MY_KEY"\n')
    s = resolve(tmp_path, {"MY_KEY": "sk-mine"})
    assert s.default.model == "project-model"  # the project chooses the model
    assert s.default.base_url == "https://api.example.com/v1" and s.default.api_key.reveal() == "sk-mine"


def test_flags_and_environment_are_the_users_choice(project):
    s = resolve_settings({"base_url": "https://chosen.example/v1"}, env={"OPENAI_API_KEY": KEY}, cwd=project)
    assert s.default.api_key.reveal() == KEY
    s = resolve_settings({}, env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "https://env.example/v1"}, cwd=project)
    assert s.default.api_key.reveal() == KEY


def test_loopback_hosts_need_no_approval(tmp_path):
    for url in ("http://localhost:8000/v1", "http://127.0.0.1:9/v1", "http://[::1]:8000/v1"):
        (tmp_path / "gsr.toml").write_text(f'[judge]\nmodel = "m"\nbase_url = "{url}"\n')
        assert resolve(tmp_path).default.api_key.reveal() == KEY, url
    assert not approved_host("http://127.example.com/v1", []) and approved_host("http://a.localhost/v1", [])


def test_a_project_role_on_another_host_gets_no_key(tmp_path):
    (tmp_path / "gsr.toml").write_text('[judge]\nmodel = "m"\n[judge.roles.x]\nbase_url = "https://x.example/v1"\n')
    s = resolve(tmp_path, {"OPENAI_API_KEY": KEY, "GSR_ROLE_X_API_KEY": "sk-role"})
    assert s.default.api_key.reveal() == KEY and s.for_role("x").api_key is None
    s = resolve(tmp_path, {"OPENAI_API_KEY": KEY, "GSR_ROLE_X_API_KEY": "sk-role",
                           "GSR_ROLE_X_BASE_URL": "https://x.example/v1"})  # the user named the host
    assert s.for_role("x").api_key.reveal() == "sk-role"


def test_a_key_over_plain_http_to_a_remote_host_is_warned_about(tmp_path, capsys):
    resolve_settings({"model": "m", "base_url": "http://10.1.2.3:8000/v1"}, env={"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    assert "API key of the default judge goes over plain http to 10.1.2.3" in capsys.readouterr().err
    resolve_settings({"model": "m", "base_url": "http://localhost:8000/v1"}, env={"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    assert "plain http" not in capsys.readouterr().err


def _local_non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (no packet is sent), or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the routing table is consulted
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_gsr_run_never_sends_the_key_to_an_unapproved_project_host(tmp_path, monkeypatch, capsys):
    """End to end over real HTTP: the fake server listens on a non-loopback address of this machine."""
    address = _local_non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to stand in for a remote host")
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS)
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "prompt": "Hi?", "response": "Hello."}) + "\n")
    with FakeOpenAI(host=address, responder=lambda body: {"reason": "r", "answer": "A"}) as server:
        (tmp_path / "gsr.toml").write_text(f'[judge]\nmodel = "fake"\nbase_url = "{server.base_url}"\n'
                                           'api_key_env = "AWS_SECRET_ACCESS_KEY"\n')
        argv = ["run", str(HELPSTEER), "--data", "d.jsonl", "--mode", "pointwise", "--input-field", "prompt", "--no-cache", "-q",
                "--no-progress"]
        main(argv)
        assert server.requests and 'api_key_env = "AWS_SECRET_ACCESS_KEY" is ignored' in capsys.readouterr().err
        sent = {r.headers.get("authorization", "") for r in server.requests}
        assert not any(AWS in h for h in sent), sent
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        server.requests.clear()
        main(argv)
        sent = {r.headers.get("authorization", "") for r in server.requests}
        assert server.requests and not any(KEY in h or AWS in h for h in sent), sent
        assert "a host you have not approved" in capsys.readouterr().err
        monkeypatch.delenv("OPENAI_API_KEY")
        server.requests.clear()
        assert main(["trust"]) == 0
        main(argv)
        sent = {r.headers.get("authorization", "") for r in server.requests}
        assert sent == {f"Bearer {AWS}"}  # trusted: the file's choice holds
        assert f"plain http to {address}" in capsys.readouterr().err


def test_gsr_trust_shows_control_characters_escaped_and_what_goes_where(tmp_path, capsys):
    # issue 24 item 10: a role name with terminal escapes made the screen show api.openai.com and
    # $OPENAI_API_KEY, while the file sends $AWS_SECRET_ACCESS_KEY to its own URL
    fake = "\x1b[2K\r[judge] sends the value of $OPENAI_API_KEY as its API key to https://api.openai.com/v1"
    toml = ('[judge]\nmodel = "m"\n'
            f'[judge.roles."x{json.dumps(fake)[1:-1]}\\u202e"]\n'
            'base_url = "http://evil.example/v1\\u001b[1A"\napi_key_env = "AWS_SECRET_ACCESS_KEY"\n'
            '[judge.roles.plain]\napi_key_env = "MY_KEY"\n')
    (tmp_path / "gsr.toml").write_text(toml)
    assert main(["trust", str(tmp_path / "gsr.toml")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "\\x1b[2K\\x0d[judge] sends" in out and "\\u202e" in out  # shown, escaped, as the file has it
    evil = [line for line in out.splitlines() if "AWS_SECRET_ACCESS_KEY" in line]
    assert len(evil) == 1 and evil[0].endswith("as its API key to http://evil.example/v1\\x1b[1A")
    # a role with no base_url of its own sends its key where [judge] does
    assert "[judge.roles.plain] sends the value of $MY_KEY as its API key to the OpenAI API" in out
