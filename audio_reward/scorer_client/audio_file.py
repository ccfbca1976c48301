"""Reading an audio file into what the client sends: mono float32 samples and a sample rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..protocol import AudioDecodeError, describe_bytes
from ..protocol.audio import FileDecoder
from ..protocol.audio import read_audio as _read


class AudioFileError(ValueError):
    """An audio file that cannot be used: missing, a folder, or a format neither libsndfile nor FFmpeg reads."""


FFMPEG_HINT = "M4A, WebM and other FFmpeg formats need PyAV: pip install av (the server environment has it)"
"""What a user whose file libsndfile does not know can do about it, where PyAV is not installed."""


def read_audio(path: Path | str) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the sample rate of an audio file.

    The protocol's reader, as the server reads files: libsndfile reads WAV,
    FLAC, MP3 and OGG; where PyAV is installed (the server environment has it)
    FFmpeg reads what libsndfile does not, such as M4A and WebM, at the file's
    own rate.  Raises :class:`AudioFileError` with a sentence a person can act on.
    """
    path = Path(path)
    if not path.exists():
        raise AudioFileError(f"{path} does not exist")
    if not path.is_file():
        raise AudioFileError(f"{path} is not a file")
    ffmpeg = FileDecoder() if FileDecoder.available() else None
    try:
        return _read(path, decoder=ffmpeg)
    except AudioDecodeError as exc:
        if exc.code != "invalid_audio_file":
            raise AudioFileError(str(exc)) from None
        readers = "nor can FFmpeg (PyAV)" if ffmpeg else FFMPEG_HINT
        raise AudioFileError(f"{path} is not an audio file soundfile can read (WAV, FLAC, OGG…): "
                             f"{describe_bytes(path.read_bytes())}; {readers}") from None
