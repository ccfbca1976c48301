"""Reading an audio file into what the client sends: mono float32 samples and a sample rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class AudioFileError(ValueError):
    """An audio file that cannot be used: missing, a folder, or a format libsndfile does not read."""


def read_audio(path: Path | str) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the sample rate of a WAV/FLAC (or any libsndfile) file.

    Raises :class:`AudioFileError` with a sentence a person can act on.
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
        # libsndfile's own words ("Format not recognised.") after the file's name, without a Python repr.
        raise AudioFileError(f"{path} is not an audio file soundfile can read (WAV, FLAC, OGG…): "
                             f"{exc.error_string}") from None
    except (RuntimeError, TypeError, ValueError) as exc:
        raise AudioFileError(f"{path} cannot be decoded: {exc}") from None
    if data.shape[0] == 0:
        raise AudioFileError(f"{path} holds no samples")
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono), int(rate)
