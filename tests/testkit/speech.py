"""Real synthetic speech for tests, cached on disk by text.

``synth_speech`` uses the ``hibari-tts`` model (English, 24 kHz): natural
enough that Whisper tiny.en reads it almost perfectly, so it stands in for a
good TTS policy.  ``espeak_speech`` uses the Debian ``espeak-ng`` binary,
robotic and much harder for ASR: it stands in for a poor policy.

``tone`` is a plain sine, for tests where the words do not matter, and
``speech_16k`` is hibari speech at the engines' 16 kHz (``SENTENCES`` are the
engine tests' sentences).

Both speech makers return ``(float32 mono samples, sample_rate)`` and cache the result as a
``.npz`` file keyed by a hash of the text, so a test session synthesizes each
sentence once (also across sessions).  ``AUDIO_REWARD_TEST_CACHE`` moves the
cache (default: ``<tmp>/audio-reward-test-speech``).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

HIBARI_SEED = 0
"""Hibari adds noise from an RNG; a fixed seed makes every synthesis bit-identical."""

_lock = threading.Lock()


def cache_dir() -> Path:
    root = os.environ.get("AUDIO_REWARD_TEST_CACHE") or os.path.join(tempfile.gettempdir(), "audio-reward-test-speech")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _cached(kind: str, text: str, make: Callable[[str], tuple[np.ndarray, int]]) -> tuple[np.ndarray, int]:
    key = hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()[:32]
    path = cache_dir() / f"{kind}-{key}.npz"
    with _lock:
        if path.exists():
            try:
                with np.load(path) as data:
                    return data["audio"].astype(np.float32, copy=False), int(data["rate"])
            except (OSError, ValueError, KeyError):
                path.unlink(missing_ok=True)  # a torn write from an interrupted run: make it again
        audio, rate = make(text)
        # Write then rename, so a concurrent reader never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, audio=audio, rate=np.int64(rate))
        os.replace(tmp, path)
        return audio, rate


@functools.lru_cache(maxsize=1)
def _hibari():  # type: ignore[no-untyped-def]
    from hibari import Hibari

    return Hibari()


def _make_hibari(text: str) -> tuple[np.ndarray, int]:
    tts = _hibari()
    audio = np.ascontiguousarray(tts(text, seed=HIBARI_SEED), dtype=np.float32)
    return audio, int(tts.sample_rate)


def synth_speech(text: str) -> tuple[np.ndarray, int]:
    """Natural-sounding English speech of ``text``: (float32 samples, 24000)."""
    return _cached("hibari", text, _make_hibari)


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def _make_espeak(text: str, voice: str = "en-us") -> tuple[np.ndarray, int]:
    import soundfile as sf

    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed: apt-get install -y espeak-ng")
    wav = subprocess.run([exe, "--stdout", "-v", voice, text], check=True, capture_output=True, timeout=60).stdout
    data, rate = sf.read(io.BytesIO(wav), dtype="float32", always_2d=True)
    return np.ascontiguousarray(data[:, 0]), int(rate)


def espeak_speech(text: str, voice: str = "en-us") -> tuple[np.ndarray, int]:
    """Robotic espeak-ng speech of ``text`` (hard for ASR): (float32 samples, 22050).

    ``voice`` is an espeak-ng voice with an optional variant: ``de`` for German, ``en-us+f3`` or ``en-gb+m7`` for
    distinct speakers.
    """
    kind = "espeak" if voice == "en-us" else f"espeak-{voice}"
    return _cached(kind, text, functools.partial(_make_espeak, voice=voice))


SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Reinforcement learning rewards speech that matches the prompt.",
    "She sells sea shells by the sea shore.",
    "Seven purple elephants were painting the kitchen on a rainy Tuesday.",
)


def speech_16k(text: str) -> np.ndarray:
    """:func:`synth_speech` resampled to the engines' 16 kHz."""
    import soxr

    audio, rate = synth_speech(text)
    return soxr.resample(audio, rate, 16_000).astype(np.float32)


def tone(seconds: float = 0.5, *, hz: float = 220.0, rate: int = 16_000, amplitude: float = 0.1) -> np.ndarray:
    """A float32 sine of ``hz`` lasting ``seconds`` at ``rate``: audio with no words in it."""
    t = np.arange(int(seconds * rate), dtype=np.float32) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def ffmpeg_bytes(audio: np.ndarray, rate: int, container: str, codec: str, codec_rate: int) -> bytes:
    """Encode with FFmpeg (PyAV) into containers libsndfile cannot read: ``("ipod", "aac")`` is an M4A file,
    ``("webm", "libopus")`` a WebM one."""
    import av
    import soxr

    samples = soxr.resample(audio, rate, codec_rate).astype(np.float32)
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=codec_rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(samples[None, :], format="fltp" if codec == "aac" else "flt",
                                           layout="mono")
        frame.sample_rate = codec_rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            out.mux(packet)
    return buf.getvalue()
