"""How much work the reliability suite does: a short run for CI, a full run on demand.

``AUDIO_REWARD_TEST_RELIABILITY_FULL=1`` selects the full counts (what
``bench/reliability_report.py`` measures); each count also has its own
variable to override it alone.
"""

from __future__ import annotations

import os

FULL = os.environ.get("AUDIO_REWARD_TEST_RELIABILITY_FULL", "") == "1"


def _count(name: str, short: int, full: int) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw else (full if FULL else short)


FUZZ_EXAMPLES = _count("AUDIO_REWARD_TEST_FUZZ_EXAMPLES", 200, 2_000)
"""Examples per hypothesis property."""

SCHEMATHESIS_EXAMPLES = _count("AUDIO_REWARD_TEST_SCHEMATHESIS_EXAMPLES", 60, 300)
"""Examples per API operation for schemathesis."""

LOAD_REQUESTS = _count("AUDIO_REWARD_TEST_LOAD_REQUESTS", 1_000, 10_000)
LOAD_CONCURRENCY = _count("AUDIO_REWARD_TEST_LOAD_CONCURRENCY", 64, 256)

KILL_ITEMS = _count("AUDIO_REWARD_TEST_KILL_ITEMS", 120, 400)
"""Items scored through a SIGKILL and restart of the server."""
