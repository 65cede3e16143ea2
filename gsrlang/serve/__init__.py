"""`gsr serve`: a program as an HTTP reward server for RL trainers (docs/rewards.md).

- `engine`: one `gsrlang.Judges` for the whole server, the program being served (swapped on reload),
  micro-batches of the items of concurrent requests, per-request deadlines;
- `traces`: every reward's trace record appended to size-rotated trace files that `gsr replay` reads;
- `metrics`: the Prometheus text of `GET /metrics`;
- `app`: the Starlette application (routes, request validation, the token, the body cap);
- `group`: rewards within a group (raw, rank, z-score; round-robin wins for pairwise programs).
"""
