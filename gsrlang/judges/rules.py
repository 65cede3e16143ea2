"""Rule procedures (`criterion x: Bool = rule.NAME(...)`): deterministic checks that need no model.

One function per rule declared in stdlib/rules.gsr, registered under the same
name; each takes the candidate's text and the rule's parameters (as checked by the
checker, defaults filled in) and returns `(value, reason)`. `RuleJudge` serves
every `rule.*` criterion through the judge interface.

Conventions: words are whitespace-separated tokens (`str.split()`); characters are
Unicode code points (`len(text)`); case-insensitive matching uses `str.casefold`.

Every rule runs in time linear in the response: `rule.regex` uses RE2 (google-re2),
which never backtracks, so a pattern such as `^(a+)+$` cannot stall a run (with
Python's `re` it took 36 s on 31 characters, on the event loop that serves every
model call). RE2 refuses what it cannot match in linear time (backreferences,
lookaround); the checker reports such a pattern (GSR305). Rules therefore stay
inline, on the event loop; a judgment that still overruns the per-judgment time
limit (`RuleJudge(time_limit=...)`, `gsr run --time-limit`) is invalid.
"""

from __future__ import annotations

import json
import time
from typing import Callable

from gsrlang.lang.check.patterns import PatternError, compile_pattern
from gsrlang.semantics.judgment import Judgment

__all__ = ["DEFAULT_TIME_LIMIT", "RULES", "RuleJudge", "rule", "run_rule"]

DEFAULT_TIME_LIMIT = 10.0  # seconds per rule or verifier judgment (`gsr run --time-limit`)

RULES: dict[str, Callable[..., tuple[bool, str]]] = {}


def rule(name: str):
    def register(fn):
        if name in RULES:
            raise ValueError(f"rule {name!r} is implemented twice")
        RULES[name] = fn
        return fn

    return register


def _bounds(n: int, unit: str, above, below) -> tuple[bool, str]:
    hits = []
    if above is not None and n > above:
        hits.append(f"more than {above}")
    if below is not None and n < below:
        hits.append(f"fewer than {below}")
    return bool(hits), f"{n} {unit}" + (f" ({' and '.join(hits)})" if hits else "")


@rule("word_count")
def word_count(response: str, /, *, above=None, below=None) -> tuple[bool, str]:
    """True when the text has more than `above` words or fewer than `below` words."""
    return _bounds(len(response.split()), "words", above, below)


@rule("char_count")
def char_count(response: str, /, *, above=None, below=None) -> tuple[bool, str]:
    """True when the text has more than `above` characters or fewer than `below`."""
    return _bounds(len(response), "characters", above, below)


def _excerpt(s: str, limit: int = 40) -> str:
    s = s.replace("\n", " ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


@rule("regex")
def regex(response: str, /, *, pattern: str, ignore_case: bool = False) -> tuple[bool, str]:
    """True when `pattern` (RE2 syntax) matches somewhere in the text."""
    # RE2 matches the text's UTF-8 bytes (the `re2` module encodes a str itself, then maps every offset back
    # to characters, which costs more than the match): the bytes are searched, and the one match's offset
    # and text are decoded here. The same match, on character boundaries, so its bytes decode whole.
    data = response.encode("utf-8")
    if (m := compile_pattern(pattern, bool(ignore_case)).search(data)) is None:
        return False, "no match"
    start, end = m.span()
    return True, f"matches {_excerpt(data[start:end].decode())!r} at character {len(data[:start].decode()) + 1}"


@rule("contains")
def contains(response: str, /, *, text: str, case_sensitive: bool = False) -> tuple[bool, str]:
    """True when the response contains `text` (case-insensitive unless `case_sensitive`)."""
    hay, pin = (response, text) if case_sensitive else (response.casefold(), text.casefold())
    found = pin in hay
    return found, f"{'contains' if found else 'does not contain'} {_excerpt(text)!r}"


@rule("contains_any")
def contains_any(response: str, /, *, words) -> tuple[bool, str]:
    """True when the text contains at least one of `words` (case-insensitive)."""
    hay = response.casefold()
    found = next((w for w in words if w.casefold() in hay), None)
    return (True, f"contains {_excerpt(found)!r}") if found is not None else (False, "contains none of the words")


_FENCE = r"(?s)```[ \t]*json[ \t]*\r?\n(.*?)```"  # RE2 too: `re` is quadratic on many unclosed fences


@rule("json_valid")
def json_valid(response: str, /) -> tuple[bool, str]:
    """True when the whole text (or its first ```json fenced block) is valid JSON."""
    try:
        json.loads(response)
        return True, "valid JSON"
    except RecursionError:
        return False, "not valid JSON: nested too deeply to read"
    except ValueError as exc:
        whole_error = exc
    if (m := compile_pattern(_FENCE, True).search(response)) is not None:
        try:
            json.loads(m.group(1))
            return True, "valid JSON in a ```json block"
        except RecursionError:
            return False, "the ```json block is not valid JSON: nested too deeply to read"
        except ValueError as exc:
            return False, f"the ```json block is not valid JSON: {exc}"
    return False, f"not valid JSON: {whole_error}"


_WORD = r"\w+"  # words for `repeats_phrase`: runs of letters and digits, so punctuation does not split a repeat


@rule("repeats_phrase")
def repeats_phrase(response: str, /, *, words: int = 5) -> tuple[bool, str]:
    """True when some run of `words` consecutive words occurs twice (case-insensitive): one pass, one set."""
    tokens = [m.group(0).casefold() for m in compile_pattern(_WORD).finditer(response)]
    n = max(1, int(words))
    seen: dict[tuple[str, ...], int] = {}
    for start in range(len(tokens) - n + 1):
        run = tuple(tokens[start:start + n])
        if run in seen and seen[run] + n <= start:  # a second, separate occurrence
            return True, f"repeats {_excerpt(' '.join(run))!r}"
        seen.setdefault(run, start)
    return False, f"no run of {n} words occurs twice"


def _given(args: dict) -> dict:
    """A rule's parameters as its function takes them: None means "not given"."""
    return {k: v for k, v in args.items() if v is not None}


def run_rule(name: str, response: str, args: dict) -> tuple[bool, str]:
    """Apply rule `name` with its parameters (None meaning "not given") to a response."""
    return RULES[name](response, **_given(args))


class RuleJudge:
    """Serves every `rule.NAME(...)` criterion. Deterministic, and linear in the response's length.

    Rules run inline (no thread, no task per item); since nothing can interrupt running Python code
    there, `time_limit` is checked when the rule returns: a judgment that took longer is invalid.
    """

    inline = True

    def __init__(self, time_limit: float = DEFAULT_TIME_LIMIT):
        self.time_limit = time_limit

    def validate(self, node) -> str | None:
        name = node.criterion.procedure.name
        return None if name in RULES else f"criterion `{node.id}` uses `rule.{name}`, which has no implementation"

    async def judge(self, node, item, candidate) -> Judgment:
        proc = node.criterion.procedure
        return self._judge(proc.name, RULES[proc.name], _given(proc.args), candidate.text)

    def judge_many(self, node, items, c: int) -> list[Judgment]:
        """`judge` for candidate `c` of every item, in one call (the columnar run path; see
        gsrlang.judges.base): the rule and its parameters are looked up once, not once per item."""
        proc = node.criterion.procedure
        name, fn, args, judge = proc.name, RULES[proc.name], _given(proc.args), self._judge
        known: dict = {}  # (value, reason) -> its Judgment, made once (they are frozen)
        return [judge(name, fn, args, item.candidates[c].text, known) for item in items]

    def _judge(self, name: str, fn, args: dict, text: str, known: dict | None = None) -> Judgment:
        started = time.perf_counter()
        try:
            value, reason = fn(text, **args)
        except PatternError as exc:
            return Judgment.invalid(f"invalid regular expression: {exc}")
        if (took := time.perf_counter() - started) > self.time_limit:
            return Judgment.invalid(f"rule.{name} took {took:.1f} s, over the time limit of "
                                    f"{self.time_limit:g} s per judgment")
        if known is None:
            return Judgment.ok(value, reason)  # the trace node names the procedure; nothing else to record
        if (j := known.get((type(value), value, reason))) is None:
            j = known[(type(value), value, reason)] = Judgment.ok(value, reason)
        return j
