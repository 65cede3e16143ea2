"""Learning and proving a program from labelled data: tuning, paired comparison, ablation (docs/learning.md)."""
