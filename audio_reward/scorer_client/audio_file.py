"""Reading an audio file into what the client sends: mono float32 samples and a sample rate."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np


class AudioFileError(ValueError):
    """An audio file that cannot be used: missing, a folder, or a format neither libsndfile nor FFmpeg reads."""


FFMPEG_HINT = "M4A, WebM and other FFmpeg formats need PyAV: pip install av (the server environment has it)"
"""What a user whose file libsndfile does not know can do about it, where PyAV is not installed."""


def read_audio(path: Path | str) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the sample rate of an audio file.

    libsndfile reads WAV, FLAC, MP3 and OGG; where PyAV is installed (the
    server environment has it) FFmpeg reads what libsndfile does not, such as
    M4A and WebM, as the server itself does.  Raises :class:`AudioFileError`
    with a sentence a person can act on.
    """
    import soundfile as sf

    path = Path(path)
    if not path.exists():
        raise AudioFileError(f"{path} does not exist")
    if not path.is_file():
        raise AudioFileError(f"{path} is not a file")
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except sf.LibsndfileError as exc:
        return _read_ffmpeg(path, exc.error_string)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise AudioFileError(f"{path} cannot be decoded: {exc}") from None
    if data.shape[0] == 0:
        raise AudioFileError(f"{path} holds no samples")
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono), int(rate)


def _read_ffmpeg(path: Path, soundfile_says: str) -> tuple[np.ndarray, int]:
    """Mono float32 at the file's own rate through PyAV, for a file libsndfile does not read."""
    # libsndfile's own words ("Format not recognised.") after the file's name, without a Python repr.
    refused = f"{path} is not an audio file soundfile can read (WAV, FLAC, OGG…): {soundfile_says.rstrip('.')}"
    if importlib.util.find_spec("av") is None:
        raise AudioFileError(f"{refused}; {FFMPEG_HINT}")
    import av

    try:
        container = av.open(str(path), mode="r", metadata_errors="ignore")
    except (av.error.FFmpegError, ValueError):
        raise AudioFileError(f"{refused}; nor can FFmpeg (PyAV)") from None
    with container:
        if not container.streams.audio:
            raise AudioFileError(f"{path} holds no audio stream")
        rate = int(container.streams.audio[0].rate)
        # FFmpeg mixes the channels down, as the server's decoder does; the rate stays the file's own.
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        try:
            chunks = [out.to_ndarray().reshape(-1) for frame in container.decode(audio=0)
                      for out in resampler.resample(frame)]
            chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
        except av.error.FFmpegError as exc:
            raise AudioFileError(f"{path} cannot be decoded by FFmpeg: {exc}") from None
    if not chunks or sum(len(c) for c in chunks) == 0:
        raise AudioFileError(f"{path} holds no samples")
    return np.ascontiguousarray(np.concatenate(chunks), dtype=np.float32), rate
