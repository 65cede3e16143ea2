"""The checked program: a typed, acyclic evaluation graph plus its readout contract.

This is what the rest of the system consumes (runtime, replay, render, export, LSP).
Nodes are kept in a topological order; every edge names the port (and slot, for a
list port) it enters. `Program.to_json()` is the declarative JSON form (see
docs/program.schema.json) and `Program.content_hash` identifies the program's
meaning, not its layout: reformatting or re-commenting a file keeps the hash.
"""

from __future__ import annotations

from typing import Iterator

import attrs

from gsrlang.lang import records
from gsrlang.lang.catalog import Symbol, format_literal
from gsrlang.lang.span import Span
from gsrlang.lang.types import JType

JSON_FORMAT_VERSION = 1


@records.frozen
class Input:
    """An edge: the output of node `source` enters port `port` (at `slot` for a list port)."""

    port: str
    source: str
    slot: int | None = None


@records.frozen
class LevelSpec:
    key: str
    text: str
    value: float | None  # the level's value in [0, 1] (None for Nominal labels)


@records.frozen
class ExampleSpec:
    text: str
    verdict: object
    reason: str | None = None


@records.frozen
class ProcedureSpec:
    kind: str  # a judge kind (stdlib/judges.gsr): "llm" | "rule" | "human" | "verifier" | ...
    name: str  # the rule's name, a kind's positional argument (a verifier's name), or ""
    args: dict = attrs.field(factory=dict, hash=False)

    def describe(self) -> str:
        if self.kind != "rule" and self.name:
            return f'{self.kind}("{self.name}")'
        head = f"rule.{self.name}" if self.kind == "rule" else self.kind
        if not self.args:
            return head
        return head + "(" + ", ".join(f"{k}: {format_literal(v)}" for k, v in self.args.items()) + ")"


@records.frozen
class EnsembleSpec:
    judges: tuple[ProcedureSpec, ...]  # one per vote (a sample count repeats the procedure)
    aggregate: str
    args: dict = attrs.field(factory=dict, hash=False)


@records.frozen
class CriterionSpec:
    ask: str
    levels: tuple[LevelSpec, ...]
    examples: tuple[ExampleSpec, ...]
    procedure: ProcedureSpec
    ensemble: EnsembleSpec | None = None


@records.frozen
class Node:
    id: str
    kind: str  # "criterion" | "transform" | "reduce" | "gate" | "const"
    type: JType
    op: str | None = None
    params: dict = attrs.field(factory=dict, hash=False)
    inputs: tuple[Input, ...] = ()
    criterion: CriterionSpec | None = None
    value: object = None  # for "const" nodes
    named: bool = True  # declared with a name (criterion / node), not a nested call or literal
    span: Span = attrs.field(default=Span(0, 0), eq=False)
    path: str | None = attrs.field(default=None, eq=False)  # the file it was declared in (None: the main file)
    # what `gsr tune` may move: {parameter key (`at`, `weights[0]`, `to[good]`): (lo, hi)}
    tune: dict = attrs.field(factory=dict, hash=False, kw_only=True)
    # where each numeric parameter was written (main file only): {key: Span}, for tools that rewrite numbers
    number_spans: dict = attrs.field(factory=dict, hash=False, eq=False, kw_only=True, repr=False)

    def port_inputs(self, port: str) -> list[Input]:
        return [i for i in self.inputs if i.port == port]


@records.frozen
class PointwiseReadout:
    lo: float
    hi: float
    quantize: str  # "round" | "floor" | "ceil" | "thresholds" | "none"
    thresholds: tuple[float, ...] = ()
    tune: tuple = ()  # per cut point: the (lo, hi) `gsr tune` may move it within, or None; () when none may move
    spans: tuple = attrs.field(default=(), eq=False, repr=False)  # where each cut point was written


@records.frozen
class PairwiseReadout:
    epsilon: float = 0.0
    on_tie: str = "tie"  # "tie" | "abstain" | "first" | "second"


@records.frozen
class Readout:
    pointwise: PointwiseReadout | None = None
    pairwise: PairwiseReadout | None = None


@records.frozen
class CheckedProgram:
    name: str
    description: str
    nodes: tuple[Node, ...]  # in topological order: every node after its inputs
    sink: str
    readout: Readout
    path: str | None = attrs.field(default=None, eq=False)
    _by_id: dict = attrs.field(init=False, repr=False, eq=False)
    _hash: str | None = attrs.field(init=False, default=None, repr=False, eq=False)  # content_hash, once computed

    def __attrs_post_init__(self):
        object.__setattr__(self, "_by_id", {n.id: n for n in self.nodes})

    def node(self, node_id: str) -> Node:
        return self._by_id[node_id]

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._by_id

    @property
    def criteria(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind == "criterion")

    @property
    def operators(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind not in ("criterion", "const"))

    def edges(self) -> Iterator[tuple[str, str, Input]]:
        for n in self.nodes:
            for i in n.inputs:
                yield i.source, n.id, i

    # ---- the JSON form ----------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "format": "gsr-program",
            "version": JSON_FORMAT_VERSION,
            "name": self.name,
            "description": self.description,
            "nodes": [_node_json(n) for n in self.nodes],
            "sink": self.sink,
            "readout": _readout_json(self.readout),
        }

    @property
    def content_hash(self) -> str:
        """The hash of the JSON form without the tuning ranges: they say what may move, not what the program does.
        Computed once per program: a run names its program on every result line."""
        if self._hash is None:  # frozen, so the hash never changes
            import hashlib  # here, not at the top: `gsr check` needs no hash
            import json

            canonical = json.dumps(_without_tune(self.to_json()), sort_keys=True, separators=(",", ":"),
                                   ensure_ascii=False)
            object.__setattr__(self, "_hash", "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest())
        return self._hash


def _without_tune(doc: dict) -> dict:
    nodes = [{k: v for k, v in n.items() if k != "tune"} for n in doc["nodes"]]
    readout = dict(doc["readout"])
    if "pointwise" in readout:
        readout["pointwise"] = {k: v for k, v in readout["pointwise"].items() if k != "tune"}
    return {**doc, "nodes": nodes, "readout": readout}


def json_value(value):
    """Parameter values as JSON: enum members become {"enum": name}."""
    if isinstance(value, Symbol):
        return {"enum": value.name}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value


def _node_json(n: Node) -> dict:
    out: dict = {"id": n.id, "kind": n.kind, "type": n.type.to_json()}
    if n.op:
        out["op"] = n.op
    if n.params:
        out["params"] = json_value(n.params)
    if n.inputs:
        out["inputs"] = [{"port": i.port, "slot": i.slot, "source": i.source} for i in n.inputs]
    if n.tune:
        out["tune"] = {k: list(v) for k, v in n.tune.items()}
    if n.kind == "const":
        out["value"] = n.value
    if not n.named:
        out["anonymous"] = True
    if n.criterion:
        c = n.criterion
        crit: dict = {"ask": c.ask, "procedure": _procedure_json(c.procedure)}
        if c.levels:
            crit["levels"] = [{"key": lv.key, "text": lv.text, "value": lv.value} for lv in c.levels]
        if c.examples:
            crit["examples"] = [{"text": e.text, "verdict": json_value(e.verdict), "reason": e.reason}
                                for e in c.examples]
        if c.ensemble:
            crit["ensemble"] = {"judges": [_procedure_json(j) for j in c.ensemble.judges],
                                "aggregate": c.ensemble.aggregate, "args": json_value(c.ensemble.args)}
        out["criterion"] = crit
    return out


def _procedure_json(p: ProcedureSpec) -> dict:
    return {"kind": p.kind, "name": p.name, "args": json_value(p.args)}


def _readout_json(r: Readout) -> dict:
    out = {}
    if r.pointwise:
        p = r.pointwise
        out["pointwise"] = {"scale": [p.lo, p.hi], "quantize": p.quantize, "thresholds": list(p.thresholds)}
        if p.tune:
            out["pointwise"]["tune"] = [None if t is None else list(t) for t in p.tune]
    if r.pairwise:
        out["pairwise"] = {"epsilon": r.pairwise.epsilon, "on_tie": r.pairwise.on_tie}
    return out
