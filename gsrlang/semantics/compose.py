"""Composition: run a program's operators over criterion values, candidate-aligned, in topological order.

This is the deterministic half of execution, shared by the executor (after the
judges answered) and by replay (from a trace, with no judge). A `Plan` is built
once per program: every operator node is bound to its kernel (gsrlang.semantics,
the one definition of each operator), its parameters (defaults filled in, enum
members as names) and the positions of its inputs, port by port and slot by slot,
in the order the stdlib declares the ports. `Plan.compose(values, m)` then fills in
every operator node's output vector (one value per candidate: a batch of m rows)
and checks each value against the node's declared type.
"""

from __future__ import annotations

from typing import Callable

import attrs
import numpy as np

from gsrlang.lang.catalog import Symbol, default_catalog
from gsrlang.lang.program import CheckedProgram, Node
from gsrlang.lang.types import JType
from gsrlang.semantics.kernels import KERNELS, Kernel, NodeValues, decode, encode
from gsrlang.semantics.values import RuntimeFailure, checker, value_problem

__all__ = ["CompositionError", "Plan", "Step", "bind_params", "plain_param"]


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
    kwargs = {k: plain_param(v) for k, v in params.items()}
    for port, t in port_types.items():
        kwargs[f"{port}_type"] = t
    kwargs["out_type"] = out_type
    return kwargs


@attrs.frozen
class Step:
    index: int  # the node's position in program.nodes
    node: Node
    kernel: Kernel
    kwargs: dict
    ports: tuple[tuple[bool, tuple[int, ...]], ...]  # per declared port: (is a list port, source positions)
    port_names: tuple[str, ...]  # the declared ports, in order
    check: Callable[[object], bool]

    def with_params(self, override: dict) -> dict:
        """The kernel's keyword arguments with some of the node's parameters replaced (what tuning varies)."""
        kw = self.kwargs
        return {**kw, **bind_params(override, {}, kw["out_type"])}

    def why(self, row: int, args: list) -> str:
        return self.kernel.why(row, *args, **self.kwargs)


class Plan:
    """A program bound to its operator kernels, ready to compose."""

    def __init__(self, program: CheckedProgram):
        self.program = program
        self.nodes = program.nodes
        self.index = {n.id: i for i, n in enumerate(program.nodes)}
        self.sink_index = self.index[program.sink]
        self.schedule = None  # the executor's (registry, Schedule) for this plan, built once per registry
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
                    checker(node.type))

    def compose(self, values: list, m: int) -> list:
        """Fill in `values` (one entry per node; criteria already set, each a tuple of m values).

        The kernels run over m rows (one per candidate). Returns `values`. Raises
        CompositionError at the first operator that fails; the outputs computed before
        it stay in `values` (the trace keeps them).
        """
        cols: dict[int, NodeValues] = {}
        valid = np.zeros(m, bool)  # the item path meets no invalid value (an unknown one is settled instead)
        for i, node in self.criteria:
            cols[i] = encode(node.type, values[i])
        for i, v in self.consts:
            values[i] = (v,) * m
            cols[i] = encode(self.nodes[i].type, values[i])
        for step in self.steps:
            args = [[cols[s] for s in sources] if is_list else cols[sources[0]] for is_list, sources in step.ports]
            try:
                out = step.kernel.fn(*args, **step.kwargs)
            except RuntimeFailure as exc:  # pragma: no cover - kernels mark failed rows
                raise CompositionError(step.node.id, 0, str(exc)) from None
            decoded = decode(step.node.type, out.values, out.abstain)
            failed = out.failed
            for c, v in enumerate(decoded):
                if failed is not None and failed[c]:
                    raise CompositionError(step.node.id, c, step.why(c, args))
                if not step.check(v):
                    problem = value_problem(v, step.node.type) or f"{v!r} does not fit `{step.node.type}`"
                    raise CompositionError(step.node.id, c, f"`{step.node.op}` produced a value that does "
                                                            f"not fit: {problem}")
            values[step.index] = tuple(decoded)
            cols[step.index] = NodeValues(out.values, valid if out.abstain is None else out.abstain, valid)
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
