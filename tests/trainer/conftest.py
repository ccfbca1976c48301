"""Fixtures of the trainer-plugin tests.

These tests run in the trainer's environment (verl, or the TTS model), which
cannot hold the scorer server's dependencies; the server runs from its own
interpreter: ``AUDIO_REWARD_SERVER_PYTHON`` (default ``/work/venv/bin/python``,
else this interpreter).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from support.server import REPO_ROOT, free_port, stop_process, wait_ready

DEFAULT_SERVER_PYTHON = "/work/venv/bin/python"


def server_python() -> str:
    configured = os.environ.get("AUDIO_REWARD_SERVER_PYTHON")
    if configured:
        return configured
    return DEFAULT_SERVER_PYTHON if Path(DEFAULT_SERVER_PYTHON).exists() else sys.executable


@pytest.fixture(scope="session")
def scorer_url() -> Iterator[str]:
    """A real ``audio-reward serve`` (Whisper tiny.en, CPU) on loopback, run by the server's interpreter."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    cmd = [server_python(), "-m", "audio_reward.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--model", "tiny.en", "--max-wait-ms", "5", "--cpu-threads", "1"]
    # The server reads AUDIO_REWARD_SERVER_* and the shared key only; a trainer's own variables never reach it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDIO_REWARD_SERVER_") and k != "AUDIO_REWARD_API_KEY"}
    with tempfile.TemporaryDirectory(prefix="audio-reward-trainer-server-") as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                wait_ready(base_url, 180.0, proc=proc, log_path=log_path)
                yield base_url
            finally:
                stop_process(proc)


@pytest.fixture(scope="session")
def dead_url() -> str:
    """A loopback URL where nothing listens (connection refused at once)."""
    return f"http://127.0.0.1:{free_port()}"
