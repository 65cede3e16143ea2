"""`--constrain json`: ask for the program as JSON under a JSON Schema (structured outputs).

Servers that enforce a `json_schema` response format (OpenAI, vLLM, llama.cpp, Ollama)
then return parseable JSON even from small models; the JSON becomes `.gsr` source
here, and the checker decides as for any other answer.

Two JSON forms are supported:

* the project's declarative JSON form (what `gsr export --json` writes), through
  `gsrlang.lang.jsonform.json_to_source` under `docs/program.schema.json`, whenever the schema is
  installed (a source checkout; `form="auto"`, the default, or `"project"`);
* otherwise, or with `form="sketch"`, a small form of this module's own (`SKETCH_SCHEMA`): the program's
  declarations as JSON objects, with types, procedures and operator expressions written
  as `.gsr` text. Its task declaration is not asked for: it is the spec's contract
  (the model only chooses `thresholds` cut points when the contract leaves them open).
  It is easier for small models than the full graph form: no node ids, types or edges.
"""

from __future__ import annotations

import json
from typing import Any

from gsrlang.lang.catalog import Catalog, format_literal

SKETCH_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "the rubric's name (a .gsr NAME)"},
        "description": {"type": "string", "description": "one line: what the rubric measures"},
        "imports": {"type": "array", "items": {"type": "string"},
                    "description": "stdlib fragments to import, e.g. std/fragments/safety.gsr"},
        "thresholds": {"type": "array", "items": {"type": "number"},
                       "description": "cut points, only when the task contract says thresholds(...)"},
        "criteria": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"},
            "type": {"type": "string", "description": "a .gsr type: Bool, Ordinal[1..5], Ordinal{a, b}, Nominal{a, b}, "
                                                      "Score, with ? to abstain"},
            "procedure": {"type": "string", "description": "omit for llm; e.g. rule.word_count(above: 600)"},
            "ask": {"type": "string", "description": "the question about the response"},
            "levels": {"type": "array", "items": {"type": "object", "properties": {
                "key": {"type": "string"}, "text": {"type": "string"}, "value": {"type": "number"}},
                "required": ["key", "text"]}},
        }, "required": ["name", "type"]}},
        "nodes": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"},
            "expr": {"type": "string",
                     "description": "a .gsr expression, e.g. cap(base: body, trigger: unsafe, at: 0.25)"}},
            "required": ["name", "expr"]}},
        "sink": {"type": "string", "description": "the name (or expression) of the final Score"},
    },
    "required": ["name", "description", "criteria", "nodes", "sink"],
}

_SKETCH_NOTE = """\
In this session, answer with the program's JSON form instead of source (this overrides
rule 1): a JSON object with the rubric's `name` and `description`, optional `imports`
(stdlib fragments), `criteria` (each with `name`, `type` written as in .gsr, an optional
`procedure` such as `rule.word_count(above: 600)`, `ask`, and `levels` with `key`,
`text` and an optional `value`), `nodes` (each a `name` and a .gsr expression `expr`)
and the `sink` (a name or expression). The task declaration is the contract given in the
request and is added for you; give `thresholds` only when the contract says
`thresholds(...)`.
"""


def _project_schema() -> dict | None:
    """The project JSON form's schema, docs/program.schema.json, or None where it is not installed (a wheel
    ships no docs but language.md)."""
    from gsrlang.lang.resources import data_dir

    try:
        return json.loads((data_dir("docs") / "program.schema.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def request_parts(form: str = "auto") -> tuple[dict, str, str]:
    """(schema, schema name, note appended to the system message).

    `form` is "project" (the declarative JSON form), "sketch", or "auto" (the project's when installed).
    """
    schema = _project_schema() if form in ("auto", "project") else None
    if form == "project" and schema is None:
        raise ValueError("the project's JSON form (gsrlang.lang.jsonform, docs/program.schema.json) is not installed")
    if schema is not None:
        note = ("In this session, answer with the program's declarative JSON form (the JSON that "
                "`gsr export --json` writes: format, version, name, description, nodes in topological order, "
                "sink, readout) instead of source, conforming to the JSON Schema given (this overrides rule 1). "
                "Its readout carries the task contract.\n")
        return schema, "gsr_program", note
    return SKETCH_SCHEMA, "gsr_program_sketch", _SKETCH_NOTE


def to_program(data: Any, spec, catalog: Catalog | None = None, form: str = "auto") -> tuple[str | None, str | None]:
    """(.gsr source, None), or (None, why the JSON is not a program)."""
    if not isinstance(data, dict):
        return None, "the JSON answer is not an object"
    if form in ("auto", "project") and _project_schema() is not None:
        from gsrlang.lang.jsonform import JsonFormError, json_to_source

        try:
            return json_to_source({"format": "gsr-program", "version": 1, **data}, catalog), None
        except JsonFormError as exc:
            return None, f"the JSON answer is not a program: {'; '.join(exc.errors)}"
    try:
        return sketch_to_source(data, spec), None
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"the JSON answer is not a program ({type(exc).__name__}: {exc})"


def _string(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return format_literal(value)


def _name(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a name, got {value!r}")
    return value.strip()


def sketch_to_source(doc: dict, spec) -> str:
    """Render the sketch form as .gsr source (types and expressions are copied as text)."""
    from gsrlang.compiler.spec import Pointwise, fmt_number

    out = [f"rubric {_name(doc['name'])} {_string(doc.get('description', ''))}", ""]
    out += [f"import {_string(imp)}" for imp in doc.get("imports") or []]
    contract = spec.contract
    task = contract.task_line()
    if isinstance(contract, Pointwise) and contract.quantize == "thresholds":
        cuts = doc.get("thresholds") or []
        if not isinstance(cuts, list) or not all(isinstance(c, (int, float)) for c in cuts):
            raise ValueError("thresholds must be a list of numbers")
        task = task.replace("thresholds(...)", "thresholds(" + ", ".join(fmt_number(c) for c in cuts) + ")")
    out += [task, ""]
    for c in doc.get("criteria") or []:
        head = f"criterion {_name(c['name'])}: {str(c['type']).strip()}"
        if c.get("procedure"):
            head += f" = {str(c['procedure']).strip()}"
        body = [f"  ask {_string(c['ask'])}"] if c.get("ask") else []
        body += [f"  level {str(lv['key']).strip()} {_string(lv['text'])}"
                 + (f" = {fmt_number(lv['value'])}" if lv.get("value") is not None else "")
                 for lv in c.get("levels") or []]
        out.append(head + (" {\n" + "\n".join(body) + "\n}" if body else ""))
    out += ["", *(f"node {_name(n['name'])} = {str(n['expr']).strip()}" for n in doc.get("nodes") or [])]
    out += ["", f"sink {str(doc['sink']).strip()}"]
    return "\n".join(out) + "\n"
