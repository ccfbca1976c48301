"""Shared fixtures for the engine tests: real speech at 16 kHz and converted checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.testkit.speech import SENTENCES, speech_16k


@pytest.fixture(scope="session")
def sentences_16k() -> list[np.ndarray]:
    return [speech_16k(t) for t in SENTENCES]


@pytest.fixture(scope="session")
def tiny_qwen3_asr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Qwen3-ASR checkpoint (transformers-native) built from its config classes."""
    pytest.importorskip("transformers.models.qwen3_asr", reason="native Qwen3-ASR needs transformers>=5.24")
    from tests.testkit.random_checkpoints import build_random_qwen3_asr

    return build_random_qwen3_asr(tmp_path_factory.mktemp("qwen3-asr-tiny"), size="tiny")
