"""Codecs between numpy float32 waveforms and the protocol's audio encodings.

Decoding returns read-only views over the decoded bytes where numpy allows
(float32 little-endian on a little-endian host needs no copy), so a 10 s clip
is not copied between the base64 decoder and the engine.
"""

from __future__ import annotations

import io
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
    for method in ("detach", "cpu", "numpy"):  # a tensor's way to numpy; an ndarray has none of them
        if hasattr(waveform, method):
            waveform = getattr(waveform, method)()
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


def _whole_samples(raw: bytes, dtype: np.dtype[Any], field: str, kind: str) -> np.ndarray:
    """``raw`` as samples of ``dtype`` (a read-only view); ``invalid_audio_length`` unless it holds whole ones."""
    if len(raw) % dtype.itemsize:
        raise AudioDecodeError(
            "invalid_audio_length",
            f"{field} decodes to {len(raw)} bytes, not a whole number of {dtype.itemsize}-byte {kind} samples",
        )
    return np.frombuffer(raw, dtype=dtype)


def frombuffer_f32(raw: bytes, *, field: str = "waveform_f32_base64") -> np.ndarray:
    """Float32 little-endian samples over ``raw`` (a read-only view, no copy)."""
    return _whole_samples(raw, _F32, field, "float32")


def encode_pcm16(waveform: Any) -> str:
    """Base64 of mono signed 16-bit little-endian PCM; samples are clipped to [-1, 1]."""
    # Same scale both ways (2**15) so a round trip is off by at most half a step.
    pcm = np.clip(np.rint(as_float32_mono(waveform) * 32768.0), -32768, 32767).astype(_I16)
    return pybase64.b64encode(pcm.tobytes()).decode("ascii")


def decode_pcm16(text: str, *, field: str = "waveform_pcm16_base64") -> np.ndarray:
    """Samples in [-1, 1) from base64 of little-endian int16; :class:`AudioDecodeError` naming ``field`` if bad."""
    return frombuffer_pcm16(b64decode(text, field=field), field=field)


def frombuffer_pcm16(raw: bytes, *, field: str = "waveform_pcm16_base64") -> np.ndarray:
    """Signed 16-bit little-endian PCM in ``raw`` as float32 in [-1, 1)."""
    samples = _whole_samples(raw, _I16, field, "PCM16").astype(np.float32)
    samples /= np.float32(32768.0)
    return samples


def encode_file(waveform: Any, sample_rate: int, *, fmt: str = "WAV") -> str:
    """Base64 of a whole audio file (``WAV`` float32 or ``FLAC`` 16-bit)."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, as_float32_mono(waveform), int(sample_rate), format=fmt.upper(),
             subtype="FLOAT" if fmt.upper() == "WAV" else "PCM_16")
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
