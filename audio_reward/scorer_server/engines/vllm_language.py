"""Whisper's language chosen inside the transcription request: a vLLM logits processor.

Loaded by vLLM's engine process from the ``logits_processors`` engine argument
(``audio_reward.scorer_server.engines.vllm_language:WhisperLanguageFirst``);
it acts only on requests whose ``SamplingParams.extra_args`` carry
:data:`~.vllm_engine.LANGUAGE_FIRST_ARG`.  The rule itself is
:func:`~.vllm_engine.language_first` (no vLLM import, so the engine tests run it too).
"""

from __future__ import annotations

from typing import Any

from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from .vllm_engine import LANGUAGE_FIRST_ARG, language_first


class WhisperLanguageFirst(AdapterLogitsProcessor):
    """First step: only language tokens; then the forced task tokens; then free decoding."""

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding picks

    def new_req_logits_processor(self, params: Any) -> Any:
        spec = (params.extra_args or {}).get(LANGUAGE_FIRST_ARG)
        return language_first(spec["languages"], spec["then"]) if spec else None
