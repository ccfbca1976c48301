"""``torchaudio.compliance.kaldi`` stand-in: importable, never usable."""

from typing import Any, NoReturn


def fbank(*args: Any, **kwargs: Any) -> NoReturn:
    raise RuntimeError("torchaudio is not installed: the 25 Hz Qwen3-TTS tokenizer (kaldi fbank) is unavailable here")
