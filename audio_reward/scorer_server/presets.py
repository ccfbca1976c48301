"""Named presets that fix model, normalizer and decoding together.

A preset keeps a published evaluation reproducible: ``--preset seed-tts-eval-en``
always means Whisper-large-v3, greedy decoding, English forced and the
Seed-TTS-eval normalization.  Explicit flags still override a preset's fields.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    name: str
    engine: str
    model: str
    normalizer: str
    language: str | None
    beam_size: int
    description: str


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "seed-tts-eval-en", "transformers", "openai/whisper-large-v3", "seed-tts-eval", "en", 1,
            "Seed-TTS-eval English WER: Whisper-large-v3, greedy, English forced, its normalization.",
        ),
        Preset(
            "qwen3-asr", "transformers", "Qwen/Qwen3-ASR-1.7B", "basic", None, 1,
            "Qwen3-ASR-1.7B, multilingual, greedy.",
        ),
        Preset(
            "fast-en", "faster-whisper", "large-v3-turbo", "whisper-en", "en", 1,
            "Whisper large-v3-turbo with Whisper's English normalizer: fast and close to large-v3.",
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(sorted(PRESETS))}") from None
