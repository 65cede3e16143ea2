"""Locate the language's data files: the grammar and the stdlib.

An installed wheel carries them as gsrlang/_data/{grammar,stdlib}; a source checkout
(or an editable install) reads them from the repository's top-level folders.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]


@cache
def data_dir(name: str) -> Path:
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"gsrlang data folder {name!r} is missing from the installation")


def grammar_path() -> Path:
    return data_dir("grammar") / "gsr.lark"


def stdlib_dir() -> Path:
    return data_dir("stdlib")
