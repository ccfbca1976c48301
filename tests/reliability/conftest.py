"""Servers for the reliability suite, all on loopback.

``tiny_server``: one real ``audio-reward serve`` process with Whisper tiny.en,
an API key and a 16 MiB body limit, shared by the bad-input battery and the
security tests. Tests that need a slow, failing or killable engine start
their own process with the instant engine of ``bench/load.py``
(``load.scorer_server``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
API_KEY = "reliability-test-key-0123456789"
BODY_LIMIT = 16 * 2**20


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audio_reward_bench_load", REPO / "bench" / "load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
"""``bench/load.py``: the instant-engine server, the load driver, RSS sampling, metrics."""


@pytest.fixture(scope="session")
def tiny_server() -> Iterator["bench.ServerHandle"]:
    """tiny.en behind an API key, 16 MiB body limit."""
    with bench.scorer_server("tiny.en", env={"AUDIO_REWARD_API_KEY": API_KEY}, max_body_bytes=BODY_LIMIT,
                             max_wait_ms=5) as handle:
        yield handle


@pytest.fixture(scope="session")
def auth_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}"}
