"""Audio clips named by path, loaded as the thinker's processor expects them: one reader for the thinker
evaluation and the toy loop's dataset hook (which runs in verl's dataset workers, so it imports nothing more)."""

from __future__ import annotations

from typing import Any


def load_clip(path: str, rate: int) -> Any:
    """A clip as mono float32 at ``rate``, resampled with soxr (high quality) where its own rate differs."""
    import numpy as np
    import soundfile as sf

    audio, source_rate = sf.read(path, dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    if source_rate != rate:
        import soxr

        mono = soxr.resample(mono, source_rate, rate, quality="HQ")
    return np.asarray(mono, dtype=np.float32)
