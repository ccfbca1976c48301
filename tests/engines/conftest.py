"""Shared fixtures for the engine tests: real speech at 16 kHz and converted checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soxr

from support.speech import synth_speech

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Reinforcement learning rewards speech that matches the prompt.",
    "She sells sea shells by the sea shore.",
    "Seven purple elephants were painting the kitchen on a rainy Tuesday.",
)


def speech_16k(text: str) -> np.ndarray:
    audio, rate = synth_speech(text)
    return soxr.resample(audio, rate, 16_000).astype(np.float32)


@pytest.fixture(scope="session")
def sentences_16k() -> list[np.ndarray]:
    return [speech_16k(t) for t in SENTENCES]


@pytest.fixture(scope="session")
def tiny_qwen3_asr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Qwen3-ASR checkpoint (transformers-native) built from its config classes."""
    pytest.importorskip("transformers.models.qwen3_asr", reason="native Qwen3-ASR needs transformers>=5.24")
    from audio_reward.scorer_server.engines.random_checkpoints import build_random_qwen3_asr

    return build_random_qwen3_asr(tmp_path_factory.mktemp("qwen3-asr-tiny"), size="tiny")
