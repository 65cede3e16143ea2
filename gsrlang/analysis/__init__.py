"""Agreement with labels and learning from them: metrics with bootstrap intervals, paired
comparison, tuning, ablation, baselines and per-criterion agreement (docs/learning.md).
`metrics` and `resampling` sit below `execution` (a run reports its metrics); the rest
sits above it (tuning and ablation run the evaluator)."""
