"""Real English speech at the engines' 16 kHz, for the engine tests."""

from __future__ import annotations

import numpy as np
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
