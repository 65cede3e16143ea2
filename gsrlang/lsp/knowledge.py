"""What the language server says about the language's own words (the catalogue covers operators, rules and
judge kinds).

Short texts taken from docs/language.md; hover and completion both read them.
"""

from __future__ import annotations

KEYWORDS = {
    "rubric": ("rubric NAME \"description\"", "The program's header (optional; at most one)."),
    "fragment": ("fragment NAME \"description\"", "The header of an importable fragment: criteria and nodes, "
                 "no task and no sink."),
    "import": ("import \"path.gsr\"", "Merge a fragment's criteria and nodes into this program. Paths are "
               "relative to this file; `std/...` names the stdlib folder."),
    "task": ("task pointwise { ... } | task pairwise { ... }", "A readout contract: how the sink's Score "
             "becomes the task's answer."),
    "criterion": ("criterion NAME: TYPE [= PROCEDURE] [{ ... }]", "A criterion node: a judgment of each "
                  "candidate, made by an llm judge, a rule, a human field or a verifier."),
    "node": ("node NAME = EXPR", "A named operator node."),
    "sink": ("sink EXPR", "The program's unique sink: a `Score` in [0, 1] that the readout reads."),
}

BODY_KEYWORDS = {
    "ask": ("ask \"question\"", "The question the judge answers (required for llm criteria)."),
    "level": ("level KEY \"description\" [= value]", "An anchor for a level; `= v` sets an ordinal level's "
              "value in [0, 1]."),
    "example": ("example \"response\" -> VERDICT [because \"why\"]", "A worked example shown to the judge."),
    "judge": ("judge PROCEDURE", "The procedure, as an alternative to `= PROCEDURE`."),
    "judges": ("judges N aggregate AGG | judges [P1, P2] aggregate AGG", "An ensemble of judges."),
}

AGGREGATES = {
    "majority": "Bool ensembles: the majority vote.",
    "weighted": "Bool ensembles: a weighted vote, `weighted(weights: [...])` with one weight per judge.",
    "unanimous": "Bool ensembles: true only when every judge says true.",
    "any": "Bool ensembles: true when any judge says true.",
    "mean": "Ordinal and Score ensembles: the mean.",
    "median": "Ordinal and Score ensembles: the median.",
    "mode": "Ordinal, Score and Nominal ensembles: the most frequent answer.",
    "min": "Ordinal and Score ensembles: the lowest answer.",
    "max": "Ordinal and Score ensembles: the highest answer.",
}

TYPES = {
    "Bool": ("Bool", "true or false: flags and triggers. Reaches a Score port through `normalize`."),
    "Score": ("Score | Score[a..b]", "A real in [0, 1] (the quality type), or in another closed interval "
              "[a, b], which reaches a Score port through `scale`."),
    "Ordinal": ("Ordinal[1..k] | Ordinal{l1, l2, ...}", "Ordered levels, each with a value in [0, 1] "
                "(linear by default). Reaches a Score port through `normalize` or `map`."),
    "Nominal": ("Nominal{a, b, c}", "Unordered labels; reaches a Score port only through `map`."),
}

JUDGMENT_TYPE_SNIPPETS = ("Bool", "Bool?", "Score", "Score[0..10]", "Ordinal[1..5]", "Ordinal{poor, fair, good}",
                          "Nominal{a, b}")
