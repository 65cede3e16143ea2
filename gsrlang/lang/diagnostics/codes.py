"""Every diagnostic code: a title, a severity, and (in explanations.py) a long explanation.

Codes are stable: a code's meaning never changes once published. Groups:
0xx reading and syntax, 01x imports, 1xx names, 2xx ports and arity, 3xx types and
values, 4xx graph shape, 5xx sink and readout, 6xx criterion procedures, 7xx warnings.
"""

from __future__ import annotations

from gsrlang.lang import records


@records.frozen
class CodeInfo:
    code: str
    title: str
    severity: str = "error"


_CODES = [
    ("GSR001", "syntax error"),
    ("GSR002", "unexpected character or unterminated string"),
    ("GSR003", "file is not UTF-8 text"),
    ("GSR004", "file too large or nested too deeply"),
    ("GSR005", "file cannot be read"),
    ("GSR006", "number literal out of range"),
    ("GSR010", "imported file not found"),
    ("GSR011", "import not allowed"),
    ("GSR012", "import cycle"),
    ("GSR101", "unknown name"),
    ("GSR102", "unknown operator"),
    ("GSR103", "duplicate name"),
    ("GSR104", "unknown judge kind or rule"),
    ("GSR105", "unknown enum value"),
    ("GSR106", "second header"),
    ("GSR107", "declaration not allowed here"),
    ("GSR201", "unknown port or parameter"),
    ("GSR202", "missing port or parameter"),
    ("GSR203", "argument given twice"),
    ("GSR204", "empty list port"),
    ("GSR205", "list length differs from the port's slots"),
    ("GSR206", "misplaced positional argument"),
    ("GSR207", "list given to a single port, or a single value to a list port"),
    ("GSR301", "type mismatch"),
    ("GSR302", "abstention not accepted here"),
    ("GSR304", "parameter value of the wrong type"),
    ("GSR305", "value out of range"),
    ("GSR306", "invalid level value"),
    ("GSR307", "invalid criterion type"),
    ("GSR308", "incomplete or invalid label mapping"),
    ("GSR309", "invalid level anchor"),
    ("GSR310", "example verdict does not fit the type"),
    ("GSR311", "missing-value sentinel does not fit the criterion"),
    ("GSR312", "comparison with a level the judgment does not have"),
    ("GSR320", "number cannot be tuned here"),
    ("GSR401", "cycle in the graph"),
    ("GSR402", "node does not reach the sink"),
    ("GSR501", "no sink"),
    ("GSR502", "several sinks"),
    ("GSR503", "sink is not a Score"),
    ("GSR504", "readout cannot read the sink"),
    ("GSR505", "invalid task"),
    ("GSR506", "duplicate task"),
    ("GSR507", "invalid quantization thresholds"),
    ("GSR601", "malformed criterion procedure"),
    ("GSR602", "model-judged criterion without a question"),
    ("GSR603", "invalid ensemble"),
    ("GSR701", "parameter has no effect", "warning"),
    ("GSR702", "gate trigger is constant", "warning"),
    ("GSR703", "weights sum to zero", "warning"),
    ("GSR704", "default on a judgment that cannot abstain", "warning"),
    ("GSR705", "bidirectional control character in the text", "warning"),
]

CODES: dict[str, CodeInfo] = {c[0]: CodeInfo(*c) for c in _CODES}

# Reported by `gsr compile` about a model's answer (never by the checker): 9xx.
COMPILER_CODES: dict[str, CodeInfo] = {
    "GSR900": CodeInfo("GSR900", "the model's answer holds no program"),
    "GSR901": CodeInfo("GSR901", "the program's task contract differs from the compile specification"),
}

ALL_CODES: dict[str, CodeInfo] = {**CODES, **COMPILER_CODES}
