"""The JSON form of a checked program, and back to `.gsr` source (`gsr export`, `gsr import`).

`program_to_json(program)` is `Program.to_json()` (the graph in topological order,
each node with its kind, type, operator, parameters with defaults filled in, inputs
by port and slot, criterion specs, the sink and the readout) plus two informational
fields: `content_hash` and, on each criterion, `declared_type` in `.gsr` syntax.
docs/program.schema.json is its JSON Schema; docs/formatting-and-json.md shows an
example.

`json_to_source(doc)` writes `.gsr` source for a JSON document: the header, the
tasks, one `criterion` per criterion node, a `node` declaration per named operator
or constant node, anonymous nodes nested back as calls (or literals) at the one
place that uses them, and the sink. The text is formatted with the canonical
layout. It is meant to be read back through the checker (`analyze`), which is what
`gsr import` does: the JSON form is never trusted on its own.

Round trip: for a checked program P,
`analyze(json_to_source(program_to_json(P))).program.to_json() == P.to_json()`.
Declarations are written in an order that makes the checker rebuild the same
topological order; parameters equal to the catalogue's default are left out (the
checker fills them in again); `content_hash` and `declared_type` are ignored on
input, except that a `declared_type` that contradicts `type` is an error.

A malformed document raises `JsonFormError`, whose `errors` are messages that start
with the JSON path of the problem (`nodes[3].inputs[0].source: unknown node 'foo'`);
as many problems as can be found are reported at once.
"""

from __future__ import annotations

import math
import re
from collections import namedtuple
from typing import Any

from gsrlang.files.jsonl import json_type as _jtype
from gsrlang.files.jsonl import same
from gsrlang.lang.catalog import REQUIRED, Catalog, default_catalog
from gsrlang.lang.check.judgekinds import judge_kinds
from gsrlang.lang.program import JSON_FORMAT_VERSION, CheckedProgram, json_value
from gsrlang.lang.syntax.parser import MAX_INT, MAX_NESTING
from gsrlang.lang.tasks import MODES, ON_TIE, QUANTIZE, SETTINGS
from gsrlang.lang.types import JType, is_finite_number, is_number

FORMAT = "gsr-program"
NODE_KINDS = ("criterion", "transform", "reduce", "gate", "const")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LABEL = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)\Z")
_RESERVED_VALUES = ("true", "false")  # keywords where a value is expected: no node can be called that
_MAX_REORDER = 5000  # above this many nodes, declarations are written in the document's order
MAX_JSON_DEPTH = MAX_NESTING + 16  # a parameter's value nests like the source's brackets, inside the form's frame


class JsonFormError(Exception):
    """A JSON document that is not a valid program form; `errors` name the JSON path of each problem."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


def program_to_json(program: CheckedProgram) -> dict:
    """The JSON form of a checked program (see the module docstring)."""
    doc = program.to_json()
    for node_json, node in zip(doc["nodes"], program.nodes):
        if node.kind == "criterion":
            node_json["declared_type"] = declared_type(node.type)
    doc["content_hash"] = program.content_hash
    return doc


def declared_type(t: JType) -> str:
    """A criterion's judgment type in `.gsr` syntax (`Ordinal[1..5]?`, `Score[0..10]`, `Nominal{a, b}`)."""
    return t.text(exact_below=1e15)  # integral bounds from 1e15 on as floats, as the JSON form has always had them


def _num(x) -> str:
    """A number as `.gsr` source: integral floats as integers (`1..5`, not `1.0..5.0`)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


# ---- JSON -> source -------------------------------------------------------------------------------------
def json_to_source(doc: Any, catalog: Catalog | None = None) -> str:
    """`.gsr` source for a JSON program form, formatted. Raises JsonFormError for a malformed document."""
    from gsrlang.lang.syntax.formatter import format_source

    if problems := out_of_bounds(doc):
        raise JsonFormError(problems)
    return format_source(_Writer(catalog or default_catalog()).write(doc))


def out_of_bounds(doc: Any) -> list[str]:
    """Where a document holds what no program can (checked before anything else reads it, without recursion):
    arrays and objects nested more than MAX_JSON_DEPTH deep, integers beyond the language's MAX_INT."""
    problems: list[str] = []
    todo = [(doc, "", 0)]
    while todo and len(problems) < 20:
        value, path, depth = todo.pop()
        if isinstance(value, (list, dict)):
            if depth >= MAX_JSON_DEPTH:
                shown = path if len(path) <= 60 else path[:40] + "..." + path[-16:]
                problems.append(f"{shown}: nested more than {MAX_JSON_DEPTH} levels deep")
                continue
            pairs = enumerate(value) if isinstance(value, list) else value.items()
            todo.extend((v, _at(path, k), depth + 1) for k, v in reversed(list(pairs)))
        elif _is_int(value) and abs(value) > MAX_INT:
            problems.append(f"{path or '(document)'}: integer out of range (more than {MAX_INT:,} in magnitude)")
    return problems


def node_type_mismatches(doc: dict, program: CheckedProgram) -> list[str]:
    """For a document `json_to_source` accepted: where a node's stated `type` differs from the checked one."""
    out = []
    for i, node in enumerate(doc.get("nodes", [])):
        nid, stated = node.get("id"), node.get("type")
        if stated is None or nid not in program:
            continue
        actual = program.node(nid).type
        if JType.from_json(stated) != actual:
            out.append(f"nodes[{i}].type: the document says `{_type_text(JType.from_json(stated))}` but the "
                       f"checker infers `{_type_text(actual)}` for {json_repr(nid)}")
    return out


def _type_text(t: JType) -> str:
    values = " with level values [" + ", ".join(_num(v) for v in t.values) + "]" if t.kind == "ordinal" else ""
    return declared_type(t) + values


def _pair(v) -> bool:
    """`[lo, hi]`: a list of two finite numbers (a scale, a tuning range)."""
    return isinstance(v, list) and len(v) == 2 and all(map(is_finite_number, v))


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _at(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


class _Writer:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.errors: list[str] = []

    # ---- reporting and shape checks ----
    def err(self, path: str, message: str) -> None:
        self.errors.append(f"{path or '(document)'}: {message}")

    def obj(self, value, path: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict | None:
        if not isinstance(value, dict):
            self.err(path, f"expected an object, found {_jtype(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.err(_at(path, key), f"unknown field (expected one of {', '.join(allowed)})")
        for key in required:
            if key not in value:
                self.err(path, f"missing field `{key}`")
        return value

    def absent(self, obj: dict, path: str, keys: tuple[str, ...], message: str) -> None:
        """Report each of `keys` that `obj` has, which its kind of object has not: `message` with `{}` for the key."""
        for key in keys:
            if key in obj:
                self.err(_at(path, key), message.format(key))

    def typed(self, value, path: str, check, what: str) -> bool:
        if not check(value):
            self.err(path, f"expected {what}, found {_jtype(value)}"
                     + (f" {json_repr(value)}" if isinstance(value, (str, int, float)) else ""))
            return False
        return True

    def name(self, value, path: str, what: str) -> bool:
        if not self.typed(value, path, lambda v: isinstance(v, str), "a string"):
            return False
        if not _NAME.match(value):
            self.err(path, f"{json_repr(value)} is not a valid {what} (letters, digits and `_`, not first a digit)")
            return False
        return True

    # ---- the document ----
    def write(self, doc) -> str:
        top = self.obj(doc, "", ("format", "version", "name", "description", "nodes", "sink", "readout",
                                 "content_hash", "$schema"),
                       ("format", "version", "name", "nodes", "sink", "readout"))
        if top is None:
            raise JsonFormError(self.errors)
        if "format" in top and top["format"] != FORMAT:
            self.err("format", f"expected {json_repr(FORMAT)}, found {json_repr(top['format'])}")
        if "version" in top and top["version"] != JSON_FORMAT_VERSION:
            self.err("version", f"unsupported version {json_repr(top['version'])} (this gsr reads version "
                                f"{JSON_FORMAT_VERSION})")
        if "name" in top:
            self.name(top["name"], "name", "rubric name")
        description = top.get("description", "")
        self.typed(description, "description", lambda v: isinstance(v, str), "a string")
        if "content_hash" in top:
            self.typed(top["content_hash"], "content_hash", lambda v: isinstance(v, str), "a string")
        nodes = self._nodes(top.get("nodes"), "nodes") if "nodes" in top else None
        readout = self._readout(top.get("readout"), "readout") if "readout" in top else None
        sink = top.get("sink")
        if "sink" in top and self.typed(sink, "sink", lambda v: isinstance(v, str), "a string") \
                and nodes is not None and sink not in nodes:
            self.err("sink", f"unknown node {json_repr(sink)}")
        if self.errors or nodes is None:
            raise JsonFormError(self.errors)
        body = _DeclarationWriter(self, nodes, sink).declarations()
        if self.errors:
            raise JsonFormError(self.errors)
        head = f"rubric {top['name']}" + (f" {_string(description)}" if description else "")
        return "\n".join([head, "", *readout, "", *body]) + "\n"

    # ---- nodes ----
    def _nodes(self, value, path: str) -> dict[str, "_NodeInfo"] | None:
        if not self.typed(value, path, lambda v: isinstance(v, list), "an array of nodes"):
            return None
        if not value:
            self.err(path, "a program has at least one node")
            return None
        out: dict[str, _NodeInfo] = {}
        for i, raw in enumerate(value):
            npath = _at(path, i)
            info = self._node(raw, npath, i)
            if info is None:
                continue
            if info.id in out:
                self.err(_at(npath, "id"), f"duplicate node id {json_repr(info.id)} (first at "
                                           f"{out[info.id].path})")
                continue
            out[info.id] = info
        declared = {raw.get("id") for raw in value if isinstance(raw, dict) and isinstance(raw.get("id"), str)}
        for info in out.values():
            for inp in info.inputs:
                if inp.source not in declared:  # (a node that is there but invalid is reported already)
                    self.err(_at(inp.path, "source"), f"unknown node {json_repr(inp.source)}")
        return out

    def _node(self, raw, path: str, index: int) -> "_NodeInfo | None":
        node = self.obj(raw, path, ("id", "kind", "type", "op", "params", "inputs", "value", "anonymous",
                                    "criterion", "declared_type", "tune"), ("id", "kind"))
        if node is None:
            return None
        errors_before = len(self.errors)
        nid, kind = node.get("id"), node.get("kind")
        if not self.typed(nid, _at(path, "id"), lambda v: isinstance(v, str) and v != "", "a non-empty string"):
            return None
        if kind not in NODE_KINDS:
            self.err(_at(path, "kind"), f"unknown node kind {json_repr(kind)} (expected one of "
                                        f"{', '.join(NODE_KINDS)})")
            return None
        anonymous = node.get("anonymous", False)
        self.typed(anonymous, _at(path, "anonymous"), lambda v: isinstance(v, bool), "true or false")
        anonymous = anonymous is True
        if not anonymous:
            self.name(nid, _at(path, "id"), "node name")
            if nid in _RESERVED_VALUES:
                self.err(_at(path, "id"), f"{json_repr(nid)} is a keyword and cannot name a node")
        info = _NodeInfo(nid, kind, path, anonymous, index)
        if "type" in node:
            info.type = self._type(node["type"], _at(path, "type"))
        if kind == "criterion":
            self.absent(node, path, ("op", "params", "inputs", "value"), "a criterion node has no `{}`")
            if anonymous:
                self.err(_at(path, "anonymous"), "a criterion is always named")
            if "type" not in node:
                self.err(path, "missing field `type` (a criterion's judgment type)")
            info.criterion = self._criterion(node.get("criterion"), _at(path, "criterion")) \
                if "criterion" in node else _CriterionInfo()
            info.tune = self._tune(node.get("tune", {}), _at(path, "tune"))
            valued = {f"values[{key}]" for key, _, value in info.criterion.levels if value is not None}
            for key in info.tune:
                if key not in valued:
                    self.err(_at(path, "tune"), f"{json_repr(key)} names no level value of this criterion "
                                                "(a criterion's tunable numbers are `values[LEVEL]`)")
            if "declared_type" in node and info.type is not None:
                dt = node["declared_type"]
                if self.typed(dt, _at(path, "declared_type"), lambda v: isinstance(v, str), "a string") \
                        and dt.replace(" ", "") != declared_type(info.type).replace(" ", ""):
                    self.err(_at(path, "declared_type"), f"{json_repr(dt)} contradicts `type` "
                                                        f"({declared_type(info.type)})")
        else:
            self.absent(node, path, ("criterion", "declared_type"), "only criterion nodes have `{}`")
        if kind == "const":
            self.absent(node, path, ("op", "params", "inputs"), "a const node has no `{}`")
            if "value" not in node:
                self.err(path, "missing field `value` (a const node's number or boolean)")
            elif self.typed(node["value"], _at(path, "value"), lambda v: isinstance(v, bool) or is_finite_number(v),
                            "a number or a boolean"):
                info.value = node["value"]
        if kind in ("transform", "reduce", "gate"):
            self.absent(node, path, ("value",), "only const nodes have a `{}`")
            self._operator(node, path, info)
        return info if len(self.errors) == errors_before else None

    def _operator(self, node: dict, path: str, info: "_NodeInfo") -> None:
        op = node.get("op")
        if "op" not in node:
            self.err(path, f"missing field `op` (the operator of a {info.kind} node)")
            return
        if not self.typed(op, _at(path, "op"), lambda v: isinstance(v, str), "an operator name"):
            return
        sig = self.catalog.operator(op)
        if sig is None:
            self.err(_at(path, "op"), f"unknown operator {json_repr(op)}")
            return
        if sig.kind != info.kind:
            self.err(_at(path, "kind"), f"`{op}` is a {sig.kind}, not a {info.kind}")
        info.op = op
        tune = self._tune(node.get("tune", {}), _at(path, "tune"))
        params = node.get("params", {})
        if self.typed(params, _at(path, "params"), lambda v: isinstance(v, dict), "an object"):
            for name, value in params.items():
                ppath = _at(_at(path, "params"), name)
                psig = sig.param(name)
                if psig is None:
                    self.err(ppath, f"`{op}` has no parameter {json_repr(name)}"
                                    + (f" (its parameters: {', '.join(p.name for p in sig.params)})"
                                       if sig.params else ""))
                    continue
                if value is None and psig.default is None:
                    continue
                tuned = {k: r for k, r in tune.items() if k == name or k.startswith(name + "[")}
                if not tuned and not psig.required and same(value, json_value(psig.default)):
                    continue  # the default: the checker fills it in again
                text = self.literal(value, ppath, label=psig.pattern.kind == "var", tune=tuned, key=name)
                if text is not None:
                    info.params.append((name, text))
            for key in tune:
                if key.split("[")[0] not in params:
                    self.err(_at(path, "tune"), f"{json_repr(key)} names no parameter of this node")
            for p in sig.params:
                if p.required and p.name not in params:
                    self.err(_at(path, "params"), f"`{op}` needs its `{p.name}` parameter")
        inputs = node.get("inputs", [])
        if not self.typed(inputs, _at(path, "inputs"), lambda v: isinstance(v, list), "an array"):
            return
        seen: dict[tuple, int] = {}
        for k, raw in enumerate(inputs):
            ipath = _at(_at(path, "inputs"), k)
            inp = self.obj(raw, ipath, ("port", "slot", "source"), ("port", "source"))
            if inp is None or "port" not in inp or "source" not in inp:
                continue
            port, slot, source = inp.get("port"), inp.get("slot"), inp.get("source")
            if not self.typed(source, _at(ipath, "source"), lambda v: isinstance(v, str), "a node id") or \
                    not self.typed(port, _at(ipath, "port"), lambda v: isinstance(v, str), "a port name"):
                continue
            psig = sig.port(port)
            if psig is None:
                self.err(_at(ipath, "port"), f"`{op}` has no port {json_repr(port)} (its ports: "
                                             f"{', '.join(p.name for p in sig.ports)})")
                continue
            if psig.is_list:
                if not self.typed(slot, _at(ipath, "slot"), lambda v: _is_int(v) and v >= 0,
                                  f"a slot number (port `{port}` takes a list)"):
                    continue
            elif slot is not None:
                self.err(_at(ipath, "slot"), f"port `{port}` takes one value: its slot is null")
                continue
            if (port, slot) in seen:
                self.err(ipath, f"port `{port}`" + (f" slot {slot}" if slot is not None else "")
                         + f" is already fed by inputs[{seen[(port, slot)]}]")
                continue
            seen[(port, slot)] = k
            info.inputs.append(_Input(port, slot, source, ipath))
        for p in sig.ports:
            slots = sorted(s for (port, s) in seen if port == p.name)
            if not slots:
                self.err(_at(path, "inputs"), f"`{op}` needs an input for its `{p.name}` port")
            elif p.is_list and slots != list(range(len(slots))):
                missing = next(i for i in range(len(slots) + 1) if i not in slots)
                self.err(_at(path, "inputs"), f"port `{p.name}` has no slot {missing}: slots are numbered "
                                              f"0, 1, 2, ... without gaps")

    # ---- types ----
    def _type(self, raw, path: str) -> JType | None:
        t = self.obj(raw, path, ("kind", "optional", "lo", "hi", "labels", "values", "numbered"), ("kind",))
        if t is None:
            return None
        kind = t.get("kind")
        if kind not in ("bool", "score", "ordinal", "nominal"):
            self.err(_at(path, "kind"), f"unknown type kind {json_repr(kind)} (expected bool, score, ordinal "
                                        "or nominal)")
            return None
        optional = t.get("optional", False)
        if not self.typed(optional, _at(path, "optional"), lambda v: isinstance(v, bool), "true or false"):
            return None
        allowed = {"bool": (), "score": ("lo", "hi"), "ordinal": ("labels", "values", "numbered"),
                   "nominal": ("labels",)}[kind]
        for key in ("lo", "hi", "labels", "values", "numbered"):
            if key in t and key not in allowed and not (kind == "nominal" and key == "numbered"
                                                         and t[key] is False):
                self.err(_at(path, key), f"a {kind} type has no `{key}`")
                return None
        if kind == "bool":
            return JType("bool", optional=optional)
        if kind == "score":
            lo, hi = t.get("lo", 0.0), t.get("hi", 1.0)
            ok = self.typed(lo, _at(path, "lo"), is_finite_number, "a number")
            ok &= self.typed(hi, _at(path, "hi"), is_finite_number, "a number")
            if not ok:
                return None
            if not lo < hi:
                self.err(path, f"empty score interval [{lo}, {hi}]: lo must be below hi")
                return None
            return JType("score", float(lo), float(hi), optional=optional)
        labels = t.get("labels")
        if "labels" not in t:
            self.err(path, f"missing field `labels` (the levels of a {kind} type)")
            return None
        if not self.typed(labels, _at(path, "labels"), lambda v: isinstance(v, list), "an array of labels"):
            return None
        bad = [(k, lab) for k, lab in enumerate(labels) if not isinstance(lab, str) or not _LABEL.match(lab)]
        for k, lab in bad:
            self.err(_at(_at(path, "labels"), k), f"{json_repr(lab)} is not a label (a name or an integer)")
        if bad:
            return None
        if len(labels) < 2 or len(set(labels)) != len(labels):
            self.err(_at(path, "labels"), "at least two labels, all different")
            return None
        if kind == "nominal":
            return JType("nominal", labels=tuple(labels), optional=optional)
        numbered = t.get("numbered", False)
        if not self.typed(numbered, _at(path, "numbered"), lambda v: isinstance(v, bool), "true or false"):
            return None
        if numbered:
            if not all(lab.isdigit() for lab in labels) or \
                    [int(lab) for lab in labels] != list(range(int(labels[0]), int(labels[0]) + len(labels))):
                self.err(_at(path, "labels"), "a numbered ordinal has consecutive integer labels "
                                              "(\"1\", \"2\", ...)")
                return None
        k = len(labels)
        values = t.get("values", tuple(i / (k - 1) for i in range(k)))  # (a tuple: only a list passes below)
        if not self.typed(values, _at(path, "values"), lambda v: isinstance(v, list) and len(v) == k
                          and all(is_number(x) and 0 <= x <= 1 for x in v),
                          f"an array of {k} level values in [0, 1]"):
            return None
        return JType("ordinal", labels=tuple(labels), values=tuple(float(v) for v in values), numbered=numbered,
                     optional=optional)

    # ---- criteria ----
    def _criterion(self, raw, path: str) -> "_CriterionInfo":
        info = _CriterionInfo()
        c = self.obj(raw, path, ("ask", "procedure", "levels", "examples", "ensemble"))
        if c is None:
            return info
        ask = c.get("ask", "")
        if self.typed(ask, _at(path, "ask"), lambda v: isinstance(v, str), "a string"):
            info.ask = ask
        if "procedure" in c:
            info.procedure = self._procedure(c["procedure"], _at(path, "procedure"))
        for lpath, lv in self._objects(c, path, "levels", ("key", "text", "value"), ("key", "text")):
            key, text, value = lv["key"], lv["text"], lv.get("value")
            ok = self.typed(key, _at(lpath, "key"), lambda v: isinstance(v, str) and bool(_LABEL.match(v)),
                            "a level key (an integer, a label, true or false)")
            ok &= self.typed(text, _at(lpath, "text"), lambda v: isinstance(v, str), "a string")
            ok &= self.typed(value, _at(lpath, "value"), lambda v: v is None or is_finite_number(v),
                             "a number or null")
            if ok:
                info.levels.append((key, text, value))
        for epath, ex in self._objects(c, path, "examples", ("text", "verdict", "reason"), ("text", "verdict")):
            ok = self.typed(ex["text"], _at(epath, "text"), lambda v: isinstance(v, str), "a string")
            reason = ex.get("reason")
            ok &= self.typed(reason, _at(epath, "reason"), lambda v: v is None or isinstance(v, str),
                             "a string or null")
            verdict = self.literal(ex["verdict"], _at(epath, "verdict"), label=True, scalar=True,
                                    digits=False)
            if ok and verdict is not None:
                info.examples.append((ex["text"], verdict, reason))
        if "ensemble" in c:
            info.ensemble = self._ensemble(c["ensemble"], _at(path, "ensemble"))
            if info.ensemble is not None and info.procedure is not None \
                    and info.procedure != info.ensemble[0][0]:
                self.err(_at(path, "procedure"), "with an ensemble, the procedure is the ensemble's first judge")
        return info

    def _objects(self, parent: dict, path: str, field: str, keys, required):
        """(path, object) for each entry of the array `parent[field]` that is an object with the required keys
        (the others are reported)."""
        items = parent.get(field, [])
        if not self.typed(items, _at(path, field), lambda v: isinstance(v, list), "an array"):
            return
        for k, raw in enumerate(items):
            ipath = _at(_at(path, field), k)
            obj = self.obj(raw, ipath, keys, required)
            if obj is not None and all(r in obj for r in required):
                yield ipath, obj

    def _procedure(self, raw, path: str) -> tuple | None:
        p = self.obj(raw, path, ("kind", "name", "args"), ("kind",))
        if p is None or "kind" not in p:
            return None
        kind, name, args = p["kind"], p.get("name", ""), p.get("args", {})
        kinds = judge_kinds(self.catalog)
        judge = kinds.get(kind) if isinstance(kind, str) else None
        if judge is None:
            self.err(_at(path, "kind"), f"unknown procedure kind {json_repr(kind)} (expected one of "
                                        f"{', '.join(kinds)})")
            return None
        if not self.typed(name, _at(path, "name"), lambda v: isinstance(v, str), "a string") or \
                not self.typed(args, _at(path, "args"), lambda v: isinstance(v, dict), "an object"):
            return None
        if kind != "rule" and not judge.positional and name:
            self.err(_at(path, "name"), f"a `{kind}` procedure has no name (it is \"\")")
            return None
        defaults = {q.name: q.default for q in judge.sig.params if q.default is not REQUIRED}
        if kind == "rule":
            if not self.name(name, _at(path, "name"), "rule name"):
                return None
            rule = self.catalog.rules.get(name)
            if rule is None:
                self.err(_at(path, "name"), f"unknown rule {json_repr(name)} (rules: "
                                            f"{', '.join(sorted(self.catalog.rules))})")
                return None
            defaults = {q.name: q.default for q in rule.params if q.default is not REQUIRED}
        if judge.positional:
            if not name:
                self.err(_at(path, "name"), f"a `{kind}` procedure needs its {judge.positional}")
                return None
            if args:
                self.err(_at(path, "args"), f"a `{kind}` procedure takes no other arguments")
                return None
            return (kind, name, (("", _string(name)),))
        out = []
        for key, value in args.items():
            apath = _at(_at(path, "args"), key)
            if not _NAME.match(key):
                self.err(apath, f"{json_repr(key)} is not a parameter name")
                continue
            if value is None or (key in defaults and same(value, json_value(defaults[key]))):
                continue
            if (text := self.literal(value, apath)) is not None:
                out.append((key, text))
        return (kind, name, tuple(out))

    def _ensemble(self, raw, path: str) -> tuple | None:
        e = self.obj(raw, path, ("judges", "aggregate", "args"), ("judges", "aggregate"))
        if e is None or "judges" not in e or "aggregate" not in e:
            return None
        judges = e["judges"]
        if not self.typed(judges, _at(path, "judges"), lambda v: isinstance(v, list) and len(v) >= 2,
                          "an array of at least 2 procedures"):
            return None
        procs = [self._procedure(j, _at(_at(path, "judges"), k)) for k, j in enumerate(judges)]
        if not self.name(e["aggregate"], _at(path, "aggregate"), "aggregation"):
            return None
        args = e.get("args", {})
        if not self.typed(args, _at(path, "args"), lambda v: isinstance(v, dict), "an object"):
            return None
        agg_args = [(key, text) for key, value in args.items()
                    if (text := self.literal(value, _at(_at(path, "args"), key))) is not None]
        if any(p is None for p in procs):
            return None
        return (tuple(procs), e["aggregate"], tuple(agg_args))

    # ---- readout ----
    def _tune(self, raw, path: str) -> dict:
        """A node's or a readout's tuning ranges: {key: (lo, hi)} (see gsrlang.lang.check.tunable)."""
        ok = self.typed(raw, path, lambda v: isinstance(v, dict) and all(_pair(r) for r in v.values()),
                        "an object of [lo, hi] ranges")
        return {k: tuple(v) for k, v in raw.items()} if ok else {}

    def _readout(self, raw, path: str) -> list[str]:
        r = self.obj(raw, path, tuple(MODES))
        if r is None:
            return []
        if not r:
            self.err(path, "a readout has `pointwise`, `pairwise` or both")
        lines = []
        if "pointwise" in r:
            ppath = _at(path, "pointwise")
            p = self.obj(r["pointwise"], ppath, ("scale", "quantize", "thresholds", "tune"), ("scale",))
            if p is not None and "scale" in p:
                scale = p["scale"]
                quantize = p.get("quantize", SETTINGS["quantize"].default)
                thresholds = p.get("thresholds", [])
                ok = self.typed(scale, _at(ppath, "scale"), _pair, "[lo, hi]")
                if quantize not in QUANTIZE:
                    self.err(_at(ppath, "quantize"), f"expected one of {', '.join(QUANTIZE)}, found "
                                                     f"{json_repr(quantize)}")
                    ok = False
                ok &= self.typed(thresholds, _at(ppath, "thresholds"),
                                 lambda v: isinstance(v, list) and all(map(is_finite_number, v)), "an array of numbers")
                if ok and thresholds and quantize != "thresholds":
                    self.err(_at(ppath, "thresholds"), "cut points are given only with `quantize: \"thresholds\"`")
                    ok = False
                tune = p.get("tune", [])
                ok &= self.typed(tune, _at(ppath, "tune"), lambda v: isinstance(v, list) and len(v) == len(thresholds)
                                 and all(t is None or _pair(t) for t in v),
                                 "one [lo, hi] range or null per cut point") if "tune" in p else True
                if ok:
                    cuts = [_num(x) + (f" in {_num(t[0])}..{_num(t[1])}" if tune and tune[i] else "")
                            for i, (x, t) in enumerate(zip(thresholds, tune or [None] * len(thresholds)))]
                    q = "thresholds(" + ", ".join(cuts) + ")" if quantize == "thresholds" else quantize
                    lines.append(f"task pointwise {{ scale = {_num(scale[0])}..{_num(scale[1])}  quantize = {q} }}")
        if "pairwise" in r:
            ppath = _at(path, "pairwise")
            p = self.obj(r["pairwise"], ppath, ("epsilon", "on_tie"))
            if p is not None:
                epsilon = p.get("epsilon", SETTINGS["epsilon"].default)
                on_tie = p.get("on_tie", SETTINGS["on_tie"].default)
                ok = self.typed(epsilon, _at(ppath, "epsilon"), is_finite_number, "a number")
                if on_tie not in ON_TIE:
                    self.err(_at(ppath, "on_tie"), f"expected one of {', '.join(ON_TIE)}, found {json_repr(on_tie)}")
                    ok = False
                if ok:
                    lines.append(f"task pairwise {{ epsilon = {float(epsilon)!r}  on_tie = {on_tie} }}")
        return lines

    # ---- literals ----
    def literal(self, value, path: str, label: bool = False, scalar: bool = False, digits: bool = True,
                tune: dict | None = None, key: str = "") -> str | None:
        """A JSON value as a `.gsr` literal.

        `label`: a string that is a name (or, with `digits`, an integer) is written bare, as a label;
        `scalar`: lists and objects are errors; `tune`: tuning ranges by key (`at`, `weights[0]`), `key`
        the value's own key.
        """
        if isinstance(value, bool):
            return "true" if value else "false"
        if is_number(value):
            if not math.isfinite(value):
                self.err(path, "numbers must be finite")
                return None
            text = _num(value) if _is_int(value) else repr(float(value))
            if tune and key in tune:
                text += f" in {_num(tune[key][0])}..{_num(tune[key][1])}"
            return text
        if isinstance(value, str):
            if label and (_NAME.match(value) and value not in _RESERVED_VALUES
                          or digits and value.isdigit() and value.isascii()):
                return value
            return _string(value)
        if scalar:
            self.err(path, f"expected a number, a boolean or a string, found {_jtype(value)}")
            return None
        if isinstance(value, list):
            parts = [self.literal(v, _at(path, k), label, tune=tune, key=f"{key}[{k}]") for k, v in enumerate(value)]
            return None if None in parts else "[" + ", ".join(parts) + "]"
        if isinstance(value, dict):
            if set(value) == {"enum"}:
                member = value["enum"]
                if isinstance(member, str) and _NAME.match(member):
                    return member
                self.err(_at(path, "enum"), f"{json_repr(member)} is not an enum member name")
                return None
            parts = []
            for entry, v in value.items():
                text = self.literal(v, _at(path, entry), label, tune=tune, key=f"{key}[{entry}]")
                if text is None:
                    return None
                k = entry if (_NAME.match(entry) and entry not in _RESERVED_VALUES) or \
                    (entry.isdigit() and entry.isascii()) else _string(entry)
                parts.append(f"{k}: {text}")
            return "{" + ", ".join(parts) + "}"
        self.err(path, f"{_jtype(value)} is not a value a .gsr program can state")
        return None


def _string(value: str) -> str:
    from gsrlang.lang.syntax.formatter import string_literal

    return string_literal(value, triple="\n" in value)


def json_repr(value) -> str:
    """A value for a message: strings in single quotes (`'foo'`), anything else as JSON."""
    import json

    try:
        text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:56] + "..." + text[-1]


# ---- the plan: which declaration is written where ----------------------------------------------------------
_Input = namedtuple("_Input", "port slot source path")  # an input of a node, `path` its place in the document


class _CriterionInfo:
    def __init__(self):
        self.ask = ""
        self.procedure: tuple | None = None
        self.levels: list = []
        self.examples: list = []
        self.ensemble: tuple | None = None


class _NodeInfo:
    def __init__(self, nid, kind, path, anonymous, index):
        self.id, self.kind, self.path, self.anonymous, self.index = nid, kind, path, anonymous, index
        self.type: JType | None = None
        self.op: str | None = None
        self.params: list[tuple[str, str]] = []
        self.inputs: list[_Input] = []
        self.value = None
        self.criterion: _CriterionInfo | None = None
        self.tune: dict = {}  # a criterion's tunable level values: {"values[LEVEL]": (lo, hi)}


class _DeclarationWriter:
    def __init__(self, writer: _Writer, nodes: dict[str, _NodeInfo], sink: str):
        self.w, self.nodes, self.sink = writer, nodes, sink
        self.catalog = writer.catalog
        self.consumer: dict[str, str] = {}
        for info in nodes.values():
            for inp in info.inputs:
                if nodes[inp.source].anonymous:
                    if inp.source in self.consumer:
                        writer.err(_at(inp.path, "source"), f"anonymous node {json_repr(inp.source)} is already "
                                                            f"used by {json_repr(self.consumer[inp.source])}: an "
                                                            "anonymous node has one consumer (name it to share it)")
                    else:
                        self.consumer[inp.source] = info.id
        for info in nodes.values():
            if info.anonymous and info.id not in self.consumer and info.id != sink:
                writer.err(info.path, f"anonymous node {json_repr(info.id)} is used by no node (name it, or "
                                      "remove it)")
            elif info.anonymous and info.id == sink and info.id in self.consumer:
                writer.err(info.path, f"the anonymous sink {json_repr(info.id)} is also used by "
                                      f"{json_repr(self.consumer[info.id])}: name it to share it")

    def _ordered_inputs(self, info: _NodeInfo) -> list[_Input]:
        rank = {p.name: k for k, p in enumerate(self.catalog.operator(info.op).ports)}
        return sorted(info.inputs, key=lambda i: (rank[i.port], i.slot or 0))

    def declarations(self) -> list[str]:
        nodes = self.nodes
        criteria = [n for n in nodes.values() if n.kind == "criterion"]
        named = [n for n in nodes.values() if n.kind != "criterion" and not n.anonymous]
        out = [self._criterion(c) for c in criteria]
        if out:
            out.append("")
        out.extend(f"node {info.id} = {self._expr(info.id, set(), force=True)}"
                   for info in self._declaration_order(criteria, named))
        sink = nodes[self.sink]
        out += ["", f"sink {self._expr(sink.id, set(), force=sink.anonymous)}"]
        return out

    # ---- the order the checker will see ----
    def _declaration_order(self, criteria, named) -> list[_NodeInfo]:
        """Named nodes in an order whose depth-first post-order (the checker's) is the document's order.

        The checker visits declarations in order and lists each one's unvisited inputs before it; the
        document lists nodes in that order. Greedily, the next declared root is the first node whose
        traversal gives exactly the next stretch of the document; nodes reached from it follow it.
        """
        if len(self.nodes) > _MAX_REORDER:
            return named
        target = [n.id for n in sorted(self.nodes.values(), key=lambda n: n.index) if n.kind != "criterion"]
        visited = {c.id for c in criteria}
        is_named = {n.id for n in named}
        order: list[_NodeInfo] = []
        pos = 0
        while pos < len(target):
            for q in range(pos, len(target)):
                cand = target[q]
                if cand not in is_named or cand in visited:
                    continue
                walk = self._post_order(cand, visited)
                if walk == target[pos:q + 1]:
                    order.append(self.nodes[cand])
                    order.extend(self.nodes[n] for n in walk[:-1] if n in is_named)
                    visited.update(walk)
                    pos = q + 1
                    break
            else:
                break  # not a traversal order (a document written by hand): keep the rest in its order
        done = {n.id for n in order}
        order.extend(n for n in named if n.id not in done)
        return order

    def _post_order(self, root: str, visited: set[str]) -> list[str]:
        out: list[str] = []
        seen = {*visited, root}
        stack = [(root, iter(self._sources(root)))]
        while stack:
            nid, it = stack[-1]
            for src in it:
                if src not in seen and src in self.nodes:
                    seen.add(src)
                    stack.append((src, iter(self._sources(src))))
                    break
            else:
                stack.pop()
                out.append(nid)
        return out

    def _sources(self, nid: str) -> list[str]:
        info = self.nodes[nid]
        return [] if info.op is None else [i.source for i in self._ordered_inputs(info)]

    # ---- writing ----
    def _expr(self, nid: str, stack: set[str], force: bool = False, depth: int = 0) -> str:
        """A node as source: its name, or (anonymous) its call nested in place; `depth` brackets enclose it."""
        info = self.nodes[nid]
        if not force and not info.anonymous:
            return nid
        if nid in stack:
            self.w.err(info.path, f"anonymous node {json_repr(nid)} is part of a cycle")
            return nid
        if info.kind == "const":
            return self.w.literal(info.value, _at(info.path, "value")) or "0"
        if info.op is None:  # pragma: no cover - criteria are always named
            return nid
        if depth >= MAX_NESTING:  # the source would nest deeper than the parser reads (GSR004)
            self.w.err(info.path, f"anonymous nodes nest more than {MAX_NESTING} brackets deep here: make "
                                  "some of them named nodes (`\"anonymous\": false`, an id that is a name)")
            return nid
        stack = stack | {nid}
        sig = self.catalog.operator(info.op)
        args = []
        inputs = self._ordered_inputs(info)
        for p in sig.ports:
            inner = depth + 1 + p.is_list  # the call's `(`, and a list port's `[`
            feeds = [self._expr(i.source, stack, depth=inner) for i in inputs if i.port == p.name]
            value = "[" + ", ".join(feeds) + "]" if p.is_list else (feeds[0] if feeds else "")
            positional = sig.kind == "transform" and len(sig.ports) == 1  # normalize(x), default(x, value: ...)
            args.append(value if positional else f"{p.name}: {value}")
        args += [f"{name}: {text}" for name, text in info.params]
        return f"{info.op}({', '.join(args)})"

    def _criterion(self, info: _NodeInfo) -> str:
        c = info.criterion
        head = f"criterion {info.id}: {declared_type(info.type)}" if info.type else f"criterion {info.id}: Bool"
        body = []
        if c.ask:
            body.append(f"ask {_string(c.ask)}")
        t = info.type
        values = {}
        for key, text, value in c.levels:
            line = f"level {key} {_string(text)}"
            if value is not None:
                line += f" = {repr(float(value)) if not _is_int(value) else str(value)}"
                if f"values[{key}]" in info.tune:
                    lo, hi = info.tune[f"values[{key}]"]
                    line += f" in {_num(lo)}..{_num(hi)}"
                values[key] = float(value)
            body.append(line)
        if t is not None and t.kind == "ordinal":
            k = len(t.labels)
            expected = [values.get(label, i / (k - 1)) for i, label in enumerate(t.labels)]
            for j, (got, want) in enumerate(zip(t.values, expected)):
                if abs(got - want) > 1e-9:
                    self.w.err(_at(_at(info.path, "type"), "values") + f"[{j}]",
                               f"level `{t.labels[j]}` has value {got} but its levels give {want}: give it with "
                               f"a level (`\"value\": {got}` in criterion.levels)")
                    break
        body += [f"example {_string(text)} -> {verdict}" + (f" because {_string(reason)}" if reason is not None else "")
                 for text, verdict, reason in c.examples]
        proc = c.procedure
        if c.ensemble is not None:
            judges, agg, agg_args = c.ensemble
            agg_text = agg + ("(" + ", ".join(f"{k}: {v}" for k, v in agg_args) + ")" if agg_args else "")
            judges_text = str(len(judges)) if all(j == ("llm", "", ()) for j in judges) else \
                "[" + ", ".join(_procedure_text(j) for j in judges) + "]"
            body.append(f"judges {judges_text} aggregate {agg_text}")
        elif proc is not None and proc != ("llm", "", ()):
            head += " = " + _procedure_text(proc)
        return head + " {\n" + "\n".join("  " + line for line in body) + "\n}" if body else head


def _procedure_text(p: tuple) -> str:
    kind, name, args = p
    if args and args[0][0] == "":  # a kind whose one argument is written without its name
        return f"{kind}({args[0][1]})"
    head = f"rule.{name}" if kind == "rule" else kind
    if not args:
        return head + "()" if kind == "rule" else head
    return head + "(" + ", ".join(f"{k}: {v}" for k, v in args) + ")"
