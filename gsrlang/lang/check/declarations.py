"""Names: collect the header, tasks, criteria, nodes and sinks; report duplicates and misplaced declarations."""

from __future__ import annotations

from gsrlang.lang.check.context import Context, Decl, declared_here
from gsrlang.lang.syntax import ast

# the help of GSR107 where a file checked on its own is headed `fragment` yet declares a task or a sink
_AS_PROGRAM = 'a file with a task and a sink is a program: head it `rubric NAME "..."`'


def collect(ctx: Context, modules: list[tuple[ast.Module, str | None]]) -> None:
    """`modules` is the main module (path None) followed by the imported fragments."""
    for module, path in modules:
        is_main = path is None
        # an imported file is a fragment (imports.py insists); so is a main file headed `fragment NAME`,
        # wherever in the file its header stands
        fragment = not is_main or any(isinstance(i, ast.Header) and i.kind == "fragment" for i in module.items)
        for item in module.items:
            if isinstance(item, ast.Header):
                if not is_main:
                    continue
                if ctx.header is not None:
                    ctx.error("GSR106", "a file has one `rubric` header", item.span, "second header",
                              secondary=[declared_here(ctx.header.span, None, "first header here")])
                else:
                    ctx.header = item
            elif isinstance(item, (ast.CriterionDecl, ast.NodeDecl)):
                name = item.name.name
                if (previous := ctx.decls.get(name)) is not None:
                    ctx.error("GSR103", f"`{name}` is declared twice", item.name.span, "declared again here",
                              path=path, secondary=[declared_here(previous.item.name.span, previous.path,
                                                                  "first declared here")],
                              help="names are unique in a program (imports included): rename one of them")
                    continue
                ctx.decls[name] = Decl(item, path)
            elif fragment and isinstance(item, (ast.SinkDecl, ast.TaskDecl)):
                what = "sink" if isinstance(item, ast.SinkDecl) else "task"
                ctx.error("GSR107", f"a fragment cannot declare a {what}", item.span, path=path,
                          help=_AS_PROGRAM if is_main else f"the importing rubric declares the {what}")
            elif isinstance(item, ast.SinkDecl):
                ctx.sinks.append(item)
            elif isinstance(item, ast.TaskDecl):
                mode = item.mode.name
                if mode in ctx.tasks:
                    ctx.error("GSR506", f"`task {mode}` is declared twice", item.mode.span, "declared again here",
                              secondary=[declared_here(ctx.tasks[mode].span, None, "first declared here")])
                    continue
                ctx.tasks[mode] = item
            elif isinstance(item, (ast.OpDecl, ast.RuleDecl, ast.JudgeDecl, ast.EnumDecl)):
                what = {"OpDecl": "operator signatures", "RuleDecl": "rule signatures",
                        "JudgeDecl": "judge kind signatures", "EnumDecl": "enum declarations"}[type(item).__name__]
                ctx.error("GSR107", f"{what} belong in the stdlib, not in a rubric", item.span, path=path,
                          help="declare the operator in stdlib/operators.gsr and implement it in "
                               "gsrlang/semantics/kernels.py")
