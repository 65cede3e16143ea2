"""The sink and the readout: one sink of type Score, read by the declared tasks; every node reaches it."""

from __future__ import annotations

from gsrlang.lang.check.context import Context, declared_here, suggestion
from gsrlang.lang.check.cycles import edges_of
from gsrlang.lang.check.tunable import threshold_tunables
from gsrlang.lang.diagnostics import Fix
from gsrlang.lang.program import PairwiseReadout, PointwiseReadout, Readout
from gsrlang.lang.span import Span
from gsrlang.lang.syntax import ast
from gsrlang.lang.tasks import MODES, ON_TIE, QUANTIZE, SETTINGS, keys_of

POINTWISE_KEYS = keys_of("pointwise")
PAIRWISE_KEYS = keys_of("pairwise")
QUANTIZE_NAMES = tuple(q for q in QUANTIZE if q != "thresholds")  # written as a bare name


def check_sink_count(ctx: Context) -> None:
    if not ctx.sinks:
        end = ctx.file_end
        nodes = [n for n, d in ctx.decls.items() if isinstance(d.item, ast.NodeDecl) and d.path is None]
        example = f"`sink {nodes[-1]}`" if nodes else "e.g. `sink mean(items: [...])`"
        ctx.error("GSR501", "the program has no sink", Span(end, end), "add `sink NAME` here",
                  help=f"declare which node's score the readout reads: {example}")
    for extra in ctx.sinks[1:]:
        ctx.error("GSR502", "a program has exactly one sink", extra.span, "second sink",
                  secondary=[declared_here(ctx.sinks[0].span, None, "first sink here")],
                  help="combine the candidates into one node (e.g. with `min` or a gate) and sink that")


def check_sink_type(ctx: Context) -> None:
    node = ctx.nodes.get(ctx.sink_id)
    t = node.type if node is not None else None
    if t is None:
        return
    span = ctx.sinks[0].value.span
    text = ctx.text_of(span)
    if t.optional:
        fix = (Fix("wrap in `default(..., value: 0)`", span, f"default({text}, value: 0)"),) if text and t.kind == "score" else ()
        what = f"`{ctx.sink_id}`" if node.named else "the sink expression"
        ctx.error("GSR503", f"the sink accepts no abstention, but {what} is `{t}`", span, "may abstain",
                  help="decide what an abstention scores: `sink default(x, value: 0)`", fixes=fix)
        return
    if t.is_unit_score:
        return
    help_, fixes = None, ()
    if t.kind in ("bool", "ordinal"):
        help_ = "wrap it in `normalize(...)`"
        fixes = (Fix("wrap in `normalize(...)`", span, f"normalize({text})", "safe"),) if text else ()
    elif t.kind == "score":
        help_ = f"wrap it in `scale(...)` to map [{t.lo:g}, {t.hi:g}] onto [0, 1]"
        fixes = (Fix("wrap in `scale(...)`", span, f"scale({text})", "safe"),) if text else ()
    elif t.kind == "nominal":
        help_ = "give each label a score with `map(x, to: {...})`"
    ctx.error("GSR503", f"the sink must be a `Score` in [0, 1], found `{t}`", span, f"this is `{t}`",
              help=help_, fixes=fixes)


def check_readout(ctx: Context) -> Readout:
    pointwise = pairwise = None
    if not ctx.tasks:
        end = ctx.file_end
        ctx.error("GSR504", "the program declares no task, so nothing can read its sink", Span(end, end),
                  help="add `task pointwise { scale = 1..5 }` or `task pairwise { epsilon = 0.05 }`")
    for mode, task in ctx.tasks.items():
        settings = {}
        for s in task.settings:
            key = s.key.name
            if key in settings:
                ctx.error("GSR203", f"`{key}` is set twice", s.key.span, "set again here")
                continue
            settings[key] = s
        if mode == "pointwise":
            pointwise = _pointwise(ctx, task, settings)
        elif mode == "pairwise":
            pairwise = _pairwise(ctx, settings)
        else:
            ctx.error("GSR505", f"unknown task `{mode}`", task.mode.span, "not a task",
                      help=suggestion(mode, MODES) or "tasks are " + " and ".join(f"`{m}`" for m in MODES))
    return Readout(pointwise, pairwise)


def _wrong_mode(ctx, key, mode, other, span):
    ctx.error("GSR504", f"`{key}` does not apply to a {mode} readout", span, f"a {other} setting",
              help=f"`{key}` belongs in `task {other} {{ ... }}`" if key in (POINTWISE_KEYS + PAIRWISE_KEYS)
              else f"{mode} settings are {', '.join(POINTWISE_KEYS if mode == 'pointwise' else PAIRWISE_KEYS)}")


def _pointwise(ctx: Context, task: ast.TaskDecl, settings: dict) -> PointwiseReadout | None:
    ok = True
    for key, s in settings.items():
        if key not in POINTWISE_KEYS:
            _wrong_mode(ctx, key, "pointwise", "pairwise", s.key.span)
            ok = False
    scale = settings.get("scale")
    if scale is None:
        ctx.error("GSR505", "a pointwise task needs a `scale`", task.mode.span, "no scale",
                  help="give the native score range, e.g. `scale = 1..5`")
        return None
    if not isinstance(scale.value, ast.Range) or not scale.value.lo.value < scale.value.hi.value:
        ctx.error("GSR505", "`scale` is a range `lo..hi` with lo below hi", scale.value.span, "not a range",
                  help="e.g. `scale = 1..5`")
        return None
    lo, hi = scale.value.lo.value, scale.value.hi.value
    quantize, thresholds, tune, spans = SETTINGS["quantize"].default, (), (), ()
    if "quantize" in settings:
        v = settings["quantize"].value
        if isinstance(v, ast.Ref) and v.name.name in QUANTIZE_NAMES:
            quantize = v.name.name
        elif isinstance(v, ast.Call) and v.op.name == "thresholds":
            quantize = "thresholds"
            nums = [a.value for a in v.args]
            if not all(isinstance(n, ast.Number) and a.name is None for n, a in zip(nums, v.args)):
                ctx.error("GSR507", "`thresholds(...)` takes numbers", v.span, "not numbers",
                          help="e.g. `quantize = thresholds(0.2, 0.4, 0.6, 0.8)` for a 1..5 scale")
                return None
            thresholds = tuple(float(n.value) for n in nums)
            tune = threshold_tunables(v) if any(n.tune is not None for n in nums) else ()
            spans = tuple(n.span for n in nums)
            steps = hi - lo
            if not (isinstance(lo, int) and isinstance(hi, int)):
                ctx.error("GSR507", "`thresholds` needs an integer scale", v.span, "non-integer scale",
                          help="write the scale with integers, e.g. `scale = 1..5`")
                return None
            if len(thresholds) != steps:
                ctx.error("GSR507", f"`thresholds` needs {steps} cut points for the scale {lo}..{hi}, "
                          f"found {len(thresholds)}", v.span, f"{len(thresholds)} cut points",
                          help="one cut point in [0, 1] between each two scores")
                return None
            if any(not 0 <= t <= 1 for t in thresholds) or any(a >= b for a, b in zip(thresholds, thresholds[1:])):
                ctx.error("GSR507", "cut points must increase strictly within [0, 1]", v.span, "not increasing in [0, 1]",
                          help="they are sink scores: the readout gives lo + the number of cut points at or below s")
                return None
        else:
            ctx.error("GSR505", f"`quantize` is {', '.join(QUANTIZE_NAMES)} or thresholds(...)", v.span,
                      "unknown quantization")
            return None
    return PointwiseReadout(float(lo), float(hi), quantize, thresholds, tune, spans) if ok else None


def _pairwise(ctx: Context, settings: dict) -> PairwiseReadout | None:
    ok = True
    epsilon, on_tie = SETTINGS["epsilon"].default, SETTINGS["on_tie"].default
    for key, s in settings.items():
        if key not in PAIRWISE_KEYS:
            _wrong_mode(ctx, key, "pairwise", "pointwise", s.key.span)
            ok = False
        elif key == "epsilon":
            if not isinstance(s.value, ast.Number) or not 0 <= s.value.value < 1:
                ctx.error("GSR305", "`epsilon` is a number in [0, 1)", s.value.span, "out of range")
                ok = False
            else:
                epsilon = float(s.value.value)
        elif key == "on_tie":
            if not isinstance(s.value, ast.Ref) or s.value.name.name not in ON_TIE:
                ctx.error("GSR505", f"`on_tie` is one of {', '.join(ON_TIE)}", s.value.span, "unknown policy")
                ok = False
            else:
                on_tie = s.value.name.name
    return PairwiseReadout(epsilon, on_tie) if ok else None


def check_reachability(ctx: Context, on_cycle: set[str] = frozenset()) -> set[str]:
    """Nodes that reach the sink; a declared node of the main file that does not is an error (GSR402)."""
    if ctx.sink_id is None or ctx.sink_id not in ctx.nodes:
        return set()
    reach = {ctx.sink_id}
    todo = [ctx.sink_id]
    while todo:
        nid = todo.pop()
        for source, _ in edges_of(ctx, nid):
            if source not in reach and source in ctx.nodes:
                reach.add(source)
                todo.append(source)
    for name, decl in ctx.decls.items():
        if decl.path is None and name not in reach and name not in ctx.aliases and name not in on_cycle \
                and name not in ctx.mentioned:
            kind = "criterion" if isinstance(decl.item, ast.CriterionDecl) else "node"
            ctx.error("GSR402", f"{kind} `{name}` does not reach the sink", decl.item.name.span,
                      "its value is never used",
                      help=f"use `{name}` in the graph that leads to `sink`, or delete it")
    return reach
