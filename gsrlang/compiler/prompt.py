"""The compiler's prompt, generated from the project's own sources so it stays true as the language grows.

Structure (system message, then one user message):

1. the job and the rules for the answer (one ```gsr block; the task contract as given;
   hard rules as gates; questions about a response that is not there yet);
2. the language reference: `docs/language.md`, with its hand-written catalogue block
   replaced by the catalogue generated from `gsrlang.lang.catalog` (every operator, rule and
   enum with its signature and documentation, exactly as the checker reads them) and its
   notes on the design proposal left out;
3. two or three example programs from `examples/`, verbatim;
4. (user message) the task input and the reference when S has them, then the task
   contract, then the rubric text, last.

A repair turn sends the previous program back (as the assistant's message) with the
checker's diagnostics rendered in full (code, message, the offending lines, help).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

import attrs

from gsrlang.compiler.spec import CompileSpec, Pairwise, Pointwise, fmt_number, sha256_text
from gsrlang.lang.catalog import Catalog, default_catalog
from gsrlang.lang.diagnostics import Diagnostic
from gsrlang.lang.diagnostics.render import Sources, render_full
from gsrlang.lang.span import SourceText

# Examples shown to the model: a pointwise rubric with a safety cap, an instance-specific
# (BiGGen-style) rubric, and a pairwise one.
DEFAULT_EXAMPLES = ("helpsteer2/helpfulness.gsr", "biggen/instance.gsr", "mtbench/pairwise.gsr")

PROMPT_VERSION = "gsr-compile-prompt/1"


class PromptError(Exception):
    """A file the prompt is generated from is missing (a broken installation: a tool failure)."""


@attrs.frozen
class Prompt:
    system: str
    user: str

    def messages(self) -> list[dict]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    @property
    def sha256(self) -> str:
        """Identifies what the model is told apart from S (reference, catalogue, examples, rules)."""
        return sha256_text(PROMPT_VERSION + "\n" + self.system)


# ---- sources -----------------------------------------------------------------------------------------
def _data_file(folder: str, name: str) -> Path:
    from gsrlang.lang.resources import data_dir

    try:
        path = data_dir(folder) / name
    except FileNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise PromptError(f"the compiler's prompt needs {folder}/{name}, which is missing from the installation")
    return path


def language_reference_path() -> Path:
    return _data_file("docs", "language.md")


def catalogue_text(catalog: Catalog) -> str:
    """Every operator, judge kind, rule and enum of the catalogue: documentation comments, then the signature."""

    def doc(text: str) -> list[str]:
        return [f"# {line}".rstrip() for line in text.splitlines()] if text else []

    out = ["# ---- operators: KIND NAME<TYPE VARS>(PORTS; PARAMETERS) -> RESULT"]
    for sig in catalog.operators.values():
        out += ["", *doc(sig.doc), sig.signature()]
    from gsrlang.lang.check.judgekinds import judge_kinds

    out += ["", "# ---- judge kinds, used as `criterion NAME: TYPE = KIND(PARAMETERS)` (llm when none is given)"]
    for kind in judge_kinds(catalog).values():
        out += ["", *doc(kind.sig.doc), kind.sig.signature()]
    out += ["", "# ---- rule procedures, used as `criterion NAME: Bool = rule.NAME(PARAMETERS)`"]
    for sig in catalog.rules.values():
        out += ["", *doc(sig.doc), sig.signature()]
    out += ["", "# ---- enums: the values of policy parameters, written as bare names (on_abstain: skip)"]
    for e in catalog.enums.values():
        out += ["", *doc(e.doc), f"enum {e.name} {{ {', '.join(e.members)} }}"]
    return "\n".join(out)


_CATALOGUE_HEADING = re.compile(r"^###? The catalogue\s*$", re.M)
_FENCED = re.compile(r"^```[^\n]*\n.*?^```[ \t]*$", re.M | re.S)
_SECTION = re.compile(r"^## ", re.M)


def language_reference(catalog: Catalog) -> str:
    """docs/language.md with the generated catalogue in place of its hand-written one."""
    text = language_reference_path().read_text(encoding="utf-8")
    generated = ("The catalogue below is generated from the stdlib's signature files; it is complete.\n\n"
                 "```gsr\n" + catalogue_text(catalog) + "\n```")
    heading = _CATALOGUE_HEADING.search(text)
    if heading and (block := _FENCED.search(text, heading.end())):
        text = text[:block.start()] + generated + text[block.end():]
    else:  # the reference was reorganised: still give the model the whole catalogue
        text = text.rstrip() + "\n\n## The stdlib catalogue\n\n" + generated + "\n"
    # Section "Refinements of the proposal" is about the design history, not the language.
    sections = _SECTION.split(text)
    kept = [sections[0]] + [s for s in sections[1:] if not re.match(r"[\d. ]*Refinements\b", s)]
    return "## ".join(kept).rstrip() + "\n"


def example_programs(names: Sequence[str] = DEFAULT_EXAMPLES) -> list[tuple[str, str]]:
    """(name, text) of each example program."""
    return [(f"examples/{n}", _data_file("examples", n).read_text(encoding="utf-8")) for n in names]


# ---- messages ----------------------------------------------------------------------------------------
_RULES = """\
You are a compiler from natural-language rubrics to rubric programs in the `.gsr`
language. A rubric program is written before any response is seen: it says which
judgments to make about a response (criteria) and how to compose them into one score
(operator nodes and a sink), and its task declaration says how that score is read out.

Rules for your answer:
1. Answer with exactly one complete program in a single ```gsr fenced code block.
2. Declare the task contract exactly as the request gives it (you may choose the
   cut points where it says `thresholds(...)`), and no other task of the same kind.
3. Use only the declarations, types, operators, rules and enum values of the reference
   below; every operator call names its ports and parameters as the catalogue does.
4. Give each quality the rubric names its own criterion with an `ask` question about
   the response (and `level` anchors taken from the rubric's descriptions where it has
   them). Compose them with operators: weights for relative importance; hard rules
   ("if X, the score is at most k", "unsafe answers fail") as gates (`cap`, `floor`,
   `veto`) applied after the reduction, so nothing can outweigh them. The sink is a
   Score in [0, 1]; a native score k on the scale lo..hi is the sink score
   (k - lo) / (hi - lo), so "at most 2" on 1..5 is `cap(..., at: 0.25)`.
5. Criteria ask about the response that will be judged later; the program never
   contains a response, a score for one, or a gold label.
6. Import nothing but the stdlib's fragments (`std/fragments/...`).
7. Start the program with `rubric NAME "one-line description"`.
"""


def compact_reference(catalog: Catalog, sections: Sequence[int]) -> str:
    """The numbered sections of docs/language.md given, and the catalogue's signatures without their
    documentation: the reference for a server with a small context (see :func:`fit_prompt`)."""
    parts = _SECTION.split(language_reference_path().read_text(encoding="utf-8"))
    kept = [p for p in parts[1:] if (m := re.match(r"(\d+)\.", p)) and int(m.group(1)) in sections]
    lines = [line for line in catalogue_text(catalog).splitlines()
             if line and (not line.startswith("# ") or line.startswith("# ----"))]
    return ("## " + "## ".join(kept)).rstrip() + "\n\n## The catalogue (signatures)\n\n```gsr\n" + \
        "\n".join(lines) + "\n```\n"


def system_message(catalog: Catalog | None = None, examples: Sequence[str] = DEFAULT_EXAMPLES,
                   reference: str | None = None) -> str:
    catalog = catalog or default_catalog()
    parts = [_RULES, "# The .gsr language reference\n",
             reference if reference is not None else language_reference(catalog)]
    if shown := example_programs(examples):
        parts += ["# Example programs\n", *(f"## {name}\n\n```gsr\n{text.rstrip()}\n```\n" for name, text in shown)]
    return "\n".join(parts)


def _quoted(text: str) -> str:
    return '"""\n' + text.strip("\n") + '\n"""'


def user_message(spec: CompileSpec) -> str:
    contract = spec.contract
    parts = ["Compile the rubric below into a .gsr program."]
    if spec.task_input is not None:
        parts.append("## Task input\n\nThe task the responses will answer (it is not a response):\n\n"
                     + _quoted(spec.task_input))
    if spec.reference is not None:
        parts.append("## Reference\n\nA fixed reference answer that criteria may compare a response against:\n\n"
                     + _quoted(spec.reference))
    if isinstance(contract, Pointwise):
        lo, hi = contract.scale
        what = f"Each item has one response, scored on the native scale {fmt_number(lo)}..{fmt_number(hi)}."
        if contract.quantize == "thresholds":
            what += " Choose the cut points of `thresholds(...)` (one fewer than the number of scale points)."
    else:
        assert isinstance(contract, Pairwise)
        what = "Each item has two responses; the readout says which one is better, or applies the tie policy."
    parts.append(f"## Task contract\n\n{what} The program must declare exactly:\n\n{contract.task_line()}")
    parts.append("## Rubric\n\n" + spec.rubric.strip("\n"))
    return "\n\n".join(parts) + "\n"


def build_prompt(spec: CompileSpec, catalog: Catalog | None = None,
                 examples: Sequence[str] = DEFAULT_EXAMPLES) -> Prompt:
    if not isinstance(spec, CompileSpec):
        raise TypeError(f"build_prompt takes a CompileSpec, got {type(spec).__name__}")
    return Prompt(system_message(catalog, examples), user_message(spec))


# Smaller and smaller prompts for servers with small contexts, largest first: (what was cut,
# the sections of docs/language.md kept (None: all, with the documented catalogue), examples).
LEVELS = (
    ("nothing", None, DEFAULT_EXAMPLES),
    ("2 of the 3 example programs", None, DEFAULT_EXAMPLES[:1]),
    ("reference sections 2, 3, 6, 8 and 9, the catalogue's documentation, 2 of the 3 example programs",
     (1, 4, 5, 7), DEFAULT_EXAMPLES[:1]),
    ("reference sections 2, 3 and 5-9, the catalogue's documentation, the example programs (section 1's "
     "program is the one example)", (1, 4), ()),
    ("reference sections 2-9, the catalogue's documentation, the example programs (section 1's program is the "
     "one example)", (1,), ()),
)
CHARS_PER_TOKEN = 3.0  # a conservative estimate for English prose and code (tokenizers give 3.3-4)


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1


def fit_prompt(spec: CompileSpec, context_tokens: int | None, reserve_tokens: int = 2048) -> tuple[Prompt, str]:
    """The largest prompt of :data:`LEVELS` that leaves ``reserve_tokens`` of a ``context_tokens`` context for
    the answer and the repair turns, and what was cut ("nothing" when all fits or the context is unknown).
    When even the smallest does not fit, the smallest is returned: the server's error then says so."""
    catalog = default_catalog()
    user = user_message(spec)
    prompt, cut = build_prompt(spec, catalog), "nothing"
    if context_tokens is None:
        return prompt, cut
    for cut, sections, examples in LEVELS:
        reference = None if sections is None else compact_reference(catalog, sections)
        prompt = Prompt(system_message(catalog, examples, reference=reference), user)
        if estimate_tokens(prompt.system + prompt.user) + reserve_tokens <= context_tokens:
            break
    return prompt, cut


def fenced(program: str) -> str:
    return "```gsr\n" + program.rstrip("\n") + "\n```"


def render_feedback(program: str, diagnostics: Iterable[Diagnostic], display_path: str = "program.gsr") -> str:
    """The diagnostics as the checker prints them: code, message, offending lines, help."""
    return render_full(list(diagnostics), Sources(SourceText(display_path, program)), color=False)


def repair_message(program: str | None, diagnostics: Sequence[Diagnostic], *, problem: str | None = None,
                   display_path: str = "program.gsr", repair: int = 1, budget: int = 3) -> str:
    head = f"Repair {repair} of at most {budget}. "
    if program is None:
        return (head + f"Your answer held no program: {(problem or 'it was empty').rstrip('.')}.\n\n"
                "Answer with the complete program in one ```gsr fenced code block.\n")
    errors = sum(d.is_error for d in diagnostics)
    return (head + f"The checker rejected your program ({display_path}) with {errors} "
            f"error{'s' if errors != 1 else ''}:\n\n" + render_feedback(program, diagnostics, display_path)
            + "\nFix every error and answer with the complete corrected program in one ```gsr fenced code "
              "block. Keep what was right; change only what the diagnostics call for.\n")
