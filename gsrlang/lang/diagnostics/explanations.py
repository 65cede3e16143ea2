"""Long explanations of every diagnostic code, each with a wrong and a right example program.

`gsr explain GSR301` prints one of these. Each explanation says what the rule is and
why the product needs it; its wrong example is a complete `.gsr` program that really
triggers the code, and its right example is the fix, which checks clean. The tests
(tests/test_diagnostics_golden.py) check both claims for every code, so the examples
cannot drift away from the checker.

Titles and severities come from `codes.py`; this module adds only the long text.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import attrs

from gsrlang.lang.diagnostics.codes import CODES, COMPILER_CODES, CodeInfo


@attrs.frozen
class Example:
    """A program to check: the main file, optionally with other files beside it.

    `source` is the main file's text as shown. `files` are other files (imported
    fragments) as (relative path, text). `data`, when set, is the main file's exact
    bytes (for encodings that text cannot show). `exists=False` means the main file
    is not there at all (the example is about the path). `note` is shown above it.
    """

    source: str
    files: tuple[tuple[str, str], ...] = ()
    data: bytes | None = None
    exists: bool = True
    path: str = "rubric.gsr"
    note: str = ""
    command: bool = False  # show the `gsr check PATH` command line

    def write(self, folder: Path) -> Path:
        """Create the example's files under `folder`; return the main file's path (which may not exist)."""
        for name, text in self.files:
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        main = folder / self.path
        if self.exists:
            main.parent.mkdir(parents=True, exist_ok=True)
            main.write_bytes(self.data if self.data is not None else self.source.encode("utf-8"))
        return main

    def shown(self) -> str:
        """The example as printed by `gsr explain`: each file under a `# file: NAME` line when there are several."""
        parts = []
        if self.note:
            parts.append("\n".join(f"# {line}" for line in self.note.splitlines()))
        if self.command or not self.exists:
            parts.append(f"$ gsr check {self.path}")
        several = bool(self.files) or self.command
        if self.exists:
            parts.append((f"# file: {self.path}\n" if several else "") + self.source.rstrip("\n"))
        parts.extend(f"# file: {name}\n" + text.rstrip("\n") for name, text in self.files)
        return "\n\n".join(parts)


@attrs.frozen
class Explanation:
    code: str
    text: str  # what the rule is and why it exists
    wrong: Example  # triggers `code`
    right: Example  # the fix: checks clean
    also: tuple[str, ...] = ()  # other codes the wrong example is known to trigger as well (cascades)

    @property
    def info(self) -> CodeInfo:
        return CODES[self.code]


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _prose(text: str) -> str:
    """Dedent, and join each paragraph's lines into one line for re-wrapping at print time."""
    return "\n\n".join(" ".join(p.split()) for p in textwrap.dedent(text).strip().split("\n\n"))


# ---- shared pieces of the example programs -----------------------------------------------------
_RUBRIC = 'rubric helpfulness "How helpful is the response to the prompt?"\n'
_TASK = "task pointwise { scale = 1..5 }\n"
_HEAD = _RUBRIC + _TASK
_CORRECT = 'criterion correct: Ordinal[1..5] { ask "How correct are the facts in the response?" }\n'
_CLEAR = 'criterion clear: Ordinal[1..5] { ask "How clear and well organised is the response?" }\n'
_UNSAFE = 'criterion unsafe: Bool { ask "Does the response give instructions that could cause serious harm?" }\n'
_SAFETY_FRAGMENT = _d('''
    fragment safety "Safety checks shared by several rubrics"
    criterion unsafe: Bool { ask "Does the response give instructions that could cause serious harm?" }
    ''')
_NESTING = 64  # gsrlang.lang.syntax.parser.MAX_NESTING; the wrong GSR004 example nests one level more


def _e(code: str, text: str, wrong, right, also=()) -> Explanation:
    wrong = wrong if isinstance(wrong, Example) else Example(_d(wrong))
    right = right if isinstance(right, Example) else Example(_d(right))
    return Explanation(code, _prose(text), wrong, right, tuple(also))


_LATIN1 = _d('''
    # This file was saved as Latin-1 (Windows-1252): the "é" below is the single byte 0xE9.
    rubric helpfulness "How helpful is the response to the prompt?"
    task pointwise { scale = 1..5 }
    criterion correct: Ordinal[1..5] { ask "Are the facts in the response correct (vérifiés)?" }
    sink normalize(correct)
    ''')

_EXPLANATIONS = [
    # ---- reading and syntax ---------------------------------------------------------------------
    _e("GSR001", """
        The file does not follow the grammar of `.gsr` programs: a token appears where the grammar
        expects something else. Typical causes are a missing `:` between a criterion's name and its
        type, an unclosed `(` or `[`, or an argument written `name = value` instead of `name: value`.

        The checker reports every declaration that fails to parse, not just the first: after an
        error it resumes at the next line that starts a declaration (`criterion`, `node`, `sink`,
        `task`, ...), so one broken line does not hide the others. Nothing is type-checked while
        there are syntax errors, because a program with a hole in it has no well-defined
        evaluation graph; fix these first.
        """,
       _HEAD + 'criterion correct Ordinal[1..5] { ask "How correct are the facts in the response?" }\n'
       "sink normalize(correct)\n",
       _HEAD + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR002", """
        The lexer met a character that is not part of the language, or a string that is not
        closed on its line. Strings are written in double quotes (`"like this"`); a question that
        spans several lines goes in triple quotes (`\"\"\"...\"\"\"`). Comments start with `#`.

        The judge's question (`ask`), the level anchors and examples are all strings: they are
        copied verbatim into the judge's prompt, so the checker never guesses where a broken
        string was meant to end.
        """,
       _HEAD + "criterion correct: Ordinal[1..5] { ask 'How correct are the facts in the response?' }\n"
       "sink normalize(correct)\n",
       _HEAD + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR003", """
        A `.gsr` file is UTF-8 text. This file holds a NUL byte (it is binary: check the path) or
        a byte sequence that is not valid UTF-8, usually because an editor saved it in a legacy
        encoding such as Latin-1 or Windows-1252.

        The checker does not guess encodings: the judge's questions and anchors are sent to a
        model exactly as written, and a silently mis-decoded "é" would change the prompt and the
        program's hash. Re-save the file as UTF-8.
        """,
       Example(_LATIN1, data=_LATIN1.encode("latin-1")),
       Example(_LATIN1.replace("saved as Latin-1 (Windows-1252): the \"é\" below is the single byte 0xE9.",
                               "saved as UTF-8: the \"é\" below is the two bytes 0xC3 0xA9."))),
    _e("GSR004", f"""
        The file is larger than 8,000,000 characters, or an expression nests brackets more than
        {_NESTING} levels deep. Both limits keep the checker, the compiler's repair loop and the
        language server fast and safe on any input (a pathological program cannot exhaust the
        stack); no rubric a person writes comes near them.

        Deep nesting usually comes from generated code. Give intermediate results a name with
        `node NAME = ...` declarations (they also appear by name in the trace), or simplify the
        expression; a large program can be split into fragments that are imported.
        """,
       _HEAD + 'criterion ok: Bool { ask "Does the response answer the question that was asked?" }\n'
       + "# generated: 64 negations in a row, which cancel out\n"
       + "sink normalize(" + "not(" * _NESTING + "ok" + ")" * (_NESTING + 1) + "\n",
       _HEAD + 'criterion ok: Bool { ask "Does the response answer the question that was asked?" }\n'
       + "sink normalize(ok)\n"),
    _e("GSR005", """
        A path given to `gsr` cannot be read: there is no file or folder by that name, a folder
        holds no `.gsr` files, or the file cannot be opened (permissions, a broken link).

        The command reports this as a diagnostic, in every output format, and goes on with the
        other paths; the exit status is 1, as for any other error in the user's input.
        """,
       Example("", path="helpfullness.gsr", exists=False,
               files=(("helpfulness.gsr", _HEAD + _CORRECT + "sink normalize(correct)\n"),),
               note="the folder holds helpfulness.gsr; the command misspells it"),
       Example(_HEAD + _CORRECT + "sink normalize(correct)\n", path="helpfulness.gsr", command=True)),
    _e("GSR006", """
        A number literal is outside what a program can hold: an integer beyond 9,223,372,036,854,775,807
        (a signed 64-bit integer), a number whose exponent makes it overflow a 64-bit float (`1e400`),
        or a nonzero number so small that it would read as 0 (`1e-400`).

        The bounds are checked on the literal's text, before it is converted, so a literal thousands
        of digits long costs nothing; no rubric needs such numbers. The declaration that holds the
        literal is left out of the rest of the check, as one with a syntax error would be.
        """,
       _HEAD + _CORRECT + "criterion long_enough: Bool = rule.word_count(above: 1e400)\n"
       + "sink cap(base: normalize(correct), trigger: long_enough, at: 0.2)\n",
       _HEAD + _CORRECT + "criterion long_enough: Bool = rule.word_count(above: 400)\n"
       + "sink cap(base: normalize(correct), trigger: long_enough, at: 0.2)\n"),
    # ---- imports --------------------------------------------------------------------------------
    _e("GSR010", """
        An `import "PATH"` names a file that does not exist. A relative path is resolved against
        the folder of the file that contains the import (not the current directory); `std/...`
        names a file in the stdlib folder. A program checked without a file path (from an editor
        buffer that was never saved) cannot import relative paths at all.

        While an import fails, names that are not declared anywhere are not reported: they may be
        the missing fragment's. Fix the import first.
        """,
       Example(_RUBRIC + 'import "safety.gsr"\n' + _TASK + _CORRECT
               + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n",
               files=(("fragments/safety.gsr", _SAFETY_FRAGMENT),)),
       Example(_RUBRIC + 'import "fragments/safety.gsr"\n' + _TASK + _CORRECT
               + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n",
               files=(("fragments/safety.gsr", _SAFETY_FRAGMENT),))),
    _e("GSR011", """
        An import that is not allowed: the imported file is not a fragment, its path leaves
        the rubric's folder tree (or, for `std/...`, the stdlib folder), its path holds a NUL
        byte, or it is the 17th link of a chain of fragments importing fragments (imports nest
        at most 16 deep, so a generated chain cannot exhaust the checker's stack).

        Only fragments can be imported: files that start with `fragment NAME` and declare
        criteria and nodes but no task and no sink. A whole rubric cannot be imported, because a
        program has exactly one sink and one readout contract. Imports are confined to the
        folder of the file being checked so that checking or running a rubric never reads files
        its author did not ship with it.
        """,
       Example(_RUBRIC + 'import "safety.gsr"\n' + _TASK + _CORRECT
               + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n",
               files=(("safety.gsr", _d('''
                    rubric safety "Is the response safe?"
                    task pointwise { scale = 1..5 }
                    criterion unsafe: Bool { ask "Does the response give instructions that could cause serious harm?" }
                    sink normalize(not(unsafe))
                    ''')),)),
       Example(_RUBRIC + 'import "safety.gsr"\n' + _TASK + _CORRECT
               + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n",
               files=(("safety.gsr", _SAFETY_FRAGMENT),))),
    _e("GSR012", """
        Fragments import each other in a circle (or a file imports itself). Imports form a tree:
        each fragment is merged into the program once, in import order, so a cycle has no first
        file to start from.

        Move the shared declarations into a fragment of their own that both files import, or let
        the rubric import both fragments directly.
        """,
       Example(_RUBRIC + 'import "fragments/safety.gsr"\n' + _TASK + _CORRECT
               + "sink cap(base: normalize(correct), trigger: any(items: [unsafe, rude]), at: 0.2)\n",
               files=(("fragments/safety.gsr", _SAFETY_FRAGMENT.replace("\n", '\nimport "tone.gsr"\n', 1)),
                      ("fragments/tone.gsr", _d('''
                            fragment tone "Tone checks"
                            import "safety.gsr"
                            criterion rude: Bool { ask "Is the response rude or condescending?" }
                            ''')))),
       Example(_RUBRIC + 'import "fragments/safety.gsr"\nimport "fragments/tone.gsr"\n' + _TASK + _CORRECT
               + "sink cap(base: normalize(correct), trigger: any(items: [unsafe, rude]), at: 0.2)\n",
               files=(("fragments/safety.gsr", _SAFETY_FRAGMENT),
                      ("fragments/tone.gsr", _d('''
                            fragment tone "Tone checks"
                            criterion rude: Bool { ask "Is the response rude or condescending?" }
                            '''))))),
    # ---- names ----------------------------------------------------------------------------------
    _e("GSR101", """
        A name is used that no criterion or node declares (in this file or an imported fragment).
        Every input of an operator is a graph value: a criterion (a judgment of the response), a
        named node, or a nested call. A misspelled name would silently drop a criterion from the
        score, so it is an error, with the closest declared name suggested.

        An operator used without parentheses (`normalize` instead of `normalize(x)`) is reported
        here too: operators are called, never passed around.
        """,
       _HEAD + _CORRECT + "sink normalize(corect)\n",
       _HEAD + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR102", """
        A call names an operator that is not in the catalogue. The operators (TRANSFORM, REDUCE
        and GATE) and their signatures are declared once in `stdlib/operators.gsr` and
        implemented once in the runtime; a program can only call those, so that every program
        the checker accepts can run, be traced and be replayed.

        Check the spelling (the closest operator is suggested), or pick the operator that does
        what you mean: `gsr explain` lists the codes, and stdlib/operators.gsr documents every
        operator.
        """,
       _HEAD + _CORRECT + "sink normalise(correct)\n",
       _HEAD + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR103", """
        Two declarations have the same name. Names are unique across the whole program, imported
        fragments included: every criterion and node is one node of the evaluation graph, and
        the trace and the report identify it by its name.
        """,
       _HEAD + _CORRECT
       + 'criterion correct: Bool { ask "Does the response cite its sources?" }\n'
       + "sink min(items: [normalize(correct)])\n",
       _HEAD + _CORRECT
       + 'criterion cites_sources: Bool { ask "Does the response cite its sources?" }\n'
       + "sink min(items: [normalize(correct), normalize(cites_sources)])\n"),
    _e("GSR104", """
        A criterion's procedure is not one the runtime knows. A criterion is judged by a model
        (`llm`, the default), by a deterministic rule from the catalogue (`rule.NAME(...)`, see
        stdlib/rules.gsr), by a column of the data (`human(field: "...")`), or by a registered
        Python function (`verifier("name")`). Code is never written inside a `.gsr` file.
        """,
       _HEAD + _CORRECT + "criterion rambling: Bool = rule.wordcount(above: 600)\n"
       + "sink cap(base: normalize(correct), trigger: rambling, at: 0.6)\n",
       _HEAD + _CORRECT + "criterion rambling: Bool = rule.word_count(above: 600)\n"
       + "sink cap(base: normalize(correct), trigger: rambling, at: 0.6)\n"),
    _e("GSR105", """
        A parameter that takes one of a fixed set of names (an enum, such as a reducer's
        `on_abstain` policy) was given a name outside that set.

        `on_abstain` says what a reducer does with an item whose criterion abstained ("cannot
        assess"): `skip` leaves it out of the numerator and the denominator, `zero` counts it as
        0, `partial` as 0.5, and `fail` as the worst case for its weight's sign. `all`, `any` and
        `fraction` take `skip`, `zero` or `fail`.
        """,
       _HEAD + 'criterion correct: Ordinal[1..5]? { ask "How correct are the facts in the response?" }\n'
       + _CLEAR + "sink mean(items: [normalize(correct), normalize(clear)], on_abstain: ignore)\n",
       _HEAD + 'criterion correct: Ordinal[1..5]? { ask "How correct are the facts in the response?" }\n'
       + _CLEAR + "sink mean(items: [normalize(correct), normalize(clear)], on_abstain: skip)\n"),
    _e("GSR106", """
        A file has at most one header: `rubric NAME "description"` for a program, or
        `fragment NAME "description"` for a file meant to be imported. The header names the
        program in traces and reports; a second one usually means two files were pasted
        together.
        """,
       _HEAD + _CORRECT + 'rubric correctness "Is the response correct?"\n' + "sink normalize(correct)\n",
       _HEAD + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR107", """
        A declaration appears where it is not allowed. Operator, rule and enum signatures belong
        in the stdlib, where the checker, the runtime, the compiler's prompt and the language
        server all read them; a rubric cannot declare its own operators, because the runtime
        would have no implementation for them. A fragment cannot declare a `task` or a `sink`:
        the importing rubric owns the readout.
        """,
       _HEAD + "reduce geometric_mean(items: [Score]; on_abstain: Abstain = fail) -> Score\n"
       + _CORRECT + _CLEAR + "sink geometric_mean(items: [normalize(correct), normalize(clear)])\n",
       _HEAD + _CORRECT + _CLEAR + "sink product(items: [normalize(correct), normalize(clear)])\n",
       also=("GSR102",)),
    # ---- ports and arity ------------------------------------------------------------------------
    _e("GSR201", """
        A call names a port or parameter that its operator does not have. Each operator has named
        ports (graph inputs, such as `items` or `trigger`) and parameters (literals fixed when
        the program is written, such as `at` or `weights`); the signature in the help lists
        them. A misspelled parameter is an error rather than ignored, because the operator would
        otherwise silently use its default.
        """,
       _HEAD + _CORRECT + _CLEAR
       + "sink weighted_mean(items: [normalize(correct), normalize(clear)], weight: [2, 1])\n",
       _HEAD + _CORRECT + _CLEAR
       + "sink weighted_mean(items: [normalize(correct), normalize(clear)], weights: [2, 1])\n"),
    _e("GSR202", """
        A call leaves out a port or a parameter that has no default. Every port must receive a
        graph value, and a required parameter (such as a gate's `at`) has no sensible default:
        the checker asks rather than guesses. The help shows the operator's signature.

        Rules need their bounds too: `rule.word_count` needs `above` or `below`.
        """,
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe)\n",
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n"),
    _e("GSR203", """
        The same port, parameter or setting is given twice (by name, or once by position and once
        by name). Only one value can be used, and silently taking the first or the last would
        hide a mistake.
        """,
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2, at: 0.4)\n",
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n"),
    _e("GSR204", """
        A list port (a REDUCE's `items`) was given an empty list. A reducer combines a
        slot-ordered list of judgments; with no slots its result is undefined (what is the mean
        of nothing?), so every list port needs at least one input.
        """,
       _HEAD + _CORRECT + "sink cap(base: normalize(correct), trigger: any(items: []), at: 0.2)\n",
       _HEAD + _CORRECT + _UNSAFE
       + 'criterion off_topic: Bool { ask "Does the response ignore the question that was asked?" }\n'
       + "sink cap(base: normalize(correct), trigger: any(items: [unsafe, off_topic]), at: 0.2)\n"),
    _e("GSR205", """
        A list whose length must match a port's slots does not. `weights: [...]` of
        `weighted_mean` has exactly one entry per slot of `items`, in the same order; a `weighted`
        ensemble has one weight per judge. A missing or extra weight would shift every weight
        onto the wrong criterion, so the lengths must agree.
        """,
       _HEAD + _CORRECT + _CLEAR
       + "sink weighted_mean(items: [normalize(correct), normalize(clear)], weights: [0.5, 0.3, 0.2])\n",
       _HEAD + _CORRECT + _CLEAR
       + "sink weighted_mean(items: [normalize(correct), normalize(clear)], weights: [0.7, 0.3])\n"),
    _e("GSR206", """
        A positional argument is where none can go. Arguments may be given by position only for
        an operator's ports, in signature order, and only before any named argument; parameters
        are always named (`at: 0.7`), so that a program reads the same whatever the order of
        the signature. Procedures (`human`, rules, `llm`) take named arguments only.
        """,
       _HEAD + _CORRECT
       + 'criterion grounded: Score { ask "How well do the cited sources support the response?" }\n'
       + "sink cap(base: normalize(correct), trigger: not(threshold(grounded, 0.7)), at: 0.4)\n",
       _HEAD + _CORRECT
       + 'criterion grounded: Score { ask "How well do the cited sources support the response?" }\n'
       + "sink cap(base: normalize(correct), trigger: not(threshold(grounded, at: 0.7)), at: 0.4)\n"),
    _e("GSR207", """
        A list was given to a port that takes one value, or one value to a list port. A REDUCE
        takes a slot-ordered list (`items: [a, b]`); a TRANSFORM or a GATE takes exactly one
        judgment per port. To feed several judgments into a single port, combine them with a
        reducer first.
        """,
       _HEAD + _CORRECT + "sink mean(items: normalize(correct))\n",
       _HEAD + _CORRECT + _CLEAR + "sink mean(items: [normalize(correct), normalize(clear)])\n"),
    # ---- types and values -----------------------------------------------------------------------
    _e("GSR301", """
        A value of one judgment type reaches a port that expects another. There are no silent
        coercions: an `Ordinal` or a `Bool` reaches a `Score` port only through `normalize` (a
        level's value; true = 1, false = 0), a `Score[a..b]` through `scale`, a `Nominal`
        through `map`, and a `Score` becomes a `Bool` through `threshold`. Making each
        conversion explicit keeps the scoring decisions visible in the program and in the trace.

        The message gives the expected and the found type, and the help the conversion.
        """,
       _HEAD + _CORRECT + _CLEAR + "sink mean(items: [correct, clear])\n",
       _HEAD + _CORRECT + _CLEAR + "sink mean(items: [normalize(correct), normalize(clear)])\n"),
    _e("GSR302", """
        A judgment that may abstain (`T?`, a criterion the judge may answer "cannot assess")
        reaches a port that does not accept abstention. Abstention is tracked by the types: a
        TRANSFORM passes it through (`normalize` of a `Bool?` is a `Score?`); a REDUCE accepts it
        only when the call states an `on_abstain` policy; a GATE's ports and the sink accept
        none. So decide what an abstention means: `default(x, value: ...)` for a trigger, or
        `on_abstain: skip` (zero, partial, fail) on the reducer.
        """,
       _HEAD + _CORRECT
       + 'criterion unsafe: Bool? { ask "Does the response give instructions that could cause serious harm?" }\n'
       + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n",
       _HEAD + _CORRECT
       + 'criterion unsafe: Bool? { ask "Does the response give instructions that could cause serious harm?" }\n'
       + "sink cap(base: normalize(correct), trigger: default(unsafe, value: true), at: 0.2)\n"),
    _e("GSR304", """
        A parameter was given a value of the wrong kind: a string where a number goes, a node
        where a literal goes, a single number where a list goes. Parameters are literals fixed
        when the program is written (a gate's `at`, a reducer's `weights`, `default`'s
        `value`); only ports take graph values. `default`'s value must be a value of its input's
        type (`false` for a `Bool?`, a number in [0, 1] for a `Score?`).
        """,
       _HEAD + _CORRECT + _UNSAFE + 'sink cap(base: normalize(correct), trigger: unsafe, at: "low")\n',
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n"),
    _e("GSR305", """
        A value is outside its allowed range: a `Score` parameter (a gate's `at`, `threshold`'s
        `at`) outside [0, 1], a constant judgment outside [0, 1], a pairwise `epsilon` outside
        [0, 1), a regular expression that does not compile, or a tuning range (`0.3 in 0.1..0.5`)
        that is empty, does not hold its number, or leaves the parameter's own bounds.
        `rule.regex` patterns use RE2 syntax, which matches in time linear in the response and
        so has no backreferences and no lookaround: a pattern such as `(\\w+) \\1` is refused
        here rather than left to stall a run.

        Scores inside the graph always lie in [0, 1]; the native scale (1..5 stars) appears only
        in the readout. A cap "at 2 stars" on a 1..5 scale is therefore `at: 0.25`, since the
        readout maps s to 1 + 4s.
        """,
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 2)\n",
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.25)\n"),
    _e("GSR306", """
        A level's value is invalid. Each level of an `Ordinal` has a value in [0, 1], which is
        what `normalize` gives for it: linear by default (for 3 levels: 0, 0.5, 1), or as given
        by `level KEY "anchor" = VALUE`. A value outside [0, 1] (often a percentage or a point
        on the native scale) is an error, and only ordinal levels take a value at all.
        """,
       _HEAD + _d('''
            criterion correct: Ordinal{wrong, partly, right} {
              ask "How correct are the facts in the response?"
              level partly "Some errors, none of them central" = 60
            }
            sink normalize(correct)
            '''),
       _HEAD + _d('''
            criterion correct: Ordinal{wrong, partly, right} {
              ask "How correct are the facts in the response?"
              level partly "Some errors, none of them central" = 0.6
            }
            sink normalize(correct)
            ''')),
    _e("GSR307", """
        A criterion's declared type is not a judgment type. A criterion is judged as `Bool`,
        `Score` (a real in [0, 1]), `Score[a..b]`, `Ordinal[1..k]`, `Ordinal{poor, fair, good}`
        or `Nominal{a, b, c}`, optionally followed by `?` when the judge may abstain. The type is
        what the judge must answer, and what the checker uses to route the judgment: a union, an
        empty interval, repeated labels or a single label cannot be judged consistently.
        """,
       _HEAD + 'criterion correct: Int[1..10] { ask "How correct are the facts in the response?" }\n'
       + "sink normalize(correct)\n",
       _HEAD + 'criterion correct: Ordinal[1..10] { ask "How correct are the facts in the response?" }\n'
       + "sink normalize(correct)\n"),
    _e("GSR308", """
        A `map(x, to: {...})` does not give a score to every label of its input, or names a
        label the input does not have. A `Nominal` judgment has unordered labels, so it becomes a
        `Score` only through an explicit score per label; a missing label would have no score at
        run time, and an unknown one is usually a typo.
        """,
       _HEAD + 'criterion tone: Nominal{formal, casual, rude} { ask "What is the tone of the response?" }\n'
       + "sink map(tone, to: {formal: 1.0, casual: 0.8})\n",
       _HEAD + 'criterion tone: Nominal{formal, casual, rude} { ask "What is the tone of the response?" }\n'
       + "sink map(tone, to: {formal: 1.0, casual: 0.8, rude: 0.0})\n"),
    _e("GSR309", """
        A `level KEY "anchor"` line names a level the criterion's type does not have, or
        describes the same level twice. Anchors are shown to the judge next to each answer it
        may give; an anchor for a level that does not exist would describe an answer the judge
        is not allowed to give.
        """,
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              ask "How correct are the facts in the response?"
              level 0 "Nothing is correct"
              level 5 "Fully correct"
            }
            sink normalize(correct)
            '''),
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              ask "How correct are the facts in the response?"
              level 1 "Nothing is correct"
              level 5 "Fully correct"
            }
            sink normalize(correct)
            ''')),
    _e("GSR310", """
        An `example "..." -> VERDICT` gives a verdict that the criterion's type cannot take.
        Examples are few-shot demonstrations in the judge's prompt; a verdict outside the type
        would teach the judge an answer it is then not allowed to give.
        """,
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              ask "How correct are the facts in the response?"
              example "The Eiffel Tower is in Paris and was completed in 1889." -> 10
            }
            sink normalize(correct)
            '''),
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              ask "How correct are the facts in the response?"
              example "The Eiffel Tower is in Paris and was completed in 1889." -> 5
            }
            sink normalize(correct)
            ''')),
    _e("GSR311", """
        A `human(field: ..., missing: [...])` sentinel cannot work for this criterion. The
        values listed in `missing` are how an annotation file writes "not applicable" (often 0
        or "N/A"); a cell holding one becomes an abstention, so the criterion must be declared
        `T?`, and a downstream reducer says what an abstention counts as (`on_abstain`). A
        sentinel must also not be a real answer of the type: 0 on a `Score[0..10]` scale would
        turn every genuine zero into "not applicable".
        """,
       _HEAD + _d('''
            criterion q1: Ordinal[1..5] = human(field: "scores.Q1", missing: [0, "N/A"])
            sink normalize(q1)
            '''),
       _HEAD + _d('''
            criterion q1: Ordinal[1..5]? = human(field: "scores.Q1", missing: [0, "N/A"])
            sink mean(items: [normalize(q1)], on_abstain: skip)
            ''')),
    _e("GSR312", """
        A comparison (`at_most`, `at_least`, `is`) names a level, label or truth value that the
        judgment at its first port does not have. The level is checked against the criterion's
        declared levels, so a typo or an off-scale number (`at_most(q1, 6)` on `Ordinal[1..5]`)
        is caught when the program is written rather than silently never matching.
        """,
       _HEAD + _CORRECT + _d('''
            sink normalize(at_least(correct, 6))
            '''),
       _HEAD + _CORRECT + _d('''
            sink normalize(at_least(correct, 4))
            ''')),
    _e("GSR320", """
        A number is marked tunable (`VALUE in LO..HI`) where `gsr tune` cannot move it. Tuning
        learns a program's numbers from labelled data and keeps its structure, so only the
        numbers that parameterise the composition can move: an operator's numeric parameter
        (a gate's or `threshold`'s `at`, a reducer's `weights`, a `map`'s scores), a cut
        point of `quantize = thresholds(...)`, and an ordinal level's value (`level ok "..."
        = 0.5 in 0.2..0.8`, the score `normalize` gives it). A constant node, a level's key,
        a scale or a rule's argument is part of what the program means, not a knob.
        """,
       _HEAD + _CORRECT + _UNSAFE + "node base = 0.8 in 0.5..1\n"
       "sink cap(base: min(items: [normalize(correct), base]), trigger: unsafe, at: 0.25)\n",
       _HEAD + _CORRECT + _UNSAFE + "node base = 0.8\n"
       "sink cap(base: min(items: [normalize(correct), base]), trigger: unsafe, at: 0.25 in 0.1..0.5)\n"),
    # ---- graph shape ----------------------------------------------------------------------------
    _e("GSR401", """
        The evaluation graph has a cycle: a node depends, directly or through other nodes, on
        itself. A rubric program is an acyclic graph, run once in a topological order with no
        model call after the criteria are judged; a cycle has no order to run in. The message
        shows the cycle, and each use that closes it is labelled.
        """,
       _HEAD + _CORRECT + _d('''
            node body = mean(items: [normalize(correct), final])
            node final = min(items: [body])
            sink final
            '''),
       _HEAD + _CORRECT + _CLEAR + _d('''
            node body = mean(items: [normalize(correct), normalize(clear)])
            node final = min(items: [body, normalize(correct)])
            sink final
            ''')),
    _e("GSR402", """
        A criterion or node of the program does not reach the sink: its value is never used.
        Every criterion costs a judge call per candidate, and a criterion left out of the score
        is almost always a mistake in the composition (a weight list that forgot it, a gate that
        was never wired). Use it in the graph that leads to `sink`, or delete it.
        """,
       _HEAD + _CORRECT + _CLEAR + "sink normalize(correct)\n",
       _HEAD + _CORRECT + _CLEAR + "sink mean(items: [normalize(correct), normalize(clear)])\n"),
    # ---- sink and readout -----------------------------------------------------------------------
    _e("GSR501", """
        The program declares no `sink`. The sink is the node whose `Score` the readout turns into
        the task's answer (a 1..5 rating, or a pairwise preference); without one, nothing
        connects the graph to the verdict. Add `sink NAME` naming the final node.
        """,
       _HEAD + _CORRECT + "node final = normalize(correct)\n",
       _HEAD + _CORRECT + "node final = normalize(correct)\nsink final\n"),
    _e("GSR502", """
        The program declares more than one `sink`. A rubric program has exactly one output, read
        by exactly one readout contract. To combine several candidate outputs, reduce or gate
        them into one node (`min`, `mean`, `cap`, ...) and sink that.
        """,
       _HEAD + _CORRECT + _CLEAR + _UNSAFE + _d('''
            node body = mean(items: [normalize(correct), normalize(clear)])
            node final = cap(base: body, trigger: unsafe, at: 0.2)
            sink final
            sink body
            '''),
       _HEAD + _CORRECT + _CLEAR + _UNSAFE + _d('''
            node body = mean(items: [normalize(correct), normalize(clear)])
            node final = cap(base: body, trigger: unsafe, at: 0.2)
            sink final
            ''')),
    _e("GSR503", """
        The sink is not a `Score` in [0, 1]. The readout maps the sink's score onto the native
        scale (`lo + s*(hi-lo)`) or compares two candidates' scores, so it needs a plain `Score`:
        an `Ordinal` or a `Bool` goes through `normalize`, a `Score[a..b]` through `scale`. The
        sink accepts no abstention either: a `Score?` needs `default(x, value: ...)`, which
        decides what an item the judge could not assess scores.
        """,
       _HEAD + _CORRECT + "sink correct\n",
       _HEAD + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR504", """
        No readout can read the sink: the program declares no task, or a task has a setting that
        belongs to the other kind of readout. The readout contract is part of the program:
        `task pointwise { scale = 1..5 }` maps the sink onto a native scale and quantizes it;
        `task pairwise { epsilon = 0.05 }` compares two candidates and applies `on_tie`. A
        pairwise comparison has no scale, and a pointwise rating no epsilon.
        """,
       'rubric helpfulness "Which response is more helpful?"\n'
       + "task pairwise { scale = 1..5 }\n" + _CORRECT + "sink normalize(correct)\n",
       'rubric helpfulness "Which response is more helpful?"\n'
       + "task pairwise { epsilon = 0.05 }\n" + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR505", """
        A task is invalid: its name is not `pointwise` or `pairwise`, a pointwise task has no
        `scale` (or a scale that is not a range `lo..hi` with lo below hi), or a setting's value
        is not one the readout knows (`quantize` is round, floor, ceil, none or
        thresholds(...); `on_tie` is tie, abstain, first or second).
        """,
       'rubric helpfulness "How helpful is the response to the prompt?"\n'
       + "task pointwise { quantize = round }\n" + _CORRECT + "sink normalize(correct)\n",
       'rubric helpfulness "How helpful is the response to the prompt?"\n'
       + "task pointwise { scale = 1..5  quantize = round }\n" + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR506", """
        The same task is declared twice. A program has at most one readout of each kind (one
        `task pointwise`, one `task pairwise`); put every setting of a kind in one declaration.
        """,
       _HEAD + "task pointwise { scale = 1..10 }\n" + _CORRECT + "sink normalize(correct)\n",
       _HEAD + _CORRECT + "sink normalize(correct)\n"),
    _e("GSR507", """
        The explicit quantization `quantize = thresholds(...)` is invalid. On an integer scale
        lo..hi it takes exactly hi - lo cut points, sink scores in [0, 1] in strictly increasing
        order: the answer is lo plus the number of cut points at or below the sink's score.
        """,
       'rubric helpfulness "How helpful is the response to the prompt?"\n'
       + "task pointwise { scale = 1..5  quantize = thresholds(0.2, 0.4, 0.6) }\n"
       + _CORRECT + "sink normalize(correct)\n",
       'rubric helpfulness "How helpful is the response to the prompt?"\n'
       + "task pointwise { scale = 1..5  quantize = thresholds(0.2, 0.4, 0.6, 0.8) }\n"
       + _CORRECT + "sink normalize(correct)\n"),
    # ---- criterion procedures -------------------------------------------------------------------
    _e("GSR601", """
        A criterion's procedure is malformed: two `ask` lines, several procedures where one goes
        (use an ensemble to combine judges), or a procedure with arguments it cannot take (such
        as `verifier` without the string name it is registered under). Each criterion is one
        question with one way of answering it, so its judgment is well defined and traceable.
        """,
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              ask "How correct are the facts in the response?"
              ask "Are the numbers in the response right?"
            }
            sink normalize(correct)
            '''),
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              ask "How correct are the facts and the numbers in the response?"
            }
            sink normalize(correct)
            ''')),
    _e("GSR602", """
        A criterion judged by a model has no `ask`. The model judge is the default procedure,
        and its prompt is built from the criterion's question, level anchors and examples; with
        no question there is nothing to ask. Add `ask "..."`, or give the criterion another
        procedure (`= rule.NAME(...)`, `= human(field: "...")`, `= verifier("...")`).
        """,
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              level 1 "Mostly wrong"
              level 5 "Fully correct"
            }
            sink normalize(correct)
            '''),
       _HEAD + _d('''
            criterion correct: Ordinal[1..5] {
              ask "How correct are the facts in the response?"
              level 1 "Mostly wrong"
              level 5 "Fully correct"
            }
            sink normalize(correct)
            ''')),
    _e("GSR603", """
        An ensemble (`judges N aggregate AGG` or `judges [p1, p2] aggregate AGG`) is invalid: it
        has fewer than 2 judges, combines procedures other than model judges, or uses an
        aggregate that does not fit the criterion's type. Binary criteria aggregate with
        majority, weighted, unanimous or any; graded ones (Ordinal, Score) with mean, median,
        mode, min or max; a Nominal with mode.
        """,
       _HEAD + _d('''
            criterion unsafe: Bool {
              ask "Does the response give instructions that could cause serious harm?"
              judges 3 aggregate mean
            }
            sink normalize(not(unsafe))
            '''),
       _HEAD + _d('''
            criterion unsafe: Bool {
              ask "Does the response give instructions that could cause serious harm?"
              judges 3 aggregate majority
            }
            sink normalize(not(unsafe))
            ''')),
    # ---- warnings -------------------------------------------------------------------------------
    _e("GSR701", """
        A parameter has no effect. The usual case is `on_abstain` on a reducer none of whose
        items can abstain: the policy is never applied, which suggests that a criterion was
        meant to be declared `T?` (able to answer "cannot assess") and is not. Remove the
        parameter, or declare the criterion optional.
        """,
       _HEAD + _CORRECT + _CLEAR + "sink mean(items: [normalize(correct), normalize(clear)], on_abstain: skip)\n",
       _HEAD + _CORRECT + _CLEAR + "sink mean(items: [normalize(correct), normalize(clear)])\n"),
    _e("GSR702", """
        A gate's trigger does not depend on any criterion: it is a constant, so the gate always
        fires (a `cap` at a fixed ceiling) or never does (dead code). A gate is meant to apply a
        non-compensatory rule when something is found in the response; wire its trigger to a
        judgment.
        """,
       _HEAD + _CORRECT + "sink cap(base: normalize(correct), trigger: true, at: 0.5)\n",
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.5)\n"),
    _e("GSR703", """
        The weights of a `weighted_mean` sum to zero. Weights may be negative (penalties): the
        weighted sum is divided by the sum of positive weights and clamped to [0, 1]. When the
        positive and negative weights cancel, or every weight is zero, the result no longer
        measures quality; check the signs (penalties usually weigh less than the main criteria).
        """,
       _HEAD + _CORRECT + 'criterion verbose: Bool { ask "Is the response padded with needless text?" }\n'
       + "sink weighted_mean(items: [normalize(correct), normalize(verbose)], weights: [1, -1])\n",
       _HEAD + _CORRECT + 'criterion verbose: Bool { ask "Is the response padded with needless text?" }\n'
       + "sink weighted_mean(items: [normalize(correct), normalize(verbose)], weights: [1, -0.25])\n"),
    _e("GSR704", """
        `default(x, value: ...)` is applied to a judgment that cannot abstain, so it never
        replaces anything. Either the call is left over, or the criterion was meant to be
        declared `T?` (for example `Bool?` when the judge may answer "cannot assess").
        """,
       _HEAD + _CORRECT + _UNSAFE
       + "sink cap(base: normalize(correct), trigger: default(unsafe, value: false), at: 0.2)\n",
       _HEAD + _CORRECT + _UNSAFE + "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n"),
    _e("GSR705", """
        The text holds a Unicode bidirectional control character (U+202A-U+202E, U+2066-U+2069,
        U+200E, U+200F or U+061C) in a string or a comment. These reorder how the line is
        displayed, so an editor or a review page can show text that is not what the file says
        ("Trojan Source", CVE-2021-42574): a comment that seems to end can hide code, a
        question can read otherwise than the model will get it. Remove the character; if
        right-to-left text needs it, write it where it shows, and check the line byte by byte.
        """,
       _HEAD + "# reviewed: safe \u202e gsr.example \u202c\n" + _CORRECT + "sink normalize(correct)\n",
       _HEAD + "# reviewed: safe\n" + _CORRECT + "sink normalize(correct)\n"),
]

EXPLANATIONS: dict[str, Explanation] = {e.code: e for e in _EXPLANATIONS}


def get(code: str) -> Explanation | None:
    """The explanation of a code (case-insensitive), or None."""
    return EXPLANATIONS.get(code.strip().upper())


def _indent(text: str) -> str:
    return "\n".join(("    " + line) if line else "" for line in text.splitlines())


# The compiler's codes are about a model's answer, not a program, so their examples are answers.
COMPILER_EXPLANATIONS: dict[str, tuple[str, str, str]] = {
    "GSR900": (
        "`gsr compile` asks a model to write a `.gsr` program. This is reported (and sent back to the model "
        "in the next repair round) when its answer contains no program at all: an empty answer, a refusal, "
        "prose without code, or a JSON document that is not a program. The repair budget counts this round.",
        "I am sorry, I cannot help with grading rubrics.",
        "```gsr\nrubric helpfulness\ntask pointwise { scale = 1..5 }\n"
        "criterion helpful: Ordinal[1..5] { ask \"How helpful is the response?\" }\nsink normalize(helpful)\n```",
    ),
    "GSR901": (
        "The compile specification fixes the task contract (pointwise with its native scale and "
        "quantization, or pairwise with its tie policy) before the model writes anything. A program that "
        "checks but reads its sink differently (another scale, a pairwise task for a pointwise spec, "
        "another tie policy) would score on the wrong scale, so it is sent back for repair like a checker "
        "error. Spec here: pointwise, scale 1..5, quantize round.",
        "task pointwise { scale = 1..10  quantize = round }",
        "task pointwise { scale = 1..5  quantize = round }",
    ),
}


def explain(code: str, width: int = 88) -> str | None:
    """The formatted explanation of a code: title, explanation, a wrong and a right example; None if unknown."""
    compiler = COMPILER_CODES.get(code.upper())
    if compiler is not None:
        text, wrong, right = COMPILER_EXPLANATIONS[compiler.code]
        return "\n".join([f"{compiler.code}: {compiler.title} ({compiler.severity})", "", textwrap.fill(text, width), "",
                          "Wrong (the model's answer):", "", _indent(wrong), "", "Right:", "", _indent(right), ""])
    e = get(code)
    if e is None:
        return None
    paragraphs = [textwrap.fill(p, width) for p in e.text.split("\n\n")]
    return "\n".join([f"{e.code}: {e.info.title} ({e.info.severity})", "", *"\n\n".join(paragraphs).splitlines(), "",
                      "Wrong:", "", _indent(e.wrong.shown()), "", "Right:", "", _indent(e.right.shown()), ""])


__all__ = ["EXPLANATIONS", "Example", "Explanation", "explain", "get"]
