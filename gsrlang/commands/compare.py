"""gsr compare: two results files of the same items, compared item by item."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gsrlang.commands import UsageError, usage_errors

HELP = "compare two results files of the same items: paired bootstrap differences, wins and losses, McNemar"
DESCRIPTION = """\
Compare two results files (written by `gsr run --out` or `gsr replay --out`) of
the same labelled items, item by item: for every metric, A's value, B's value
and the difference B - A with a paired bootstrap 95% interval (each resample
draws items, the same for both); per item, which of the two is closer to the
label (wins, losses, ties); and the exact McNemar test on exact agreement (the
items only one of them gets right). Items are matched by id; files whose
labelled items or labels differ are refused, with what differs.

Items that share a prompt, a conversation or a source are not independent: with
--group-field F and --data FILE (the data the runs read; items joined by id, as
--id-field names it) each resample draws groups, not items (a cluster
bootstrap), so the intervals are honest. Needs numpy only.

output: the comparison on standard output (--json: one JSON document); the cluster bootstrap's groups,
warnings and a refusal (with what differs) on standard error.
exit status: 0 compared; 1 the files are not of the same items; 2 unreadable.

examples:
  gsr compare out/flat.jsonl out/overall.jsonl
  gsr compare out/untuned.jsonl out/tuned.jsonl --json
  gsr compare out/flat.jsonl out/tuned.jsonl --data dev.jsonl --id-field id --group-field context"""


def add_arguments(p) -> None:
    p.add_argument("a", metavar="A", help="the baseline results file (JSONL)")
    p.add_argument("b", metavar="B", help="the results file to compare with it")
    from gsrlang.commands.common import add_bootstrap_argument, add_seed_argument

    add_bootstrap_argument(p)
    add_seed_argument(p)
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_group_arguments(p)


def add_group_arguments(p) -> None:
    """--group-field, --data and --id-field for a cluster bootstrap (shared with `gsr metrics`)."""
    g = p.add_argument_group("cluster bootstrap (items that share a prompt, conversation or source)")
    g.add_argument("--group-field", metavar="FIELD", help="the data's field naming each item's group: resample "
                   "groups, not items (needs --data)")
    if not any(a.dest == "data" for a in p._actions):
        g.add_argument("--data", metavar="FILE", help="the data file the runs read (for --group-field)")
    if not any(a.dest == "id_field" for a in p._actions):
        g.add_argument("--id-field", metavar="NAME", help="the item id column, as given to gsr run")


def read_groups(args, ids, command: str) -> list | None:
    """Each item's group for a cluster bootstrap (None: no --group-field); rows without the field, or items the
    data does not hold, are groups of their own, counted in a note on stderr."""
    from gsrlang.analysis.groups import data_groups, groups_note
    from gsrlang.files.dataset import DataError

    if not args.group_field:
        return None
    if not args.data:
        raise UsageError("--group-field needs --data (the data file holding the field; items are joined by id)")
    with usage_errors(DataError):
        found, _ = data_groups(args.data, args.group_field, args.id_field)
    groups = [found.get(str(i)) for i in ids]
    absent = sum(str(i) not in found for i in ids)
    unnamed = sum(g is None for g in groups) - absent
    if absent == len(ids):
        raise UsageError(f"--data {args.data}: none of the items' ids is in it (ids joined by "
                         f"{'--id-field ' + args.id_field if args.id_field else 'the row number'})")
    notes = []
    if unnamed:
        notes.append(f"{unnamed} without `{args.group_field}`")
    if absent:
        notes.append(f"{absent} not in {args.data}")
    if notes:
        print(f"{command}: warning: " + " and ".join(notes) + " of the items: each is a group of its own",
              file=sys.stderr)
    print(f"{command}: cluster bootstrap over `{args.group_field}`: {groups_note(groups)}", file=sys.stderr)
    return groups


def _read(path: str) -> dict:
    from gsrlang.analysis.metrics import numbered_results, pairwise_line, pointwise_line, result_mode

    mode = None
    items: dict = {}
    programs = set()
    ids: list = []
    for line, record in numbered_results(Path(path)):  # the item lines (not the completion line)
        where = f"{path}: line {line}"
        ids.append(record.get("id"))
        mode = mode or result_mode(record)
        source = record.get("program")
        if isinstance(source, dict):
            programs.add((source.get("name"), source.get("hash")))
        if record.get("label") is None:
            continue
        status = str(record.get("status"))
        gold, pred = (pointwise_line if mode == "pointwise" else pairwise_line)(record, status, where)
        items[record.get("id", ("line", line))] = (pred, gold)
    if mode is None:
        raise UsageError(f"{path}: no result lines")
    from gsrlang.commands.common import warn_repeated_ids

    warn_repeated_ids("gsr compare", ids, path, "the last line of each id is compared")
    return {"mode": mode, "items": items, "programs": sorted(programs, key=str)}


def paired_items(a: dict, b: dict, names: tuple[str, str]) -> tuple[list, list, list, list] | str:
    """(ids, A's predictions, B's, labels) in A's order, or why the two files are not of the same items."""
    if a["mode"] != b["mode"]:
        return f"{names[0]} is {a['mode']}, {names[1]} is {b['mode']}"
    only_a = [k for k in a["items"] if k not in b["items"]]
    only_b = [k for k in b["items"] if k not in a["items"]]
    if only_a or only_b:
        def show(ks):
            return ", ".join(map(str, ks[:3])) + (f" and {len(ks) - 3} more" if len(ks) > 3 else "")
        parts = [f"{len(ks)} only in {n} ({show(ks)})" for ks, n in ((only_a, names[0]), (only_b, names[1])) if ks]
        return ("the files do not hold the same labelled items: " + "; ".join(parts) +
                f" ({len(a['items'])} and {len(b['items'])} labelled items)")
    differ = [k for k in a["items"] if a["items"][k][1] != b["items"][k][1]]
    if differ:
        return f"the labels differ on {len(differ)} item{'s' if len(differ) != 1 else ''} (first: {differ[0]})"
    ids = list(a["items"])
    return ids, [a["items"][k][0] for k in ids], [b["items"][k][0] for k in ids], [a["items"][k][1] for k in ids]


def run(args) -> int:
    from gsrlang.analysis.stats import mcnemar, paired_report, wins
    from gsrlang.files.dataset import DataError

    with usage_errors(DataError):
        a, b = _read(args.a), _read(args.b)
    paired = paired_items(a, b, (args.a, args.b))
    if isinstance(paired, str):
        print(f"gsr compare: {paired}", file=sys.stderr)
        return 1
    ids, pa, pb, golds = paired
    if not ids:
        print("gsr compare: the files hold no labelled items to compare", file=sys.stderr)
        return 1
    mode = a["mode"]
    groups = read_groups(args, ids, "gsr compare")
    report = paired_report(mode, pa, pb, golds, args.bootstrap, args.seed, groups=groups)
    result = {"a": args.a, "b": args.b, "mode": mode, "n": len(ids), "programs": {"a": a["programs"],
                                                                                 "b": b["programs"]},
              "metrics": report, "wins": wins(mode, pa, pb, golds), "mcnemar": mcnemar(mode, pa, pb, golds),
              "bootstrap": {"n_resamples": args.bootstrap, "seed": args.seed, "group_field": args.group_field}}
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(format_comparison(result))
    return 0


def _program_text(entries) -> str:
    return ", ".join(f"{n} ({(h or '?').split(':')[-1][:12]})" for n, h in entries) or "no program named"


def format_comparison(result: dict) -> str:
    from gsrlang.commands.tune import format_ci

    boot = result["bootstrap"]
    over = f" over groups of `{boot['group_field']}`" if boot.get("group_field") else ""
    lines = [f"A: {result['a']}  [{_program_text(result['programs']['a'])}]",
             f"B: {result['b']}  [{_program_text(result['programs']['b'])}]",
             f"{result['n']} labelled items, {result['mode']}; paired bootstrap ({boot['n_resamples']} resamples"
             f"{over}), difference B - A", ""]
    lines.append(f"  {'metric':<16}{'A':>8}{'B':>8}{'B - A [95% CI]':>28}")
    for key, r in result["metrics"].items():
        a = "undef." if r["a"] is None else f"{r['a']:.3f}"
        b = "undef." if r["b"] is None else f"{r['b']:.3f}"
        lines.append(f"  {key:<16}{a:>8}{b:>8}{format_ci(r['diff'], r['ci95'], True):>28}")
    w = result["wins"]
    m = result["mcnemar"]
    lines += ["", f"per item (closer to the label): B better {w['b']}, A better {w['a']}, tied {w['tie']}",
              f"McNemar (exact) on exact agreement: only A right {m['only_a']}, only B right {m['only_b']}, "
              f"p = {m['p_value']:.4g}"]
    return "\n".join(lines)
