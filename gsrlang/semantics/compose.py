"""Composition: run a program's operators over criterion values, candidate-aligned, in topological order.

This is the deterministic half of execution, shared by the executor (after the
judges answered) and by replay (from a trace, with no judge). A `Plan` is built
once per program: every operator node is bound to its kernel (gsrlang.semantics,
the one definition of each operator), its parameters (defaults filled in, enum
members as names) and the positions of its inputs, port by port and slot by slot,
in the order the stdlib declares the ports. `Plan.compose(values, m)` then fills in
every operator node's output vector (one value per candidate: a batch of m rows)
and checks each value against the node's declared type.

`apply` is the one step of evaluation, for the item path's m rows and the columnar
evaluator's N x m alike (gsrlang.semantics.evaluate): a step's arguments port by
port, its kernel's call, and the rows it leaves invalid (an input's invalid row, a
row the kernel failed, a value that does not fit the node's type).
"""

from __future__ import annotations

from typing import Callable

import attrs
import numpy as np

from gsrlang.lang.catalog import Symbol, default_catalog
from gsrlang.lang.program import CheckedProgram, Node
from gsrlang.lang.types import JType
from gsrlang.semantics.kernels import KERNELS, Kernel, NodeValues, decode, encode
from gsrlang.semantics.settle import unfit
from gsrlang.semantics.values import RuntimeFailure, value_problem

__all__ = ["CompositionError", "Masks", "Plan", "Step", "apply", "bind_params", "plain_param"]


class CompositionError(RuntimeFailure):
    """An operator failed or produced a value outside its type, for one candidate."""

    def __init__(self, node_id: str, candidate: int, reason: str):
        super().__init__(reason)
        self.node_id = node_id
        self.candidate = candidate
        self.reason = reason


def plain_param(value):
    """A checked parameter value as a kernel wants it: enum members as names, numbers as floats."""
    if isinstance(value, Symbol):
        return value.name
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [plain_param(v) for v in value]
    if isinstance(value, dict):
        return {k: plain_param(v) for k, v in value.items()}
    return value


def bind_params(params: dict, port_types: dict[str, JType], out_type: JType) -> dict:
    """The keyword arguments of a kernel for a node's parameters, its ports' types and its own type."""
    return {**{k: plain_param(v) for k, v in params.items()}, **{f"{port}_type": t for port, t in port_types.items()},
            "out_type": out_type}


@attrs.frozen
class Step:
    index: int  # the node's position in program.nodes
    node: Node
    kernel: Kernel
    kwargs: dict
    ports: tuple[tuple[bool, tuple[int, ...]], ...]  # per declared port: (is a list port, source positions)
    port_names: tuple[str, ...]  # the declared ports, in order
    unfit: Callable  # (values, abstain) -> the rows whose value does not fit the node's type, None if none
    sources: tuple[int, ...]  # every input's position, port by port and slot by slot

    def with_params(self, override: dict) -> dict:
        """The kernel's keyword arguments with some of the node's parameters replaced (what tuning varies)."""
        kw = self.kwargs
        return {**kw, **bind_params(override, {}, kw["out_type"])}

    def why(self, row: int, args: list) -> str:
        return self.kernel.why(row, *args, **self.kwargs)


class Masks:
    """The all-false mask of a batch's rows, shared by every column with nothing to mask, so that a step skips
    what it would OR in (and a caller sees at a glance that nothing is set: the mask `is` `zero`)."""

    def __init__(self, rows: int):
        self.zero = np.zeros(rows, bool)
        self.zero.flags.writeable = False

    def mask(self, x: np.ndarray | None) -> np.ndarray:
        """`x`, or the shared all-false mask when nothing in it is set."""
        if x is None or x is self.zero:
            return self.zero
        return x if (True in x.tolist() if len(x) <= 16 else x.any()) else self.zero

    def either(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        zero = self.zero
        return b if a is zero else a if b is zero else a | b


def apply(step: Step, cols, kwargs: dict, masks: Masks) -> tuple[NodeValues, list, np.ndarray | None]:
    """One operator over its inputs' rows (`cols`: node position -> NodeValues): its NodeValues, invalid where an
    input is, where the kernel failed or where the value does not fit the node's type; the kernel's arguments and
    the rows it failed (None: none), for a failed row's reason (`Step.why`)."""
    args = [[cols[s] for s in sources] if is_list else cols[sources[0]] for is_list, sources in step.ports]
    values, abstain, failed = step.kernel.fn(*args, **kwargs)
    zero = invalid = masks.zero
    for s in step.sources:
        x = cols[s].invalid
        if x is not zero:
            invalid = x if invalid is zero else invalid | x
    abstain = zero if abstain is None else masks.mask(abstain)
    if failed is not None:
        invalid = masks.either(invalid, masks.mask(failed))
    bad = step.unfit(values, abstain)
    if bad is not None:
        invalid = masks.either(invalid, masks.mask(bad))
    return NodeValues(values, abstain, invalid), args, failed


class Plan:
    """A program bound to its operator kernels, ready to compose."""

    def __init__(self, program: CheckedProgram):
        self.program = program
        self.nodes = program.nodes
        self.index = {n.id: i for i, n in enumerate(program.nodes)}
        self.sink_index = self.index[program.sink]
        self._masks: dict[int, Masks] = {}  # compose's, per row count (the item path meets no invalid value)
        self.criteria: tuple[tuple[int, Node], ...] = tuple(
            (i, n) for i, n in enumerate(program.nodes) if n.kind == "criterion")
        self.consts: tuple[tuple[int, object], ...] = tuple(
            (i, n.value) for i, n in enumerate(program.nodes) if n.kind == "const")
        self.steps: tuple[Step, ...] = tuple(self._step(i, n) for i, n in enumerate(program.nodes)
                                             if n.kind not in ("criterion", "const"))

    def _step(self, i: int, node: Node) -> Step:
        kernel = KERNELS.get(node.op)
        sig = default_catalog().operator(node.op)
        if kernel is None or sig is None:
            raise RuntimeFailure(f"operator `{node.op}` has no implementation")
        ports, port_types = [], {}
        for port in sig.ports:
            inputs = node.port_inputs(port.name)
            if port.is_list:
                inputs = sorted(inputs, key=lambda inp: inp.slot)
            sources = tuple(self.index[inp.source] for inp in inputs)
            if not sources:
                raise RuntimeFailure(f"node `{node.id}` has nothing on port `{port.name}`")
            ports.append((port.is_list, sources))
            port_types[port.name] = self.nodes[sources[0]].type
        kwargs = bind_params(node.params, port_types, node.type)
        return Step(i, node, kernel, kwargs, tuple(ports), tuple(p.name for p in sig.ports),
                    unfit(node.type, kernel.clamped), tuple(s for _, sources in ports for s in sources))

    def compose(self, values: list, m: int) -> list:
        """Fill in `values` (one entry per node; criteria already set, each a tuple of m values).

        The kernels run over m rows (one per candidate). Returns `values`. Raises
        CompositionError at the first operator that fails; the outputs computed before
        it stay in `values` (the trace keeps them).
        """
        masks = self._masks.get(m) or self._masks.setdefault(m, Masks(m))  # (read-only: kept per row count)
        cols: dict[int, NodeValues] = {}
        for i, v in self.consts:
            values[i] = (v,) * m
        for i, _ in self.criteria + self.consts:
            col = encode(self.nodes[i].type, values[i])
            cols[i] = NodeValues(col.values, col.abstain, masks.zero)
        for step in self.steps:
            try:
                col, args, failed = apply(step, cols, step.kwargs, masks)
            except RuntimeFailure as exc:  # pragma: no cover - kernels mark failed rows
                raise CompositionError(step.node.id, 0, str(exc)) from None
            t = step.node.type
            if col.invalid is not masks.zero:  # the first candidate that failed or does not fit
                c = col.invalid.tolist().index(True)
                if failed is not None and failed[c]:
                    raise CompositionError(step.node.id, c, step.why(c, args))
                v = decode(t, col.values[c:c + 1], col.abstain[c:c + 1])[0]
                problem = value_problem(v, t) or f"{v!r} does not fit `{t}`"
                raise CompositionError(step.node.id, c, f"`{step.node.op}` produced a value that does not fit: "
                                                        f"{problem}")
            values[step.index] = tuple(decode(t, col.values, None if col.abstain is masks.zero else col.abstain))
            cols[step.index] = col
        return values

    def new_values(self) -> list:
        return [None] * len(self.nodes)

    def inputs_by_port(self, node: Node) -> dict[str, list[str]]:
        """{port: [source ids in slot order]} for the trace."""
        out: dict[str, list] = {}
        for inp in node.inputs:  # ports in the order the program lists them
            out.setdefault(inp.port, []).append(inp)
        return {port: [i.source for i in sorted(inps, key=lambda i: -1 if i.slot is None else i.slot)]
                for port, inps in out.items()}
