"""Named presets that fix model, normalizer and decoding together.

A preset keeps a published evaluation reproducible: ``--preset seed-tts-eval-en``
always means Whisper-large-v3, greedy decoding, English forced and the
Seed-TTS-eval normalization; ``--preset seed-tts-eval-zh`` Paraformer-zh on
FunASR (give its folder with ``--model DIR``), Chinese and the same rules.
Explicit flags still override a preset's fields.

Each preset names the engine it was validated with; ``model_for(engine)``
gives the same model in the form another engine loads (Qwen3-ASR ships a
transformers-format repository, ``-hf``, beside the original one that vLLM
reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Preset:
    name: str
    engine: str
    model: str
    normalizer: str
    language: str | None
    beam_size: int
    description: str
    engine_models: dict[str, str] = field(default_factory=dict)
    """The model id to use when the preset runs on another engine than ``engine``."""

    def model_for(self, engine: str) -> str:
        """The model id for ``engine`` (the preset's own model unless the engine needs another format)."""
        return self.engine_models.get(engine, self.model)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("seed-tts-eval-en", "transformers", "openai/whisper-large-v3", "seed-tts-eval", "en", 1,
               "Seed-TTS-eval English WER: Whisper-large-v3, greedy, English forced, its normalization.",
               {"faster-whisper": "large-v3"}),
        Preset("seed-tts-eval-zh", "funasr", "paraformer-zh", "seed-tts-eval", "zh", 1,
               "Seed-TTS-eval Chinese WER: Paraformer-zh through FunASR (a local model folder), its normalization."),
        Preset("qwen3-asr", "transformers", "Qwen/Qwen3-ASR-1.7B-hf", "basic", None, 1,
               "Qwen3-ASR-1.7B, multilingual (language detected unless a request names one), greedy.",
               {"vllm": "Qwen/Qwen3-ASR-1.7B"}),
        Preset("fast-en", "faster-whisper", "large-v3-turbo", "whisper-en", "en", 1,
               "Whisper large-v3-turbo with Whisper's English normalizer: fast and close to large-v3.",
               {"transformers": "openai/whisper-large-v3-turbo", "vllm": "openai/whisper-large-v3-turbo"}),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(sorted(PRESETS))}") from None
