"""Audio clips named by path, read by the protocol's reader and loaded as the thinker's processor expects
them: one loader for the thinker evaluation and the toy loop's dataset hook (which runs in verl's dataset
workers, so it imports nothing more)."""

from __future__ import annotations

from typing import Any


def load_clip(path: str, rate: int) -> Any:
    """A clip as mono float32 at ``rate``, resampled with soxr (high quality) where its own rate differs."""
    import numpy as np

    from ..protocol.audio import read_audio

    mono, source_rate = read_audio(path)
    if source_rate != rate:
        import soxr

        mono = soxr.resample(mono, source_rate, rate, quality="HQ")
    return np.asarray(mono, dtype=np.float32)
