"""Fixtures shared by every test directory.

``scorer_url``: one real ``audio-reward serve`` subprocess (Whisper tiny.en,
the embedded default) on loopback for the whole session.
Helpers live in ``tests/support`` (import as ``support.speech``/``support.server``).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from support.server import running_server


@pytest.fixture(scope="session")
def scorer_url() -> Iterator[str]:
    """Base URL of a ready scorer server running tiny.en on CPU."""
    with running_server(model="tiny.en", max_wait_ms=5) as url:
        yield url
