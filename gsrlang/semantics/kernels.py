"""The operator kernels: each operator of stdlib/operators.gsr defined once, over columns.

A kernel computes one node's output for R rows at once (a pointwise item is one
row, a pairwise item two; settling evaluates the corners of unsettled inputs as
rows too). Its inputs are `NodeValues`s: values (float64 for a Score, bool for a Bool,
int32 level codes, in declaration order, for an Ordinal / Nominal) and an
`abstain` mask. Ports arrive positionally, in the order the stdlib declares them (a
list port as a list of Columns, in slot order); parameters as keyword arguments
(defaults filled in by the checker, enum members as names, numbers as floats),
with `<port>_type` (the judgment type on that port) and `out_type`.

What every kernel of a kind shares is written once, in `kernel`'s wrapper (as the
sqlglot executor's `null_if_any` is): a transform's abstention passes through
(`default` says it replaces it), a reducer's `on_abstain` policy is applied before
the kernel sees its items and a row with nothing left to reduce fails, and a
clamped kernel's output is clamped to [0, 1] (NaN and -0.0 become 0.0).

A kernel returns `Out(values, abstain, failed)`: `abstain` None when the wrapper's
default applies, `failed` None when no row failed; the reason of a failed row is
`Kernel.why(row, ...)`, the sentence the item's result gives.

Determinism: every sum of three or more slots is `math.fsum`'s, correctly rounded
(`exact_sum`: error-free transformations, and fsum itself on the rare rows where
they cannot prove the rounding); two slots need one IEEE addition, which already is.
A weighted sum's products are rounded first, then summed exactly.
Products are taken left to right in slot order. So the item path (a batch of one
row) and a column of a million rows give the same bits.
"""

from __future__ import annotations

import inspect
import math
import threading
import weakref
from typing import Callable, NamedTuple, Sequence

import attrs
import numpy as np

from gsrlang.semantics.judgment import ABSTAIN

__all__ = ["BLOCK", "INVALID", "NodeValues", "KERNELS", "Kernel", "Out", "clamp", "decode", "dtype", "encode", "exact_sum",
           "kernel", "scratch"]

INVALID = object()  # a cell with no valid value: its judgment was invalid, skipped, or did not fit


class NodeValues(NamedTuple):
    """One node's output over every row: values, and where it abstained or is invalid. Its arrays are never
    changed in place once made (kernels make fresh ones; `exact_sum` remembers columns' magnitudes)."""

    values: np.ndarray
    abstain: np.ndarray
    invalid: np.ndarray


def dtype(t):
    """The numpy type of `t`'s encoding: float64 for a Score, bool for a Bool, int32 level codes otherwise."""
    return np.float64 if t.kind == "score" else bool if t.kind == "bool" else np.int32


def encode(t, cells: Sequence) -> NodeValues:
    """Python values of type `t` (ABSTAIN where abstained, INVALID where there is no valid value) as the
    NodeValues of its type's encoding, 0 where abstained or invalid. The one conversion of values to columns:
    the item path's, the tables' of judgments (execution/tracetable.py) and settling's."""
    abstain = np.array([c is ABSTAIN for c in cells], bool)
    invalid = np.array([c is INVALID for c in cells], bool) if INVALID in cells else np.zeros(len(cells), bool)
    if t.kind == "score":
        values = np.array([0.0 if c is ABSTAIN or c is INVALID else c for c in cells], np.float64)
    elif t.kind == "bool":
        values = np.array([c is True for c in cells], bool)
    else:
        code = {label: i for i, label in enumerate(t.labels)}
        values = np.array([code.get(c, 0) if type(c) is str else 0 for c in cells], np.int32)
    return NodeValues(values, abstain, invalid)


def decode(t, values: np.ndarray, abstain: np.ndarray | None) -> list:
    """A column's rows as Python values of type `t` (ABSTAIN where abstained)."""
    if t.kind in ("score", "bool"):
        out = values.tolist()
        if t.kind == "score" and values.dtype != np.float64:
            out = [float(v) for v in out]
    else:
        labels = t.labels
        out = [labels[int(v)] for v in values.tolist()]
    if abstain is not None and _any(abstain):
        out = [ABSTAIN if a else v for v, a in zip(out, abstain.tolist())]
    return out


class Out(NamedTuple):
    values: np.ndarray
    abstain: np.ndarray | None = None  # None: the kind's default (a transform's input, nothing for a reducer)
    failed: np.ndarray | None = None  # rows where the operator failed (None: none)


@attrs.frozen
class Kernel:
    name: str
    kind: str  # "transform" | "reduce" | "gate"
    fn: Callable  # the wrapped kernel: (*ports, **params) -> Out
    why: Callable  # (row, *ports, **params) -> the reason a failed row failed
    ports: tuple[str, ...]  # the stdlib's port names, in declaration order
    params: tuple[str, ...]  # the stdlib's parameter names
    clamped: bool = False  # every output value is in [0, 1] (the wrapper clamps it)


KERNELS: dict[str, Kernel] = {}

_NOTHING = "every item of `{op}` abstained (on_abstain: skip): there is nothing to reduce"


def clamp(s: np.ndarray) -> np.ndarray:
    """s clamped to [0, 1] in place (s must be a fresh array; a few rows: a new one); NaN and -0.0 become 0.0."""
    if len(s) <= _FEW:  # (`out=` costs numpy more than a new array of one or two rows)
        return np.fmin(np.fmax(s, 0.0), 1.0) + 0.0
    np.fmax(s, 0.0, out=s)  # fmax: NaN gives the other operand
    np.fmin(s, 1.0, out=s)
    s += 0.0  # -0.0 + 0.0 is +0.0
    return s


_FEW = 16  # rows up to which the item path's one or two rows take the cheaper way in `clamp` and `_any`


def _any(mask: np.ndarray) -> bool:
    """Whether any element of a bool array is set: on a few rows through a list (numpy's reduction has a fixed
    cost several times that of a few rows' whole conversion)."""
    return True in mask.ravel().tolist() if mask.size <= _FEW else bool(mask.any())


def _slots(columns: list) -> np.ndarray:
    """Columns side by side, one slot per column: (rows, slots). (np.array then a transposed view: np.stack's
    checks cost several times more on the item path's one or two rows.)"""
    return np.array(columns).T


def _resolve(items: Sequence[NodeValues], policy: str, weights, boolean: bool):
    """(values with abstentions replaced, counted mask) after the `on_abstain` policy.

    skip: the item is left out; zero: it counts 0 (false); partial: 0.5; fail: the worst
    case (0 for a positive weight and 1 for a penalty; false for all / fraction, true for any)."""
    a = _slots([c.abstain for c in items])
    if boolean:
        x = _slots([c.values for c in items]).astype(bool)
        if policy == "skip":
            return x & ~a, ~a
        return np.where(a, weights if policy == "fail" else False, x), np.ones_like(a)
    x = np.asarray(_slots([c.values for c in items]), np.float64)
    if not _any(a):
        return x, None
    if policy == "skip":
        return np.where(a, 0.0, x), ~a
    if policy == "fail":
        w = np.ones(len(items)) if weights is None else np.asarray(weights, float)
        fill = np.where(w < 0, 1.0, 0.0)[None, :]
    else:
        fill = 0.5 if policy == "partial" else 0.0
    return np.where(a, fill, x), None


def _port_names(kind: str, fn) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(ports, parameters) a kernel names: a reducer's one list port is `items`."""
    ps = inspect.signature(fn).parameters.values()
    ports = ("items",) if kind == "reduce" else tuple(p.name for p in ps if p.kind == p.POSITIONAL_OR_KEYWORD)
    return ports, tuple(p.name for p in ps if p.kind == p.KEYWORD_ONLY and not p.name.endswith("_type"))


def kernel(name: str, kind: str, *, clamped: bool = False, replaces: bool = False, boolean: bool = False,
           columns: bool = False, why: Callable | None = None):
    """Register a kernel under its stdlib name, wrapped with what its kind shares.

    transform: the input's abstentions pass through (`replaces`: the kernel gives its own);
    reduce: the kernel receives (x, counted) after `on_abstain` (`boolean`: all / any /
    fraction's policy), counted None when every slot counts, and rows with nothing counted
    fail; `columns`: where no item abstains, x is the items' value columns as a list (the
    (rows, slots) copy costs as much as a few passes, and `exact_sum` reads columns);
    `clamped`: the output is clamped to [0, 1]."""

    def register(fn):
        if name in KERNELS:
            raise ValueError(f"operator {name!r} has two kernels")
        ports, params = _port_names(kind, fn)
        if kind == "reduce":
            def run(items, *, on_abstain="fail", **kw):
                fail_as = (name == "any") if boolean else kw.get("weights")
                if fail_as == "equal":
                    fail_as = None
                if columns and items and not any(_any(c.abstain) for c in items):
                    x, counted = [np.asarray(c.values, np.float64) for c in items], None
                else:
                    x, counted = _resolve(items, on_abstain, fail_as, boolean)
                out = fn(x, counted, **kw)
                values, failed = out.values, out.failed
                if counted is not None:
                    empty = ~counted.any(axis=1)
                    if empty.any():
                        failed = empty if failed is None else failed | empty
                return Out(clamp(values) if clamped else values, None, failed)

            def reason(row, items, *, on_abstain="fail", **kw):
                if why is not None:
                    said = why(row, items, on_abstain=on_abstain, **kw)
                    if said:
                        return said
                return _NOTHING.format(op=name)
        else:
            def run(*args, **kw):
                out = fn(*args, **kw)
                values = clamp(out.values) if clamped else out.values
                if kind == "transform" and not replaces or kind == "gate" and out.abstain is None:
                    return Out(values, args[0].abstain, out.failed)
                return Out(values, out.abstain, out.failed)

            reason = why

        KERNELS[name] = Kernel(name, kind, run, reason, ports, params, clamped)
        return fn

    return register


# ---- exact sums ---------------------------------------------------------------------------------------------------
BLOCK = 16384  # rows per block of `exact_sum` and `readout.snap` (in buffers made once: `scratch`)

_SCRATCH = threading.local()


def scratch(user: str, count: int) -> list[np.ndarray]:
    """`count` float64 buffers of BLOCK rows (a caller's block), this thread's and `user`'s own, made once and
    reused by every call.

    A fresh array of a block or more costs its first touch of every page (the allocator gives such
    sizes back to the system when they are freed), several times a pass over it; a pass with `out=`
    into a buffer already touched costs the pass alone. A user does not call itself while
    it holds its buffers: one user at a time writes into them."""
    bufs = getattr(_SCRATCH, user, None)
    if bufs is None or len(bufs) < count or len(bufs[0]) != BLOCK:
        bufs = [np.empty(BLOCK) for _ in range(count)]
        setattr(_SCRATCH, user, bufs)
    return bufs[:count]


def exact_sum(x: np.ndarray | list, weights: Sequence[float] | None = None) -> np.ndarray:
    """Each row's sum along the slots (each slot times its weight first, the product rounded, when `weights`
    are given), as `math.fsum` gives it (correctly rounded); a fresh array. `x`: (rows, slots), or the
    slots' columns as a list.

    One or two slots: the IEEE sum already is. Three or more, a block of rows at a time
    (the products made there): `_offset_sum` proves nearly every row's rounding in four
    passes a slot (and every row, with one pass less in all, where the columns' known
    magnitudes prove its remainders' sum exact: `_magnitudes`); the rows it cannot take
    `_two_sum_sum`, and the few rows that cannot prove either take fsum itself."""
    rows, k = _shape(x)
    if isinstance(x, list) and (k <= 2 or rows <= 16):
        x = _slots(x)
    if weights is not None and (k <= 2 or rows <= 16):
        x, weights = x * np.asarray(weights, np.float64), None
    if k == 0:
        return np.zeros(rows)
    if k == 1:
        return x[:, 0] + 0.0
    if k == 2:
        return x[:, 0] + x[:, 1] + 0.0
    if rows <= 16:  # a few rows (the item path): fsum itself costs less than the passes below
        return np.array([math.fsum(r) for r in x.tolist()], np.float64) + 0.0
    w = [1.0] * k if weights is None else [float(v) for v in weights]
    listed = isinstance(x, list)
    cols = x if listed else [x[:, j] for j in range(k)]
    with np.errstate(all="ignore"):
        known = [_magnitudes(c) if listed else (max(float(c.max()), -float(c.min())), None) for c in cols]
        # |each product| <= top and, where not 0, >= low, as rounding is monotone (a NaN: top is NaN)
        top = max(abs(v) * most for v, (most, _) in zip(w, known))
        if top == 0.0:
            return np.zeros(rows)
        if not 2.0 ** -900 < top < 2.0 ** 900:
            return _two_sum_sum(_slots(cols) * np.array(w))
        m = math.frexp(top)[1] + (k - 1).bit_length() + 2  # top < 2^e: k top < 2^(e + ceil(log2 k)) = 2^(m-2)
        fine = 2.0 ** (m - 52 + (k - 1).bit_length())
        low = min((abs(v) * least if least is not None else 0.0) for v, (_, least) in zip(w, known) if v != 0.0)
        out = np.empty(rows)
        bufs = scratch("exact_sum", 5)
        doubt, block = [], len(bufs[0])
        for start in range(0, rows, block):
            stop = min(rows, start + block)
            doubt.append(_offset_sum([c[start:stop] for c in cols], None if weights is None else w, m, low >= fine,
                                     out[start:stop], *(b[:stop - start] for b in bufs)) + start)
        doubt = np.concatenate(doubt)
        if len(doubt):
            out[doubt] = _two_sum_sum(_slots([c[doubt] for c in cols]) * np.array(w))
    return out


def _offset_sum(cols: list, w: list | None, m: int, exact: bool, out: np.ndarray, t: np.ndarray, t2: np.ndarray,
                d: np.ndarray, p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The correctly rounded sum of each row of `cols` (times `w`) into `out`, but for the rows returned
    (indices), which it cannot prove; every |product| is below 2^(m-2) / k.

    An accumulator t starts at T = 1.5 * 2^m, far above any partial sum, so t stays in
    [2^m, 2^(m+1)), on the grid g = 2^(m-52): each slot y goes in as t' = t + y, and
    d = t' - t (exact: one binade) is y rounded to the grid, y - d its remainder (exact,
    |y - d| <= g/2). So sum = tau + pi exactly, with tau = t - T (exact) and pi the
    remainders' sum. Where every nonzero y is at least f = 2^(m-52+ceil(log2 k)) (`exact`:
    the caller knows it of every row), the remainders lie on the grid 2^(m-104+ceil(log2 k))
    and their partial sums (< k g/2) are held exactly: p, their plain sum, is pi, and
    fl(tau + p) the sum's rounding (ties to even, as fsum's). Otherwise p is within
    beta = (k-1) u k g/2 of pi (u = 2^-53); with c >= 4 beta, a = fl(p - c) <= pi <=
    fl(p + c) = b (u |p -+ c| < 3 beta), and rounding is monotone: where fl(tau + a) =
    fl(tau + b), that is the sum's rounding. The rows where they differ are near a halfway
    case (mostly exactly on one), an exact zero, or far smaller than the largest product;
    those whose slots are all 0 or at least f are exact as above, and the rest are returned.
    (t, t2, d, p, y: scratch of the block's length.)"""
    k = len(cols)
    big = 1.5 * 2.0 ** m
    for j, col in enumerate(cols):
        if w is not None:
            col = np.multiply(col, w[j], out=y)
        if j == 0:
            np.add(col, big, out=t)
            np.subtract(t, big, out=d)
            np.subtract(col, d, out=p)
            continue
        np.add(t, col, out=t2)
        np.subtract(t2, t, out=d)
        np.subtract(col, d, out=d)
        p += d
        t, t2 = t2, t
    t -= big
    if exact:
        np.add(t, p, out=out)
        return np.zeros(0, np.intp)
    c = k * k * 2.0 ** (m - 103)  # k^2 g 2^-51 >= 4 beta
    np.subtract(p, c, out=out)
    np.add(p, c, out=d)
    out += t
    d += t
    doubt = np.flatnonzero(out != d)
    if len(doubt):
        ys = _slots([col[doubt] for col in cols])
        if w is not None:
            ys = ys * np.array(w)
        exact_rows = ((ys == 0.0) | (np.abs(ys) >= 2.0 ** (m - 52 + (k - 1).bit_length()))).all(axis=1)
        rows = doubt[exact_rows]
        out[rows] = t[rows] + p[rows]
        doubt = doubt[~exact_rows]
    return doubt


_KNOWN: dict[int, list] = {}  # id(column) -> [a weak reference to it, max |v|, min nonzero |v| or None]


def _magnitudes(col: np.ndarray) -> tuple[float, float | None]:
    """(largest |v|, smallest nonzero |v| or None) of a column `exact_sum` was given in a list.

    A column is never changed in place once made (see NodeValues), so what is known of
    one holds while it lives, and tuning passes the same criteria columns to every
    candidate: they are remembered by identity (checked through a weak reference). The
    smallest nonzero magnitude costs three passes, so it is found the second time a
    column is seen (None before: one evaluation of a table does not pay for it)."""
    known = _KNOWN.get(id(col))
    if known is not None and known[0]() is col:
        if known[2] is None:
            a = np.abs(col)
            known[2] = float(np.min(a, where=a > 0.0, initial=np.inf))
        return known[1], known[2]
    most = max(float(col.max()), -float(col.min()))
    if len(_KNOWN) >= 256:
        for key in [key for key, seen in list(_KNOWN.items()) if seen[0]() is None] or list(_KNOWN):
            _KNOWN.pop(key, None)  # (another thread may have dropped it)
    _KNOWN[id(col)] = [weakref.ref(col), most, None]
    return most, None


def _two_sum(a: np.ndarray, b: np.ndarray, t: np.ndarray, bp: np.ndarray, e: np.ndarray) -> None:
    """Knuth's TwoSum into buffers: t = fl(a + b) and e its rounding error, so that t + e = a + b exactly
    (`bp` is scratch; none of t, bp, e may be a or b)."""
    np.add(a, b, out=t)
    np.subtract(t, a, out=bp)
    np.subtract(t, bp, out=e)
    np.subtract(a, e, out=e)
    np.subtract(b, bp, out=bp)
    e += bp


def _two_sum_sum(x: np.ndarray) -> np.ndarray:
    """Each row's fsum (a fresh array) for the rows `_offset_sum` cannot prove: the naive sum with every
    rounding error kept exactly (Knuth's TwoSum), the errors summed, and the two added; where the bound on
    what that last step may have lost cannot rule out another rounding (and where anything is not finite),
    the row takes fsum itself."""
    rows, k = x.shape
    if rows <= 16:
        return np.array([math.fsum(r) for r in x.tolist()], np.float64) + 0.0
    # Every pass writes into a buffer made once; the first slot's error needs no summing.
    s = x[:, 0].copy()
    t, bp, e = np.empty(rows), np.empty(rows), np.empty(rows)
    err = lost = u = None  # the rounding errors of the naive sum, themselves summed with TwoSum; what summing
    for j in range(1, k):  # them lost (magnitudes), so that sum = s + err + (at most lost) exactly
        _two_sum(s, x[:, j], t, bp, e)  # t + e = s + x[:, j] exactly
        s, t = t, s
        if err is None:
            err, e = e, np.empty(rows)
            lost, u = np.zeros(rows), np.empty(rows)
            continue
        _two_sum(err, e, t, bp, u)  # t + u = err + e exactly
        err, t = t, err
        np.abs(u, out=u)
        lost += u
    r = s + err
    # Where nothing was lost summing the errors, r is s + err rounded (ties to even, as fsum): the exact sum's
    # rounding. Elsewhere it is when delta (r + delta = s + err exactly) plus twice what was lost stays within
    # half the gap to r's neighbours (a quarter of the gap above when r is a power of 2, a zero r always doubted).
    doubt = np.flatnonzero(lost != 0.0)
    if len(doubt):
        rc, sc, ec = r[doubt], s[doubt], err[doubt]
        rp = rc - sc
        delta = (sc - (rc - rp)) + (ec - rp)
        m, ex = np.frexp(np.abs(rc))
        half_gap = np.ldexp(np.where(m == 0.5, 0.25, 0.5), ex - 53)
        doubt = doubt[~(np.abs(delta) + 2.0 * lost[doubt] < half_gap) | (rc == 0.0)]
    if not np.isfinite(r).all():
        doubt = np.union1d(doubt, np.flatnonzero(~np.isfinite(r)))
    if len(doubt):
        r[doubt] = [math.fsum(row) for row in x[doubt].tolist()]
    r += 0.0  # fsum's zero is +0.0
    return r


# ---- TRANSFORM ------------------------------------------------------------------------------------------------------
@kernel("normalize", "transform")
def normalize(x, *, x_type, **_):
    """A level's value in [0, 1]; true is 1 and false is 0."""
    if x_type.kind == "bool":
        return Out(x.values.astype(np.float64))
    return Out(np.asarray(x_type.values, np.float64)[x.values])


@kernel("scale", "transform")
def scale(x, *, x_type, **_):
    """Score[lo..hi] mapped linearly onto [0, 1]."""
    # (new arrays, not `out=`: on the item path's one or two rows numpy's `out=` costs more than the arithmetic)
    return Out(np.minimum(1.0, np.maximum(0.0, (x.values - x_type.lo) / (x_type.hi - x_type.lo))))


@kernel("threshold", "transform")
def threshold(x, *, at, **_):
    return Out(x.values >= at)


@kernel("not", "transform")
def not_(x, **_):
    return Out(~x.values)


@kernel("invert", "transform")
def invert(x, **_):
    return Out(1.0 - x.values)


def _no_score(row, x, *, to, x_type, **_):
    return f"`map` gives no score for `{x_type.labels[int(x.values[row])]}`"


@kernel("map", "transform", why=_no_score)
def map_(x, *, to, x_type, **_):
    lut = np.array([to.get(label, np.nan) for label in x_type.labels], np.float64)
    out = lut[x.values]
    missing = np.isnan(out)
    if not _any(missing):
        return Out(out)
    return Out(np.where(missing, 0.0, out), None, missing & ~x.abstain)


@kernel("at_most", "transform")
def at_most(x, *, level, x_type, **_):
    """The level is `level` or below it, in declaration order (level codes are that order)."""
    return Out(x.values <= x_type.labels.index(level))


@kernel("at_least", "transform")
def at_least(x, *, level, x_type, **_):
    """The level is `level` or above it, in declaration order."""
    return Out(x.values >= x_type.labels.index(level))


@kernel("is", "transform")
def is_(x, *, level, x_type, **_):
    """The judgment is exactly `level` (a label, or a bool)."""
    return Out(x.values == (bool(level) if x_type.kind == "bool" else x_type.labels.index(level)))


@kernel("default", "transform", replaces=True)
def default(x, *, value, out_type, **_):
    """An abstention replaced by `value`."""
    if out_type.kind in ("ordinal", "nominal"):
        value = out_type.labels.index(value)
    a = x.abstain
    if not _any(a):
        return Out(x.values, np.zeros(len(a), bool))
    out = x.values.copy()
    out[a] = value
    return Out(out, np.zeros(len(a), bool))


# ---- REDUCE ---------------------------------------------------------------------------------------------------------
def _shape(x: np.ndarray | list) -> tuple[int, int]:
    """(rows, slots) of a reducer's x: a (rows, slots) array or a list of columns."""
    return (len(x[0]), len(x)) if isinstance(x, list) else x.shape


def _counted(x, counted):
    return x if counted is None else np.where(counted, x, 0.0)


@kernel("mean", "reduce", clamped=True, columns=True)
def mean(x, counted, **_):
    n = _shape(x)[1] if counted is None else counted.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return Out(exact_sum(_counted(x, counted)) / n)


def _weights(k: int, weights) -> np.ndarray:
    return np.ones(k) if weights == "equal" else np.asarray(weights, float)


def _weighted_why(row, items, *, weights="equal", on_abstain="fail", **_):
    w = _weights(len(items), weights)
    if len(w) != len(items):
        return f"`weighted_mean` has {len(items)} items but {len(w)} weights"
    if on_abstain == "skip" and all(c.abstain[row] for c in items):
        return None
    return "every weight of `weighted_mean` that counts is zero: the mean is undefined"


@kernel("weighted_mean", "reduce", clamped=True, columns=True, why=_weighted_why)
def weighted_mean(x, counted, *, weights="equal", **_):
    """sum(w x) / sum(positive w); with no positive weight, 1 + sum(w x) / sum(|w|) (then clamped).

    The weights that count are those of the items left after the abstention policy."""
    rows, k = _shape(x)
    w = _weights(k, weights)
    if len(w) != k:
        return Out(np.zeros(rows), None, np.ones(rows, bool))
    if counted is None:  # every slot counts: constant weights
        total = exact_sum(x, w)
        ws = w.tolist()  # (Python floats: summed several times faster than numpy's)
        positive = math.fsum(v for v in ws if v > 0)
        negative = math.fsum(-v for v in ws if v < 0)
        if positive > 0:
            total /= positive
            return Out(total)
        if negative == 0:
            return Out(np.zeros(rows), None, np.ones(rows, bool))
        total /= negative
        total += 1.0
        return Out(total)
    total = exact_sum(np.where(counted, w * x, 0.0))
    positive = exact_sum(np.where(counted & (w > 0), w, 0.0))
    negative = exact_sum(np.where(counted & (w < 0), -w, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(positive > 0, total / positive, 1.0 + total / negative)
    return Out(value, None, (positive <= 0) & (negative == 0))


@kernel("min", "reduce")
def min_(x, counted, **_):
    """The lowest score."""
    return Out(np.min(x if counted is None else np.where(counted, x, np.inf), axis=1))


@kernel("max", "reduce")
def max_(x, counted, **_):
    """The highest score."""
    return Out(np.max(x if counted is None else np.where(counted, x, -np.inf), axis=1))


@kernel("median", "reduce")
def median(x, counted, **_):
    """The median (the clamped mean of the two middle scores for an even count)."""
    xs = np.sort(x if counted is None else np.where(counted, x, np.inf), axis=1)
    n = np.full(len(x), x.shape[1]) if counted is None else counted.sum(axis=1)
    rows = np.arange(len(n))
    mid = n // 2
    upper = xs[rows, np.minimum(mid, xs.shape[1] - 1)]
    lower = xs[rows, np.maximum(mid - 1, 0)]
    with np.errstate(invalid="ignore"):
        even = clamp((lower + upper) / 2)
    return Out(np.where(n % 2 == 1, upper, even))


@kernel("product", "reduce")
def product(x, counted, **_):
    """The product, left to right in slot order."""
    p = np.ones(x.shape[0])
    for j in range(x.shape[1]):
        p = p * (x[:, j] if counted is None else np.where(counted[:, j], x[:, j], 1.0))
    return Out(p)


@kernel("all", "reduce", boolean=True)
def all_(b, counted, **_):
    return Out(np.all(b | ~counted, axis=1))


@kernel("any", "reduce", boolean=True)
def any_(b, counted, **_):
    """fail: an abstention counts as true ("a flagged problem cannot be ruled out")."""
    return Out(np.any(b & counted, axis=1))


@kernel("fraction", "reduce", boolean=True)
def fraction(b, counted, **_):
    n = counted.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return Out((b & counted).sum(axis=1) / n)


# ---- GATE -----------------------------------------------------------------------------------------------------------
def _bound(t: np.ndarray, at, neutral: float) -> np.ndarray:
    """Per row, `at` where the trigger `t` fires and `neutral` (an infinity) elsewhere: a fresh float64 array.

    Made from the infinity's bit pattern times "not fired", plus `at`: inf + at is
    inf and 0.0 + at is at, exactly, for every finite `at` but -0.0 (which becomes
    0.0); those few take np.where, several times slower (a branch per row)."""
    at = float(at)
    if len(t) < 64 or not math.isfinite(at) or math.copysign(1.0, at) < 0 and at == 0:
        return np.where(t, at, neutral)  # (few rows: the bit pattern's five passes cost more than a branch)
    bound = np.logical_not(t).astype(np.int64)
    bound *= np.array(neutral).view(np.int64)
    bound = bound.view(np.float64)
    bound += at
    return bound


def _fired(trigger: NodeValues) -> np.ndarray:
    return trigger.values.astype(bool, copy=False)


@kernel("cap", "gate")
def cap(base, trigger, *, at, **_):
    """When the trigger holds, the score is at most `at`."""
    t = _fired(trigger)
    return Out(np.minimum(base.values, _bound(t, at, np.inf)) if _any(t) else base.values)


@kernel("floor", "gate")
def floor(base, trigger, *, at, **_):
    """When the trigger holds, the score is at least `at`."""
    t = _fired(trigger)
    return Out(np.maximum(base.values, _bound(t, at, -np.inf)) if _any(t) else base.values)


@kernel("veto", "gate")
def veto(base, trigger, **_):
    """When the trigger holds, the score is 0."""
    t = _fired(trigger)
    return Out(np.where(t, 0.0, base.values) if _any(t) else base.values)


@kernel("mask", "gate")
def mask(base, trigger, **_):
    """When the trigger holds, the judgment abstains."""
    return Out(base.values, base.abstain | _fired(trigger))
