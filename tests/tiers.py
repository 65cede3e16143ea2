"""The test tiers (docs/testing.md): what the default run leaves out, and how many examples a property test draws.

The default run (`make test`, a plain `pytest`) is the fast suite: tests marked `slow` are deselected (pyproject's
addopts), and property and fuzz tests marked `examples` draw a quarter of their examples. The slow tier (`make
test-all`, CI) sets GSR_TEST_FULL=1 and runs `slow` and `examples` tests with every example.
"""

from __future__ import annotations

import os

FULL = os.environ.get("GSR_TEST_FULL") == "1"


def examples(n: int) -> int:
    """A property test's number of examples: `n` in the slow tier, a quarter of it (at least 10) by default."""
    return n if FULL else max(10, n // 4)
