"""One traced item's questions, answered once: the value of a node, whether a gate fired, what changed the score.

Render, report, explain and the demo used to derive "did this gate fire" each in its
own way from a trace record's nodes. They now ask a `TraceView`, built from a record
(`TraceView.of_record`, the version-2 `nodes` list) or from outputs and inputs
already decoded (render's overlay, which also reads version 1).

It also gives the record's node entries (`node`, `criteria`, `judgments`), so that a
consumer of traces asks it rather than walking a record's `nodes` itself.

Values are as the record holds them: one entry per candidate; an abstention is
whatever the source uses for it (None in a record). A node whose output was not
computed (the item failed before it) has no values.
"""

from __future__ import annotations

from operator import eq
from typing import Callable, Mapping

__all__ = ["TraceView"]

class TraceView:
    """The nodes of one traced item: outputs per candidate, inputs per port, kinds."""

    def __init__(self, outputs: Mapping[str, tuple | list | None], inputs: Mapping[str, Mapping[str, list]],
                 kinds: Mapping[str, str], same: Callable[[object, object], bool] = eq,
                 nodes: Mapping[str, Mapping] | None = None):
        self.outputs = outputs
        self.inputs = inputs
        self.kinds = kinds
        self.same = same  # how two values are compared (render tolerates a last-bit difference)
        self.nodes = nodes if nodes is not None else {}  # node id -> the record's node dict, in trace order

    @classmethod
    def of_record(cls, record: Mapping) -> "TraceView":
        """The view of a version-2 trace record (its `nodes`: id, kind, inputs, output)."""
        return cls.of_nodes(record.get("nodes") or ())

    @classmethod
    def of_nodes(cls, nodes) -> "TraceView":
        """The view of a record's node dicts."""
        by_id = {n["id"]: n for n in nodes}
        items = by_id.items()
        return cls({k: n.get("output") for k, n in items}, {k: n.get("inputs") or {} for k, n in items},
                   {k: n.get("kind") for k, n in items}, nodes=by_id)

    # ---- the record's nodes ------------------------------------------------------------------------------
    @property
    def computed(self) -> bool:
        """Whether the record has node values (an item that failed, or ran under no program, has none)."""
        return bool(self.nodes)

    def node(self, node_id: str) -> Mapping | None:
        """The record's entry for a node (id, kind, type, inputs, output, judgments...), None when absent."""
        return self.nodes.get(node_id)

    def criteria(self) -> list[Mapping]:
        """The criterion nodes' entries, in trace order."""
        return [n for n in self.nodes.values() if n.get("kind") == "criterion"]

    def judgments(self, node_id: str) -> list:
        """A criterion's recorded judgments, one per candidate (value, status, reason, raw, provenance)."""
        return list((self.nodes.get(node_id) or {}).get("judgments") or ())

    def judged(self) -> dict:
        """{criterion id: its judgments} for every node that records judgments."""
        return {k: n["judgments"] for k, n in self.nodes.items() if "judgments" in n}

    def abstained(self) -> bool:
        """Whether some criterion's judgment abstained (for some candidate)."""
        return any(j.get("status") == "abstained" for n in self.nodes.values() for j in n.get("judgments") or ())

    # ---- gates -------------------------------------------------------------------------------------------

    def values(self, node_id: str) -> tuple:
        """The node's value per candidate (empty when it is not in the trace or was not computed)."""
        return tuple(self.outputs.get(node_id) or ())

    def value(self, node_id: str, c: int):
        """The value of node `node_id` for candidate `c` (None when there is none)."""
        vals = self.values(node_id)
        return vals[c] if c < len(vals) else None

    def source(self, node_id: str, port: str) -> str | None:
        """The (first) node on a port of `node_id`."""
        return ((self.inputs.get(node_id) or {}).get(port) or [None])[0]

    def gates(self) -> list[str]:
        return [n for n, kind in self.kinds.items() if kind == "gate"]

    def trigger(self, gate: str) -> tuple:
        """The gate's trigger values per candidate."""
        src = self.source(gate, "trigger")
        return self.values(src) if src is not None else ()

    def fired(self, gate: str, c: int | None = None) -> bool:
        """Whether the gate's trigger held (for candidate `c`, or for some candidate)."""
        trig = self.trigger(gate)
        return any(t is True for t in trig) if c is None else c < len(trig) and trig[c] is True

    def changed(self, gate: str, c: int | None = None) -> bool:
        """Whether the gate fired and its value differs from its base's (for candidate `c`, or for some
        candidate): the gate changed what flows towards the score."""
        base = self.source(gate, "base")
        out, below, trig = self.values(gate), self.values(base) if base else (), self.trigger(gate)
        rows = range(min(len(trig), len(out), len(below))) if c is None else [c]
        return any(r < len(trig) and trig[r] is True and r < len(out) and r < len(below)
                   and not self.same(out[r], below[r]) for r in rows)

    def fired_gates(self) -> list[str]:
        return [g for g in self.gates() if self.fired(g)]

    def score_changes(self) -> list[str]:
        """The gates that changed the value they pass on, for some candidate, in trace order."""
        return [g for g in self.gates() if self.changed(g)]
