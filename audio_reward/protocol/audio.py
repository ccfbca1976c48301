"""The one audio reader: a file (a path or its bytes) or raw samples to mono float32 and a sample rate.

libsndfile reads WAV, FLAC, MP3, OGG and AIFF; a :class:`FileDecoder` (FFmpeg through PyAV, where it is
installed) reads what libsndfile does not, such as M4A and WebM.  Sizes are bounded from the header before
any sample is decoded, and a file that declares no length stops at its limit.  The scorer server (score
requests and uploads), the client and the trainer all read audio here, so they take the same files and
refuse empty or non-finite audio with the same words.
"""

from __future__ import annotations

import importlib.util
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .codecs import (
    FILE_FORMATS,
    AudioDecodeError,
    FileHeader,
    check_file_size,
    decode_file_bytes,
    frombuffer_f32,
    frombuffer_pcm16,
    max_frames_for,
    read_file_header,
)
from .errors import Issue

FFMPEG_FORMATS = "WAV, FLAC, MP3, OGG, M4A, WebM or another format FFmpeg decodes"
"""Every file format libsndfile and FFmpeg read together."""


@dataclass(frozen=True)
class FileDecoder:
    """FFmpeg through PyAV, for the files libsndfile does not read; mono float32 at ``rate`` (None: the
    file's own).  ``formats`` names what libsndfile and this decoder read together, for the error a file
    that is no audio gets."""

    rate: int | None = None
    formats: str = FFMPEG_FORMATS

    @staticmethod
    def available() -> bool:
        """Whether PyAV is installed (the scorer server's environment has it; the base install does not)."""
        return importlib.util.find_spec("av") is not None

    def decode(self, raw: bytes, field: str, max_seconds: float | None) -> tuple[np.ndarray, int] | None:
        """Mono float32 samples and their rate, or None when the bytes hold no audio FFmpeg decodes.

        A container that declares a duration over ``max_seconds`` is refused before decoding, and one that
        does not stops at the limit (``audio_too_long``), as libsndfile's path does.
        """
        import av

        try:
            container = av.open(io.BytesIO(raw), mode="r", metadata_errors="ignore")
        except (av.error.FFmpegError, ValueError):
            return None
        with container:
            if not container.streams.audio:
                return None
            if max_seconds is not None and container.duration is not None \
                    and container.duration / av.time_base > max_seconds:
                raise _too_long(field, container.duration / av.time_base, max_seconds)
            rate = self.rate or int(container.streams.audio[0].rate)
            chunks = _decode_stream(container, av, rate, field, max_seconds)
        if chunks is None:
            return None
        return np.ascontiguousarray(np.concatenate(chunks) if chunks else np.zeros(0), dtype=np.float32), rate


def _too_long(field: str, seconds: float, limit: float) -> AudioDecodeError:
    return AudioDecodeError(
        "audio_too_long", f"{field} holds {seconds:.1f} s of audio; the limit is {limit:g} s (max_audio_seconds)")


def _decode_stream(container: object, av: object, rate: int, field: str,
                   max_seconds: float | None) -> list[np.ndarray] | None:
    """The first audio stream's samples, mixed down to mono at ``rate``; None when FFmpeg fails at once."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)  # type: ignore[attr-defined]
    chunks: list[np.ndarray] = []
    samples = 0
    try:
        for frame in container.decode(audio=0):  # type: ignore[attr-defined]
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
                samples += chunks[-1].shape[0]
            if max_seconds is not None and samples > max_seconds * rate:  # no duration must not decode an hour
                raise _too_long(field, samples / rate, max_seconds)
        chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    except av.error.FFmpegError:  # type: ignore[attr-defined]
        if not chunks:
            return None
    return chunks


@dataclass
class EncodedAudio:
    """Audio bytes after the checks that decode no sample: the encoding, the rate, and the size when known."""

    field: str
    raw: bytes
    rate: int
    header: FileHeader | None = None
    samples: np.ndarray | None = None
    """Already decoded (by a :class:`FileDecoder`, bounded as it decoded)."""

    @property
    def decoded_bytes(self) -> int | None:
        """Bytes of the decoded float32 samples (every channel); None for a file that declares no length."""
        if self.samples is not None:
            return int(self.samples.nbytes)
        if self.header is not None:
            return self.header.decoded_bytes
        return len(self.raw) * (1 if self.field == "waveform_f32_base64" else 2)

    def decode(self, max_seconds: float | None = None, max_bytes: int | None = None,
               budget: int | None = None) -> np.ndarray:
        """Mono float32 samples; a file of unknown length stops at the limits, or at ``budget`` bytes when that
        is lower (then ``batch_too_large``: the budget is what a batch's other items left)."""
        if self.samples is not None:
            return self.samples
        if self.header is None:
            if self.field == "waveform_pcm16_base64":
                return frombuffer_pcm16(self.raw, field=self.field)
            return frombuffer_f32(self.raw, field=self.field)
        max_frames, limit_name = max_frames_for(self.header, max_seconds, max_bytes)
        if budget is not None and self.header.frames is None:
            budget_frames = budget // (self.header.channels * 4)
            if max_frames is None or budget_frames < max_frames:
                max_frames, limit_name = budget_frames, "max_batch_audio_bytes"
        try:
            return decode_file_bytes(self.raw, self.header, field=self.field, max_frames=max_frames,
                                     limit_name=limit_name)
        except AudioDecodeError as exc:
            if exc.code == "audio_too_long" and limit_name == "max_batch_audio_bytes":
                exc.code = "batch_too_large"
            raise


def open_file(raw: bytes, *, field: str, max_seconds: float | None = None, max_bytes: int | None = None,
              decoder: FileDecoder | None = None, rates: tuple[int, int] | None = None,
              whose: str = "the file's") -> EncodedAudio:
    """A whole audio file: libsndfile's header, its rate within ``rates`` and its declared size within the
    limits; a file libsndfile does not read goes to ``decoder`` (bounded as it decodes)."""
    try:
        header = read_file_header(raw, field=field, formats=decoder.formats if decoder else FILE_FORMATS)
    except AudioDecodeError as exc:
        decoded = decoder.decode(raw, field, max_seconds) if decoder and exc.code == "invalid_audio_file" else None
        if decoded is None:
            raise
        samples, rate = decoded
        if max_bytes is not None and samples.nbytes > max_bytes:
            raise AudioDecodeError("audio_too_large", f"{field} decodes to {samples.nbytes} bytes of float32 "
                                   f"samples; the limit is {max_bytes} bytes (max_audio_bytes)") from None
        return EncodedAudio(field, raw, rate, samples=samples)
    if rates is not None and not rates[0] <= header.sample_rate <= rates[1]:
        raise AudioDecodeError("invalid_sample_rate",
                               f"{whose} sample rate {header.sample_rate} Hz is outside {rates[0]}–{rates[1]} Hz")
    check_file_size(header, field=field, max_seconds=max_seconds, max_bytes=max_bytes)
    return EncodedAudio(field, raw, header.sample_rate, header)


def sample_issues(waveform: np.ndarray, field: str, path: str = "$") -> list[Issue]:
    """What makes decoded audio unusable: no samples, or NaN or infinite ones."""
    if waveform.shape[0] == 0:
        return [Issue("empty_audio", f"{field} holds no samples", path)]
    finite = np.isfinite(waveform)
    if not finite.all():
        bad = int(np.count_nonzero(~finite))
        return [Issue("non_finite_audio", f"{field} holds {bad} NaN or infinite samples", path)]
    return []


def read_audio(source: bytes | str | Path, *, field: str | None = None, max_seconds: float | None = None,
               max_bytes: int | None = None, decoder: FileDecoder | None = None) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the sample rate of an audio file, named by its path or held in bytes.

    Multi-channel audio is averaged to mono.  ``decoder`` reads what libsndfile does not; the limits bound
    the decoding.  Raises :class:`~audio_reward.protocol.AudioDecodeError` (a ValueError) whose ``code`` is
    the protocol's, naming ``field`` (by default the path).
    """
    raw = source if isinstance(source, bytes) else Path(source).read_bytes()
    name = field or str(source if not isinstance(source, bytes) else "the audio")
    audio = open_file(raw, field=name, max_seconds=max_seconds, max_bytes=max_bytes, decoder=decoder)
    waveform = audio.decode(max_seconds, max_bytes)
    issues = sample_issues(waveform, name)
    if issues:
        raise AudioDecodeError(issues[0].code, issues[0].message)
    return waveform, audio.rate
