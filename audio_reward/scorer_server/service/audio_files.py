"""Audio brought to the engine's 16 kHz: files libsndfile does not read (M4A, WebM, MP4...), decoded by
FFmpeg through PyAV at 16 kHz, and waveforms at other rates, resampled by soxr.

Both endpoints that take files read them with the protocol's one reader
(:func:`audio_reward.protocol.read_audio`), libsndfile first and then :data:`FFMPEG_FILES`:
``/v1/audio/transcriptions`` for uploads and ``/v1/score`` for ``audio_file_base64``, so
they accept the same formats within the same bounds.
"""

from __future__ import annotations

import numpy as np
import soxr

from audio_reward.protocol.audio import FileDecoder

from ..engines.base import ENGINE_SAMPLE_RATE

FFMPEG_FILES = FileDecoder(rate=ENGINE_SAMPLE_RATE)
"""What the server decodes a file with when libsndfile does not know the format."""


def resample_16k(waveform: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at the engine's 16 kHz (soxr, high quality)."""
    if sample_rate == ENGINE_SAMPLE_RATE:
        return np.ascontiguousarray(waveform, dtype=np.float32)
    return soxr.resample(waveform, sample_rate, ENGINE_SAMPLE_RATE, quality="HQ").astype(np.float32, copy=False)
