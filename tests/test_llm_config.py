"""Judge settings: precedence flags > env > gsr.toml > defaults, roles, errors, secrets."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from gsrlang.judges.llm import ConfigError, JudgeConfig, JudgeSettings, Secret, resolve_settings
from gsrlang.judges.llm.config import NO_MODEL_MESSAGE, find_config_file
from gsrlang.judges.llm.trust import config_dir, trust_file

KEY = "sk-test-SECRET-123"


def write(dir: Path, text: str) -> Path:
    path = dir / "gsr.toml"
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _isolate(tmp_path):
    """An empty gsr.toml stops the upward search at tmp_path (a stray file in a
    parent directory must not leak into these tests)."""
    (tmp_path / "gsr.toml").write_text("")


def resolve(flags, env, *, cwd, **kw):
    return resolve_settings(flags, env=env, cwd=cwd, **kw)


# --------------------------------------------------------------------------- precedence


def test_defaults(tmp_path):
    s = resolve({"model": "m"}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    c = s.default
    assert (c.model, c.base_url, c.temperature, c.max_tokens, c.timeout_s) == ("m", None, 0.0, None, 60.0)
    assert (c.max_retries, c.concurrency, c.seed, c.structured) == (5, 8, None, "auto")
    assert c.api_key.reveal() == KEY
    assert s.roles == {} and s.config_file == tmp_path / "gsr.toml"


def test_precedence_flags_env_file_default(tmp_path):
    write(tmp_path, '[judge]\nmodel = "file-model"\ntemperature = 0.2\nconcurrency = 2\nmax_retries = 1\n'
                    'base_url = "http://file:1/v1"\n')
    env = {"GSR_MODEL": "env-model", "GSR_TEMPERATURE": "0.4", "OPENAI_BASE_URL": "http://env:2/v1"}
    flags = {"model": "flag-model", "max_tokens": None, "base_url": None}
    c = resolve(flags, env, cwd=tmp_path).default
    assert c.model == "flag-model"            # flag beats env and file
    assert c.temperature == 0.4               # env beats file
    assert c.base_url == "http://env:2/v1"    # env beats file
    assert c.concurrency == 2                 # file beats default
    assert c.max_retries == 1
    assert c.timeout_s == 60.0                # default
    assert c.max_tokens is None               # None flag = not given

    c = resolve({}, {}, cwd=tmp_path).default
    assert (c.model, c.temperature, c.base_url) == ("file-model", 0.2, "http://file:1/v1")

    c = resolve({"temperature": 1.0, "concurrency": "16"}, env, cwd=tmp_path).default
    assert c.temperature == 1.0 and c.concurrency == 16


def test_all_env_variables(tmp_path):
    env = {
        "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://localhost:8000/v1/", "GSR_MODEL": "m",
        "GSR_TEMPERATURE": "0.7", "GSR_CONCURRENCY": "3", "GSR_MAX_TOKENS": "100", "GSR_TIMEOUT_S": "5",
        "GSR_MAX_RETRIES": "0", "GSR_SEED": "42", "GSR_STRUCTURED": "json_object", "GSR_UNRELATED": "x",
    }
    c = resolve({}, env, cwd=tmp_path).default
    assert c.base_url == "http://localhost:8000/v1"  # trailing slash removed
    assert (c.temperature, c.concurrency, c.max_tokens, c.timeout_s) == (0.7, 3, 100, 5.0)
    assert (c.max_retries, c.seed, c.structured) == (0, 42, "json_object")
    # empty variables count as unset
    c = resolve({}, {**env, "GSR_SEED": "", "GSR_CONCURRENCY": ""}, cwd=tmp_path).default
    assert c.seed is None and c.concurrency == 8


def test_config_file_found_in_parent_or_given_explicitly(tmp_path):
    write(tmp_path, '[judge]\nmodel = "parent-model"\nbase_url = "http://localhost:1234/v1"\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    s = resolve({}, {}, cwd=deep)
    assert s.default.model == "parent-model" and s.config_file == tmp_path / "gsr.toml"
    assert find_config_file(deep) == tmp_path / "gsr.toml"
    other = tmp_path / "other.toml"
    other.write_text('[judge]\nmodel = "explicit"\nbase_url = "http://x:1/v1"\n')
    assert resolve({}, {}, cwd=deep, config_path=other).default.model == "explicit"
    with pytest.raises(ConfigError, match="not found"):
        resolve({}, {}, cwd=deep, config_path=tmp_path / "missing.toml")


def test_file_without_judge_table_and_other_tables(tmp_path):
    write(tmp_path, '[output]\nformat = "json"\n')
    assert resolve({"model": "m"}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path).default.model == "m"


# --------------------------------------------------------------------------- roles


def test_roles_inherit_from_default(tmp_path):
    write(tmp_path, """
[judge]
model = "small"
temperature = 0.1
concurrency = 4

[judge.roles.strong]
model = "big"
max_tokens = 500

[judge.roles.careful]
seed = 7
""")
    s = resolve({}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    strong, careful = s.for_role("strong"), s.for_role("careful")
    assert (strong.model, strong.max_tokens, strong.temperature, strong.concurrency) == ("big", 500, 0.1, 4)
    assert (careful.model, careful.seed, careful.temperature) == ("small", 7, 0.1)
    assert strong.api_key.reveal() == KEY  # same server, so the key is inherited
    assert s.for_role(None) is s.default and s.for_role("default") is s.default
    assert tuple(sorted(s.roles)) == ("careful", "strong")
    # a flag for the default changes what roles inherit, but not what they set themselves
    s = resolve({"temperature": 0.9, "model": "flag-model"}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    assert s.for_role("careful").temperature == 0.9 and s.for_role("careful").model == "flag-model"
    assert s.for_role("strong").model == "big"


def test_role_env_and_flags(tmp_path):
    write(tmp_path, '[judge]\nmodel = "small"\n[judge.roles.strong]\nmodel = "file-big"\n')
    env = {
        "OPENAI_API_KEY": KEY,
        "GSR_ROLE_STRONG_MODEL": "env-big",
        "GSR_ROLE_LOCAL_MODEL": "llama3",
        "GSR_ROLE_LOCAL_BASE_URL": "http://localhost:11434/v1",
        "GSR_ROLE_FAST_CHEAP_MODEL": "tiny",
    }
    s = resolve({}, env, cwd=tmp_path)
    assert s.for_role("strong").model == "env-big"  # env beats file
    assert s.for_role("fast_cheap").model == "tiny"
    local = s.for_role("local")
    assert local.model == "llama3" and local.base_url == "http://localhost:11434/v1"
    # a role on another server does not inherit the default server's key
    assert local.api_key is None
    s = resolve({"roles": {"strong": {"model": "flag-big"}, "local": {"api_key": "local-key"}}}, env, cwd=tmp_path)
    assert s.for_role("strong").model == "flag-big"  # flag beats env
    assert s.for_role("local").api_key.reveal() == "local-key"


def test_role_env_name_maps_to_existing_role_case(tmp_path):
    write(tmp_path, '[judge]\nmodel = "m"\nbase_url = "http://h:1/v1"\n[judge.roles.Strong-One]\nseed = 1\n')
    s = resolve({}, {"GSR_ROLE_STRONG_ONE_MODEL": "big", "GSR_ROLE_STRONG_ONE_BASE_URL": "http://h:2/v1"},
                cwd=tmp_path)
    assert tuple(s.roles) == ("Strong-One",)
    assert s.for_role("Strong-One").model == "big" and s.for_role("Strong-One").base_url == "http://h:2/v1"


def test_unknown_role_lists_known_roles(tmp_path):
    s = JudgeSettings.build(JudgeConfig(model="m"), {"strong": {"model": "b"}, "weak": {}})
    with pytest.raises(ConfigError) as info:
        s.for_role("strongest")
    assert "'strongest'" in str(info.value) and "'strong', 'weak'" in str(info.value)
    with pytest.raises(ConfigError, match="no roles are configured"):
        JudgeSettings.build(JudgeConfig(model="m")).for_role("x")


def test_api_key_env_in_file(tmp_path):
    write(tmp_path, """
[judge]
model = "m"
[judge.roles.other]
base_url = "https://other.example/v1"
api_key_env = "OTHER_KEY"
""")
    env = {"OPENAI_API_KEY": KEY, "OTHER_KEY": "sk-other"}
    s = resolve({}, env, cwd=tmp_path)  # an untrusted project file: api_key_env is ignored (test_config_trust.py)
    assert s.for_role("other").api_key is None and s.default.api_key.reveal() == KEY
    trust_file(tmp_path / "gsr.toml", (tmp_path / "gsr.toml").read_bytes(), config_dir())
    s = resolve({}, env, cwd=tmp_path)
    assert s.for_role("other").api_key.reveal() == "sk-other"
    assert s.default.api_key.reveal() == KEY


# --------------------------------------------------------------------------- errors


def test_no_model_anywhere(tmp_path):
    with pytest.raises(ConfigError) as info:
        resolve({}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    assert str(info.value) == NO_MODEL_MESSAGE
    assert NO_MODEL_MESSAGE == (
        "no judge model configured: pass --model, set GSR_MODEL, or set [judge] model in gsr.toml"
    )


def test_missing_key_only_allowed_with_base_url(tmp_path):
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve({"model": "m"}, {}, cwd=tmp_path)
    s = resolve({"model": "m", "base_url": "http://localhost:8000/v1"}, {}, cwd=tmp_path)
    assert s.default.api_key is None
    write(tmp_path, '[judge]\nmodel = "m"\nbase_url = "http://localhost:8000/v1"\n[judge.roles.cloud]\nmodel = "x"\n')
    assert resolve({}, {}, cwd=tmp_path).for_role("cloud").api_key is None  # same (local) base_url


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('[judge\nmodel = "m"\n', "invalid TOML"),
        ('[judge]\nmodel = 3\n', "model must be a string"),
        ('[judge]\nmodel = "m"\ntemperature = "hot"\n', "temperature must be a number"),
        ('[judge]\nmodel = "m"\nconcurrency = 0\n', "concurrency must be an integer >= 1"),
        ('[judge]\nmodel = "m"\nstructured = "yes"\n', "structured must be one of"),
        ('[judge]\nmodel = "m"\nbase_url = "localhost:8000/v1"\n', "base_url must be an http"),
        ('[judge]\nmodel = "m"\ntemprature = 0.1\n', "unknown setting 'temprature'"),
        ('[judge]\nmodel = "m"\napi_key = "sk-x"\n', "do not belong"),
        ('judge = 3\n', "must be a table"),
        ('[judge]\nmodel = "m"\n[judge.roles]\nstrong = 1\n', "[judge.roles.strong] must be a table"),
    ],
)
def test_malformed_config_file(tmp_path, text, fragment):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        resolve({}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    assert str(path) in str(info.value)
    assert fragment in str(info.value)
    assert info.value.path == path
    assert "sk-x" not in str(info.value)


def test_bad_env_and_flag_values_name_their_source(tmp_path):
    with pytest.raises(ConfigError, match="GSR_TEMPERATURE"):
        resolve({"model": "m"}, {"OPENAI_API_KEY": KEY, "GSR_TEMPERATURE": "warm"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="GSR_ROLE_X_BASE_URL"):
        resolve({"model": "m"}, {"OPENAI_API_KEY": KEY, "GSR_ROLE_X_BASE_URL": "nope"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="--concurrency"):
        resolve({"model": "m", "concurrency": -1}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="unknown judge setting 'modle'"):
        resolve({"modle": "m"}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    with pytest.raises(ConfigError):
        JudgeConfig(model="m", max_retries=-1)


# --------------------------------------------------------------------------- secrets


def test_secret_never_shows(tmp_path):
    s = Secret(KEY)
    assert str(s) == repr(s) == f"{s}" == "***"
    assert s.reveal() == KEY and s == Secret(KEY) and bool(s)
    assert pickle.loads(pickle.dumps(s)) == s
    write(tmp_path, '[judge]\nmodel = "m"\n[judge.roles.strong]\nmodel = "big"\n')
    settings = resolve({}, {"OPENAI_API_KEY": KEY}, cwd=tmp_path)
    for text in (str(settings), repr(settings), repr(settings.default), str(settings.for_role("strong"))):
        assert KEY not in text
    with pytest.raises(AttributeError):
        s._value = "x"
