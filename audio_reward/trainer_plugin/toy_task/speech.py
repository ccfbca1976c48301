"""What the toy policy's words sound like: a numbered tone for the instant engine, or espeak-ng speech.

The instant engine (``tests/testkit/instant_engine.py``, ``python -m tests.testkit.instant_engine``) reads
the number written into a clip's first sample and answers ``item <number>``.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Sequence

import numpy as np

SAMPLE_RATE = 16_000
WATERMARK_SCALE = 1e-5
"""Number ``n`` is written as ``n * 1e-5`` in the first sample (exact in float32 below 10^6)."""
SPEECH_KINDS = ("instant", "espeak")

WORDS = ("red", "green", "blue", "yellow", "black", "white", "brown", "pink")
"""The words the toy policy is asked to say."""


def watermark(audio: np.ndarray, number: int) -> np.ndarray:
    """``audio`` with ``number`` written in its first sample (in place), as the instant engine reads it."""
    audio[0] = np.float32(number * WATERMARK_SCALE)
    return audio


def number_of(audio: np.ndarray) -> int:
    """The number :func:`watermark` wrote into ``audio``."""
    return round(float(audio[0]) / WATERMARK_SCALE)


def instant_transcript(number: int) -> str:
    """What the instant engine answers for a clip carrying ``number``."""
    return f"item {number}"


def word_number(word: str | None) -> int:
    """The number that stands for ``word``: 1111 for the first word, 2222 for the second...; 0 for none.

    Repeated digits keep the words apart in a character error rate: another word's transcript
    differs in four of its nine characters.
    """
    return (WORDS.index(word) + 1) * 1111 if word in WORDS else 0


def target_text(word: str, kind: str) -> str:
    """The text the scorer should hear when the policy says ``word``."""
    check_kind(kind)
    return instant_transcript(word_number(word)) if kind == "instant" else word


def check_kind(kind: str) -> None:
    if kind not in SPEECH_KINDS:
        raise ValueError(f"unknown speech kind {kind!r}; one of {', '.join(SPEECH_KINDS)}")


def tone(seconds: float = 0.2, frequency: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE), dtype=np.float32) / SAMPLE_RATE
    return (0.1 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def speak(words: Sequence[str], kind: str) -> tuple[np.ndarray, int]:
    """The audio of ``words`` (a policy's response) as ``kind`` speech: samples and rate."""
    check_kind(kind)
    if kind == "instant":
        # Only the first toy word counts: the instant engine reads one number per clip.
        first = next((w for w in words if w in WORDS), None)
        return watermark(tone(), word_number(first)), SAMPLE_RATE
    text = " ".join(words).strip()
    if not text:
        return np.zeros(SAMPLE_RATE // 4, np.float32), SAMPLE_RATE  # nothing said: silence
    return espeak(text)


def espeak(text: str) -> tuple[np.ndarray, int]:
    """``text`` spoken by espeak-ng (Debian package ``espeak-ng``)."""
    import soundfile

    binary = shutil.which("espeak-ng")
    if binary is None:
        raise RuntimeError("the toy task's espeak speech needs espeak-ng (apt-get install -y espeak-ng)")
    wav = subprocess.run([binary, "--stdout", text], capture_output=True, check=True).stdout
    audio, rate = soundfile.read(io.BytesIO(wav), dtype="float32")
    return np.ascontiguousarray(audio), int(rate)
