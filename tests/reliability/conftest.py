
"""Servers for the reliability suite, all on loopback.

``tiny_server``: one real ``audio-reward serve`` process with Whisper tiny.en,
an API key and a 16 MiB body limit, shared by the bad-input battery and the
security tests. Tests that need a slow, failing or killable engine start
their own process with the instant engine (``tests.testkit.instant_engine``,
through ``running_server(instant=True)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.testkit.server import ServerHandle, running_server

API_KEY = "reliability-test-key-0123456789"
BODY_LIMIT = 16 * 2**20


@pytest.fixture(scope="session")
def tiny_server() -> Iterator[ServerHandle]:
    """tiny.en behind an API key, 16 MiB body limit."""
    with running_server(model="tiny.en", env={"AUDIO_REWARD_API_KEY": API_KEY}, max_body_bytes=BODY_LIMIT,
                        max_wait_ms=5) as handle:
        yield handle


@pytest.fixture(scope="session")
def auth_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}"}
