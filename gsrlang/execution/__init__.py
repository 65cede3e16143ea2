"""Running programs over items: judging and scheduling one item (`executor`), whole-file runs
(`runs`), the inline-judged chunked runs (`inlinerun`), engines, per-item programs, replay,
verify and what-if."""
