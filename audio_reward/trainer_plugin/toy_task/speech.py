"""What the toy policy's words sound like: a tone carrying the words for the instant engine, or espeak-ng speech.

Both kinds are scored by the product's own reward against the target word, so
the two engines judge the same thing: the exact words said.  An empty answer
is heard as nothing (reward 0), and every word said beyond the target costs
characters of CER (``"blue please"`` against ``"blue"`` is 7/4, clipped to a
reward of 0).

The instant engine (``tests/testkit/instant_engine.py``, ``python -m
tests.testkit.instant_engine``) reads a number written into a clip's first
sample and answers ``item <number>``; the toy task writes :data:`TEXT_MARK`
there and the words' UTF-8 bytes after it (:func:`text_clip`), and the engine
answers those words.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Sequence

import numpy as np

SAMPLE_RATE = 16_000
WATERMARK_SCALE = 1e-5
"""Number ``n`` is written as ``n * 1e-5`` in a sample (exact in float32 below 10^6)."""
TEXT_MARK = 999_999
"""The first sample's number when the clip carries text (:func:`text_clip`) rather than an item number."""
SPEECH_KINDS = ("instant", "espeak")

TRAIN_WORDS = (
    "blue", "yellow", "black", "orange", "purple", "water", "house", "mountain", "window", "paper", "table",
    "music", "doctor", "yes", "no", "family", "four", "two", "dog", "bird", "fish", "money", "happy", "winter",
    "morning", "evening", "coffee", "island", "castle", "planet", "pencil", "letter",
)
"""The words the training prompts ask for."""
HELDOUT_WORDS = (
    "market", "village", "silence", "history", "rocket", "basket", "pocket", "monkey", "turtle", "chicken",
    "lunch", "breakfast", "student", "number", "cloud", "bridge",
)
"""Words no training prompt asks for: validation and the before/after evaluation ask for these."""
WORDS = TRAIN_WORDS + HELDOUT_WORDS
"""Every word the toy policy is asked to say.  Each one, spoken alone by espeak-ng, is transcribed exactly by
Whisper tiny.en through the server (``tests/integration/trainer/test_toy_reward.py``); ``red``, ``green``,
``white``, ``three`` (heard as "3") and ``thunder`` were not, and are left out."""


def watermark(audio: np.ndarray, number: int) -> np.ndarray:
    """``audio`` with ``number`` written in its first sample (in place), as the instant engine reads it."""
    audio[0] = np.float32(number * WATERMARK_SCALE)
    return audio


def number_of(audio: np.ndarray, at: int = 0) -> int:
    """The number :func:`watermark` wrote into ``audio[at]``."""
    return round(float(audio[at]) / WATERMARK_SCALE)


def instant_transcript(number: int) -> str:
    """What the instant engine answers for a clip carrying ``number``."""
    return f"item {number}"


def text_clip(text: str, seconds: float = 0.2) -> np.ndarray:
    """A tone carrying ``text`` for the instant engine: :data:`TEXT_MARK`, the byte count, then the bytes."""
    data = text.encode("utf-8")
    audio = tone(max(seconds, (len(data) + 2) / SAMPLE_RATE))
    watermark(audio, TEXT_MARK)
    audio[1] = np.float32(len(data) * WATERMARK_SCALE)
    audio[2:2 + len(data)] = np.frombuffer(data, np.uint8).astype(np.float32) * np.float32(WATERMARK_SCALE)
    return audio


def text_of(audio: np.ndarray) -> str | None:
    """The text :func:`text_clip` wrote into ``audio``; None for a clip that carries an item number instead."""
    if len(audio) < 2 or number_of(audio) != TEXT_MARK:
        return None
    data = np.rint(audio[2:2 + number_of(audio, 1)].astype(np.float64) / WATERMARK_SCALE).astype(np.uint8).tobytes()
    return data.decode("utf-8", errors="replace")


def tone(seconds: float = 0.2, frequency: float = 440.0, level: float = 0.1, phase: float = 0.0) -> np.ndarray:
    """A sine of ``frequency`` Hz at :data:`SAMPLE_RATE`, float32."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (level * np.sin(2 * np.pi * frequency * t + phase)).astype(np.float32)


def speak(words: Sequence[str], kind: str) -> tuple[np.ndarray, int]:
    """The audio of ``words`` (a policy's response) as ``kind`` speech: samples and rate."""
    if kind not in SPEECH_KINDS:
        raise ValueError(f"unknown speech kind {kind!r}; one of {', '.join(SPEECH_KINDS)}")
    text = " ".join(words).strip()
    if kind == "instant":
        return text_clip(text), SAMPLE_RATE
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
