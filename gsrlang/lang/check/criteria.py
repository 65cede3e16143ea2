"""Criterion declarations: their judgment types, level anchors, examples, procedures and ensembles."""

from __future__ import annotations

from gsrlang.lang.catalog import REQUIRED, ParamSig, Symbol, format_literal, literal_value
from gsrlang.lang.check.context import Context, Decl, declared_here, suggestion
from gsrlang.lang.check.judgekinds import DEFAULT_KIND, KindUse, judge_kinds, kind_of, written_forms
from gsrlang.lang.check.values import INVALID, check_param_value, literal_fits, values_of
from gsrlang.lang.program import CriterionSpec, EnsembleSpec, ExampleSpec, LevelSpec, ProcedureSpec
from gsrlang.lang.syntax import ast
from gsrlang.lang.types import BOOL, JType, ordinal

JUDGMENT_TYPES = ("Bool", "Score", "Ordinal", "Nominal")
BINARY_AGGREGATES = ("majority", "weighted", "unanimous", "any")
GRADED_AGGREGATES = ("mean", "median", "mode", "min", "max")


def check_criteria(ctx: Context) -> None:
    for decl in ctx.decls.values():
        if isinstance(decl.item, ast.CriterionDecl):
            t = criterion_type(ctx, decl.item.type, decl.path)
            ctx.criterion_types[decl.name] = t
            ctx.criterion_specs[decl.name] = _spec(ctx, decl, t)


# ---- types ---------------------------------------------------------------------------------------------
def criterion_type(ctx: Context, texpr: ast.TypeExpr, path) -> JType | None:
    if len(texpr.options) != 1:
        ctx.error("GSR307", "a criterion has one type, not a union", texpr.span, path=path)
        return None
    a = texpr.options[0]
    name = a.name.name if a.name else None
    bad = lambda msg, label="", help=None: ctx.error("GSR307", msg, a.span, label, path=path, help=help)  # noqa: E731
    if name not in JUDGMENT_TYPES:
        hint = suggestion(name or "", JUDGMENT_TYPES) or \
            "a criterion's type is Bool, Score, Score[a..b], Ordinal[1..k], Ordinal{...} or Nominal{...}"
        bad(f"`{_type_text(a)}` is not a judgment type", "unknown type", hint)
        return None
    if name == "Bool" and a.form == "name":
        t = BOOL
    elif name == "Score" and a.form == "name":
        t = JType("score")
    elif name == "Score" and a.form == "range":
        lo, hi = float(a.range.lo.value), float(a.range.hi.value)
        if not lo < hi:
            bad(f"empty score interval [{a.range.lo.value}..{a.range.hi.value}]", "lower bound must be below the upper")
            return None
        t = JType("score", lo, hi)
    elif name == "Ordinal" and a.form == "range":
        lo, hi = a.range.lo.value, a.range.hi.value
        if not (isinstance(lo, int) and isinstance(hi, int)) or hi <= lo:
            bad(f"`Ordinal[{lo}..{hi}]` needs two integers, the first below the second", "invalid levels",
                "write e.g. `Ordinal[1..5]`")
            return None
        if hi - lo > 100:
            bad(f"`Ordinal[{lo}..{hi}]` has {hi - lo + 1} levels; the limit is 101", "too many levels",
                "use `Score[a..b]` for a fine-grained scale")
            return None
        t = ordinal([str(i) for i in range(lo, hi + 1)], numbered=True)
    elif name in ("Ordinal", "Nominal") and a.form == "labels":
        labels = [lab.name for lab in a.labels]
        dup = next((lab for i, lab in enumerate(a.labels) if lab.name in labels[:i]), None)
        if dup is not None:
            ctx.error("GSR307", f"label `{dup.name}` appears twice", dup.span, path=path)
            return None
        if len(labels) < 2:
            bad(f"`{name}` needs at least two labels", "one label")
            return None
        t = ordinal(labels) if name == "Ordinal" else JType("nominal", labels=tuple(labels))
    else:
        forms = {"Bool": "`Bool`", "Score": "`Score` or `Score[a..b]`", "Ordinal": "`Ordinal[1..k]` or `Ordinal{a, b, c}`",
                 "Nominal": "`Nominal{a, b, c}`"}
        bad(f"`{_type_text(a)}` is not a valid {name} type", "malformed type", f"write {forms[name]}")
        return None
    return t.maybe(a.optional)


def _type_text(a: ast.TypeAtom) -> str:
    """A type as written, without its `?`; a list's or a mapping's element types left out."""
    from gsrlang.lang.syntax.formatter import type_atom_text

    return {"list": "[...]", "map": "{...}"}.get(a.form) or type_atom_text(a).removesuffix("?")


# ---- the rest of a criterion -------------------------------------------------------------------------
def _spec(ctx: Context, decl: Decl, t: JType | None) -> CriterionSpec | None:
    item: ast.CriterionDecl = decl.item
    path = decl.path
    body = item.body or ()
    asks = [b for b in body if isinstance(b, ast.Ask)]
    for extra in asks[1:]:
        ctx.error("GSR601", "a criterion has one `ask`", extra.span, "second `ask`", path=path,
                  help="merge the two questions into one")
    judges = [b for b in body if isinstance(b, (ast.JudgeClause, ast.Judges))]
    procedures = [p for p in [item.procedure, *[j.procedure for j in judges if isinstance(j, ast.JudgeClause)]] if p]
    ensembles = [j for j in judges if isinstance(j, ast.Judges)]
    # `judge P` (or `= P`) with `judges N aggregate A` samples P N times; anything more is ambiguous
    samples_of_one = len(procedures) == 1 and len(ensembles) == 1 and ensembles[0].count is not None
    if len(procedures) + len(ensembles) > 1 and not samples_of_one:
        second = (procedures[1:] + ensembles)[0]
        ctx.error("GSR601", f"criterion `{decl.name}` has more than one judge procedure", second.span,
                  "another procedure", path=path,
                  help="to combine several judges, use `judges [p1, p2] aggregate majority`")
    procedure = _procedure(ctx, procedures[0], t, path) if procedures else None
    ensemble = _ensemble(ctx, ensembles[0], t, path, procedures[0] if procedures else None) if ensembles else None
    if procedure is None and ensemble is not None:
        procedure = ensemble.judges[0]
    failed = procedure is None and bool(procedures or ensembles)  # already reported
    if procedure is None:
        procedure = ProcedureSpec(DEFAULT_KIND, "", {})
    ask = asks[0].text.value if asks else ""
    kind = judge_kinds(ctx.catalog).get(procedure.kind)
    if kind is not None and kind.needs_ask and not ask and not failed:
        ctx.error("GSR602", f"criterion `{decl.name}` is judged by a model but has no `ask`", item.name.span,
                  "no question for the judge", path=path,
                  help='add `ask "..."` with the question the judge must answer, or give a procedure '
                       "(`= rule.NAME(...)`, `= human(field: \"...\")`)")
    levels = _levels(ctx, [b for b in body if isinstance(b, ast.Level)], t, path)
    examples = []
    for ex in (b for b in body if isinstance(b, ast.Example)):
        if t is not None and not literal_fits(t.required(), ex.verdict):
            ctx.error("GSR310", f"example verdict does not fit the criterion's type `{t.required()}`",
                      ex.verdict.span, "wrong verdict", path=path, help="the verdict is " + values_of(t.required()))
            continue
        try:
            verdict = literal_value(ex.verdict)
        except ValueError:
            continue
        examples.append(ExampleSpec(ex.text.value, verdict.name if isinstance(verdict, Symbol) else verdict,
                                    ex.reason.value if ex.reason else None))
    return CriterionSpec(ask, tuple(levels), tuple(examples), procedure, ensemble)


def _levels(ctx: Context, levels: list[ast.Level], t: JType | None, path) -> list[LevelSpec]:
    out, seen = [], {}
    for lv in levels:
        key = lv.key_text
        if key in seen:
            ctx.error("GSR309", f"level `{key}` is described twice", lv.key.span, path=path,
                      secondary=[declared_here(seen[key], path, "first described here")])
            continue
        seen[key] = lv.key.span
        value = None
        if t is not None:
            valid = ["true", "false"] if t.kind == "bool" else list(t.labels)
            if t.kind != "score" and key not in valid:  # a Score's anchors are numbers, checked below
                ctx.error("GSR309", f"`{key}` is not a level of `{t.required()}`", lv.key.span, "no such level",
                          path=path, help=f"the levels are {', '.join(valid)}")
                continue
            if t.kind == "score" and not (isinstance(lv.key, ast.Number) and t.lo <= lv.key.value <= t.hi):
                ctx.error("GSR309", f"anchor `{key}` is outside `{t.required()}`", lv.key.span, path=path)
                continue
            if lv.value is not None:
                if t.kind != "ordinal":
                    ctx.error("GSR306", f"only ordinal levels take a value (`{t.required()}` does not)",
                              lv.value.span, path=path)
                    continue
                if not 0.0 <= lv.value.value <= 1.0:
                    ctx.error("GSR306", f"level value {lv.value.value} is outside [0, 1]", lv.value.span,
                              "out of range", path=path, help="a level's value is its score in [0, 1]")
                    continue
                value = float(lv.value.value)
        out.append(LevelSpec(key, lv.text.value, value))
    return out


def with_level_values(t: JType, spec: CriterionSpec | None) -> JType:
    """An ordinal type whose level values include the explicit `level K "..." = v` values."""
    if t is None or t.kind != "ordinal" or spec is None:
        return t
    given = {lv.key: lv.value for lv in spec.levels if lv.value is not None}  # keys are labels (_levels checks)
    values = tuple(given.get(label, value) for label, value in zip(t.labels, t.values))
    return JType("ordinal", labels=t.labels, values=values, numbered=t.numbered, optional=t.optional) if given else t


# ---- procedures -------------------------------------------------------------------------------------------
def _procedure(ctx: Context, proc: ast.Procedure, t: JType | None, path) -> ProcedureSpec | None:
    kind = kind_of(ctx.catalog, proc)
    sigs = kind.params(ctx.catalog, proc) if kind is not None else None
    if sigs is None:
        name = proc.dotted
        if kind is not None and kind.name == "rule" and len(proc.name) == 2:
            rule = proc.name[1]
            ctx.error("GSR104", f"unknown rule `{rule.name}`", rule.span, "not in the catalogue",
                      path=path, help=suggestion(rule.name, ctx.catalog.rules) or
                      "rules: " + ", ".join(sorted(ctx.catalog.rules)))
            return None
        ctx.error("GSR104", f"unknown judge kind `{name}`", proc.span, "not a judge kind", path=path,
                  help=suggestion(name, written_forms(ctx.catalog)) or "judge kinds: " + ", ".join(
                      k.use_text() if k.name == "rule" else k.name for k in judge_kinds(ctx.catalog).values()))
        return None
    what = proc.dotted
    args = proc.args or ()
    if kind.positional and len(args) == 1 and args[0].name is None:
        value = args[0].value
        if not isinstance(value, ast.String):
            text = value.name.name if isinstance(value, ast.Ref) else "..."
            ctx.error("GSR601", f"`{what}` takes one string, its {kind.positional}: `{kind.sig.signature()}`",
                      proc.span, path=path, help=f'write `{what}("{text}")`')
            return None
        values = {kind.positional: args[0].value.value}
    else:
        values = _bind(ctx, what, sigs, args, path, proc, kind.fill_defaults)
    if values is None or not kind.check(KindUse(ctx, proc, t, values, path)):
        return None
    name, values = kind.spec(proc, values)
    return ProcedureSpec(kind.name, name, values)


def _bind(ctx: Context, what: str, sigs: dict[str, ParamSig], args, path, proc, fill_defaults: bool) -> dict | None:
    values, ok, misplaced = {}, True, False
    given: set[str] = set()  # named, even with a value that did not check (no "missing" report for it then)
    for a in args:
        if a.name is None:
            free = [n for n in sigs if n not in values]
            text = ctx.text_of(a.value.span, path) or "value"
            ctx.error("GSR206", f"`{what}` takes named arguments only", a.span, "positional", path=path,
                      help=f"write `{free[0]}: {text}`" if free else f"`{what}` takes no arguments")
            ok, misplaced = False, True
            continue
        sig = sigs.get(a.name.name)
        if sig is None:
            ctx.error("GSR201", f"`{what}` has no parameter `{a.name.name}`", a.name.span, "unknown parameter",
                      path=path, help=suggestion(a.name.name, sigs) or
                      (f"its parameters are {', '.join(sigs)}" if sigs else f"`{what}` takes no parameters"))
            ok = False
            continue
        if a.name.name in values:
            ctx.error("GSR203", f"parameter `{a.name.name}` is given twice", a.name.span, path=path)
            ok = False
            continue
        given.add(a.name.name)
        value = check_param_value(ctx, sig, a.value, path, None)
        if value is INVALID:
            ok = False
            continue
        values[a.name.name] = value
    for sig in sigs.values():
        if sig.name not in values and sig.name not in given:
            if sig.default is REQUIRED and not misplaced:
                ctx.error("GSR202", f"`{what}` is missing its `{sig.name}` parameter", proc.span, path=path,
                          help=f"add `{sig.name}: ...` ({sig.pattern})")
                ok = False
            elif sig.default is not None and fill_defaults:
                values[sig.name] = sig.default
    return values if ok else None


def _ensemble(ctx: Context, j: ast.Judges, t: JType | None, path, base: ast.Procedure | None) -> EnsembleSpec | None:
    if j.count is not None:
        if j.count.value < 2:
            ctx.error("GSR603", "an ensemble needs at least 2 judges", j.count.span, f"{j.count.value} judge",
                      path=path, help="use `judges 3 aggregate ...`, or a single `judge` procedure")
            return None
        proc = _procedure(ctx, base, t, path) if base else ProcedureSpec(DEFAULT_KIND, "", {})
        if proc is None:
            return None
        judges = tuple(proc for _ in range(j.count.value))
    else:
        specs = [_procedure(ctx, p, t, path) for p in j.procedures]
        if any(s is None for s in specs):
            return None
        if len(specs) < 2:
            ctx.error("GSR603", "an ensemble needs at least 2 judges", j.span, "one judge", path=path,
                      help="list two or more procedures, or use a single `judge` procedure")
            return None
        judges = tuple(specs)
    kinds = judge_kinds(ctx.catalog)
    if any(p.kind not in kinds or not kinds[p.kind].samples for p in judges):
        ctx.error("GSR603", "ensembles combine model judges (`llm`)", j.span, path=path,
                  help="rules and human annotations give one answer each; use a single procedure")
        return None
    agg = j.aggregate.dotted
    if t is not None:
        allowed = BINARY_AGGREGATES if t.kind == "bool" else GRADED_AGGREGATES if t.kind in ("ordinal", "score") \
            else ("mode",)
        if agg not in allowed:
            ctx.error("GSR603", f"`{agg}` cannot aggregate `{t.required()}` votes", j.aggregate.span,
                      "not for this type", path=path, help=f"use one of {', '.join(allowed)}")
            return None
    args = {}
    for a in j.aggregate.args or ():
        try:
            args[a.name.name if a.name else "weights"] = literal_value(a.value)
        except ValueError:
            ctx.error("GSR304", "aggregate parameters are literals", a.value.span, path=path)
            return None
    if agg == "weighted":
        w = args.get("weights")
        if not isinstance(w, list) or len(w) != len(judges) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in w):
            ctx.error("GSR205", f"`weighted` needs `weights: [...]` with one number per judge ({len(judges)})",
                      j.aggregate.span, path=path)
            return None
    elif args:
        ctx.error("GSR201", f"`{agg}` takes no parameters", j.aggregate.span, path=path)
        return None
    return EnsembleSpec(judges, agg, args)


__all__ = ["check_criteria", "criterion_type", "with_level_values", "format_literal"]
