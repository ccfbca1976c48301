"""Whisper on CTranslate2 through faster-whisper: the embedded default engine.

Utterances up to one 30 s window are transcribed together in one CTranslate2
``generate`` call per scheduler batch (one encoder pass over the stacked
log-Mel windows, one batched greedy/beam decode): that is where a GPU gets its
speed, and on the CPU ``bench/cpu_peers.py`` measured it ahead of one
utterance per call through the server at concurrency 8 and 32 on AVX-512 and
AVX2 kernels alike (docs/server.md has the figures), while a lone request is a
batch of one, the same call.  ``--engine-option batched=false`` makes one call
per utterance.  Longer utterances go through faster-whisper's sequential
``transcribe``.  The choice is logged at load.

Decoding is deterministic for a given batch: temperature 0 with no fallback, no timestamps,
no conditioning on previous text, and the number of new tokens capped from
the audio's duration so a hallucination loop stops early.

Each window is encoded once: when a request names no language, the language
is detected from that same encoder output (as faster-whisper's own
``detect_language`` does with the output of its ``encode``), then decoded.
The log-Mel features are computed in ``prepare_sync``, on the CPU pool,
while the previous batch runs; when no batch is running, the whole call
goes to the model thread in one hop (:meth:`.ThreadedEngine.transcribe`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .base import (
    ENGINE_SAMPLE_RATE,
    EngineInfo,
    EngineOption,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
    max_new_tokens_for,
)
from .model_store import ensure_hub_model, hub_repository, resolve_ctranslate2_model
from .registry import EngineConfig

log = logging.getLogger(__name__)

WINDOW_SECONDS = 30.0
"""Whisper's encoder window; longer audio needs the sequential path."""


def ct2_max_length(prompt_len: int, max_new_tokens: int, model_max_length: int) -> int:
    """The ``max_length`` to ask of CTranslate2 for at most about ``max_new_tokens`` new tokens.

    CTranslate2 (4.8) stops Whisper decoding at about half of ``max_length``
    (measured on tiny.en: 20, 40, 60 gave 10, 20, 30 tokens), so the plain
    ``prompt + max_new_tokens`` that faster-whisper uses would cut real speech
    at half the duration cap.  Asking for twice the new tokens keeps the cap
    where :func:`max_new_tokens_for` puts it; a test pins this on the real model.
    """
    return min(model_max_length, prompt_len + 2 * max_new_tokens)


class FasterWhisperEngine(ThreadedEngine):
    """faster-whisper :class:`WhisperModel` behind the engine interface."""

    splits_batches = True  # features on the CPU pool while the model runs the previous batch

    OPTIONS: ClassVar[Mapping[str, EngineOption]] = {
        "batched": EngineOption(bool, True, "one encoder pass and one decode per scheduler batch (false: one call "
                                            "per utterance)"),
    }

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(workers=1)
        self._configure("faster-whisper", config, compute_type=config.compute_type)
        self._model: Any = None
        self._tokenizers: dict[str | None, Any] = {}
        self._batched = bool(self.options["batched"])

    def load(self) -> None:
        from faster_whisper import WhisperModel

        resolved = resolve_ctranslate2_model(self.config.model)
        repo = hub_repository("faster-whisper", resolved.path)  # None for a local folder (packaged ones too)
        if repo is not None:
            ensure_hub_model(repo, resolved.path)
        import ctranslate2

        level = ctranslate2.get_log_level()
        if self.config.compute_type == "default":
            # CTranslate2 warns when it converts saved float16 weights for a CPU: with "default" that
            # conversion is what was asked for, so it is no warning to print at every start.
            ctranslate2.set_log_level(logging.ERROR)
        try:
            self._model = WhisperModel(resolved.path, device=self.config.device, compute_type=self.config.compute_type,
                                       cpu_threads=self.config.cpu_threads, num_workers=1,
                                       local_files_only=Path(resolved.path).is_dir())
        finally:
            ctranslate2.set_log_level(level)
        device = str(self._model.model.device)
        self.info = EngineInfo(engine="faster-whisper", model_id=resolved.model_id, weights_sha256=resolved.sha256,
                               device=device, compute_type=self.config.compute_type,
                               extra={"multilingual": str(self.multilingual).lower(),
                                      "beam_size": str(self.config.beam_size),
                                      "batched_decoding": str(self._batched).lower()})
        log.info("loaded faster-whisper model", extra={"model": resolved.model_id, "path": resolved.path})
        how = ("batches: one encoder pass and one decode per scheduler batch (--engine-option batched=false: one "
               "utterance per call)" if self._batched else "one utterance per call (--engine-option batched=false)")
        log.info("faster-whisper on %s decodes %s", device, how,
                 extra={"batched_decoding": self._batched, "device": device})

    @property
    def prefers_batches(self) -> bool:
        return self._batched

    @property
    def multilingual(self) -> bool:
        return bool(self._model.model.is_multilingual)

    @property
    def languages(self) -> frozenset[str] | None:
        from faster_whisper.tokenizer import _LANGUAGE_CODES

        if self._model is None:
            return None
        return frozenset(_LANGUAGE_CODES) if self.multilingual else frozenset({"en"})

    def _tokenizer(self, language: str | None) -> Any:
        from faster_whisper.tokenizer import Tokenizer

        if language not in self._tokenizers:
            self._tokenizers[language] = Tokenizer(
                self._model.hf_tokenizer, self.multilingual, task="transcribe", language=language
            )
        return self._tokenizers[language]

    def _language_of(self, item: TranscriptionInput) -> str | None:
        return item.language if self.multilingual else "en"  # an English-only model has no language token to force

    def _groups(self, batch: Sequence[TranscriptionInput]) -> list[list[int]]:
        """Indices of the utterances that share one encoder call (one window each)."""
        short = [i for i, item in enumerate(batch) if item.duration_s <= WINDOW_SECONDS]
        return [short] if self._batched and short else [[i] for i in short]

    def prepare_sync(self, batch: Sequence[TranscriptionInput]) -> list[np.ndarray]:
        """The stacked log-Mel windows of each encoder call (CPU work, ahead of the model)."""
        if self._model is None:
            raise RuntimeError("the faster-whisper engine is not loaded")
        return [self._features([batch[i] for i in group]) for group in self._groups(batch)]

    def transcribe_prepared_sync(self, batch: Sequence[TranscriptionInput], prepared: Any) -> list[Transcription]:
        results = {i: self._transcribe_long(item) for i, item in enumerate(batch) if item.duration_s > WINDOW_SECONDS}
        for group, features in zip(self._groups(batch), prepared, strict=True):
            results.update(zip(group, self._transcribe_windows([batch[i] for i in group], features), strict=True))
        return [results[i] for i in range(len(batch))]

    def _transcribe_long(self, item: TranscriptionInput) -> Transcription:
        language = self._language_of(item)
        segments, info = self._model.transcribe(item.audio, language=language, beam_size=self.config.beam_size,
                                                temperature=0.0, condition_on_previous_text=False,
                                                without_timestamps=True, vad_filter=False)
        segments = list(segments)  # a generator: decoding runs as it is read
        return Transcription("".join(s.text for s in segments).strip(), info.language,
                             sum(len(s.tokens) for s in segments))

    def _features(self, items: Sequence[TranscriptionInput]) -> np.ndarray:
        from faster_whisper.audio import pad_or_trim

        extract = self._model.feature_extractor
        return np.stack([pad_or_trim(extract(item.audio)[..., :-1]) for item in items]).astype(np.float32)

    def _transcribe_windows(self, items: Sequence[TranscriptionInput], features: np.ndarray) -> list[Transcription]:
        import ctranslate2
        from faster_whisper.transcribe import get_suppressed_tokens

        model = self._model
        encoder_output = model.model.encode(ctranslate2.StorageView.from_array(features))

        languages = [self._language_of(item) for item in items]
        if unknown := [i for i, lang in enumerate(languages) if lang is None]:
            # CTranslate2's detector takes the encoder output too: one encoder pass serves both.
            # It runs one decoder step for every row; only the rows that named no language use it.
            detected = model.model.detect_language(encoder_output)
            for i in unknown:
                languages[i] = detected[i][0][0].strip("<|>")

        tokenizers = [self._tokenizer(lang) for lang in languages]
        prompts = [model.get_prompt(tok, previous_tokens=[], without_timestamps=True) for tok in tokenizers]
        max_new = max(max_new_tokens_for(item.duration_s) for item in items)
        max_length = ct2_max_length(max(len(p) for p in prompts), max_new, model.max_length)
        # sampling_topk stays 1: greedy (or beam) search, temperature 0
        results = model.model.generate(encoder_output, prompts, beam_size=self.config.beam_size, max_length=max_length,
                                       suppress_blank=True, suppress_tokens=get_suppressed_tokens(tokenizers[0], [-1]),
                                       return_scores=False)
        return [Transcription(tok.decode(result.sequences_ids[0]).strip(), lang, len(result.sequences_ids[0]))
                for tok, lang, result in zip(tokenizers, languages, results, strict=True)]

    def warmup(self) -> None:
        # Two passes: the first pays CTranslate2's lazy allocations, the second checks a batch of two.
        silence = TranscriptionInput(np.zeros(ENGINE_SAMPLE_RATE, dtype=np.float32))
        self.transcribe_batch_sync([silence])
        self.transcribe_batch_sync([silence, silence])
