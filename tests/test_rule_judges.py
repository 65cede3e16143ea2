"""Judges that need no model: rules, human annotations, verifiers; and the registry's start-up checks."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsrlang.files.dataset import Candidate, Item
from gsrlang.judges.base import ABSTAIN, JudgeConfigError, Judgment
from gsrlang.judges.human import HumanJudge
from gsrlang.judges.registry import default_registry
from gsrlang.judges.rules import RULES, RuleJudge, run_rule
from gsrlang.judges.verifier import VerifierJudge, register_verifier, unregister_verifier
from gsrlang.lang.catalog import default_catalog
from gsrlang.lang.check.driver import analyze


def program(body: str, task: str = "task pointwise { scale = 1..5 }"):
    analysis = analyze(f"rubric t\n{task}\n{body}")
    assert analysis.program is not None, [d.message for d in analysis.errors]
    return analysis.program


def item(record: dict | None = None, *texts: str) -> Item:
    texts = texts or ("a response",)
    return Item("i1", 1, "the input", tuple(Candidate(chr(65 + k), t) for k, t in enumerate(texts)), None, None,
                record or {})


# ---- rules ----------------------------------------------------------------------------------------------------
def test_every_catalogue_rule_has_an_implementation_and_vice_versa():
    assert set(default_catalog().rules) == set(RULES)


def test_word_and_char_count():
    assert run_rule("word_count", "one two three", {"above": 2}) == (True, "3 words (more than 2)")
    assert run_rule("word_count", "one two three", {"above": 3})[0] is False
    assert run_rule("word_count", "one", {"below": 3, "above": None})[0] is True
    assert run_rule("word_count", "  ", {"below": 1})[0] is True  # no words
    assert run_rule("char_count", "héllo", {"above": 4})[0] is True  # code points
    assert run_rule("char_count", "héllo", {"above": 5, "below": 2})[0] is False


def test_regex_contains_contains_any():
    assert run_rule("regex", "Call 555-1234 now", {"pattern": r"\d{3}-\d{4}", "ignore_case": False})[0] is True
    assert run_rule("regex", "HELLO", {"pattern": "hello", "ignore_case": False})[0] is False
    assert run_rule("regex", "HELLO", {"pattern": "hello", "ignore_case": True})[0] is True
    assert run_rule("contains", "I'm Sorry", {"text": "sorry", "case_sensitive": False})[0] is True
    assert run_rule("contains", "I'm Sorry", {"text": "sorry", "case_sensitive": True})[0] is False
    assert run_rule("contains_any", "As an AI model", {"words": ["language model", "AI"]}) == (True, "contains 'AI'")
    assert run_rule("contains_any", "fine", {"words": ["x", "y"]})[0] is False


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', True), ("[1, 2]", True), ("  42 ", True), ("not json", False), ("{'a': 1}", False),
    ('Here you go:\n```json\n{"a": [1, 2]}\n```\nDone.', True),
    ("Here:\n```json\n{broken\n```", False), ("", False),
])
def test_json_valid(text, expected):
    assert run_rule("json_valid", text, {})[0] is expected


async def test_rule_judge_through_a_program():
    p = program('criterion long: Bool = rule.word_count(above: 2)\nsink normalize(long)')
    node = p.node("long")
    j = await RuleJudge().judge(node, item(None, "a b c d"), Candidate("A", "a b c d"))
    assert j == Judgment(True, "ok", "4 words (more than 2)", None, {})


# ---- human annotations ---------------------------------------------------------------------------------------------
HUMAN = """
criterion flag: Bool = human(field: "ann.flag")
criterion maybe_flag: Bool? = human(field: "ann.maybe")
criterion nat: Score[1..3] = human(field: "scores.naturalness")
criterion lvl: Ordinal[1..5] = human(field: "ann.level")
criterion tone: Ordinal{poor, fair, good} = human(field: "ann.tone")
criterion kind: Nominal{bug, feature} = human(field: "ann.kind")
node k = map(kind, to: {bug: 0, feature: 1})
sink mean(items: [normalize(flag), normalize(default(maybe_flag, value: false)), scale(nat), normalize(lvl), normalize(tone), k])
"""


def read(criterion: str, record: dict, cid: str = "A") -> Judgment:
    return HumanJudge.read(program(HUMAN).node(criterion), record, cid)


@pytest.mark.parametrize("raw, expected", [
    (True, True), (False, False), (1, True), (0, False), (1.0, True), ("yes", True), ("No", False), ("TRUE", True),
    ("0", False),
])
def test_human_bool(raw, expected):
    j = read("flag", {"ann": {"flag": raw}})
    assert j.status == "ok" and j.value is expected


@pytest.mark.parametrize("raw", ["maybe", 2, 0.5, [True]])
def test_human_bool_rejects(raw):
    j = read("flag", {"ann": {"flag": raw}})
    assert j.status == "invalid" and "is not a Bool" in j.reason


def test_human_score_within_and_outside_the_interval():
    j = read("nat", {"scores": {"naturalness": 2.3333333333}})
    assert j.status == "ok" and j.value == 2.3333333333
    assert read("nat", {"scores": {"naturalness": 2}}).value == 2.0
    assert read("nat", {"scores": {"naturalness": " 1.5 "}}).value == 1.5
    j = read("nat", {"scores": {"naturalness": 4.5}})
    assert j.status == "invalid"
    assert j.reason == "field 'scores.naturalness' = 4.5 is outside Score[1..3]"
    assert "not a number" in read("nat", {"scores": {"naturalness": "high"}}).reason
    assert "finite" in read("nat", {"scores": {"naturalness": "nan"}}).reason


def test_human_ordinal_and_nominal():
    assert read("lvl", {"ann": {"level": 3}}).value == "3"
    assert read("lvl", {"ann": {"level": "4"}}).value == "4"
    assert read("lvl", {"ann": {"level": 2.0}}).value == "2"
    assert read("lvl", {"ann": {"level": 6}}).status == "invalid"
    assert read("lvl", {"ann": {"level": 2.5}}).status == "invalid"
    assert read("tone", {"ann": {"tone": "fair"}}).value == "fair"
    j = read("tone", {"ann": {"tone": 2}})
    assert j.status == "invalid" and "expected one of poor, fair, good" in j.reason
    assert read("kind", {"ann": {"kind": "bug"}}).value == "bug"
    assert read("kind", {"ann": {"kind": "chore"}}).status == "invalid"


def test_human_null_is_an_abstention_only_for_optional_types():
    j = read("maybe_flag", {"ann": {"maybe": None}})
    assert j.status == "abstained" and j.value is ABSTAIN
    j = read("flag", {"ann": {"flag": None}})
    assert j.status == "invalid" and "cannot abstain" in j.reason
    j = read("flag", {"ann": {"flag": ""}})  # an empty CSV cell
    assert j.status == "invalid"


def test_human_missing_field():
    j = read("nat", {"scores": {"coherence": 2}})
    assert j.status == "invalid" and "missing field 'scores.naturalness'" in j.reason and "coherence" in j.reason


def test_human_field_per_candidate():
    p = program('criterion ok: Bool = human(field: "votes.{candidate}")\nsink normalize(ok)',
                "task pairwise { epsilon = 0 }")
    node = p.node("ok")
    record = {"votes": {"A": True, "B": False}}
    assert HumanJudge.read(node, record, "A").value is True
    assert HumanJudge.read(node, record, "B").value is False


# ---- verifiers -------------------------------------------------------------------------------------------------------
VERIFIED = 'criterion ok: Bool = verifier("has_digit")\nsink normalize(ok)'


async def test_verifier_registered_in_process():
    register_verifier("has_digit", lambda cand, it: (any(ch.isdigit() for ch in cand.text), "looked for digits"))
    try:
        p = program(VERIFIED)
        assert VerifierJudge().validate(p.node("ok")) is None
        j = await VerifierJudge().judge(p.node("ok"), item(None, "abc 1"), Candidate("A", "abc 1"))
        assert j.status == "ok" and j.value is True and j.reason == "looked for digits"
    finally:
        unregister_verifier("has_digit")


async def test_async_verifier_and_abstention():
    async def check(cand, it):
        return None

    register_verifier("has_digit", check)
    try:
        p = program(VERIFIED)
        j = await VerifierJudge().judge(p.node("ok"), item(), Candidate("A", "x"))
        assert j.status == "abstained"
    finally:
        unregister_verifier("has_digit")


def test_unknown_verifier_is_reported_before_any_item():
    p = program(VERIFIED)
    with pytest.raises(JudgeConfigError) as exc:
        default_registry().check(p)
    assert 'verifier("has_digit"), which is not registered' in str(exc.value)
    assert "gsrlang.verifiers" in str(exc.value)


# ---- the registry --------------------------------------------------------------------------------------------------
def test_llm_criteria_without_a_model_are_reported_before_any_item():
    p = program('criterion correct: Bool { ask "Is it correct?" }\ncriterion kind: Bool { ask "x?" }\n'
                "sink mean(items: [normalize(correct), normalize(kind)])")
    with pytest.raises(JudgeConfigError) as exc:
        default_registry().check(p)
    message = str(exc.value)
    assert "criteria `correct`, `kind` are judged by a model" in message
    assert "--model" in message and "GSR_MODEL" in message


def test_a_registry_with_an_llm_judge_serves_llm_criteria():
    class Fake:
        async def judge(self, node, item, candidate):
            return Judgment.ok(True)

    p = program('criterion correct: Bool { ask "Is it correct?" }\nsink normalize(correct)')
    default_registry(llm=Fake()).check(p)


# ---- bounded work (issue 11) -----------------------------------------------------------------------------------
def regex_engines(monkeypatch) -> list[str]:
    """The module of each compiled pattern `rule.regex` matches with (recorded, not timed)."""
    from gsrlang.judges import rules

    engines, compile_pattern = [], rules.compile_pattern

    def recording(*args, **kwargs):
        compiled = compile_pattern(*args, **kwargs)
        engines.append(type(compiled).__module__.split(".")[0])
        return compiled

    monkeypatch.setattr(rules, "compile_pattern", recording)
    return engines


def test_regex_runs_in_linear_time_on_the_pathological_pattern(monkeypatch):
    # Python's `re` takes 36 s on 31 characters; RE2 never backtracks, so its time is linear in the text
    # (benchmarks/bench_bounds.py times it against the text's length)
    engines = regex_engines(monkeypatch)
    value, reason = run_rule("regex", "a" * 100_000 + "!", {"pattern": "^(a+)+$"})
    assert (value, reason) == (False, "no match")
    assert engines == ["re2"]


def test_patterns_re2_refuses_are_gsr305_with_a_reason():
    from gsrlang.lang.check.driver import analyze

    for pattern, help_ in [(r"(\\w+) \\1", True), ("(?<=a)b", True), ("a{2000}", True), ("[", False)]:
        result = analyze('task pointwise { scale = 1..5 }\n'
                         f'criterion c: Bool = rule.regex(pattern: "{pattern}")\nsink normalize(c)\n')
        (d,) = result.diagnostics
        assert d.code == "GSR305" and d.message.startswith("invalid regular expression: ")
        assert ("RE2 syntax" in (d.help or "")) is help_, pattern


def test_regex_offsets_are_characters_and_case_folding_works():
    assert run_rule("regex", "ééé Ab", {"pattern": "ab", "ignore_case": True}) == (True, "matches 'Ab' at character 5")


@given(st.text(alphabet=st.sampled_from("ab é日\U0001f600\n1[]"), max_size=30),
       st.sampled_from(["a+", "é.", "日|b", r"\[[0-9]+\]", "", "^b", "(?s).$", "[^a]{2}"]), st.booleans())
@settings(max_examples=300, deadline=None)
def test_regex_reports_the_match_re2_finds_in_the_text(text, pattern, ignore_case):
    """The rule searches the text's UTF-8 bytes: its match, offset in characters and text, is the one the
    `re2` module finds in the text itself."""
    from gsrlang.lang.check.patterns import compile_pattern

    m = compile_pattern(pattern, ignore_case).search(text)
    want = (False, "no match") if m is None else \
        (True, f"matches {m.group(0).replace(chr(10), ' ')!r} at character {m.start() + 1}")  # under 40: whole
    assert run_rule("regex", text, {"pattern": pattern, "ignore_case": ignore_case}) == want


async def test_a_verifier_past_the_time_limit_makes_the_judgment_invalid():
    import threading

    release = threading.Event()

    def stuck(candidate, item):  # a plain function: it runs in a daemon thread and is abandoned at the limit
        release.wait(60)
        return True

    async def stuck_async(candidate, item):
        await asyncio.sleep(30)
        return True

    p = program(VERIFIED)
    for fn in (stuck, stuck_async):
        register_verifier("has_digit", fn)
        try:
            judgment = await VerifierJudge(time_limit=0.2).judge(p.node("ok"), item(None, "x"), item(None, "x").candidates[0])
            # the judge answered while the verifier was still stuck: it was abandoned at the limit, not awaited
            assert fn is stuck_async or not release.is_set()
        finally:
            release.set()
            unregister_verifier("has_digit")
        assert judgment.status == "invalid"
        assert judgment.reason == "verifier `has_digit` ran past the time limit of 0.2 s per judgment"


async def test_a_plain_verifier_does_not_block_the_event_loop():
    import threading

    ticks, seen_by_verifier, ticked = [], [], threading.Event()

    async def ticker():
        for k in range(5):
            ticks.append(k)
            await asyncio.sleep(0.01)
        ticked.set()

    def slow(candidate, item):  # returns once the loop has ticked five times: it could not if it blocked the loop
        ticked.wait(60)
        seen_by_verifier.append(len(ticks))
        return True, "slow but fine"

    register_verifier("has_digit", slow)
    try:
        p = program(VERIFIED)
        judgment, _ = await asyncio.gather(VerifierJudge().judge(p.node("ok"), item(None, "x"), item(None, "x").candidates[0]),
                                           ticker())
    finally:
        unregister_verifier("has_digit")
    assert judgment.status == "ok" and judgment.value is True
    assert seen_by_verifier == [5]  # the ticker ran to its end while the verifier was running


async def test_a_rule_past_the_time_limit_makes_the_judgment_invalid():
    p = program('criterion long: Bool = rule.word_count(above: 2)\nsink normalize(long)')
    judgment = await RuleJudge(time_limit=0).judge(p.node("long"), item(None, "a b c"), item(None, "a b c").candidates[0])
    assert judgment.status == "invalid" and "over the time limit of 0 s per judgment" in judgment.reason


@pytest.mark.parametrize("text, words, expected", [
    ("The cat sat on the mat. Then THE CAT, sat on the mat again.", 5, (True, "repeats 'the cat sat on the'")),
    ("a a a a a a", 3, (True, "repeats 'a a a'")),
    ("a a a a a", 3, (False, "no run of 3 words occurs twice")),  # the two runs of three overlap
    ("one two three", 5, (False, "no run of 5 words occurs twice")),
])
def test_repeats_phrase_finds_a_repeated_run_of_words(text, words, expected):
    assert run_rule("repeats_phrase", text, {"words": words}) == expected


def test_repeats_phrase_on_a_long_text():
    # one pass and one set: the backreference regex it replaces is quadratic or worse (benchmarks/bench_bounds.py
    # times it against the text's length)
    text = " ".join(f"w{i}" for i in range(200_000))
    assert run_rule("repeats_phrase", text, {"words": 5}) == (False, "no run of 5 words occurs twice")
    assert run_rule("repeats_phrase", text + " w3 w4 w5 w6 w7", {"words": 5})[0] is True
