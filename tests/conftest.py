"""Fixtures shared by every test directory, and the test tiers.

Tiers, by folder (each test gets the folder's marker, so ``-m unit`` works too):

- ``tests/unit``: one module in-process; no server, no model weights, no
  subprocess. The fast tier: ``pytest tests/unit`` runs first in CI.
- ``tests/integration``: real parts together: a real uvicorn server on
  loopback, real ASR weights, real verl classes, the peer's own code, the CLIs.
- ``tests/reliability``: faults, load, fuzzing and hostile clients against real servers.
- ``tests/environments``: the documented environments, each built fresh from its install line by
  ``scripts/test_environments.sh``, running the commands the docs list for it (skipped otherwise).

Support code (server launchers, speech and tones, the instant engine, fault
servers, random checkpoints) lives in ``tests/testkit``; benchmarks import it too.

``scorer_url``: one real ``audio-reward serve`` (Whisper tiny.en, the embedded
default) on loopback for the whole session, run by ``AUDIO_REWARD_TEST_SERVER_PYTHON``
where the tests' own environment cannot hold the server (verl, the TTS model).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testkit.server import free_port, running_server

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "integration", "reliability", "environments")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.path)).resolve().relative_to(TESTS).parts
        if parts and parts[0] in TIERS:
            item.add_marker(parts[0])


@pytest.fixture(scope="session")
def scorer_url() -> Iterator[str]:
    """Base URL of a ready scorer server running tiny.en on CPU."""
    with running_server(model="tiny.en", max_wait_ms=5) as server:
        yield server.url


@pytest.fixture
def dead_url() -> str:
    """A loopback URL where nothing listens (connection refused at once); a fresh port per test."""
    return f"http://127.0.0.1:{free_port()}"
