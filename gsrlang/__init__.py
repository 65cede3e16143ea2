"""gsrlang: compile rubrics into typed, acyclic evaluation graphs, check them, run them, replay them.

The Python API (docs/python.md) is loaded on first use, so `import gsrlang` stays light::

    import gsrlang
    program = gsrlang.load("rubric.gsr")
    result = program.score(input="...", response="...")
"""

__version__ = "0.1.0"

_API = {"CompileError", "GsrError", "InputError", "JudgeError", "Judges", "Program", "ProgramError", "Result",
        "compile_rubric", "load", "loads"}
__all__ = sorted(_API | {"RewardFunction", "reward_function", "__version__"})


def __getattr__(name: str):
    """PEP 562: the API's names load their module on first use. By name, through importlib: the package
    sits above every layer for this (its modules import only `__version__` from it), not in a cycle."""
    import importlib

    if name in _API:
        return getattr(importlib.import_module("gsrlang.api"), name)
    if name in ("RewardFunction", "reward_function"):
        return getattr(importlib.import_module("gsrlang.reward"), name)
    raise AttributeError(f"module 'gsrlang' has no attribute {name!r}")
