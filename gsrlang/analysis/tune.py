"""Learning a program's numbers from labelled items, keeping its structure (`gsr tune`).

What may move (`knobs`): the numbers marked `VALUE in LO..HI` (docs/language.md),
or with `every=True` every numeric parameter written in the program within its
type's bounds (a Score parameter or cut point in [0, 1]; a weight between 0 and
twice the largest weight of its sign, keeping its sign: a penalty stays one).

How (`fit`): exact agreement is a step function of the parameters, so it is not
optimised directly by default. The **surrogate** objective fits the continuous
sink to the (unrounded) labels by least squares, through the readout:

- with a `thresholds` readout whose cut points may move, the sink is fitted
  through an affine link `label ~ a + b s` (solved in closed form for each
  parameter set), and the cut points are then placed where the link crosses
  the half-way points between scores (`t_k = (lo + k - 1/2 - a) / b`), clipped
  to their ranges: rounding of the fitted line, read out by cut points;
- otherwise `lo + s (hi - lo)` itself is fitted to the labels.

A shrinkage term `shrink * mean(((theta - start) / (hi - lo))^2)` pulls the
numbers towards the author's, so that a parameter the data say little about
stays where it was. The search is scipy's `differential_evolution` (seeded,
bounded, derivative-free, so gates' step-like `at`s are fine), polished with
L-BFGS-B. `objective="metric"` instead searches the chosen metric itself
(exact, QWK, MAE, Spearman) with the same optimiser: closer to the goal, more
prone to fit the noise of a small data set.

A pairwise program (winner labels first / second / tie) is tuned for the
accuracy of its winner: the surrogate is the Bradley-Terry likelihood of the
labels, P(first wins) = sigmoid(k (s_first - s_second)) with its scale k fitted
for each parameter set, and `objective="metric"` searches the accuracy itself.

Cross-validation (`cross_validate`) splits the labelled items into k folds with
the seed, tunes on k - 1 folds and predicts the held-out one: only the training
folds' labels reach `fit` (the leakage test checks this). Its pooled
out-of-fold predictions are compared with the untuned program's predictions of
the same items (paired bootstrap). The hyperparameters (shrink, objective,
bounds) are fixed before any data is seen, so plain k-fold CV is an honest
estimate: nothing is selected on the held-out folds.
"""

from __future__ import annotations

import math
from typing import Sequence

import attrs
import numpy as np

from gsrlang.analysis.metrics import pairwise_metrics, pointwise_metrics
from gsrlang.analysis.resampling import round_half_up_array
from gsrlang.semantics.evaluate import Evaluation, Evaluator, Table, with_parameters
from gsrlang.lang.program import CheckedProgram
from gsrlang.lang.span import Span

__all__ = ["CVResult", "Knob", "METRICS", "OBJECTIVES", "Progress", "SHRINK_GRID", "TuneError", "choose_shrink",
           "cross_validate", "fit", "knobs", "metric_value", "ordinal_nll", "score_of"]

METRICS = ("exact", "qwk", "mae", "spearman", "accuracy")
PAIRWISE_METRICS = ("accuracy",)
READOUT = "readout"


class TuneError(Exception):
    """The program or the data cannot be tuned (a one-line message for the user)."""


@attrs.frozen
class Knob:
    """One number tuning may move: a node's parameter (`at`, `weights[0]`, `to[good]`) or a cut point."""

    node: str  # a node id, or READOUT for a cut point of the readout
    key: str  # the parameter key, or `thresholds[i]`
    lo: float
    hi: float
    start: float
    span: Span | None = None  # where it is written in the program's main file

    @property
    def name(self) -> str:
        return self.key if self.node == READOUT else f"{self.node}.{self.key}"


def _split(key: str) -> tuple[str, str | None]:
    if "[" not in key:
        return key, None
    name, rest = key.split("[", 1)
    return name, rest[:-1]


def _param_value(params: dict, key: str):
    name, sub = _split(key)
    v = params.get(name)
    if sub is None:
        return v
    return v[int(sub)] if isinstance(v, list) else v.get(sub) if isinstance(v, dict) else None


def _level_value(node, key: str):
    """The value of an ordinal criterion's level, by its key `values[LEVEL]`."""
    name, label = _split(key)
    t = node.type
    return None if name != "values" or t.kind != "ordinal" or label not in t.labels else t.values[t.labels.index(label)]


def knobs(program: CheckedProgram, every: bool = False) -> list[Knob]:
    """The numbers tuning may move: the marked ones, or (`every`) every numeric parameter written in the file."""
    out = []
    for n in program.nodes:
        keys = dict(n.tune)
        if every:
            keys.update({key: None for key in n.number_spans if key not in keys})
        for key, bounds in keys.items():
            value = _level_value(n, key) if n.kind == "criterion" else _param_value(n.params, key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if bounds is None:
                bounds = _type_bounds(n, key, float(value))
            out.append(Knob(n.id, key, float(bounds[0]), float(bounds[1]), float(value), n.number_spans.get(key)))
    p = program.readout.pointwise
    if p is not None and p.quantize == "thresholds":
        ranges = p.tune or (None,) * len(p.thresholds)
        for i, (t, r) in enumerate(zip(p.thresholds, ranges)):
            if r is None and every:
                r = (0.0, 1.0)
            if r is not None:
                out.append(Knob(READOUT, f"thresholds[{i}]", r[0], r[1], t, p.spans[i] if p.spans else None))
    return out


def _type_bounds(node, key: str, value: float) -> tuple[float, float]:
    name, _ = _split(key)
    if name != "weights":
        return 0.0, 1.0  # `at`, a map's scores, a level's value: scores
    weights = [w for w in node.params["weights"] if isinstance(w, (int, float))]
    same_sign = [abs(w) for w in weights if (w < 0) == (value < 0)]
    top = 2.0 * max(same_sign + [1e-9])
    return (-top, 0.0) if value < 0 else (0.0, top)


class Space:
    """A parameter vector <-> the evaluator's overrides ({node: {param: value}}, cut points, level values)."""

    def __init__(self, program: CheckedProgram, ks: Sequence[Knob]):
        self.program = program
        self.knobs = list(ks)
        self.lower = np.array([k.lo for k in ks])
        self.upper = np.array([k.hi for k in ks])
        self.start = np.array([k.start for k in ks])
        self.cut_index = [i for i, k in enumerate(ks) if k.node == READOUT]
        self.other_index = [i for i, k in enumerate(ks) if k.node != READOUT]
        self.criteria = {n.id for n in program.criteria}
        self.level_index = [i for i, k in enumerate(ks) if k.node in self.criteria]
        self._evaluator = Evaluator(program)
        self.width = np.where(self.upper > self.lower, self.upper - self.lower, 1.0)
        self.weight_groups = self._weight_groups()
        self._twins: tuple = (None, None, None)  # the last table run: it, the table evaluated, each item's row

    def _weight_groups(self) -> list:
        """Per reducer with tunable weights: (knob indices, their slots, every weight as written)."""
        groups: dict = {}
        for i, k in enumerate(self.knobs):
            name, sub = _split(k.key)
            if name == "weights" and k.node not in self.criteria and k.node != READOUT:
                groups.setdefault(k.node, []).append((i, int(sub)))
        out = []
        for node_id, members in groups.items():
            written = self.program.node(node_id).params["weights"]
            out.append(([i for i, _ in members], [j for _, j in members],
                        np.array([1.0] * len(written) if isinstance(written, str) else written, float)))
        return out

    def moves(self, theta: Sequence[float]) -> np.ndarray:
        """How far each number moved from the written one: relative to its range, or for a weight, the move
        of its share of its reducer's weights in units of an equal share (a weighted mean does not depend
        on its weights' scale, so only their shares mean anything)."""
        theta = np.asarray(theta, float)
        d = (theta - self.start) / self.width
        for index, slots, written in self.weight_groups:
            now = written.copy()
            now[slots] = theta[index]
            k = len(written)
            share0 = np.abs(written) / (np.abs(written).sum() or 1.0)
            share = np.abs(now) / (np.abs(now).sum() or 1.0)
            d[index] = k * (share[slots] - share0[slots])
        return d

    def overrides(self, theta: Sequence[float]) -> tuple[dict, list | None]:
        params: dict = {}
        cuts = None
        p = self.program.readout.pointwise
        for k, v in zip(self.knobs, theta):
            v = float(v)
            if k.node in self.criteria:
                continue  # a level value: `levels`
            if k.node == READOUT:
                if cuts is None:
                    cuts = list(p.thresholds)
                cuts[int(_split(k.key)[1])] = v
                continue
            node = self.program.node(k.node)
            mine = params.setdefault(k.node, {})
            name, sub = _split(k.key)
            if sub is None:
                mine[name] = v
            else:
                base = mine.get(name)
                if base is None:
                    base = list(node.params[name]) if isinstance(node.params[name], list) else dict(node.params[name])
                    mine[name] = base
                base[int(sub) if isinstance(base, list) else sub] = v
        if cuts is not None:
            cuts = increasing(cuts)
        return params, cuts

    def levels(self, theta: Sequence[float]) -> dict:
        """{criterion id: {level: value}} of the tuned level values."""
        out: dict = {}
        for i in self.level_index:
            k = self.knobs[i]
            out.setdefault(k.node, {})[_split(k.key)[1]] = float(theta[i])
        return out

    def run(self, table: Table, theta: Sequence[float], read: bool = True) -> Evaluation:
        """The columnar evaluation of `table`'s items under `theta` (`read=False`: the sink and validity alone,
        what a surrogate of the sink reads, `Evaluator.run`). A search reads its per-item columns alone; the
        node columns may be missing (`Evaluation.at`).

        A search evaluates the same table hundreds of times, and judgments take few values (a Bool, a level,
        a score on a rating scale), so items often repeat one another: where at most half of them are
        distinct, only the distinct ones are evaluated, and each item takes its twin's outcome."""
        if self._twins[0] is not table:
            small, at = table.distinct()
            self._twins = (table, small, at) if 2 * len(small) <= len(table) else (table, table, None)
        _, small, at = self._twins
        params, thresholds = self.overrides(theta)
        evaluator = self._evaluator
        if self.level_index:  # level values are part of the types the plan binds: a plan of its own
            evaluator = Evaluator(with_levels(self.program, self.levels(theta)))
        ev = evaluator.run(small, params=params, thresholds=thresholds, read=read)
        return ev.at(at) if at is not None else ev


def with_levels(program: CheckedProgram, levels: dict) -> CheckedProgram:
    """The program with some ordinal criteria's level values replaced; a node that passes an ordinal through
    (`default`, `mask`) carries its input's new values."""
    if not levels:
        return program
    types: dict = {}
    nodes = []
    for n in program.nodes:
        t = n.type
        if n.id in levels:
            values = list(t.values)
            for label, v in levels[n.id].items():
                values[t.labels.index(label)] = v
            t = attrs.evolve(t, values=tuple(values))
        elif t.kind == "ordinal":
            fed = [types[i.source] for i in n.inputs if i.source in types]
            if fed and fed[0].labels == t.labels:
                t = attrs.evolve(t, values=fed[0].values)
        if t is not n.type:
            types[n.id] = t
            n = attrs.evolve(n, type=t)
        nodes.append(n)
    return attrs.evolve(program, nodes=tuple(nodes))


def increasing(cuts: Sequence[float]) -> list[float]:
    """Cut points made strictly increasing within [0, 1] (what the checker demands)."""
    out = []
    for t in cuts:
        t = min(1.0, max(0.0, float(t)))
        if out and t <= out[-1]:
            t = min(1.0, out[-1] + 1e-6)
        out.append(t)
    return out


# ---- objectives ----------------------------------------------------------------------------------------------------
def metric_value(metric: str, preds: Sequence, golds: Sequence) -> float | None:
    """One metric of pointwise predictions (None where invalid) against labels, as `gsr metrics` computes it."""
    return pointwise_metrics(list(preds), list(golds))[metric]


def _fast_metric(metric: str, score: np.ndarray, ok: np.ndarray, y: np.ndarray) -> float:
    """The metric for the search (higher is better): exact and MAE in numpy, the others as reported."""
    if metric == "exact":
        return float(np.mean(ok & (score == round_half_up_array(y))))
    if metric == "mae":
        return -float(np.mean(np.abs(score[ok] - y[ok]))) if ok.any() else -math.inf
    value = metric_value(metric, [float(s) if o else None for s, o in zip(score, ok)], y.tolist())
    return -math.inf if value is None else value


SHRINK_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)
OBJECTIVES = ("surrogate", "ordinal", "metric")


@attrs.frozen
class FitSettings:
    metric: str = "exact"  # a pointwise metric, or "accuracy" for a pairwise program
    objective: str = "surrogate"  # "surrogate" | "ordinal" | "metric"
    shrink: float | None = 0.01  # None: chosen from shrink_grid by an inner CV of the items tuned on
    seed: int = 0
    maxiter: int = 40
    popsize: int = 8
    shrink_grid: tuple = SHRINK_GRID
    inner_folds: int = 5
    search: str = "global"  # "global": differential evolution, polished; "local": L-BFGS-B from a start


class Progress:
    """What a long tuning reports while it runs: candidate parameter sets evaluated, the best objective value
    seen, the stage. The base class counts (cheaply: once per evaluation) and shows nothing; `gsr tune` shows
    it with a progress bar on a terminal (shown while it is entered, `with progress:`). `count` may be a shared
    counter (`multiprocessing.Value`) so that worker processes count into it."""

    def __init__(self, count=None, best=None):
        self._count, self._best = count, best
        self.evaluated = 0
        self.lowest = math.inf

    def evaluation(self, value: float) -> None:
        self.evaluated += 1
        self.lowest = min(self.lowest, value)
        if self._count is not None and self.evaluated % 32 == 0:
            with self._count.get_lock():
                self._count.value += 32
            if self._best is not None and self.lowest < self._best.value:
                self._best.value = self.lowest

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def stage(self, text: str) -> None:
        """A new stage of the work (`fold 2 of 5`)."""

    def watch(self, count, best) -> None:
        """Worker processes count their evaluations into `count` (and their best value into `best`) from now on."""

    def fold_done(self, fold: int, folds: int, predictions: dict) -> None:
        """An outer fold is tuned and has predicted its held-out items ({item index: prediction})."""


NO_PROGRESS = Progress()


def _link(s: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(a, b, mean squared error) of the least-squares line y ~ a + b s (closed form).

    Its sums of products are numpy's sums of the products, not `@`: BLAS splits a dot product of more than
    about 10,000 items between its threads, so its last bits (and the cut points made from them) would
    depend on the machine's cores, and its threads spin on a busy one."""
    n = len(s)
    if n < 2:
        return float(np.mean(y)) if n else 0.0, 0.0, float(np.var(y)) if n else 0.0
    sm, ym = float(s.mean()), float(y.mean())
    ds = s - sm
    sxx = float(np.sum(ds * ds))
    if sxx <= 1e-300:
        return ym, 0.0, float(np.var(y))
    dy = y - ym
    b = float(np.sum(ds * dy)) / sxx
    return ym - b * sm, b, max(0.0, float(np.sum(dy * dy)) - b * b * sxx) / n


def ordinal_nll(s: np.ndarray, category: np.ndarray, cuts: np.ndarray, scale: float) -> np.ndarray:
    """Per row, -log P(category) under the ordered logit of the sink score s: P(c <= k) = sigmoid(scale (t_k -
    s)) for the K - 1 increasing cut points t (the readout's); categories 0..K-1."""
    z = scale * (cuts[None, :] - s[:, None])  # rows x (K - 1)
    upper = np.concatenate([0.5 + 0.5 * np.tanh(0.5 * z), np.ones((len(s), 1))], axis=1)  # sigmoid, no overflow
    lower = np.concatenate([np.zeros((len(s), 1)), upper[:, :-1]], axis=1)
    rows = np.arange(len(s))
    p = upper[rows, category] - lower[rows, category]
    return -np.log(np.maximum(p, 1e-300))


#: The ordered logit's scale on the sink (0..1), searched as log(scale) within these bounds.
LOG_SCALE = (0.0, math.log(2000.0))


def _bradley_terry(d: np.ndarray, t: np.ndarray) -> float:
    """The Bradley-Terry cross-entropy of P(first wins) = sigmoid(k d) against t (1 first, 0 second, 1/2 tie),
    at its best scale k in [0, 50] of the margin's root mean square, relative to log 2 (k = 0: a coin)."""
    from scipy.optimize import minimize_scalar

    rms = float(np.sqrt(np.mean(d ** 2))) if len(d) else 0.0
    if rms == 0:
        return 1.0
    z = d / rms

    def cross_entropy(k):
        return float(np.mean(np.logaddexp(0.0, -k * z) * t + np.logaddexp(0.0, k * z) * (1 - t)))

    return minimize_scalar(cross_entropy, bounds=(0.0, 50.0), method="bounded").fun / math.log(2)


def _search(loss, lower: np.ndarray, upper: np.ndarray, start: np.ndarray, settings: FitSettings,
            polish: bool, progress: Progress = NO_PROGRESS) -> np.ndarray:
    """The minimiser of `loss` within [lower, upper]: differential evolution from `start` (in its first
    population), polished with L-BFGS-B, or (`settings.search == "local"`) L-BFGS-B alone from `start`."""
    from scipy.optimize import differential_evolution, minimize

    def counted(x):
        value = loss(x)
        progress.evaluation(value)
        return value

    x0 = np.clip(start, lower, upper)
    if settings.search == "local":
        return minimize(counted, x0, method="L-BFGS-B", bounds=list(zip(lower, upper)), options={"maxiter": 200}).x
    return differential_evolution(counted, list(zip(lower, upper)), seed=settings.seed, maxiter=settings.maxiter,
                                  popsize=settings.popsize, tol=1e-8, x0=x0, polish=polish).x


def fit(program: CheckedProgram, ks: Sequence[Knob], table: Table, settings: FitSettings, groups=None,
        start: np.ndarray | None = None, progress: Progress = NO_PROGRESS) -> np.ndarray:
    """The tuned parameter vector for the labelled items of `table` (labels: numbers or winners, None for none).

    With `settings.shrink` None, the shrinkage is first chosen by `choose_shrink` on these items alone (their
    inner folds keep `groups` whole). `start`: where a local search starts (default: the written numbers)."""
    if settings.shrink is None:
        settings = attrs.evolve(settings, shrink=choose_shrink(program, ks, table, settings, groups, progress)[0])
    space = Space(program, ks)
    moves = space.moves

    def penalty(theta):
        return settings.shrink * float(np.mean(moves(theta) ** 2)) if len(theta) else 0.0

    if table.mode == "pairwise":
        return _fit_pairwise(space, table, settings, penalty, progress)
    return _fit_pointwise(space, table, settings, penalty, start, progress)


def _fit_pointwise(space: "Space", table: Table, settings: FitSettings, penalty, start=None,
                   progress: Progress = NO_PROGRESS) -> np.ndarray:
    labelled = np.array([g is not None for g in table.labels])
    y = np.array([float(g) if g is not None else np.nan for g in table.labels])
    p = space.program.readout.pointwise
    var = float(np.var(y[labelled])) or 1.0
    all_cuts = p.quantize == "thresholds" and len(space.cut_index) == len(p.thresholds) and len(p.thresholds) > 0
    surrogate = settings.objective == "surrogate" and (p.quantize != "thresholds" or all_cuts)
    first = space.start if start is None else np.asarray(start, float)

    theta = first.copy()
    if settings.objective == "ordinal":
        return _fit_ordinal(space, table, settings, penalty, first, progress)
    if surrogate:
        free = space.other_index

        def loss(x):
            theta[free] = x
            ev = space.run(table, theta, read=False)
            use = ev.ok & labelled
            s = ev.sink[use, 0]
            if all_cuts:
                _, b, mse = _link(s, y[use])
                if b <= 0:
                    mse = var * 2  # a falling link cannot be read out by increasing cut points
            else:
                mse = float(np.mean((p.lo + s * (p.hi - p.lo) - y[use]) ** 2)) if use.any() else var
            return mse / var + penalty(theta)

        if free:
            theta[free] = _search(loss, space.lower[free], space.upper[free], first[free], settings, True, progress)
        if all_cuts:
            ev = space.run(table, theta, read=False)
            use = ev.ok & labelled
            a, b, _ = _link(ev.sink[use, 0], y[use])
            if b > 0:
                for i in space.cut_index:
                    k = int(_split(space.knobs[i].key)[1]) + 1
                    theta[i] = min(space.upper[i], max(space.lower[i], (p.lo + k - 0.5 - a) / b))
        return theta

    def negative_metric(x):
        ev = space.run(table, x)
        score = np.nan_to_num(ev.score, nan=-1.0)
        return -_fast_metric(settings.metric, score[labelled], ev.ok[labelled], y[labelled]) + penalty(np.asarray(x))

    return _search(negative_metric, space.lower, space.upper, first, settings, False, progress)


def readout_cuts(program: CheckedProgram) -> np.ndarray:
    """The cut points on the sink (0..1) between the K scores of a pointwise readout: its `thresholds`, or for
    `round` the half-way points (k - 1/2) / (K - 1)."""
    p = program.readout.pointwise
    if p.quantize == "thresholds":
        return np.array(p.thresholds, float)
    k = int(round(p.hi - p.lo)) + 1
    return (np.arange(1, k) - 0.5) / max(1, k - 1)


def _fit_ordinal(space: "Space", table: Table, settings: FitSettings, penalty, first,
                 progress: Progress = NO_PROGRESS) -> np.ndarray:
    """The ordinal likelihood objective: the labels' categories (rounded half up) under an ordered logit of the
    sink score, P(score <= k) = sigmoid(scale (t_k - s)), whose cut points t_k are the readout's (learned with
    the other numbers when they may move; else fixed) and whose scale is fitted with them. Its loss is the mean
    negative log-likelihood over log K (an invalid item counts as a uniform guess, log K), plus the shrinkage."""
    p = space.program.readout.pointwise
    labelled = np.array([g is not None for g in table.labels])
    y = np.array([float(g) if g is not None else np.nan for g in table.labels])
    k = int(round(p.hi - p.lo)) + 1
    category = np.clip(round_half_up_array(np.nan_to_num(y, nan=p.lo)) - p.lo, 0, k - 1).astype(int)
    written = readout_cuts(space.program)
    moving = p.quantize == "thresholds" and bool(space.cut_index)
    n = max(1, int(labelled.sum()))
    log_k = math.log(k)
    theta = np.asarray(first, float).copy()
    cut_slot = {int(_split(space.knobs[i].key)[1]): i for i in space.cut_index}

    def cuts_of(t):
        c = written.copy()
        for slot, i in cut_slot.items():
            c[slot] = t[i]
        return np.maximum.accumulate(c)

    def loss(x):
        theta[:] = x[:-1]
        ev = space.run(table, theta, read=False)
        use = ev.ok & labelled
        nll = ordinal_nll(ev.sink[use, 0], category[use], cuts_of(theta), math.exp(x[-1]))
        return (float(nll.sum()) + (labelled.sum() - use.sum()) * log_k) / (n * log_k) + penalty(theta)

    lower = np.append(space.lower, LOG_SCALE[0])
    upper = np.append(space.upper, LOG_SCALE[1])
    start = np.append(theta, math.log(4.0 * max(1, k - 1)))  # about one logit per half score step
    if not moving and not space.other_index:
        return theta
    x = _search(loss, lower, upper, start, settings, True, progress)
    return x[:-1]


PREFERENCE = {"first": 1.0, "second": 0.0, "tie": 0.5}


def _fit_pairwise(space: "Space", table: Table, settings: FitSettings, penalty,
                  progress: Progress = NO_PROGRESS) -> np.ndarray:
    """Pairwise: the surrogate is the Bradley-Terry likelihood of the labels, P(first wins) = sigmoid(k (s_first
    - s_second)), its scale k fitted for each parameter set (`_bradley_terry`); an invalid item counts as a
    coin toss. The metric objective searches the winner's accuracy itself."""
    labelled = np.array([g in PREFERENCE for g in table.labels])
    t = np.array([PREFERENCE.get(g, np.nan) for g in table.labels])
    gold = np.array(table.labels, dtype=object)
    n = max(1, int(labelled.sum()))

    def loss(x):
        ev = space.run(table, x, read=False)
        use = ev.ok & labelled
        fitted = _bradley_terry(ev.sink[use, 0] - ev.sink[use, 1], t[use])
        return (fitted * use.sum() + (labelled.sum() - use.sum())) / n + penalty(np.asarray(x))

    def negative_accuracy(x):
        ev = space.run(table, x)
        return -float(np.mean((ev.winner[labelled] == gold[labelled]) & ev.ok[labelled])) + penalty(np.asarray(x))

    surrogate = settings.objective != "metric"  # the Bradley-Terry likelihood is the pairwise ordinal objective
    return _search(loss if surrogate else negative_accuracy, space.lower, space.upper, space.start, settings,
                   surrogate, progress)


def predict(program: CheckedProgram, ks: Sequence[Knob], theta, table: Table) -> list:
    """Per item: the tuned program's score (None where invalid), by the columnar evaluator."""
    return Space(program, ks).run(table, theta).predictions()


# ---- cross-validation ------------------------------------------------------------------------------------------------
@attrs.frozen
class CVResult:
    folds: int
    seed: int
    n: int  # labelled items in the folds
    tuned: list  # out-of-fold predictions, per labelled item
    untuned: list  # the untuned program's predictions of the same items
    golds: list
    fold_of: list  # each labelled item's fold
    ids: list
    groups: list | None = None  # each labelled item's group (None: folds by item)
    shrinks: list | None = None  # per fold, the shrinkage its inner CV chose (--shrink auto)


def fold_assignment(n: int, folds: int, seed: int, groups: Sequence | None = None) -> np.ndarray:
    """Each of n items' fold (0..folds-1): a seeded permutation cut into near-equal parts, or with `groups`
    (each item's group; None: a group of its own) every group in one fold (`groups.group_folds`)."""
    if groups is not None:
        from gsrlang.analysis.groups import GroupError, group_folds

        try:
            return group_folds(groups, folds, seed)
        except GroupError as exc:
            raise TuneError(str(exc)) from None
    order = np.random.default_rng(seed).permutation(n)
    fold = np.empty(n, int)
    for f, part in enumerate(np.array_split(order, folds)):
        fold[part] = f
    return fold


def labelled_index(table: Table) -> np.ndarray:
    return np.array([i for i, g in enumerate(table.labels) if g is not None], int)


def subset(groups, index):
    """The groups of the items at `index` (None: no groups)."""
    return None if groups is None else [groups[i] for i in index]


def choose_shrink(program: CheckedProgram, ks: Sequence[Knob], table: Table, settings: FitSettings, groups=None,
                  progress: Progress = NO_PROGRESS) -> tuple[float, dict]:
    """(the shrinkage, {shrinkage: its inner CV metric}): the one of `settings.shrink_grid` whose
    `inner_folds`-fold CV on `table`'s labelled items scores best on `settings.metric` (a tie goes to
    the stronger shrinkage, the simpler model). The inner folds keep `groups` whole. Only `table`'s labels
    are read, so inside an outer cross-validation the outer estimate stays honest (nested CV).

    Fast: in each inner fold the grid is fitted from the strongest shrinkage to the weakest, each fit a local
    search (L-BFGS-B) that starts where the stronger one ended (the first from the written numbers): a path
    of warm starts on the fold's own training items, instead of a global search per shrinkage."""
    index = labelled_index(table)
    if len(index) < 2 * settings.inner_folds:
        raise TuneError(f"choosing the shrinkage by an inner {settings.inner_folds}-fold CV: {len(index)} labelled "
                        f"items are too few (at least {2 * settings.inner_folds} are needed)")
    labelled = table.take(index)
    sub_groups = subset(groups, index)
    try:
        fold = fold_assignment(len(index), settings.inner_folds, settings.seed, sub_groups)
    except TuneError as exc:
        raise TuneError(f"choosing the shrinkage by an inner {settings.inner_folds}-fold CV: {exc}") from None
    grid = sorted((float(x) for x in settings.shrink_grid), reverse=True)
    local = attrs.evolve(settings, search="local")
    preds = {shrink: [None] * len(index) for shrink in grid}
    for f in range(settings.inner_folds):
        train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        train_table, test_table = labelled.take(train), labelled.take(test)
        start = None
        for shrink in grid:
            start = fit(program, ks, train_table, attrs.evolve(local, shrink=shrink), start=start, progress=progress)
            for i, pred in zip(test, predict(program, ks, start, test_table)):
                preds[shrink][i] = pred
    golds = list(labelled.labels)
    scores = {shrink: score_of(table.mode, settings.metric, preds[shrink], golds) for shrink in sorted(grid)}
    best = max(scores, key=lambda s: (scores[s], s))
    return best, scores


def score_of(mode: str, metric: str, preds: Sequence, golds: Sequence) -> float:
    """A metric of predictions, oriented so that higher is better (-inf where undefined)."""
    value = pairwise_metrics(list(preds), list(golds))[metric] if mode == "pairwise" else \
        metric_value(metric, preds, golds)
    return -math.inf if value is None else -value if metric == "mae" else value


_SHARED: dict = {}  # what forked worker processes of `cross_validate` read (inherited, not pickled)


def _outer_fold(f: int, worker: bool = False):
    """Tune on every outer fold but f and predict f: (f, [(item index, prediction)], chosen shrinkage). In a
    worker process, evaluations are counted into the shared counter the parent shows."""
    program, ks, labelled, fold, settings, groups, fitter, progress = (
        _SHARED[k] for k in ("program", "ks", "labelled", "fold", "settings", "groups", "fitter", "progress"))
    counter = None
    if worker:
        counter = _SHARED["counter"]
        progress = Progress(counter, _SHARED["best"])
    train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
    train_table = labelled.take(train)
    if fitter is not fit:
        theta = fitter(program, ks, train_table, settings)
    else:
        if settings.shrink is None:  # chosen here rather than inside `fit`, to report it
            chosen = choose_shrink(program, ks, train_table, settings, subset(groups, train), progress)[0]
            settings = attrs.evolve(settings, shrink=chosen)
        theta = fit(program, ks, train_table, settings, progress=progress)
    if counter is not None and progress.evaluated % 32:
        with counter.get_lock():
            counter.value += progress.evaluated % 32
    return f, list(zip(test.tolist(), predict(program, ks, theta, labelled.take(test)))), settings.shrink


def cross_validate(program: CheckedProgram, ks: Sequence[Knob], table: Table, folds: int, settings: FitSettings,
                   fitter=fit, groups: Sequence | None = None, jobs: int = 1,
                   progress: Progress = NO_PROGRESS) -> CVResult:
    """k-fold CV: tune on k - 1 folds (their labels only), predict the held-out fold; untuned on the same items.

    `groups` (each item of `table`'s group; None for an item: a group of its own) keeps every group in one
    fold, outer and inner (--shrink auto) alike. `jobs` > 1 tunes the folds in that many processes (fork)."""
    index = labelled_index(table)
    if folds < 2:
        raise TuneError("--folds must be at least 2")
    if len(index) < 2 * folds:
        raise TuneError(f"{len(index)} labelled item{'s' if len(index) != 1 else ''} are too few for {folds} folds "
                        f"(at least {2 * folds} are needed: two per fold)")
    labelled = table.take(index)
    sub_groups = subset(groups, index)
    fold = fold_assignment(len(index), folds, settings.seed, sub_groups)
    tuned: list = [None] * len(index)
    shrinks: list = [None] * folds
    _SHARED.update(program=program, ks=ks, labelled=labelled, fold=fold, settings=settings, groups=sub_groups,
                   fitter=fitter, progress=progress)
    try:
        for f, predictions, chosen in _run_folds(folds, jobs, progress):
            for i, pred in predictions:
                tuned[i] = pred
            shrinks[f] = chosen
            progress.fold_done(f, folds, dict(predictions))
    finally:
        _SHARED.clear()
    untuned = Evaluator(program).run(labelled).predictions()
    return CVResult(folds, settings.seed, len(index), tuned, untuned, list(labelled.labels), fold.tolist(),
                    list(labelled.ids), sub_groups, shrinks if settings.shrink is None else None)


def _run_folds(folds: int, jobs: int, progress: Progress):
    """The outer folds' results, in this process (jobs 1) or in `jobs` forked processes as they finish."""
    import multiprocessing

    if jobs <= 1 or folds == 1 or "fork" not in multiprocessing.get_all_start_methods():
        for f in range(folds):
            progress.stage(f"fold {f + 1} of {folds}")
            yield _outer_fold(f)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("fork")
    _SHARED["counter"], _SHARED["best"] = context.Value("q", 0), context.Value("d", math.inf)
    progress.watch(_SHARED["counter"], _SHARED["best"])
    progress.stage(f"{folds} folds in {min(jobs, folds)} processes")
    with ProcessPoolExecutor(max_workers=min(jobs, folds), mp_context=context) as pool:
        futures = [pool.submit(_outer_fold, f, True) for f in range(folds)]
        for future in as_completed(futures):
            yield future.result()
