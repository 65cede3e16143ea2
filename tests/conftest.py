"""Shared test fixtures and paths."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# tests import helpers such as `fakeserver` by module name
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session", autouse=True)
def _session_config_home(tmp_path_factory):
    """The same for what runs before a test's own fixtures (a module's or a session's fixtures, which run gsr
    too: a trusted judgment cache they made was written into the real trusted.json)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config-session")))
        yield


@pytest.fixture(autouse=True)
def _user_config_home(tmp_path_factory, monkeypatch):
    """The user's gsr configuration (config.toml, trusted.json) lives in an empty folder of each test's own,
    never in the real ~/.config/gsr."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))


@pytest.fixture
def model_env(monkeypatch, tmp_path):
    """No GSR_ or OPENAI_ variable from the caller's shell reaches the test, and it runs in its own folder."""
    for var in list(os.environ):
        if var.startswith(("GSR_", "OPENAI_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
