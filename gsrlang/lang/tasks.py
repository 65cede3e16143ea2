"""The task settings, declared once: the readout modes, each setting, its values, defaults and texts.

`task pointwise { scale = 1..5  quantize = round }` and `task pairwise { epsilon = 0.05
on_tie = tie }`: the checker (lang/check/sink.py), the JSON form, the compile specification
and `gsr compile`'s flags, and the language server's hover and completion all read the
names, the allowed values and the descriptions from here. Adding a setting or a value is
one entry below, plus what it means to the readout (semantics/readout.py).
"""

from __future__ import annotations

from gsrlang.lang import records

__all__ = ["MODES", "ON_TIE", "QUANTIZE", "SETTINGS", "Setting", "keys_of", "values_of"]


@records.frozen
class Setting:
    name: str
    mode: str  # the task it belongs to: "pointwise" | "pairwise"
    form: str  # how it is written, for help and hover
    about: str
    default: object = None  # None: required (scale) or a number's default given in `about`
    values: tuple[tuple[str, str], ...] = ()  # (value, what it means), for settings that take a name


MODES = {
    "pointwise": "One candidate per item. The sink's Score s is mapped onto the native scale "
                 "(`lo + s*(hi-lo)`) and quantized. Settings: `scale`, `quantize`.",
    "pairwise": "Two candidates per item. A wins when `s_A > s_B + epsilon`, B when `s_B > s_A + epsilon`, "
                "otherwise `on_tie` decides. Settings: `epsilon`, `on_tie`.",
}

SETTINGS = {s.name: s for s in (
    Setting("scale", "pointwise", "scale = lo..hi", "The native score range the sink's [0, 1] is mapped onto."),
    Setting("quantize", "pointwise", "quantize = round | floor | ceil | none | thresholds(c1, ...)",
            "How the mapped score becomes a native score: rounded, floored, ceiled, kept as a real, "
            "or cut at explicit sink scores (one cut point between each two native scores).", "round",
            (("round", "round to the nearest native score (halves up)"), ("floor", "round down"),
             ("ceil", "round up"), ("none", "keep the real value"),
             ("thresholds", "cut at explicit sink scores: `thresholds(c1, ...)`"))),
    Setting("epsilon", "pairwise", "epsilon = 0.05", "The margin in [0, 1) one candidate's score must exceed "
            "the other's by to win.", 0.0),
    Setting("on_tie", "pairwise", "on_tie = tie | abstain | first | second", "The verdict when neither "
            "candidate wins by more than epsilon.", "tie",
            (("tie", "declare a tie"), ("abstain", "record no verdict"), ("first", "prefer candidate A"),
             ("second", "prefer candidate B"))),
)}


def keys_of(mode: str) -> tuple[str, ...]:
    """The settings of one task mode, in declaration order."""
    return tuple(name for name, s in SETTINGS.items() if s.mode == mode)


def values_of(setting: str) -> tuple[str, ...]:
    """The names a setting takes (`quantize`: round, floor, ...)."""
    return tuple(v for v, _ in SETTINGS[setting].values)


QUANTIZE = values_of("quantize")  # "thresholds" is written as a call: `thresholds(c1, ...)`
ON_TIE = values_of("on_tie")
