"""Audio brought to the engine's 16 kHz: files libsndfile does not read (M4A, WebM, MP4...), decoded by
FFmpeg through PyAV, and waveforms at other rates, resampled by soxr.

Both endpoints that take files use it after libsndfile: ``/v1/audio/transcriptions``
for uploads and ``/v1/score`` for ``audio_file_base64`` (as the protocol's
:class:`~audio_reward.protocol.codecs.FileDecoder`), so they accept the same
formats.  Decoding is bounded like libsndfile's path: a container that declares
a duration over the limit is refused before decoding, and one that does not is
decoded only up to the limit.
"""

from __future__ import annotations

import io

import numpy as np
import soxr

from audio_reward.protocol.codecs import AudioDecodeError, FileDecoder

from ..engines.base import ENGINE_SAMPLE_RATE

READABLE_FORMATS = "WAV, FLAC, MP3, OGG, M4A, WebM or another format FFmpeg decodes"
"""Every file format the server takes; docs/protocol.md lists the same."""


def _too_long(field: str, seconds: float, limit: float) -> AudioDecodeError:
    return AudioDecodeError(
        "audio_too_long", f"{field} holds {seconds:.1f} s of audio; the limit is {limit:g} s (max_audio_seconds)")


def decode_ffmpeg(raw: bytes, field: str, max_seconds: float) -> np.ndarray | None:
    """16 kHz mono float32 via FFmpeg (PyAV), or None when the bytes hold no decodable audio."""
    import av

    try:
        container = av.open(io.BytesIO(raw), mode="r", metadata_errors="ignore")
    except (av.error.FFmpegError, ValueError):
        return None
    with container:
        if not container.streams.audio:
            return None
        if container.duration is not None and container.duration / av.time_base > max_seconds:
            raise _too_long(field, container.duration / av.time_base, max_seconds)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=ENGINE_SAMPLE_RATE)
        chunks: list[np.ndarray] = []
        samples = 0
        limit = int(max_seconds * ENGINE_SAMPLE_RATE)
        try:
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
                    samples += chunks[-1].shape[0]
                if samples > limit:  # a header without a duration cannot make us decode an hour
                    raise _too_long(field, samples / ENGINE_SAMPLE_RATE, max_seconds)
            chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
        except av.error.FFmpegError:
            if not chunks:
                return None
    return np.ascontiguousarray(np.concatenate(chunks) if chunks else np.zeros(0, np.float32), dtype=np.float32)


def _score_file(raw: bytes, field: str, max_seconds: float, max_bytes: int) -> tuple[np.ndarray, int] | None:
    audio = decode_ffmpeg(raw, field, max_seconds)
    return None if audio is None else (audio, ENGINE_SAMPLE_RATE)


FFMPEG_FILES = FileDecoder(_score_file, READABLE_FORMATS)
"""What ``/v1/score`` decodes ``audio_file_base64`` with when libsndfile does not know the format."""


def resample_16k(waveform: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at the engine's 16 kHz (soxr, high quality)."""
    if sample_rate == ENGINE_SAMPLE_RATE:
        return np.ascontiguousarray(waveform, dtype=np.float32)
    return soxr.resample(waveform, sample_rate, ENGINE_SAMPLE_RATE, quality="HQ").astype(np.float32, copy=False)
