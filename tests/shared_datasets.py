"""The shared, human-labelled data sets (../shared/data beside the checkout) and markers that skip without them."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TOPICAL_CHAT = SHARED_DATA / "topical_chat" / "dev.jsonl"
LLMBAR = SHARED_DATA / "llmbar" / "natural.json"

needs_topical_chat = pytest.mark.skipif(not TOPICAL_CHAT.is_file(), reason=f"shared data set not present: {TOPICAL_CHAT}")
needs_llmbar = pytest.mark.skipif(not LLMBAR.is_file(), reason=f"shared data set not present: {LLMBAR}")
