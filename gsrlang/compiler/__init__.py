"""The rubric compiler: natural-language rubric -> checked `.gsr` program, repaired from diagnostics.

    from gsrlang.compiler import CompileSpec, Pointwise, CompilerClient, compile_rubric

    spec = CompileSpec(rubric=text, contract=Pointwise(scale=(1, 5), quantize="round"))
    async with CompilerClient(config) as client:
        result = await compile_rubric(spec, client, repairs=3)

The spec is S = (task input, rubric, optional reference, task contract) and nothing
else; see `spec.py`, and docs/compiling.md for the prompt, the repair loop, the cache,
batch mode and the index of per-item programs.
"""

from gsrlang.compiler.spec import CompileSpec, Pairwise, Pointwise, SpecError, parse_scale

__all__ = ["CompileCache", "CompileFailure", "CompileSpec", "CompileSuccess", "CompilerClient", "Pairwise", "Pointwise",
           "ProgramIndex", "SpecError", "build_prompt", "compile_rubric", "parse_scale"]

# synthesize imports the checker and the openai-backed client: load them on first use
_LAZY = {
    "CompileFailure": "synthesize", "CompileSuccess": "synthesize", "CompilerClient": "synthesize",
    "compile_rubric": "synthesize", "build_prompt": "prompt", "CompileCache": "cache", "ProgramIndex": "batch",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"gsrlang.compiler.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
