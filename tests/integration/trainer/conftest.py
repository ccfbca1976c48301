"""Fixtures of the trainer-plugin tests.

These tests run in the trainer's environments (verl, or the TTS model), which
cannot hold the scorer server's dependencies: the session's ``scorer_url``
server (tests/conftest.py) runs from ``AUDIO_REWARD_TEST_SERVER_PYTHON`` there.
"""

from __future__ import annotations

import pytest

from tests.testkit.server import free_port


@pytest.fixture(scope="session")
def dead_url() -> str:
    """A loopback URL where nothing listens (connection refused at once)."""
    return f"http://127.0.0.1:{free_port()}"
