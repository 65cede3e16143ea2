"""Composition: run a program's operators over criterion values, candidate-aligned, in topological order.

This is the deterministic half of execution, shared by the executor (after the
judges answered) and by replay (from a trace, with no judge). A `Plan` is built
once per program: every operator node is bound to its implementation, its
parameters (defaults filled in, enum members as names) and the positions of its
inputs, port by port and slot by slot. `Plan.compose(values, m)` then fills in
every operator node's output vector (one value per candidate) and checks each
value against the node's declared type.
"""

from __future__ import annotations

from typing import Callable

import attrs

from gsrlang.catalog import default_catalog
from gsrlang.program import Node, Program
from gsrlang.runtime.operators import OPERATORS, bind_params, port_names
from gsrlang.runtime.values import RuntimeFailure, checker, value_problem

__all__ = ["CompositionError", "Plan", "Step"]


class CompositionError(RuntimeFailure):
    """An operator failed or produced a value outside its type, for one candidate."""

    def __init__(self, node_id: str, candidate: int, reason: str):
        super().__init__(reason)
        self.node_id = node_id
        self.candidate = candidate
        self.reason = reason


@attrs.frozen
class Step:
    index: int  # the node's position in program.nodes
    node: Node
    fn: Callable
    kwargs: dict
    ports: tuple[tuple[bool, tuple[int, ...]], ...]  # per positional port: (is a list port, source positions)
    check: Callable[[object], bool]


class Plan:
    """A program bound to its operator implementations, ready to compose."""

    def __init__(self, program: Program):
        self.program = program
        self.nodes = program.nodes
        self.index = {n.id: i for i, n in enumerate(program.nodes)}
        self.sink_index = self.index[program.sink]
        self.criteria: tuple[tuple[int, Node], ...] = tuple(
            (i, n) for i, n in enumerate(program.nodes) if n.kind == "criterion")
        self.consts: tuple[tuple[int, object], ...] = tuple(
            (i, n.value) for i, n in enumerate(program.nodes) if n.kind == "const")
        self.steps: tuple[Step, ...] = tuple(self._step(i, n) for i, n in enumerate(program.nodes)
                                             if n.kind not in ("criterion", "const"))

    def _step(self, i: int, node: Node) -> Step:
        impl = OPERATORS.get(node.op)
        if impl is None:
            raise RuntimeFailure(f"operator `{node.op}` has no implementation")
        sig = default_catalog().operator(node.op)
        list_ports = {p.name for p in sig.ports if p.is_list} if sig else set()
        ports = []
        port_types = {}
        for port in port_names(impl.fn):
            inputs = node.port_inputs(port)
            if port in list_ports:
                inputs = sorted(inputs, key=lambda inp: inp.slot)
            sources = tuple(self.index[inp.source] for inp in inputs)
            if not sources:
                raise RuntimeFailure(f"node `{node.id}` has nothing on port `{port}`")
            ports.append((port in list_ports, sources))
            port_types[port] = self.nodes[sources[0]].type
        kwargs = bind_params(node.op, node.params, port_types)
        return Step(i, node, impl.fn, kwargs, tuple(ports), checker(node.type))

    def compose(self, values: list, m: int) -> list:
        """Fill in `values` (one entry per node; criteria already set, each a tuple of m values).

        Returns `values`. Raises CompositionError at the first operator that fails; the
        outputs computed before it stay in `values` (the trace keeps them).
        """
        for i, v in self.consts:
            values[i] = (v,) * m
        for step in self.steps:
            fn, kwargs, ports = step.fn, step.kwargs, step.ports
            out = []
            for c in range(m):
                args = [[values[s][c] for s in sources] if is_list else values[sources[0]][c]
                        for is_list, sources in ports]
                try:
                    v = fn(*args, **kwargs)
                except RuntimeFailure as exc:
                    raise CompositionError(step.node.id, c, str(exc)) from None
                if not step.check(v):
                    problem = value_problem(v, step.node.type) or f"{v!r} does not fit `{step.node.type}`"
                    raise CompositionError(step.node.id, c, f"`{step.node.op}` produced a value that does "
                                                            f"not fit: {problem}")
                out.append(v)
            values[step.index] = tuple(out)
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
