"""ASR with Hugging Face transformers: Whisper checkpoints and native Qwen3-ASR.

``--engine transformers`` runs batched greedy ``generate`` in PyTorch: float16
(Whisper) or bfloat16 (Qwen3-ASR) on a GPU, float32 on the CPU.  The model is

* a packaged CTranslate2 name (``tiny.en``, ``base``) or a CTranslate2 folder:
  converted once, exactly, into a transformers checkpoint in the cache
  (:mod:`.convert`), so the engine runs offline on the same weights as
  faster-whisper;
* a transformers checkpoint folder or hub id whose ``model_type`` is
  ``whisper`` or ``qwen3_asr`` (Qwen3-ASR's transformers-format repos end in
  ``-hf``, e.g. ``Qwen/Qwen3-ASR-1.7B-hf``; native support needs
  transformers >= 5.24).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from audio_reward.extras import install_hint

from ..devices import set_up_torch
from . import qwen3_asr
from .base import (
    ENGINE_SAMPLE_RATE,
    EngineInfo,
    EngineOption,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
    max_new_tokens_for,
)
from .checkpoints import UnsupportedModelError, checkpoint_architecture, default_dtype, resolve_transformers_checkpoint
from .registry import EngineConfig

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

WHISPER_WINDOW_S = 30.0

_DTYPES = {
    "float16": "float16", "fp16": "float16", "half": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float32": "float32", "fp32": "float32", "float": "float32",
}


def resolve_dtype(compute_type: str, device: str, architecture: str) -> torch.dtype:
    """The torch dtype of ``compute_type``; ``default``: :func:`.checkpoints.default_dtype`."""
    import torch

    name = default_dtype(device, architecture) if compute_type == "default" else _DTYPES.get(compute_type.lower())
    if name is None:
        raise ValueError(f"compute type {compute_type!r} is not supported by the transformers engine; "
                         f"use default, {', '.join(sorted(set(_DTYPES.values())))}")
    return getattr(torch, name)


class _WhisperBackend:
    """Batched short-form generate.

    Audio over 30 s is cut into 30 s windows decoded as separate rows of the
    same batch and joined: rewards score TTS utterances, which rarely exceed
    one window, and this keeps every row on the fast batched path.
    """

    def __init__(self, path: str, device: str, dtype: torch.dtype, load_kwargs: dict[str, Any]) -> None:
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        self.device, self.dtype = device, dtype
        self.processor = WhisperProcessor.from_pretrained(path)
        model = WhisperForConditionalGeneration.from_pretrained(path, dtype=dtype, **load_kwargs)
        # mypy cannot bind transformers' .to() (wrapped with functools.wraps) as a method.
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        gen = self.model.generation_config
        self.multilingual = bool(getattr(gen, "is_multilingual", False))
        self.id_to_lang = {i: tok[2:-2] for tok, i in (getattr(gen, "lang_to_id", None) or {}).items()}
        self.languages = frozenset(self.id_to_lang.values()) if self.multilingual else frozenset({"en"})
        self.special_ids = set(self.processor.tokenizer.all_special_ids) | {gen.eos_token_id}
        self.text_vocab = len(self.processor.tokenizer)

    def _generate(self, windows: list[np.ndarray], feats: Any, language: str | None
                  ) -> tuple[list[list[int]], list[str | None]]:
        import torch

        features = feats.input_features.to(self.device, self.dtype)
        kwargs: dict[str, Any] = {
            "attention_mask": feats.attention_mask.to(self.device), "do_sample": False, "num_beams": 1,
            "max_new_tokens": max_new_tokens_for(max(w.shape[0] for w in windows) / ENGINE_SAMPLE_RATE)}
        languages: list[str | None] = [language if self.multilingual else "en"] * len(windows)
        inputs: dict[str, Any] = {"input_features": features}
        with torch.inference_mode():
            if self.multilingual and language is None:
                # Encode once: detection reads these encoder outputs and generation reuses them.
                inputs = {"encoder_outputs": self.model.get_encoder()(features)}
                detected = self.model.detect_language(**inputs)
                languages = [self.id_to_lang.get(int(t)) for t in detected.view(-1).tolist()]
            if self.multilingual:
                kwargs.update(task="transcribe", language=[lang or "en" for lang in languages])
            out = self.model.generate(**inputs, **kwargs)
        sequences = out["sequences"] if isinstance(out, dict) else out
        # One generate call shares the batch's longest cap; each row keeps only its own.
        caps = [max_new_tokens_for(w.shape[0] / ENGINE_SAMPLE_RATE) for w in windows]
        rows = [[t for t in row[:cap] if t not in self.special_ids and t < self.text_vocab]
                for row, cap in zip(self._generated(sequences), caps, strict=True)]
        return rows, languages

    def _generated(self, sequences: torch.Tensor) -> list[list[int]]:
        """The generated tokens of each row, without the forced decoder prompt when generate returns it."""
        gen = self.model.generation_config
        prompt_ids = {gen.decoder_start_token_id, gen.no_timestamps_token_id, *self.id_to_lang}
        prompt_ids |= set((getattr(gen, "task_to_id", None) or {}).values())
        return [list(itertools.dropwhile(prompt_ids.__contains__, row)) for row in sequences.tolist()]

    def prepare(self, batch: Sequence[TranscriptionInput]
                ) -> list[tuple[str | None, list[int], list[np.ndarray], list[int], Any]]:
        """Per language group: its indices, 30 s windows, the owner of each window and their log-Mel features."""
        window = int(WHISPER_WINDOW_S * ENGINE_SAMPLE_RATE)
        by_language: dict[str | None, list[int]] = {}
        for i, item in enumerate(batch):
            by_language.setdefault(item.language, []).append(i)
        groups = []
        for language, indices in by_language.items():
            pieces = [(i, batch[i].audio[start : start + window]) for i in indices
                      for start in range(0, max(1, batch[i].audio.shape[0]), window)]
            owner, windows = [i for i, _ in pieces], [piece for _, piece in pieces]
            feats = self.processor.feature_extractor(windows, sampling_rate=ENGINE_SAMPLE_RATE, return_tensors="pt",
                                                     return_attention_mask=True)
            groups.append((language, indices, windows, owner, feats))
        return groups

    def run(self, batch: Sequence[TranscriptionInput], prepared: Any) -> list[Transcription]:
        results: list[Transcription | None] = [None] * len(batch)
        decode = self.processor.tokenizer.decode
        for language, indices, windows, owner, feats in prepared:
            rows, languages = self._generate(windows, feats, language)
            for i in indices:
                mine = [k for k, o in enumerate(owner) if o == i]
                text = " ".join(decode(rows[k], skip_special_tokens=True).strip() for k in mine)
                results[i] = Transcription(text=text.strip(), language=languages[mine[0]],
                                           num_tokens=sum(len(rows[k]) for k in mine))
        return [r for r in results if r is not None]


class _Qwen3ASRBackend:
    """Native transformers Qwen3-ASR: chat prompt with the audio, language forced by prefilling the reply."""

    def __init__(self, path: str, device: str, dtype: torch.dtype, load_kwargs: dict[str, Any]) -> None:
        try:
            from transformers import AutoProcessor, Qwen3ASRForConditionalGeneration
        except ImportError:
            import transformers

            raise UnsupportedModelError(f"Qwen3-ASR needs transformers>=5.24 (installed: {transformers.__version__}): "
                                        + install_hint("transformers")) from None
        self.device, self.dtype = device, dtype
        self.processor = AutoProcessor.from_pretrained(path)
        model = Qwen3ASRForConditionalGeneration.from_pretrained(path, dtype=dtype, **load_kwargs)
        # mypy cannot bind transformers' .to() (wrapped with functools.wraps) as a method.
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        # Decoder-only: prompts are left-padded so every row's reply starts at the same column.
        self.processor.tokenizer.padding_side = "left"
        self.languages = frozenset(qwen3_asr.language_table()) or None

    def prepare(self, batch: Sequence[TranscriptionInput]) -> Any:
        """The chat prompts and log-Mel features of ``batch`` (CPU work)."""
        return self.processor.apply_transcription_request(
            audio=[item.audio for item in batch], language=[item.language for item in batch], return_tensors="pt")

    def run(self, batch: Sequence[TranscriptionInput], prepared: Any) -> list[Transcription]:
        import torch

        inputs = prepared.to(self.device)
        inputs["input_features"] = inputs["input_features"].to(self.dtype)
        caps = [max_new_tokens_for(item.duration_s) + (qwen3_asr.LANGUAGE_PREFIX_TOKENS if item.language is None else 0)
                for item in batch]
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=max(caps), do_sample=False, num_beams=1)
        new_tokens = out[:, inputs["input_ids"].shape[1] :]
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) | {self.processor.tokenizer.pad_token_id}
        results = []
        for row, item, cap in zip(new_tokens.tolist(), batch, caps, strict=True):
            # One generate call shares the batch's longest cap; each row keeps only its own, up to its end.
            tokens = list(itertools.takewhile(lambda t: t not in eos_ids, row[:cap]))
            parsed = self.processor.parse_output(self.processor.tokenizer.decode(tokens, skip_special_tokens=True))
            results.append(Transcription(text=parsed["transcription"].strip(),
                                         language=item.language or qwen3_asr.language_code(parsed.get("language")),
                                         num_tokens=len(tokens)))
        return results


class TransformersEngine(ThreadedEngine):
    """Whisper or Qwen3-ASR in PyTorch via transformers; greedy, batched, decode length capped by duration."""

    splits_batches = True  # features on the CPU pool while the model runs the previous batch

    OPTIONS: ClassVar[Mapping[str, EngineOption]] = {
        "attn_implementation": EngineOption(str, None, "transformers attention kernel (sdpa, eager, "
                                            "flash_attention_2); default: the library's choice", nullable=True),
    }

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(workers=1)
        self._configure("transformers", config)
        # Either backend: ``languages`` (None when the checkpoint does not say), ``prepare`` (the CPU-side inputs,
        # ahead of the model) and ``run`` (the model's part, from what ``prepare`` returned).
        self._backend: _WhisperBackend | _Qwen3ASRBackend | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        import torch
        import transformers

        if self.config.beam_size != 1:
            raise ValueError("the transformers engine decodes greedily: set beam_size to 1")
        device = set_up_torch(self.config.device, self.config.cpu_threads)  # its threads convert a checkpoint too
        checkpoint = resolve_transformers_checkpoint(self.config.model)
        architecture = checkpoint_architecture(checkpoint.path)
        dtype = resolve_dtype(self.config.compute_type, device, architecture)
        backend_cls = _Qwen3ASRBackend if architecture == "qwen3_asr" else _WhisperBackend
        load_kwargs = {"attn_implementation": self.options["attn_implementation"]} \
            if self.options["attn_implementation"] else {}
        self._backend = backend_cls(checkpoint.path, device, dtype, load_kwargs)
        self.info = EngineInfo(engine="transformers", model_id=checkpoint.model_id,
                               weights_sha256=checkpoint.sha256, device=device,
                               compute_type=str(dtype).removeprefix("torch."),
                               extra={"architecture": architecture, "transformers": transformers.__version__,
                                      "torch": torch.__version__})
        log.info("transformers engine loaded", extra={"model": checkpoint.model_id, "device": device})

    @property
    def languages(self) -> frozenset[str] | None:
        return self._backend.languages if self._backend is not None else None

    def _chunks(self, batch: Sequence[TranscriptionInput]) -> list[Sequence[TranscriptionInput]]:
        step = max(1, self.config.max_batch_size)
        return [batch[start : start + step] for start in range(0, len(batch), step)]

    def prepare_sync(self, batch: Sequence[TranscriptionInput]) -> list[Any]:
        """Features and prompts of each ``max_batch_size`` chunk, on the CPU pool."""
        if self._backend is None:
            raise RuntimeError("engine not loaded: call load() first")
        return [self._backend.prepare(chunk) for chunk in self._chunks(batch)]

    def transcribe_prepared_sync(self, batch: Sequence[TranscriptionInput], prepared: Any) -> list[Transcription]:
        assert self._backend is not None  # prepare_sync, which checks it, ran first
        out: list[Transcription] = []
        with self._lock:
            for chunk, inputs in zip(self._chunks(batch), prepared, strict=True):
                out.extend(self._backend.run(chunk, inputs))
        return out

    def close(self) -> None:
        super().close()
        self._backend = None
