"""Columnar evaluation speed: what `gsr tune`, `gsr ablate` and what-if replay spend per parameter set.

Targets (issue 9): evaluating one parameter set over 100,000 loaded items of a
10-node program in under 20 ms; loading a 100,000-item trace in under 3 s.

(1) records a trace of the 10-node program of bench_runtime.py (human and rule
    judges) over 2,000 generated items with `run_file`, and repeats its records
    with fresh item ids up to N (default 100,000) records: a real trace, written by
    the trace writer, N items long;
(2) loads it into columns (`table_from_trace`: gsrlang/execution/tracetable.py):
    wall time, min / median / max of 3 repeats, next to the anchor, the bare JSON
    decoding of every line of the same file with the same decoder
    (`jsonio.loads`: orjson when installed), and to the trace module's logical
    reader (`read_trace`, which builds the per-node records replay reads);
(3) evaluates one parameter set over the N items (`Evaluator.run`, with a
    parameter override as tuning does): the first call on the table (which also
    derives the columns no parameter changes), then min / median / max of 20
    repeats (what `gsr tune` calls per candidate parameter set; the readout is the
    one exact readout of gsrlang.semantics.readout);
(4) the anchor, interleaved with (3) repeat by repeat so that both meet the same
    load: a hand-written numpy computation of the same arithmetic over the same
    arrays (weighted mean, cap, floor, readout), whose scores are checked equal to
    the evaluator's; the ratio is given per repeat (min / median / max);
(5) issue 22: a 4-slot weighted mean (exact sums: `exact_sum`, bit for bit
    math.fsum) over N items of four Score criteria, one candidate weight vector per
    repeat (30), CPU time (`time.process_time`) of what a search calls per candidate
    (`Space.run` of gsrlang.analysis.tune), interleaved with the hand-written numpy
    of the same arithmetic (plain sums): over continuous judgments, where no two
    items are alike, and over ratings on a 1..5 scale, where the search evaluates
    each distinct item once. The same call of the tree before the kernels (exact
    sums off in tuning), in the same run, is bench_before.py's (2). Each
    repeat also times the call without the readout (`read=False`), what the
    default (surrogate) objectives make: they read the sink alone.

Prints the figures; it asserts nothing. Run: python benchmarks/bench_learn.py [N] [--four] (`--four`: part
(5) alone).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runtime import PROGRAM, repeat_trace, whole_numbers, write_items  # noqa: E402

from gsrlang.analysis.tune import Space, knobs  # noqa: E402
from gsrlang.execution.tracetable import table_from_cells, table_from_trace  # noqa: E402
from gsrlang.lang.check.driver import analyze  # noqa: E402
from gsrlang.files.dataset import ColumnMap  # noqa: E402
from gsrlang.judges.registry import default_registry  # noqa: E402
from gsrlang.execution.runs import run_file  # noqa: E402
from gsrlang.execution.planner import RunConfig  # noqa: E402
from gsrlang.semantics.evaluate import Evaluator  # noqa: E402
from gsrlang.trace.jsonio import BACKEND, loads  # noqa: E402
from gsrlang.trace.read import read_trace  # noqa: E402

SEED_ITEMS = 2000


def timed(fn, repeats: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, result


def spread(times: list[float], unit: float = 1.0, fmt: str = "{:.2f}") -> str:
    return "/".join(fmt.format(x * unit) for x in (min(times), statistics.median(times), max(times)))


def main(n: int) -> None:
    program = analyze(PROGRAM).program
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        items, seed_trace, trace = tmp / "items.jsonl", tmp / "seed.trace.jsonl", tmp / "trace.jsonl"
        write_items(items, SEED_ITEMS)
        run_file(program, items, ColumnMap(label_field="label"), default_registry(), "pointwise",
                 RunConfig(trace=str(seed_trace)))
        repeat_trace(seed_trace, trace, n)
        size = trace.stat().st_size / 1e6

        def decode_only():
            with trace.open("rb") as handle:
                for line in handle:
                    loads(line)

        bare_times, _ = timed(decode_only, 3)
        load_times, table = timed(lambda: table_from_trace(program, str(trace)), 3)
        logical_times, _ = timed(lambda: sum(1 for _ in read_trace(str(trace))), 3)
        med = statistics.median
        print(f"load a {n:,}-item trace ({size:.0f} MB, format 2) into columns: {spread(load_times)} s "
              f"(min/median/max of 3; target < 3 s); the anchor, decoding every line with {BACKEND} alone: "
              f"{spread(bare_times)} s, so loading takes {med(load_times) / med(bare_times):.2f}x the bare "
              f"decoding; the logical records (read_trace) alone take {spread(logical_times)} s")

        evaluator = Evaluator(program)
        body = next(node.id for node in program.nodes if node.op == "weighted_mean")
        params = {body: {"weights": [0.7, 0.3]}}
        c = table.criteria
        q, polite, polite_abstain, long_, cites = (c["quality"].values, c["polite"].values, c["polite"].abstain,
                                                   c["long"].values, c["cites"].values)

        def by_hand():
            s = (0.7 * np.clip((q - 1.0) / 2.0, 0, 1) + 0.3 * cites) / 1.0
            s = np.clip(s, 0.0, 1.0)
            s = np.where(long_, np.minimum(s, 0.6), s)
            s = np.where(polite & ~polite_abstain, np.maximum(s, 0.2), s)
            return np.floor(np.round(1 + 4 * s, 9) + 0.5)

        first, _ = timed(lambda: evaluator.run(table, params=params), 1)
        eval_times, hand_times = [], []
        for _ in range(20):  # interleaved, so that the three meet the same load on a shared machine
            t, ev = timed(lambda: evaluator.run(table, params=params), 1)
            eval_times += t
            t, hand = timed(by_hand, 1)
            hand_times += t
        ratio = [e / h for e, h in zip(eval_times, hand_times)]
        print(f"evaluate one parameter set over {n:,} items (10-node program), (gsr tune's "
              f"call per candidate): {spread(eval_times, 1e3)} ms (min/median/max of 20; target < 20 ms), "
              f"{n / med(eval_times):,.0f} items/s; the first call on the table: {first[0] * 1e3:.2f} ms")
        print(f"hand-written numpy, same arithmetic, interleaved with the above: {spread(hand_times, 1e3)} ms; "
              f"{n / med(hand_times):,.0f} items/s; the evaluator takes {spread(ratio)}x its time "
              f"(min/median/max of the 20 paired ratios)")
        same = np.array_equal(hand[ev.ok], ev.score[ev.ok])
        print(f"scores equal to the hand-written computation: {same} ({int(ev.ok.sum()):,} valid items)")


FOUR = """
rubric four "Four scores, weighted"
task pointwise { scale = 1..5  quantize = round }
criterion a: Score = human(field: "a")
criterion b: Score = human(field: "b")
criterion c: Score = human(field: "c")
criterion d: Score = human(field: "d")
node body = weighted_mean(items: [a, b, c, d], weights: [0.4, 0.3, 0.2, 0.1])
sink body
"""


def four_slots(n: int, repeats: int = 30) -> None:
    """Part (5): per candidate weight vector, what a search calls (`Space.run`), over continuous judgments (no
    two items alike: every item evaluated) and over ratings on a 1..5 scale (625 kinds of item: the distinct
    ones evaluated, `Table.distinct`), each interleaved with the hand-written numpy of the same arithmetic."""
    program = analyze(FOUR).program
    rng = np.random.default_rng(3)
    space = Space(program, knobs(program, every=True))
    weights = [rng.random(4).round(3) for _ in range(repeats)]
    for name, x in (("continuous judgments", rng.random((n, 4)).round(3)),
                    ("ratings 1..5", rng.integers(0, 5, size=(n, 4)) / 4.0)):
        table = table_from_cells(program, "pointwise", ((f"i{k}", None, {c: [("ok", float(x[k, j]))]
                                                                          for j, c in enumerate("abcd")})
                                                         for k in range(n)))
        t0 = time.process_time()
        space.run(table, weights[0])  # the first call: the table's distinct items, its parameter-free columns
        first = time.process_time() - t0
        cols = [table.criteria[c].values for c in "abcd"]
        ev_times, hand_times, sink_times = [], [], []
        for w in weights:
            t0 = time.process_time()
            ev = space.run(table, w)
            ev.ok, ev.score  # what the metric objective reads of it
            ev_times.append(time.process_time() - t0)
            t0 = time.process_time()
            sunk = space.run(table, w, read=False)
            sunk.ok, sunk.sink  # what the surrogate objectives (the default) read: no readout
            sink_times.append(time.process_time() - t0)
            t0 = time.process_time()
            s = np.clip((w[0] * cols[0] + w[1] * cols[1] + w[2] * cols[2] + w[3] * cols[3]) / w.sum(), 0.0, 1.0)
            hand = np.floor(np.round(1.0 + 4.0 * s, 9) + 0.5)
            hand_times.append(time.process_time() - t0)
        ratio = [e / h for e, h in zip(ev_times, hand_times) if h > 0]
        sink_ratio = [e / h for e, h in zip(sink_times, hand_times) if h > 0]
        kinds = len(table.distinct()[0])
        print(f"4-slot weighted mean over {n:,} items, {name} ({kinds:,} distinct items), one candidate weight "
              f"vector: {spread(ev_times, 1e3)} ms CPU (min/median/max of {repeats}; the first call "
              f"{first * 1e3:.1f} ms); hand-written numpy (plain sums), interleaved: {spread(hand_times, 1e3)} ms; "
              f"ratio {spread(ratio)}x (the tree before the kernels: bench_before.py)")
        print(f"  the sink alone (read=False, the surrogate objectives): {spread(sink_times, 1e3)} ms CPU, "
              f"{spread(sink_ratio)}x the hand-written numpy (which reads out)")
        agree = float(np.mean(hand[ev.ok] == ev.score[ev.ok]))
        print(f"  scores equal to the plain-sum computation on {agree:.4%} of items (the two sums can differ in the "
              "last bit, which moves a score only at a rounding boundary)")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--four"]
    [size] = whole_numbers(args, "bench_learn.py [N] [--four]", (100_000,))
    if "--four" not in sys.argv:
        main(size)
    four_slots(size)
