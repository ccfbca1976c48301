"""Fixtures shared by every test directory, and the test tiers.

Tiers, by folder (each test gets the folder's marker, so ``-m unit`` works too):

- ``tests/unit``: one module in-process; no server, no model weights, no
  subprocess. The fast tier: ``pytest tests/unit`` runs first in CI.
- ``tests/integration``: real parts together: a real uvicorn server on
  loopback, real ASR weights, real verl classes, the peer's own code, the CLIs.
- ``tests/reliability``: faults, load, fuzzing and hostile clients against real servers.
- ``tests/training``: the whole GRPO loop through real verl on the CPU (the trainer environment), with
  the faults that must stop or be masked inside it.
- ``tests/environments``: the documented environments, each built fresh from its install line by
  ``scripts/test_environments.sh``, running the commands the docs list for it (skipped otherwise).

Support code (server launchers, speech and tones, the instant engine, fault
servers, random checkpoints) lives in ``tests/testkit``; benchmarks import it too.

``scorer_url``: one real ``audio-reward serve`` (Whisper tiny.en, the embedded
default) on loopback for the whole session, run by ``AUDIO_REWARD_TEST_SERVER_PYTHON``
where the tests' own environment cannot hold the server (verl, the TTS model).
``signals_url``: the same with the offline speaker and quality models (resemblyzer, DNSMOS) and a
reference store of two, so eviction is one registration away.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testkit.server import free_port, running_server, server_python

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "integration", "reliability", "environments", "training")


def pytest_configure(config: pytest.Config) -> None:
    # The Ctrl-C tests send SIGINT to commands they start, as a terminal does to its foreground program. A run
    # started as a background job of a script (`bash .ci/run &`) inherits SIGINT ignored, and an ignored signal
    # stays ignored across exec: every command under it would shrug Ctrl-C off. Put back what a terminal's
    # program starts with (Python's handler here, so the default disposition in every command started).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture(scope="session")
def signals_url() -> Iterator[str]:
    """Base URL of a ready scorer server with tiny.en, resemblyzer and DNSMOS, keeping two speaker references."""
    # The server runs in AUDIO_REWARD_TEST_SERVER_PYTHON (the trainer's environments cannot hold it): ask that one.
    probe = subprocess.run([server_python(), "-c", "import resemblyzer, speechmos"], capture_output=True, check=False)
    if probe.returncode:
        pytest.skip("the server's environment lacks the signals extra (resemblyzer, speechmos)")
    with running_server(model="tiny.en", max_wait_ms=5, speaker_model="resemblyzer", quality_model="dnsmos",
                        speaker_reference_count=2) as server:
        yield server.url


@pytest.fixture
def dead_url() -> str:
    """A loopback URL where nothing listens (connection refused at once); a fresh port per test."""
    return f"http://127.0.0.1:{free_port()}"
