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
    if name in _API:
        from gsrlang import api

        return getattr(api, name)
    if name in ("RewardFunction", "reward_function"):
        from gsrlang import reward

        return getattr(reward, name)
    raise AttributeError(f"module 'gsrlang' has no attribute {name!r}")
