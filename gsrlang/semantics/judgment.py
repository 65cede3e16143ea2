"""The core value types every layer shares: a `Judgment` and the abstention marker `ABSTAIN`.

They sit below both the runtime (which checks, composes and traces judgments) and the
judges (which produce them), so neither has to import the other. See
`gsrlang.judges.base` for the judge protocol and what each field of a `Judgment` holds.
"""

from __future__ import annotations

import attrs

__all__ = ["ABSTAIN", "Abstain", "Judgment", "STATUSES"]

STATUSES = ("ok", "abstained", "invalid", "skipped")  # skipped: short-circuit judging did not ask (moot)


class Abstain:
    """The type of `ABSTAIN`, the one value that means "the judge could not assess this"."""

    _instance: "Abstain | None" = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSTAIN"

    def __reduce__(self):
        return (Abstain, ())


ABSTAIN = Abstain()


def _check_status(instance, attribute, value):
    if value not in STATUSES:
        raise ValueError(f"a judgment's status is one of {', '.join(STATUSES)}, got {value!r}")


@attrs.frozen
class Judgment:
    """One judge's answer for one (criterion, candidate).

    value: the judgment (bool | float | str), ABSTAIN when abstained, None when invalid.
    status: "ok" | "abstained" | "invalid".
    reason: the judge's short justification (ok), or why it could not answer.
    raw: the judge's raw answer text, when there is one (model output, a cell's value).
    provenance: JSON-able facts about how it was obtained (see gsrlang.judges.base).
    """

    value: bool | float | str | Abstain | None
    status: str = attrs.field(default="ok", validator=_check_status)
    reason: str | None = None
    raw: str | None = None
    provenance: dict = attrs.field(factory=dict, hash=False)

    @classmethod
    def ok(cls, value, reason: str | None = None, raw: str | None = None, **provenance) -> "Judgment":
        return cls(value, "ok", reason, raw, provenance)

    @classmethod
    def abstained(cls, reason: str | None = None, raw: str | None = None, **provenance) -> "Judgment":
        return cls(ABSTAIN, "abstained", reason, raw, provenance)

    @classmethod
    def invalid(cls, reason: str, raw: str | None = None, **provenance) -> "Judgment":
        return cls(None, "invalid", reason, raw, provenance)
