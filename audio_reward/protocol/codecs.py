"""Codecs between numpy float32 waveforms and the protocol's audio encodings.

Decoding returns read-only views over the decoded bytes where numpy allows
(float32 little-endian on a little-endian host needs no copy), so a 10 s clip
is not copied between the base64 decoder and the engine.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pybase64

_F32 = np.dtype("<f4")
_I16 = np.dtype("<i2")


class AudioDecodeError(ValueError):
    """Bytes that are not audio in the announced encoding; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def as_float32_mono(waveform: Any) -> np.ndarray:
    """Turn a numpy array, a CPU torch tensor or a list into a 1-D float32 array.

    Torch tensors are accepted without importing torch: anything with a
    ``.numpy()`` method (after ``.detach().cpu()`` when present) works.
    """
    if hasattr(waveform, "detach"):
        waveform = waveform.detach()
    if hasattr(waveform, "cpu") and not isinstance(waveform, np.ndarray):
        waveform = waveform.cpu()
    if hasattr(waveform, "numpy") and not isinstance(waveform, np.ndarray):
        waveform = waveform.numpy()
    arr = np.asarray(waveform)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise ValueError(f"waveform must be mono (1-D), got shape {arr.shape}")
    if arr.dtype == _I16 or arr.dtype == np.int16:
        return arr.astype(np.float32) / 32768.0
    return np.ascontiguousarray(arr, dtype=np.float32)


def b64decode(text: str, *, field: str) -> bytes:
    """Strict base64 decode: rejects characters outside the alphabet and bad padding."""
    try:
        return pybase64.b64decode(text, validate=True)
    except (ValueError, TypeError) as exc:
        raise AudioDecodeError("invalid_base64", f"{field} is not valid base64 ({exc})") from None


def encode_f32(waveform: Any) -> str:
    """Base64 of mono float32 little-endian samples (verl-omni's encoding)."""
    arr = as_float32_mono(waveform).astype(_F32, copy=False)  # a copy only on a big-endian host
    return pybase64.b64encode(arr.data.cast("B")).decode("ascii")


def decode_f32(text: str, *, field: str = "waveform_f32_base64") -> np.ndarray:
    """Samples from base64 of little-endian float32; :class:`AudioDecodeError` naming ``field`` if malformed."""
    return frombuffer_f32(b64decode(text, field=field), field=field)


def frombuffer_f32(raw: bytes, *, field: str = "waveform_f32_base64") -> np.ndarray:
    """Float32 little-endian samples over ``raw`` (a read-only view, no copy)."""
    if len(raw) % _F32.itemsize:
        raise AudioDecodeError(
            "invalid_audio_length",
            f"{field} decodes to {len(raw)} bytes, not a whole number of 4-byte float32 samples",
        )
    return np.frombuffer(raw, dtype=_F32)


def encode_pcm16(waveform: Any) -> str:
    """Base64 of mono signed 16-bit little-endian PCM; samples are clipped to [-1, 1]."""
    arr = as_float32_mono(waveform)
    # Same scale both ways (2**15) so a round trip is off by at most half a step.
    pcm = np.clip(np.rint(arr * 32768.0), -32768, 32767).astype(_I16)
    return pybase64.b64encode(pcm.tobytes()).decode("ascii")


def decode_pcm16(text: str, *, field: str = "waveform_pcm16_base64") -> np.ndarray:
    """Samples in [-1, 1) from base64 of little-endian int16; :class:`AudioDecodeError` naming ``field`` if bad."""
    return frombuffer_pcm16(b64decode(text, field=field), field=field)


def frombuffer_pcm16(raw: bytes, *, field: str = "waveform_pcm16_base64") -> np.ndarray:
    """Signed 16-bit little-endian PCM in ``raw`` as float32 in [-1, 1)."""
    if len(raw) % _I16.itemsize:
        raise AudioDecodeError(
            "invalid_audio_length",
            f"{field} decodes to {len(raw)} bytes, not a whole number of 2-byte PCM16 samples",
        )
    samples = np.frombuffer(raw, dtype=_I16).astype(np.float32)
    samples /= np.float32(32768.0)
    return samples


def encode_file(waveform: Any, sample_rate: int, *, fmt: str = "WAV") -> str:
    """Base64 of a whole audio file (``WAV`` float32 or ``FLAC`` 16-bit)."""
    import soundfile as sf

    arr = as_float32_mono(waveform)
    buf = io.BytesIO()
    subtype = "FLOAT" if fmt.upper() == "WAV" else "PCM_16"
    sf.write(buf, arr, int(sample_rate), format=fmt.upper(), subtype=subtype)
    return pybase64.b64encode(buf.getvalue()).decode("ascii")


def describe_bytes(raw: bytes) -> str:
    """What a file that is not readable audio looks like, for an error message (never a Python repr)."""
    import puremagic

    try:
        match = puremagic.magic_string(raw[:8192])[0]
    except (puremagic.PureError, IndexError, ValueError):
        match = None
    if match is not None and match.name:
        kind = f"{match.name.removesuffix(' file')} ({match.extension or match.mime_type})"
        if match.mime_type.startswith("audio/") or "audio" in match.name.lower():
            return f"it looks like {kind} but cannot be decoded (damaged, truncated or an unsupported codec)"
        return f"it looks like {kind}"
    head = raw[:4096]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and sum(c.isprintable() or c.isspace() for c in text) >= 0.95 * len(text):
        return "it looks like text"
    return f"its format is unknown (first bytes {head[:8].hex(' ')})"


# libsndfile's SF_COUNT_MAX: what it reports for a FLAC whose STREAMINFO says
# total_samples = 0 (unknown length, written by streaming encoders).
_UNKNOWN_FRAMES = 2**63 - 1

FILE_FORMATS = "WAV, FLAC, MP3, OGG (Vorbis, Opus), AIFF or another format libsndfile reads"
"""What ``audio_file_base64`` takes with the base install (libsndfile); docs/protocol.md lists the same."""


@dataclass(frozen=True)
class FileDecoder:
    """A decoder for files libsndfile does not read (the scorer server's FFmpeg), used after libsndfile.

    ``decode(raw, field, max_seconds, max_bytes)`` returns mono float32 samples and their rate, or
    None when the bytes are no audio it knows; it must stop decoding at ``max_seconds`` (raising
    :class:`AudioDecodeError` ``audio_too_long``), as libsndfile's path does.  ``formats`` says what
    the two read together, for the error a non-audio file gets.
    """

    decode: Callable[[bytes, str, float, int], tuple[np.ndarray, int] | None]
    formats: str


@dataclass(frozen=True)
class FileHeader:
    """What an audio file's header declares, read before any sample is decoded."""

    format: str
    sample_rate: int
    channels: int
    frames: int | None
    """Declared frames per channel; None when the file does not say (streamed FLAC)."""

    @property
    def decoded_bytes(self) -> int | None:
        """Bytes the decoded float32 samples (every channel) will take; None when unknown."""
        return None if self.frames is None else self.frames * self.channels * _F32.itemsize


def read_file_header(raw: bytes, *, field: str = "audio_file_base64", formats: str = FILE_FORMATS) -> FileHeader:
    """The header of an audio file libsndfile reads (WAV, FLAC, MP3, OGG...) held in ``raw``; decodes no sample.

    ``formats`` is what the caller accepts, named in the error for bytes that are not such a file.
    """
    import soundfile as sf

    if not raw:
        raise AudioDecodeError("empty_audio", f"{field} is empty")
    try:
        with sf.SoundFile(io.BytesIO(raw)) as f:
            fmt, rate, channels, frames = f.format, int(f.samplerate), int(f.channels), int(f.frames)
    except Exception:  # noqa: BLE001 - soundfile raises LibsndfileError, RuntimeError, TypeError…
        # soundfile's own message names the BytesIO object, not the problem: describe the bytes instead.
        raise AudioDecodeError(
            "invalid_audio_file", f"{field} is not an audio file: {describe_bytes(raw)}; send {formats}"
        ) from None
    if channels < 1:
        raise AudioDecodeError("invalid_audio_file", f"{field} declares {channels} channels")
    return FileHeader(fmt, rate, channels, None if frames >= _UNKNOWN_FRAMES else frames)


def check_file_size(header: FileHeader, *, field: str, max_seconds: float | None, max_bytes: int | None) -> None:
    """Refuse a file whose header declares more audio than the limits allow (unknown lengths pass)."""
    if header.frames is None:
        return
    if max_seconds is not None and header.sample_rate > 0 and header.frames / header.sample_rate > max_seconds:
        raise AudioDecodeError(
            "audio_too_long",
            f"{field} holds {header.frames / header.sample_rate:.1f} s of audio; the limit is {max_seconds:g} s "
            "(max_audio_seconds)",
        )
    size = header.decoded_bytes
    if max_bytes is not None and size is not None and size > max_bytes:
        raise AudioDecodeError(
            "audio_too_large",
            f"{field} declares {header.frames} frames x {header.channels} channels, {size} bytes once decoded "
            f"to float32; the limit is {max_bytes} bytes (max_audio_bytes)",
        )


def decode_file_bytes(raw: bytes, header: FileHeader, *, field: str = "audio_file_base64",
                      max_frames: int | None = None, limit_name: str = "the limit") -> np.ndarray:
    """Decode an audio file (any libsndfile format) to mono float32, never holding more than ``max_frames`` frames.

    A file of known length is read in one call (its header was checked against
    the limits).  A file of unknown length is decoded block by block and
    refused with ``audio_too_long`` as soon as it passes ``max_frames``.
    Multi-channel audio is averaged to mono.
    """
    import soundfile as sf

    try:
        with sf.SoundFile(io.BytesIO(raw)) as f:
            if header.frames is not None:
                return _mono(f.read(header.frames, dtype="float32", always_2d=True))
            return _read_unknown_length(f, header, field, max_frames, limit_name)
    except AudioDecodeError:
        raise
    except Exception:  # noqa: BLE001 - soundfile raises LibsndfileError, RuntimeError, TypeError…
        # soundfile's own message names the BytesIO object, not the problem: describe the bytes instead.
        raise AudioDecodeError(
            "invalid_audio_file", f"{field} cannot be decoded: {describe_bytes(raw)}; send {FILE_FORMATS}"
        ) from None


def _mono(data: np.ndarray) -> np.ndarray:
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono, dtype=np.float32)


def _read_unknown_length(f: Any, header: FileHeader, field: str, max_frames: int | None, limit_name: str) -> np.ndarray:
    import soundfile as sf

    block = max(1024, header.sample_rate)  # one second per read
    cap = max_frames if max_frames is not None else 2**31
    out = np.empty(cap + 1, dtype=np.float32)  # pages are touched only as samples arrive
    buf = np.empty((block, header.channels), dtype=np.float32)
    total = 0
    while total <= cap:
        want = min(block, cap + 1 - total)
        # soundfile seeks after every read; with no declared length the seek after the last,
        # short read fails although the samples were read.  FLAC decodes integer PCM, never
        # NaN, so a NaN-filled buffer shows how many frames that read delivered.
        buf[:want] = np.nan
        try:
            got = f.read(want, dtype="float32", always_2d=True, out=buf[:want]).shape[0]
            last = got < want
        except sf.LibsndfileError:
            finite = np.isfinite(buf[:want, 0])
            got = want if finite.all() else int(np.argmin(finite))
            last = True
        out[total:total + got] = _mono(buf[:got])
        total += got
        if last:
            break
    if total > cap:
        seconds = cap / header.sample_rate if header.sample_rate else 0.0
        raise AudioDecodeError(
            "audio_too_long",
            f"{field} has no declared length and holds more than {cap} frames ({seconds:.1f} s) of audio; "
            f"decoding stopped at the limit ({limit_name})",
        )
    return out[:total]


def decode_file(
    text: str, *, field: str = "audio_file_base64", max_seconds: float | None = None, max_bytes: int | None = None
) -> tuple[np.ndarray, int]:
    """Decode a base64 audio file (WAV, FLAC, MP3, OGG...) to (mono float32 samples, sample rate).

    Multi-channel files are averaged to mono.  ``max_seconds`` and ``max_bytes``
    (decoded float32 bytes, all channels) are checked against the header before
    any sample is decoded; a file that declares no length is decoded as a
    stream and stops at the limit.
    """
    raw = b64decode(text, field=field)
    header = read_file_header(raw, field=field)
    check_file_size(header, field=field, max_seconds=max_seconds, max_bytes=max_bytes)
    max_frames, limit_name = max_frames_for(header, max_seconds, max_bytes)
    return decode_file_bytes(raw, header, field=field, max_frames=max_frames, limit_name=limit_name), header.sample_rate


def max_frames_for(header: FileHeader, max_seconds: float | None, max_bytes: int | None,
                   ) -> tuple[int | None, str]:
    """The most frames (per channel) a file may decode to, and the name of the limit that sets it."""
    caps = []
    if max_seconds is not None and header.sample_rate > 0:
        caps.append((int(max_seconds * header.sample_rate), "max_audio_seconds"))
    if max_bytes is not None:
        caps.append((max_bytes // (header.channels * _F32.itemsize), "max_audio_bytes"))
    return min(caps) if caps else (None, "the limit")
