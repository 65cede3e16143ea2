"""Judge model configuration: which model, where, how, and per named role.

A :class:`JudgeConfig` says how to call one model.  :class:`JudgeSettings`
holds the default config plus named *roles* (a program can bind criteria to a
role, e.g. ``llm(role: "strong")``).  :func:`resolve_settings` builds the
settings from four layers.

Precedence (highest first)
--------------------------
1. **flags** -- a dict from the command line (or a caller): any
   :class:`JudgeConfig` field name (``model``, ``base_url``, ``api_key``,
   ``temperature``, ``max_tokens``, ``timeout_s``, ``max_retries``,
   ``concurrency``, ``seed``, ``structured``, ``max_answer_bytes``, ``reasoning_effort``, ``rpm``,
   ``tpm``) and ``roles``, a dict
   ``{role: {field: value}}``.  ``None`` values mean "not given".
2. **environment** -- ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``GSR_MODEL``,
   ``GSR_TEMPERATURE``, ``GSR_CONCURRENCY`` (and also ``GSR_MAX_TOKENS``,
   ``GSR_TIMEOUT_S``, ``GSR_MAX_RETRIES``, ``GSR_SEED``, ``GSR_STRUCTURED``,
   ``GSR_MAX_ANSWER_BYTES``, ``GSR_REASONING_EFFORT``, ``GSR_RPM``, ``GSR_TPM``);
   per role ``GSR_ROLE_<NAME>_MODEL``, ``GSR_ROLE_<NAME>_BASE_URL`` (and
   ``GSR_ROLE_<NAME>_API_KEY``).  ``<NAME>`` is the role name upper-cased; it
   maps to the role of that name in any case, or to the lower-cased name.
   Empty variables count as unset.
3. **project file** -- ``gsr.toml`` in the working directory or the nearest
   parent (or an explicit ``config_path``), tables ``[judge]`` and
   ``[judge.roles.NAME]`` with the same field names except ``api_key``:
   keys do not belong in project files, so the file may instead name the
   environment variable that holds the key, ``api_key_env = "MY_KEY_VAR"``.
   Other top-level tables are ignored (they belong to other tools).
   A project file is not trusted with credentials (see :mod:`.trust`): a
   ``base_url`` it sets to a host the user has not approved gets no key, and
   its ``api_key_env`` is ignored, unless the user ran ``gsr trust`` on it.
4. **user file** -- ``$XDG_CONFIG_HOME/gsr/config.toml`` (``~/.config/gsr/``):
   the same tables, ``api_key_env`` included, plus ``[trust] hosts``.
5. **defaults** -- ``temperature=0.0``, ``max_tokens=None``, ``timeout_s=60``,
   ``max_retries=5``, ``concurrency=8``, ``seed=None``, ``structured="auto"``,
   ``max_answer_bytes=4194304`` (4 MiB), ``reasoning_effort=None`` (not sent: the model's own
   default), ``rpm=None``, ``tpm=None``, ``base_url=None`` (the OpenAI API).  There is no default model.

Roles
-----
A role starts from the fully resolved default config and overrides the fields
it sets; a role-specific value (from any layer) beats a default-level value
(from any layer), and among role-specific values the layer order above holds.
One exception protects the key: a role that points at a *different* base_url
than the default does not inherit the default's API key (that key belongs to
another server); it uses its own (``roles.NAME.api_key`` flag,
``GSR_ROLE_<NAME>_API_KEY`` or ``api_key_env``) or none.

Keys
----
The key is wrapped in :class:`Secret`, whose ``str``/``repr`` is ``***``; call
``.reveal()`` only where the key is handed to the HTTP client.  A missing key
is fine when a base_url is set (local servers need none); for the OpenAI API
itself a missing key is a :class:`ConfigError`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import attrs

from gsrlang.lang.types import is_finite_number

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["LLMError", "ConfigError", "Secret", "JudgeConfig", "JudgeSettings", "resolve_settings", "find_config_file",
           "STRUCTURED_MODES", "CONFIG_FILE_NAME"]

CONFIG_FILE_NAME = "gsr.toml"
STRUCTURED_MODES = ("auto", "json_schema", "json_object", "grammar", "off")
REASONING_EFFORTS = ("minimal", "low", "medium", "high")  # OpenAI's `reasoning_effort` values
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""4 MiB: a chat completion of 1,000 tokens with 20 log-probability alternatives each is about 1 MB of JSON."""

NO_MODEL_MESSAGE = "no judge model configured: pass --model, set GSR_MODEL, or set [judge] model in gsr.toml"


class LLMError(Exception):
    """Base class of every error raised by :mod:`gsrlang.judges.llm`; ``path``: the file at fault, if one is."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class ConfigError(LLMError):
    """Invalid or missing judge configuration."""


# --------------------------------------------------------------------------- Secret


class Secret:
    """An API key that never shows itself: ``str``, ``repr`` and ``format`` give ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if isinstance(value, Secret):
            value = value.reveal()
        if not isinstance(value, str):
            raise TypeError("Secret wraps a str")
        object.__setattr__(self, "_value", value)

    def reveal(self) -> str:
        """The key itself; only for handing to the HTTP client."""
        return self._value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Secret is immutable")

    def __repr__(self) -> str:
        return "***"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> Any:  # picklable (for worker processes) without exposing it in repr
        return (Secret, (self._value,))


def _to_secret(value: Any) -> Secret | None:
    if value is None or isinstance(value, Secret):
        return value
    if isinstance(value, str):
        return Secret(value) if value else None
    raise ConfigError(f"api_key must be a string, not {type(value).__name__}")


def _norm_base_url(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"base_url must be a string, not {type(value).__name__}")
    return value.strip().rstrip("/") or None


def origin_of(url: str) -> str:
    """scheme://host[:port] -- no userinfo, path or query (they may hold secrets)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}"
    except ValueError:
        return "<invalid url>"


# --------------------------------------------------------------------------- JudgeConfig


@attrs.frozen(kw_only=True)
class JudgeConfig:
    """How to call one judge model (any OpenAI-compatible server)."""

    model: str
    base_url: str | None = attrs.field(default=None, converter=_norm_base_url)
    api_key: Secret | None = attrs.field(default=None, converter=_to_secret)
    temperature: float = 0.0
    max_tokens: int | None = None
    timeout_s: float = 60.0
    max_retries: int = 5
    concurrency: int = 8
    seed: int | None = None
    structured: str = "auto"
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES  # the most bytes of one HTTP answer read (transport.py)
    reasoning_effort: str | None = None  # sent as `reasoning_effort` when set (reasoning models)
    rpm: int | None = None  # at most this many requests a minute (aiolimiter)
    tpm: int | None = None  # at most this many tokens a minute (prompt estimate + answer allowance)

    def __attrs_post_init__(self) -> None:
        for name, value in attrs.asdict(self, recurse=False).items():
            if name != "api_key":
                _check_value(name, value, "JudgeConfig")

    @property
    def effective_base_url(self) -> str:
        """``base_url``, or the OpenAI API's URL when unset."""
        return self.base_url or OPENAI_DEFAULT_BASE_URL

    @property
    def origin(self) -> str:
        """The server as scheme://host[:port] (see :func:`origin_of`)."""
        return origin_of(self.effective_base_url)

    def replace(self, **changes: Any) -> "JudgeConfig":
        return attrs.evolve(self, **changes)


FIELDS: tuple[str, ...] = tuple(a.name for a in attrs.fields(JudgeConfig))
DEFAULTS: dict[str, Any] = {a.name: a.default for a in attrs.fields(JudgeConfig) if a.default is not attrs.NOTHING}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _one_of(choices: tuple[str, ...]) -> str:
    return "one of " + ", ".join(repr(m) for m in choices)


def _optional(test):
    return lambda v: v is None or test(v)


# field: (whether a value is valid, what it must be)
_CHECKS: dict[str, tuple[Any, str]] = {
    "model": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty model name"),
    "base_url": (_optional(lambda v: re.match(r"^https?://[^/\s]+", v)),
                 "an http:// or https:// URL (e.g. http://localhost:8000/v1)"),
    "temperature": (lambda v: is_finite_number(v) and 0 <= v <= 2, "a number between 0 and 2"),
    "max_tokens": (_optional(lambda v: _is_int(v) and v >= 1), "a positive integer"),
    "timeout_s": (lambda v: is_finite_number(v) and v > 0, "a positive number of seconds"),
    "max_retries": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "concurrency": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "seed": (_optional(_is_int), "an integer"),
    "max_answer_bytes": (lambda v: _is_int(v) and v >= 1024, "a whole number of bytes, at least 1024"),
    "structured": (lambda v: v in STRUCTURED_MODES, _one_of(STRUCTURED_MODES)),
    "rpm": (_optional(lambda v: _is_int(v) and v >= 1), "a positive integer (a rate per minute)"),
    "reasoning_effort": (_optional(lambda v: v in REASONING_EFFORTS), _one_of(REASONING_EFFORTS)),
}
_CHECKS["tpm"] = _CHECKS["rpm"]


def _check_value(name: str, value: Any, where: str) -> None:
    """Validate an already-typed field value; raise ConfigError naming ``where``."""
    valid, what = _CHECKS.get(name, (lambda v: True, ""))
    if not valid(value):
        raise ConfigError(f"{where}: {name} must be {what}, got {value!r}")  # never the key: it has no check


# --------------------------------------------------------------------------- JudgeSettings


@attrs.frozen(kw_only=True)
class JudgeSettings:
    """The default judge config plus fully resolved named roles."""

    default: JudgeConfig
    roles: Mapping[str, JudgeConfig] = attrs.field(factory=dict)
    config_file: Path | None = None
    notices: tuple[str, ...] = ()  # warnings about where keys go (printed once to standard error)
    # what chose each judge's server: {"default" or role: "--base-url", a variable, or a config file's path}
    server_sources: Mapping[str, str] = attrs.field(factory=dict, repr=False, eq=False)

    def for_role(self, name: str | None = None) -> JudgeConfig:
        """The config for role ``name``; ``None`` (or ``"default"`` when no role
        has that name) gives the default config."""
        if name in self.roles:
            return self.roles[name]
        if name in (None, "default"):
            return self.default
        if self.roles:
            known = ", ".join(repr(r) for r in sorted(self.roles))
            raise ConfigError(f"unknown judge role {name!r}; known roles: {known}")
        raise ConfigError(f"unknown judge role {name!r}; no roles are configured (add [judge.roles.{name}] to "
                          f"gsr.toml or set GSR_ROLE_{_env_name(name)}_MODEL)")

    @classmethod
    def build(cls, default: JudgeConfig, roles: Mapping[str, Mapping[str, Any]] | None = None, *,
              config_file: Path | None = None) -> "JudgeSettings":
        """Settings from a default config and per-role *overrides* (partial
        field dicts) that inherit the rest from ``default``."""
        resolved = {name: _derive_role(default, name, dict(over)) for name, over in (roles or {}).items()}
        return cls(default=default, roles=resolved, config_file=config_file)


def _derive_role(default: JudgeConfig, name: str, over: dict[str, Any]) -> JudgeConfig:
    if unknown := set(over) - set(FIELDS):
        raise ConfigError(f"role {name!r}: unknown setting(s) {', '.join(sorted(unknown))}")
    values = attrs.asdict(default, recurse=False)
    if "base_url" in over and "api_key" not in over and _norm_base_url(over["base_url"]) != default.base_url:
        values["api_key"] = None  # never send the default server's key elsewhere
    values.update(over)
    try:
        return JudgeConfig(**values)
    except ConfigError as exc:
        raise ConfigError(f"role {name!r}: {exc}") from None


def _env_name(role: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", role).upper()


# --------------------------------------------------------------------------- resolution

# variable -> setting: the OpenAI SDK's own two, and GSR_<SETTING> for every other setting
_ENV_DEFAULT = {"OPENAI_API_KEY": "api_key", "OPENAI_BASE_URL": "base_url",
                **{f"GSR_{name.upper()}": name for name in FIELDS if name not in ("api_key", "base_url")}}
_ENV_ROLE = re.compile(r"^GSR_ROLE_(?P<name>[A-Za-z0-9_]+?)_(?P<field>MODEL|BASE_URL|API_KEY)$")

_INT_FIELDS = {"max_tokens", "max_retries", "concurrency", "seed", "max_answer_bytes", "rpm", "tpm"}
_FLOAT_FIELDS = {"temperature", "timeout_s"}
_STR_FIELDS = {"model", "base_url", "structured", "reasoning_effort"}


def _coerce(name: str, value: Any, where: str) -> Any:
    """Turn a layer's raw value into the field's type (strings are parsed)."""
    if name == "api_key":
        if isinstance(value, (str, Secret)):
            return _to_secret(value)
        raise ConfigError(f"{where}: api_key must be a string")
    if isinstance(value, str) and name in _INT_FIELDS | _FLOAT_FIELDS:
        text = value.strip()
        try:
            value = int(text) if name in _INT_FIELDS else float(text)
        except ValueError:
            kind = "an integer" if name in _INT_FIELDS else "a number"
            raise ConfigError(f"{where}: {name} must be {kind}, got {value!r}") from None
    elif name in _FLOAT_FIELDS and _is_int(value):
        value = float(value)
    elif name in _STR_FIELDS and isinstance(value, str):
        value = value.strip()
        if name == "base_url":
            value = _norm_base_url(value)
    _check_value(name, value, where)
    return value


def _typed(name: str, value: Any, where: str) -> Any:
    """Like _coerce, but for typed sources (TOML): no parsing of strings into numbers."""
    if name in _INT_FIELDS and not _is_int(value):
        raise ConfigError(f"{where}: {name} must be an integer, got {value!r}")
    if name in _FLOAT_FIELDS and not is_finite_number(value):
        raise ConfigError(f"{where}: {name} must be a number, got {value!r}")
    if name in _STR_FIELDS and not isinstance(value, str):
        raise ConfigError(f"{where}: {name} must be a string, got {value!r}")
    return _coerce(name, value, where)


def find_config_file(cwd: Path, skipped: list[tuple[Path, int]] | None = None) -> Path | None:
    """``gsr.toml`` in ``cwd`` or its nearest parent that has one, passing over (into `skipped`, with the owner's
    uid) the files owned by another user: on a shared machine a ``/tmp/gsr.toml`` or ``/home/gsr.toml`` is not the
    user's word on where their judges and key go."""
    from gsrlang.judges.llm.trust import other_owner

    cwd = Path(cwd).resolve()
    for directory in (cwd, *cwd.parents):
        if (candidate := directory / CONFIG_FILE_NAME).is_file():
            if (uid := other_owner(candidate)) is None:
                return candidate
            if skipped is not None:
                skipped.append((candidate, uid))
    return None


_Layer = tuple[dict[str, Any], dict[str, dict[str, Any]]]


@attrs.define
class _FileLayer:
    """One TOML file's settings, and what the trust boundary needs to know about it."""

    path: Path | None = None
    default: dict[str, Any] = attrs.field(factory=dict)
    roles: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    trusted: bool = False  # the user's own file, or a project file trusted with `gsr trust`
    hosts: list[str] = attrs.field(factory=list)  # [trust] hosts (the user's file only)
    notices: list[str] = attrs.field(factory=list)


def _read_toml(path: Path) -> tuple[bytes, dict]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}", path=path) from None
    try:
        return raw, tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: config file is not UTF-8 text ({exc.reason})", path=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}", path=path) from None


def _project_layer(path: Path, env: Mapping[str, str], user_dir: Path) -> _FileLayer:
    from gsrlang.judges.llm.trust import is_trusted

    raw, doc = _read_toml(path)
    return _judge_tables(doc, env, _FileLayer(path, trusted=is_trusted(path, raw, user_dir)), user_dir)


def _user_layer(user_dir: Path, env: Mapping[str, str]) -> _FileLayer:
    from gsrlang.judges.llm.trust import USER_CONFIG

    path = user_dir / USER_CONFIG
    if not path.is_file():
        return _FileLayer()
    _, doc = _read_toml(path)
    layer = _judge_tables(doc, env, _FileLayer(path, trusted=True), user_dir)
    trust = doc.get("trust", {})
    hosts = trust.get("hosts", []) if isinstance(trust, dict) else None
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise ConfigError(f"{path}: [trust] hosts must be a list of host names (\"api.example.com\", "
                          f"\"gpu-box:8000\")", path=path)
    layer.hosts = hosts
    return layer


def _judge_tables(doc: dict, env: Mapping[str, str], layer: _FileLayer, user_dir: Path) -> _FileLayer:
    """`layer` with the settings of its file's `[judge]` and `[judge.roles.NAME]` tables (`doc`)."""
    path = layer.path
    if (judge := doc.get("judge")) is None:
        return layer
    if not isinstance(judge, dict):
        raise ConfigError(f"{path}: 'judge' must be a table ([judge])", path=path)
    allowed = (set(FIELDS) - {"api_key"}) | {"api_key_env"}

    def table(tbl: dict[str, Any], where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in tbl.items():
            if key == "api_key":
                raise ConfigError(f"{path}: {where}: API keys do not belong in {CONFIG_FILE_NAME} (it is usually "
                                  "committed); set OPENAI_API_KEY, or name the variable holding the key with "
                                  "api_key_env = \"VAR\"", path=path)
            if key not in allowed:
                raise ConfigError(f"{path}: {where}: unknown setting {key!r}; known settings: "
                                  f"{', '.join(sorted(allowed))}", path=path)
            if key == "api_key_env":
                if not isinstance(value, str) or not value:
                    raise ConfigError(f"{path}: {where}: api_key_env must be an environment variable name", path=path)
                if not layer.trusted:
                    layer.notices.append(
                        f"{path}: {where} api_key_env = \"{value}\" is ignored: a project file may not choose which "
                        f"environment variable is sent as a key. If you trust this project, run `gsr trust {path}`; "
                        f"or set api_key_env in {user_dir / 'config.toml'}")
                    continue
                if secret := env.get(value):
                    out["api_key"] = Secret(secret)
                continue
            try:
                out[key] = _typed(key, value, where)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}", path=path) from None
        return out

    roles_tbl = judge.get("roles", {})
    if not isinstance(roles_tbl, dict):
        raise ConfigError(f"{path}: [judge] roles must be a table of tables ([judge.roles.NAME])", path=path)
    layer.default = table({k: v for k, v in judge.items() if k != "roles"}, "[judge]")
    for name, tbl in roles_tbl.items():
        if not isinstance(tbl, dict):
            raise ConfigError(f"{path}: [judge.roles.{name}] must be a table, got {tbl!r}", path=path)
        layer.roles[name] = table(tbl, f"[judge.roles.{name}]")
    return layer


def _env_layer(env: Mapping[str, str], known_roles: Iterable[str]) -> _Layer:
    default = {name: _coerce(name, env[var], f"environment variable {var}") for var, name in _ENV_DEFAULT.items()
               if env.get(var)}
    by_upper = {_env_name(r): r for r in known_roles}
    roles: dict[str, dict[str, Any]] = {}
    for var in sorted(env):
        m = _ENV_ROLE.match(var)
        value = env.get(var)
        if not m or not value:
            continue
        role = by_upper.get(m["name"].upper(), m["name"].lower())
        name = m["field"].lower()
        roles.setdefault(role, {})[name] = _coerce(name, value, f"environment variable {var}")
    return default, roles


def _flags_layer(flags: Mapping[str, Any]) -> _Layer:
    default: dict[str, Any] = {}
    roles: dict[str, dict[str, Any]] = {}
    for key, value in flags.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if key == "roles":
            if not isinstance(value, Mapping):
                raise ConfigError("flags: roles must be a mapping {role: {setting: value}}")
            for role, over in value.items():
                if not isinstance(over, Mapping):
                    raise ConfigError(f"flags: roles[{role!r}] must be a mapping of settings")
                for k, v in over.items():
                    if k not in FIELDS:
                        raise ConfigError(f"flags: roles[{role!r}]: unknown setting {k!r}")
                    if v is not None and not (isinstance(v, str) and not v.strip()):
                        roles.setdefault(role, {})[k] = _coerce(k, v, f"flag roles.{role}.{k}")
            continue
        if key not in FIELDS:
            raise ConfigError(f"flags: unknown judge setting {key!r}; known settings: {', '.join(FIELDS + ('roles',))}")
        default[key] = _coerce(key, value, f"flag --{key.replace('_', '-')}")
    return default, roles


def _check_key(cfg: JudgeConfig, who: str) -> None:
    if cfg.api_key is None and cfg.base_url is None:
        raise ConfigError(f"{who}: no API key for the OpenAI API: set OPENAI_API_KEY, or set a base_url (--base-url, "
                          "OPENAI_BASE_URL or [judge] base_url) to use a local OpenAI-compatible server, which needs "
                          "no key")


def resolve_settings(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                     config_path: Path | None = None, cwd: Path | None = None,
                     user_dir: Path | None = None) -> JudgeSettings:
    """Resolve judge settings: flags > environment > gsr.toml > user file > defaults (see module doc).

    `user_dir`: the user's configuration folder (default ``$XDG_CONFIG_HOME/gsr``)."""
    from gsrlang.judges.llm.trust import config_dir

    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    user_dir = config_dir() if user_dir is None else Path(user_dir)
    if config_path is not None:
        path: Path | None = Path(config_path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found", path=path)
    else:
        foreign: list[tuple[Path, int]] = []
        path = find_config_file(cwd, foreign)

    user = _user_layer(user_dir, env)
    project = _project_layer(path, env, user_dir) if path is not None else _FileLayer()
    flag_default, flag_roles = _flags_layer(flags or {})
    env_default, env_roles = _env_layer(env, [*user.roles, *project.roles, *flag_roles])

    merged = {**DEFAULTS, **user.default, **project.default, **env_default, **flag_default}
    if not merged.get("model"):
        raise ConfigError(NO_MODEL_MESSAGE)
    notices = user.notices + project.notices
    if config_path is None:
        notices += [f"{p} is ignored: it belongs to another user (uid {uid}), so it could send your judges and key "
                    f"to a server of theirs; pass --judge-config {p} to use it" for p, uid in foreign]
    default_from_project = _set_by_project("base_url", project.default, env_default, flag_default)
    default = JudgeConfig(**merged)
    if default_from_project:
        default = _keep_key_home(default, "the default judge", project, user, notices)
    _check_key(default, "default judge")

    role_overrides: dict[str, dict[str, Any]] = {}
    role_layers = (user.roles, project.roles, env_roles, flag_roles)  # lowest first
    for layer in role_layers:
        for role, over in layer.items():
            role_overrides.setdefault(role, {}).update(over)
    settings = JudgeSettings.build(default, role_overrides, config_file=path)
    roles = dict(settings.roles)
    for name, cfg in roles.items():
        # the highest layer that sets the role's base_url; None: it inherits the default's
        chooser = next((layer for layer in reversed(role_layers) if "base_url" in layer.get(name, {})), None)
        if (default_from_project if chooser is None else chooser is project.roles):
            roles[name] = _keep_key_home(cfg, f"judge role {name!r}", project, user, notices)
        _check_key(roles[name], f"judge role {name!r}")
    for who, cfg in [("the default judge", default), *((f"judge role {n!r}", c) for n, c in roles.items())]:
        _warn_plain_http(cfg, who, notices)
    _announce(notices)
    sources = {"default": _server_source(flag_default, env_default, project, user, None)}
    for name in roles:
        sources[name] = _server_source(flag_roles.get(name, {}), env_roles.get(name, {}), project, user, name) \
            or sources["default"]
    sources["default"] = sources["default"] or "the default (the OpenAI API)"
    return attrs.evolve(settings, roles=roles, notices=tuple(dict.fromkeys(notices)), server_sources=sources)


def _server_source(flag: Mapping, env: Mapping, project: _FileLayer, user: _FileLayer, role: str | None) -> str | None:
    """What chose a judge's server (its base_url): a flag, a variable, a file; None when nothing did."""
    if "base_url" in flag:
        return "--base-url" if role is None else "--role"
    if "base_url" in env:
        return "OPENAI_BASE_URL" if role is None else f"GSR_ROLE_{_env_name(role)}_BASE_URL"
    for layer in (project, user):
        if "base_url" in (layer.default if role is None else layer.roles.get(role, {})):
            return str(layer.path)
    return None


def _set_by_project(name: str, project: Mapping, *higher: Mapping) -> bool:
    """Whether the project file's value of `name` is the one in force (no higher layer sets it)."""
    return name in project and not any(name in layer for layer in higher)


def _keep_key_home(cfg: JudgeConfig, who: str, project: _FileLayer, user: _FileLayer,
                   notices: list[str]) -> JudgeConfig:
    """`cfg` without its key when a project file chose its host and the user has not approved that host."""
    from gsrlang.judges.llm.trust import approved_host, host_of

    if cfg.api_key is None or cfg.base_url is None or project.trusted or approved_host(cfg.base_url, user.hosts):
        return cfg
    host, port = host_of(cfg.base_url)
    shown = f"{host}:{port}" if port else host
    notices.append(
        f"{project.path} sends {who} to {cfg.base_url}, a host you have not approved, so no API key is sent "
        f"there. If you trust this project, run `gsr trust {project.path}`, or add \"{shown}\" to hosts under "
        f"[trust] in {user.path or 'your gsr config.toml'}; or pass --base-url yourself")
    return cfg.replace(api_key=None)


def _warn_plain_http(cfg: JudgeConfig, who: str, notices: list[str]) -> None:
    from gsrlang.judges.llm.trust import host_of, is_loopback

    if cfg.api_key is not None and (cfg.base_url or "").lower().startswith("http://"):
        host, _ = host_of(cfg.base_url)
        if not is_loopback(host):
            notices.append(f"the API key of {who} goes over plain http to {host}: anyone on the network path "
                           "can read it; use https (or a loopback address)")


_ANNOUNCED: set[str] = set()


def _announce(notices: Iterable[str]) -> None:
    """Print each notice to standard error once per process (settings are resolved more than once per run)."""
    import sys

    for notice in notices:
        if notice not in _ANNOUNCED:
            _ANNOUNCED.add(notice)
            print(f"gsr: warning: {notice}", file=sys.stderr)
